"""What the loop measured, told apart from what it trained.

The verdict rests on the training: the samples each step consumed and the parameters it produced (the
digest after every step, the final tensors). Where those are equal and only a measured quantity differs
(the recorded loss, gradient norm, learning rate, a validation figure), the runs trained alike and the
difference is in how a side measured: a `recording` finding beside an EQUIVALENT verdict, with one note
per differing quantity naming its relation to the other side's (a shift by k steps, × k with every
recorded count k equals, the mean over ranks, another norm, float32 rounding, a few ulps of another
summation order). Where a side recorded no parameter digest, the records cannot prove the training the
same: the finding says so and asks for the digest, and decides nothing from the measurements.

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

import math

import numpy as np

from ddp_parity.compare import relations
from ddp_parity.compare.causes.backward import GRADIENTS_NORM_TYPE, _norm_finding, check_clipped_norm
from ddp_parity.compare.causes.base import (
    FEW_ULPS,
    Cause,
    Context,
    Evidence,
    aligned_records,
    finding,
    float32_ulps,
    fmt,
    samples_said,
)
from ddp_parity.compare.causes.end import NUMERICS_VALIDATION, check_float32_validation
from ddp_parity.compare.causes.forward import factor_of
from ddp_parity.compare.causes.undetermined import UNRECORDED, undetermined, watch_found_all_equal
from ddp_parity.compare.causes.update import RECORDED_LR, check_lr_shift
from ddp_parity.compare.evidence import MISSING_EVIDENCE, digests_every_step
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.pairing import param_order
from ddp_parity.compare.walk import loss_reduced_before_recorded, records_of

WHAT = {"loss": "recorded loss", "grad_norm": "gradient norm", "lr": "learning rate", "validation": "validation"}

# how to record alike, per relation: the fix of a `recording` finding (the training needs none)
RECORD_ALIKE = {
    "shift": RECORDED_LR.fix,
    "factor": "Record the {what} the same way on both sides ({side}'s is a multiple of the other's; the recorded "
    "counts it equals: {counts}): record the value the step used (for the loss, the one it backpropagated); "
    "nothing in the training needs to change.",
    "grad_scale": "Record on {side} the loss before scaler.scale(loss) (the loss the training step computed, as the "
    "other side does): {side}'s is that loss × the GradScaler's scale ({counts}); the gradients are unscaled before "
    "the step, so nothing in the training needs to change.",
    "reduced_in_place": "Nothing in the training needs to change for this difference. To record alike, record "
    "the loss before it is reduced, or reduce a copy to log it (reduced = loss.detach().clone(); "
    "dist.all_reduce(reduced)) on {side}, where the loss tensor itself is reduced in place.",
    "mean_over_ranks": "Record each rank's own {what} on both sides (or the mean over the ranks on both: "
    "self.log(..., sync_dist=True) on one side means an all_reduce AVG on the other).",
    "norm": "To record alike, measure the gradient norm on {side} as the other side does: the 2-norm over all the "
    "optimizer's parameters (torch.nn.utils.get_total_norm(grads, norm_type=2.0), or what clip_grad_norm_ returns); "
    "change nothing in how the step clips.",
    "order": "To record alike, measure the {what} over the same tensors in the same order as the other side (Lightning "
    "measures over the optimizer's parameters in param-group order); change nothing in how the step clips or "
    "updates: the parameters are already equal.",
    # the hooks' own norm (no clip on either side), summed over param groups in another order: no program line made it
    "hooks_order": "Nothing to change in either program for this note: the hooks measure the gradient norm "
    "themselves where no clip_grad_norm_ does, over each optimizer's param groups in order, and the two optimizers "
    "hold the same parameters in another order (their param groups split or ordered otherwise).",
    # two clips summed over their parameters in other orders, neither binding: the factor each applied was exactly 1
    "clip_order": "Nothing to change for this note while neither clip binds: each multiplied the gradients by "
    "exactly 1. Where a norm can reach max_norm, clip over the same parameters in the same order on both sides "
    "(Lightning clips over the optimizer's parameters in param-group order: "
    "clip_grad_norm_([p for g in optimizer.param_groups for p in g['params']], max_norm)), or the clips part there.",
    "float32": "Record the {what} as computed (a Python float), not rounded to float32 (what `self.log` keeps).",
    "ulp": "Read the {what} on both sides from where the step takes it (optimizer.param_groups[0]['lr'] before "
    "scheduler.step()): the two sides compute it by other expressions, one ulp apart, and the step applied the same.",
    "validation": "Compute the validation figure the same way on both sides. " + NUMERICS_VALIDATION.fix,
    "": "Record the {what} the same way on both sides: the training is the same, only what was written differs.",
}


# ---------------------------------------------------------------------------------------------
# the relation of one measured quantity's two series


def _pairs(ctx: Context, rank) -> list[tuple[dict, dict]]:
    return list(aligned_records(ctx, rank))


def relation_of(ctx: Context, quantity: str, rank) -> relations.Relation | None:
    """How one side's recorded `quantity` relates to the other's on `rank`, the most telling relation
    first: a shift, a factor, the mean over ranks, float32 rounding, a few ulps (or one, for the lr)."""
    pairs = _pairs(ctx, rank)
    steps, a, b = relations.series(pairs, quantity)
    found = relations.shift_relation(quantity, ctx.names, steps, a, b) if quantity == "lr" else None
    if found is None and quantity != "lr":
        found = factor_of(ctx, quantity, rank)
    if found is None and quantity == "loss":
        found = reduced_in_place_relation(ctx, rank) or _mean_over_ranks(ctx, rank)
    return found or _rounding(ctx, quantity, steps, a, b)


def _rounding(ctx: Context, quantity: str, steps, a, b) -> relations.Relation | None:
    differ = [(s, x, y) for s, x, y in zip(steps, a, b) if x != y and x is not None and y is not None]
    if not differ:
        return None
    first = differ[0][0]
    for side, mine, theirs in ((ctx.names[0], 1, 2), (ctx.names[1], 2, 1)):
        if all(_is_float32_of(d[mine], d[theirs]) for d in differ):
            other = ctx.names[1] if side == ctx.names[0] else ctx.names[0]
            sentence = f"{side}'s {WHAT[quantity]} is {other}'s rounded to float32 at every step it differs."
            return relations.Relation("float32", quantity, side, other, "float32", first, differ[-1][0], None, sentence)
    if quantity == "lr" and all(abs(x - y) <= 2 * math.ulp(max(abs(x), abs(y))) for _, x, y in differ):
        sentence = (
            f"The learning rates differ by one ulp from step {first} on ({fmt(differ[0][1])} vs {fmt(differ[0][2])}): "
            "the same rate computed by two expressions (a closed form such as base_lr × factor against a rate "
            "updated step by step, or two formulas of one schedule)."
        )
        return relations.Relation("ulp", quantity, ctx.names[0], ctx.names[1], 1, first, differ[-1][0], None, sentence)
    ulps = [float32_ulps(x, y) for _, x, y in differ]
    if quantity != "lr" and all(u is not None and u <= FEW_ULPS for u in ulps):
        sentence = (
            f"The {WHAT[quantity]}s differ by at most {max(ulps)} float32 ulp(s) wherever they differ (from step "
            f"{first}): the same numbers summed over another list or in another order."
        )
        return relations.Relation(
            "order", quantity, ctx.names[0], ctx.names[1], max(ulps), first, differ[-1][0], None, sentence
        )
    return None


def _is_float32_of(x, y) -> bool:
    return isinstance(x, float) and isinstance(y, float) and float(np.float32(y)) == x and x != y


def _mean_over_ranks(ctx: Context, rank) -> relations.Relation | None:
    """One side records at each step the mean of the other side's per-rank losses (an all_reduce AVG,
    `self.log(sync_dist=True)`), on every rank, to float32 rounding."""
    ranks = list((ctx.walk.ranks if ctx.walk else {}).get("a") or [])
    if len(ranks) < 2:
        return None
    per = {s: [[r.get("loss") for r, _ in zip(records_of(ctx.run(s), k), range(1000))] for k in ranks] for s in "ab"}
    for side, other in (("a", "b"), ("b", "a")):
        means = [float(np.mean(np.float32(col))) for col in zip(*per[other])]
        mine = list(zip(*per[side]))
        if mine and all(
            all(relations.number(x) is not None and abs(x - m) <= 1e-6 * max(abs(m), 1e-30) for x in row)
            for row, m in zip(mine, means)
        ):
            sentence = (
                f"{ctx.label(side)} records at every step the mean over the {len(ranks)} ranks of {ctx.label(other)}'s "
                "per-rank losses (on every rank)."
            )
            return relations.Relation(
                "mean_over_ranks", "loss", ctx.label(side), ctx.label(other), len(ranks), None, None, None, sentence
            )
    return None


# a loss reduced over the ranks in place before it was recorded (walk.loss_reduced_before_recorded): what the records
# prove of it, where they show it at every step they compare (or at some: those steps are named)
REDUCED_IN_PLACE = (
    "{side}'s loss on rank {rank} is the {how} over the {ranks} ranks of {other}'s losses {where} ({a} vs {b} at "
    "step {step}), and {side} made a reduction of one number of its own at each of those steps ({collectives}): the "
    "loss was reduced over the ranks in place (dist.reduce or dist.all_reduce of the loss tensor itself, to log it) "
    "before it was recorded. A collective is no autograd operation: it changes the value recorded, not the gradients "
    "backward computes, so this difference is in the recording."
)


def reduced_in_place_relation(ctx: Context, rank) -> relations.Relation | None:
    """The relation of a loss recorded after the loop reduced it over the ranks in place, on `rank`: the steps it
    holds at, read from every rank's records of both sides in lock step."""
    ranks = [r for r in (ctx.walk.ranks if ctx.walk else {}).get("a") or [] if r in (ctx.walk.ranks.get("b") or [])]
    if rank not in ranks:
        return None
    streams = {s: {r: records_of(ctx.run(s), r) for r in ranks} for s in "ab"}
    held, apart = [], 0
    while True:
        recs = {s: {r: next(it, None) for r, it in streams[s].items()} for s in "ab"}
        ra, rb = recs["a"][rank], recs["b"][rank]
        if ra is None or rb is None:
            break
        if ra.get("loss") == rb.get("loss"):
            continue
        apart += 1
        d = {"quantity": "loss", "step": ra.get("step"), "rank": rank, "a": ra.get("loss"), "b": rb.get("loss")}
        found = loss_reduced_before_recorded(d, recs)
        if found is not None and (not held or (found["side"], found["how"]) == (held[0]["side"], held[0]["how"])):
            held.append(found)
    if not held:
        return None
    first, side = held[0], held[0]["side"]
    other = "b" if side == "a" else "a"
    steps = [h["step"] for h in held]
    where = "at every step they differ" if len(held) == apart else f"at step(s) {relations.steps_in_words(steps)}"
    sentence = REDUCED_IN_PLACE.format(
        side=ctx.label(side),
        other=ctx.label(other),
        rank=rank,
        how=first["how"],
        ranks=first["ranks"],
        where=where,
        a=fmt(first["a"]),
        b=fmt(first["b"]),
        step=first["step"],
        collectives=", ".join(first["collectives"]),
    )
    return relations.Relation(
        "reduced_in_place",
        "loss",
        ctx.label(side),
        ctx.label(other),
        first["how"],
        steps[0],
        steps[-1],
        None,
        sentence,
        steps=tuple(steps),
        ranks=(rank,),
    )


