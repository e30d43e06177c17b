"""Evaluation, where the program runs it: the model's forwards under eval() or with gradients off
(torch.no_grad, inference_mode) between two optimizer steps, or between the micro-batches of one.
Each run of them is one evaluation, keyed by the step it follows (optimizer steps done) and the
micro-batches since (backwards run after that step), with one digest of every output it gave per module it ran
in (a part of the model called on its own between the model's forwards, a head applied outside the wrapper, keeps a
record of its own beside the model's, neither split by the other's forwards):
trace/rank{r}.evaluations.jsonl (docs/trace-format.md). A training forward, a backward or an optimizer
step between two evaluation forwards ends an evaluation; so does a forward in the other mode (a validation in eval
mode, then the next step's feature-caching pass in training mode). Each says whether a step's batch was waiting for its
backward as it started (`pending_batch_of`): forwards in training mode on it are that step's, not an evaluation.

Which forward: the model's innermost module that holds all its parameters, or all its trained ones (the GPT
inside a LightningModule inside DDP, beside an EMA held frozen), so that a loop calling DDP(model) and a port whose
validation_step calls self.model digest the outputs of the same module. A module outside it is never digested:
Lightning runs validation_step as the LightningModule's forward, whose output (often None) is no output of the
model, and would give one digest whatever the weights; one such forward seen before the first step, run without
the model (a sanity check testing the EMA alone), is dropped once the model is known. Global forward hooks find
it on every top call until it is seen in the model the steps train (at the first optimizer step, or at the first
training forward inside it where the step runs a closure, as under Lightning); from then on, one forward hook on it,
which for a training forward reads two flags and returns.

A copy of the trained model kept beside it (an EMA, as ConvNeXt's, DiT's and torchvision's loops keep) is
evaluated too, often on every rank: a module laid out as a trained module (the model or a part of it: parameter
names with a wrapper's prefix aside, shapes, dtypes) that holds none of the trained parameters, found among the
modules eval() was called on, the top calls before the first step and the recorded model's submodules outside its
trained cores; taken as a core is (the outermost copy's innermost part holding all its parameters). Its forwards
in eval mode are evaluations of `role` `copy`, compared with the other side's copies, never with the model's; in
training mode (a teacher or target encoder computing targets) they are the training's and not recorded.

An evaluation's digest syncs the device once per evaluation forward (its outputs are read to the host);
a training step costs nothing more.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import weakref
from types import SimpleNamespace

import torch
from torch.nn.modules import module as torch_module

from ddp_parity.fingerprints import StagedDigest, batch_contents, normalised_name
from ddp_parity.hooks.data import pending_batch_of
from ddp_parity.hooks.state import guarded, recording
from ddp_parity.module_hooks import ours
from ddp_parity.trace_files import EVALUATION_COPY, EVALUATION_MODEL, evaluations_path

_PARAM_COUNTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> its parameter tensors
_STACK: list[list] = []  # forwards before the first step: [module, holds all, a child holds all, top's counts]
MODEL, COPY = EVALUATION_MODEL, EVALUATION_COPY  # what an evaluation ran: the trained model, or a copy of it
SWITCHED_LIMIT = 256  # modules eval() was called on, kept to look at once the model is known


_STARTED = itertools.count()  # the order evaluations started in: those ended together are written in it


class Evaluation:
    """One evaluation in progress: its key, its forwards so far and their outputs' running digest."""

    def __init__(self, live, module: torch.nn.Module, role: str = MODEL):
        self.started = next(_STARTED)
        self.module = weakref.ref(module)
        self.module_name = type(module).__name__
        self.role = role
        self.step, self.micro_batch = live.steps, len(live.roots)
        self.epoch = live.epoch if live.epoch_given else live.loader_pass
        self.training = bool(module.training)
        self.grad_enabled = torch.is_grad_enabled()
        self.inference_mode = torch.is_inference_mode_enabled()
        self.grads_held = _grads_held(live)
        self.pending_batch_of = pending_batch_of(live)  # a step's batch fetched, its backward not run yet
        self.forwards = self.grad_forwards = 0
        self.digest = hashlib.sha256()
        self.undigested: list[str] = []

    @property
    def key(self) -> tuple:
        return self.step, self.micro_batch

    def add(self, output) -> None:
        digest, undigested = batch_contents(_plain(output))
        if isinstance(digest, StagedDigest):  # on an accelerator: once per evaluation forward, never per step
            torch.accelerator.synchronize()
            digest = digest.hexdigest()
        self.digest.update(digest.encode())
        self.forwards += 1
        self.grad_forwards += torch.is_grad_enabled()
        self.undigested += [u for u in undigested if u not in self.undigested][:8]

    def owned_by(self, owned: set[int]) -> bool:
        module = self.module()
        return module is not None and _owned_by(module, owned)

    def record(self) -> dict:
        out = {
            "step": self.step,
            "micro_batch": self.micro_batch,
            "epoch": self.epoch,
            "forwards": self.forwards,
            "output_digest": self.digest.hexdigest(),
            "module": self.module_name,
            "role": self.role,
            "training": self.training,
            "grad_enabled": self.grad_enabled,
            "inference_mode": self.inference_mode,
            "grads_held": self.grads_held,
            "pending_batch_of": self.pending_batch_of,
        }
        if self.undigested:
            out["undigested"] = self.undigested
        return out


