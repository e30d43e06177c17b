"""Causes in the forward pass and the loss, read from the module watch at the first divergence: a
module in another mode, a random layer, a module's own computation, the loss function; and, from the
hooks' evaluation records, an evaluation run in training mode where the other side's ran in eval mode.

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ddp_parity.compare import relations
from ddp_parity.compare.causes.base import (
    Cause,
    Context,
    Evidence,
    Words,
    abs_diff,
    aligned_records,
    config_values,
    consumed_words,
    finding,
    nonzero,
    same_batch_at,
    same_indices_at,
    samples_equal_at,
)
from ddp_parity.compare.causes.data import batch_without_indices, pipeline_finding
from ddp_parity.compare.causes.hooked import (
    DDP_ALIKE_SHORT,
    averaged_by_ddp_alike,
    gathered_rows,
    gathers_apart,
    gathers_words,
    global_rng_drawn_within,
    rng_at,
)
from ddp_parity.compare.causes.scaling import extra_division, root_divisions_at
from ddp_parity.compare.causes.seed_records import samples_in, samples_per_step_apart
from ddp_parity.compare.causes.setup import INIT, INIT_PARAMETER, INIT_USUAL, one_parameter_apart
from ddp_parity.compare.causes.undetermined import earlier_update_candidates, undetermined
from ddp_parity.compare.evaluations import model_evaluations, modes_apart
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.modules import display
from ddp_parity.compare.walk import records_of
from ddp_parity.trace_files import fact_items, read_hook_facts

# module readings (modules.reading_kind) that name a module's own computation as where a difference is born
COMPUTATION_READINGS = (
    "numerics",
    "norm",
    "own_code",
    "stateful_norm",
    "between_forward",
    "buffers",
    "module_backward",
    "between_backward",
)


def _module_kind(d: Finding) -> str | None:
    return (d.module or {}).get("reading_kind")


def _lacks(d: Finding, kind: str) -> bool:
    return any(u.get("evidence") == kind for u in d.unchecked)


# ---------------------------------------------------------------------------------------------
# the counts a factor between the sides may equal, and a loss that is one side's times such a count

ACCUMULATION_KEYS = ("accumulate_grad_batches", "gradient_accumulation_steps", "grad_accum_steps", "accumulate")


def relation_counts(ctx: Context, quantity: str | None = None) -> dict[str, int]:
    """{name: value} of the recorded counts a slip multiplies by, most telling first: the accumulation
    (config), the micro-batches per step (the backwards a step ran, as both sides recorded them, or a
    step's samples over the configured batch size), the world size (meta.json), the batch size (config).
    The world size scales the gradients only through their averaging over the ranks (a loss, or a rate, can be
    divided by it by hand): for the gradient norm it is left out where both sides average alike."""
    counts: dict[str, int] = {}
    config = config_values(ctx, (*ACCUMULATION_KEYS, "batch_size"))
    for key, value in config.items():
        name = key.split(":", 1)[1].rsplit(".", 1)[-1]
        if isinstance(value, int) and not isinstance(value, bool) and value > 1 and name in ACCUMULATION_KEYS:
            counts.setdefault(name, value)
    batch = next((v for k, v in config.items() if k.endswith("batch_size") and isinstance(v, int) and v > 0), None)
    first = next(iter(aligned_records(ctx, 0, limit=1)), None)
    n = most_micro_batches(micro_batches_alike(list(aligned_records(ctx, 0))))
    if n is not None and n > 1:
        counts.setdefault(relations.MICRO_BATCHES, n)  # recorded by the hooks: no config names the accumulation
    samples = len(first[0].get("indices") or []) if first else 0
    if batch and samples > batch and samples % batch == 0:
        counts.setdefault(relations.MICRO_BATCHES, samples // batch)
    world = ctx.meta("a").get("world_size")
    if isinstance(world, int) and world > 1 and not (quantity == "grad_norm" and averaged_by_ddp_alike(ctx)):
        counts["world_size"] = world
    if batch and batch > 1:
        counts["batch_size"] = batch
    return counts


def factor_of(ctx: Context, quantity: str, rank) -> relations.Relation | None:
    """The relation "one side's `quantity` is k × the other's", read over every aligned step of `rank`;
    where the run has other ranks and the factor does not hold on all of them, the ranks it holds on are
    named (a factor on rank 0 only is never said of every step of the run)."""
    key = ("factor", quantity, rank)
    if key not in ctx.cache:
        relation = _factor_on(ctx, quantity, rank)
        if relation is not None:
            relation = _on_ranks(ctx, quantity, rank, relation)
        ctx.cache[key] = relation
    return ctx.cache[key]


def _factor_on(ctx: Context, quantity: str, rank) -> relations.Relation | None:
    pairs = list(aligned_records(ctx, rank))
    steps, a, b = relations.series(pairs, quantity)
    counts, micro = relation_counts(ctx, quantity), micro_batches_alike(pairs)
    relation = relations.factor_relation(quantity, ctx.names, steps, a, b, counts, micro=micro)
    return _world_size_said(ctx, relation) if relation is not None else None


def micro_batches_alike(pairs: list[tuple[dict, dict]]) -> list:
    """Each step's micro-batches where both sides recorded the same number (None elsewhere): which steps of a factor
    are a shorter accumulation's is read only where the sides agree on it (else data_order.accumulation speaks)."""
    out = []
    for ra, rb in pairs:
        n = ra.get("micro_batches")
        out.append(n if isinstance(n, int) and not isinstance(n, bool) and n == rb.get("micro_batches") else None)
    return out


def most_micro_batches(micro: list) -> int | None:
    """The micro-batches most steps accumulated (both sides alike; the larger on a tie), or None unrecorded: the
    accumulation as the loop runs it, where its first step (or an epoch's last) may take fewer (a loop stepping after
    its first micro-batch, an epoch's left-over micro-batches)."""
    tally = Counter(n for n in micro if n is not None)
    return max(tally, key=lambda n: (tally[n], n)) if tally else None


def micro_batches_in_words(micro: list, steps: list) -> str:
    """ "2 at every step", or "2 at steps 2..9; 1 at step 1": each number of micro-batches both sides recorded alike,
    most steps first, with its steps."""
    by_count: dict[int, list] = {}
    for s, n in zip(steps, micro):
        if n is not None:
            by_count.setdefault(n, []).append(s)
    if len(by_count) == 1:
        return f"{next(iter(by_count))} at every step"
    ordered = sorted(by_count.items(), key=lambda item: (-len(item[1]), -item[0]))
    return "; ".join(f"{n} at {relations.steps_named(at)}" for n, at in ordered)


def _world_size_said(ctx: Context, relation: relations.Relation) -> relations.Relation:
    """The relation with what the records prove of the world size where it equals the factor and both sides
    average the gradients by DDP alike: no averaging over the ranks slipped; a loss divided by it by hand still
    fits (the loss is scaled before DDP sees it), and the gradients' factor names it no more."""
    world = ctx.meta("a").get("world_size")
    found = relations.integer_of(relation.value)
    if not (found and found[0] == world and averaged_by_ddp_alike(ctx)):
        return relation
    if relation.quantity == "loss":
        said = f"the world_size only as a loss divided by it by hand: {DDP_ALIKE_SHORT};"
        sentence = relation.sentence[:-1].replace("(each fits:", f"(each fits, {said}")
    else:
        sentence = relation.sentence[:-1] + f"; the world_size is {world} too, but {DDP_ALIKE_SHORT}"
    return replace(relation, sentence=sentence + ".")


def _on_ranks(ctx: Context, quantity: str, rank, relation: relations.Relation) -> relations.Relation:
    ranks = list((ctx.walk.ranks if ctx.walk else {}).get("a") or [])
    if len(ranks) < 2:
        return relation
    holding = [
        r
        for r in ranks
        if r == rank or ((other := _factor_on(ctx, quantity, r)) is not None and other.value == relation.value)
    ]
    if len(holding) == len(ranks):
        return relation
    others = [r for r in ranks if r not in holding]
    sentence = relation.sentence[:-1].replace("at every step", "at every step of rank " + ", ".join(map(str, holding)))
    sentence += f" (on rank {', '.join(map(str, holding))} only; rank {', '.join(map(str, others))} not so)."
    return replace(relation, sentence=sentence, ranks=tuple(holding))


# the mechanism a loss factor equal to each count has, and its fix
FACTOR_MECHANISMS = {
    "accumulation": Words(
        "{side} sums its {k} micro-batch losses without dividing by the accumulation count",
        "On {side}, divide each micro-batch's loss by the number of accumulated micro-batches ({k}) before "
        "backward: Divide the loss by accumulate_grad_batches, as Lightning does.",
    ),
    "accumulation_twice": Words(
        "{small} divides its loss by the accumulation count ({k}) twice: Lightning's automatic optimization divides "
        "what training_step returns by accumulate_grad_batches itself, after a port divided it by the micro-batches",
        "On {small}, return each micro-batch's loss from training_step without dividing it by the accumulation: "
        "Lightning divides it by accumulate_grad_batches itself.",
    ),
    "world_size": Words(
        "{small} divides its loss by the world size ({k}) although DDP already averages the gradients over the ranks",
        "On {small}, do not divide the loss by the world size: DDP averages the gradients over the ranks, so "
        "the loss is averaged over the same samples as the other side's (each rank's own batch).",
    ),
    "batch_size": Words(
        "{side} sums the loss over the {k} samples of a batch (reduction='sum') where {small} averages them",
        "Compute the loss with the same reduction on both sides (reduction='mean', the criterion's default), "
        "averaged over the same samples.",
    ),
}


# a factor from a later step, every step before it equal with a loss that is not zero: a count scales every step's
# loss, so none is its mechanism; a term of that step's loss is weighted otherwise
LATER_FACTOR = Words(
    "it holds from step {step} only, every step before it equal with a loss that is not zero, and a count (the "
    "accumulation, the world size, the batch size) would scale every step's loss: {side} weights a term of step "
    "{step}'s loss by {k} (or {small} divides it by {k}), such as a regularizer applied every few steps with its "
    "lazy factor, or a loss term added at some steps only",
    "Give backward the same loss at step {step} on both sides: find the term of that step's loss {side} weights by "
    "{k} (or {small} divides by {k}), and weight it alike on both.",
)

# a factor no recorded count equals: still exactly k × at equal batches, so a multiplier, never a module
UNCOUNTED_FACTOR = Words(
    "no count this run records equals {k}, so {side} multiplies the loss by {k} before backward (or {small} divides "
    "it by {k}): a division by a count set by hand (micro-batches, ranks), a weight, a sum of {k} terms",
    "Give backward the same loss on both sides: find where {side} multiplies it by {k} (or {small} divides it by "
    "{k}) and do that on both sides or on neither.",
)


# a factor carried by the steps of a shorter accumulation (an epoch's left-over micro-batches stepped alone): one side
# divides its loss by the configured count, the other by its own length. The fix names both ways; where the side
# dividing by the configured count is Lightning's (its automatic optimization divides every micro-batch's loss by
# accumulate_grad_batches, the short accumulation's too), how to do it in a LightningModule
SHORT_ACCUMULATION = Words(
    "so the backward of those steps{epoch_last} runs on a loss {k} × on {side}, and their gradients are {k} × "
    "{small}'s",
    "On {small}, divide the loss of a shorter accumulation (steps {steps}: {short} micro-batch(es) where the others "
    "have {configured}) by its own length ({short}), not by the configured count; or, on {side}, divide it by the "
    "configured count ({configured}), as {small} does.",
)
SHORT_ACCUMULATION_LIGHTNING = Words(
    SHORT_ACCUMULATION.why,
    "On {small}, divide the loss of a shorter accumulation (steps {steps}: {short} micro-batch(es) where the others "
    "have {configured}) by its own length ({short}): Lightning divides every micro-batch's loss by "
    "accumulate_grad_batches, the epoch's last, shorter accumulation's too, so return the loss × {configured} / "
    "{short} from training_step for those micro-batches; or, on {side}, divide it by the configured count "
    "({configured}), Lightning's way.",
)
# a factor carried by some steps, steps that agree between them, no shorter accumulation: no count (each the same at
# the steps that agree) is its mechanism
SOME_STEPS_FACTOR = Words(
    "steps that agree lie between the steps that carry it, and each count equal to {k} is the same at the steps "
    "that agree: {side} weights a term of those steps' loss by {k} (or {small} divides it by {k}), such as a "
    "regularizer applied every few steps with its lazy factor, or a loss term added at some steps only",
    "Give backward the same loss at steps {steps} on both sides: find the term of those steps' loss {side} weights "
    "by {k} (or {small} divides by {k}), and weight it alike on both.",
)


def steps_carrying_words(ctx: Context, relation: relations.Relation, rank) -> tuple[Words, dict] | None:
    """The words of a factor read from the steps that carry it, with their values: a shorter accumulation's
    (Lightning's fix where the side dividing by the configured count is Lightning), or some steps' own where steps
    that agree lie between them. None for a factor from a step on (LATER_FACTOR, or the counts it equals)."""
    values = {"side": relation.side, "small": relation.other, "k": relations.factor_shown(relation.value)}
    values["steps"] = relations.steps_in_words(list(relation.steps))
    values["epoch_last"] = " (each its epoch's last step)" if _last_of_epochs(ctx, rank, relation.steps) else ""
    if relation.accumulation:
        values["short"], values["configured"] = relation.accumulation
        small = next((s for s in ("a", "b") if ctx.label(s) == relation.other), None)
        lightning = small is not None and ctx.meta(small).get("side") == "lightning"
        return (SHORT_ACCUMULATION_LIGHTNING if lightning else SHORT_ACCUMULATION), values
    if relation.steps and any(s > relation.first for s in relation.agreeing if isinstance(s, int)):
        return SOME_STEPS_FACTOR, values
    return None


def _last_of_epochs(ctx: Context, rank, steps: tuple) -> bool:
    """Every one of `steps` is the last step of its epoch on both sides (the next record is another epoch's, or there
    is none): a shorter accumulation there is an epoch's left-over micro-batches."""
    pairs = list(aligned_records(ctx, rank))
    last = set()
    for (ra, rb), after in zip(pairs, [*pairs[1:], None]):
        ends = after is None or (ra.get("epoch") != after[0].get("epoch") and rb.get("epoch") != after[1].get("epoch"))
        if ends and ra.get("epoch") is not None and ra.get("epoch") == rb.get("epoch"):
            last.add(ra.get("step"))
    return bool(steps) and all(s in last for s in steps)


def carries_step(relation: relations.Relation | None, step) -> bool:
    """The relation holds at `step`: its first step, or one of the steps that carry it."""
    return relation is not None and (relation.first == step or step in relation.steps)


def factor_mechanism(relation: relations.Relation) -> str:
    """The mechanism of the first count the factor equals ('' where none has one)."""
    found = factor_mechanisms(relation)
    return found[0] if found else ""


def factor_mechanisms(relation: relations.Relation) -> list[str]:
    """The mechanism of every count the factor equals, each once, most telling first."""
    out = []
    for named in relation.counts or ((relation.count,) if relation.count else ()):
        name = named.split("=")[0]
        mechanism = "accumulation" if name in ACCUMULATION_KEYS or name == relations.MICRO_BATCHES else name
        if mechanism in FACTOR_MECHANISMS and mechanism not in out:
            out.append(mechanism)
            if mechanism == "accumulation":  # the same count divided twice on the other side fits it as well
                out.append("accumulation_twice")
    return out


def _grad_norms_equal_at(ctx: Context, rank, step) -> bool:
    """Both sides recorded the gradient norm at `step` and it is bitwise equal: a loss scaled by a count
    would have scaled it too."""
    for ra, rb in aligned_records(ctx, rank):
        if ra.get("step") == step:
            return ra.get("grad_norm") is not None and ra.get("grad_norm") == rb.get("grad_norm")
    return False


def check_loss_factor(ctx: Context) -> Finding | None:
    """The loss on one side is exactly k × the other's from the first step it differs, k a recorded
    count: the count was multiplied in (or divided out) on one side, whatever the modules computed.
    Every count k equals is named with its mechanism; with the gradient norms equal the factor is in
    what was recorded only, not in the training (no finding here). Which steps carry the factor is read
    first: a shorter accumulation's steps name it, and a count the same at steps that agree is none."""
    f = ctx.earliest
    if f is None or f["quantity"] != "loss":
        return None
    relation = factor_of(ctx, "loss", f["rank"])
    if not carries_step(relation, f["step"]):
        return None
    if _grad_norms_equal_at(ctx, f["rank"], f["step"]):
        return None
    read = steps_carrying_words(ctx, relation, f["rank"])
    values = {"side": relation.side, "small": relation.other, "k": relations.factor_shown(relation.value)}
    values["step"] = f["step"]
    if read is not None:
        mechanisms, values = [read[0]], {**values, **read[1]}
    elif equal_nonzero_before(ctx, f["rank"], f["step"]):
        mechanisms = [LATER_FACTOR]
        relation = counts_ruled_out(relation)
    else:
        mechanisms = [FACTOR_MECHANISMS[m] for m in factor_mechanisms(relation)] or [UNCOUNTED_FACTOR]
    relation, mechanisms, untold = placed_by_root_divisions(ctx, relation, mechanisms, f["rank"], f["step"], values)
    whys = [w.why.format(**values) for w in mechanisms]
    fixes = [w.fix.format(**values) for w in mechanisms]
    if len(mechanisms) == 1:
        facts, fix = f"{relation.sentence[:-1]}: {whys[0]}.", fixes[0]
    else:
        facts = f"{relation.sentence[:-1]}: " + "; or ".join(whys) + "."
        fix = "Whichever count slipped (the numbers fit each): " + " Or: ".join(fixes)
    facts += untold
    evidence = {"loss": ctx.both(f["a"], f["b"]), "relation": relation.to_json()}
    return finding(ctx, LOSS_FACTOR, f["step"], f["rank"], evidence, facts, fix=fix)


# ---------------------------------------------------------------------------------------------
# a loss factor placed by the divisions the hooks saw at each backward's root
#
# The accumulation count, the micro-batches and the world size are often the same number, and the losses alone
# cannot tell which count slipped. Two records can: `loss_divisors` (each backward root's divisions by a constant,
# outermost first) and, on a Lightning side, `lightning_loop` (its Trainer's accumulate_grad_batches: under
# automatic optimization Lightning divides what training_step returns by it, the root's outermost division). Where
# the side with the smaller loss is that Lightning side, its roots are the other side's roots (every division the
# same) divided once more by accumulate_grad_batches = k: its port divides as the loop does and Lightning divides
# again, or, where the loop's roots carry no division, the loop sums undivided micro-batch losses.

PLACED_TWICE = Words(
    "{small}'s backward roots are what its training_step returned divided by {k} by Lightning itself (lightning_loop: "
    "automatic optimization, accumulate_grad_batches={k}), and what training_step returned was already divided as "
    "{side} divides each micro-batch's loss before its backward (loss_divisors at step {step}: {side} {chain_big}, "
    "{small} {chain_small}): {small} divides its loss twice, the port's division and Lightning's own{world}",
    "On {small}, return each micro-batch's loss from training_step without dividing it: Lightning divides it by "
    "accumulate_grad_batches ({k}) itself, as {side}'s loop divides by hand.",
)
PLACED_UNDIVIDED = Words(
    "{side}'s backward roots carry no division, while {small}'s are what its training_step returned divided by {k} "
    "by Lightning itself (lightning_loop: automatic optimization, accumulate_grad_batches={k}) and by nothing else "
    "(loss_divisors at step {step}: {side} {chain_big}, {small} {chain_small}): {side} sums its {k} micro-batch losses "
    "without dividing by the accumulation count",
    FACTOR_MECHANISMS["accumulation"].fix,
)
# where the port's own division equals the world size too: the values cannot say which count it was written with
PLACED_WORLD = (
    "; {k} is also the world_size, so the port's division may be meant for the ranks: the records cannot tell (its "
    "training_step's source does, or a run where the two counts differ), and the fix is the same"
)
# where the loss factor is left to several candidates, what would tell the accumulation's apart
TELLS_APART = (
    " These records lack what tells the accumulation's candidates apart: each backward root's divisions "
    "(loss_divisors) and a Lightning side's accumulate_grad_batches (lightning_loop), which ddp-parity record's hooks "
    "take since 2026-12-07; record both sides again to have them."
)


def placed_by_root_divisions(ctx: Context, relation, mechanisms: list, rank, step, values: dict):
    """(relation, mechanisms, a sentence to add) with the factor placed where the roots' divisions place it: one
    mechanism, the counts the records exclude gone from the relation's sentence; unchanged where they cannot, with
    what would tell the accumulation's candidates apart where hooks that did not record the divisions recorded both.
    Only a factor left to the counts it equals (or to none) is placed: one read from the steps that carry it is not."""
    if not all(w in FACTOR_MECHANISMS.values() or w is UNCOUNTED_FACTOR for w in mechanisms):
        return relation, mechanisms, ""
    twice = FACTOR_MECHANISMS["accumulation_twice"] in mechanisms
    placed = _roots_place(ctx, relation, rank, step, values["k"]) if twice else None
    if placed is not None:
        words, chains = placed
        world = ctx.meta("a").get("world_size")
        values.update(
            chain_big=_chain(chains[0]),
            chain_small=_chain(chains[1]),
            world=PLACED_WORLD.format(k=values["k"]) if words is PLACED_TWICE and world == values["k"] else "",
        )
        return counts_ruled_out(relation), [words], ""
    extra = extra_division(ctx, relation, rank, step)
    if extra is not None:
        values.update(chain_big=_chain(extra[0]), chain_small=_chain(extra[1]))
        values["counts"] = _division_counts(ctx, relation, rank, values["k"])
        return replace(relation, sentence=relation.sentence.split("; ")[0].rstrip(".") + "."), [PLACED_EXTRA], ""
    return relation, mechanisms, TELLS_APART if twice and _hooks_without_divisions(ctx, rank, step) else ""


# one side's roots carry one division by the factor more than the other's (whoever wrote it, Lightning or the
# program): that division is the mechanism, whichever count it was written with; the counts it equals are said, never
# one picked
PLACED_EXTRA = Words(
    "{small} divides each micro-batch's loss by {k} once more than {side} before its backward (loss_divisors at step "
    "{step}: {side} {chain_big}, {small} {chain_small}; a division by 1 changes nothing){counts}",
    "On {small}, remove the extra division of each micro-batch's loss by {k} (its backward roots {chain_small} where "
    "{side}'s are {chain_big}), so that it backpropagates {side}'s loss; or, where that division is meant, divide "
    "{side}'s loss by {k} as well.",
)


def _division_counts(ctx: Context, relation, rank, k) -> str:
    """ "; 2 is the micro-batches per step (2 at steps 2..9; 1 at step 1) and the world size (the records cannot tell
    which count that division was written with; the fix is the same)" for the counts the factor equals."""
    names, world = [], False
    for named in relation.counts:
        name = named.split("=")[0]
        if name == relations.MICRO_BATCHES:
            pairs = list(aligned_records(ctx, rank))
            steps = [ra.get("step") for ra, _ in pairs]
            names.append(f"the micro-batches per step ({micro_batches_in_words(micro_batches_alike(pairs), steps)})")
        elif name in ACCUMULATION_KEYS:
            names.append(f"the configured {name}")
        else:
            world = world or name == "world_size"
            names.append(f"the {name.replace('_', ' ')}")
    if not names:
        return f"; no count this run records equals {k}"
    said = f"; {k} is {names[0]}"
    if len(names) > 1:
        said = f"; {k} is " + ", ".join(names[:-1]) + " and " + names[-1]
        said += " (the records cannot tell which count that division was written with; the fix is the same)"
    if world and averaged_by_ddp_alike(ctx):
        said += f"; where it is meant for the ranks, {DDP_ALIKE_SHORT}: the gradients are averaged over them already"
    return said


def _roots_place(ctx: Context, relation, rank, step, k: int):
    """(PLACED_TWICE or PLACED_UNDIVIDED, (the larger side's root divisions, the smaller's)) at `step`, where the
    smaller side recorded a Lightning loop optimizing automatically under accumulate_grad_batches = k and each of its
    roots is the other side's root, divided by that k once more; None where the records do not show that."""
    small = "a" if ctx.label("a") == relation.other else "b"
    loop = next(iter(fact_items(read_hook_facts(ctx.run(small), rank), "lightning_loop")), {})
    if loop.get("accumulate_grad_batches") != k or loop.get("automatic_optimization") is False:
        return None
    roots = root_divisions_at(ctx, relation, rank, step)
    if roots is None:
        return None
    big_roots, small_roots = roots
    if not big_roots or any(not s or s[0] != k or s[1:] != b for b, s in zip(big_roots, small_roots)):
        return None
    undivided = all(not b for b in big_roots)
    if not undivided and any(not b for b in big_roots):
        return None  # some roots divided, some not: no one placement
    return (PLACED_UNDIVIDED if undivided else PLACED_TWICE), (big_roots[0], small_roots[0])


def _hooks_without_divisions(ctx: Context, rank, step) -> bool:
    """Both sides recorded by the hooks, neither with the roots' divisions at `step` (hooks older than them): hooks
    that record them tell the candidates apart. An explicit recorder's trace never holds them (the hooks stand down
    for a program that records itself), so nothing is promised there."""
    if any(ctx.meta(side).get("recorded_by") != "hooks" for side in ("a", "b")):
        return False
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    return pair is not None and not any("loss_divisors" in r for r in pair)


def _chain(divisors: list) -> str:
    """[2.0, 2.0] as "÷2 ÷2" (outermost first), [] as "none"."""
    return " ".join(f"÷{d:g}" for d in divisors) if divisors else "none"


def equal_nonzero_before(ctx: Context, rank, step, quantity: str = "loss") -> bool:
    """Some step before `step` recorded the same `quantity` on both sides, and not zero (a zero hides a factor):
    a factor from `step` on is then no count's, which would scale every step's."""
    for ra, rb in aligned_records(ctx, rank):
        if isinstance(ra.get("step"), int) and ra["step"] < step:
            value = ra.get(quantity)
            if isinstance(value, (int, float)) and value != 0 and value == rb.get(quantity):
                return True
    return False


def counts_ruled_out(relation: relations.Relation) -> relations.Relation:
    """The relation without the counts it equals (its sentence without "; 2 is the world_size"): a count would scale
    every step, and the steps before it are equal."""
    return replace(relation, sentence=relation.sentence.split("; ")[0].rstrip(".") + ".", count=None, counts=())


LOSS_FACTOR = Cause(
    "loss.factor",
    check_loss_factor,
    why="A loss scaled by a factor scales every gradient by it: the training differs from the step it is scaled at.",
    fix="{fix}",
    doc="One side's loss is exactly k × the other's from the first step it differs, at equal batches: the mechanism "
    "of the recorded count k equals (the accumulation, the micro-batches per step, the world size, the batch size; "
    "docs/relations.md), or, where none does, a multiplier by k on one side. Which steps carry the factor is read "
    "first: a count the same at steps that agree is ruled out, and a factor carried exactly by the steps of a shorter "
    "accumulation (fewer `micro_batches` there) names it, divided by the configured count on one side and by its "
    "own length on the other. Where the hooks recorded each backward root's divisions (loss_divisors) and one "
    "side's Lightning accumulate_grad_batches equals k, the roots place it: that side's roots the other's divided "
    "once more by Lightning (the port divides as the loop does: divided twice), or the loop's roots undivided; "
    "otherwise, where one side's roots carry one division by k more than the other's, that division is the "
    "mechanism, said with every count k equals (the micro-batches most steps accumulate, the world size), never one "
    "of them alone.",
    requires=Evidence(
        "an exact integer factor from the step the losses part", lambda d: bool(d.evidence.get("relation"))
    ),
)


# ---------------------------------------------------------------------------------------------
# the module watch: one check, the kind of stage where the difference is born


def _step_batches_equal(ctx: Context, f: dict) -> bool:
    """Both sides recorded the step's batch digest, and it is the same."""
    return same_batch_at(ctx, f["rank"], f["step"])


def check_module(ctx: Context) -> Finding | None:
    """The module watch's finding at the first divergence decides the category whenever it names where
    the difference is born: the batch (first input differs, indices equal), a random layer, a module in
    another mode, a module's own computation, or the loss (every forward call equal, the loss not)."""
    f, module = ctx.earliest, ctx.cache.get("module")
    if f is None or not module or module.get("step") != f.get("step"):
        return None
    kind = module.get("reading_kind")
    evidence = {"module": module}
    where = f"at step {f['step']} rank {f['rank']}, {module['phase']} of {display(module['name'])} ({module['type']})"
    if kind == "batch":
        if _step_batches_equal(ctx, f):  # the batch is equal: what the step does to it before the model is not
            facts = (
                f"The step's batch is the same on both sides (batch_digest), yet {where} already receives another "
                "input: the step changes the batch before the model."
            )
            return pipeline_finding(ctx, f, evidence, facts, in_step=True)
        unrecorded = batch_without_indices(ctx, f, evidence, f"The first module's input differs {where}")
        if unrecorded is not None:
            return unrecorded
        facts = (
            f"The sample indices are equal, but {where} already receives another input: the first module's input "
            "differs, so the batch contents differ before the model."
        )
        return pipeline_finding(ctx, f, evidence, facts)
    if kind == "state":
        return _module_state(ctx, f, module, where)
    if kind == "params":
        facts = (
            f"The module watch finds parameter {module['name']} different as the forward of step "
            f"{f['step']} first used it (rank {f['rank']}): the sides start this step from other weights."
        )
        one = one_parameter_apart(ctx, f["step"], f["rank"]) if f["step"] == 1 else None
        if one is not None:
            evidence["params_differing"] = one
            facts += f" The other {one['equal']} parameter(s) are equal."
            return finding(ctx, INIT_PARAMETER, f["step"], f["rank"], evidence, facts, **one)
        if f["step"] == 1:
            return finding(ctx, INIT, f["step"], f["rank"], evidence, facts, **INIT_USUAL)
        return undetermined(ctx, f, ["earlier_update", "param_groups", "optimizer"], facts, evidence)
    if kind in ("random", *COMPUTATION_READINGS) and not ctx.both_have("watch_state"):
        facts = f"The module watch finds the first difference {where}: inputs equal, outputs differ."
        return undetermined(ctx, f, ["rng" if kind == "random" else "numerics", "module_state"], facts, evidence)
    if kind == "random":
        facts = (
            f"The sample indices, the inputs and the module's mode are equal, but {where} draws another mask: its "
            "input is equal and its output differs."
        )
        values = {"where": f"layer {display(module['name'])} ({module['type']}) draws its mask at step {f['step']}"}
        return finding(ctx, RNG, f["step"], f["rank"], evidence, facts, **values)
    if kind == "loss_grad" and f["quantity"] == "loss":
        facts = (
            f"Both sides fed rank {f['rank']} the same samples at step {f['step']} and every module call of the "
            f"forward pass is equal, yet the loss differs ({f['a']!r} vs {f['b']!r})."
        )
        if module.get("watched_one_side"):  # a teacher's calls (one side's watch only) may be the loss's arguments
            facts = facts.replace("every module call of the forward pass", "every module call both sides watched") + (
                f" The calls of {', '.join(module['watched_one_side'])} were watched on one side only and not "
                "compared: what they compute (a teacher's targets) may be what the loss differs by."
            )
        return finding(ctx, LOSS, f["step"], f["rank"], {**evidence, "loss": ctx.both(f["a"], f["b"])}, facts)
    if kind in COMPUTATION_READINGS:
        facts = (
            f"The module watch finds where the difference is born: {where} computes another result from an "
            "equal input, in the same mode on both sides."
        )
        values = {"name": display(module["name"]), "type": module["type"]}
        return finding(ctx, NUMERICS_MODULE, f["step"], f["rank"], evidence, facts, **values)
    return None  # the gradients' reduction or the optimizer: the checks of those quantities read it


def _module_state(ctx: Context, f: dict, module: dict, where: str) -> Finding:
    state = module.get("state") or {}
    key = next(k for k in MODULE_MODES if k in state)
    va, vb = state[key]
    name = display(module["name"])
    # a module out of training mode is the usual slip (eval() left on after validation): name that side
    slipped = ctx.label("a") if key == "training" and va is False else ctx.label("b")
    said = "; ".join(
        f"{ctx.label('a')} runs `{name}` with {k}={a}, {ctx.label('b')} with {b}" for k, (a, b) in state.items()
    )
    facts = f"The module watch finds the first difference {where}: its input is equal, but {said}."
    advice = MODULE_MODES[key]
    values = {"name": name, "side": slipped, "a": va, "b": vb}
    fix = advice.fix.format(**values)
    return finding(
        ctx, MODULE_STATE, f["step"], f["rank"], {"module": module, "state": state}, facts, what=advice.why, fix=fix
    )


# a module that runs in another mode than its twin: why that changes its output, and the fix
# ({name}: the module, {side}: the side whose mode is the usual slip, {a}/{b}: the two values)
MODULE_MODES = {
    "type": Words(
        "the module is another class on each side, so the same input runs through another computation (a "
        "SyncBatchNorm normalises by the statistics of every rank's batch, a BatchNorm by its own rank's; another "
        "activation or norm layer computes another function).",
        "Build {name} as the same class on both sides ({a} vs {b}): convert the model the same way on both "
        "(nn.SyncBatchNorm.convert_sync_batchnorm, or Lightning's Trainer(sync_batchnorm=True), on both or neither; "
        "the same layer classes).",
    ),
    "training": Words(
        "in eval mode dropout passes its input through and BatchNorm normalises with its running statistics; "
        "the usual slip is a loop that calls model.eval() for validation and never model.train() again "
        "(Lightning switches back after its validation loop).",
        "On {side}, put the model back in training mode before training continues: call model.train() after "
        "validation (and at the start of every epoch), so that {name} trains with training=True.",
    ),
    "arguments": Words(
        "the module is built with other constructor arguments (a dropout probability, eps, momentum, "
        "approximate), so it computes another function.",
        "Build {name} with the same arguments on both sides ({a} vs {b}).",
    ),
    "autocast": Words(
        "under autocast a module computes in a lower precision (bf16/fp16 matmuls), so the same input gives "
        "other bits.",
        "Run {name} under the same precision on both sides ({a} vs {b}): the same Trainer `precision` and "
        "the same torch.autocast regions in the hand-written loop.",
    ),
    "grad_enabled": Words(
        "a forward without gradients records no graph; the module's backward then differs.",
        "Run the training forward with gradients enabled on both sides (no torch.no_grad() or "
        "torch.inference_mode() around {name}).",
    ),
    "output_dtypes": Words(
        "a module whose parameters or computation are in another dtype gives outputs of another dtype.",
        "Give {name} the same dtype on both sides ({a} vs {b}): model.to(dtype), the Trainer's `precision`.",
    ),
    "input_dtypes": Words(
        "the same values in another dtype are other bits.",
        "Feed {name} the same dtype on both sides ({a} vs {b}): cast the batch the same way.",
    ),
}

MODULE_STATE = Cause(
    "module_state",
    check_module,
    why="With equal inputs and parameters a module computes what its mode makes it compute: {what}",
    fix="{fix}",
    doc="The watch: equal input, other output, and the module's class, `training`, `arguments`, `autocast` or "
    "dtypes differ (eval mode left on after validation, the precision, a SyncBatchNorm on one side).",
    requires=Evidence("a module state that differs", lambda d: _module_kind(d) == "state"),
)
RNG = Cause(
    "rng",
    check_module,
    why="With the same samples and the same initial weights the forward pass differs only through a "
    "random draw: the global random stream is in another state on the two sides when {where}.",
    fix="Re-seed right after building the model on both sides (Lightning re-seeds with reset_seed() "
    "before training; raw: torch.manual_seed(seed) after the model build), and let nothing else "
    "draw from the global stream in between (a sanity check, an extra DataLoader iterator: "
    "Lightning #6988).",
    doc="The watch names a random layer whose output differs with equal input, in the same mode: the "
    "global random stream differs (Lightning #6988).",
    requires=Evidence("a random layer named by the module watch", lambda d: _module_kind(d) == "random"),
)
NUMERICS_MODULE = Cause(
    "numerics.module",
    check_module,
    why="The module watch shows where the difference is born: {name} ({type}) computes another output from "
    "the same input, with the same parameters and in the same mode (training flag, autocast, dtypes) on "
    "both sides, and the thread counts and torch flags are recorded equal: the module itself is built "
    "or computed differently.",
    fix="Build {name} ({type}) the same way on both sides: the same class and constructor arguments (eps, "
    "momentum, approximate, bias, ...) and the same dtype; compare print(model) of both sides.",
    doc="The watch names a module whose output differs from an equal input in the same mode: its "
    "construction or kernel.",
    requires=Evidence(
        "a module whose output differs with equal input", lambda d: _module_kind(d) in COMPUTATION_READINGS
    ),
)
NUMERICS = Cause(
    "numerics",
    check_module,
    why="With identical inputs and weights the forward pass differs only through how it is computed: "
    "the reduction order of CPU kernels (threads), precision or autocast, kernel selection.",
    fix="Pin threads (OMP_NUM_THREADS and torch.set_num_threads on every rank), use the same precision "
    "on both sides, and set torch.use_deterministic_algorithms(True).",
    doc="Never given alone: a numerics finding names the module (`numerics.module`) or the differing "
    "setting (`config.threads`, `config.arithmetic`).",
    requires=Evidence("(never: name the module or the differing setting)", lambda d: False),
)


# ---------------------------------------------------------------------------------------------
# the loss


def check_loss(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "loss":
        return None
    evidence = {"loss": ctx.both(f["a"], f["b"]), "abs_diff": abs_diff(f["a"], f["b"])}
    facts = (
        f"{_fed_words(ctx, f)}, yet its loss differs ({f['a']!r} on {ctx.names[0]} vs {f['b']!r} on {ctx.names[1]})."
    )
    if ctx.both_have("watch_state") and ctx.cache.get("module") is None:
        # every module call, gradient and update of the watched step is equal: only the loss value is not
        facts += " Every module call of this step is equal on both sides."
        return finding(ctx, LOSS, f["step"], f["rank"], evidence, facts)
    return undetermined(ctx, f, _loss_candidates(ctx, f), facts, evidence)


def _fed_words(ctx: Context, f: dict) -> str:
    """What the records say rank r was fed at the step: the same samples only where both sides recorded them alike
    and equal; else that the data were not compared there (never called the same)."""
    if samples_equal_at(ctx, f["rank"], f["step"]):
        return f"Both sides fed rank {f['rank']} the same samples at step {f['step']}"
    return f"At step {f['step']} rank {f['rank']} {consumed_words(ctx, f['rank'], f['step'])} on the two sides"


def _loss_candidates(ctx: Context, f: dict) -> list[str]:
    """What can make the loss differ, most likely first, given what was recorded: the data among them wherever the
    step's samples were not recorded equal on both sides."""
    if global_rng_drawn_within(ctx, f["step"], f["rank"]) is False:
        return _loss_candidates_without_draws(ctx, f)
    dropout = any(nonzero(v) for v in config_values(ctx, ("dropout",)).values())
    ranked = ["rng"] if dropout else []
    if not samples_equal_at(ctx, f["rank"], f["step"]):
        ranked.append("data")
    if not ctx.both_have("batch"):
        ranked.append("data_pipeline")
    ranked += ["module_state", "loss", *earlier_update_candidates(ctx, f), "numerics"]
    if not dropout:
        ranked.append("rng")  # a random layer the config does not mention
    return ranked


def _loss_candidates_without_draws(ctx: Context, f: dict) -> list[str]:
    """Nothing drew from torch's generator inside the step on either side (its digests at the step's start and the
    next's equal on each): no dropout mask or noise can part the loss there. The loss's function leads where the
    step's samples are equal; a generator apart at the step's start is left only as what the loss may have taken
    from it before the step."""
    ranked = [] if samples_equal_at(ctx, f["rank"], f["step"]) else ["data"]
    if not ctx.both_have("batch"):
        ranked.append("data_pipeline")
    ranked += ["loss", "module_state", *earlier_update_candidates(ctx, f), "numerics"]
    compared = rng_at(ctx, f["step"], f["rank"])
    if compared and "torch" in compared["differ"]:
        ranked.insert(ranked.index("loss") + 1, "rng_drawn_before")
    return ranked


LOSS = Cause(
    "loss",
    check_loss,
    why="Every module call both sides watched is equal, so the watched model's outputs are the same: "
    "the loss computed from them is not. The loss function or its arguments differ: label smoothing, "
    "class weights, reduction (mean or sum, averaged over the local or the global batch), ignore_index, "
    "or targets computed outside the watched model (a teacher's, an EMA copy's).",
    fix="Compute the loss with the same function and arguments on both sides (the same criterion with the "
    "same label_smoothing, weight= and reduction), averaged over the same samples, from the same targets.",
    doc="The watch: every forward call equal, the loss differs: the loss function or its arguments "
    "(label smoothing, class weights, reduction).",
    requires=Evidence(
        "equal module outputs under a module watch",
        lambda d: _module_kind(d) == "loss_grad" or (d.module is None and not _lacks(d, "watch_state")),
    ),
)


# ---------------------------------------------------------------------------------------------
# the loss over another gathered batch
#
# A loss over every rank's features (a contrastive loss: CLIP's, SimCLR's) gathers them with the program's own
# all_gather before it computes. Where both sides fed the same samples and the loss parts first, gathers of another
# shape, count or presence at that step show what the loss was computed over: the records say it directly, where a
# generator's state (nothing drawn reaches the loss when every watched module call is equal) or a loss argument
# would only be a guess. Checked before the seeds: a generator apart at equal batches is not where the loss parts.


def check_gathered_batch(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or not isinstance(f.get("step"), int) or not _loss_parts_first(ctx, f):
        return None
    step, rank = f["step"], f["rank"] if isinstance(f.get("rank"), int) else 0
    module = ctx.cache.get("module") or {}
    if module.get("step") == step and module.get("reading_kind") != "loss_grad":
        return None  # the watch finds the forward apart before the loss: what it names comes first
    fed = _same_samples_fed(ctx, rank, step)
    if fed is None or samples_per_step_apart(ctx) is not None:
        return None  # other samples, or another number of them a step: their own causes
    apart = gathers_apart(ctx, step, rank)
    if apart is None:
        return None
    shown = dict(zip(ctx.names, map(gathers_words, apart)))
    facts = (
        f"The loss at step {step} on rank {rank} is computed over another gathered batch on each side: both sides fed "
        f"rank {rank} the same samples ({fed}), yet the program's own gathers there differ ("
        + "; ".join(f"{label}: {text}" for label, text in shown.items())
        + f"), and the {f['quantity']} differs ({f['a']!r} vs {f['b']!r})."
    )
    evidence = {"gathers": {"step": step, "rank": rank, "per_step": shown}, "first_divergence": f["quantity"]}
    facts += _generators_beside_gathers(ctx, step, rank, module, evidence)
    words = _gather_mechanism(ctx, step, rank, apart)
    return finding(ctx, LOSS_GATHERED, step, rank, evidence, facts, why=words.why, fix=words.fix)


def _loss_parts_first(ctx: Context, f: dict) -> bool:
    """The runs part first in the loss, or in the gradient norm where a side recorded no loss at that step (the
    loss it backpropagated was then not compared)."""
    if f.get("quantity") == "loss":
        return True
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, f.get("rank") or 0) if ra.get("step") == f["step"]), None)
    return f.get("quantity") == "grad_norm" and pair is not None and None in (pair[0].get("loss"), pair[1].get("loss"))