# the hooks' own gradient norm summed in another order over equal gradients (walk._measured_in_another_order): what
# the records prove of it, said beside the training's divergence the checks read past it
HOOKS_ORDER = (
    "the gradient norm at step {step} rank {rank} differs only as measured ({a} vs {b}, {ulps} float32 ulp(s)): "
    "neither side clips, so it is the hooks' own 2-norm of the gradients, which no step reads, summed over each "
    "optimizer's param groups in their order, and the orders differ ({orders}); every parameter's gradient norm "
    "is equal on both sides there: the same gradients, summed in another order."
)


# the same, where each side's clip_grad_norm_ measured it and neither clip bound (walk.clip_binds_nowhere)
CLIP_UNBOUND_ORDER = (
    "the gradient norm at step {step} rank {rank} differs only as measured ({a} vs {b}, {ulps} float32 ulp(s)): "
    "both sides clip (max_norm {limits}), and neither clip binds there (each norm well below its max_norm), so each "
    "clip scales the gradients by exactly 1 and its norm reaches no update; every parameter's gradient norm is equal "
    "on both sides there: the same gradients, summed in another order."
)


def hooks_order_relation(ctx: Context, before: dict) -> relations.Relation:
    """The relation of a gradient norm the walk passed over as summed in another order over equal gradients: the
    hooks' own sum, its sentence naming each side's first parameters in the order it summed them, or the norm of a
    clip that bound on neither side."""
    ulps = float32_ulps(before["a"], before["b"])
    words = {k: before.get(k) for k in ("step", "rank")} | {"a": fmt(before["a"]), "b": fmt(before["b"])}
    limits = before.get("clip_max_norms")
    if limits:
        sentence = CLIP_UNBOUND_ORDER.format(**words, ulps=ulps, limits=" vs ".join(f"{m:g}" for m in limits))
        return relations.Relation(
            "clip_order", "grad_norm", ctx.names[0], ctx.names[1], ulps, before["step"], None, None, sentence
        )
    shown = []
    for s in ("a", "b"):
        order = param_order(ctx.meta(s).get("optimizer"))
        shown.append(f"{ctx.label(s)}: {', '.join(order[:3])}{', ...' if len(order) > 3 else ''}")
    sentence = HOOKS_ORDER.format(**words, ulps=ulps, orders="; ".join(shown))
    return relations.Relation(
        "hooks_order", "grad_norm", ctx.names[0], ctx.names[1], ulps, before["step"], None, None, sentence
    )


