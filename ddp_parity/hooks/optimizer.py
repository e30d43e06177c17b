"""The optimizer, where torch runs it: as constructed (class, param groups, hyperparameters), and
each step through torch's global step hooks. The step is the count of `optimizer.step()` calls,
from 1 (a step GradScaler skips is not taken, so not counted).

Two moments per step. What the optimizer sees — each param group's lr and hyperparameters and the
gradients' total norm — is taken right before the update: in the step pre-hook, or, when the step
is given a closure (Lightning's `optimizer.step(closure)`: forward, backward and clipping run inside
the step), right after the closure returns. What the step left — the parameter digest and each
layer's sketch — is taken in the post-hook, before a scheduler or zero_grad() runs.

An optimizer stepped inside another's step (ZeroRedundancyOptimizer steps its shard's AdamW inside its own step,
a Lookahead or SWA wrapper its inner optimizer) is part of that step: the outermost step is the one counted, and
what the step gathered (loss, batches, clipping, rng) stays with it; the inner steps are counted by class only
(`nested_optimizer_steps`).
"""

from __future__ import annotations

import functools
import hashlib
import math
import sys

import torch
from torch.optim import optimizer as torch_optimizer

from ddp_parity.fingerprints import copies_digest, optimizer_facts, param_digest
from ddp_parity.hooks import rng
from ddp_parity.hooks.state import FACT_LIMIT, guarded, recording
from ddp_parity.record_values import note_parameter_sets, number_or_none
from ddp_parity.sharding import total_grad_norm_parts

STARTERS: list = []  # lifecycle's start(live, optimizer): called at the first step of a recording


def install(start) -> None:
    STARTERS.append(start)
    original_init = torch_optimizer.Optimizer.__init__

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        _note_built(self)

    torch_optimizer.Optimizer.__init__ = __init__
    torch_optimizer.register_optimizer_step_pre_hook(_pre_step)
    torch_optimizer.register_optimizer_step_post_hook(_post_step)


@guarded("the optimizer as constructed")
def _note_built(optimizer) -> None:
    live = recording()
    if live is None:
        return
    facts = optimizer_facts(optimizer)  # parameters by position and shape; named at the start
    ids = [[id(p) for p in group["params"]] for group in optimizer.param_groups]
    live.facts.setdefault("_built", []).append((optimizer, ids, facts))


def built_facts(live, names: dict[int, str]) -> list[dict]:
    """Every optimizer as constructed, its parameters named where the model names them."""
    out = []
    for optimizer, ids, facts in live.facts.get("_built", []):
        groups = [
            {**group, "params": [names.get(i, shown) for i, shown in zip(group_ids, group["params"])]}
            for group_ids, group in zip(ids, facts["param_groups"])
        ]
        out.append({**facts, "param_groups": groups, "named": bool(names), "stepped": optimizer is live.optimizer})
    return out


def _pre_step(optimizer, args, kwargs):
    live = recording()
    if live is None:
        return None
    if _enter(live, optimizer, sys._getframe(1)):
        _note_nested_step(live, optimizer)
        return None
    if live.optimizer is None:
        _first_step(live, optimizer)
        if live.standing_down:
            return None
    if optimizer is not live.optimizer:
        _note_other_step(live, optimizer)
        return None
    return _before_update(live, optimizer, args, kwargs)


@guarded("the optimizer steps in progress")
def _enter(live, optimizer, frame) -> bool:
    """Note a step starting (its frame: torch's step wrapper, which calls the hooks); True when it starts inside
    another optimizer's step still running. A step that raised never ran its post-hook: one is in progress only while
    its frame is among those that called this one."""
    running = set()
    caller = frame
    while caller is not None:
        running.add(id(caller))
        caller = caller.f_back
    stack = [(o, f) for o, f in getattr(live.local, "stepping", ()) if id(f) in running]
    inside = bool(stack)
    stack.append((optimizer, frame))
    live.local.stepping = stack
    return inside


@guarded("the optimizer steps in progress")
def _leave(live, optimizer) -> bool:
    """Note a step ended; True when it ran inside another optimizer's step (see _enter)."""
    stack = getattr(live.local, "stepping", None) or []
    at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] is optimizer), None)
    if at is None:
        return False
    live.local.stepping = stack[:at]
    return at > 0


@guarded("another optimizer's steps")
def _note_nested_step(live, optimizer) -> None:
    """An optimizer stepped inside another's step (ZeroRedundancyOptimizer's shard's optimizer): counted by class."""
    nested = live.facts.setdefault("nested_optimizer_steps", {})
    name = type(optimizer).__name__
    nested[name] = nested.get(name, 0) + 1


@guarded("the start of the recording")
def _first_step(live, optimizer) -> None:
    live.optimizer = optimizer
    for start in STARTERS:
        start(live, optimizer)


