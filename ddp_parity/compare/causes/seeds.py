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

from ddp_parity.compare.causes.base import Cause, Context, Evidence, finding
from ddp_parity.compare.causes.hooked import global_rng_equal
from ddp_parity.compare.causes.implicated import before_any_update
from ddp_parity.compare.causes.samples import sampler_differences
from ddp_parity.compare.findings import Finding
from ddp_parity.trace_files import read_hook_facts


def seeds_before_first_step(run, rank) -> list | None:
    """The seeds a rank's hooks recorded before its first step, in order; None where no hook facts were
    recorded (an explicit recording sees no seed)."""
    facts = read_hook_facts(run, rank)
    if not facts:
        return None
    seeds = facts.get("seeds")
    items = seeds.get("items") if isinstance(seeds, dict) else []
    return [i.get("seed") for i in items if isinstance(i, dict) and i.get("before_step") == 1]


def check_reseed(ctx: Context) -> Finding | None:
    first = before_any_update(ctx)
    if first is None or first.get("quantity") not in ("samples", "batch"):
        return None  # a loss apart at equal batches may be any forward difference: the watch tells (rng)
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    seeds = [seeds_before_first_step(ctx.run(s), rank) for s in ("a", "b")]
    if None in seeds or seeds[0] == seeds[1] or sampler_differences(ctx):
        return None  # unrecorded, the same seeds, or another sampler (its own cause)
    if global_rng_equal(ctx, 1, rank):
        return None  # the generator's state recorded equal at step 1's start: the re-seed changed nothing drawn
    if set(map(str, seeds[0])) != set(map(str, seeds[1])) or len(seeds[0]) == len(seeds[1]):
        return None  # other seed values (a per-rank seed, another seed) are not a re-seed: their own causes
    more = "a" if len(seeds[0]) > len(seeds[1]) else "b"
    na, nb = ctx.names
    evidence = {"seeds_before_step_1": ctx.both(*seeds), "first_divergence": first.get("quantity")}
    facts = (
        f"The runs part at step 1 in the {first.get('quantity')}, before any update, and the global generator was "
        f"seeded otherwise before step 1 on rank {rank}: {na} called manual_seed with {seeds[0]}, {nb} with "
        f"{seeds[1]} (as the hooks recorded)."
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
    doc="The hooks' seeds before step 1 are the same values, set more often on one side (a re-seed: Lightning's "
    "seed_everything in its DDP setup), and the runs part at step 1 before any update, in the samples or the batch.",
    requires=Evidence("the seeds recorded before step 1 on both sides", lambda d: "seeds_before_step_1" in d.evidence),
)


def loader_draws_before_first_step(run, rank) -> list | None:
    """The datasets of the DataLoader iterators that drew from the global generator after the last seed before
    step 1, in order; None where the hooks recorded no iterator at all (an explicit recording, older traces)."""
    draws = loader_draws_up_to(run, rank, 1)
    return None if draws is None else [dataset for _, dataset in draws]


def loader_draws_up_to(run, rank, step: int) -> list | None:
    """(before_step, dataset) of each DataLoader iterator that drew from the global generator after the last seed
    before `step`, up to `step`, in order; None where the hooks recorded no iterator at all."""
    facts = read_hook_facts(run, rank)
    if not facts or not isinstance(facts.get("loader_iterators"), dict):
        return None
    seeds = (facts.get("seeds") or {}).get("items") or []
    last_seed = max(
        (i.get("order", 0) for i in seeds if isinstance(i, dict) and (i.get("before_step") or 0) <= step), default=0
    )
    items = facts["loader_iterators"].get("items") or []
    return [
        (i.get("before_step"), i.get("dataset"))
        for i in items
        if isinstance(i, dict)
        and (i.get("before_step") or 0) <= step
        and i.get("global_draw")
        and i.get("order", 0) > last_seed
    ]


def _seeds_up_to(run, rank, step: int) -> list | None:
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
    if step == 1 and before_any_update(ctx) is None:
        return None
    if step > 1 and (ctx.walk is None or ctx.walk.steps_equal_before < 1):
        return None
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    seeds = [_seeds_up_to(ctx.run(s), rank, step) for s in ("a", "b")]
    draws = [loader_draws_up_to(ctx.run(s), rank, step) for s in ("a", "b")]
    if None in draws or seeds[0] != seeds[1] or len(draws[0]) == len(draws[1]) or sampler_differences(ctx):
        return None  # unrecorded, other seeds (their own cause), as many draws, or another sampler
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
    facts = (
        f"The runs part {when} in the {first.get('quantity')} with the same seeds, and since the last seed rank "
        f"{rank} iterated {len(draws[0])} DataLoader(s) drawing from the global generator on {na} ({shown[0]}) and "
        f"{len(draws[1])} on {nb} ({shown[1]}) up to step {step} (as the hooks recorded)."
    )
    return finding(
        ctx, RNG_LOADER_DRAWS, step, rank, evidence, facts, side=ctx.label(more), k=abs(len(draws[0]) - len(draws[1]))
    )


