"""The one recording of a process: what the hooks saw since the last optimizer step, the facts they
keep for the end, and the guard every hook body runs under.

A hook only observes: it reads what torch hands it and appends it here. Whatever it cannot take is
said once in `unrecorded` ({what, why, count}) and the program runs on as it would without it.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import deque
from pathlib import Path
from typing import Any

FACT_LIMIT = 1000  # entries kept per list of facts (seeds, mode switches, ...): a long run's facts stay small


class Recording:
    """This process's recording: one per process, made by `lifecycle.install_hooks`."""

    def __init__(self, run_dir: Path, side: str):
        self.run_dir = Path(run_dir)
        self.side = side
        self.recorder = None  # the TraceRecorder, from the first optimizer step on
        self.pid: int | None = None  # the process that started the recorder
        self.standing_down = False  # the program records itself (TraceRecorder/TraceCallback): hooks write nothing
        self.optimizer = None  # the optimizer whose step() calls are the trace's steps (the first that steps)
        self.model = None  # the module owning that optimizer's parameters (unwrapped)
        self.steps = 0  # optimizer.step() calls completed
        self.local = threading.local()  # per-thread reentrancy flags (backward inside backward, our own calls)
        # candidates for the model: modules given to DDP, and modules called at the top before step 1
        self.wrapped_modules: list[weakref.ref] = []
        self.root_modules: list[weakref.ref] = []
        self.watch = None  # the module watch of the first DDP-wrapped model, handed to the recorder at its start
        self.last_iterator: weakref.ref | None = None  # the DataLoader iterator that yielded last
        self.epoch = 0  # the latest set_epoch value
        self.epoch_given = False  # set_epoch was called: its value is the epoch, else the loader's pass
        self.passes: dict[int, list] = {}  # per training dataset: [its iterator trained from last (weak), pass]
        self.loader_pass = 0  # the pass over the training DataLoader the latest batch came from, from 0
        self.facts: dict[str, Any] = {}  # per-rank facts for trace/rank{r}.hooks.json
        self.unrecorded: dict[str, dict] = {}
        self.evaluation = None  # the evaluation in progress (hooks/evaluation.py)
        self.evaluations_parked: list = []  # other modules' evaluations in progress at the same point
        self.evaluations: list = []  # evaluations ended, not yet written (before the first step: all of them)
        self.eval_cores: list[weakref.ref] = []  # the modules evaluations and training forwards ran in
        self.switched_to_eval: list[weakref.ref] = []  # modules eval() was called on (an EMA's copy is)
        self.copy_signatures: set | None = None  # the trained cores' parameter layouts, once settled
        self.copies: list[weakref.ref] = []  # copies of the trained model whose eval-mode forwards are evaluations
        self.looked_at: weakref.WeakSet = weakref.WeakSet()  # modules eval() was called on after settling, looked at
        self.new_step()

    def new_step(self) -> None:
        """Forget what the previous step saw: the moments of the next one start now."""
        self.roots: list = []  # backward roots (detached), in order
        self.root_divisors: list[list[float]] = []  # per backward root: its divisions by a constant, outermost first
        self.grad_sync: list[bool] = []  # per backward: whether DDP would all-reduce its gradients
        self.batches: list = []  # the batches the backward roots consumed, in order
        self.forward_inputs: list = []  # the model's training forwards' inputs (a loop without a DataLoader)
        self.forward_callers: list[int] = []  # before step 1: id() of the module each of those inputs went to
        self.indices: list[list[int]] | None = []  # their sampler indices (None: one had none)
        self.clip: dict | None = None  # the first clip_grad_norm_ of the step
        self.clip_calls = 0
        self.clip_value: dict | None = None
        self.update: dict | None = None  # what the optimizer saw: lr, param groups, gradient norm
        self.grad_norms: dict | None = None  # {id(grad): (grad, its version, its 2-norm)} as the optimizer saw them
        self.scheduler_steps = 0  # scheduler.step() calls since the previous optimizer step
        self.rng = None  # the generators' digests at the step's start (hooks/rng.py)
        self.collectives: list[dict] = []  # the program's own collectives since the previous step (collectives.py)
        self.collectives_count = 0

    def live_copies(self) -> list:
        """The copies of the trained model found (hooks/evaluation.py) that are still alive, in the order found."""
        return [copy for copy in (ref() for ref in self.copies) if copy is not None]

    @property
    def active(self) -> bool:
        return not self.standing_down

    def could_not(self, what: str, exc: BaseException) -> None:
        """Say once what a hook could not take (and how often); the recorder's meta.json gets it too."""
        entry = self.unrecorded.get(what)
        if entry is None:
            entry = self.unrecorded[what] = {"what": what, "why": f"{exc!r:.300}", "count": 0}
            if self.recorder is not None:
                self.recorder.note_unrecorded(what, entry["why"])
        entry["count"] += 1

    def note(self, kind: str, fact: dict) -> dict | None:
        """Append a fact to the list `kind` (at most FACT_LIMIT kept; the count goes on): the entry kept, which a
        hook may go on filling in (a DataLoader iterator's indices as it yields), else None."""
        facts = self.facts.setdefault(kind, {"count": 0, "items": []})
        facts["count"] += 1
        self.noted = getattr(self, "noted", 0) + 1  # one order across every kind: a seed before or after a draw
        if len(facts["items"]) >= FACT_LIMIT:
            return None
        facts["items"].append({"before_step": self.steps + 1, "order": self.noted, **fact})
        return facts["items"][-1]


current: Recording | None = None  # this process's recording, when the environment asked for one


def recording() -> Recording | None:
    """The recording hooks should feed now: None when there is none or it stands down."""
    live = current
    return live if live is not None and live.active else None


def guarded(what: str):
    """A hook body that never raises into the program: a failure is `unrecorded` under `what`."""

    def decorate(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if current is not None:
                    try:
                        current.could_not(what, exc)
                    except Exception:
                        pass
                return None

        return run

    return decorate


def bounded_fifo() -> deque:
    return deque(maxlen=16)  # a loader's yielded batches not yet consumed by a backward (an evaluation's too)
