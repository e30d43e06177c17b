"""The global generator re-seeded on one side before the first step: the seeds the hooks of `ddp-parity
record` saw (each `torch.manual_seed`, which `seed_everything` calls, with the step it came before) differ
before step 1, and the runs part at the first step in what draws from that generator (the samples, the
batch), before any update: every Lightning port seeds again, so the seeds alone prove nothing. Lightning's
DDP setup re-seeds every rank after the LightningModule was built in `__init__`: what was drawn before the
second seed (the initial weights) and what is drawn after it (a shuffle, augmentations, dropout) come from
other points of the stream than in a loop that seeds once.

The same seeds, but other draws between the last of them and step 1: each DataLoader iterator without a
generator of its own takes one number from the global generator for its workers' base seed (the hooks note each
one), so a side that iterates one more loader before training (Lightning's sanity check of the validation
loader) shifts what draws after it: a RandomSampler's shuffle, augmentations, dropout.
"""

from __future__ import annotations

from ddp_parity.compare import relations
from ddp_parity.compare.causes.base import (
    Cause,
    Context,
    Evidence,
    aligned_records,
    finding,
    fmt,
    same_batch_at,
    same_indices_at,
)
from ddp_parity.compare.causes.hooked import (
    global_rng_drawn_near,
    global_rng_drawn_within,
    global_rng_equal,
    rng_at,
    seeds_words,
)
from ddp_parity.compare.causes.implicated import before_any_update
from ddp_parity.compare.causes.initial_state import init_finding
from ddp_parity.compare.causes.sampler_order import (
    order_evidence,
    order_facts,
    order_fix,
    order_headline,
    order_settings,
    sampler_order,
)
from ddp_parity.compare.causes.samples import (
    feeding_iterator,
    sampler_differences,
    sampler_epochs_apart,
    spans_steps,
)
from ddp_parity.compare.causes.scaling import loss_scaled_at
from ddp_parity.compare.causes.seed_records import (
    common_ranks,
    initial_weights_words,
    other_values,
    reseeds_inert,
    sampler_seeds,
    samples_per_step_apart,
    seeds_before_step,
    seeds_by_rank,
    seeds_per_rank_words,
)
from ddp_parity.compare.evaluations import model_evaluations
from ddp_parity.compare.findings import Finding
from ddp_parity.trace_files import fact_items, read_hook_facts


def seeds_before_first_step(run, rank) -> list | None:
    """The seeds a rank's hooks recorded before its first step, in order; None where no hook facts were
    recorded (an explicit recording sees no seed)."""
    return seeds_before_step(run, rank, 1)


def _seeded_ranks(ctx: Context, first: dict) -> tuple[dict, list[int]] | None:
    """({rank: [a's seeds, b's seeds]} on every rank, the ranks the first divergence may stand on): the seeds
    are read on every rank both sides recorded; the first divergence stands on its own rank, or on any where it
    names none. None where no seed was recorded on both sides, or where the sides took another number of samples
    per step (another accumulation or batch size, named before any seed)."""
    by_rank = seeds_by_rank(ctx)
    if by_rank is None or samples_per_step_apart(ctx) is not None:
        return None
    rank = first.get("rank")
    return by_rank, ([rank] if isinstance(rank, int) else sorted(by_rank))


def check_reseed(ctx: Context) -> Finding | None:
    first = before_any_update(ctx)
    module = ctx.cache.get("module") or {}
    # a side that records no indices (a loop fed by its own generator) parts first in the loss: the module watch
    # finding the first module's input apart at step 1 is the batch
    by_watch = (
        first is not None
        and first.get("step") == 1
        and module.get("reading_kind") == "batch"
        and module.get("step") == 1
    )
    if ctx.recorded_only(first):
        return None  # apart only as recorded (the training proved equal, a loss reduced in place): nothing drew apart
    by_generator = first is not None and first.get("quantity") == "loss" and _torch_apart_at_step_1(ctx, first)
    if by_generator and (_forward_drew_nothing_apart(ctx, first, module) or loss_scaled_at(ctx, None, 1)):
        return None  # the loss parts over equal samples, and nothing the forward drew differs: not the generator's
    if first is None or (first.get("quantity") not in ("samples", "batch") and not by_watch and not by_generator):
        return None  # a loss apart at equal batches may be any forward difference: the watch or generator tells
    if _samples_apart_by_epoch(ctx, first):
        return None  # the sampler ordered the pass from another epoch: data_order.epoch, whatever was seeded
    seeded = _seeded_ranks(ctx, first)
    if seeded is None or sampler_differences(ctx):
        return None  # unrecorded, another number of samples per step, or another sampler (their own causes)
    by_rank, candidates = seeded
    if any(other_values(pair) for pair in by_rank.values()):
        return None  # other seed values on a rank (a per-rank seed, another seed): rng.seed's
    rank = next((r for r in candidates if r in by_rank and len(by_rank[r][0]) != len(by_rank[r][1])), None)
    if rank is None or global_rng_equal(ctx, 1, rank):
        return None  # the same seeds there, or the generator's state equal at step 1's start: nothing drawn apart
    seeds = by_rank[rank]
    more = "a" if len(seeds[0]) > len(seeds[1]) else "b"
    if reseeds_inert(ctx.run(more), rank):
        return None  # nothing drew between its seeds (the model built after the last): the re-seed changed nothing
    evidence = {
        "seeds_before_step_1": ctx.both(*seeds),
        "seeds_before_step_1_by_rank": {str(r): ctx.both(*pair) for r, pair in by_rank.items()},
        "first_divergence": first.get("quantity"),
    }
    if by_generator:
        evidence["rng_at_step_1"] = {n: ctx.both(*v) for n, v in rng_at(ctx, 1, rank)["generators"].items()}
    shown = " (the first module input, as the module watch found)" if by_watch else ""
    if by_generator:
        shown = ", at equal samples, with torch's generator recorded in another state at step 1's start"
    facts = (
        f"The runs part at step 1 in the {'batch' if by_watch else first.get('quantity')} on rank {rank}"
        f"{shown}, before any update, and the "
        "global "
        f"generator was seeded with the same values, more often on {ctx.label(more)}, before step 1 (as the hooks "
        f"recorded, on every rank): {seeds_per_rank_words(ctx, by_rank)}."
    )
    return finding(ctx, RNG_RESEED, 1, rank, evidence, facts, side=ctx.label(more), other=ctx.label("ab"[more == "a"]))


