"""Recording with no line changed: what `ddp-parity record` puts in every process it starts.

The launcher (`ddp-parity record`, `compare/run.py --cmd`) sets `RECORD_ENV` to the run directory and
puts `BOOTSTRAP_DIR` first on PYTHONPATH. Every Python process of the command, torchrun's children and
Lightning's launcher's included, then imports the bootstrap's `sitecustomize`, which calls `install()`:
the hooks observe torch's own API (the optimizer steps, backward, clip_grad_norm_, the DataLoader, ...)
and hand the facts to one `TraceRecorder`, the one writer of the trace format.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

BOOTSTRAP_DIR = Path(__file__).resolve().parent / "bootstrap"
RECORD_ENV = "DDP_PARITY_RECORD_OUT"  # the run directory every process of the command records into
SIDE_ENV = "DDP_PARITY_RECORD_SIDE"  # the side's name in meta.json (default: the run directory's name)


def recording_env(run_dir: Path, side: str, base_env: Mapping[str, str]) -> dict[str, str]:
    """`base_env` with the recording switched on: the bootstrap first on PYTHONPATH, the run dir and side set."""
    env = dict(base_env)
    paths = [str(BOOTSTRAP_DIR)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[RECORD_ENV] = str(Path(run_dir).resolve())
    env[SIDE_ENV] = side
    return env


def install() -> None:
    """Install the hooks in this process when `RECORD_ENV` asks for it; never raises into the program."""
    if not os.environ.get(RECORD_ENV):
        return
