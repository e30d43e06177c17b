"""Causes in the optimizer step: an optimizer that holds no trained tensor, the learning rate (how
a side recorded it, how its schedule steps), the update itself.

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

import json

from ddp_parity.compare.causes.backward import reduction_order_finding
from ddp_parity.compare.causes.base import (
    FEW_ULPS,
    Cause,
    Context,
    Evidence,
    aligned_records,
    config_values,
    finding,
    float32_ulps_or_far,
    fmt,
    nonzero,
    recording,
    same_param_sets,
)
from ddp_parity.compare.causes.undetermined import undetermined
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.walk import records_of

# ---------------------------------------------------------------------------------------------
# an optimizer over tensors no backward reaches (FSDP2)


def check_stale_optimizer(ctx: Context) -> Finding | None:
    """One side never trains: a gradient norm of exactly 0 over its optimizer's parameters at every
    step and the model's parameters never changing, while the other side's gradients are not 0. Its
    optimizer holds tensors no backward reaches (built before fully_shard replaced the parameters)."""
    f = ctx.earliest
    if f is None or f["quantity"] not in ("loss", "grad_norm", "param_digest"):
        return None
    records = {s: [r for r, _ in zip(records_of(ctx.run(s), f["rank"]), range(STALE_STEPS))] for s in ("a", "b")}
    for side, other in (("a", "b"), ("b", "a")):
        mine, theirs = records[side], records[other]
        frozen = len({json.dumps(r.get("param_digest")) for r in mine}) == 1
        if len(mine) < 2 or not frozen or any(r.get("grad_norm") != 0 for r in mine):
            continue
        if not any(nonzero(r.get("grad_norm")) for r in theirs):
            continue
        facts = (
            f"On {ctx.label(side)} the gradient norm over the optimizer's parameters is 0 at every step and the "
            f"model's parameters never change (param_digest {fmt(mine[0].get('param_digest'))} from step "
            f"{mine[0]['step']} to {mine[-1]['step']}), while {ctx.label(other)} trains from the same samples."
        )
        evidence = {
            "grad_norm": ctx.both(mine[0].get("grad_norm"), theirs[0].get("grad_norm")),
            "frozen": ctx.label(side),
        }
        return finding(ctx, OPTIMIZER_STALE_PARAMS, f["step"], f["rank"], evidence, facts, side=ctx.label(side))
    return None


STALE_STEPS = 50  # the steps read to tell a side that never trains


OPTIMIZER_STALE_PARAMS = Cause(
    "optimizer.stale_params",
    check_stale_optimizer,
    why="An optimizer updates the tensors it was given. fully_shard replaces every parameter of the module "
    "with a new DTensor parameter; an optimizer built before it keeps the old tensors, which no backward "
    "reaches: no gradient, no update, no error, and nothing trains.",
    fix="On {side}, build the optimizer after fully_shard (after the root's call), over model.parameters() "
    "as they are then: the DTensors.",
    doc="One side's gradient norm 0 at every step and its parameters never changing, the other training: "
    "the optimizer built before `fully_shard`.",
)


# ---------------------------------------------------------------------------------------------
# the learning rate recorded after scheduler.step()


def check_lr_shift(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "lr":
        return None
    shift = _lr_shift(ctx, f["rank"])
    if shift is None:
        return None
    facts = (
        f"The learning rates are one sequence shifted by one step: {ctx.label(shift)} records at each step the "
        "value the other side records at the next one; it reads the rate after scheduler.step(), not the "
        "rate the optimizer step used."
    )
    evidence = {"lr": ctx.both(f["a"], f["b"]), "ahead": ctx.label(shift)}
    return finding(ctx, RECORDED_LR, f["step"], f["rank"], evidence, facts)


def _lr_shift(ctx: Context, rank) -> str | None:
    la, lb = [], []
    for ra, rb in aligned_records(ctx, rank):
        la.append(ra.get("lr"))
        lb.append(rb.get("lr"))
    if len(la) < 3 or len(set(map(str, la))) < 2:
        return None
    if la[:-1] == lb[1:]:
        return "a"
    if lb[:-1] == la[1:]:
        return "b"
    return None


RECORDED_LR = recording(
    check_lr_shift,
    fix=(
        "Record the learning rate the optimizer step used: read optimizer.param_groups[0]['lr'] "
        "before scheduler.step()."
    ),
    doc="One side's learning rates are the other's shifted by one step: read after `scheduler.step()`.",
)


# ---------------------------------------------------------------------------------------------
# the learning rate


def check_lr(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "lr":
        return None
    evidence = {"lr": ctx.both(f["a"], f["b"])}
    facts = (
        f"At step {f['step']} the samples, loss and gradient norm match, but the learning rate differs "
        f"({f['a']!r} on {ctx.names[0]} vs {f['b']!r} on {ctx.names[1]})."
    )
    return finding(ctx, OPTIMIZER_LR, f["step"], f["rank"], evidence, facts)


OPTIMIZER_LR = Cause(
    "optimizer.lr",
    check_lr,
    why="The learning-rate schedule is stepped differently: per optimizer step on one side and per "
    "epoch on the other (Lightning's `interval`), or per micro-batch under accumulation.",
    fix="Step the scheduler exactly where Lightning does: after optimizer.step(), once per epoch for "
    "interval 'epoch' or once per optimizer step for interval 'step', with the same parameters "
    "(a schedule sized in steps, like OneCycleLR, needs the same total_steps: optimizer steps, "
    "len(train_loader) x epochs / accumulation, not len(dataset): Lightning #2643).",
    doc="The learning rate differs with equal gradients: the schedule's interval (Lightning's `interval`), "
    "its length in steps (#2643).",
)


# ---------------------------------------------------------------------------------------------
# the update


def check_param_digest(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "param_digest":
        return None
    ulps = max((float32_ulps_or_far(x, y) for x, y in zip(f["a"], f["b"])), default=None)
    evidence = {"param_digest": ctx.both(f["a"], f["b"]), "ulps": ulps}
    if ulps is not None and ulps <= FEW_ULPS and ctx.walk.steps_equal_before == 0 and same_param_sets(ctx):
        clipping = [v for v in config_values(ctx, ("gradient_clip_val",)).values() if nonzero(v)]
        if clipping and ctx.both_have("optimizer"):
            return reduction_order_finding(ctx, f, evidence, "parameter digest after the step (clipping on)")
    facts = (
        f"At step {f['step']} rank {f['rank']} consumed the same samples with the same loss, gradient norm and "
        f"learning rate, yet the parameters after the step differ (param_digest {fmt(f['a'])} vs {fmt(f['b'])})."
    )
    if ctx.both_have("optimizer"):  # the param groups were compared equal: the update itself differs
        return finding(ctx, OPTIMIZER, f["step"], f["rank"], evidence, facts)
    return undetermined(ctx, f, ["param_groups", "reduction_order", "optimizer"], facts, evidence)


OPTIMIZER = Cause(
    "optimizer",
    check_param_digest,
    why="Same samples, loss, gradient norm and learning rate, yet another update: the optimizer's "
    "state or settings differ (hyperparameters not in meta.optimizer, zero_grad missing so "
    "gradients accumulate, clipping on one side only, a fused/foreach implementation).",
    fix="Build the same optimizer with the same hyperparameters and implementation on both sides, clip "
    "the same way, and zero the gradients once per optimizer step.",
    doc="The parameters after the step differ with equal samples, loss, gradient norm and lr, the param "
    "groups compared equal: the optimizer's state or settings.",
    requires=Evidence(
        "both sides' param groups", lambda d: not any(u.get("evidence") == "optimizer" for u in d.unchecked)
    ),
)
