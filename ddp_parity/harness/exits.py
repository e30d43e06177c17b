"""Exit codes, the usage error, and signals that end the harness the way Ctrl-C does."""

from __future__ import annotations

import signal

EXIT_EQUIVALENT, EXIT_DIFFERENT, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3
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