RNG_RESEED = Cause(
    "rng.reseed",
    check_reseed,
    why="What draws from the global generator after a seed (a sampler's shuffle, random augmentations, dropout) "
    "draws from another point of the stream where the seeds, or what was drawn between them, differ. "
    "{side} seeds again before training (Lightning's DDP setup re-seeds every rank with seed_everything's "
    "seed): what was built before that seed (a model built in the LightningModule's __init__ draws its initial "
    "weights) no longer shifts what is drawn after it, as it does on {other}.",
    fix="Seed the global generator at the same points on both sides: build the model after the last seed on "
    "both (Lightning: in configure_model, which runs after the re-seed; raw: torch.manual_seed(seed) again "
    "right after building the model, as Lightning does), so that the same draws follow the same seed.",
    doc="The hooks' seeds before step 1, read on every rank, are the same values, set more often on one side (a "
    "re-seed: Lightning's seed_everything in its DDP setup), both sides took as many samples per step, and the runs "
    "part at step 1 before any update, in the samples or the batch.",
    requires=Evidence("the seeds recorded before step 1 on both sides", lambda d: "seeds_before_step_1" in d.evidence),
)


def _samples_apart_by_epoch(ctx: Context, first: dict) -> bool:
    """The samples part where the records' epochs (set_epoch's values) differ, or where the sampler that ordered
    the step's pass was at another epoch as it drew its order: a DistributedSampler's order is a function of its
    seed and epoch, and draws nothing from the global generator."""
    if first.get("quantity") != "samples":
        return False
    if first.get("epoch_b", first.get("epoch")) != first.get("epoch"):
        return True
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    return isinstance(first.get("step"), int) and sampler_epochs_apart(ctx, rank, first["step"]) is not None


def _forward_drew_nothing_apart(ctx: Context, first: dict, module: dict) -> bool:
    """At step 1 the generator's state can part the loss only through what draws from it: the shuffle (the samples
    are equal here), the forward's draws (dropout, noise) or a tensor drawn for the loss. The records rule the
    forward's out where the module watch finds every forward call equal at step 1 (the gradient into the outputs
    apart), or where neither side's digest moved inside step 1 (nothing drew there): the loss itself is then
    where the runs part, and check_loss names it with the generator as what is left to rule out."""
    if module.get("step") == 1 and module.get("reading_kind") == "loss_grad":
        return True
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    return global_rng_drawn_within(ctx, 1, rank) is False


def _torch_apart_at_step_1(ctx: Context, first: dict) -> bool:
    """The loss parts at step 1 at equal recorded samples, and torch's generator is recorded in another state at
    step 1's start on that rank: what draws from it in the forward (dropout, noise) draws otherwise."""
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    if not same_indices_at(ctx, rank, 1):
        return False
    compared = rng_at(ctx, 1, rank)
    return compared is not None and "torch" in compared["differ"]


def loader_draws_before_first_step(run, rank) -> list | None:
    """The datasets of the DataLoader iterators that drew from the global generator after the last seed before
    step 1, in order; None where the hooks recorded no iterator at all (an explicit recording, older traces)."""
    draws = loader_draws_up_to(run, rank, 1)
    return None if draws is None else [dataset for _, dataset in draws]


def loader_draws_up_to(run, rank, step: int) -> list | None:
    """(before_step, dataset) of each DataLoader iterator that drew from the global generator after the last seed
    before `step`, up to `step`, in order; None where the hooks recorded no iterator at all."""
    items = _draw_items(run, rank, step)
    return None if items is None else [(i.get("before_step"), i.get("dataset")) for i in items]


def _draw_items(run, rank, step: int) -> list | None:
    """The hooks' DataLoader iterators loader_draws_up_to counts, as recorded."""
    facts = read_hook_facts(run, rank)
    if not facts or not (isinstance(facts.get("loader_iterators"), dict) or _notes_in_order(facts)):
        return None  # no iterator noted by hooks that note them: none iterated; older hooks: unknown
    seeds = (facts.get("seeds") or {}).get("items") or []
    last_seed = max(
        (i.get("order", 0) for i in seeds if isinstance(i, dict) and (i.get("before_step") or 0) <= step), default=0
    )
    items = (facts.get("loader_iterators") or {}).get("items") or []
    undone = _draws_undone(items, facts, step)
    return [
        i
        for i in items
        if isinstance(i, dict)
        and (i.get("before_step") or 0) <= step
        and i.get("global_draw")
        and i.get("order", 0) > last_seed
        and i.get("order") not in undone
    ]


def _notes_in_order(facts: dict) -> bool:
    """The hooks that wrote these facts note every DataLoader iterator (they came with the one order across every
    kind of note, `order`): a side with no `loader_iterators` iterated none."""
    return any(
        isinstance(value, dict) and any(isinstance(i, dict) and "order" in i for i in value.get("items") or [])
        for value in facts.values()
    )


def _draws_undone(iterators: list, facts: dict, step: int) -> set:
    """The orders of the DataLoader iterators whose draw a later restore of torch's generator undid, up to `step`:
    a restore putting back the state an iterator found before its draw (`rng_before`) undoes that draw and every one
    after it up to the restore (Lightning's isolate_rng around its sanity check: its validation loader's draw)."""
    restores = [
        r
        for r in (facts.get("restores") or {}).get("items") or []
        if isinstance(r, dict)
        and r.get("generator") == "torch"
        and r.get("state")
        and (r.get("before_step") or 0) <= step
    ]
    drawn = [i for i in iterators if isinstance(i, dict) and i.get("global_draw") and isinstance(i.get("order"), int)]
    undone = set()
    for restore in restores:
        at = restore.get("order", 0)
        start = next((i["order"] for i in drawn if i["order"] < at and i.get("rng_before") == restore["state"]), None)
        if start is not None:
            undone.update(i["order"] for i in drawn if start <= i["order"] < at)
    return undone


