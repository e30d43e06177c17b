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
    facts = read_hook_facts(run, rank)
    if not facts or not isinstance(facts.get("loader_iterators"), dict):
        return None
    seeds = (facts.get("seeds") or {}).get("items") or []
    last_seed = max((i.get("order", 0) for i in seeds if isinstance(i, dict) and i.get("before_step") == 1), default=0)
    items = facts["loader_iterators"].get("items") or []
    return [
        i.get("dataset")
        for i in items
        if isinstance(i, dict) and i.get("before_step") == 1 and i.get("global_draw") and i.get("order", 0) > last_seed
    ]


def check_loader_draws(ctx: Context) -> Finding | None:
    first = before_any_update(ctx)
    if first is None or first.get("quantity") not in ("samples", "batch", "loss"):
        return None
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    seeds = [seeds_before_first_step(ctx.run(s), rank) for s in ("a", "b")]
    draws = [loader_draws_before_first_step(ctx.run(s), rank) for s in ("a", "b")]
    if None in draws or seeds[0] != seeds[1] or len(draws[0]) == len(draws[1]) or sampler_differences(ctx):
        return None  # unrecorded, other seeds (their own cause), as many draws, or another sampler
    more = "a" if len(draws[0]) > len(draws[1]) else "b"
    na, nb = ctx.names
    evidence = {"loader_draws_before_step_1": ctx.both(*draws), "first_divergence": first.get("quantity")}
    facts = (
        f"The runs part at step 1 in the {first.get('quantity')}, before any update, with the same seeds, and after "
        f"the last seed rank {rank} iterated {len(draws[0])} DataLoader(s) drawing from the global generator on {na} "
        f"({', '.join(draws[0]) or 'none'}) and {len(draws[1])} on {nb} ({', '.join(draws[1]) or 'none'}) before "
        "step 1 (as the hooks recorded)."
    )
    return finding(
        ctx, RNG_LOADER_DRAWS, 1, rank, evidence, facts, side=ctx.label(more), k=abs(len(draws[0]) - len(draws[1]))
    )


RNG_LOADER_DRAWS = Cause(
    "rng.loader_draws",
    check_loader_draws,
    why="Each DataLoader iterator without a generator= of its own takes one number from the global generator (its "
    "workers' base seed), even with num_workers=0: {side} took {k} more before its first step (Lightning's sanity "
    "check iterates the validation loader before training), so what draws from the global generator after it (a "
    "RandomSampler's shuffle, random augmentations, dropout) draws other numbers.",
    fix="Draw as often on both sides before training: give each DataLoader a generator of its own "
    "(DataLoader(..., generator=torch.Generator()), which leaves the global one alone), or iterate the same loaders "
    "before the first step on both sides (on Lightning, Trainer(num_sanity_val_steps=0) skips the sanity check).",
    doc="The hooks' seeds before step 1 are the same, but one side iterated more DataLoaders drawing from the global "
    "generator after the last seed (a sanity check's validation loader), and the runs part at step 1 before any "
    "update.",
    requires=Evidence(
        "the DataLoader iterators recorded before step 1 on both sides",
        lambda d: "loader_draws_before_step_1" in d.evidence,
    ),
)