# ---------------------------------------------------------------------------------------------
# the notes, one per measured quantity that differs


def measured_notes(ctx: Context) -> list[dict]:
    """{quantity, step, rank, a, b, relation, sentence} for each measured quantity that differs."""
    notes = []
    for quantity in ctx.cmp.measured_differ:
        if quantity == "validation":
            v = ctx.cmp.validation.first or {}
            relation = _validation_relation(ctx, v)
            first = {"step": v.get("step"), "rank": None, "a": v.get("a"), "b": v.get("b")}
            sentence = (
                relation.sentence
                if relation
                else (
                    f"validation {v.get('metric')} at step {v.get('step')} differs ({v.get('a')!r} vs {v.get('b')!r}): "
                    "computed or reduced otherwise from the same parameters."
                )
            )
        else:
            first = ctx.cmp.quantities[quantity].first or {}
            relation = relation_of(ctx, quantity, first.get("rank"))
            in_order = ctx.cmp.walk.measured_in_order if quantity == "grad_norm" else None
            if in_order is not None and (relation is None or relation.kind == "order"):
                relation = hooks_order_relation(ctx, in_order)  # what the records prove of it, said as such
            sentence = (
                relation.sentence
                if relation
                else (
                    f"the {WHAT[quantity]} first differs at step {first.get('step')} rank {first.get('rank')} "
                    f"({fmt(first.get('a'))} vs {fmt(first.get('b'))}), in no exact relation the records show (not a "
                    "shift, a factor of a recorded count, the mean over ranks, float32 rounding or a few ulps)."
                )
            )
        notes.append(
            {
                "quantity": quantity,
                **{k: first.get(k) for k in ("step", "rank", "a", "b")},
                "relation": relation.to_json() if relation else None,
                "sentence": sentence,
            }
        )
    return notes


