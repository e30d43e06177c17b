"""The global generator re-seeded on one side before the first step: the seeds the hooks of `ddp-parity
record` saw (each `torch.manual_seed`, which `seed_everything` calls, with the step it came before) differ
before step 1, and the runs part at the first step in what draws from that generator (the samples, the
batch), before any update: every Lightning port seeds again, so the seeds alone prove nothing. Lightning's
DDP setup re-seeds every rank after the LightningModule was built in `__init__`: what was drawn before the
second seed (the initial weights) and what is drawn after it (a shuffle, augmentations, dropout) come from
other points of the stream than in a loop that seeds once.
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
