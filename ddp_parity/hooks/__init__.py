"""Recording with no line changed: what `ddp-parity record` puts in every process it starts.

The launcher (`ddp-parity record`, `compare/run.py --cmd`) sets `RECORD_ENV` to the run directory and
puts `BOOTSTRAP_DIR` first on PYTHONPATH. Every Python process of the command, torchrun's children and
Lightning's launcher's included, then imports the bootstrap's `sitecustomize`, which calls `install()`:
the hooks observe torch's own API (the optimizer steps, backward, clip_grad_norm_, the DataLoader, ...)
and hand the facts to one `TraceRecorder`, the one writer of the trace format.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ddp_parity.hooks.after_import import AfterImport

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
    """Install the hooks in this process when `RECORD_ENV` asks for it; never raises into the program.

    Torch is not imported here: a program may set OMP_NUM_THREADS (read when torch loads its
    threading library) before it imports torch, and its threads would differ if we imported it first.
    The hooks go in right after the program's own `import torch` completes, before any of its lines
    can have built an optimizer or a loader, and before it can bind a name we wrap."""
    run_dir = os.environ.get(RECORD_ENV)
    if not run_dir:
        return
    side = os.environ.get(SIDE_ENV) or Path(run_dir).name
    if "torch" in sys.modules:
        _install_hooks(run_dir, side)
    else:
        sys.meta_path.insert(0, AfterImport("torch", lambda _torch: _install_hooks(run_dir, side)))


def _install_hooks(run_dir: str, side: str) -> None:
    try:
        from ddp_parity.hooks import lifecycle  # imports torch: only once the program has

        lifecycle.install_hooks(run_dir, side)
    except Exception as exc:
        print(f"ddp-parity record: hooks not installed, the program runs unrecorded: {exc!r}", file=sys.stderr)