def _validation_relation(ctx: Context, v: dict) -> relations.Relation | None:
    a, b = v.get("a"), v.get("b")
    for side, mine, theirs in (("a", a, b), ("b", b, a)):
        if _is_float32_of(mine, theirs):
            other = "b" if side == "a" else "a"
            sentence = (
                f"validation {v.get('metric')} at step {v.get('step')} on {ctx.label(side)} is {ctx.label(other)}'s "
                "rounded to float32 (what `self.log` keeps)."
            )
            step = v.get("step")
            return relations.Relation(
                "float32", "validation", ctx.label(side), ctx.label(other), "float32", step, step, None, sentence
            )
    return None


# ---------------------------------------------------------------------------------------------
# the check


def check_measured(ctx: Context) -> Finding | None:
    """Only measured quantities differ: with the training proved the same, a `recording` finding
    (the verdict EQUIVALENT); with the parameters after each step unrecorded, the finding says that the
    records cannot tell a training difference from a measuring one."""
    cmp = ctx.cmp
    if cmp.walk is None or cmp.meta_errors or not cmp.measured_differ or not cmp.consumed_and_ended_alike:
        return None
    if cmp.training_equal:
        return measured_finding(ctx)
    if not cmp.params_digested:
        return _unproved(ctx)
    return None