@guarded("another optimizer's steps")
def _note_other_step(live, optimizer) -> None:
    """A step of an optimizer other than the one whose steps are counted (a GAN's generator's, after the
    discriminator's): counted by class, and by the optimizer as built with the steps of the counted one done
    at each of its steps (`other_optimizers`, keyed by its place among the optimizers built)."""
    others = live.facts.setdefault("other_optimizer_steps", {})
    name = type(optimizer).__name__
    others[name] = others.get(name, 0) + 1
    built = live.facts.get("_built", [])
    place = next((i for i, (o, _, _) in enumerate(built) if o is optimizer), None)
    entry = live.facts.setdefault("other_optimizers", {}).setdefault(
        str(place), {"class": name, "built": place, "steps": 0, "after_steps": []}
    )
    entry["steps"] += 1
    if len(entry["after_steps"]) < FACT_LIMIT:
        entry["after_steps"].append(live.steps)


@guarded("what the optimizer saw")
def _before_update(live, optimizer, args, kwargs):
    """Take the moment now, or after the closure when the step has one."""
    closure = kwargs.get("closure", args[0] if args else None)
    if not callable(closure):
        _take_update(live, optimizer)
        return None

    def closure_then_moment(*c_args, **c_kwargs):
        result = closure(*c_args, **c_kwargs)
        _take_update(live, optimizer)
        return result

    if "closure" in kwargs:
        return args, {**kwargs, "closure": closure_then_moment}
    return (closure_then_moment, *args[1:]), kwargs


@guarded("what the optimizer saw")
def _take_update(live, optimizer) -> None:
    rng.take(live, "update")  # no training forward of the model was seen this step
    groups = [_hyperparameters(group) for group in optimizer.param_groups]
    grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    lr = optimizer.param_groups[0].get("lr") if groups else None
    grad_norm, norms = total_grad_norm_parts(grads) if grads else (None, None)
    if norms is not None:  # each gradient's norm, for the sketch after the step if the gradient is unchanged then
        live.grad_norms = {id(g): (g, g._version, norm) for g, norm in zip(grads, norms)}
    live.update = {
        # a tensor lr (capturable optimizers) as it is now: a scheduler changes it in place later
        "lr": lr.detach().clone() if isinstance(lr, torch.Tensor) else lr,
        "groups": groups,
        "grad_norm": grad_norm,
    }


def _hyperparameters(group: dict) -> dict:
    """A param group's settings as Python values; a tensor on the device is named, not waited for."""
    out = {}
    for key, value in group.items():
        if key == "params" or key == "initial_lr":
            continue
        if isinstance(value, torch.Tensor):
            value = value.item() if value.device.type == "cpu" and value.numel() == 1 else "tensor"
        elif isinstance(value, (list, tuple)):
            value = [v.item() if isinstance(v, torch.Tensor) and v.device.type == "cpu" else v for v in value]
        elif not (value is None or isinstance(value, (bool, int, float, str))):
            value = repr(value)
        out[key] = value
    return out


def _post_step(optimizer, args, kwargs) -> None:
    live = recording()
    if live is None:
        return
    if _leave(live, optimizer) or live.optimizer is None:
        return  # a step inside another's: part of that step, which its own post-hook records
    if optimizer is not live.optimizer:
        _after_other_step(live)
        return
    live.steps += 1
    try:
        _record_step(live, optimizer)
    finally:
        live.new_step()
        if live.active:
            rng.arm()  # the next step's digests: its first network forward


@guarded("another optimizer's steps")
def _after_other_step(live) -> None:
    """Another optimizer stepped (a GAN's generator after its discriminator, whose steps are counted): the forwards,
    backwards, batches and clipping since the counted step were that optimizer's, so the counted step that follows
    starts now, as it would after a counted step: its loss is its own backward's (not the generator's before it
    taken as a micro-batch), its generators' digests are taken at its own first forward (after whatever the loop
    did between, an evaluation on one rank). The program's collectives and scheduler steps since the counted step
    stay with the next one."""
    live.roots, live.grad_sync, live.batches, live.forward_inputs = [], [], [], []
    live.root_divisors = []
    live.indices = []
    live.clip, live.clip_calls, live.clip_value, live.grad_norms = None, 0, None, None
    live.rng = None
    if live.active:
        rng.arm()


@guarded("the step record")
def _record_step(live, optimizer) -> None:
    recorder = live.recorder
    if recorder is None:
        return
    update = live.update or {}
    extra = {"scheduler_steps_before": live.scheduler_steps}
    if live.roots:
        extra["micro_batches"] = len(live.roots)
        extra["loss_divisors"] = live.root_divisors
    else:  # gradients set another way (or none): the step has no loss to record
        recorder.note_unrecorded("loss", f"from step {live.steps}: no backward ran before the optimizer step")
    extra.update(_step_digests(live))
    extra.update(_clip_facts(live, update))
    if update.get("groups") is not None:
        extra["param_groups"] = update["groups"]
    if any(flag is not None for flag in live.grad_sync):
        extra["grad_sync"] = live.grad_sync
    if live.rng is not None:
        extra["rng"] = live.rng
    if live.collectives_count:
        extra["collectives"] = live.collectives
        extra["collectives_count"] = live.collectives_count
    if live.steps == 1 or getattr(recorder, "_optimizer", None) is None:
        _record_optimizer(recorder, optimizer, live.model)
    grad_norm = live.clip["total_norm"] if live.clip is not None else update.get("grad_norm")
    live.local.ours = True  # the recorder's own work (an update dump's torch.save) is not the program's
    try:
        _record(live, recorder, update, grad_norm, extra)
    finally:
        live.local.ours = False