def _plain(output):
    """An output with its namespaces' fields laid out (a SimpleNamespace of logits and loss, as some
    models return), so that they enter the digest as a dict's values do."""
    if isinstance(output, SimpleNamespace):
        return {key: _plain(value) for key, value in vars(output).items()}
    if isinstance(output, (list, tuple)) and not hasattr(output, "_fields"):
        return type(output)(_plain(v) for v in output) if type(output) in (list, tuple) else output
    if type(output) is dict:
        return {key: _plain(value) for key, value in output.items()}
    return output


def _grads_held(live) -> bool | None:
    """Whether a parameter of the optimizer that steps holds a gradient (not None) as the evaluation
    starts: after micro-batches, False means the program dropped what they accumulated (zero_grad)."""
    if live.optimizer is None:
        return None
    return any(p.grad is not None for group in live.optimizer.param_groups for p in group["params"])


# ---------------------------------------------------------------------------------------------
# finding the module: global hooks on every forward until its first training forward in a recording


def install() -> None:
    _GLOBAL_HOOKS.extend(
        [
            torch_module.register_module_forward_pre_hook(_entered),
            torch_module.register_module_forward_hook(_left, always_call=True),
        ]
    )


_GLOBAL_HOOKS: list = []


@guarded("evaluation hooks")
def _entered(module: torch.nn.Module, args) -> None:
    """A forward starts: is it the innermost so far holding all of its top call's parameters (or trainable ones)?"""
    if not _STACK:
        counts = _param_count(module), _trainable_count(module)
        _STACK.append([module, counts[0] > 0, False, counts])
        return
    parent = _STACK[-1]
    full = parent[1] and _holds_the_whole(module, parent[3])
    if full:
        parent[2] = True
    _STACK.append([module, full, False, parent[3]])


def _holds_the_whole(module: torch.nn.Module, top_counts: tuple[int, int]) -> bool:
    """A part with as many tensors as its top call's module is that module; so is one holding all its trainable ones
    where others are frozen (an EMA beside the model in a LightningModule): its output is the model's."""
    count, trainable = top_counts
    if _param_count(module) == count:
        return True
    return 0 < trainable < count and _trainable_count(module) == trainable  # counted only where some are frozen


def _trainable_count(module: torch.nn.Module) -> int:
    """Not cached: a program may freeze a part (requires_grad_(False)) after its first forward."""
    return sum(1 for p in module.parameters() if p.requires_grad)