def measured_finding(ctx: Context) -> Finding:
    """The `recording` finding of a pair whose training is proved the same."""
    notes = measured_notes(ctx)
    specific = _specific_recording(ctx)
    steps = ctx.cmp.quantities["param_digest"].compared
    proof = _proof(ctx, steps, notes)
    first = notes[0]
    evidence = {"measured": notes, "relation": first["relation"]}
    if specific is not None:
        specific.explanation = f"{proof} {specific.explanation}"
        specific.evidence.update(evidence)
        return specific
    relation = first["relation"] or {}
    kind = relation.get("kind") or ("validation" if first["quantity"] == "validation" else "")
    if first["quantity"] == "grad_norm" and watch_found_all_equal(ctx) and kind in ("", "factor"):
        normed = _norm_finding(ctx, ctx.earliest, {}, "")  # its facts: which norm each side's value is
        said = normed.explanation.replace(GRADIENTS_NORM_TYPE.why, "").strip()
        # the side _norm_finding proved measured otherwise (another norm, or the 2-norm of a subset)
        odd = normed.evidence.get("measured_otherwise")
        relation = relations.Relation(
            "norm", "grad_norm", odd, "", str(normed.evidence["norm"]), first["step"], None, None, said
        )
        notes[0] = {**first, "relation": relation.to_json(), "sentence": said}
        evidence.update(measured=notes, relation=relation.to_json(), norm=normed.evidence["norm"])
        proof = _proof(ctx, steps, notes)
        kind, relation = "norm", relation.to_json()
    values = {
        "what": WHAT[first["quantity"]],
        "counts": ", ".join(relation.get("counts") or ()) or "none",
        "side": relation.get("side") or "the side whose value is not the 2-norm",
    }
    counts = relation.get("counts") or ()
    if kind == "factor" and [c.split("=")[0] for c in counts] == [relations.GRAD_SCALE]:
        # only the power of two a GradScaler scales by fits: "record the loss backpropagated" is wrong here (where
        # a recorded count fits too, the generic words name every count and pick none)
        kind = "grad_scale"
    fix = RECORD_ALIKE.get(kind, RECORD_ALIKE[""]).format(**values)
    why = MEASURED_WHY
    clipped = _clipped_alike_above_max(ctx, first) if first["quantity"] == "grad_norm" and kind == "factor" else None
    if clipped is not None:  # measured alike: the gradients differ, the clip hid it from the update
        factor = relation.get("value")
        words = {**values, **clipped, "k": fmt(factor) if factor is not None else "k", "other": relation.get("other")}
        world = any(c.startswith("world_size=") for c in counts)
        why = CLIPPED_FACTOR_WHY.format(**words, summed=CLIPPED_FACTOR_WORLD if world else "")
        fix = (CLIPPED_FACTOR_WORLD_FIX if world else CLIPPED_FACTOR_FIX).format(**words)
        evidence["clipped_alike"] = clipped
        proof = proof.replace(". Only what was measured differs: ", ". What differs: ", 1)
    if kind == "ulp" and all(ctx.meta(s).get("recorded_by") == "hooks" for s in ("a", "b")):
        # the hooks read the rate each optimizer step used: the steps used other rates, not the records
        why, fix = USED_LR_WHY, USED_LR_FIX
    return finding(ctx, RECORDED_MEASURE, first["step"], first["rank"], evidence, proof, fix=fix, why=why)


MEASURED_WHY = "Nothing in the training needs fixing; only what was written down differs."
CLIPPED_FACTOR_WHY = (
    "Both sides measured it the same way (clip_grad_norm_'s total norm, norm_type {norm_type}, before clipping): "
    "the gradients themselves differ by x{k}{summed}. Clipping to max_norm {max_norm} rescaled both to the same "
    "norm at every step (both above it; the norm the optimizer saw is recorded equal), so every update came out "
    "the same here; where the norms fall below max_norm (later in training, another lr or loss scale), or without "
    "the clip, the two trainings part."
)
CLIPPED_FACTOR_WORLD = (
    ", the world size: the gradients summed over the ranks on one side and averaged on the other (DDP averages)"
)
CLIPPED_FACTOR_WORLD_FIX = (
    "Reduce the gradients alike: on {side}, divide the all-reduced sum by the world size (average, as DDP and "
    "Lightning do), or sum on {other} too; nothing about the record needs to change."
)
CLIPPED_FACTOR_FIX = (
    "Make the gradients the same before clipping: {side}'s are x{k} {other}'s (a loss scaled, or gradients summed "
    "where the other side averages); nothing about the record needs to change."
)
USED_LR_WHY = (
    "The hooks read each rate from the optimizer as its step ran: the steps used rates one ulp apart, and every "
    "parameter still came out bitwise equal in these runs (the bit was lost in the update's rounding); a longer run "
    "or another configuration can show it."
)
USED_LR_FIX = (
    "Compute the rate by the same expression on both sides: the same formula (a closed form such as base_lr × "
    "0.5 × (1 + cos(π × epoch / epochs)) on both, as a LambdaLR of it on the Lightning side) or the same scheduler "
    "class stepped alike; a scheduler that updates the rate step by step (CosineAnnealingLR's recursion) parts "
    "from a closed form in the last bit."
)


