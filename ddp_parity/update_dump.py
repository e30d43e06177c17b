"""What one optimizer step consumed, kept for a replay of the update (issue 46, item 5).

    DDP_PARITY_DUMP_UPDATE=3 torchrun ... your_loop.py        # every rank writes trace/rank{r}.update3.pt

Where the recorder starts with DDP_PARITY_DUMP_UPDATE=N in the environment, torch's global optimizer
step hooks catch the N-th `step()` of the first optimizer that steps: before it, the parameters and the
optimizer's state_dict (its state and each group's hyperparameters, the lr among them); after it, the
gradients as the step saw them (under a closure, Lightning's, backward runs inside the step) and the
parameters it produced. `ddp_parity.compare.replay` re-applies each side's step offline with one
ingredient swapped. The hooks only read, on copies: the training is unchanged, and they are removed
once the step is written. A step that cannot be taken (a sharded tensor, a disk that refuses) is noted
as unrecorded; training goes on.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

DUMP_ENV = "DDP_PARITY_DUMP_UPDATE"


def dump_path(run_dir, rank: int, step: int) -> Path:
    return Path(run_dir) / "trace" / f"rank{rank}.update{step}.pt"


class UpdateDump:
    """The global step hooks of one recorder: count the first optimizer's steps, take the N-th."""

    def __init__(self, run_dir, rank: int, step: int, note_unrecorded):
        self.path, self.step, self.note = dump_path(run_dir, rank, step), step, note_unrecorded
        self.optimizer, self.count, self.before = None, 0, None
        self.handles = [register_optimizer_step_pre_hook(self._pre), register_optimizer_step_post_hook(self._post)]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def _params(self, optimizer) -> list:
        return [p for group in optimizer.param_groups for p in group["params"]]

    def _pre(self, optimizer, args, kwargs) -> None:
        self.optimizer = self.optimizer or optimizer
        if optimizer is not self.optimizer:
            return
        self.count += 1
        if self.count == self.step:
            try:
                self.before = {
                    "params_before": [p.detach().cpu().clone() for p in self._params(optimizer)],
                    "state": copy.deepcopy(optimizer.state_dict()),
                }
            except Exception as exc:  # a tensor that cannot be copied whole: said, never raised
                self._could_not(exc)

    def _post(self, optimizer, args, kwargs) -> None:
        if optimizer is not self.optimizer or self.before is None:
            return
        params = self._params(optimizer)
        try:
            taken = {
                "class": type(optimizer).__name__,
                "group_sizes": [len(group["params"]) for group in optimizer.param_groups],
                "grads": [None if p.grad is None else p.grad.detach().cpu().clone() for p in params],
                "params_after": [p.detach().cpu().clone() for p in params],
                **self.before,
            }
            self.path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(taken, self.path)
        except Exception as exc:
            self._could_not(exc)
        self.before = None
        self.remove()

    def _could_not(self, exc: Exception) -> None:
        self.before = None
        self.remove()
        self.note(f"the update of step {self.step} ({DUMP_ENV})", f"{type(exc).__name__}: {exc}")


def install(run_dir, rank: int, note_unrecorded) -> UpdateDump | None:
    """The dump DDP_PARITY_DUMP_UPDATE asks for, or None; a value that is no step number is noted."""
    value = os.environ.get(DUMP_ENV)
    if not value:
        return None
    try:
        step = int(value)
    except ValueError:
        step = 0
    if step < 1:
        note_unrecorded(f"the update ({DUMP_ENV}={value!r})", "expected an optimizer step number >= 1")
        return None
    return UpdateDump(run_dir, rank, step, note_unrecorded)