def seeds_up_to(run, rank, step: int) -> list | None:
    facts = read_hook_facts(run, rank)
    if not facts:
        return None
    items = (facts.get("seeds") or {}).get("items") or []
    return [i.get("seed") for i in items if isinstance(i, dict) and (i.get("before_step") or 0) <= step]


def check_loader_draws(ctx: Context) -> Finding | None:
    """Before step 1 (the runs part there, before any update), or at a later step the training parts at after
    equal steps: the same seeds, but another number of DataLoader iterators drew from the global generator since
    the last seed (an evaluation's loader iterated once more on one side)."""
    first = ctx.earliest
    if (
        first is None
        or first.get("quantity") not in ("samples", "batch", "loss")
        or not isinstance(first.get("step"), int)
    ):
        return None
    step = first["step"]
    if first["quantity"] == "loss" and ctx.cmp.training_equal:
        return None  # every parameter equal at every step and at the end: no draw reached the training, the loss
        # is measured otherwise (measured.py names how)
    rank_at = first.get("rank") if isinstance(first.get("rank"), int) else 0
    if first["quantity"] == "loss" and loss_scaled_at(ctx, rank_at, step):
        return None  # a loss exactly k × the other's at every step from here is a scaling, never a draw (loss.factor)
    if first["quantity"] == "loss" and not global_rng_drawn_near(ctx, step, rank_at):
        return None  # a loss parts by what the step draws (dropout, noise before the forward): the recorded digests
        # show nothing drawing from the global generator around that step (samples part by a shuffle drawn earlier)
    if step == 1 and before_any_update(ctx) is None:
        return None
    if step > 1 and (ctx.walk is None or ctx.walk.steps_equal_before < 1):
        return None
    if samples_per_step_apart(ctx) is not None:
        return None  # another accumulation or batch size parts the samples whatever was drawn: named first
    if _samples_apart_by_epoch(ctx, first):
        return None  # the sampler's epochs part the samples whatever was drawn (data_order.epoch)
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    seeds = [seeds_up_to(ctx.run(s), rank, step) for s in ("a", "b")]
    draws = [loader_draws_up_to(ctx.run(s), rank, step) for s in ("a", "b")]
    # the draws are counted from the last seed: what the generator holds there is that seed's value alone, so a
    # seed repeated with nothing drawn between (Lightning's DDP setup seeding again) is no other seed
    last = [side[-1:] if side is not None else None for side in seeds]
    if None in draws or None in last or last[0] != last[1]:
        return None  # unrecorded, or another last seed (its own cause)
    between = len(draws[0]) == len(draws[1])
    if between:
        # as many in all, but the generators agreed at the previous step's start and the draws since differ (an
        # evaluation's loader iterated before this step on one side, before a later one on the other)
        draws = [[d for d in side if d[0] == step] for side in draws]
        if step == 1 or len(draws[0]) == len(draws[1]) or not global_rng_equal(ctx, step - 1, rank):
            return None
    if _sampler_may_part(ctx, first, rank):
        return None  # another sampler, and samples it may have ordered otherwise: the data causes tell
    if global_rng_equal(ctx, step, rank):
        return None  # the draws left the global generator as the other side's (Lightning isolates its sanity check's)
    more = "a" if len(draws[0]) > len(draws[1]) else "b"
    na, nb = ctx.names
    shown = [_draws_words(d) for d in draws]
    evidence = {"first_divergence": first.get("quantity")}
    if step == 1:
        evidence["loader_draws_before_step_1"] = ctx.both(*[[d for _, d in side] for side in draws])
        when = "at step 1, before any update,"
    else:
        evidence["loader_draws_up_to_step"] = {"step": step, **ctx.both(*[[list(x) for x in side] for side in draws])}
        when = f"at step {step}, every step before it equal,"
    since = (
        f"between step {step - 1} and step {step} (the generators recorded equal at step {step - 1}'s start)"
        if between
        else f"since the last seed up to step {step}"
    )
    facts = (
        f"The runs part {when} in the {first.get('quantity')} with the same seeds, and {since} rank {rank} iterated "
        f"{len(draws[0])} DataLoader(s) drawing from the global generator on {na} ({shown[0]}) and {len(draws[1])} "
        f"on {nb} ({shown[1]}) (as the hooks recorded)."
    )
    values = {"side": ctx.label(more), "k": abs(len(draws[0]) - len(draws[1]))}
    values.update(LOADER_DRAWS_AT_START if step == 1 else LOADER_DRAWS_LATER)
    # no step trained from it, and its batches all yielded between two steps: an evaluation's, not a second loader
    # feeding the training beside the one the backward takes
    drawn = _draw_items(ctx.run(more), rank, step) or []
    evaluating = [i for i in drawn if i.get("trained") is False and not spans_steps(i)]
    if step > 1 and evaluating:
        alike = [r for r in common_ranks(ctx) if r != rank and _draw_counts_alike(ctx, r, step)]
        trained = {i.get("dataset") for i in drawn if i.get("trained") is True}
        listed = _draws_words([(i.get("before_step"), _iterator_words(i, trained)) for i in evaluating])
        facts += f" {ctx.label(more)}'s rank {rank} iterated {listed} for an evaluation (no step trained from it)" + (
            f"; rank(s) {', '.join(map(str, alike))} drew as often on both sides." if alike else "."
        )
        facts += evaluated_ranks_apart(ctx, step, evidence)
    facts += _fed_from_words(ctx, rank, step, evidence)
    return finding(ctx, RNG_LOADER_DRAWS, step, rank, evidence, facts, **values)


def _iterator_words(item: dict, trained: set) -> str:
    """An iterator's dataset, with its sampler where a training iterator's dataset has the same class (`_CIFAR
    (DistributedSampler of 8 samples)`): what tells a test set's loader from a training set's there."""
    sampler = item.get("sampler") if isinstance(item.get("sampler"), dict) else {}
    if item.get("dataset") not in trained or not sampler.get("class"):
        return str(item.get("dataset"))
    size = f" of {sampler['num_samples']} samples" if isinstance(sampler.get("num_samples"), int) else ""
    return f"{item.get('dataset')} ({sampler['class']}{size})"