def _draws_words(draws: list) -> str:
    """`TensorDataset before step 1, ValSet ×2 before step 5`: each dataset and step with its count."""
    counted: dict = {}
    for before, dataset in draws:
        counted[(dataset, before)] = counted.get((dataset, before), 0) + 1
    words = [f"{d}{f' ×{n}' if n > 1 else ''} before step {s}" for (d, s), n in counted.items()]
    return ", ".join(words[:8]) + (f" and {len(words) - 8} more" if len(words) > 8 else "") if words else "none"


RNG_LOADER_DRAWS = Cause(
    "rng.loader_draws",
    check_loader_draws,
    why="Each DataLoader iterator without a generator= of its own takes one number from the global generator (its "
    "workers' base seed), even with num_workers=0: {side} took {k} more (Lightning's sanity check iterates the "
    "validation loader before training; a loop that evaluates two models iterates its loader twice), so what draws "
    "from the global generator after it (a RandomSampler's shuffle, random augmentations, dropout) draws other "
    "numbers.",
    fix="Draw as often on both sides: give each DataLoader a generator of its own (DataLoader(..., "
    "generator=torch.Generator()), which leaves the global one alone), or iterate the same loaders as often at the "
    "same points on both sides (on Lightning, Trainer(num_sanity_val_steps=0) skips the sanity check).",
    doc="The hooks' seeds are the same, but one side iterated more DataLoaders drawing from the global generator "
    "after the last seed (a sanity check's validation loader, an evaluation run twice), and the runs part at that "
    "step (step 1 before any update, or a later step after equal ones) in the samples, the batch or the loss.",
    requires=Evidence(
        "the DataLoader iterators recorded on both sides",
        lambda d: "loader_draws_before_step_1" in d.evidence or "loader_draws_up_to_step" in d.evidence,
    ),
)


def check_seed_values(ctx: Context) -> Finding | None:
    """The runs part at the first step before any update (samples, batch, loss) on a rank whose seeds before step 1
    have other values on each side: each rank's seeds shown side by side, and where one side seeds its ranks
    apart (seed + rank) and the other alike, said so."""
    first = before_any_update(ctx)
    if first is None or first.get("quantity") not in ("samples", "batch", "loss"):
        return None
    ranks = sorted(set((ctx.walk.ranks if ctx.walk else {}).get("a") or [0]) & set(ctx.walk.ranks.get("b") or [0]))
    seeds = {s: {r: seeds_before_first_step(ctx.run(s), r) for r in ranks} for s in ("a", "b")}
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    mine = [seeds[s].get(rank) for s in ("a", "b")]
    if None in mine or set(map(str, mine[0])) == set(map(str, mine[1])):
        return None  # unrecorded, or the same values (a re-seed is its own cause)
    apart = {s: len({str(sorted(map(str, v or []))) for v in seeds[s].values()}) > 1 for s in ("a", "b")}
    per_rank = {s: "; ".join(f"rank {r} {seeds[s][r]}" for r in ranks) for s in ("a", "b")}
    facts = (
        f"The runs part at step 1 on rank {rank} in the {first.get('quantity')}, before any update, and the global "
        f"generator was seeded with other values before step 1 (as the hooks recorded): {ctx.names[0]}: "
        f"{per_rank['a']}; {ctx.names[1]}: {per_rank['b']}."
    )
    if apart["a"] != apart["b"]:
        by_rank = "a" if apart["a"] else "b"
        facts += (
            f" {ctx.label(by_rank)} seeds each rank with its own value, {ctx.label('b' if by_rank == 'a' else 'a')} "
            "every rank alike."
        )
    evidence = {"seeds_before_step_1": {ctx.label(s): {str(r): seeds[s][r] for r in ranks} for s in ("a", "b")}}
    return finding(ctx, RNG_SEED, 1, rank, evidence, facts)


RNG_SEED = Cause(
    "rng.seed",
    check_seed_values,
    why="What draws from the global generator (a sampler's shuffle, random augmentations, dropout, the initial "
    "weights) draws other numbers after another seed. A program that seeds each rank with seed + rank (so that "
    "the ranks augment differently) and a port that seeds every rank alike (seed_everything(seed)) draw "
    "alike on rank 0 only.",
    fix="Seed each rank with the same value on both sides: seed + rank on both (in Lightning, "
    "seed_everything(seed + self.global_rank) where the rank is known, e.g. in setup(), or "
    "torch.manual_seed(seed + rank) in the dataset's first use), or one seed for every rank on both.",
    doc="The hooks' seeds before step 1 have other values on the rank where the runs part at step 1, before any "
    "update: each rank's seeds side by side (a seed per rank on one side only).",
    requires=Evidence("the seeds recorded before step 1 on both sides", lambda d: "seeds_before_step_1" in d.evidence),
)
