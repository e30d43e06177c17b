"""Each scheduler.step(), where it runs: how many ran between two optimizer steps and after which
one. The step a scheduler's constructor takes itself is not the program's, and a scheduler stepped
by another (SequentialLR, ChainedScheduler) is counted once, as the outer call."""

from __future__ import annotations

import functools

from torch.optim import lr_scheduler

from ddp_parity.hooks.state import guarded, recording

WRAPPED = "_ddp_parity_wrapped"


def install() -> None:
    base = lr_scheduler.LRScheduler
    original_init = base.__init__

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        _wrap_step_of(type(self))
        live = recording()
        depth = _depth(live)
        if live is not None:
            live.local.scheduler_depth = depth + 1  # the constructor's own step() is not the program's
        try:
            original_init(self, *args, **kwargs)
        finally:
            if live is not None:
                live.local.scheduler_depth = depth
        _note_built(self)

    base.__init__ = __init__
    _wrap_step_of(base)
    if hasattr(lr_scheduler, "ReduceLROnPlateau"):
        _wrap_step_of(lr_scheduler.ReduceLROnPlateau)


def _depth(live) -> int:
    return getattr(live.local, "scheduler_depth", 0) if live is not None else 0


@guarded("scheduler classes")
def _wrap_step_of(cls) -> None:
    """Wrap `step` where `cls` (or the class it inherits it from) defines it, once."""
    for owner in cls.__mro__:
        step = owner.__dict__.get("step")
        if step is not None:
            if not getattr(step, WRAPPED, False):
                owner.step = _counted(step)
            return


def _counted(original):
    @functools.wraps(original)
    def step(self, *args, **kwargs):
        live = recording()
        depth = _depth(live)
        if live is None:
            return original(self, *args, **kwargs)
        if depth == 0:
            _note_step(self)
        live.local.scheduler_depth = depth + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            live.local.scheduler_depth = depth

    setattr(step, WRAPPED, True)
    return step


@guarded("scheduler steps")
def _note_step(scheduler) -> None:
    live = recording()
    if live is None:
        return
    live.scheduler_steps += 1
    runs = live.facts.setdefault("scheduler_steps", {})
    name = type(scheduler).__name__
    entry = runs.setdefault(name, {"count": 0, "after_step": []})
    entry["count"] += 1
    if len(entry["after_step"]) < 1000:
        entry["after_step"].append(live.steps)  # optimizer steps done when it ran (0: before the first)


@guarded("schedulers as built")
def _note_built(scheduler) -> None:
    live = recording()
    if live is None or _depth(live) > 0:
        return
    settings = {
        k: v for k, v in vars(scheduler).items() if isinstance(v, (bool, int, float, str)) and not k.startswith("_")
    }
    live.note("schedulers", {"class": type(scheduler).__name__, **settings})