def _fed_from_words(ctx: Context, rank, step: int, evidence: dict) -> str:
    """Where the training iterator that fed `step` drew its workers' base seed from torch's generator in another
    state on each side (`rng_before`): said, the draw the extra iterator moved."""
    fed = [feeding_iterator(fact_items(read_hook_facts(ctx.run(s), rank), "loader_iterators"), step) for s in "ab"]
    states = [f.get("rng_before") if f else None for f in fed]
    if not all(isinstance(x, str) for x in states) or states[0] == states[1]:
        return ""
    evidence["fed_by_iterator_rng_before"] = ctx.both(*states)
    na, nb = ctx.names
    return (
        f" The training iterator that fed step {step} on rank {rank} drew its workers' base seed from torch's "
        f"generator at {states[0][:16]} on {na} and {states[1][:16]} on {nb} (the hooks' rng_before)."
    )


def _sampler_may_part(ctx: Context, first: dict, rank) -> bool:
    """The samplers recorded differ and may have ordered the parting step's samples otherwise. A loss apart is no
    sampler's doing (the samples and the batch were equal before it), and neither is a batch apart at sample
    indices both sides recorded equal at that step: a sampler of another class or arguments (a DistributedSampler
    subclass whose set_epoch does nothing) that ordered the same samples parts nothing there."""
    if first.get("quantity") == "loss" or same_indices_at(ctx, rank, first.get("step")):
        return False
    return bool(sampler_differences(ctx))


def _evaluated_ranks(run, step: int) -> list[int] | None:
    """The ranks whose hooks recorded an evaluation of the model before `step` (after fewer optimizer steps); None
    where the run recorded no evaluation anywhere (an explicit recording, or no evaluation: unknown which)."""
    found = model_evaluations(run)
    if not found:
        return None
    return sorted(r for r, records in found.items() if any(e.get("step", step) < step for e in records))


def evaluated_ranks_apart(ctx: Context, step: int, evidence: dict) -> str:
    """Where the sides evaluated the model on other ranks before `step` (the hooks' evaluations), those ranks said
    (and put in `evidence`): an evaluation on a rank the other side never evaluates on draws there alone."""
    evaluated = [_evaluated_ranks(ctx.run(s), step) for s in ("a", "b")]
    if None in evaluated or evaluated[0] == evaluated[1]:
        return ""
    evidence["evaluated_ranks"] = ctx.both(*evaluated)
    return f" {_evaluated_ranks_words(ctx, evaluated)}."


def _evaluated_ranks_words(ctx: Context, evaluated: list) -> str:
    """`raw evaluated on rank(s) 0 and lightning on rank(s) 0, 1 (the hooks' evaluations); on rank(s) 1 only
    lightning evaluates`: the ranks each side evaluated on before the step, and those only one side evaluated on."""
    shown = [", ".join(map(str, ranks)) or "none" for ranks in evaluated]
    na, nb = ctx.names
    said = f"{na} evaluated on rank(s) {shown[0]} and {nb} on rank(s) {shown[1]} (the hooks' evaluations)"
    for side, mine, theirs in (("a", *evaluated), ("b", *reversed(evaluated))):
        only = [r for r in mine if r not in theirs]
        if only:
            said += f"; on rank(s) {', '.join(map(str, only))} only {ctx.label(side)} evaluates"
    return said


# where the extra iterator comes from, and what else to do than give each loader a generator of its own: before
# step 1 (a sanity check), or between two steps (an evaluation on one side, or on one rank)
LOADER_DRAWS_AT_START = {
    "where": "Lightning's sanity check iterates the validation loader before training; a loop that evaluates two "
    "models iterates its loader twice",
    "also": " (on Lightning, Trainer(num_sanity_val_steps=0) skips the sanity check)",
}
LOADER_DRAWS_LATER = {
    "where": "an evaluation's loader, iterated between two steps on one side or on one rank only",
    "also": " (evaluate at the same steps and on the same ranks on both sides, or restore the generator's state "
    "after an evaluation: torch.get_rng_state() before it, torch.set_rng_state() after, as Lightning's isolate_rng "
    "does)",
}


def _draw_counts_alike(ctx: Context, rank, step: int) -> bool:
    counts = [loader_draws_up_to(ctx.run(s), rank, step) for s in ("a", "b")]
    return None not in counts and len(counts[0]) == len(counts[1])


def _draws_words(draws: list) -> str:
    """`TensorDataset before step 1, ValSet ×2 before step 5`: each dataset and step with its count."""
    counted: dict = {}
    for before, dataset in draws:
        counted[(dataset, before)] = counted.get((dataset, before), 0) + 1
    words = [f"{d}{f' ×{n}' if n > 1 else ''} before step {s}" for (d, s), n in counted.items()]
    return ", ".join(words[:8]) + (f" and {len(words) - 8} more" if len(words) > 8 else "") if words else "none"


