"""Run directories: where a run writes, chosen the same way on every rank without talking."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from ddp_parity.trace_files import META_FILE

RUN_DIR_ENV = "DDP_PARITY_RUN_DIR"


class RunDirError(ValueError):
    """A run directory that cannot be used; the message says why and what to do."""


def resolve_run_dir(explicit: str | None, side: str) -> Path:
    """The run directory every rank of one job agrees on.

    An explicit path wins. Otherwise a launcher parent may have exported one (Lightning's own
    launcher re-runs the command with our environment). Under torchrun the workers of one agent
    share its pid and TORCHELASTIC_RUN_ID, which also survive a restart, so a restarted job
    writes to the same folder. A plain process takes a fresh time-stamped folder.
    """
    if explicit:
        return Path(explicit)
    if os.environ.get(RUN_DIR_ENV):
        return Path(os.environ[RUN_DIR_ENV])
    if "TORCHELASTIC_RUN_ID" in os.environ:
        run_id = os.environ["TORCHELASTIC_RUN_ID"]
        key = run_id if run_id not in ("", "none") else f"agent{os.getppid()}"
        return Path("runs") / f"{side}-{key}"
    return Path("runs") / f"{side}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


def check_fresh_run_dir(run_dir: Path, resuming: bool) -> None:
    """Refuse to write a new run over a finished or started one (nothing written is ever lost)."""
    if not resuming and (run_dir / META_FILE).exists():
        raise RunDirError(f"run directory {run_dir} already holds a run; choose another --run_dir or resume it")


def write_error_file(
    run_dir: Path, exc: BaseException, *, rank: int | None = None, step: int | None = None, phase: str | None = None
) -> Path | None:
    """Record why this rank died, for the harness (it reads files, not logs). Never raises.

    The file is `errors/rank{GLOBAL_RANK}.json` under every launcher (see `global_rank`; pass `rank`
    when you know it better). The first error of a rank is kept: linked into place only if absent, so the
    follow-on error of a collective that a peer's death broke (or the same exception seen again by
    an outer handler) never overwrites it. `step` is the last step this rank recorded and `phase`
    what it was doing. Returns the file written, or None when one was already there.
    """
    import json
    import traceback

    from ddp_parity.distributed import global_rank

    try:
        rank = global_rank() if rank is None else int(rank)
        folder = Path(run_dir) / "errors"
        folder.mkdir(parents=True, exist_ok=True)
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        payload = {
            "rank": rank,
            "time": time.time(),
            "type": type(exc).__name__,
            "message": str(exc).strip().splitlines()[0][:500] if str(exc).strip() else "",
            "traceback": "".join(lines[-6:])[-3000:],
            "step": step,
            "phase": phase,
        }
        path = folder / f"rank{rank}.json"
        return path if _create_whole(path, (json.dumps(payload, indent=2) + "\n").encode()) else None
    except Exception:
        return None


def _create_whole(path: Path, data: bytes) -> bool:
    """Create `path` holding `data`, atomically and only if it does not exist (False if it does):
    written beside it first, then linked into place, so a full disk leaves no empty or partial file
    and no temporary one."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        return _link_if_absent(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _link_if_absent(tmp: Path, path: Path) -> bool:
    try:
        os.link(tmp, path)  # fails if a first error is already there: it is kept
        return True
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: a rename, unless a first error is there
        if path.exists():
            return False
        os.replace(tmp, path)
        return True


def append_whole(fd: int, data: bytes) -> None:
    """Append whole lines to a file opened with O_APPEND, in one write call (appends are not
    interleaved, a kill never cuts a line in half except mid-call; a short write is continued). On a
    failed write (a full disk) the file is cut back to where it was: no half line is left for a reader
    to stop at."""
    end = os.lseek(fd, 0, os.SEEK_END)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except OSError:
        try:
            os.ftruncate(fd, end)
        except OSError:
            pass  # not a regular file (a device): nothing to cut back
        raise
