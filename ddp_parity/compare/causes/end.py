"""Causes at the end of a run, when every recorded step matches: the buffers, the final
parameters, validation (how a side recorded it, how it reduced it), structural problems; and, when
nothing differs, `equivalent`.

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from ddp_parity.compare.causes.base import Cause, Context, finding, fmt, recording
from ddp_parity.compare.causes.configuration import config_one_side
from ddp_parity.compare.causes.data import STEP_COUNT, step_count_finding
from ddp_parity.compare.causes.update import OPTIMIZER
from ddp_parity.compare.comparator import match_keys
from ddp_parity.compare.evaluations import evaluation_summary
from ddp_parity.compare.findings import Finding, evaluations_not_compared
from ddp_parity.compare.walk import records_of
from ddp_parity.trace_files import FINAL_PARAMS_FILE

BUFFER_HINTS = ("running_mean", "running_var", "num_batches_tracked")

# ---------------------------------------------------------------------------------------------
# buffers


def check_buffers(ctx: Context) -> Finding | None:
    """Buffers (BatchNorm running statistics) differing between ranks of a side or between sides."""
    replicas = {s: ctx.meta(s).get("replicas_identical") for s in ("a", "b")}
    bufs = {s: _buffer_digests(ctx.meta(s)) for s in ("a", "b")}
    split = [s for s in ("a", "b") if replicas[s] is False or _ranks_disagree(bufs[s])]
    params = ctx.cmp.params
    only_buffers = _differing_tensors(ctx) and all(_is_buffer(n, bufs) for n in _differing_tensors(ctx))
    if len(split) == 1:
        side = split[0]
        name = _first_differing_buffer(bufs[side]) or next(iter(_differing_tensors(ctx)), None)
        evidence = {"replicas_identical": ctx.both(*replicas.values()), "buffer": name}
        values = {"side": ctx.label(side), "name": name or "replicas_identical: false"}
        return finding(ctx, BUFFERS_REPLICAS, None, None, evidence, "", **values)
    across = _first_buffer_across(bufs)
    if across or (only_buffers and params.compared and not params.all_equal and ctx.earliest is None):
        name = across or next(iter(_differing_tensors(ctx)))
        return finding(ctx, BUFFERS_SYNC, None, None, {"buffer": name}, "", name=name)
    return None


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
    why="The buffer {name} differs between the sides while the per-step training records agree: its running "
    "statistics are computed from other batch statistics, as when one side converts BatchNorm to "
    "SyncBatchNorm (statistics over the global batch) and the other does not.",
    fix="Use SyncBatchNorm on both sides (torch.nn.SyncBatchNorm.convert_sync_batchnorm) or on neither.",
    doc="`buffers_sha256` differs across the sides with the training records equal: SyncBatchNorm on one side only.",
)


# ---------------------------------------------------------------------------------------------
# the final parameters


def check_final_moved(ctx: Context) -> Finding | None:
    """Every recorded step matches, the final tensors do not, and on one side the final parameters are not what
    its own last step left (their digest, the float64 sums of the first and last parameter, is not the last
    step's `param_digest`): the weights were changed after the last optimizer step on that side."""
    if ctx.earliest is not None or ctx.cmp.params.all_equal:
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
    doc="Every step matches, the final tensors differ, and one side's final parameters are not its own last step's "
    "digest: the weights changed after training on that side (an EMA copied in at the end).",
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
        if unrecorded and sorted(hooked) == sorted(unrecorded):  # the hooks compare the setup they saw instead
            configuration = "the setup the hooks saw (optimizer as built, samplers, seeds, clipping)"
        also, evaluated = _validation_said(ctx)
        facts = (
            f"No divergence: {configuration}, initial weights and all {n} steps (samples, loss, gradient norm, "
            f"learning rate, parameter digest) match on every rank, and so do {also}.{evaluated}"
        )
        return finding(ctx, EQUIVALENT, None, None, evidence, facts + _left_out(ctx))
    also, evaluated = _validation_said(ctx)
    facts = (
        f"No divergence in the numbers: all {n} steps and {also} match bit for bit, but the setup differs "
        f"({setup_differs.category}; see the warning).{evaluated}"
    )
    return replace(finding(ctx, EQUIVALENT, None, None, {"steps_compared": n}, facts), setup_differs=setup_differs)


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
    unlike = _unlike_said(summary.get("unlike"), ctx.names) + _in_step_said(summary.get("in_step"), ctx.names)
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