def check_drawn_before_step_1(ctx: Context) -> Finding | None:
    """The batch parts at step 1 at equal sample indices, before any update; the last seed before step 1 is the
    same value on both sides (a repeat on one side drawing nothing between, where the hooks say so), as many
    DataLoader iterators drew from the global generator since it, and yet torch's generator is recorded in
    another state at step 1's first network forward: something else drew from it between the last seed and the
    first batch on one side (a model or a copy built again where the other deep-copies it), so the batch's random
    transforms drew other numbers."""
    first = ctx.earliest
    if first is None or first.get("quantity") != "batch" or first.get("step") != 1:
        return None
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    if not same_indices_at(ctx, rank, 1):
        return None  # the samples are not both recorded, or not equal: the data causes tell
    compared = rng_at(ctx, 1, rank)
    if compared is None or "torch" not in compared["differ"]:
        return None  # unrecorded, taken at other moments, or equal: the generator is not what parts the batch
    seeds = [seeds_up_to(ctx.run(s), rank, 1) for s in ("a", "b")]
    draws = [loader_draws_up_to(ctx.run(s), rank, 1) for s in ("a", "b")]
    if None in seeds or None in draws or not all(seeds) or seeds[0][-1] != seeds[1][-1]:
        return None  # unrecorded, or another last seed (its own cause)
    if len(draws[0]) != len(draws[1]):
        return None  # the loaders drew apart: rng.loader_draws
    for side, mine in zip(("a", "b"), seeds):
        if len(mine) > 1 and len(mine) > min(len(x) for x in seeds) and not reseeds_inert(ctx.run(side), rank):
            return None  # a seed repeated after drawing on one side: rng.reseed's
    evidence = {
        "rng_at_step_1": {n: ctx.both(*v) for n, v in compared["generators"].items()},
        "seeds_before_step_1": ctx.both(*seeds),
        "loader_draws_before_step_1": ctx.both(*[[d for _, d in side] for side in draws]),
        "batch_digest": ctx.both(first.get("a"), first.get("b")),
    }
    torch_a, torch_b = compared["generators"]["torch"]
    facts = (
        f"At step 1 rank {rank}, before any update, the batch tensors part at the same sample indices, and torch's "
        f"generator is in another state at step 1's first network forward ({torch_a} vs {torch_b}) although both "
        f"sides seeded it last with {seeds[0][-1]!r} and iterated as many DataLoaders drawing from it since "
        f"({len(draws[0])}): between the last seed and the first batch one side drew from it more than the other."
    )
    return finding(ctx, RNG_DRAWN_BEFORE_STEP_1, 1, rank, evidence, facts)


RNG_DRAWN_BEFORE_STEP_1 = Cause(
    "rng.drawn_before_step_1",
    check_drawn_before_step_1,
    why="A batch's random transforms (a random crop, added noise, a flip, drawn in the main process, or the "
    "workers' base seed) draw from the global generator where it stands when the batch is made. With the same "
    "last seed and the same loaders, it stands elsewhere only because one side drew more from it in between: "
    "a model or an EMA copy built again (its initial weights draw) where the other side copies it with "
    "copy.deepcopy (which draws nothing), a layer initialised twice, a random draw of the setup.",
    fix="Draw as much between the last seed and the first batch on both sides: build the same modules, in the "
    "same order, after the last seed (a copy built again on one side is built again on the other, or deep-copied "
    "on both), or give the data's random transforms a generator of their own so that building the model no "
    "longer moves them.",
    doc="The batch parts at step 1 at equal indices; the last seed before step 1 is the same value on both sides "
    "(a repeat drawing nothing between, where recorded), as many DataLoader iterators drew from the global "
    "generator since, and the hooks' digest of torch's generator at step 1's first network forward differs.",
    requires=Evidence("the generators' digests at step 1", lambda d: "rng_at_step_1" in d.evidence),
)


RNG_LOADER_DRAWS = Cause(
    "rng.loader_draws",
    check_loader_draws,
    why="Each DataLoader iterator without a generator= of its own takes one number from the global generator (its "
    "workers' base seed), even with num_workers=0: {side} took {k} more ({where}), so what draws "
    "from the global generator after it (a RandomSampler's shuffle, random augmentations, dropout) draws other "
    "numbers.",
    fix="Draw as often on both sides: give each DataLoader a generator of its own (DataLoader(..., "
    "generator=torch.Generator()), which leaves the global one alone), or iterate the same loaders as often at the "
    "same points on both sides{also}.",
    doc="The hooks' seeds are the same, but one side iterated more DataLoaders drawing from the global generator "
    "after the last seed (a sanity check's validation loader, an evaluation run twice or on one rank only), and the "
    "runs part at that step (step 1 before any update, or a later step after equal ones) in the samples, the batch "
    "or the loss. Samplers of another class or arguments do not silence it where the step's indices are recorded "
    "equal (they ordered the same samples); the ranks each side evaluated on and the state the next training "
    "iterator drew its workers' base seed from are said. Never for a loss apart where the hooks' generator digests "
    "show nothing drawing from the global generator around the parting step on either side, nor over a training "
    "equal throughout (no draw reached it).",
    requires=Evidence(
        "the DataLoader iterators recorded on both sides",
        lambda d: "loader_draws_before_step_1" in d.evidence or "loader_draws_up_to_step" in d.evidence,
    ),
)


def check_seed_values(ctx: Context) -> Finding | None:
    """The runs part at the first step before any update (samples, batch, loss) on a rank whose seeds before step 1
    have other values on each side: every rank's seeds read and said per rank, and where one side seeds its ranks
    apart (seed + rank) and the other alike, said so."""
    first = before_any_update(ctx)
    if first is None or first.get("quantity") not in ("samples", "batch", "loss"):
        return None
    seeded = _seeded_ranks(ctx, first)
    if seeded is None:
        return None  # unrecorded, or another number of samples per step (its own cause, named first)
    by_rank, candidates = seeded
    if not any(other_values(pair) for pair in by_rank.values()):
        return None  # the same values on every rank (a re-seed is its own cause)
    rank = next((r for r in candidates if r in by_rank and by_rank[r][0] != by_rank[r][1]), None)
    if rank is None:
        return None  # the same seeds where the runs part: another rank's seed cannot part it before any update
    if seed_inert_where_parted(ctx, rank, first.get("step"), by_rank[rank]):
        return None  # the same batch from the same last seed there: what parts is computed from the batch
    if first.get("quantity") == "samples" and last_seed_alike(by_rank[rank]) and sampler_differences(ctx):
        return None  # the same last seed where the samples part, other samplers: data_order names the samplers
    if first.get("quantity") == "loss" and _exact_factor(ctx, "loss", rank, first):
        return None  # another stream draws other numbers, never the same × k: loss.factor's
    ranks = ", ".join(str(r) for r, pair in by_rank.items() if other_values(pair))
    apart = {i: len({str(sorted(map(str, pair[i]))) for pair in by_rank.values()}) > 1 for i in (0, 1)}
    facts = (
        f"The runs part at step 1 on rank {rank} in the {first.get('quantity')}, before any update, and the global "
        f"generator was seeded with other values on rank(s) {ranks} before step 1 (as the hooks recorded, on every "
        f"rank): {seeds_per_rank_words(ctx, by_rank)}."
    )
    if apart[0] != apart[1]:
        by_own = "a" if apart[0] else "b"
        alike_side = ctx.label("b" if by_own == "a" else "a")
        facts += f" {ctx.label(by_own)} seeds its ranks with values of their own, {alike_side} every rank alike."
    reseeded = [r for r, pair in by_rank.items() if pair[0] != pair[1] and not other_values(pair)]
    # a re-seed that left the generator as the other side's (recorded equal at step 1's start there, or nothing
    # drawn between the seeds) changes nothing: no advice for a rank that is already alike
    reseeded = [r for r in reseeded if not (global_rng_equal(ctx, 1, r) or _inert_on_both(ctx, r))]
    also = ""
    if reseeded:
        shown = ", ".join(map(str, reseeded))
        facts += f" On rank(s) {shown} the values are the same, set more often on one side (a re-seed)."
        also = (
            f" On rank(s) {shown}, seed as often at the same points: build the model after the last seed on both, "
            "or seed again right after building it on both."
        )
    facts += initial_weights_words(ctx, seed_differs=True)
    evidence = {
        "seeds_before_step_1": {ctx.label(s): {str(r): by_rank[r][i] for r in by_rank} for i, s in enumerate("ab")}
    }
    alike = ", ".join(str(r) for r, pair in by_rank.items() if pair[0] == pair[1])  # a re-seeded rank: `also`
    alike = f" (rank(s) {alike} are seeded alike already)" if alike else ""
    return finding(ctx, RNG_SEED, 1, rank, evidence, facts, ranks=ranks, alike=alike, also=also)


