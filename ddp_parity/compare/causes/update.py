"""Causes in the optimizer step: an optimizer that holds no trained tensor, the learning rate (how
a side recorded it, how its schedule steps), the update itself.

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

import json
import math

from ddp_parity.compare import relations
from ddp_parity.compare.causes.backward import CLIP_FACTS, reduction_order_finding
from ddp_parity.compare.causes.base import (
    FEW_ULPS,
    Cause,
    Context,
    Evidence,
    aligned_records,
    config_values,
    consumed_words,
    finding,
    float32_ulps,
    float32_ulps_or_far,
    fmt,
    nonzero,
    recording,
    same_loss_words,
    same_param_sets,
    samples_equal_at,
)
from ddp_parity.compare.causes.fed import rounding_refused
from ddp_parity.compare.causes.forward import ACCUMULATION_KEYS, factor_of, relation_counts
from ddp_parity.compare.causes.schedule_steps import recorded_counts
from ddp_parity.compare.causes.seed_records import common_ranks
from ddp_parity.compare.causes.setup import (
    constructed_optimizer,
    is_own_key,
    keys_the_optimizer_reads,
    recorded_groups,
)
from ddp_parity.compare.causes.undetermined import undetermined
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.walk import records_of
from ddp_parity.trace_files import fact_items, read_hook_facts

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


def _parameters_part_at(ctx: Context, steps: list, da: list, db: list) -> int | None:
    """The first step whose training differs, as the walk found it (the per-step digests narrowed to the parameters
    both sides digest, the layer sketches beside them); without the walk, the digests where both sides digest the same
    parameters. None where the parameters stay equal (or are not recorded)."""
    walk = ctx.walk
    if walk is not None:
        trained = walk.first_trained
        return trained.get("step") if trained is not None and isinstance(trained.get("step"), int) else None
    if (ctx.meta("a").get("param_digest_names") or None) != (ctx.meta("b").get("param_digest_names") or None):
        return None  # other parameters digested on each side: their sums differ whatever the training did
    return next((s for s, x, y in zip(steps, da, db) if x != y), None)


def check_lr_shift(ctx: Context) -> Finding | None:
    """The learning rates are one series shifted by k steps. Which mechanism, the parameters say: a
    schedule k iterations ahead changes the update it applies (the parameters part), a rate read after
    scheduler.step() changes only what was written (the parameters stay equal)."""
    f = ctx.earliest
    if f is None or f["quantity"] != "lr":
        return None
    pairs = list(aligned_records(ctx, f["rank"]))
    steps, la, lb = relations.series(pairs, "lr")
    relation = relations.shift_relation("lr", ctx.names, steps, la, lb)
    if relation is None:
        return None
    evidence = {"lr": ctx.both(f["a"], f["b"]), "ahead": relation.side, "relation": relation.to_json()}
    _, da, db = relations.series(pairs, "param_digest")
    recorded = all(d is not None for d in da + db)
    parted = _parameters_part_at(ctx, steps, da, db) if recorded else None
    if parted is not None:
        facts = (
            f"{relation.sentence[:-1]}, and the parameters part at step {parted}: the optimizer applied the "
            f"shifted rates, so {relation.side}'s schedule runs {relation.value} iteration(s) ahead."
        )
        evidence["params_part_at"] = parted
        if no_scheduler_steps(ctx, f["rank"]):  # the lr set by hand: its shape is what the records prove
            evidence["scheduler_steps"] = "none recorded on either side"
            facts = (
                f"{relation.sentence[:-1]}, and the parameters part at step {parted}: the optimizer applied the "
                f"shifted rates. Neither side recorded a scheduler.step(): the lr is set otherwise (by hand), and "
                f"{relation.side}'s rate at each step is the one the other uses {relation.value} step(s) later."
            )
            values = {"side": relation.side, "k": relation.value}
            return finding(ctx, OPTIMIZER_LR_SHIFT, f["step"], f["rank"], evidence, facts, **values)
        by_hand = [s for s in ("a", "b") if _never_stepped_a_scheduler(ctx, f["rank"], s)]
        if len(by_hand) == 1:  # one side sets its lr by hand: a scheduler's order is no mechanism of it
            hand = ctx.label(by_hand[0])
            evidence["scheduler_steps"] = f"none recorded on {hand}"
            when = "early" if hand == relation.side else "late"
            facts = (
                f"{relation.sentence[:-1]}, and the parameters part at step {parted}: the optimizer applied the "
                f"shifted rates. {hand} recorded no scheduler.step(): it sets its lr by hand, {relation.value} "
                f"step(s) {when} against the other side's scheduler (an lr set after optimizer.step() is the next "
                "step's rate)."
            )
            values = {"side": relation.side, "k": relation.value}
            return finding(ctx, OPTIMIZER_LR_SHIFT, f["step"], f["rank"], evidence, facts, **values)
        return finding(ctx, OPTIMIZER_LR_AHEAD, f["step"], f["rank"], evidence, facts, side=relation.side)
    checked = (
        "the parameters stay equal at every step, so the optimizer applied the same rates"
        if recorded
        else "the parameters were not recorded (model=), so whether the optimizer applied the shifted rates is "
        "unchecked"
    )
    facts = (
        f"{relation.sentence[:-1]}; {checked}: {relation.side} reads the rate after scheduler.step(), not the "
        "rate the optimizer step used."
    )
    return finding(ctx, RECORDED_LR, f["step"], f["rank"], evidence, facts)


RECORDED_LR = recording(
    check_lr_shift,
    fix=(
        "Record the learning rate the optimizer step used: read optimizer.param_groups[0]['lr'] "
        "before scheduler.step()."
    ),
    doc="One side's learning rates are the other's shifted by one step: read after `scheduler.step()`.",
)


OPTIMIZER_LR_AHEAD = Cause(
    "optimizer.lr_ahead",
    check_lr_shift,
    why="A scheduler stepped before its optimizer (or once before training) hands every optimizer step the "
    "rate meant for the next one.",
    fix="On {side}, call scheduler.step() after optimizer.step(), once per optimizer step (never before the "
    "first): the order Lightning uses.",
    doc="One side's lr is the other's shifted by k steps and the parameters part: its schedule runs k "
    "iterations ahead (scheduler.step() before optimizer.step()).",
    requires=Evidence("the lr shifted and the parameters parting", lambda d: "params_part_at" in d.evidence),
)


OPTIMIZER_LR_SHIFT = Cause(
    "optimizer.lr_shift",
    check_lr_shift,
    why="The rate each optimizer step applies is the other side's rate of another step: where the lr is "
    "computed for the step (set before or after the step, or from another step count), the two sides disagree.",
    fix="Set each step's lr at the same point on both sides ({side} runs {k} step(s) ahead): an lr set after "
    "optimizer.step() on one side is the next step's rate there, or computed from another step count; set it "
    "before each optimizer.step(), from the same step count, on both.",
    doc="One side's lr is the other's shifted by k steps, the parameters part, and neither side (or one side) "
    "recorded a `scheduler.step()` (hooks record every call): the lr set by hand, at another step.",
    requires=Evidence("the lr shifted and the parameters parting", lambda d: "params_part_at" in d.evidence),
)


def check_lr_restart(ctx: Context) -> Finding | None:
    """The lrs part at the first step of an epoch, where one side's rates over that epoch repeat its own rates from
    step 1 and the other side's go on: that side's schedule starts again at each epoch (indexed by the step within
    the epoch, or a scheduler built again each epoch). The epoch is the recorded one where it changes there, else
    the trained loader's length (an iterator kept across the loop's epochs records one epoch at every step). Tested
    before a shift: an epoch of k steps restarted is also "the other side's rate k steps later"."""
    f = ctx.earliest
    if f is None or f["quantity"] != "lr" or not isinstance(f.get("step"), int) or f["step"] < 2:
        return None
    pairs = list(aligned_records(ctx, f["rank"]))
    steps, epochs = [ra.get("step") for ra, _ in pairs], [ra.get("epoch") for ra, _ in pairs]
    if f["step"] not in steps or [rb.get("epoch") for _, rb in pairs] != epochs:
        return None
    at = steps.index(f["step"])
    if at == 0:
        return None
    if epochs[at] != epochs[at - 1] and isinstance(epochs[at], int):
        length = sum(1 for e in epochs[at:] if e == epochs[at])
        where = f"the first step of epoch {epochs[at]}"
    else:
        epoch = _epoch_of_the_trained_loader(ctx, f["rank"], pairs)
        if epoch is None or (f["step"] - epoch["from_step"]) % epoch["steps"]:
            return None  # not the first step of an epoch
        length = epoch["steps"]
        where = (
            f"the first step of a new pass over the trained loader: {epoch['steps']} step(s) is the trained loader's "
            f"length (loader_iterators.length: {epoch['batches']} batch(es), {epoch['per_step']} a step), where every "
            f"step recorded epoch {epochs[at]}"
        )
    _, la, lb = relations.series(pairs, "lr")
    relation = relations.restart_relation("lr", ctx.names, steps, la, lb, at, length)
    if relation is None:
        return None
    side = "a" if relation.side == ctx.names[0] else "b"
    other = lb if side == "a" else la
    facts = (
        f"The learning rate first differs at step {f['step']} rank {f['rank']}, {where}: {relation.sentence[:-1]} "
        f"({fmt(other[at])} at step {f['step']}), and the rates of the steps before are equal on both sides: "
        f"{relation.side}'s schedule starts again at each epoch."
    )
    evidence = {"lr": ctx.both(f["a"], f["b"]), "restarts": relation.side, "epoch": epochs[at]}
    evidence["relation"] = relation.to_json()
    by_hand = no_scheduler_steps(ctx, f["rank"])
    if by_hand:
        evidence["scheduler_steps"] = "none recorded on either side"
    why, fix = LR_RESTART_WORDS["by_hand" if by_hand else "scheduler"]
    fix = fix.format(side=relation.side)
    return finding(ctx, OPTIMIZER_LR_RESTART, f["step"], f["rank"], evidence, facts, why=why, fix=fix)


def _epoch_of_the_trained_loader(ctx: Context, rank, pairs: list) -> dict | None:
    """{steps, from_step, batches, per_step} of the trained DataLoader iterator both sides made first, where both
    recorded the same length (`loader_iterators`, hooks) and the steps take a whole number of its batches each (the
    recorded micro_batches, 1 where unrecorded): an epoch of that many steps from the step it was made before."""
    found = set()
    for side in ("a", "b"):
        trained = [
            i
            for i in fact_items(read_hook_facts(ctx.run(side), rank), "loader_iterators")
            if i.get("trained") is True and isinstance(i.get("length"), int) and isinstance(i.get("before_step"), int)
        ]
        first = min(trained, key=lambda i: i["before_step"], default=None)
        if first is None:
            return None
        found.add((first["length"], first["before_step"]))
    per_step = {r.get("micro_batches", 1) for pair in pairs[:1] for r in pair}
    if len(found) != 1 or len(per_step) != 1:
        return None
    (batches, from_step), per = found.pop(), per_step.pop()
    if not isinstance(per, int) or per < 1 or batches % per or batches < per:
        return None
    return {"steps": batches // per, "from_step": from_step, "batches": batches, "per_step": per}


# the restart's words, by whether a scheduler stepped: where the hooks saw none on either side the lr is set by hand
# and "build the scheduler once" would speak of an object neither side has
LR_RESTART_WORDS = {
    "scheduler": (
        "A schedule counted from the iteration within the epoch (batch_idx, not the global step), or a scheduler "
        "built again at each epoch, hands every epoch the first epoch's rates, where a schedule over the whole "
        "training goes on: no side runs ahead, the rates part at each epoch's first step.",
        "On {side}, compute each step's lr from the global step (epoch × steps per epoch + the step within the "
        "epoch), not from the iteration within the epoch (batch_idx), and build the scheduler once, before the "
        "first epoch, as the other side does.",
    ),
    "by_hand": (
        "Neither side stepped a scheduler (the hooks recorded none before any step): the lr is set by hand, and a "
        "rate computed from the iteration within the epoch (batch_idx, not the global step) hands every epoch the "
        "first epoch's rates, where one computed from the global step goes on: no side runs ahead, the rates part "
        "at each epoch's first step.",
        "On {side}, compute each step's lr from the global step (epoch × steps per epoch + the step within the "
        "epoch), not from the iteration within the epoch (batch_idx), as the other side does.",
    ),
}

OPTIMIZER_LR_RESTART = Cause(
    "optimizer.lr_restart",
    check_lr_restart,
    why="{why}",
    fix="{fix}",
    doc="The lrs part at an epoch's first step (the recorded epoch, or the trained loader's length where every step "
    "records one epoch), where one side's rates repeat its own rates from step 1 and the other's go on: that side's "
    "schedule restarts each epoch (counted from batch_idx). Checked before a shift of the lr, which it also fits.",
    requires=Evidence("the side whose rates restart", lambda d: "restarts" in d.evidence),
)


def _never_stepped_a_scheduler(ctx: Context, rank, side: str) -> bool:
    """`side` recorded, at every aligned step, how many scheduler.step() calls came before it, and every count
    is 0: it never stepped a scheduler (the hooks see every call)."""
    counts = [pair[0 if side == "a" else 1].get("scheduler_steps_before") for pair in aligned_records(ctx, rank)]
    return bool(counts) and all(c == 0 for c in counts)


def no_scheduler_steps(ctx: Context, rank) -> bool:
    """Both sides recorded, at every aligned step, how many scheduler.step() calls came before it, and
    every count is 0 (hooks record it; an explicit loop that records nothing leaves it open)."""
    pairs = list(aligned_records(ctx, rank))
    counts = [r.get("scheduler_steps_before") for pair in pairs for r in pair]
    return bool(counts) and all(c == 0 for c in counts)


# ---------------------------------------------------------------------------------------------
# the learning rate


def check_lr(ctx: Context) -> Finding | None:
    """The learning rate differs with equal samples, loss and gradient norm. What the two series' shape
    proves is named (a constant factor, another decay per step, a rate that changes only at epoch
    boundaries on one side, one ulp of arithmetic); a mechanism is claimed only with its evidence."""
    f = ctx.earliest
    if f is None or f["quantity"] != "lr":
        return None
    evidence = {"lr": ctx.both(f["a"], f["b"])}
    pairs = list(aligned_records(ctx, f["rank"]))
    steps, la, lb = relations.series(pairs, "lr")
    shape, said = _lr_shape(ctx, steps, la, lb, [ra.get("epoch") for ra, _ in pairs])
    by_hand = no_scheduler_steps(ctx, f["rank"])  # the hooks saw no scheduler step on either side
    isolated = relations.isolated_steps(steps, la, lb) if shape != "ulp" else None
    late = _side_whose_rate_is_set_after_the_step(ctx, steps, la, lb, isolated)
    if late is not None:  # tested before the isolated step: a first step at the built lr is not a warm-up's bound
        return _rate_set_after_the_step_finding(ctx, f, evidence, late, steps, la, lb)
    if isolated:  # apart at single steps, equal around each: no schedule's shape, a rate set otherwise there
        return _isolated_lr_finding(ctx, f, evidence, isolated, dict(zip(steps, zip(la, lb))))
    if shape in ("decay", "per_epoch") and _counted_alike(ctx, f["rank"]) and not (shape == "per_epoch" and by_hand):
        # the stepping is recorded equal: "stepped another number of times" (or per epoch) is ruled out
        shape = "decay_counted" if shape == "decay" else ""
    evidence["lr_relation"] = shape
    if shape == "":  # one side's rate never moves while the other's does: what that proves comes before a ratio,
        # which is then the other side's rates over a constant (a base rate scaled would part them at every step)
        constant = _constant_lr_finding(ctx, f, evidence, pairs, steps, la, lb)
        if constant is not None:
            return constant
    relation = factor_of(ctx, "lr", f["rank"]) if shape in ("factor", "") else None
    if relation is not None and shape == "" and (relation.first != f["step"] or relation.last <= relation.first):
        relation = None  # a whole factor only where the rates part, held at a step after it too
    if relation is not None:  # a whole factor: the larger side first, and every recorded count it equals
        said = relation.sentence[:-1]
        evidence["relation"] = relation.to_json()
        last = max((s for s, x, y in zip(steps, la, lb) if relations.number(x) and relations.number(y)), default=None)
        if shape == "" and relation.last == last:  # equal, then k × from the step they part to the last one
            shape = evidence["lr_relation"] = "factor_from"
            said += ": from the step they part to the last recorded one, equal before it"
        elif shape == "":  # exact where the rates part, then drifting: a value the scaling did not reach
            shape = evidence["lr_relation"] = "factor_then"
            said += f", and not after step {relation.last} (the ratio drifts from there)"
    if relation is None and shape == "":  # no shape above fits: what the two series' shapes prove, if anything
        shaped = _lr_series_shape_finding(ctx, f, evidence, pairs)
        if shaped is not None:
            return shaped
    facts = (
        f"At step {f['step']} {_matching_before_lr(ctx, f, evidence)}, but the learning rate differs "
        f"({f['a']!r} on {ctx.names[0]} vs {f['b']!r} on {ctx.names[1]}){': ' + said if said else ''}."
    )
    if shape in ("per_epoch", "") and by_hand:
        shape = evidence["lr_relation"] = f"{shape or 'other'}_by_hand"  # the hooks saw no scheduler step anywhere
    why, fix = LR_WORDS.get(shape, LR_WORDS[""])
    return finding(ctx, OPTIMIZER_LR, f["step"], f["rank"], evidence, facts, why=why, fix=fix)


def _matching_before_lr(ctx: Context, f: dict, evidence: dict) -> str:
    """What the step computed before the rate, as recorded: the samples are said to match only where both sides
    recorded them alike and equal, the gradient norm only where it does; a norm a few ulps apart beside the rate
    (walk.py names the rate first then) is said apart."""
    beside = (f.get("beside") or {}).get("grad_norm")
    samples_equal = samples_equal_at(ctx, f["rank"], f["step"])
    unsaid = "" if samples_equal else f" (rank {f['rank']} {consumed_words(ctx, f['rank'], f['step'])})"
    if not beside:
        matched = "the samples, loss and gradient norm match" if samples_equal else "the loss and gradient norm match"
        return matched + unsaid
    ulps = float32_ulps(*beside)
    evidence["grad_norm"] = {"a": beside[0], "b": beside[1], "ulps": ulps}
    return (
        f"{'the samples and loss match' if samples_equal else 'the loss matches'}{unsaid} and the gradient norm is "
        f"{ulps} float32 ulp(s) apart ({beside[0]!r} vs {beside[1]!r}: what a sum in another order rounds to, and no "
        "rate follows from a norm)"
    )


def _lr_shape(ctx: Context, steps, la, lb, epochs) -> tuple[str, str]:
    """(shape, sentence) of two lr series: "per_epoch" where one side's rate changes only at epoch
    boundaries and the other's within an epoch, "ulp" (one ulp apart wherever they differ), "factor" (a
    constant ratio at every step), "decay" (each side decays by its own constant per step, one the other's
    k-th power: stepped k times per optimizer step), or ''."""
    # a rate of 0 is a rate (a warmup from 0, a rate set by hand at an epoch's start): kept, never divided by
    pairs = [
        (s, x, y, e)
        for s, x, y, e in zip(steps, la, lb, epochs)
        if relations.number(x) is not None and relations.number(y) is not None
    ]
    if len(pairs) < 2:
        return "", ""
    differ = [(x, y) for _, x, y, _ in pairs if x != y]
    if differ and all(abs(x - y) <= 2 * math.ulp(max(abs(x), abs(y))) for x, y in differ):
        return "ulp", "one ulp apart wherever they differ: the same rate computed by another expression"
    series = {"a": [(e, x) for _, x, _, e in pairs], "b": [(e, y) for _, _, y, e in pairs]}
    within = {side: _changes_within_epochs(values) for side, values in series.items()}
    for side, other in (("a", "b"), ("b", "a")):
        moves = len({v for _, v in series[side]}) > 1  # it does change: at an epoch boundary
        if within[other] and not within[side] and moves:
            return (
                "per_epoch",
                f"{ctx.label(side)}'s rate changes only at epoch boundaries, the other's within an epoch",
            )
    ratios = [x / y for _, x, y, _ in pairs if x and y]
    one_zero = any(bool(x) != bool(y) for _, x, y, _ in pairs)
    if ratios and not one_zero and all(abs(r / ratios[0] - 1) <= relations.EXACT for r in ratios):
        return "factor", f"{ctx.names[0]}'s rate is {ratios[0]:.6g} × {ctx.names[1]}'s at every step"
    ga, gb = (_constant_decay([p[i] for p in pairs]) for i in (1, 2))
    if ga and gb and ga != gb:
        k = math.log(ga) / math.log(gb) if gb != 1 else None
        power = f" ({ctx.names[0]}'s decay is {ctx.names[1]}'s to the power {k:.3g})" if k else ""
        return "decay", f"each side's rate decays by its own constant per step: {ga:.6g} vs {gb:.6g}{power}"
    return "", ""


def _isolated_lr_finding(ctx: Context, f: dict, evidence: dict, isolated: list, rates: dict) -> Finding:
    """The rates differ at single steps only and agree again after each: the schedules are the same (another
    schedule, length or interval would move the rates after it too), and one side computes the rate otherwise at
    those steps. With the scheduler.step() calls recorded equal, the scheduler is not stepped otherwise there."""
    counted = _counted_alike(ctx, f["rank"])
    steps = ", ".join(map(str, isolated[:4])) + (f" and {len(isolated) - 4} more" if len(isolated) > 4 else "")
    named = f"step {steps}" if len(isolated) == 1 else f"steps {steps}"
    facts = (
        f"At step {f['step']} {_matching_before_lr(ctx, f, evidence)}, but the learning rate differs "
        f"({f['a']!r} on {ctx.names[0]} vs {f['b']!r} on {ctx.names[1]}): the rates differ at {named} alone"
    )
    if len(isolated) > 1:
        facts += " (" + "; ".join(f"step {s}: {fmt(rates[s][0])} vs {fmt(rates[s][1])}" for s in isolated[:4]) + ")"
    compared = sum(1 for x, y in rates.values() if relations.number(x) is not None and relations.number(y) is not None)
    facts += f", equal at the other {compared - len(isolated)} steps both recorded, the step after each included"
    facts += (
        ", with the scheduler.step() calls recorded before each optimizer step equal on both sides."
        if counted
        else "; the scheduler.step() calls were not recorded on both sides."
    )
    built = [s for s, v in zip("ab", rates[isolated[0]]) if v is not None and v == _built_lr(ctx, s)]
    if len(built) == 1:  # the rate a warm-up ends at: that side reaches it a step early (or the other a step late)
        facts += f" {ctx.label(built[0])}'s rate at step {isolated[0]} is the lr its optimizer was built with."
    evidence.update(lr_relation="isolated", isolated_steps=isolated, scheduler_steps_equal=counted)
    why, fix = LR_WORDS["isolated" if counted else "isolated_uncounted"]
    return finding(ctx, OPTIMIZER_LR, f["step"], f["rank"], evidence, facts, why=why, fix=fix.format(steps=named))


def _side_whose_rate_is_set_after_the_step(ctx: Context, steps, la, lb, isolated) -> str | None:
    """The side ("a" or "b") whose first step ran at the lr its optimizer was built with, where the rates differ at
    the run's first step alone and the other side's first rate is not its own built lr: nothing had set that side's
    rate before its first optimizer.step(), and every later rate agrees, so it sets the rate after each step (the
    rate the other sets before it). None where the built lrs are unrecorded (an explicit trace) or it does not fit."""
    if not isolated or isolated != [1] or not steps or steps[0] != 1:
        return None  # a run resumed, or another step apart: what set the rate at step 1 is not in question
    built = {side: _built_lr(ctx, side) for side in "ab"}
    first = {"a": relations.number(la[0]), "b": relations.number(lb[0])}
    if None in built.values() or None in first.values():
        return None
    at_built = [side for side in "ab" if first[side] == built[side]]
    if len(at_built) != 1:
        return None
    moved = _rate_moved_after_the_last_step(ctx, ctx.earliest["rank"], steps, la, lb)
    late, other = at_built[0], "b" if at_built[0] == "a" else "a"
    if moved.get(late) is False and moved.get(other) is True:
        return None  # recorded: the other side, not this one, set a rate after its last step
    return late


def _rate_moved_after_the_last_step(ctx: Context, rank, steps, la, lb) -> dict:
    """{side: whether its lr at the end (the hooks' lr_at_end, taken after the last step both recorded) differs from
    the rate its last step ran at}, for each side that recorded it: a rate set after optimizer.step() is seen there,
    the step it was set for never coming."""
    return {side: ends[1] != ends[0] for side, ends in _rates_at_the_end(ctx, rank, steps, la, lb).items()}


def _rates_at_the_end(ctx: Context, rank, steps, la, lb) -> dict:
    """{side: (the rate its last step ran at, its lr_at_end)} for each side whose hooks took it after that step."""
    out = {}
    for side, rates in (("a", la), ("b", lb)):
        end = read_hook_facts(ctx.run(side), rank).get("lr_at_end")
        last = relations.number(rates[-1]) if rates else None
        at_end = relations.number(end.get("lr")) if isinstance(end, dict) else None
        if at_end is not None and last is not None and end.get("after_step") == steps[-1]:
            out[side] = (last, at_end)
    return out


def _rate_set_after_the_step_finding(ctx: Context, f: dict, evidence: dict, late: str, steps, la, lb) -> Finding:
    """The rates differ at step 1 alone, where `late`'s is the lr its optimizer was built with: `late` sets the
    rate after optimizer.step() instead of before it. A warm-up's bound off by one fits the same numbers only where
    `late`'s warm-up ended before step 1 and the other's at step 2: named beside it unless the records rule it out
    (common rates still rising after step 1: a warm-up both sides are in; or the hooks' lr_at_end showing `late`
    alone setting a rate after its last step)."""
    other = "b" if late == "a" else "a"
    common = [x for x, y in zip(la[1:], lb[1:]) if relations.number(x) is not None and relations.number(y) is not None]
    ends = _rates_at_the_end(ctx, f["rank"], steps, la, lb)
    moved = {side: end != last for side, (last, end) in ends.items()}
    seen_after = moved.get(late) is True and moved.get(other) is False
    rising = any(y > x for x, y in zip(common, common[1:]))  # a warm-up still going after step 1, on both sides
    facts = _set_after_facts(ctx, f, evidence, late, len(common))
    if seen_after:  # what the hooks saw at the end: a rate set after the step, on that side alone
        (last, end), n = ends[late], steps[-1]
        facts += (
            f" After its last step {ctx.label(late)}'s rate was set again ({fmt(last)} at step {n}, {fmt(end)} at the "
            f"end: the hooks' lr_at_end), {ctx.label(other)}'s was not: a rate for a step that never came."
        )
    evidence.update(
        lr_relation="set_after_step",
        set_after_step=ctx.label(late),
        isolated_steps=[1],
        built_lr=ctx.both(_built_lr(ctx, "a"), _built_lr(ctx, "b")),
        scheduler_steps_equal=_counted_alike(ctx, f["rank"]),
        warmup_bound_ruled_out=rising or seen_after,
        lr_moved_after_last_step={ctx.label(side): value for side, value in moved.items()},
    )
    why, fix = LR_WORDS["set_after_step"]
    why += "" if rising or seen_after else WARMUP_BOUND_FITS_TOO
    names = {"side": ctx.label(late), "other": ctx.label(other)}
    return finding(ctx, OPTIMIZER_LR, 1, f["rank"], evidence, facts, why=why.format(**names), fix=fix.format(**names))


def _set_after_facts(ctx: Context, f: dict, evidence: dict, late: str, equal_after: int) -> str:
    """What the records show of a rate set after the step: the rates, the built lr on `late` alone, the later rates
    equal, and (where the hooks saw no scheduler.step() on either side) the rate set by hand."""
    other = "b" if late == "a" else "a"
    facts = (
        f"At step 1 {_matching_before_lr(ctx, f, evidence)}, but the learning rate differs ({f['a']!r} on "
        f"{ctx.names[0]} vs {f['b']!r} on {ctx.names[1]}): {ctx.label(late)}'s rate at step 1 is the lr its "
        f"optimizer was built with ({fmt(_built_lr(ctx, late))}), {ctx.label(other)}'s is not (built with "
        f"{fmt(_built_lr(ctx, other))}), and the rates are equal at the other {equal_after} steps both recorded."
    )
    if no_scheduler_steps(ctx, f["rank"]):  # the hooks saw every scheduler.step(): none, the rate is set by hand
        facts += (
            " Neither side stepped a scheduler (no scheduler.step() recorded before any step): the rate is set by hand."
        )
    return facts


def _built_lr(ctx: Context, side: str):
    """The lr of the first param group as the side's optimizer was built (the hooks' optimizer_built); None
    unrecorded (an explicit trace reads its optimizer at the first record, after a scheduler may have moved it)."""
    optimizer = constructed_optimizer(ctx.meta(side))
    groups = optimizer.get("param_groups") if isinstance(optimizer, dict) else None
    first = groups[0] if isinstance(groups, list) and groups and isinstance(groups[0], dict) else {}
    return relations.number(first.get("lr"))


def _counted_alike(ctx: Context, rank) -> bool:
    """Both sides recorded the scheduler.step() calls before every optimizer step, and they are equal."""
    rows = recorded_counts(ctx, rank)
    return bool(rows) and all(ca == cb for _, ca, cb, _ in rows)


def _changes_within_epochs(values: list[tuple]) -> bool:
    return any(e1 == e2 and v1 != v2 for (e1, v1), (e2, v2) in zip(values, values[1:]))


def _constant_decay(values: list[float]) -> float | None:
    ratios = [y / x for x, y in zip(values, values[1:]) if x]
    if len(ratios) < 2 or not all(abs(r / ratios[0] - 1) <= 1e-9 for r in ratios) or ratios[0] == 1:
        return None
    return ratios[0]


# where the rate at step 1 alone is the built lr, the one other reading those numbers fit (said unless ruled out)
WARMUP_BOUND_FITS_TOO = (
    " The same numbers would come from a warm-up's bound off by one only where {side}'s warm-up ended before step 1 "
    "and {other}'s at step 2; where {side} sets its rate (after or before optimizer.step()) tells the two apart."
)

# why, fix for each shape of two lr series (check_lr): a mechanism only where the shape shows it
LR_WORDS = {
    "per_epoch": (
        "The learning-rate schedule is stepped per epoch on one side and per optimizer step on the other "
        "(Lightning's `interval`).",
        "Step the scheduler with the same interval on both sides: once per epoch for interval 'epoch', once per "
        "optimizer step (after optimizer.step()) for interval 'step'.",
    ),
    "per_epoch_by_hand": (
        "Neither side stepped a scheduler (no scheduler.step() recorded before any step): the rate is set by hand, "
        "once per epoch on one side (computed from the epoch alone) and at every optimizer step on the other "
        "(from the epoch and the step within it, such as epoch + i / iters_per_epoch).",
        "Set the rate at the same points on both sides, by the same expression: every optimizer step, from the same "
        "fractional epoch or step count (or once per epoch on both).",
    ),
    "other_by_hand": (
        "Neither side stepped a scheduler (no scheduler.step() recorded before any step): the rate is set by hand, "
        "and the two sides compute other rates: another expression, another warmup or length, or the rate set at "
        "another point of the step.",
        "Compute the rate by the same expression, from the same step or epoch count, at the same point of each step "
        "on both sides (before optimizer.step()).",
    ),
    "factor": (
        "A rate k × the other's at every step is another base rate: the lr given to the optimizer or the "
        "scheduler (an lr scaled by the world size or the batch size on one side).",
        "Give the optimizer (and the scheduler's max_lr/base_lr) the same rate on both sides.",
    ),
    "factor_then": (
        "A rate exactly k × the other's where the rates part is another base rate (the lr given to the optimizer or "
        "the scheduler scaled by the world size or the batch size on one side); where the ratio then drifts, a part "
        "of the schedule is not scaled with it, typically a floor such as min_lr or eta_min, or a final rate.",
        "Give the optimizer (and the scheduler's base rate) the same rate on both sides; scale the floor alike too, "
        "or on neither side.",
    ),
    "factor_from": (
        "Equal rates that become k × the other's at one step and stay so are a change of the rate at that step on "
        "one side only or by another amount: a milestone, the end of a warmup, a rate set by hand from a step on.",
        "Change the rate at the same step by the same amount on both sides (the same milestones and warmup length, "
        "the same rate set by hand).",
    ),
    "decay": (
        "The two schedules decay by different constants per optimizer step: another gamma, or the scheduler "
        "stepped another number of times per optimizer step (per micro-batch under accumulation).",
        "Build the same scheduler with the same gamma on both sides and step it once per optimizer step, after "
        "optimizer.step().",
    ),
    "decay_counted": (
        "The two schedules decay by different constants per optimizer step, while both sides stepped their "
        "schedulers equally often (the scheduler.step() calls recorded before each optimizer step are equal): "
        "another gamma, or another schedule.",
        "Build the same scheduler with the same gamma (the same schedule and its parameters) on both sides.",
    ),
    "ulp": (
        "The same rate computed by other float expressions differs in the last bit (a closed form such as base_lr "
        "× factor against a rate updated step by step): the update then differs by that bit.",
        "Compute the rate by the same expression on both sides: the same formula, or the same scheduler class "
        "(and lambda) stepped alike.",
    ),
    "isolated": (
        "The rates agree again right after each of those steps, so the schedules have the same shape, length and "
        "interval (another one would move the rates after them too), and both sides stepped their schedulers alike "
        "(or neither stepped one): one side sets the rate by hand at those steps, typically a warm-up's last step, "
        "its bound off by one (`step < warmup` against `step <= warmup`, or a step counted from 0 against 1); a "
        "schedule's own function (a LambdaLR's lambda) with such a bound gives the same numbers.",
        "Give {steps} the same rate on both sides: compare the bound of the warm-up (or of what sets the rate by "
        "hand there) with the other side's, so that it ends at the same step, counted from the same 0 or 1.",
    ),
    "set_after_step": (
        "{side} sets the rate after optimizer.step() instead of before it: nothing has set a rate before its "
        "first step, which runs at the lr the optimizer was built with, and each later step runs at the rate set "
        "after the step before, the one {other} sets before it (computed from a step count that has already "
        "advanced).",
        "On {side}, set the rate before optimizer.step(), from the same step count as {other} (in Lightning: in "
        "on_train_batch_start, or in training_step before the optimizer steps; not after opt.step() or in "
        "on_train_batch_end), so that step 1 runs at its rate too.",
    ),
    "isolated_uncounted": (
        "The rates agree again after each step they differ at, so the schedules have the same shape and length: "
        "one side computes the rate otherwise at those steps, set by hand there (a warm-up's last step, its bound "
        "off by one) or a schedule's function with such a bound, or its scheduler stepped otherwise at those steps "
        "alone; the scheduler.step() calls each side made before every optimizer step tell these apart (recorded "
        "by ddp-parity record's hooks).",
        "Give {steps} the same rate on both sides: compare the bound of the warm-up (or of what sets the rate "
        "there) with the other side's, and step the scheduler at the same points.",
    ),
    "": (
        "The learning-rate schedule differs: another schedule, another length in steps, or another interval.",
        "Build and step the same schedule on both sides: after optimizer.step(), with the same interval and "
        "parameters (a schedule sized in steps, like OneCycleLR, needs the same total_steps: optimizer steps, "
        "len(train_loader) x epochs / accumulation, not len(dataset): Lightning #2643).",
    ),
}


# ---------------------------------------------------------------------------------------------
# one param group's rate apart, group 0's equal (walk.compared_values reads every group's)


def check_group_lr(ctx: Context) -> Finding | None:
    """A param group after the first steps at another rate, the record's `lr` (group 0's) equal: the group, its two
    rates and their ratio where it holds at every step both record that group."""
    f = ctx.earliest
    if f is None or f["quantity"] != "lr" or not isinstance(f.get("group"), int):
        return None
    group = f["group"]
    rates = [_group_rates(ra, rb, group) for ra, rb in aligned_records(ctx, f["rank"])]
    ratios = [a / b for a, b in (r for r in rates if r is not None) if b]
    ratio = f["a"] / f["b"] if f["b"] else None
    held = ratio is not None and ratios and all(abs(r - ratio) <= 1e-6 * abs(ratio) for r in ratios)
    big, small, k = (0, 1, ratio) if ratio is None or ratio >= 1 else (1, 0, 1 / ratio)
    said = f"{ctx.names[big]}'s is {k:.6g} × {ctx.names[small]}'s" if k is not None else "one is 0"
    facts = (
        f"At step {f['step']} rank {f['rank']} param group {group} steps at another learning rate ({f['a']!r} on "
        f"{ctx.names[0]} vs {f['b']!r} on {ctx.names[1]}: {said}"
        f"{', at every step both record it' if held else ''}), while group 0's rate (the record's lr) is equal."
    )
    evidence = {"lr": ctx.both(f["a"], f["b"]), "group": group, "ratio": ratio, "held": bool(held)}
    return finding(ctx, OPTIMIZER_LR_GROUP, f["step"], f["rank"], evidence, facts, group=group)


def _group_rates(ra: dict, rb: dict, group: int) -> tuple[float, float] | None:
    rows = [r.get("param_groups") for r in (ra, rb)]
    if not all(isinstance(g, list) and len(g) > group and isinstance(g[group], dict) for g in rows):
        return None
    a, b = rows[0][group].get("lr"), rows[1][group].get("lr")
    return (a, b) if relations.number(a) is not None and relations.number(b) is not None else None


OPTIMIZER_LR_GROUP = Cause(
    "optimizer.lr_group",
    check_group_lr,
    why="The optimizer applies each param group's rate to that group's parameters only: those move otherwise from "
    "this step on. A rate multiplied for one group (a head or non-backbone group at k × the base lr) is set where "
    "the groups are built, and again wherever the loop sets each group's rate by hand; a port that builds the "
    "groups without the multiplier, or sets every group to one rate, loses it.",
    fix="Give param group {group} the same learning rate on both sides: the same multiplier where its group is built "
    "(optimizer.param_groups[{group}]['lr'] at the first step equal on both) and wherever the rate is set afterwards "
    "(a schedule scales each group's own initial lr; a rate set by hand must set this group's too).",
    doc="The record's lr (group 0's) equal and another param group's rate apart at the first divergence (the hooks' "
    "param_groups, read every step): the group, both rates and their ratio, said held where it holds at every step.",
    requires=Evidence("every param group's rate at that step", lambda d: "group" in d.evidence),
)


OPTIMIZER_LR = Cause(
    "optimizer.lr",
    check_lr,
    why="{why}",
    fix="{fix}",
    doc="The learning rate differs with equal gradients, its shape named: a factor, another decay per step, one "
    "side stepping per epoch (only where its rate changes at epoch boundaries alone), one ulp, apart at isolated "
    "steps only (equal around each: a rate set by hand there, a warm-up's bound off by one, where the scheduler "
    "steps are recorded equal), or at step 1 alone where one side's rate there is the lr its optimizer was built "
    "with (recorded by the hooks) and the other's is not: that side sets the rate after optimizer.step() instead of "
    "before it; one side's rate never moving while the other's changes (its schedule never stepped, or stepped per "
    "epoch where no epoch boundary tells; where the hooks saw that side build a scheduler and step it never, or only "
    "after the last step compared (at an epoch's end), that scheduler, with the mechanisms its loop leaves open: "
    "Lightning's default interval 'epoch', manual optimization, a scheduler not returned from configure_optimizers, "
    "a call left out; read before a ratio of the two rates, which is then no base rate); the same schedule (or "
    "warm-up) k times as long on one side, "
    "k named by every recorded count it equals; else the schedule's length in steps (#2643). Where neither side "
    "stepped a scheduler, the rate is said set by hand.",
)


# ---------------------------------------------------------------------------------------------
# the lr series' shape: a rate that never moves on one side, the same schedule k times as long


def _lr_series_shape_finding(ctx: Context, f: dict, evidence: dict, pairs: list) -> Finding | None:
    """Where no shape above fits the two lr series (no factor, decay, per-epoch rate, ulp or isolated step): one
    side's rate never moves while the other's does, or one side runs the other's schedule k times as long. Each is
    what the series prove, said before the generic words that list candidates."""
    steps, la, lb = relations.series(pairs, "lr")
    return _constant_lr_finding(ctx, f, evidence, pairs, steps, la, lb) or _stretched_lr_finding(
        ctx, f, evidence, pairs, steps, la, lb
    )


def _constant_lr_finding(ctx: Context, f: dict, evidence: dict, pairs: list, steps, la, lb) -> Finding | None:
    """One side's rate is one value at every step compared, the other's changes: that side's schedule is never
    stepped. The recorded scheduler.step() calls prove it where a torch scheduler stepped on the other side; else the
    epoch boundaries among the steps compared rule out a schedule stepped per epoch, or the finding names both."""
    relation = relations.constant_relation("lr", ctx.names, steps, la, lb)
    if relation is None:
        return None
    side = "a" if relation.side == ctx.names[0] else "b"
    other = "b" if side == "a" else "a"
    facts = (
        f"At step {f['step']} {_matching_before_lr(ctx, f, evidence)}, but the learning rate differs ({f['a']!r} on "
        f"{ctx.names[0]} vs {f['b']!r} on {ctx.names[1]}): {relation.sentence[:-1]}; {relation.value!r} is "
        f"{_constant_rate_is(ctx, side, relation.value)}."
    )
    evidence.update(lr_relation="constant_side", constant_side=relation.side, relation=relation.to_json())
    built = _built_never_stepped(ctx, f["rank"], pairs, side, other)
    if built is not None:  # the hooks saw that side build a scheduler and never step it
        said, why, fix, classes = built
        evidence["schedulers_not_stepped"] = {relation.side: classes}  # before any step compared
        return finding(ctx, OPTIMIZER_LR, f["step"], f["rank"], evidence, facts + said, why=why, fix=fix)
    key, said = _never_stepped_or_how(ctx, f["rank"], pairs, side, other)
    why, fix = (words.format(side=relation.side, other=relation.other) for words in LR_SHAPE_WORDS[key])
    return finding(ctx, OPTIMIZER_LR, f["step"], f["rank"], evidence, facts + said, why=why, fix=fix)


def _built_never_stepped(ctx: Context, rank, pairs: list, side: str, other: str) -> tuple | None:
    """(facts, why, fix, the classes) where `side`, whose rate never moves, built a torch scheduler (the hooks'
    `schedulers`) and recorded no scheduler.step() call before any step compared (the hooks count every call): the
    scheduler holds the rate it set when built. Where the hooks saw it stepped after the last of those steps only (their
    `scheduler_steps`), it is stepped at an epoch's end, once per epoch. The mechanisms named are those the side's loop
    leaves open: on a Lightning side (the hooks' `lightning_loop`), manual optimization where it was recorded, else the
    default interval 'epoch' (where no epoch boundary among the steps rules it out) and a scheduler not returned from
    configure_optimizers; on a loop of its own, the call left out (or made once per epoch, where no boundary rules that
    out). None where the counts or the schedulers are unrecorded, or the side stepped one before a step compared."""
    rows = recorded_counts(ctx, rank)
    if not rows:
        return None
    calls = {s: sum(r[1 if s == "a" else 2] for r in rows) for s in ("a", "b")}
    facts = read_hook_facts(ctx.run(side), rank)
    classes = [str(item.get("class")) for item in fact_items(facts, "schedulers") if item.get("class")]
    if calls[side] or not classes:
        return None
    last = rows[-1][0]
    after = _scheduler_steps_after(facts, last)
    one = len(classes) == 1
    built = f"a {classes[0]}" if one else f"{len(classes)} schedulers ({', '.join(classes)})"
    if after:
        said = (
            f" {ctx.label(side)} built {built} and stepped {'it' if one else 'them'} only after the last of these "
            f"steps (after step {relations.steps_in_words(after)}: the hooks' scheduler_steps), never before any of "
            "them"
        )
    else:
        said = (
            f" {ctx.label(side)} built {built} and never stepped {'it' if one else 'them'} (the hooks' schedulers; no "
            "scheduler.step() call recorded before any of these steps)"
        )
    if calls[other]:
        said += (
            f". The scheduler.step() calls recorded: none on {ctx.label(side)}, {calls[other]} on {ctx.label(other)}."
        )
    else:
        said += (
            f"; {ctx.label(other)} stepped no torch scheduler either: its rate moves by hand or by a scheduler that is "
            "not torch's."
        )
    own = [pair[0 if side == "a" else 1].get("epoch") for pair in pairs]
    crossed = all(isinstance(e, int) for e in own) and len(set(own)) > 1  # 0 calls across an epoch boundary
    per_epoch_open = not crossed and _per_epoch_refuted(pairs, 0 if other == "a" else 1) is None
    if not per_epoch_open:
        said += " An epoch boundary lies among these steps: it is not stepped per epoch either."
    loop = next(iter(fact_items(facts, "lightning_loop")), None)
    kind = "loop" if not isinstance(loop, dict) else "manual" if loop.get("automatic_optimization") is False else ""
    kind = kind or "lightning"
    if after and per_epoch_open:  # stepped at the end alone: once per epoch (or after the training)
        kind += "_at_end"
    elif kind != "manual" and not per_epoch_open:
        kind += "_not_per_epoch"
    why, fix = BUILT_NEVER_STEPPED[kind]
    names = {"side": ctx.label(side), "other": ctx.label(other), "after": relations.steps_in_words(after)}
    why, fix = BUILT_NEVER_STEPPED_WHY + " " + why, BUILT_NEVER_STEPPED_FIX + fix
    return said, why.format(**names), fix.format(**names), classes


def _scheduler_steps_after(facts: dict, last: int) -> list[int]:
    """The optimizer steps done when a scheduler.step() ran after step `last` (the hooks' scheduler_steps)."""
    runs = facts.get("scheduler_steps")
    entries = runs.values() if isinstance(runs, dict) else []
    done = [x for e in entries if isinstance(e, dict) for x in e.get("after_step") or [] if isinstance(x, int)]
    return sorted({x for x in done if x >= last})


BUILT_NEVER_STEPPED_WHY = (
    "A torch scheduler sets the rate when it is built and again only when its step() is called: {side}'s holds the "
    "rate it started at because its step() did not run before any of these steps, while {other}'s rate moves."
)
BUILT_NEVER_STEPPED_FIX = (
    "On {side}, step the scheduler once per optimizer step, after optimizer.step(), as {other}'s rate moves: "
)
# the mechanisms that leave a built scheduler unstepped over the steps compared, by what the side's records leave open
# (its loop, an epoch boundary among the steps, a step() seen after the last of them): (why, how to fix)
LIGHTNING_STEP_INTERVAL = (
    "return it from configure_optimizers with interval 'step' ({{'optimizer': optimizer, 'lr_scheduler': "
    "{{'scheduler': scheduler, 'interval': 'step'}}}})."
)
MANUAL_STEP = "call self.lr_schedulers().step() after each opt.step() in training_step."
BUILT_NEVER_STEPPED = {
    "manual": (
        "{side} trains under Lightning's manual optimization (automatic_optimization = False, recorded), where "
        "Lightning steps no scheduler: the training_step must step it (self.lr_schedulers().step()), and did not.",
        MANUAL_STEP,
    ),
    "manual_at_end": (
        "{side} trains under Lightning's manual optimization (automatic_optimization = False, recorded), where "
        "Lightning steps no scheduler: the module steps it itself, once at an epoch's end (after step {after}), not "
        "after each opt.step().",
        MANUAL_STEP,
    ),
    "lightning": (
        "On Lightning this is a scheduler returned from configure_optimizers with the default interval 'epoch', "
        "stepped at an epoch's end that these steps never reach (one epoch, or the one endless epoch of an iterable "
        "loader), or one built but not returned from configure_optimizers (Lightning steps only those it is given); "
        "a run over an epoch boundary tells them apart.",
        LIGHTNING_STEP_INTERVAL,
    ),
    "lightning_not_per_epoch": (
        "On Lightning this is a scheduler built but not returned from configure_optimizers (Lightning steps only "
        "those it is given; one returned with the default interval 'epoch' would have stepped at the epoch boundary).",
        LIGHTNING_STEP_INTERVAL,
    ),
    "lightning_at_end": (
        "On Lightning this is a schedule stepped once per epoch, at the end of the epoch these steps lie in: a "
        "scheduler returned from configure_optimizers with the default interval 'epoch', or a step() the module calls "
        "at an epoch's (or the training's) end.",
        LIGHTNING_STEP_INTERVAL,
    ),
    "loop": (
        "In a loop of its own, its scheduler.step() is never called (left out, or under a condition never met), or "
        "called once per epoch where these steps lie within one epoch; a run over an epoch boundary tells them apart.",
        "call scheduler.step() there.",
    ),
    "loop_not_per_epoch": (
        "In a loop of its own, its scheduler.step() is never called (left out, or under a condition never met).",
        "call scheduler.step() there.",
    ),
    "loop_at_end": (
        "In a loop of its own, its scheduler.step() is called at the end alone (after step {after}: once per epoch, "
        "at the end of the epoch these steps lie in, or after the training), not per optimizer step.",
        "call scheduler.step() there, not at the epoch's end.",
    ),
}


def _constant_rate_is(ctx: Context, side: str, value: float) -> str:
    """What the rate that never moves is, as recorded: the lr its optimizer was built with (no schedule moved it),
    or its first rate only (a schedule sets its start when built: a warm-up's first rate)."""
    built = _built_lr(ctx, side)
    if built is None:
        return f"{ctx.label(side)}'s first recorded rate (its optimizer's lr as built is unrecorded)"
    if built == value:
        return f"the lr {ctx.label(side)}'s optimizer was built with: no schedule ever moved it"
    return (
        f"{ctx.label(side)}'s first rate, not the lr its optimizer was built with ({built!r}): set before step 1 (a "
        "schedule sets its first rate when it is built: a warm-up's start) and never moved after"
    )


def _never_stepped_or_how(ctx: Context, rank, pairs: list, side: str, other: str) -> tuple[str, str]:
    """(key of LR_SHAPE_WORDS, the facts that chose it) for a side whose rate never moves: the scheduler.step()
    calls recorded on each side where there are any, else the epoch boundaries among the steps compared."""
    rows = recorded_counts(ctx, rank)
    calls = {s: sum(r[1 if s == "a" else 2] for r in rows) for s in ("a", "b")} if rows else None
    if calls and calls[side]:
        said = (
            f" {ctx.label(side)} recorded {calls[side]} scheduler.step() call(s) over these steps, {calls[other]} on "
            f"{ctx.label(other)}: its scheduler is stepped, yet its rate never moves."
        )
        return "stepped_constant", said
    if calls and calls[other]:
        said = f" The scheduler.step() calls recorded: none on {ctx.label(side)}, {calls[other]} on {ctx.label(other)}."
        return "never_stepped", said
    by_hand = "_by_hand" if calls is not None else ""  # neither stepped a torch scheduler: the hooks saw no call
    refuted = _per_epoch_refuted(pairs, 0 if other == "a" else 1)
    if refuted is None:
        return f"never_stepped_or_per_epoch{by_hand}", NO_EPOCH_BOUNDARY_TELLS
    boundaries, step, value = refuted
    said = (
        f" It did not move at the epoch boundaries among them either (step {relations.steps_in_words(boundaries)}), "
        f"where the same schedule stepped once per epoch would have taken {ctx.label(other)}'s rate of step {step} "
        f"({value!r}): it is not stepped per epoch."
    )
    return f"never_stepped{by_hand}", said


NO_EPOCH_BOUNDARY_TELLS = (
    " No epoch boundary among the steps compared tells a schedule never stepped from one stepped once per epoch "
    "(which would move there): a run over more epochs tells them apart."
)


def _per_epoch_refuted(pairs: list, moving: int) -> tuple[list, int, float] | None:
    """(the epoch boundaries, step s, value) where the moving side's schedule, stepped once per epoch on the other
    side, would have moved it by the j-th boundary: after j steps of the schedule it holds the moving side's rate of
    its (j+1)-th step, which differs from its first. None where no recorded boundary shows that."""
    records = [pair[moving] for pair in pairs if relations.number(pair[moving].get("lr")) is not None]
    epochs = [r.get("epoch") for r in records]
    if not records or not all(isinstance(e, int) for e in epochs):
        return None
    boundaries = [r["step"] for prev, r in zip(records, records[1:]) if r.get("epoch") != prev.get("epoch")]
    first = records[0]["lr"]
    moved = next((j for j in range(1, len(boundaries) + 1) if records[j]["lr"] != first), None)
    return (boundaries, records[moved]["step"], records[moved]["lr"]) if moved else None


def _stretched_lr_finding(ctx: Context, f: dict, evidence: dict, pairs: list, steps, la, lb) -> Finding | None:
    """One side's rates are the other's schedule k times as long (at the steps both have, or the same warm-up from
    the same start to the same peak at 1/k the slope): its schedule was sized from another count, named where a
    recorded count equals k (all of them where several do)."""
    counts = _stretch_counts(ctx, f["rank"], pairs)
    relation = relations.stretch_relation("lr", ctx.names, steps, la, lb, counts) or relations.warmup_relation(
        "lr", ctx.names, steps, la, lb, counts
    )
    if relation is None:
        return None
    facts = (
        f"At step {f['step']} {_matching_before_lr(ctx, f, evidence)}, but the learning rate differs ({f['a']!r} on "
        f"{ctx.names[0]} vs {f['b']!r} on {ctx.names[1]}): {relation.sentence}"
    )
    evidence.update(lr_relation=relation.kind, relation=relation.to_json())
    values = {"long": relation.side, "short": relation.other, "k": relation.value}
    named = [STRETCH_BY_COUNT.get(c.split("=")[0], "length") for c in relation.counts] or ["length"]
    named = list(dict.fromkeys(named))  # the accumulation and the micro-batches per step are one mechanism
    why = " ".join([STRETCH_WHY[relation.kind]] + [STRETCH_WORDS[n][0] + "." for n in named])
    why += STRETCH_APART if len(named) > 1 else ""
    fix = "; or, ".join(STRETCH_WORDS[n][1] for n in named) + "."
    fix = fix[0].upper() + fix[1:]
    return finding(ctx, OPTIMIZER_LR, f["step"], f["rank"], evidence, facts, why=why.format(**values), fix=fix)


def _stretch_counts(ctx: Context, rank, pairs: list) -> dict[str, int]:
    """The recorded counts a schedule's length is sized by, most telling first: the accumulation and micro-batches
    per step, the steps per epoch, then the world size and the batch size (relation_counts)."""
    counts = relation_counts(ctx, "lr")
    per_epoch = _steps_per_epoch(ctx, rank, pairs)
    first = {k: v for k, v in counts.items() if k not in ("world_size", "batch_size")}
    if per_epoch and per_epoch > 1:
        first["steps per epoch"] = per_epoch
    return {**first, **counts}


def _steps_per_epoch(ctx: Context, rank, pairs: list) -> int | None:
    """The optimizer steps an epoch takes: the trained loader's length over the micro-batches a step (the hooks'
    loader_iterators), else the steps of each whole recorded epoch (one with a recorded epoch after it, and before
    it or from step 1), where they are one number. None unrecorded."""
    loader = _epoch_of_the_trained_loader(ctx, rank, pairs)
    if loader is not None:
        return loader["steps"]
    epochs = [(ra.get("step"), ra.get("epoch")) for ra, rb in pairs if ra.get("epoch") == rb.get("epoch")]
    order = list(dict.fromkeys(e for _, e in epochs))
    whole = [e for i, e in enumerate(order[:-1]) if i > 0 or epochs[0][0] == 1]
    sizes = {sum(1 for _, x in epochs if x == e) for e in whole}
    return sizes.pop() if len(sizes) == 1 else None


# the words of a rate that never moves on one side (_constant_lr_finding), by what the records prove of its stepping
LR_SHAPE_WORDS = {
    "never_stepped": (
        "A schedule never stepped holds the rate it started at while the other side's moves: the scheduler is built "
        "but its step is never called, or called where it does nothing (a scheduler stepped with the epoch it "
        "already holds, or through a method that does not advance a per-update schedule).",
        "On {side}, step the schedule once per optimizer step, after optimizer.step(), as {other} does: in Lightning, "
        "return the scheduler from configure_optimizers with interval 'step' (a scheduler that is not torch's, such "
        "as timm's, through its per-update method, step_update(num_updates), in lr_scheduler_step).",
    ),
    "never_stepped_or_per_epoch": (
        "A schedule that holds its first rate over every step compared while the other side's moves is never "
        "stepped on that side (its step never called, or called where it does nothing), or stepped once per epoch "
        "(Lightning's default interval 'epoch') where the other side steps it per optimizer step.",
        "On {side}, step the schedule once per optimizer step, after optimizer.step(), as {other} does: in Lightning, "
        "return the scheduler from configure_optimizers with interval 'step' (a scheduler that is not torch's, such "
        "as timm's, through its per-update method, step_update(num_updates), in lr_scheduler_step).",
    ),
    "never_stepped_by_hand": (
        "Neither side stepped a torch scheduler (the hooks count every LRScheduler.step() call): {other} sets its "
        "rate at each step otherwise, by hand or through a scheduler that is not torch's (timm's write the param "
        "groups themselves), and {side} never changes it: the code or call that sets it per optimizer step is left "
        "out, or called where it does nothing (a per-epoch call, such as timm's step(epoch), of a schedule advanced "
        "per update).",
        "On {side}, set the rate at every optimizer step as {other} does: the same code, or the same scheduler's "
        "per-update call (timm's step_update(num_updates)) after each optimizer.step().",
    ),
    "never_stepped_or_per_epoch_by_hand": (
        "Neither side stepped a torch scheduler (the hooks count every LRScheduler.step() call): {other} sets its "
        "rate at each step otherwise, by hand or through a scheduler that is not torch's (timm's write the param "
        "groups themselves), and {side} never changes it over the steps compared: the code or call that sets it per "
        "optimizer step is left out or does nothing there, or it sets the rate once per epoch only.",
        "On {side}, set the rate at every optimizer step as {other} does: the same code, or the same scheduler's "
        "per-update call (timm's step_update(num_updates)) after each optimizer.step().",
    ),
    "stepped_constant": (
        "A scheduler stepped whose rate never moves holds a schedule that is flat over these steps (another "
        "schedule, or one whose first change lies later), or it is not the scheduler of the optimizer trained.",
        "Build the same schedule, with the same parameters, over the trained optimizer on both sides ({side} as "
        "{other}), and step it alike.",
    ),
}

# the words of the same schedule k times as long (_stretched_lr_finding): what the relation proves, then per recorded
# count equal to k the mechanism that count gives and its fix
STRETCH_WHY = {
    "stretch": "{long} runs {short}'s schedule {k} times as long (its rates are {short}'s at {k} times the steps): "
    "the schedule's length and warm-up were computed from another count on one side.",
    "warmup_stretch": "{long}'s warm-up is {short}'s {k} times as long (the same start and peak, 1/{k} the slope): "
    "the warm-up's length was computed from another count on one side.",
}
STRETCH_BY_COUNT = {
    **dict.fromkeys(ACCUMULATION_KEYS, "micro_batches"),
    "micro-batches per step": "micro_batches",
    "steps per epoch": "epochs",
    "world_size": "world",
    "batch_size": "samples",
}
STRETCH_WORDS = {
    "micro_batches": (
        "{k} is the micro-batches per optimizer step: {long}'s schedule is sized in micro-batches (the loader's "
        "batches, len(train_loader) × epochs) where {short}'s is sized in optimizer updates (divided by the "
        "accumulation)",
        "size the schedule in optimizer updates on both sides, warm-up included: len(train_loader) // accumulation "
        "× epochs (Lightning's trainer.estimated_stepping_batches)",
    ),
    "epochs": (
        "{k} is the steps per epoch: a length given in epochs is taken as steps on one side, both stepped per "
        "optimizer step ({short}'s epochs taken as updates, or {long}'s updates multiplied by the steps per epoch "
        "once too often)",
        "count the warm-up and the length in the unit the schedule is stepped in on both sides: optimizer updates "
        "(epochs × steps per epoch) for a schedule stepped per update",
    ),
    "world": (
        "{k} is the world_size: {long}'s schedule is sized from the whole dataset (len(dataset) / batch_size) where "
        "{short}'s is sized from its rank's share (len(train_loader) under a DistributedSampler)",
        "size the schedule from the training loader as each rank sees it (len(train_loader), after the "
        "DistributedSampler) on both sides",
    ),
    "samples": (
        "{k} is the batch_size: {long}'s schedule is sized in samples (len(dataset)) where {short}'s is in batches",
        "size the schedule in batches (len(train_loader)), not samples, on both sides",
    ),
    "length": (
        "{k} is none of the counts recorded (the accumulation, the micro-batches per step, the steps per epoch, the "
        "world size, the batch size): the schedule's length or warm-up is given otherwise on each side",
        "give both schedules the same warm-up and length, counted in optimizer updates",
    ),
}
STRETCH_APART = (
    " The records cannot tell these apart: a run where these counts differ (another accumulation, epoch length or "
    "number of ranks) does, as {k} follows the count that sized the schedule."
)


# ---------------------------------------------------------------------------------------------
# the update


def check_param_digest(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "param_digest":
        return None
    ulps = max((float32_ulps_or_far(x, y) for x, y in zip(f["a"], f["b"])), default=None)
    evidence = {"param_digest": ctx.both(f["a"], f["b"]), "ulps": ulps}
    loss = same_loss_words(ctx, f["rank"], f["step"], same="")  # "": the loss recorded on both sides
    with_same = (
        f"with the same gradient norm and learning rate ({loss})"
        if loss
        else "with the same loss, gradient norm and learning rate"
    )
    facts = (
        f"At step {f['step']} rank {f['rank']} {consumed_words(ctx, f['rank'], f['step'])} {with_same}, "
        f"yet the parameters after the step differ (param_digest {fmt(f['a'])} vs {fmt(f['b'])})."
    )
    if f.get("layers_apart"):  # the walk read the layers' sketches apart under an equal digest (walk.py)
        ulps = evidence["ulps"] = None
        facts = (
            f"At step {f['step']} rank {f['rank']} {consumed_words(ctx, f['rank'], f['step'])} with the same "
            f"{'' if loss else 'loss, '}every parameter's gradient norm and the same learning rate"
            f"{f' ({loss})' if loss else ''}, yet the parameters after the step differ: a "
            f"layer's sketch after it differs (the param_digest of the first and last tensors, {fmt(f['a'])}, is "
            "equal)."
        )
    clip = clip_differences(ctx, f["rank"], f["step"])
    if clip:
        evidence["clip"] = clip
        facts = f"{facts} The clipping recorded at step {f['step']} differs: {'; '.join(clip)}."
        return finding(ctx, OPTIMIZER_CLIP, f["step"], f["rank"], evidence, facts, clip="; ".join(clip))
    rounding = ulps is not None and ulps <= FEW_ULPS and not rounding_refused(ctx, f)
    if rounding and ctx.walk.steps_equal_before == 0 and same_param_sets(ctx):
        clipping = [v for v in config_values(ctx, ("gradient_clip_val",)).values() if nonzero(v)]
        if clipping and ctx.both_have("optimizer"):
            return reduction_order_finding(ctx, f, evidence, "parameter digest after the step (clipping on)")
    effective = _effective_lr(ctx, f)
    if effective is not None:
        evidence["relation"] = effective.to_json()
        facts = f"{facts} {effective.sentence}"
        order = _scheduler_order(ctx, f)
        if order:  # the order the hooks recorded, not an inference
            evidence["scheduler_steps_before"] = order
            facts += " scheduler.step() calls recorded before optimizer.step() at that step: "
            facts += "; ".join(f"{k} {v}" for k, v in order.items()) + "."
        return finding(ctx, OPTIMIZER_EFFECTIVE_LR, f["step"], f["rank"], evidence, facts, k=effective.value)
    if ctx.both_have("optimizer"):  # the param groups were compared equal: the update itself differs
        return finding(ctx, OPTIMIZER, f["step"], f["rank"], evidence, facts)
    candidates = ["param_groups", "reduction_order", "optimizer"]
    if rounding_refused(ctx, f):  # more apart than rounding: no order of the same sums
        candidates.remove("reduction_order")
    return undetermined(ctx, f, candidates, facts, evidence)


# how a step clipped, as the hooks record each clip_grad_norm_/clip_grad_value_ call and TraceCallback the
# Trainer's gradient_clip_val (an explicit loop may pass them to record())
CLIP_KEYS = ("clip_max_norm", "clip_norm_type", "clip_value")


def clip_differences(ctx: Context, rank, step) -> list[str]:
    """The clip facts of `step` that differ, side by side: where one side recorded none, it clipped not at
    all only where its recorder sees every clip (hooks, or TraceCallback's Trainer settings); else unrecorded."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    if pair is None or not any(k in r for r in pair for k in CLIP_KEYS):
        return []
    out = []
    for key in CLIP_KEYS:
        values = [r.get(key, _no_clip(ctx, s)) for r, s in zip(pair, ("a", "b"))]
        if values[0] != values[1] and "unrecorded" not in values:  # a difference only where both sides say
            out.append(f"{key}: {fmt(values[0])} vs {fmt(values[1])}")
    return out


# what the runs part in first that an earlier step's update shapes (not the data: a batch apart is its own cause)
AFTER_UPDATE = ("loss", "grad_norm", "param_digest", "params", "lr")


def check_clip_acted(ctx: Context) -> Finding | None:
    """The runs part at step k, and the clipping recorded at an earlier step s differs where it bound: on the side
    that clips, the gradient norm at s was above its max_norm with a nonzero lr, so s's update was scaled on one
    side only. Every difference from step s + 1 on follows from it (a parameter digest is a sum, and a small
    change of the update can round away in it: the loss shows it first)."""
    f = ctx.earliest
    if f is None or f.get("quantity") not in AFTER_UPDATE or not isinstance(f.get("step"), int):
        return None
    for ra, rb in aligned_records(ctx, f["rank"]):
        step = ra.get("step")
        if not isinstance(step, int) or step >= f["step"]:
            break
        clip = clip_differences(ctx, f["rank"], step)
        bound = [_clip_bound(r) for r in (ra, rb)]
        if not clip or not any(bound):
            continue
        side = "a" if bound[0] else "b"
        norm, max_norm = bound[0] or bound[1]
        evidence = {"clip": clip, "clip_step": step, f["quantity"]: ctx.both(f["a"], f["b"])}
        facts = (
            f"The runs part at step {f['step']} rank {f['rank']} in the {f['quantity']} ({fmt(f['a'])} vs "
            f"{fmt(f['b'])}), but the clipping recorded differs from step {step} on: {'; '.join(clip)}. At step "
            f"{step} {ctx.label(side)} clipped a gradient norm of {fmt(norm)} to {fmt(max_norm)} at a nonzero rate, "
            f"so its update was scaled by {max_norm / norm:.3g} there and not on the other side; what differs "
            "later follows from it."
        )
        return finding(ctx, OPTIMIZER_CLIP_EARLIER, f["step"], f["rank"], evidence, facts, clip="; ".join(clip))
    return None


# the keys of a recorded param group that are no hyperparameter of the update
GROUP_BOOKKEEPING = ("params", "initial_lr")


def group_differences(ctx: Context, ga: list, gb: list, ra: dict, rb: dict) -> list[dict]:
    """[{group, key, a, b}] of one step's recorded param groups that differ (the groups paired by their place);
    the lr only where the step's recorded lr is equal (an lr apart is the lr series' own finding)."""
    out = []
    built = constructed_optimizer(ctx.meta("a")) or ctx.meta("a").get("optimizer")
    reads = keys_the_optimizer_reads(str((built or {}).get("class") or "")) if isinstance(built, dict) else None
    for i, (a, b) in enumerate(zip(ga, gb)):
        for key in sorted((set(a) | set(b)) - set(GROUP_BOOKKEEPING)):
            if key == "lr" and ra.get("lr") != rb.get("lr"):
                continue
            if is_own_key(key, reads):  # a key of the program's own: the optimizer never applied it
                continue
            if json.dumps(a.get(key), sort_keys=True, default=str) != json.dumps(
                b.get(key), sort_keys=True, default=str
            ):
                out.append({"group": i, "key": key, "a": a.get(key), "b": b.get(key)})
    return out


def _group_members(ctx: Context, index: int) -> str:
    """The parameters of param group `index` as constructed (named by the hooks), shortened; '' unknown."""
    built = constructed_optimizer(ctx.meta("a")) or ctx.meta("a").get("optimizer")
    groups = (built or {}).get("param_groups") if isinstance(built, dict) else None
    if not isinstance(groups, list) or index >= len(groups) or not isinstance(groups[index], dict):
        return ""
    names = [str(n) for n in groups[index].get("params") or []]
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f" ({len(names)} parameter(s): {shown})" if names else ""


def check_hyperparameters_earlier(ctx: Context) -> Finding | None:
    """The runs part at step k after an update, and the param groups both sides recorded as a step s <= k ran
    differ in a hyperparameter (a weight decay, eps, betas, momentum; the lr of a group the step's lr does not
    show): the update of step s used other settings on one side. Read from what each step used, never from
    the construction, which a loop may overwrite before each step."""
    f = ctx.earliest
    if f is None or f.get("quantity") not in AFTER_UPDATE or not isinstance(f.get("step"), int):
        return None
    last = f["step"] if f["quantity"] in ("param_digest", "params") else f["step"] - 1
    steps = {step: (ga, gb) for step, ga, gb in recorded_groups(ctx, f["rank"])}
    for ra, rb in aligned_records(ctx, f["rank"]):
        step = ra.get("step")
        if not isinstance(step, int) or step > last:
            break
        if step not in steps:
            continue
        apart = group_differences(ctx, *steps[step], ra, rb)
        if not apart:
            continue
        said = "; ".join(
            f"param group {d['group']}{_group_members(ctx, d['group'])}: {d['key']} {fmt(d['a'])} vs {fmt(d['b'])}"
            for d in apart[:4]
        ) + (f"; and {len(apart) - 4} more" if len(apart) > 4 else "")
        evidence = {"groups": apart, "groups_step": step, f["quantity"]: ctx.both(f["a"], f["b"])}
        facts = (
            f"The runs part at step {f['step']} rank {f['rank']} in the {f['quantity']} ({fmt(f['a'])} vs "
            f"{fmt(f['b'])}), and the param groups recorded as step {step} ran differ ({ctx.names[0]} vs "
            f"{ctx.names[1]}): {said}. The optimizer applied these settings to the update of step {step}; what "
            "differs later follows from it."
        )
        first = apart[0]
        return finding(
            ctx,
            OPTIMIZER_HYPERPARAMETERS,
            f["step"],
            f["rank"],
            evidence,
            facts,
            key=first["key"],
            group=first["group"],
        )
    return None


def _clip_bound(record: dict) -> tuple[float, float] | None:
    """(norm, max_norm) where this step's clip_grad_norm_ scaled the gradients: the norm above max_norm at a
    nonzero recorded rate (a rate of 0 moves nothing, clipped or not)."""
    norm, max_norm, lr = (relations.number(record.get(k)) for k in ("grad_norm", "clip_max_norm", "lr"))
    if norm is None or max_norm is None or norm <= max_norm or lr == 0.0:
        return None
    return norm, max_norm


def _no_clip(ctx: Context, side: str) -> str:
    """What a record without clip facts says: no clip call (the hooks see every one), the Trainer's
    gradient_clip_val unset (TraceCallback's meta.trainer), else nothing (unrecorded)."""
    meta = ctx.meta(side)
    if meta.get("recorded_by") == "hooks":
        return "none (no clip_grad_norm_ call)"
    if isinstance(meta.get("trainer"), dict):
        return "none (the Trainer's gradient_clip_val unset)"
    return "unrecorded"


def _scheduler_order(ctx: Context, f: dict) -> dict:
    """{side: scheduler.step() calls before optimizer.step() at the step} as the hooks recorded them."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, f["rank"]) if ra.get("step") == f["step"]), None)
    if pair is None or not any("scheduler_steps_before" in r for r in pair):
        return {}
    return {ctx.label(s): r.get("scheduler_steps_before", "unrecorded") for r, s in zip(pair, ("a", "b"))}


def _effective_lr(ctx: Context, f: dict) -> relations.Relation | None:
    """Every layer's update at the step the parameters part is the other side's times one constant
    (from the layers' sketches: the step before is equal on both sides): the rate applied is not the
    rate recorded. None where the ratios differ by layer, or the step before was not sketched."""
    if ctx.walk.steps_equal_before < 1 or f["step"] is None:
        return None
    pairs = {r.get("step"): (r, q) for r, q in aligned_records(ctx, f["rank"])}
    before, now = pairs.get(f["step"] - 1), pairs.get(f["step"])
    fields = [(ctx.meta(s).get("layers") or {}).get("fields") or [] for s in ("a", "b")]
    if before is None or now is None:
        return None
    rows = [relations.sketch_rows(before[0], fields[0])]
    rows += [relations.sketch_rows(now[i], fields[i]) for i in (0, 1)]
    if any(r is None for r in rows) or relations.sketch_rows(before[1], fields[1]) != rows[0]:
        return None
    c = relations.update_factor(*rows)
    if c is None:
        return None
    side, other, k = (ctx.names[0], ctx.names[1], c) if c > 1 else (ctx.names[1], ctx.names[0], 1 / c)
    sentence = (
        f"Every layer's update at step {f['step']} is {k:.4g} × on {side} what it is on {other} (the layers' "
        f"sketches, from equal parameters): one constant, so {side} applies a learning rate {k:.4g} × {other}'s "
        "while both record the same rate."
    )
    return relations.Relation("update_factor", "update", side, other, k, f["step"], f["step"], None, sentence)


OPTIMIZER_EFFECTIVE_LR = Cause(
    "optimizer.effective_lr",
    check_param_digest,
    why="The rate the optimizer applied is not the one recorded: the usual slip is scheduler.step() called "
    "before optimizer.step(), which hands the step the next rate while the rate read before it is recorded.",
    fix="Call scheduler.step() after optimizer.step() on both sides (the order Lightning uses: one side applies "
    "{k:.4g} × the other's rate while both record the same), and record the rate the optimizer step used.",
    doc="Every layer's update is the other side's times one constant with equal recorded lr (the layers' "
    "sketches): the effective learning rate is not the recorded one (scheduler.step() before optimizer.step()).",
    requires=Evidence("one constant between every layer's update", lambda d: bool(d.evidence.get("relation"))),
)
OPTIMIZER_CLIP = Cause(
    "optimizer.clip",
    check_param_digest,
    why="The gradients are equal, then clipped otherwise ({clip}): the step scales them by another factor, so the "
    "update differs wherever the norm is above the smaller bound.",
    fix="Clip the same way on both sides: the same max_norm and norm_type (Lightning's gradient_clip_val and "
    "gradient_clip_algorithm='norm' clip by the 2-norm), over the same parameters, after unscaling.",
    doc="The parameters part with equal samples, loss and gradient norm, and the clipping recorded at the step "
    "(clip_max_norm, clip_norm_type, clip_value: hooks, TraceCallback) differs.",
    requires=CLIP_FACTS,
)
OPTIMIZER_CLIP_EARLIER = Cause(
    "optimizer.clip",
    check_clip_acted,
    why=OPTIMIZER_CLIP.why,
    fix=OPTIMIZER_CLIP.fix,
    doc="The runs part after a step whose recorded clipping differs (clip_max_norm, clip_norm_type) where it bound "
    "(the norm above max_norm at a nonzero lr): that step's update was scaled on one side only.",
    requires=OPTIMIZER_CLIP.requires,
)
OPTIMIZER_HYPERPARAMETERS = Cause(
    "optimizer.hyperparameters",
    check_hyperparameters_earlier,
    why="The optimizer applies each param group's settings to its parameters at every step: with a setting apart "
    "(here {key} of param group {group}) the same gradients give another update.",
    fix="Give param group {group} the same {key} at every step on both sides: the same split of the parameters "
    "into groups (weight decay off for biases and norms on both, or on neither), and where the loop sets {key} "
    "by hand or by a schedule before each step, the same schedule on both sides.",
    doc="The runs part after an update, and the param groups both sides recorded as an earlier (or that) step ran "
    "differ in a hyperparameter (weight decay, eps, betas, momentum; the lr of a group the step's lr does not "
    "show): read from what each step used, not from the construction a loop may overwrite.",
    requires=Evidence("the groups recorded at the step, side by side", lambda d: bool(d.evidence.get("groups"))),
)
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


# ---------------------------------------------------------------------------------------------
# another optimizer's steps (a GAN's generator, stepped after the discriminator whose steps are counted)


def check_other_optimizer_steps(ctx: Context) -> Finding | None:
    """The hooks count the steps of the first optimizer to step; each other optimizer's steps are kept with the
    counted steps done at each (`other_optimizers`). Where those part on a rank before the training's first
    divergence (or every recorded step matches and the final parameters differ), that optimizer stepped at other
    points: its network's update is the cause, whatever the counted one's records show after."""
    earliest = ctx.earliest
    if earliest is None and ctx.cmp.params.all_equal:
        return None
    for rank in common_ranks(ctx):
        facts = [read_hook_facts(ctx.run(side), rank) for side in ("a", "b")]
        others = [f.get("other_optimizers") for f in facts]
        if not all(isinstance(o, dict) and o for o in others) or len(others[0]) != len(others[1]):
            continue
        for key_a, key_b in zip(sorted(others[0]), sorted(others[1])):
            steps = [others[0][key_a].get("after_steps"), others[1][key_b].get("after_steps")]
            if not all(isinstance(s, list) for s in steps) or steps[0] == steps[1]:
                continue
            n = next((i for i, (x, y) in enumerate(zip(*steps)) if x != y), min(map(len, steps)))
            after = [s[n] if n < len(s) else None for s in steps]
            parted = min(a for a in after if a is not None)
            if earliest is not None and earliest.get("step") is not None and parted >= earliest["step"]:
                continue  # the counted training parted first: this optimizer's steps are a consequence
            return _other_steps_finding(ctx, rank, facts, others[0][key_a], steps, n, after)
    return None


def _other_steps_finding(ctx: Context, rank: int, facts: list, entry: dict, steps: list, n: int, after: list):
    built = facts[0].get("optimizer_built") or []
    place = entry.get("built")
    named = built[place] if isinstance(place, int) and 0 <= place < len(built) else {}
    params = [str(p) for g in named.get("param_groups") or [] if isinstance(g, dict) for p in g.get("params") or []]
    over = f", over {', '.join(params[:3])}{', ...' if len(params) > 3 else ''}" if params else ""
    counted = next((o.get("class") for o in built if isinstance(o, dict) and o.get("stepped")), "the first")

    def when(side: int) -> str:
        return f"after step {after[side]}" if after[side] is not None else "none"

    facts_text = (
        f"Rank {rank}: the optimizer {entry.get('class')} (built {_ordinal(place)}{over}), which is not the one whose "
        f"steps are counted ({counted}, the first to step), stepped {len(steps[0])} time(s) on {ctx.label('a')} and "
        f"{len(steps[1])} on {ctx.label('b')}; its step {n + 1} came {when(0)} on {ctx.label('a')} and {when(1)} on "
        f"{ctx.label('b')}."
    )
    evidence = {"other_optimizer": entry.get("class"), "after_steps": ctx.both(*steps), "rank": rank}
    step = min(a for a in after if a is not None)
    return finding(ctx, OPTIMIZER_OTHER_STEPS, step, rank, evidence, facts_text, name=entry.get("class"))


def _ordinal(place) -> str:
    if not isinstance(place, int):
        return "elsewhere"
    return {0: "1st", 1: "2nd", 2: "3rd"}.get(place, f"{place + 1}th")


OPTIMIZER_OTHER_STEPS = Cause(
    "optimizer.other_steps",
    check_other_optimizer_steps,
    why="The parameters that optimizer holds were updated at other points, so its network differs from there on "
    "(and, in a GAN, the other network's next steps train against it): a phase skipped or run twice, an iteration "
    "that leaves before its last phase, a step taken every k iterations on one side only.",
    fix="Step the {name} optimizer at the same points on both sides: as many steps, each after the same steps of "
    "the other optimizer (Lightning's manual optimization: call each optimizer's step() in training_step as the "
    "loop does, the last iteration included).",
    doc="The hooks' steps of an optimizer other than the counted one (`other_optimizers`: the counted steps done at "
    "each) part before the training does, or at the end: that optimizer stepped at other points.",
)