@guarded("evaluation hooks")
def _left(module: torch.nn.Module, args, output) -> None:
    """A forward ends: the innermost module holding all its top call's parameters gave `output`."""
    while _STACK:
        frame = _STACK.pop()
        if frame[0] is module:
            break
    else:
        return
    live = recording()
    if live is None or not frame[1] or frame[2]:
        return
    _note_core(live, module)
    forward_done(live, module, output)
    if live.model is not None and (_owned_by(module, _ids(live.model)) or live.steps >= 2):
        settle(live)  # found in the model the steps train (or, by step 2, the model itself stands for it)


def _param_count(module: torch.nn.Module) -> int:
    count = _PARAM_COUNTS.get(module)
    if count is None:
        count = _PARAM_COUNTS[module] = sum(1 for _ in module.parameters())
    return count


@guarded("the evaluated module")
def _note_core(live, module) -> None:
    if not any(ref() is module for ref in live.eval_cores):
        live.eval_cores.append(weakref.ref(module))


@guarded("the evaluations before the first step")
def started(live) -> None:
    """The recording started (the first step, the model known): keep the evaluations of that model
    (not of another module with parameters), and settle on the module when one was seen (they are written
    then, once the copies of the model among them are known)."""
    owned = _ids(live.model) if live.model is not None else set()
    live.evaluations = [ev for ev in live.evaluations if ev.owned_by(owned)]
    live.evaluations_parked = [ev for ev in live.evaluations_parked if ev.owned_by(owned)]
    if live.evaluation is not None and not live.evaluation.owned_by(owned):
        live.evaluation = None
    if live.model is None or any(m is not None and _owned_by(m, owned) for m in (ref() for ref in live.eval_cores)):
        settle(live)  # without a model, nothing to look for: the global hooks go now


@guarded("evaluation hooks")
def settle(live) -> None:
    """Hook the module(s) evaluations run in the model (the model itself where none was seen), and
    remove the global hooks: from now on nothing runs on a forward of any other module."""
    for handle in _GLOBAL_HOOKS:
        handle.remove()
    _GLOBAL_HOOKS.clear()
    _STACK.clear()
    if live.model is None:
        live.copy_signatures = set()
        write(live)
        return
    owned = _ids(live.model)
    seen = [m for m in (ref() for ref in live.eval_cores) if m is not None]
    cores = [_innermost_holding_trainable(m) for m in [m for m in seen if _owned_by(m, owned)] or [live.model]]
    trained = _trained_ids(live)
    inside_trained_cores = {id(m) for core in cores if _holds_any(core, trained) for m in core.modules()}
    live.copy_signatures = {_signature(m) for m in live.model.modules() if _all_in(m, trained)} - {()}
    candidates = [
        *seen,
        *(ref() for ref in live.switched_to_eval),
        *(m for m in live.model.modules() if id(m) not in inside_trained_cores),  # an EMA a LightningModule holds
    ]
    copies = copies_of(live.copy_signatures, candidates, trained)
    live.eval_cores = [weakref.ref(m) for m in cores if not any(m is c for c in copies)] or [weakref.ref(live.model)]
    live.switched_to_eval = []

    def after_forward(module, args, output):
        if module.training and torch.is_grad_enabled():  # a training forward: two flags read
            if live.evaluation is not None:
                close(live, by_training=True)
            return
        forward_done(live, module, output)

    for ref in live.eval_cores:
        ref().register_forward_hook(ours(after_forward))
    for copy in copies:
        _hook_copy(live, copy)
    _relabel_copies(live, copies)
    _drop_holders_of(live, cores)
    write(live)


def _relabel_copies(live, copies: list[torch.nn.Module]) -> None:
    """The evaluations kept before the copies were known: a copy's in eval mode are the copy's; in training mode
    (a target encoder run before the step's training forward) they were the training's, not an evaluation."""

    def relabelled(ev):
        if ev is None or not any(ev.module() is c for c in copies):
            return ev
        if ev.training:
            return None
        ev.role = COPY
        return ev

    live.evaluations = [ev for ev in map(relabelled, live.evaluations) if ev is not None]
    live.evaluations_parked = [ev for ev in map(relabelled, live.evaluations_parked) if ev is not None]
    live.evaluation = relabelled(live.evaluation)