def seed_inert_where_parted(ctx: Context, rank: int, step, pair: list) -> bool:
    """The rank that parts recorded the same batch on both sides at the parting step (batch_digest) and the same
    last seed before step 1 (`pair`: its seeds on each side): a seed repeated, or another seed before the last,
    leaves the generator holding the last seed's value alone, and the batch drawn from it is equal, so no seed
    value parts this rank. Another rank's other values (seed + rank on one side) part that rank's draws, never
    this one's before any update: what parts is computed from the equal batch (the loss, its targets)."""
    return last_seed_alike(pair) and same_batch_at(ctx, rank, step)


def last_seed_alike(pair: list) -> bool:
    """Both sides' last seed before step 1 is the same value (what the generator holds after it depends on the
    draws since, not on an earlier seed: Lightning seeding again with the same value is no other seed)."""
    return bool(pair[0]) and pair[0][-1:] == pair[1][-1:]


def _inert_on_both(ctx: Context, rank) -> bool:
    """Every repeated seed of each side on `rank` came with nothing drawn since the previous (or none repeated)."""
    return all(
        reseeds_inert(ctx.run(s), rank) or len(seeds_before_first_step(ctx.run(s), rank) or []) <= 1 for s in "ab"
    )


def _exact_factor(ctx: Context, quantity: str, rank, first: dict) -> bool:
    """One side's `quantity` exactly k × the other's from the step the runs part (relations.py; forward.py names
    the factor, a later phase than this one)."""
    found = relations.constant_factor(*relations.series(list(aligned_records(ctx, rank)), quantity))
    return found is not None and found[1] == first.get("step")


RNG_SEED = Cause(
    "rng.seed",
    check_seed_values,
    why="What draws from the global generator (a sampler's shuffle, random augmentations, dropout) draws other "
    "numbers after another seed. A program that seeds each rank with seed + rank (so that "
    "the ranks augment differently) and a port that seeds every rank alike (seed_everything(seed)) draw "
    "alike on rank 0 only.",
    fix="Seed rank(s) {ranks} with the same value on both sides{alike}: "
    "seed + rank on both (in Lightning, "
    "seed_everything(seed + self.global_rank) where the rank is known, e.g. in setup(), or "
    "torch.manual_seed(seed + rank) in the dataset's first use), or one seed for every rank on both.{also}",
    doc="The hooks' seeds before step 1, read on every rank, have other values on the rank where the runs part at "
    "step 1, before any update, and both sides took as many samples per step: each rank's seeds said per rank (a "
    "seed per rank on one side only), the initial weights only as their recorded digests say. Never where the "
    "samples part on a rank whose last seed is the same on both sides while the recorded samplers differ: "
    "`data_order` names them; nor where that rank's batch at the parting step is recorded equal (batch_digest): "
    "what parts is computed from the batch (the loss, its targets), named by the causes after it.",
    requires=Evidence("the seeds recorded before step 1 on both sides", lambda d: "seeds_before_step_1" in d.evidence),
)


# ---------------------------------------------------------------------------------------------
# the seed of the configuration or of the DistributedSampler: one check


def check_seed(ctx: Context) -> Finding | None:
    """An unpinned global seed shows up in the config, the initial weights and the sampler at once:
    name the seed, not its symptoms. Never where the sides took another number of samples per step (another
    accumulation or batch size parts the samples whatever the seed: named first), nor on a seed_everything
    that differs in the configuration while every rank recorded the same seeds."""
    _, seed = ctx.config_diffs()
    seeds = sampler_seeds(ctx.meta("a")), sampler_seeds(ctx.meta("b"))
    first = ctx.earliest
    on_samples = first is not None and first["quantity"] == "samples"
    if seed is None and not (_seeds_differ(*seeds) and on_samples):
        return None
    if samples_per_step_apart(ctx) is not None:
        return None
    recorded = seeds_by_rank(ctx)
    # alike by the last seed before step 1 (what the generator holds depends on it alone: Lightning seeding again
    # with the same value is no other seed)
    alike = recorded is not None and all(pair[0][-1:] == pair[1][-1:] for pair in recorded.values())
    if _seeds_differ(*seeds) or (seed is not None and on_samples and not alike):
        return _sampler_seed(ctx, seeds, seed, recorded if alike else None)
    if init_finding(ctx) is None and first is None:
        facts = f"seed_everything differs: {fmt(seed[0])} on {ctx.names[0]}, {fmt(seed[1])} on {ctx.names[1]}."
        return finding(ctx, CONFIG_SEED, None, None, {"seed_everything": ctx.both(*seed)}, facts)
    return None


