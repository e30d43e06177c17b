"""What the seed causes may say, read from the records on every rank (issue 46's seed classes):

- the seeds the hooks recorded before step 1 are read on every rank both sides recorded, and said per rank
  ("rank 1: raw seeded [43], lightning [42]"): a program that seeds `seed + rank` on one side, or whose rank 1
  alone seeds otherwise, parts from its port on a rank the first divergence need not name;
- a seed is never the cause while the two sides consumed another number of samples per optimizer step (another
  accumulation, another batch size): that difference parts the samples whatever the seeds, and is named first;
- a sentence about the initial weights is checked against the recorded init digests (init_params_sha256).
"""

from __future__ import annotations

from ddp_parity.compare.causes.base import Context, aligned_records
from ddp_parity.compare.causes.initial_state import apart_by_names_only, init_digests
from ddp_parity.trace_files import read_hook_facts


def common_ranks(ctx: Context) -> list[int]:
    """The ranks both sides recorded (rank 0 where the walk names none)."""
    ranks = (ctx.walk.ranks if ctx.walk else {}) or {}
    return sorted(set(ranks.get("a") or [0]) & set(ranks.get("b") or [0]))


def seeds_before_step(run, rank, step: int = 1) -> list | None:
    """The seeds a rank's hooks recorded before `step`, in order; None where no hook facts were recorded (an
    explicit recording sees no seed)."""
    facts = read_hook_facts(run, rank)
    if not facts:
        return None
    seeds = facts.get("seeds")
    items = seeds.get("items") if isinstance(seeds, dict) else []
    return [i.get("seed") for i in items or [] if isinstance(i, dict) and i.get("before_step") == step]


def seeds_by_rank(ctx: Context) -> dict | None:
    """{rank: [a's seeds, b's seeds]} before step 1 on every rank both sides recorded hook facts for; None where
    no rank has them on both sides."""
    out = {}
    for rank in common_ranks(ctx):
        pair = [seeds_before_step(ctx.run(s), rank) for s in ("a", "b")]
        if None not in pair:
            out[rank] = pair
    return out or None


def reseeds_inert(run, rank, step: int = 1) -> bool:
    """Every seed after the first before `step` came with nothing drawn from torch's generator since the
    previous one (the hooks' `drawn_since_last_seed`, recorded since 2026-12-07): seeding again changed nothing
    that follows. False where a seed drew between, or the fact is not recorded (older traces)."""
    facts = read_hook_facts(run, rank)
    seeds = (facts or {}).get("seeds")
    items = [i for i in (seeds.get("items") if isinstance(seeds, dict) else None) or [] if isinstance(i, dict)]
    later = [i for i in items if i.get("before_step") == step][1:]
    return bool(later) and all(i.get("drawn_since_last_seed") is False for i in later)


def draws_before_wrap(run, rank) -> list | None:
    """The datasets of the DataLoader iterators that drew from the global generator between the last seed before
    step 1 and the first DDP wrap (where the hooks take the initial weights' digest), in order; None where the
    hooks recorded no seed, no DDP wrap or no iterator list (explicit recordings, older traces)."""
    facts = read_hook_facts(run, rank) or {}
    items = {
        key: [i for i in ((facts.get(key) or {}).get("items") or []) if isinstance(i, dict) and "order" in i]
        for key in ("seeds", "ddp", "loader_iterators")
    }
    if not items["seeds"] or not items["ddp"] or not isinstance(facts.get("loader_iterators"), dict):
        return None
    wrap = min(i["order"] for i in items["ddp"])
    seeded = [i["order"] for i in items["seeds"] if i["order"] < wrap]
    if not seeded:
        return None
    return [
        i.get("dataset") for i in items["loader_iterators"] if i.get("global_draw") and max(seeded) < i["order"] < wrap
    ]


def other_values(pair: list) -> bool:
    """The two sides' seeds hold other values (not only the same values set more often)."""
    return set(map(str, pair[0])) != set(map(str, pair[1]))


def seeds_per_rank_words(ctx: Context, by_rank: dict) -> str:
    """`rank 1: raw seeded [43], lightning [42]; rank 0: both seeded [42]`: the ranks seeded otherwise first."""
    na, nb = ctx.names
    apart = [r for r, pair in by_rank.items() if pair[0] != pair[1]]
    alike = [r for r, pair in by_rank.items() if pair[0] == pair[1]]
    words = [f"rank {r}: {na} seeded {by_rank[r][0]}, {nb} {by_rank[r][1]}" for r in apart]
    if alike:
        shown = {str(by_rank[r][0]) for r in alike}
        seeds = f" {by_rank[alike[0]][0]}" if len(shown) == 1 else ""
        words.append(f"rank(s) {', '.join(map(str, alike))}: both seeded alike{seeds}")
    return "; ".join(words)