def _drop_holders_of(live, cores: list[torch.nn.Module]) -> None:
    """The evaluations kept before the cores were known, of a module holding one: its forward ran without the core
    (else the core's would have been taken), so gave no output of the model (a LightningModule's validation_step
    evaluating its EMA alone, as its forward, returning None): dropped, never compared."""

    def holds_a_core(ev) -> bool:
        module = ev.module() if ev is not None else None
        if module is None or any(module is c for c in cores):
            return False
        return any(part is core for part in module.modules() for core in cores)

    live.evaluations = [ev for ev in live.evaluations if not holds_a_core(ev)]
    live.evaluations_parked = [ev for ev in live.evaluations_parked if not holds_a_core(ev)]
    if holds_a_core(live.evaluation):
        live.evaluation = None


def _trained_ids(live) -> set[int]:
    """The parameters the optimizer that steps trains (the model's that require gradients, without one)."""
    if live.optimizer is not None:
        return {id(p) for group in live.optimizer.param_groups for p in group["params"]}
    return {id(p) for p in live.model.parameters() if p.requires_grad}


def _holds_any(module: torch.nn.Module, ids: set[int]) -> bool:
    return any(id(p) in ids for p in module.parameters())


def _all_in(module: torch.nn.Module, ids: set[int]) -> bool:
    params = [id(p) for p in module.parameters()]
    return bool(params) and all(p in ids for p in params)


def _signature(module: torch.nn.Module) -> tuple:
    """The layout of a module's parameters: names (AveragedModel's `module.` and torch.compile's `_orig_mod.`
    aside), shapes, dtypes."""
    return tuple(
        (normalised_name(name).removeprefix("module."), tuple(p.shape), p.dtype)
        for name, p in module.named_parameters()
    )


def copies_of(signatures: set, candidates, trained: set[int]) -> list[torch.nn.Module]:
    """The candidates laid out as a trained module is (the whole model, a part of it) that hold none of the trained
    parameters: copies of it (an EMA, a target encoder), each taken as a core is (the outermost copy, then its
    innermost part holding all of its parameters), so that a copy held whole or in parts is the same module."""
    counts = {len(s) for s in signatures}
    found: list[torch.nn.Module] = []
    for module in candidates:
        if module is None or any(module is c for c in found) or _param_count(module) not in counts:
            continue
        if not _holds_any(module, trained) and _signature(module) in signatures:
            found.append(module)
    outermost = [m for m in found if not any(o is not m and any(m is d for d in o.modules()) for o in found)]
    out: list[torch.nn.Module] = []
    for module in outermost:
        module = _innermost_holding_all(module)
        if not any(module is c for c in out):
            out.append(module)
    return out


def _innermost_holding_trainable(module: torch.nn.Module) -> torch.nn.Module:
    """The innermost part of `module` holding all its trainable parameters, where some are frozen: the model a
    LightningModule evaluates through (self.model), not the LightningModule, whose forward validation_step may be."""
    trainable = _trainable_count(module)
    if trainable == 0 or trainable == _param_count(module):
        return module
    return _innermost_with(module, _trainable_count)


def _innermost_holding_all(module: torch.nn.Module) -> torch.nn.Module:
    return _innermost_with(module, _param_count)


def _innermost_with(module: torch.nn.Module, count) -> torch.nn.Module:
    """The innermost part of `module` with as many parameters as it by `count` (all of them, or the trainable)."""
    whole = count(module)
    while (child := next((c for c in module.children() if count(c) == whole), None)) is not None:
        module = child
    return module


@guarded("a copy of the model")
def switched_to_eval(live, module: torch.nn.Module) -> None:
    """eval() was called on `module`: before the model is known, kept to look at then; after, hooked now
    where it is a copy of the trained model not hooked yet."""
    if live.copy_signatures is None:
        if len(live.switched_to_eval) < SWITCHED_LIMIT and not any(r() is module for r in live.switched_to_eval):
            live.switched_to_eval.append(weakref.ref(module))
        return
    if live.model is None or module in live.looked_at:
        return
    live.looked_at.add(module)
    for copy in copies_of(live.copy_signatures, [module], _trained_ids(live)):
        if not any(r() is copy for r in live.copies):
            _hook_copy(live, copy)