def _clipped_alike_above_max(ctx: Context, first: dict) -> dict | None:
    """{max_norm, norm_type} where both sides recorded at every compared step of the rank the gradient norm
    clip_grad_norm_ returned with the same max_norm and norm_type, both above max_norm, and the norm the optimizer
    then saw (after the clip) equal: the values differ in the gradients, not in how they were measured."""
    pairs = list(aligned_records(ctx, first["rank"]))
    if not pairs:
        return None
    for ra, rb in pairs:
        clip = [(r.get("clip_max_norm"), r.get("clip_norm_type")) for r in (ra, rb)]
        if clip[0] != clip[1] or None in clip[0]:
            return None
        norms = [r.get("grad_norm") for r in (ra, rb)]
        if not all(isinstance(n, (int, float)) and n > clip[0][0] for n in norms):
            return None
        if ra.get("grad_norm_seen") != rb.get("grad_norm_seen") or ra.get("grad_norm_seen") is None:
            return None
    return {"max_norm": fmt(clip[0][0]), "norm_type": fmt(clip[0][1])}


def _proof(ctx: Context, steps: int, notes: list[dict]) -> str:
    samples = samples_said(ctx)
    return (
        f"The training is the same: {samples + ', ' if samples else ''}the parameters after each of the {steps} "
        "compared step(s) (param_digest) and the final parameters are equal on both sides"
        + ("" if samples else " (the samples were not compared: a side recorded no indices)")
        + ". Only what was measured differs: "
        + " ".join(_capital(n["sentence"]) for n in notes)
    )


def _specific_recording(ctx: Context) -> Finding | None:
    """A recording cause that names the very mechanism (a norm recorded after clipping, a rate read
    after scheduler.step(), validation kept as float32), where one holds."""
    for check in (check_clipped_norm, check_lr_shift, check_float32_validation):
        found = check(ctx)
        if found is not None and found.category == "recording":
            return found
    return None


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _unproved(ctx: Context) -> Finding:
    """Measured quantities differ, the samples and the final parameters are equal, and a side did not
    record the parameters after each step: the training cannot be proved the same, nor different."""
    notes = measured_notes(ctx)
    first = notes[0]
    lacking = [ctx.label(s) for s in ("a", "b") if not digests_every_step(ctx.run(s))]
    samples = samples_said(ctx)
    facts = (
        f"{_capital(samples) + ' and the' if samples else 'The'} final parameters are equal"
        f"{'' if samples else ' (the samples were not compared: a side recorded no indices)'}; "
        + " ".join(n["sentence"] for n in notes)
        + (
            f" {' and '.join(lacking)} recorded no parameter digest after each step (record(..., model=model)), so "
            if lacking
            else " The parameter digests were not compared at every step (the two sides' steps do not pair), so "
        )
        + "the records cannot say whether the training differs or only what was measured."
    )
    f = {"quantity": first["quantity"], "step": first["step"], "rank": first["rank"]}
    evidence = {"measured": notes, "param_digest_unrecorded": lacking}
    found = undetermined(ctx, f, ["measured", "earlier_update"], facts, evidence)
    if lacking and not any(u["evidence"] == "param_digest" for u in found.unchecked):
        what, change = MISSING_EVIDENCE["param_digest"]
        found.unchecked.insert(0, {"evidence": "param_digest", "sides": lacking, "not_checked": what, "record": change})
    changes = "; ".join(f"on {' and '.join(u['sides'])}, {u['record']}" for u in found.unchecked)
    found.kind, found.advice = UNRECORDED.kind, UNRECORDED.fix.format(changes=changes)
    return found


RECORDED_MEASURE = Cause(
    "recording.measured",
    check_measured,
    why="{why}",  # MEASURED_WHY, or what the steps used where the hooks read it (the proof said the rest)
    fix="{fix}",
    doc="The samples and the parameters (the digest after every step, the final tensors) equal, a measured "
    "quantity not (the loss, gradient norm, lr, validation): EQUIVALENT, each difference a note naming its "
    "relation (a shift, × k with every count k equals, the mean over ranks, another norm, float32, a few ulps; the "
    "hooks' own gradient norm summed over param groups in another order, asking no change). "
    "Without a parameter digest: said, undecided.",
    requires=Evidence("the parameters recorded equal after every step", lambda d: bool(d.evidence.get("measured"))),
)