def samples_per_step_apart(ctx: Context) -> dict | None:
    """{rank, step, micro_batches | samples_per_step}: the first rank that, at the first divergence's step, ran
    another number of backward passes (recorded micro_batches) or consumed another number of samples on each side.
    None where both sides took as much per step on every rank (or nothing of it was recorded)."""
    first = ctx.earliest
    step = first.get("step") if first else None
    if not isinstance(step, int):
        return None
    for rank in common_ranks(ctx):
        pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
        if pair is None:
            continue
        micro = [r.get("micro_batches") for r in pair]
        if all(type(m) is int for m in micro) and micro[0] != micro[1]:
            return {"rank": rank, "step": step, "micro_batches": micro}
        counts = [samples_in(r.get("indices")) for r in pair]
        if None not in counts and counts[0] != counts[1]:
            return {"rank": rank, "step": step, "samples_per_step": counts}
    return None


def samples_in(indices) -> int | None:
    """How many samples a record's indices name (a list, or a list per micro-batch); None where not recorded."""
    if not isinstance(indices, list):
        return None
    if indices and all(isinstance(i, list) for i in indices):
        return sum(len(i) for i in indices)
    return len(indices)


def initial_weights_words(ctx: Context, seed_differs: bool, acted_on: str | None = None) -> str:
    """A sentence on the initial weights that the recorded init digests (init_params_sha256) prove, or "" where
    they were not recorded on both sides. `seed_differs`: the global seed is part of the finding (its weights
    may then be one more symptom of it); `acted_on`: what the seed of the finding draws, where the finding knows
    (a sampler's seed: the data)."""
    a, b = init_digests(ctx.meta("a")), init_digests(ctx.meta("b"))
    ranks = sorted(r for r in set(a) & set(b) if a[r] and b[r])
    if not ranks:
        return ""
    # a digest apart only by what one side holds alone (a frozen EMA copy, a buffer) is not other weights
    apart = [r for r in ranks if a[r] != b[r] and apart_by_names_only(ctx, r) is None]
    if not apart:
        tail = f"the seed acted on {acted_on} only" if acted_on else "the seed did not act on them"
        return f" The initial weights are equal on every rank (init_params_sha256 recorded alike): {tail}."
    shown = ", ".join(map(str, apart))
    if ranks[0] not in apart:
        return (
            f" Rank {ranks[0]}'s initial weights are equal on both sides (init_params_sha256); rank(s) {shown} built "
            f"others, which DDP's construction replaces with rank {ranks[0]}'s: harmless by itself."
        )
    if seed_differs:
        return (
            f" The same seed also decides the initial weights, which differ as well (init_params_sha256 of rank(s) "
            f"{shown}): one cause, two symptoms."
        )
    return f" The initial weights differ as well (init_params_sha256 of rank(s) {shown})."


def sampler_seeds(meta: dict) -> dict:
    """{rank: the seed of the DistributedSampler it recorded} (meta.json ranks[*].sampler.seed)."""
    return {
        f.get("rank", r): (f.get("sampler") or {}).get("seed")
        for r, f in enumerate(meta.get("ranks") or [])
        if isinstance(f, dict) and (f.get("sampler") or {}).get("seed") is not None
    }


def seeds_beside(ctx: Context) -> str:
    """A sentence for a finding of another number of samples per step: the seeds that differ as well (the
    samplers', the global ones per rank), said as facts to compare again once the steps take as much, never as
    the cause; a global seed set again with the same value on one side said as that, never as seeds that differ;
    "" where none differs or none was recorded."""
    na, nb = ctx.names
    parts = []
    samplers = sampler_seeds(ctx.meta("a")), sampler_seeds(ctx.meta("b"))
    apart = [r for r in sorted(set(samplers[0]) & set(samplers[1])) if samplers[0][r] != samplers[1][r]]
    if apart:
        r = apart[0]
        parts.append(f"the DistributedSamplers' seeds (rank {r}: {na} {samplers[0][r]}, {nb} {samplers[1][r]})")
    by_rank = seeds_by_rank(ctx) or {}
    other = {r: pair for r, pair in by_rank.items() if other_values(pair)}
    again = {r: pair for r, pair in by_rank.items() if pair[0] != pair[1] and not other_values(pair)}
    if other:
        parts.append(f"the global seeds ({seeds_per_rank_words(ctx, other)})")
    said = ""
    if parts:
        said = (
            f" The seeds differ as well: {' and '.join(parts)}; a seed cannot be judged while the steps take other "
            "numbers of samples: compare again once they take as many."
        )
    if again:
        said += reseeded_words(ctx, again)
    return said


def reseeded_words(ctx: Context, again: dict) -> str:
    """The ranks whose global seeds hold the same values on both sides, set more often on one (a re-seed): said as
    the same seed set again, never as seeds that differ."""
    na, nb = ctx.names
    more = {"a" if len(pair[0]) > len(pair[1]) else "b" for pair in again.values()}
    side = ctx.label(more.pop()) if len(more) == 1 else "one side"
    shown = {str(pair) for pair in again.values()}
    if len(shown) == 1:
        pair = next(iter(again.values()))
        ranks = f"rank(s) {', '.join(map(str, again))}: {na} seeded {pair[0]}, {nb} {pair[1]}"
    else:
        ranks = "; ".join(f"rank {r}: {na} seeded {pair[0]}, {nb} {pair[1]}" for r, pair in again.items())
    return (
        f" The global generator was seeded again with the same value on {side} ({ranks}): the same seed, set once more."
    )
