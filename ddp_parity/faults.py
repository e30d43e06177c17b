"""Fault injection for tests and demos: crash one rank at one step, once.

Set DDP_PARITY_FAULT="RANK:STEP[:KIND]" (KIND: kill (SIGKILL, the default), raise, or checkpoint:
die while the checkpoint after STEP is being written) and DDP_PARITY_FAULT_MARKER=PATH. The marker
file is created just before the crash, so after torchrun restarts the workers the fault does not
fire again. Without the variables every call is a no-op.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

FAULT_ENV = "DDP_PARITY_FAULT"
MARKER_ENV = "DDP_PARITY_FAULT_MARKER"
KINDS = ("kill", "raise", "checkpoint")


class InjectedFault(RuntimeError):
    """The exception a `raise` fault throws."""


def parse_fault(spec: str) -> tuple[int, int, str]:
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not all(p.strip().isdigit() for p in parts[:2]):
        raise ValueError(f"fault {spec!r} must be RANK:STEP or RANK:STEP:KIND")
    kind = parts[2] if len(parts) == 3 else "kill"
    if kind not in KINDS:
        raise ValueError(f"fault kind {kind!r} must be one of {', '.join(KINDS)}")
    return int(parts[0]), int(parts[1]), kind


def maybe_inject_fault(step: int, phase: str) -> None:
    """Call after optimizer step `step` (phase "step") and while writing its checkpoint
    (phase "checkpoint-write")."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    rank, at_step, kind = parse_fault(spec)
    wanted_phase = "checkpoint-write" if kind == "checkpoint" else "step"
    if step != at_step or phase != wanted_phase or int(os.environ.get("RANK", "0")) != rank:
        return
    marker = Path(os.environ.get(MARKER_ENV, ".ddp_parity_fault_fired"))
    if marker.exists():
        return
    marker.write_text(f"{spec}\n")
    if kind == "raise":
        raise InjectedFault(f"injected fault: rank {rank} raises after step {step}")
    os.kill(os.getpid(), signal.SIGKILL)
