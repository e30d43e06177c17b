"""Causes at the end of a run, when every recorded step matches: the buffers, the final
parameters, validation (how a side recorded it, how it reduced it), structural problems; and, when
nothing differs, `equivalent`.

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ddp_parity.compare.causes.base import Cause, Context, finding, fmt, recording
from ddp_parity.compare.causes.configuration import config_one_side
from ddp_parity.compare.causes.data import STEP_COUNT, step_count_finding
from ddp_parity.compare.causes.hooked import collectives_over_shapes
from ddp_parity.compare.causes.update import OPTIMIZER
from ddp_parity.compare.comparator import match_keys
from ddp_parity.compare.evaluations import evaluation_summary, sampler_words, samplers_apart
from ddp_parity.compare.findings import Finding, evaluations_not_compared
from ddp_parity.compare.modules import recorded_module_types
from ddp_parity.compare.walk import records_of
from ddp_parity.trace_files import FINAL_PARAMS_FILE

BUFFER_HINTS = ("running_mean", "running_var", "num_batches_tracked")

# ---------------------------------------------------------------------------------------------
# the final states, by name: what both hold apart (parameters, buffers), and a copy of the model one holds alone


class FinalApart(NamedTuple):
    parameters: list[str]  # tensors both final states hold, parameters, whose values differ
    buffers: list[str]  # tensors both hold, buffers (running statistics), whose values differ
    parameters_compared: int  # how many parameters both hold


def final_apart(ctx: Context) -> FinalApart:
    """The tensors both final states hold, paired by name, split into parameters and buffers: a weight written
    after the last step shows in the parameters, running statistics synchronised otherwise in the buffers only."""
    if "final_apart" not in ctx.cache:
        bufs = {s: _buffer_digests(ctx.meta(s)) for s in ("a", "b")}
        rows = [row for row in ctx.cmp.param_tensors if isinstance(row, dict) and "name" in row]
        params = [row for row in rows if not _is_buffer(row["name"], bufs)]
        ctx.cache["final_apart"] = FinalApart(
            [row["name"] for row in params if not row.get("equal")],
            [row["name"] for row in rows if not row.get("equal") and _is_buffer(row["name"], bufs)],
            len(params),
        )
    return ctx.cache["final_apart"]


def copy_held_alone(ctx: Context, side: str) -> dict | None:
    """Where `side`'s final state holds, besides the tensors both hold, all of them again under a prefix of its own
    (`model_ema.module.` before the model's names): {prefix, count}, a second copy of the model registered in the
    module (an EMA kept as a LightningModule's submodule is saved in its state_dict). None where it holds none."""
    alone = set(ctx.cmp.params_only_in.get(side) or [])
    shared = [row["name"] for row in ctx.cmp.param_tensors if isinstance(row, dict) and "name" in row]
    if not alone or not shared:
        return None
    for name in sorted(n for n in alone if n.endswith("." + shared[0])):  # found from one name, checked on all
        prefix = name[: -len(shared[0])]
        if all(prefix + tail in alone for tail in shared):
            return {"prefix": prefix, "count": sum(n.startswith(prefix) for n in alone)}
    return None


COPY_ALONE = (
    " {side}'s final state also holds {count} tensor(s) under {prefix}* laid out as the model's: a second copy of "
    "the model registered in the module (an EMA kept as a submodule is saved in its state_dict), with no counterpart "
    "on {other}, not compared."
)


def copies_alone_said(ctx: Context) -> str:
    said = ""
    for side, other in (("a", "b"), ("b", "a")):
        if (copy := copy_held_alone(ctx, side)) is not None:
            said += COPY_ALONE.format(side=ctx.label(side), other=ctx.label(other), **copy)
    return said


# ---------------------------------------------------------------------------------------------
# buffers


def check_buffers(ctx: Context) -> Finding | None:
    """Buffers (BatchNorm running statistics) differing between ranks of a side, or between the sides with every
    parameter both final states hold equal: how the records say each side synchronised them over the ranks."""
    replicas = {s: ctx.meta(s).get("replicas_identical") for s in ("a", "b")}
    bufs = {s: _buffer_digests(ctx.meta(s)) for s in ("a", "b")}
    split = [s for s in ("a", "b") if replicas[s] is False or _ranks_disagree(bufs[s])]
    apart = final_apart(ctx)
    if len(split) == 1:
        side = split[0]
        name = _first_differing_buffer(bufs[side]) or next(iter(_differing_tensors(ctx)), None)
        evidence = {"replicas_identical": ctx.both(*replicas.values()), "buffer": name}
        values = {"side": ctx.label(side), "name": name or "replicas_identical: false"}
        return finding(ctx, BUFFERS_REPLICAS, None, None, evidence, "", **values)
    across = _first_buffer_across(bufs)
    if apart.parameters or not (across or (apart.buffers and ctx.earliest is None)):
        return None  # parameters apart too: the final parameters' checks speak
    return statistics_finding(ctx, apart.buffers or [across], apart)


class StatisticsRecords(NamedTuple):
    """What the records hold of how each side synchronised its running statistics over the ranks."""

    names: list[str]  # the buffers apart
    types: dict  # side -> the module classes its watch recorded, None where unrecorded
    own: dict  # side -> collectives_over_shapes (its own over the buffers' shapes), None where unrecorded
    said: str  # the sentence every variant says: only buffers apart, every parameter equal, a copy held alone


def statistics_finding(ctx: Context, names: list[str], apart: FinalApart) -> Finding:
    """Only buffers apart: SyncBatchNorm where the recorded module classes show it on one side; an averaging of
    the statistics on one side only where its own collectives over the buffers' shapes show it and the other's
    show none; else what the records hold of each, with the candidates and how to tell them apart."""
    shapes = {tuple(r["shape"]) for r in ctx.cmp.param_tensors if r.get("name") in names and _many(r.get("shape"))}
    said = ONLY_BUFFERS.format(parameters=apart.parameters_compared, count=len(names), names=_names(names))
    records = StatisticsRecords(
        names,
        {s: recorded_module_types(ctx.run(s)) for s in ("a", "b")},
        {s: collectives_over_shapes(ctx.run(s), shapes) if shapes else None for s in ("a", "b")},
        said + copies_alone_said(ctx),
    )
    evidence = {
        "buffer": names[0],
        "buffers": names[:8],
        "parameters_equal": apart.parameters_compared,
        "module_types": ctx.both(*(_norm_types(records.types[s]) for s in ("a", "b"))),
        "averaged": ctx.both(*(own["after"] if own else None for own in records.own.values())),
        "copies_alone": ctx.both(*(copy_held_alone(ctx, s) for s in ("a", "b"))),
    }
    return (
        _sync_batchnorm_one_side(ctx, records, evidence)
        or _averaged_one_side(ctx, records, evidence)
        or _synchronised_otherwise(ctx, records, evidence)
    )


def _sync_batchnorm_one_side(ctx: Context, records: StatisticsRecords, evidence: dict) -> Finding | None:
    """SyncBatchNorm among one side's recorded module classes, none among the other's (recorded too)."""
    types = records.types
    synced = [s for s in ("a", "b") if types[s] and any(SYNC_BN in t for t in types[s])]
    other = "b" if synced == ["a"] else "a"
    if len(synced) != 1 or not types[other]:
        return None
    side = synced[0]
    lead = SYNC_RECORDED.format(side=ctx.label(side), mine=_types_said(types[side]), theirs=_types_said(types[other]))
    return finding(ctx, BUFFERS_SYNC, None, None, evidence, lead + " " + records.said)


def _averaged_one_side(ctx: Context, records: StatisticsRecords, evidence: dict) -> Finding | None:
    """One side's own collectives over the buffers' shapes between steps, none in the other's (whose lists were
    recorded whole: a list cut short may have left them out)."""
    own = records.own
    averaging = [s for s in ("a", "b") if own[s] and own[s]["after"]]
    other = "b" if averaging == ["a"] else "a"
    if len(averaging) != 1 or own[other] is None or own[other]["after"] or own[other]["cut"]:
        return None
    side = averaging[0]
    values = {"side": ctx.label(side), "other": ctx.label(other), "after": _steps(own[side]["after"])}
    lead = AVERAGED_ONE_SIDE.format(ops=", ".join(own[side]["ops"]), **values)  # the headline names it
    facts = lead + " " + records.said + _types_sentence(ctx, records.types)
    return finding(ctx, BUFFERS_AVERAGED, None, None, evidence, facts, **values)


def _synchronised_otherwise(ctx: Context, records: StatisticsRecords, evidence: dict) -> Finding:
    """Neither of the above: each side's averaging as recorded (or unrecorded), the candidates and how to tell."""
    own, types = records.own, records.types
    facts = records.said + AVERAGINGS.format(said="; ".join(_averaging_said(ctx, s, own[s]) for s in ("a", "b")))
    if all(own[s] and own[s]["after"] for s in ("a", "b")) and own["a"]["after"] == own["b"]["after"]:
        facts += SAME_STEPS
    facts += _types_sentence(ctx, types)
    # SyncBatchNorm named and advised only where a side's module classes are unrecorded, never where both are seen
    unruled = " and ".join(ctx.label(s) for s in ("a", "b") if not types[s])
    values = {
        "sync_candidate": SYNC_CANDIDATE if unruled else "",
        "sync": SYNC_NOT_RULED_OUT.format(sides=unruled) if unruled else "",
        "record_more": RECORD_MORE if unruled or None in own.values() else "",
    }
    return finding(ctx, BUFFERS_STATISTICS, None, None, evidence, facts, **values)


SYNC_BN = "SyncBatchNorm"
ONLY_BUFFERS = (
    "Only buffers differ, {count} running statistic(s) ({names}), while every recorded step matches and every "
    "parameter both final states hold is equal ({parameters} of {parameters})."
)
SYNC_RECORDED = "The recorded module classes hold SyncBatchNorm on {side} only ({mine} against {theirs})."
AVERAGED_ONE_SIDE = (
    "The running statistics are averaged over the ranks on {side} only: {side}'s own collectives average tensors of "
    "the differing buffers' shapes between steps ({ops}, after step(s) {after}), {other}'s hold none of those shapes."
)
AVERAGINGS = " The program's own reductions (all_reduce and the like) over tensors of those buffers' shapes: {said}."
SAME_STEPS = (
    " Both after the same steps: the records order no forward against those collectives, so whether each side "
    "averaged before or after validation's forward through the DDP wrapper is not recorded."
)
SYNC_NOT_RULED_OUT = (
    "; and use SyncBatchNorm on both sides or on neither (the module classes are unrecorded on {sides})"
)
SYNC_CANDIDATE = ", or SyncBatchNorm on one side (statistics over the global batch)"
RECORD_MORE = "; the hooks of ddp-parity record list the program's collectives, a module watch the modules' classes"
NO_CLASSES_BUT_NORMS = " Neither side's recorded modules are SyncBatchNorm ({norms})."
CLASSES_UNRECORDED = " The module classes are unrecorded on {sides} (no module watch): SyncBatchNorm is not ruled out."


def _averaging_said(ctx: Context, side: str, own: dict | None) -> str:
    if own is None:
        return f"unrecorded on {ctx.label(side)}"
    if own["after"]:
        return f"{ctx.label(side)} after step(s) {_steps(own['after'])} ({', '.join(own['ops'])})"
    cut = ", its lists cut short at some step (those left out are unknown)" if own["cut"] else ""
    return f"none on {ctx.label(side)}{cut}"


def _types_sentence(ctx: Context, types: dict) -> str:
    unrecorded = [ctx.label(s) for s in ("a", "b") if not types[s]]
    if unrecorded:
        return CLASSES_UNRECORDED.format(sides=" and ".join(unrecorded))
    if any(SYNC_BN in t for s in ("a", "b") for t in types[s]):
        return ""
    return NO_CLASSES_BUT_NORMS.format(norms=_types_said(types["a"] | types["b"]))


def _norm_types(types: set[str] | None) -> list[str] | None:
    return None if types is None else sorted(t for t in types if "Norm" in t)


def _types_said(types: set[str]) -> str:
    return ", ".join(_norm_types(types)) or "no norm layer"


def _many(shape) -> bool:
    """A tensor of more than one number: a scalar's all_reduce is a metric's as often as a buffer's."""
    return isinstance(shape, list) and math.prod(n for n in shape if isinstance(n, int)) > 1


def _steps(steps: list[int]) -> str:
    return ", ".join(str(s) for s in steps)


def _names(names: list[str], limit: int = 3) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _buffer_digests(meta: dict) -> dict:
    return {f.get("rank", r): f.get("buffers_sha256") or {} for r, f in enumerate(meta.get("ranks") or [])}


def _ranks_disagree(per_rank: dict) -> bool:
    return len({json.dumps(v, sort_keys=True) for v in per_rank.values() if v}) > 1


def _first_differing_buffer(per_rank: dict) -> str | None:
    maps = [v for v in per_rank.values() if v]
    for name in sorted(set().union(*maps)) if maps else []:
        if len({m.get(name) for m in maps}) > 1:
            return name
    return None


def _first_buffer_across(bufs: dict) -> str | None:
    a, b = bufs["a"].get(0) or {}, bufs["b"].get(0) or {}
    pairs = match_keys(list(a), list(b), None)
    pairs.pop("__only_a__"), pairs.pop("__only_b__")
    return next((name for name, (ka, kb) in sorted(pairs.items()) if a[ka] != b[kb]), None)


def _differing_tensors(ctx: Context) -> list[str]:
    return [row["name"] for row in ctx.cmp.param_tensors if not row["equal"]]


def _is_buffer(name: str, bufs: dict) -> bool:
    known = {k for s in bufs.values() for per in s.values() for k in per}
    return name in known or name.endswith(BUFFER_HINTS)


BUFFERS_REPLICAS = Cause(
    "buffers.replicas",
    check_buffers,
    why="On {side} the ranks end with different buffers ({name}), while the other side's replicas agree. "
    "DDP broadcasts rank 0's buffers at every forward through the wrapper (broadcast_buffers=True); a "
    "forward on the unwrapped module (validation outside the DDP wrapper) uses and updates each rank's "
    "own running statistics.",
    fix="On {side}, validate through the DDP-wrapped model (as Lightning does), so every rank uses rank 0's buffers.",
    doc="`replicas_identical` false on one side only: validation outside the DDP wrapper (each rank's "
    "own running statistics).",
)
BUFFERS_SYNC = Cause(
    "buffers.sync",
    check_buffers,
    why="Its running statistics are computed from other batch statistics: a SyncBatchNorm's over the global batch "
    "(every rank's), a BatchNorm's over its own rank's.",
    fix="Use SyncBatchNorm on both sides (torch.nn.SyncBatchNorm.convert_sync_batchnorm) or on neither.",
    doc="Only buffers differ, every parameter equal, and the recorded module classes hold SyncBatchNorm on one "
    "side only.",
)
BUFFERS_AVERAGED = Cause(
    "buffers.averaged",
    check_buffers,
    why="A BatchNorm's running statistics take no part in a training step's numbers (its forward in training mode "
    "normalises by the batch's own statistics), so averaging them over the ranks changes no step: {side}'s end as "
    "the mean over the ranks (as timm's distribute_bn leaves them at an epoch's end), {other}'s as its ranks left "
    "them (rank 0's, where DDP broadcast them at a forward through the wrapper).",
    fix="Average the running statistics over the ranks on {other} too, at the same point as {side} (after step(s) "
    "{after}: all_reduce each running_mean and running_var, then divide by the world size), in the same order "
    "against validation's forward (in Lightning, validation runs before on_train_epoch_end; "
    "on_validation_epoch_start comes before it), or on neither side.",
    doc="Only buffers differ, every parameter equal; one side's own collectives average tensors of the buffers' "
    "shapes between steps (timm's distribute_bn), the other's none: the statistics averaged on one side only.",
)
BUFFERS_STATISTICS = Cause(
    "buffers.statistics",
    check_buffers,
    why="A BatchNorm's running statistics take no part in a training step's numbers, so they part while every step "
    "matches where the sides synchronise them over the ranks otherwise: averaged at another point (before a forward "
    "through the DDP wrapper on one side, after it on the other: DDP's broadcast_buffers sends rank 0's buffers at "
    "that forward, validation's, so an average taken after it averages copies of rank 0's), or averaged or "
    "broadcast on one side only{sync_candidate}. To tell which: compare each rank's running_mean on each side just "
    "before and just after its averaging (ranks already equal before it: a DDP broadcast ran first){record_more}.",
    fix="Synchronise the running statistics at the same points on both sides: average them over the ranks after "
    "the same steps and in the same order against validation's forward through the DDP wrapper (in Lightning, "
    "validation runs before on_train_epoch_end; on_validation_epoch_start comes before it){sync}.",
    doc="Only buffers differ, every parameter equal, and the records show neither SyncBatchNorm nor an averaging "
    "on one side only: synchronised at another point (averaged before validation's DDP broadcast on one side, "
    "after it on the other), the candidates and how to tell them apart.",
)


# ---------------------------------------------------------------------------------------------
# the final parameters


def check_final_moved(ctx: Context) -> Finding | None:
    """Every recorded step matches, the final tensors do not, and on one side the final parameters are not what
    its own last step left (their digest, the float64 sums of the first and last parameter, is not the last
    step's `param_digest`): the weights were changed after the last optimizer step on that side. Never where every
    parameter both final states hold is equal (only buffers apart, or tensors one side holds alone): no weight was
    written, whatever a digest of a copy held alone says."""
    if ctx.earliest is not None or ctx.cmp.params.all_equal or not final_apart(ctx).parameters:
        return None
    moved = {s: _moved_after_last_step(ctx, s) for s in ("a", "b")}
    if None in moved.values() or moved["a"] == moved["b"]:
        return None
    side = "a" if moved["a"] else "b"
    facts = (
        f"Every recorded step matches (the parameter digest after each one too), but {ctx.label(side)}'s final "
        f"parameters are not what its last step left: their digest is {fmt(moved[side])} against the last step's "
        f"{fmt(_last_digest(ctx, side))}, while {ctx.label('b' if side == 'a' else 'a')}'s final parameters are its "
        "last step's."
    )
    evidence = {"final_digest": moved[side], "last_step_digest": _last_digest(ctx, side), "side": ctx.label(side)}
    return finding(ctx, FINAL_MOVED, ctx.walk.last_equal_step, None, evidence, facts, side=ctx.label(side))


def _last_digest(ctx: Context, side: str):
    rank = min((ctx.walk.ranks.get(side) or [0]), key=str)
    last = None
    for record in records_of(ctx.run(side), rank):
        last = record
    return (last or {}).get("param_digest")


def _moved_after_last_step(ctx: Context, side: str):
    """The final parameters' digest where it differs from the side's last recorded one, False where it is the
    same, None where it cannot be computed (no layer names, no digest, tensors not by those names)."""
    names = (ctx.meta(side).get("layers") or {}).get("names") or []
    last = _last_digest(ctx, side)
    if not names or not isinstance(last, list) or len(last) != 2:
        return None
    if {names[0], names[-1]} & set(ctx.cmp.params_only_in.get(side) or []):
        return None  # the digest sums a tensor the other side does not hold (a copy's, an EMA's): not the weights
    try:
        import torch
        from safetensors.torch import load_file

        run = ctx.run(side)
        final = load_file(str(Path(getattr(run, "path", run)) / FINAL_PARAMS_FILE))
        ends = [final.get(names[0]), final.get(names[-1])]
        if any(t is None for t in ends):
            return None
        digest = [float(t.sum(dtype=torch.float64)) for t in ends]
    except Exception:  # noqa: BLE001 - a fact for a finding; an unreadable file is the comparator's to report
        return None
    return digest if digest != last else False


FINAL_MOVED = Cause(
    "final_params.moved",
    check_final_moved,
    why="What a side saves as its final state is not its last step's parameters: something wrote the weights after "
    "the last optimizer step (an averaged model copied in at the end, as Lightning's WeightAveraging/"
    "EMAWeightAveraging callbacks do; a checkpoint loaded; a last update outside the optimizer).",
    fix="On {side}, keep the trained weights as the model's final state, as the other side does: keep an averaged "
    "(EMA/SWA) model apart from the model instead of copying it in at the end (or copy it in on both sides).",
    doc="Every step matches, a parameter both final states hold differs, and one side's final parameters are not "
    "its own last step's digest (one it holds alone, a copy's, proves nothing): the weights changed after training "
    "on that side (an EMA copied in at the end).",
)


def check_final_params(ctx: Context) -> Finding | None:
    params = ctx.cmp.params
    if ctx.earliest is not None or params.all_equal:
        return None
    first = params.first or {}
    facts = (
        f"All {ctx.walk.steps_equal_before} recorded steps match, including the per-step parameter digest, but "
        f"the final parameters differ ({fmt(first)}): an update touched tensors the digest does not cover, or "
        "the last update after the final record differs."
    )
    return finding(ctx, FINAL_PARAMS, ctx.walk.last_equal_step, None, {"params": first}, facts)


FINAL_PARAMS = replace(
    OPTIMIZER,
    check=check_final_params,
    doc="Every recorded step matches, the final parameters do not: an update the digest does not cover, "
    "or the last update after the final record.",
)


# ---------------------------------------------------------------------------------------------
# validation recorded as float32


def check_float32_validation(ctx: Context) -> Finding | None:
    v = ctx.cmp.validation.first
    if ctx.earliest is not None or v is None:
        return None
    rounded = _float32_rounded_side(v.get("a"), v.get("b"))
    if rounded is None:
        return None
    facts = (
        f"Training matches step for step; validation {v.get('metric')} at step {v.get('step')} differs only by "
        f"float32 rounding ({v.get('a')!r} vs {v.get('b')!r}): {ctx.label(rounded)} recorded the value rounded "
        "to float32 (as `self.log` keeps it)."
    )
    return finding(ctx, RECORDED_FLOAT32_VALIDATION, v.get("step"), None, {"validation": v}, facts)


def _float32_rounded_side(a, b) -> str | None:
    if not (isinstance(a, float) and isinstance(b, float)) or a == b:
        return None
    if float(np.float32(a)) == b and float(np.float32(b)) == b:
        return "b"
    if float(np.float32(b)) == a and float(np.float32(a)) == a:
        return "a"
    return None


RECORDED_FLOAT32_VALIDATION = recording(
    check_float32_validation,
    fix=(
        "Record validation figures as computed (float64/Python floats), not the values "
        "`self.log` keeps (rounded to float32)."
    ),
    doc="Validation equal after float32 rounding: one side recorded what `self.log` keeps.",
)


# ---------------------------------------------------------------------------------------------
# validation


def check_validation(ctx: Context) -> Finding | None:
    v = ctx.cmp.validation.first
    if ctx.earliest is not None or v is None:
        return None
    facts = (
        f"Training matches step for step, but validation differs ({v.get('metric')} at step {v.get('step')}: "
        f"{v.get('a')!r} vs {v.get('b')!r}): the metric is computed or reduced across ranks differently."
    )
    return finding(ctx, NUMERICS_VALIDATION, v.get("step"), None, {"validation": v}, facts)


NUMERICS_VALIDATION = Cause(
    "numerics.validation",
    check_validation,
    why="A DistributedSampler pads the validation set with repeated samples when it does not divide by "
    "the world size; averaging per-rank means instead of summing counts weights ranks unequally "
    "(Lightning #21859: epoch metrics with sync_dist inflated by an integer batch counter).",
    fix="Reduce validation metrics as sums and counts across ranks (all_reduce of both) and count each "
    "sample once, the way torchmetrics does.",
    doc="Training equal, validation not: the metric computed or reduced across ranks differently (#21859).",
)


# ---------------------------------------------------------------------------------------------
# structural problems the comparison reports


def check_problems(ctx: Context) -> Finding | None:
    problems = ctx.cmp.all_problems
    if not problems:
        return None
    if ctx.walk is not None and not any(ctx.walk.counts[s] for s in ("a", "b")):
        return step_count_finding(ctx, None)
    if all(p.startswith("validation at step(s) ") for p in problems):
        facts = f"Every compared step matches, but the sides validated at other steps: {'; '.join(problems)}."
        return finding(ctx, VALIDATION_STEPS, None, None, {"problems": problems}, facts)
    names = _names_on_one_side(ctx, problems)
    if names is not None:
        facts = (
            "Every recorded step matches, and so does every tensor both final states hold, but the final states "
            f"differ in their names: {names}. Nothing trained differently; one side registered tensors "
            "(parameters or buffers) the other does not hold."
        )
        evidence = {"only_in": ctx.both(*(ctx.cmp.params_only_in[s] for s in ("a", "b")))}
        return finding(ctx, STATE_NAMES, ctx.walk.last_equal_step if ctx.walk else None, None, evidence, facts)
    facts = (
        f"The recorded steps match, but the comparison reports structural problems: {'; '.join(problems[:3])}. "
        "Most often one run did not finish (no final parameters, a validation missing) or the sides validate "
        "at different points."
    )
    return finding(ctx, PROBLEMS, ctx.walk.last_equal_step if ctx.walk else None, None, {"problems": problems}, facts)


def _names_on_one_side(ctx: Context, problems: list) -> str | None:
    """'<names> on <side> only; ...' where the one structural problem is tensors held by one final state only."""
    only = ctx.cmp.params_only_in
    if len(problems) != 1 or not problems[0].startswith("parameters on one side only") or not any(only.values()):
        return None
    return "; ".join(f"{only[s][:5]} on {ctx.label(s)} only" for s in ("a", "b") if only.get(s))


STATE_NAMES = Cause(
    "step_count.state_names",
    check_problems,
    why="The final state is the module's state dict: a tensor registered as a buffer or a parameter on one side "
    "(a lookup table kept with register_buffer, a layer built and never used) is saved there and not on the "
    "other, though every step computes the same numbers.",
    fix="Hold the same tensors as module state on both sides: keep data (a feature table, a vocabulary) as a plain "
    "attribute or register it on both; build the same layers on both.",
    doc="Every step and every shared tensor equal, but the final states hold other names: a buffer or "
    "parameter registered on one side only.",
)
PROBLEMS = replace(
    STEP_COUNT,
    check=check_problems,
    why="What the comparison pairs (final tensors by name, validation figures by step) exists on one side only: a "
    "run that stopped before its end writes no final parameters, and a validation missing has no counterpart.",
    fix="Let both runs finish (the final parameters are written at the end), validate at the same points on both "
    "sides, and compare again; the problems listed say which file or record is missing.",
    doc="The steps match, but the comparison reports structural problems (no final parameters, a "
    "validation missing): one run did not finish, or the sides validate at other points.",
)
VALIDATION_STEPS = Cause(
    "step_count.validation",
    check_problems,
    why="Validation results are paired by the step they were taken at; those at steps both sides validated "
    "were compared, these have no counterpart.",
    fix="Validate at the same steps on both sides (the same interval; an evaluation before the first step on "
    "both or on neither), recording each with record_validation(epoch, step, metrics) at the step it was taken.",
    doc="A side validated at steps the other did not (an evaluation at step 0, another interval): which side, "
    "which steps.",
)


# ---------------------------------------------------------------------------------------------
# nothing differs


def check_equivalent(ctx: Context, setup_differs: Finding | None = None) -> Finding:
    n = ctx.walk.steps_equal_before if ctx.walk else 0
    if setup_differs is None:
        unrecorded = [ctx.label(s) for s in ("a", "b") if not ctx.meta(s).get("config")]
        configuration = f"configuration (unrecorded on {' and '.join(unrecorded)})" if unrecorded else "configuration"
        evidence = {"steps_compared": n}
        one_side = config_one_side(ctx.meta("a"), ctx.meta("b"), ctx.ignore_config)
        if not unrecorded and (one_side["a"] or one_side["b"]):  # never said to match: named, side by side
            evidence["config_one_side"] = {ctx.label(s): keys for s, keys in one_side.items()}
            configuration = (
                "configuration (the keys both sides record; on one side only, not compared: "
                + "; ".join(f"{ctx.label(s)}: {_keys(keys)}" for s, keys in one_side.items() if keys)
                + ")"
            )
        hooked = [ctx.label(s) for s in ("a", "b") if ctx.meta(s).get("recorded_by") == "hooks"]
        samplers = samplers_apart(ctx.run("a"), ctx.run("b")) if hooked else []
        if unrecorded and sorted(hooked) == sorted(unrecorded):  # the hooks compare the setup they saw instead
            seen = "seeds, clipping" if samplers else "samplers, seeds, clipping"  # never said to match where apart
            configuration = f"the setup the hooks saw (optimizer as built, {seen})"
        also, evaluated = _validation_said(ctx)
        matched, unmatched = _step_quantities_said(ctx)
        facts = (
            f"No divergence: {configuration}, initial weights and all {n} steps{matched} match on every rank, and so "
            f"do {also}.{unmatched}{evaluated}{_samplers_said(samplers, ctx.names)}"
        )
        return finding(ctx, EQUIVALENT, None, None, evidence, facts + _left_out(ctx))
    also, evaluated = _validation_said(ctx)
    facts = (
        f"No divergence in the numbers: all {n} steps and {also} match bit for bit, but the setup differs "
        f"({setup_differs.category}; see the warning).{evaluated}"
    )
    return replace(finding(ctx, EQUIVALENT, None, None, {"steps_compared": n}, facts), setup_differs=setup_differs)


STEP_QUANTITY_WORDS = {
    "samples": "samples",
    "loss": "loss",
    "grad_norm": "gradient norm",
    "lr": "learning rate",
    "param_digest": "parameter digest",
}


def _step_quantities_said(ctx: Context) -> tuple[str, str]:
    """What the EQUIVALENT line says the steps matched in: (" (the quantities compared at every rank-step)", a
    sentence naming those compared at fewer or none, and why where the recorder said so). A quantity compared nowhere
    (a loss the recorder marked unrecorded, samples neither side recorded) is never said to match."""
    walk = ctx.walk
    steps = getattr(walk, "rank_steps_compared", 0) if walk is not None else 0
    if walk is None or not steps:
        return "", ""
    quantities, placeholders = getattr(walk, "quantities", {}) or {}, getattr(walk, "placeholders", {}) or {}
    counts = {name: quantities[name].compared for name in STEP_QUANTITY_WORDS if name in quantities}
    every = [STEP_QUANTITY_WORDS[name] for name, k in counts.items() if k >= steps]
    some = [f"{STEP_QUANTITY_WORDS[name]} at {k} of {steps}" for name, k in counts.items() if 0 < k < steps]
    none = [name for name, k in counts.items() if k == 0]
    marked = {name: [ctx.label(s) for s in ("a", "b") if name in placeholders.get(s, ())] for name in none}
    said = []
    if some:
        said.append(f"Compared at fewer of the {steps} rank-steps: {', '.join(some)}.")
    if none:
        why = [
            f"{STEP_QUANTITY_WORDS[name]} (the recorder marked it unrecorded on {' and '.join(marked[name])})"
            if marked[name]
            else f"{STEP_QUANTITY_WORDS[name]} (no step recorded on both sides)"
            for name in none
        ]
        said.append(f" Not compared at any step, so not said to match: {', '.join(why)}.")
    matched = f" ({', '.join(every)})" if every else ""
    return matched, (" " + " ".join(x.strip() for x in said)) if said else ""


def _samplers_said(samplers: list[dict], names) -> str:
    """The recorded samplers that differ (`samplers_apart`: the training's or an evaluation's DataLoader), one per
    kind of loader, so that an equal training never reads as equal samplers."""
    said = []
    for trained, loader in ((True, "the training's"), (False, "an evaluation's")):
        found = [f for f in samplers if f["trained"] is trained]
        if found:
            ranks = ", ".join(str(f["rank"]) for f in found)
            said.append(f"{loader} DataLoader on rank(s) {ranks}: {sampler_words(found[0], names)}")
    return f" The recorded samplers differ: {'; '.join(said)} (see the warnings)." if said else ""


def _validation_said(ctx: Context) -> tuple[str, str]:
    """What the EQUIVALENT line says of validation: what matched beside the final parameters, and a sentence on the
    hooks' evaluations where they were recorded but not all compared equal (never "none recorded" beside them)."""
    validated = getattr(ctx.cmp.validation, "compared", 0)
    summary = evaluation_summary(ctx.run("a"), ctx.run("b"))
    matched = ["validation"] if validated else []
    if summary is None:
        return (" and ".join([*matched, "the final parameters"]) if matched else NO_VALIDATION), ""
    compared, equal = summary["compared"], summary["equal"]
    if compared and equal == compared:
        matched.append(f"the hooks' evaluations ({compared} compared by their outputs' digests)")
    also = ", ".join(matched) + " and the final parameters" if matched else "the final parameters"
    unlike = (
        _unlike_said(summary.get("unlike"), ctx.names)
        + _split_said(summary.get("split"), ctx.names)
        + _parts_one_side_said(summary.get("parts_one_side"), ctx.names)
        + _in_step_said(summary.get("in_step"), ctx.names)
        + _in_loop_said(summary.get("in_loop"), ctx.names)
    )
    if not compared:
        return also, f" No evaluation was compared: {evaluations_not_compared(summary, ctx.names)}.{unlike}"
    if equal < compared:
        return also, (
            f" The hooks' evaluations differ: {equal} of {compared} compared gave the same outputs (the "
            f"evaluation_differs warnings say where).{unlike}"
        )
    return also, unlike


def _in_step_said(in_step, names) -> str:
    """The hooks' records left out as part of a training step (evaluation_summary's `in_step`): said, so that what
    was recorded and not compared is never silent."""
    if not isinstance(in_step, list) or len(in_step) != 2 or not any(in_step):
        return ""
    return (
        f" {in_step[0]} group(s) of forwards on {names[0]} and {in_step[1]} on {names[1]}, run in training mode with "
        "gradients off on a step's batch before its backward or at every step (a feature-caching pass), were taken "
        "as part of the training steps, not compared as evaluations."
    )


def _in_loop_said(in_loop, names) -> str:
    """The loop's own no-grad forwards in training mode (evaluation_summary's `in_loop`: a rollout), never counted as
    evaluations: said with how many were compared, and where one side recorded none, why that proves nothing."""
    recorded = in_loop.get("recorded") if isinstance(in_loop, dict) else None
    if not isinstance(recorded, list) or len(recorded) != 2 or not any(recorded):
        return ""
    said = (
        f" {recorded[0]} group(s) of forwards on {names[0]} and {recorded[1]} on {names[1]} ran the model in training "
        "mode with gradients off over no DataLoader of an evaluation's own (the loop's own work: a rollout, a "
        "teacher's targets, a cache), taken as no evaluation"
    )
    if all(recorded):
        equal, compared = in_loop.get("equal"), in_loop.get("compared")
        return f"{said}; {equal} of {compared} paired at the same point gave the same outputs."
    side = 1 if recorded[0] else 0
    return (
        f"{said}; none on {names[side]} to compare them with: the hooks see such forwards where the model, or a part "
        f"of it, is called at the top of the loop, not where a part is called inside a forward of the whole (a "
        f"training_step run by Lightning's wrapper), so {names[side]} may make them unseen."
    )


def _unlike_said(unlike, names) -> str:
    """The evaluations left uncompared for another number of forwards at one point (evaluation_summary's `unlike`)."""
    if not isinstance(unlike, dict) or not unlike.get("count"):
        return ""
    fa, fb = (unlike.get("forwards") or [None, None])[:2]
    return (
        f" {unlike['count']} evaluation(s) ran another number of forwards on the two sides (after step "
        f"{unlike.get('step')} on rank {unlike.get('rank')}: {fa} on {names[0]}, {fb} on {names[1]}): each holds "
        "other work (a recalibration with gradients off, such as precise BN's, or two evaluations recorded as one), "
        "so their outputs were not compared."
    )


def _split_said(split, names) -> str:
    """The evaluations left uncompared for the same forwards digested in other pieces (evaluation_summary's `split`:
    records written apart on one side, one record on the other)."""
    if not isinstance(split, dict) or not split.get("count"):
        return ""
    pa, pb = (split.get("pieces") or [None, None])[:2]
    return (
        f" {split['count']} evaluation(s) ran as many forwards on the two sides but were recorded in other pieces "
        f"(after step {split.get('step')} on rank {split.get('rank')}: forwards per record {pa} on {names[0]}, {pb} "
        f"on {names[1]}: one module's forwards in several records, as hooks before 2026-12-08 wrote them where another "
        "part of the model ran between, or where other work ended a record), so their "
        "outputs' digests could not be compared."
    )


def _parts_one_side_said(alone, names) -> str:
    """The modules one side's evaluations ran apart that the other side's did not record (evaluation_summary's
    `parts_one_side`): a part of the model called on its own, its forwards not compared."""
    if not isinstance(alone, list) or len(alone) != 2:
        return ""
    said = []
    for side, modules in enumerate(alone):
        if isinstance(modules, dict) and modules:
            listed = ", ".join(f"{m}, at {n} evaluation(s)" for m, n in modules.items())
            said.append(
                f" {names[side]}'s evaluations also ran a part of the model on its own ({listed}), "
                f"recorded apart; {names[1 - side]}'s hooks recorded no forward of it apart (a part called inside "
                "the forward of the model, as a LightningModule's step calls it, is not recorded apart): those "
                "forwards were not compared."
            )
    return "".join(said)


NO_VALIDATION = "the final parameters (no validation recorded)"


def _left_out(ctx: Context) -> str:
    """Where the sides recorded other parameter sets: what the match rests on, and what it leaves out."""
    kinds = {note["kind"] for note in getattr(ctx.cmp, "notes", [])}
    if not kinds & {"one_side_only", "narrowed_digests"}:
        return ""
    return (
        " The sides recorded other parameter sets: the weights, the digest and the final parameters are those both "
        "hold; what one side holds alone or digests alone is not compared (see the warnings)."
    )


def _keys(keys: list[str], limit: int = 6) -> str:
    return ", ".join(keys[:limit]) + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


EQUIVALENT = Cause(
    "equivalent",
    check_equivalent,
    why="",
    fix="Nothing to fix.",
    doc="Nothing differs (a setup difference with equal numbers stays beside it as `setup_differs`).",
)