def _sampler_seed(ctx: Context, seeds: tuple, seed, recorded_alike: dict | None) -> Finding:
    """`recorded_alike`: every rank's seeds where the hooks recorded them equal on both sides (the global seed
    then pinned alike: only the samplers' seeds are to be made equal), else None."""
    f = ctx.earliest if ctx.earliest and ctx.earliest["quantity"] == "samples" else None
    evidence = {"sampler_seed": ctx.both(*seeds)}
    if seed is not None:
        evidence["seed_everything"] = ctx.both(*seed)
    if f:
        evidence["indices"] = ctx.both(f["a"], f["b"])
    common = sorted(set(seeds[0]) & set(seeds[1]))
    rank = f["rank"] if f else next((r for r in common if seeds[0][r] != seeds[1][r]), None)
    order = sampler_order(ctx, f["rank"], f["step"]) if f else None
    if order is not None and order.needed and order.needed != ["seed"]:  # more than the seed parts the samples
        facts = (
            f"The DistributedSamplers differ in {order_headline(ctx, order, f['step'])}, so they order the dataset "
            f"otherwise: the samples differ from step {f['step']} on (rank {f['rank']})."
        )
    elif _seeds_differ(*seeds):
        r0 = rank if rank in common else common[0]
        facts = (
            f"The DistributedSamplers are seeded differently ({ctx.names[0]}: seed {seeds[0][r0]}, "
            f"{ctx.names[1]}: seed {seeds[1][r0]}), so they shuffle the dataset into different permutations"
        )
        facts += f": the samples differ from step {f['step']} on (rank {f['rank']})." if f else "."
    else:
        facts = "The global seed differs, and with it the sampler's shuffle"
        facts += f": the samples differ from step {f['step']} on (rank {f['rank']})." if f else "."
    if order is not None:  # the other settings the order is a function of, each one apart named beside the seed
        facts += order_facts(ctx, order, f["rank"], f["step"])
        evidence.update(order_evidence(ctx, order))
    if f:
        facts += _loop_epochs_beside(ctx, f, order)
    if seed is not None:
        facts += f" seed_everything resolves to {fmt(seed[0])} on {ctx.names[0]} and {fmt(seed[1])} on {ctx.names[1]}."
    how = PIN_AND_SEED_SAMPLER
    per_rank = _seeded_per_rank(ctx, seeds)
    if per_rank is not None:  # one seed on every rank on one side, a rank's own on the other: that side is to change
        side, value = per_rank
        evidence["sampler_seed_per_rank"] = ctx.label(side)
        own = fmt(seeds[0 if side == "a" else 1])
        facts += (
            f" On {ctx.label(side)} each rank's DistributedSampler has a seed of its own ({own}), "
            f"so its ranks shuffle with other permutations and their shards overlap; on the other side every rank "
            f"shuffles with seed {value}."
        )
        how = SEED_SAMPLER_PER_RANK.format(side=ctx.label(side), value=value)
    if recorded_alike is not None:
        evidence["seeds_before_step_1_by_rank"] = {str(r): ctx.both(*pair) for r, pair in recorded_alike.items()}
        said = seeds_per_rank_words(ctx, recorded_alike)
        facts += f" The global seeds are the same on both sides (as the hooks recorded, on every rank: {said})."
        how = SEED_SAMPLER_ONLY
    if per_rank is not None and recorded_alike is not None:
        how = SEED_SAMPLER_PER_RANK.format(side=ctx.label(per_rank[0]), value=per_rank[1])
    global_differs = seed is not None or recorded_alike is None and seeds_by_rank(ctx) is not None
    facts += initial_weights_words(ctx, seed_differs=global_differs, acted_on=None if global_differs else "the data")
    if order is not None:  # the fix covers every setting that parts the indices, and the seed only where it does
        clauses = order_fix(ctx, order, f["step"])
        if order.seed_idle and clauses:
            how = clauses[0][0].upper() + clauses[0][1:]
            clauses = clauses[1:]
        if clauses:
            how += "; and " + "; and ".join(clauses)
    return finding(ctx, SAMPLER_SEED, f["step"] if f else None, rank, evidence, facts, how=how)


def _loop_epochs_beside(ctx: Context, f: dict, order) -> str:
    """Where the records of the parting step carry other epochs (each loop's own count) and the samplers' epochs
    were not found apart, both said: the samplers' epoch alike where recorded so, unrecorded where not."""
    epochs = f.get("epoch"), f.get("epoch_b")
    if "epoch_b" not in f or epochs[0] == epochs[1] or (order is not None and "epoch" in order.apart):
        return ""
    na, nb = ctx.names
    said = f" {na} records step {f['step']} in epoch {epochs[0]} and {nb} in epoch {epochs[1]} (each loop's own count)"
    recorded = [order_settings(ctx, s, f["rank"], f["step"]).get("epoch") for s in ("a", "b")]
    if all(isinstance(e, int) for e in recorded):
        return said + f", while the samplers drew the step's pass at epoch {recorded[0]} on both sides."
    return said + (
        "; the samplers' own epochs were not recorded on both sides: a set_epoch given another value would part "
        "the samples as well."
    )


def _seeded_per_rank(ctx: Context, seeds: tuple) -> tuple[str, object] | None:
    """(the side whose ranks' sampler seeds differ, the one seed every rank of the other side has), or None."""
    values = [set(map(str, s.values())) for s in seeds]
    if len(seeds[0]) < 2 or len(seeds[1]) < 2:
        return None
    if len(values[0]) == 1 and len(values[1]) > 1:
        return "b", next(iter(seeds[0].values()))
    if len(values[1]) == 1 and len(values[0]) > 1:
        return "a", next(iter(seeds[1].values()))
    return None


def _seeds_differ(a: dict, b: dict) -> bool:
    return any(a[r] != b[r] for r in set(a) & set(b))


