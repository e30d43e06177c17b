"""Exit codes, the usage error, the tool's own failure, and signals that end the harness the way
Ctrl-C does."""

from __future__ import annotations

import os
import signal
import tempfile
import time
import traceback

# 0 and 1 are verdicts; 2 refuses the input before anything is written; 3 a launched run failed;
# 4 the tool itself failed (a bug, or an output it could not write): never a verdict
EXIT_EQUIVALENT, EXIT_DIFFERENT, EXIT_USAGE, EXIT_FAILED, EXIT_TOOL_FAILED = 0, 1, 2, 3, 4
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class UsageError(ValueError):
    """Bad command-line input; the message names the option."""


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP: stop every process started, say so, exit 128 + the signal number."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum)


def _raise_interrupted(signum, frame) -> None:
    raise Interrupted(signum)


def stop_on_signals() -> dict:
    """SIGTERM (timeout, CI runners, kill, schedulers) and SIGHUP (a closed terminal) do what Ctrl-C does:
    the exception unwinds through the launcher, which kills every process tree it started. Returns
    the handlers it replaced (for restore_signals)."""
    return {signum: signal.signal(signum, _raise_interrupted) for signum in STOP_SIGNALS}


def restore_signals(previous: dict) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def system_failure_line(err: OSError) -> str:
    """What the machine refused the tool (an output on a full disk, a file-size limit, a folder gone
    read-only): the inputs' own errors are named as damaged input before this."""
    where = f"{err.filename}: " if err.filename else ""
    return f"failed (exit {EXIT_TOOL_FAILED}): {where}{err.strerror or err}; no verdict (the runs were not judged)"


def write_traceback(err: BaseException) -> str:
    """The traceback of a failure of the tool itself, written to a file of its own in the temporary
    folder (the output folder may be what failed). Returns its path, or why it could not be written."""
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    try:
        fd, path = tempfile.mkstemp(prefix=f"ddp-parity-failure-{time.strftime('%Y%m%d-%H%M%S')}-", suffix=".txt")
        with os.fdopen(fd, "w", errors="backslashreplace") as f:
            f.write(text)
        return path
    except OSError as write_err:
        return f"(not written: {write_err.strerror})"


def internal_failure_line(err: BaseException) -> str:
    """One line for an unexpected exception inside the tool: its code, what it was, where the traceback is."""
    what = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}".rstrip(": ")
    return (
        f"internal failure (exit {EXIT_TOOL_FAILED}): {what}; no verdict; the traceback is in "
        f"{write_traceback(err)} (a bug of ddp-parity: please report it with that file)"
    )