def _record(live, recorder, update: dict, grad_norm, extra: dict) -> None:
    recorder.record(
        live.steps,
        _step_loss(live.roots),
        [i for index in live.indices for i in index] if live.indices else None,
        epoch=live.epoch if live.epoch_given else live.loader_pass,  # set_epoch's value, else the loader's pass
        lr=_number_or_noted(recorder, "lr", update.get("lr"), live.steps),
        grad_norm=_number_or_noted(recorder, "grad_norm", grad_norm, live.steps),
        batch=live.batches or live.forward_inputs or None,  # digested as one batch of the leaves, as TraceCallback does
        **extra,
    )


def _number_or_noted(recorder, what: str, value, step: int):
    """A value the program's objects hold (a param group's lr, a norm clip_grad_norm_ returned) as
    record() takes it; one it cannot (a tensor of several values, a string) is noted and left out."""
    kept, why = number_or_none(value, what)
    if why is not None:
        recorder.note_unrecorded(what, f"from step {step}: {why}")
    return kept


@guarded("the lr at the end")
def lr_at_end(live) -> dict | None:
    """{after_step, lr}: param group 0's lr of the optimizer whose steps are counted, as the recording ends. A step
    records the lr it ran at; what the program set after its last step is seen here only: a loop that sets the rate
    after optimizer.step() leaves the next step's rate behind, one that sets it before leaves the last step's."""
    optimizer = live.optimizer
    if optimizer is None or not optimizer.param_groups:
        return None
    lr, why = number_or_none(optimizer.param_groups[0].get("lr"))
    if why is not None or lr is None:
        return None
    return {"after_step": live.steps, "lr": lr.item() if isinstance(lr, torch.Tensor) else lr}


@guarded("the optimizer's param groups at the first step")
def _record_optimizer(recorder, optimizer, model) -> None:
    recorder._record_optimizer(optimizer, model)


def _step_loss(roots: list):
    """The backward roots summed in order (as the explicit recorders sum micro-batch losses): the
    step's loss. NaN when no backward ran, or a root was not one number."""
    if not roots or any(r.numel() != 1 for r in roots):
        return math.nan
    loss = roots[0].reshape(())
    for root in roots[1:]:
        loss = loss + root.reshape(())
    return loss


def _step_digests(live) -> dict:
    out = {}
    copies = live.live_copies()
    if copies:  # an EMA's first and last parameter after the step (compare/copies.py)
        digest = _guarded_value("copy_digest", copies_digest, copies)
        if digest is not None:
            out["copy_digest"] = digest
    if live.model is not None:
        digest = _guarded_value("param_digest", param_digest, live.model)
        if digest is not None:
            out["param_digest"] = digest
            note_parameter_sets(live.recorder.meta, live.model, live.recorder.note_unrecorded)
        if not live.facts.get("_no_layers"):
            layers = _guarded_value("layers", live.recorder._layer_values, live.model, live.grad_norms)
            if layers is None:
                live.facts["_no_layers"] = True  # a model the sketch cannot take: not tried again each step
            else:
                out["layers"] = layers
    return out


def _guarded_value(what: str, fn, *args):
    try:
        return fn(*args)
    except Exception as exc:
        live = recording()
        if live is not None:
            live.could_not(what, exc)
        return None


def _clip_facts(live, update: dict) -> dict:
    out = {}
    if live.clip is not None:
        clip = live.clip
        out.update(
            clip_norm_type=clip["norm_type"],
            clip_max_norm=clip["max_norm"],
            clip_params=clip["params"],
            clip_order=_order_digest(live, clip["order"]),
            clip_calls=live.clip_calls,
        )
        if update.get("grad_norm") is not None:
            out["grad_norm_seen"] = update["grad_norm"]  # as the optimizer saw them: after clipping
    if live.clip_value is not None:
        out["clip_value"] = live.clip_value["clip_value"]
    return out


def _order_digest(live, ids: list[int]) -> str:
    """The order of the clipped parameters, the same words whatever the model's names: "param_groups"
    (the optimizer's, as Lightning clips), "parameters" (the model's registration order), else
    "positions:" + 16 hex of their positions among the optimizer's (the positions go to the facts once)."""
    in_groups = [id(p) for group in live.optimizer.param_groups for p in group["params"]]
    if ids == in_groups:
        return "param_groups"
    if live.model is not None and ids == [id(p) for p in live.model.parameters()]:
        return "parameters"
    where = {i: n for n, i in enumerate(in_groups)}
    positions = [where.get(i, -1) for i in ids]
    digest = "positions:" + hashlib.sha256(repr(positions).encode()).hexdigest()[:16]
    live.facts.setdefault("clip_orders", {}).setdefault(digest, positions)
    return digest