# the advice where the global seed may differ (unrecorded, or recorded apart), and where it was recorded alike
PIN_AND_SEED_SAMPLER = (
    "Pin seed_everything to an integer in the config, and seed the raw loop's DistributedSampler with that same "
    "value: DistributedSampler(..., seed=seed_everything)"
)
SEED_SAMPLER_ONLY = (
    "Give the DistributedSamplers the same seed: DistributedSampler(..., seed=...) with one value on both sides "
    "(the global seeds are equal already; Lightning seeds the sampler it injects from PL_GLOBAL_SEED)"
)
SEED_SAMPLER_PER_RANK = (
    "On {side}, give every rank's DistributedSampler the same seed ({value}, as the other side does), whatever seed "
    "each rank's global generator has: a DistributedSampler shards one permutation, which every rank must draw "
    "alike. Where Lightning injects the sampler it takes PL_GLOBAL_SEED, which a per-rank seed_everything(seed + "
    "rank) makes a rank's own: build DistributedSampler(dataset, seed={value}) in train_dataloader and pass "
    "Trainer(use_distributed_sampler=False), keeping the per-rank global seed"
)
SAMPLER_SEED = Cause(
    "sampler_seed",
    check_seed,
    why="Lightning seeds the DistributedSampler it injects from the global seed (PL_GLOBAL_SEED), and "
    "LightningCLI's `seed_everything: true` (its default) picks a random seed on every run; a "
    "hand-written loop must pass the same seed to DistributedSampler(seed=...).",
    fix="{how}.",
    doc="The DistributedSamplers are seeded differently (LightningCLI's `seed_everything: true`): other "
    "samples from step 1, as many per step on both sides. Where the hooks recorded the same global seeds on every "
    "rank, the advice seeds the samplers only; the initial weights are said only as their recorded digests say. "
    "Every other setting the order is a function of (the epoch the step's pass drew at, shuffle, drop_last, "
    "num_replicas, rank) recorded apart is named beside the seed; where the records allow (torch's "
    "DistributedSampler on both sides, one dataset length giving each side exactly its recorded indices) the order "
    "is recomputed to say which of them part the step's indices, and the fix covers those, none that changes "
    "nothing.",
)
CONFIG_SEED = Cause(
    "config.seed",
    check_seed,
    why="The global seed decides the initial weights and the DistributedSampler's shuffle "
    "(LightningCLI's `seed_everything: true` picks a random seed on every run).",
    fix="Pin seed_everything to an integer in the config (not `true`) on both sides.",
    doc="seed_everything differs and nothing else shows it yet.",
)


def other_generator_finding(ctx: Context, f: dict, evidence: dict, facts: str) -> Finding | None:
    """Where the batch, or the model's first input, parts at equal sample indices at step s (data_pipeline's ground)
    and the hooks' digests at step s's start show torch's global generator equal while numpy's or Python's `random`
    differs, parted there (step 1, or equal at step s-1's start): the draws from that generator are what differs
    before the model (a Mixup/CutMix lambda, an augmentation written with numpy), not the loader's workers."""
    step, rank = f.get("step"), f.get("rank") if isinstance(f.get("rank"), int) else 0
    if not isinstance(step, int):
        return None
    now = rng_at(ctx, step, rank)
    if now is None or not global_rng_equal(ctx, step, rank):
        return None
    others = [n for n in now["differ"] if n in OTHER_GENERATORS]
    before = rng_at(ctx, step - 1, rank) if step > 1 else None
    if not others or (step > 1 and (before is None or set(before["differ"]) & set(others))):
        return None
    since = "from the start" if step == 1 else f"equal at step {step - 1}'s start"
    shown = "; ".join(f"{n} {now['generators'][n][0]} vs {now['generators'][n][1]}" for n in others)
    facts += (
        f" The hooks' digests at step {step}'s start on rank {rank}: torch's generator equal, {' and '.join(others)} "
        f"apart ({shown}), {since}; the seeds recorded: {seeds_words(ctx, rank, step, others)}."
    )
    evidence = {**evidence, "rng": {n: ctx.both(*now["generators"][n]) for n in now["generators"]}}
    return finding(ctx, RNG_OTHER_GENERATOR, step, rank, evidence, facts, generator=others[0])


OTHER_GENERATORS = ("numpy", "random")  # the global generators besides torch's whose state the hooks digest


def check_other_generator(ctx: Context) -> Finding | None:
    """The batch parts at equal sample indices (data_pipeline's ground, found here first; the module watch's
    first input apart reaches other_generator_finding through data.pipeline_finding)."""
    f = ctx.earliest
    if f is None or f.get("quantity") != "batch":
        return None
    rank = f.get("rank") if isinstance(f.get("rank"), int) else 0
    if not same_indices_at(ctx, rank, f.get("step")):
        return None
    facts = (
        f"At step {f['step']} rank {rank} consumed the same sample indices on both sides, but the batch tensors "
        f"differ (batch_digest {str(f['a'])[:16]} vs {str(f['b'])[:16]})."
    )
    return other_generator_finding(ctx, f, {"batch_digest": ctx.both(f["a"], f["b"])}, facts)


RNG_OTHER_GENERATOR = Cause(
    "rng.other_generator",
    check_other_generator,
    why="What the data or the step draws from {generator}'s global generator before the model (a Mixup/CutMix "
    "lambda or box, an augmentation written with numpy or Python's random) draws other numbers: that generator is "
    "seeded otherwise on this rank (one side seeds it per rank, seed + rank, the other alike on every rank, as "
    "Lightning's seed_everything(seed) does) or drew more before this step. torch's generator is the same, so "
    "nothing drawn from torch (crops, flips, dropout) parts here.",
    fix="Seed {generator}'s global generator the same way on both sides, rank by rank (the loop's "
    "np.random.seed(seed + rank) in the port's setup() with self.global_rank, or seed_everything(seed + rank) on "
    "both), and draw from it as often before each step.",
    doc="The batch, or the model's first input, parts at equal sample indices, and the hooks' digests at that "
    "step's start show torch's generator equal and numpy's or Python's random apart: their draws differ.",
    requires=Evidence("the generators' digests at that step", lambda d: "rng" in d.evidence),
)