def _hook_copy(live, module: torch.nn.Module) -> None:
    live.copies.append(weakref.ref(module))

    def after_copy_forward(module, args, output):
        if not module.training:  # in training mode (a teacher's targets) it is the training's
            forward_done(live, module, output, role=COPY)

    module.register_forward_hook(ours(after_copy_forward))


def _ids(module: torch.nn.Module) -> set[int]:
    return {id(p) for p in module.parameters()}


def _owned_by(module: torch.nn.Module, owned: set[int]) -> bool:
    first = next(iter(module.parameters()), None)
    return first is not None and id(first) in owned


@guarded("evaluation outputs")
def forward_done(live, module: torch.nn.Module, output, role: str = MODEL) -> None:
    """An innermost full module's forward returned: an evaluation forward adds its output to the
    evaluation in progress (a new one where the step or micro-batch moved on); a training one ends it."""
    if getattr(live.local, "ours", False):
        return
    if module.training and torch.is_grad_enabled():
        if live.evaluation is not None:
            close(live, by_training=True)
        return
    ev = live.evaluation
    if ev is not None and (ev.key != (live.steps, len(live.roots)) or _mode_changed(ev, module)):
        close(live)
        ev = None
    if ev is not None and (ev.module() is not module or ev.role != role):
        ev = _switched(live, module, role)
    if ev is None:
        ev = live.evaluation = Evaluation(live, module, role)
    ev.add(output)


def _switched(live, module: torch.nn.Module, role: str):
    """Another module's forward at the same point and mode (a head called on its own between the model's forwards,
    an EMA beside the model): the evaluation in progress is parked, not ended, and the module's own resumed where it
    has one, so that one evaluation's forwards of each module are one record, whatever runs between them."""
    live.evaluations_parked.append(live.evaluation)
    found = next((p for p in live.evaluations_parked if p.module() is module and p.role == role), None)
    if found is not None:
        live.evaluations_parked.remove(found)
    live.evaluation = found
    return found


def _mode_changed(ev: Evaluation, module: torch.nn.Module) -> bool:
    """A forward in another mode than the evaluation's first: other work (a validation in eval mode, then the next
    step's feature-caching pass in training mode with no training forward between), recorded apart."""
    return ev.training != bool(module.training)


@guarded("evaluation records")
def close(live, by_training: bool = False) -> None:
    """The evaluation in progress is over: kept for the trace (written now when the recording has
    started). Forwards in eval() mode with gradients on that a backward followed (no training forward
    between) were training in eval mode, not an evaluation: counted in the rank's facts, not kept."""
    ending = [ev for ev in (live.evaluation, *live.evaluations_parked) if ev is not None]
    live.evaluation, live.evaluations_parked = None, []
    kept = False
    for ev in sorted(ending, key=lambda ev: ev.started):  # those of one point in the order they started
        if ev.forwards == 0:
            continue
        moved = (live.steps, len(live.roots)) != ev.key
        if not by_training and moved and ev.grad_forwards == ev.forwards:
            live.facts["eval_mode_training_forwards"] = live.facts.get("eval_mode_training_forwards", 0) + ev.forwards
            continue
        live.evaluations.append(ev)
        kept = True
    if kept and live.recorder is not None and live.copy_signatures is not None:  # settled: the copies are known
        write(live)


@guarded("evaluation records")
def write(live) -> None:
    """Append the evaluations kept so far to this rank's file (the first write starts it anew)."""
    if not live.evaluations or live.recorder is None:
        return
    path = evaluations_path(live.run_dir, live.recorder.rank)
    mode = "a" if live.facts.get("_evaluations_started") else "w"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode) as f:
        for ev in live.evaluations:
            f.write(json.dumps(ev.record()) + "\n")
    live.facts["_evaluations_started"] = True
    live.facts["evaluations"] = live.facts.get("evaluations", 0) + len(live.evaluations)
    live.evaluations = []
