"""Run directories: where a run writes, chosen the same way on every rank without talking."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ddp_parity.trace import META_FILE

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


def write_error_file(run_dir: Path, exc: BaseException) -> None:
    """Record why this rank died, for the harness (it reads files, not logs). Never raises."""
    import json
    import traceback

    try:
        rank = int(os.environ.get("RANK", "0"))
        folder = Path(run_dir) / "errors"
        folder.mkdir(parents=True, exist_ok=True)
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        payload = {
            "rank": rank,
            "time": time.time(),
            "type": type(exc).__name__,
            "message": str(exc).strip().splitlines()[0][:500] if str(exc).strip() else "",
            "traceback": "".join(lines[-6:])[-3000:],
        }
        (folder / f"rank{rank}.json").write_text(json.dumps(payload, indent=2) + "\n")
    except Exception:
        pass