def _same_samples_fed(ctx: Context, rank, step) -> str | None:
    """The record proving both sides fed `rank` the same samples at `step` (the batch digest where both recorded
    it, else the sample indices), None where none does."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    if pair is None:
        return None
    digests = [r.get("batch_digest") for r in pair]
    if None not in digests:
        return "equal batch digests" if digests[0] == digests[1] else None
    return "equal sample indices" if same_indices_at(ctx, rank, step) else None


def _generators_beside_gathers(ctx: Context, step, rank, module: dict, evidence: dict) -> str:
    """The generators recorded apart at the step's start, put in their place beside the gathers (and kept out of
    the generic sentence add_hooked_facts appends): no lead where every watched module call is equal; a second
    candidate, with what tells the two apart, where no watch compared the forward."""
    compared = rng_at(ctx, step, rank)
    if not compared or not compared["differ"]:
        return ""
    shown = "; ".join(
        f"{n} {compared['generators'][n][0]} vs {compared['generators'][n][1]}" for n in compared["differ"]
    )
    evidence["rng_state"] = {"step": step, "rank": rank, **compared}
    said = f" The random generators are recorded in another state at step {step}'s start too ({shown})"
    if module.get("reading_kind") == "loss_grad":
        return (
            f"{said}, but every module call both sides watched is equal: nothing the watched forward drew differs, "
            "so that state is not where the loss parts (only a draw inside the loss itself could add to it: random "
            "negatives, noise)."
        )
    return (
        f"{said}: where the forward draws (dropout, noise), that is a second candidate. A module watch of the step "
        f"(DDP_PARITY_WATCH_STEP={step} in both record commands' environment) tells them apart: with every module "
        "call equal, the gathered batch is what the loss differs by."
    )


def _gather_mechanism(ctx: Context, step, rank, apart) -> Words:
    """The mechanism the records point at: nothing gathered on one side (a loss without the group's world size),
    the step's samples against one micro-batch's (accumulation), or both named with what tells them apart."""
    labels = [ctx.label("a"), ctx.label("b")]
    if not apart[0] or not apart[1]:
        alone = 0 if not apart[0] else 1
        return _filled(GATHER_MECHANISMS["none"], alone=labels[alone], other=labels[1 - alone])
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), ({}, {}))
    rows = [gathered_rows(g, ctx.meta(s).get("world_size")) for g, s in zip(apart, "ab")]
    n, k = samples_in(pair[0].get("indices")), pair[0].get("micro_batches")
    if type(k) is int and k > 1 and n and n % k == 0 and rows[0] and rows[1] and len(rows[0]) == len(rows[1]) == 1:
        sides = {next(iter(r)): i for i, r in enumerate(rows)}
        if set(sides) == {n, n // k}:
            return _filled(
                GATHER_MECHANISMS["micro_batches"],
                k=k,
                n=n,
                m=n // k,
                whole=labels[sides[n]],
                part=labels[sides[n // k]],
            )
    row_words = "; ".join(f"{label} {sorted(r) if r else 'unknown'}" for label, r in zip(labels, rows))
    lists = "; ".join(f"{label} {sorted({t for (*_, t) in g}, key=str)}" for label, g in zip(labels, apart))
    samples = f"{n} in {k} micro-batch(es)" if n and type(k) is int else "not recorded"
    return _filled(GATHER_MECHANISMS["other"], rows=row_words, lists=lists, samples=samples)


def _filled(words: Words, **values) -> Words:
    return Words(words.why.format(**values), words.fix.format(**values))


# how the gathers differ -> why the loss is computed over another batch, and the fix
GATHER_MECHANISMS = {
    "none": Words(
        "{alone} gathers nothing of its own there, where {other} gathers every rank's: its loss is computed over its "
        "own rank's samples only. A loss over gathered features built without the process group's rank and world "
        "size (left at rank=0, world_size=1, or built before the group exists, in a LightningModule's __init__) "
        "gathers nothing.",
        "Build the loss on {alone} with the process group's rank and world size, as on {other} (rank=dist.get_rank(), "
        "world_size=dist.get_world_size(); in Lightning self.global_rank and self.trainer.world_size, read in setup() "
        "or later, once the group exists), so that both compute it over every rank's features.",
    ),
    "micro_batches": Words(
        "With {k} micro-batches a step, {whole}'s gathers carry {n} rows a rank, the step's {n} samples, and {part}'s "
        "{m}, one micro-batch's: {part} computes each micro-batch's loss over that micro-batch's features alone "
        "(Lightning's accumulate_grad_batches runs the loss once per micro-batch), {whole} each micro-batch's against "
        "the cached features of the step's other micro-batches (a feature-caching accumulation: GradCache, "
        "open_clip's --accum-freq).",
        "Compute the loss over the same gathered batch on both sides: where the program contrasts each micro-batch "
        "against the cached features of the others, port that accumulation by hand on {part} (Lightning: "
        "automatic_optimization=False; every micro-batch's features under no_grad first, then each micro-batch again "
        "with gradients against the cached others, manual_backward each, one optimizer step) instead of "
        "accumulate_grad_batches; where it contrasts each micro-batch alone, do that on {whole}.",
    ),
    "other": Words(
        "The records do not tell two mechanisms apart: a loss given another rank or world size (an all_gather's list "
        "is as long as the group it gathers over: {lists}), or the step's samples gathered at another granularity "
        "under accumulation (each micro-batch alone under accumulate_grad_batches, against all of them together in a "
        "feature-caching loop). The rows a rank each gather carries ({rows}) against the step's samples ({samples}) "
        "tell them apart: the step's count on one side and one micro-batch's on the other is the accumulation; lists "
        "of other lengths are the world size.",
        "Compute the loss over the same gathered batch on both sides: give the loss the process group's rank and "
        "world size on both, and contrast the same samples together (each micro-batch against the others' cached "
        "features on both, or each alone on both); one step's gathered shapes, equal on both sides, confirm it.",
    ),
}

LOSS_GATHERED = Cause(
    "loss.gathered",
    check_gathered_batch,
    why="{why}",
    fix="{fix}",
    doc="The same samples fed (batch digests, else indices) and as many a step, the loss parting first (or the "
    "gradient norm where a side recorded no loss), the watch (where it ran) finding the forward equal, and the "
    "program's own gathers of that step (all_gather and kin, not of gradients, one side's at least more than one "
    "number a tensor) differing in shape, count or presence, and not so at an earlier step: the loss is computed "
    "over another gathered batch (one side gathering nothing: a loss without the group's world size; one "
    "micro-batch's rows against the step's: accumulation; else both, with what tells them apart). Before the seeds: "
    "a generator apart at that step is said beside it, as a second candidate only where no watch compared the "
    "forward.",
    requires=Evidence("the program's own gathers of the step, side by side", lambda d: "gathers" in d.evidence),
)


# ---------------------------------------------------------------------------------------------
# an evaluation run in training mode
#
# An evaluation run in the other mode: one side's evaluation forwards (the forwards the hooks of `ddp-parity
# record` saw with gradients off or under eval(), trace/rank{r}.evaluations.jsonl) ran with the model in
# training mode where the other side's ran in eval mode. In training mode an
# evaluation updates BatchNorm's running statistics from the evaluation batches and keeps dropout active; the
# training records stay equal (a training forward normalises by its own batch), and the difference shows in the
# buffers the model ends with and the evaluation's outputs. Said with the side, the mode, the step the
# evaluation followed, what the records show of the consequence, and the fix.

# the buffers an evaluation in training mode moves: BatchNorm's running statistics and its count
RUNNING_STATISTICS = ("running_mean", "running_var", "num_batches_tracked")
# what an evaluation in training mode never moves in the training records: it reaches the training only through
# the random draws of its dropout (the samples, the batch, the loss and what follows them), and through its figures
# where a scheduler sets the rate from them (`RATE_FROM_FIGURES`); never otherwise the rate the optimizer steps with
UNMOVED_BY_AN_EVALUATION = ("lr",)
RATE_FROM_FIGURES = ("ReduceLROnPlateau",)  # stepped with a metric the program computes, a validation's often


def check_evaluation_mode(ctx: Context) -> Finding | None:
    found = _mode_apart(ctx)
    if found is None:
        return None
    first = ctx.earliest
    if first is not None and not (isinstance(first.get("step"), int) and first["step"] > found["step"]):
        return None  # the training parts at or before this evaluation: it cannot be the cause there
    if _unmoved_by_an_evaluation(ctx, first, found["rank"]):
        return None  # the training's first difference is one no evaluation's mode moves: its own cause names it
    if first is None and ctx.cmp.params.all_equal:
        return None  # nothing it moved is in the training or the final tensors (no BatchNorm): a warning says it
    side, other = found["side"], "b" if found["side"] == "a" else "a"
    slipped = ctx.label(side)
    facts = (
        f"On rank {found['rank']} {slipped}'s evaluation after step {found['step']} ran its forwards with the model "
        f"in training mode (training=True), where {ctx.label(other)}'s evaluation after step "
        f"{found['other_step']} ran in eval mode (training=False){_every_evaluation(found)}."
    )
    facts += _consequence(ctx, first)
    evidence = {
        "evaluation": {ctx.label(side): found["record"], ctx.label(other): found["other_record"]},
        "rank": found["rank"],
    }
    return finding(ctx, EVALUATION_TRAIN_MODE, found["step"], found["rank"], evidence, facts, side=slipped)


def _unmoved_by_an_evaluation(ctx: Context, first: dict | None, rank: int) -> bool:
    """The training's first difference is in a quantity no evaluation's mode moves (the rate, where no scheduler sets
    it from a figure the program computes): an evaluation before it cannot be its cause, and the quantity's own
    cause is the diagnosis (a warning still says the evaluations' difference)."""
    if first is None or first.get("quantity") not in UNMOVED_BY_AN_EVALUATION:
        return False
    built = [fact_items(read_hook_facts(ctx.run(s), r), "schedulers") for s in ("a", "b") for r in {0, rank}]
    return not any(item.get("class") in RATE_FROM_FIGURES for items in built for item in items)


def _every_evaluation(found: dict) -> str:
    if found["all_of_side"]:
        return f"; every evaluation {found['side_label']} recorded on that rank ran in that mode"
    return ""


def _mode_apart(ctx: Context) -> dict | None:
    """The first evaluation (per rank, in rank order) whose mode differs from the other side's evaluation at
    the same point (the step it follows and the micro-batches since), or, where the sides evaluate at other
    points, from every evaluation the other side recorded on that rank: the side, the mode, both records."""
    evaluations = model_evaluations(ctx.run("a")), model_evaluations(ctx.run("b"))
    for rank in sorted(set(evaluations[0]) & set(evaluations[1])):
        a, b = evaluations[0][rank], evaluations[1][rank]
        found = _at_the_same_point(a, b) or _against_every_one(a, b)
        if found is not None:
            side, record, other_record = found
            mine = a if side == "a" else b
            return {
                "side": side,
                "side_label": ctx.label(side),
                "rank": rank,
                "step": record["step"],
                "other_step": other_record["step"],
                "record": record,
                "other_record": other_record,
                "all_of_side": len(mine) > 1 and all(r.get("training") is record.get("training") for r in mine),
            }
    return None


def _at_the_same_point(a: list[dict], b: list[dict]):
    at_b = {(r["step"], r["micro_batch"]): r for r in b}
    for ra in a:
        rb = at_b.get((ra["step"], ra["micro_batch"]))
        if rb is not None and modes_apart(ra, rb):
            return _slipped(ra, rb)
    return None


def _against_every_one(a: list[dict], b: list[dict]):
    """One side in one mode throughout, the other in the other mode throughout."""
    modes_a, modes_b = {r.get("training") for r in a}, {r.get("training") for r in b}
    if len(modes_a) == 1 and len(modes_b) == 1 and modes_a != modes_b and None not in modes_a | modes_b:
        return _slipped(a[0], b[0])
    return None


def _slipped(ra: dict, rb: dict) -> tuple[str, dict, dict]:
    """(the side whose evaluation ran in training mode, its record, the other's): the modes differ, so one is."""
    return ("a", ra, rb) if ra["training"] else ("b", rb, ra)


def _consequence(ctx: Context, first: dict | None) -> str:
    """What the records show of it: the running statistics the sides end with, the training's first difference."""
    said = ""
    rows = ctx.cmp.param_tensors
    moved = [row["name"] for row in rows if not row["equal"] and row["name"].endswith(RUNNING_STATISTICS)]
    if moved:
        shown = ", ".join(moved[:4]) + (f" and {len(moved) - 4} more" if len(moved) > 4 else "")
        said += f" The final BatchNorm running statistics differ between the sides ({shown})"
        said += ", while no step's training record differs." if first is None else "."
    elif first is None:
        said += " No step's training record differs."
    if first is not None:
        said += f" The training records first differ after it, at step {first['step']} ({first['quantity']})."
    return said


_WHY = (
    "An evaluation forward in training mode is a training forward without the backward: BatchNorm normalises each "
    "evaluation batch by its own statistics and updates its running statistics from the evaluation data, and "
    "dropout, where the model has it, stays active, so the evaluation's figures and the buffers the model ends "
    "with (and every later evaluation that reads them) differ from the other side's."
)
_FIX = (
    "On {side}, call model.eval() before evaluating and model.train() after it, before training goes on (Lightning "
    "does both around its validation loop)."
)

EVALUATION_TRAIN_MODE = Cause(
    "module_state.evaluation_mode",
    check_evaluation_mode,
    why=_WHY,
    fix=_FIX,
    doc="The hooks' evaluations: one side evaluates with the model in training mode, the other in eval mode "
    "(model.eval() forgotten before evaluating): BatchNorm buffers updated by evaluation data, dropout active.",
)


# ---------------------------------------------------------------------------------------------
# a step trained in eval mode
#
# The hooks take each step's generator digest at the step's first training forward (train mode, gradients on:
# `rng.at` "forward"), or at the update where none ran. A side that ran a step with no training forward while it
# had one at the step before, and the other side had one at both, switched its model out of training mode in
# between: a loop that evaluates with model.eval() and never calls model.train() again trains with dropout off and
# BatchNorm on its running statistics. Said with the eval() the hooks saw before that step, where they saw one.


def check_training_mode(ctx: Context) -> Finding | None:
    first = ctx.earliest
    if first is None or not isinstance(first.get("step"), int) or first["step"] < 2:
        return None
    step, rank = first["step"], first.get("rank") if isinstance(first.get("rank"), int) else 0
    at = [_forward_points(ctx.run(s), rank, (step - 1, step)) for s in ("a", "b")]
    before, now = [a.get(step - 1) for a in at], [a.get(step) for a in at]
    if before != ["forward", "forward"] or sorted(map(str, now)) != ["forward", "update"]:
        return None
    side = "a" if now[0] == "update" else "b"
    label, other = ctx.label(side), ctx.label("b" if side == "a" else "a")
    untrained = sorted(
        s for s, point in _forward_points(ctx.run(side), rank, None).items() if s >= step and point == "update"
    )
    switch = _eval_before(ctx.run(side), rank, step)
    facts = (
        f"{label} ran step {step} with no forward in training mode (rank {rank}; the hooks take each step's generator "
        f"digest at its first forward with the model in training mode and gradients on, and took {label}'s at the "
        f"update at step(s) {_spans(untrained)}, {other}'s at a training forward, as both at step {step - 1})"
    )
    facts += (
        f", after eval() on {switch['module']} before step {switch['before_step']} with no train() after it."
        if switch
        else "."
    )
    evidence = {"steps_without_training_forward": {label: untrained}, "rank": rank}
    if switch:
        evidence["eval_switch"] = {label: switch}
    return finding(ctx, TRAINING_MODE, step, rank, evidence, facts, side=label)


def _forward_points(run, rank: int, steps) -> dict:
    """{step: where its generator digest was taken ("forward" or "update")}, for `steps` (None: every step)."""
    out = {}
    for rec in records_of(run, rank):
        point = (rec.get("rng") or {}).get("at") if isinstance(rec.get("rng"), dict) else None
        if isinstance(rec.get("step"), int) and (steps is None or rec["step"] in steps) and point:
            out[rec["step"]] = point
    return out


def _eval_before(run, rank: int, step: int) -> dict | None:
    """The last train()/eval() switch the hooks saw before `step`, where it is an eval()."""
    items = ((read_hook_facts(run, rank) or {}).get("modes") or {}).get("items") or []
    switches = [
        i for i in items if isinstance(i, dict) and isinstance(i.get("before_step"), int) and i["before_step"] <= step
    ]
    last = max(switches, key=lambda i: (i["before_step"], i.get("order", 0)), default=None)
    return last if last is not None and last.get("training") is False else None


def _spans(steps: list[int]) -> str:
    if len(steps) > 1 and steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}..{steps[-1]}"
    return ", ".join(map(str, steps))


TRAINING_MODE = Cause(
    "module_state.training_mode",
    check_training_mode,
    why="In eval mode dropout passes its input through and BatchNorm normalises with its running statistics, so the "
    "same batch gives another loss and other gradients; the usual slip is a loop that calls model.eval() to evaluate "
    "and never model.train() again (Lightning switches back after its validation loop).",
    fix="On {side}, put the model back in training mode before training goes on: call model.train() after each "
    "evaluation (or at the start of every epoch).",
    doc="The hooks took a step's generator digest at the update, not at a training forward, on one side only, "
    "after a step where both had one: that side ran the step with its model in eval mode (an eval() the hooks saw "
    "before it is named).",
    requires=Evidence(
        "the steps each side ran with no training forward",
        lambda d: "steps_without_training_forward" in d.evidence,
    ),
)
