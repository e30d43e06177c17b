"""Another number of samples per optimizer step: a rank that consumed more samples at a step in as many
micro-batches (another per-rank batch size), or with its micro-batches unrecorded (a larger batch, or more
micro-batches accumulated). Found before any seed: another number of samples per step parts the samples whatever
the seeds (issue 46: an accumulation of 2 against 1 was headlined as a seed)."""

from __future__ import annotations

from ddp_parity.compare.causes.base import Cause, Context, Evidence, aligned_records, finding
from ddp_parity.compare.causes.seed_records import seeds_beside
from ddp_parity.compare.findings import Finding


def _flat(indices) -> list | None:
    if not isinstance(indices, list):
        return None
    out = []
    for i in indices:
        out.extend(i if isinstance(i, list) else [i])
    return out


def check_batch_size(ctx: Context) -> Finding | None:
    """The runs part in the samples at a step where a rank consumed another number of samples on each side in
    as many micro-batches: the batch a rank takes per step differs (a global batch divided by the world size on
    one side only). Where the larger batch is the other side's next k batches end to end, said so."""
    f = ctx.earliest
    if f is None or f["quantity"] != "samples":
        return None
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, f["rank"]) if ra.get("step") == f["step"]), ({}, {}))
    a, b = (_flat(r.get("indices")) for r in pair)  # the records' own lists (the divergence's are cut short)
    counts = micro_batch_counts(ctx, f["rank"], f["step"])
    if not a or not b or len(a) == len(b) or (counts is not None and counts["a"] != counts["b"]):
        return None
    big, small = ("a", "b") if len(a) > len(b) else ("b", "a")
    evidence = {"samples_per_step": ctx.both(len(a), len(b)), "indices": ctx.both(f["a"], f["b"])}
    how = "in as many micro-batches" if counts else "(the micro-batches per step not recorded)"
    facts = (
        f"At step {f['step']} rank {f['rank']} consumed {len(a)} samples on {ctx.names[0]} and {len(b)} on "
        f"{ctx.names[1]} {how}: the samples a rank takes per step differ."
    )
    what, more = ("the per-rank batch size differs", "")
    if not counts:  # a larger batch, or more micro-batches of it: the records cannot tell which
        what, more = (text.format(side=ctx.label("a" if len(a) > len(b) else "b")) for text in UNRECORDED_MICRO_BATCHES)
    k = _batches_end_to_end(ctx, f["rank"], f["step"], big)
    if k:
        evidence["end_to_end"] = k
        facts += (
            f" {ctx.label(big)}'s batch is {ctx.label(small)}'s next {k} batches end to end (the same samples in the "
            "same order): the same data, cut into larger batches."
        )
    if len(a if small == "a" else b) == 1:  # a DataLoader's default batch_size: a batch sampler lost
        facts += ONE_SAMPLE.format(side=ctx.label(small))
        more += ONE_SAMPLE_FIX.format(side=ctx.label(small))
    facts += seeds_beside(ctx)
    return finding(
        ctx,
        DATA_BATCH_SIZE,
        f["step"],
        f["rank"],
        evidence,
        facts,
        side=ctx.label(big),
        other=ctx.label(small),
        what=what,
        more=more,
    )


def _batches_end_to_end(ctx: Context, rank, step, big: str) -> int | None:
    """k where `big`'s batch at `step` is the other side's batches of steps step..step+k-1 joined, else None."""
    pairs = [(ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step", 0) >= step]
    if not pairs:
        return None
    mine = _flat(pairs[0][0 if big == "a" else 1].get("indices")) or []
    joined: list = []
    for k, pair in enumerate(pairs, start=1):
        joined += _flat(pair[1 if big == "a" else 0].get("indices")) or []
        if len(joined) >= len(mine):
            return k if joined == mine and k > 1 else None
    return None


# one sample a step: the DataLoader's default batch_size, which a loader built around a batch sampler falls back to
# where Lightning re-creates it for the DistributedSampler it injects (the batch sampler is not carried over)
ONE_SAMPLE = (
    " {side} takes 1 sample a step, a DataLoader's default batch_size: where its DataLoader was built with "
    "batch_sampler= (a BatchSampler around a sampler of its own), Lightning re-creates it to inject its "
    "DistributedSampler without the batch sampler, one sample at a time."
)
ONE_SAMPLE_FIX = (
    "; where {side}'s DataLoader is given batch_sampler=, give it batch_size= and drop_last= instead, or build the "
    "DistributedSampler and the BatchSampler around it yourself with Trainer(use_distributed_sampler=False)"
)


# where neither side recorded its micro-batches, a step's larger share is a larger batch or more of them
UNRECORDED_MICRO_BATCHES = (
    "the per-rank batch size differs, or {side} accumulates more micro-batches per step (not recorded here)",
    "; or, where {side} accumulates more micro-batches per step, accumulate as many on both (Lightning's "
    "accumulate_grad_batches)",
)
DATA_BATCH_SIZE = Cause(
    "data_order.batch_size",
    check_batch_size,
    why="Every step of {side} trains on more samples per rank than a step of {other}: {what}. A program that "
    "takes a global batch and divides it by the number of processes (ImageNet's, MoCo's main: batch_size = "
    "int(batch_size / ngpus_per_node)) gives each rank a share; a port that passes the same "
    "number as each rank's batch_size trains on world_size times more per step.",
    fix="Give each rank the same batch size on both sides: divide the global batch by the world size on the side "
    "that does not (or pass the per-rank share to its DataLoader), so a step on {side} takes what a step on "
    "{other} takes{more}.",
    doc="At the first differing step a rank consumed another number of samples in as many micro-batches, or with "
    "the micro-batches unrecorded (where the larger batch is the other side's next k end to end, said so): the "
    "per-rank batch size differs (or, unrecorded, the accumulation); named before any seed.",
    requires=Evidence("the samples per step on both sides", lambda d: "samples_per_step" in d.evidence),
)


def micro_batch_counts(ctx: Context, rank, step) -> dict | None:
    """{side: the micro-batches the step accumulated} where both sides recorded `micro_batches` there."""
    for ra, rb in aligned_records(ctx, rank):
        if ra.get("step") == step:
            counts = {"a": ra.get("micro_batches"), "b": rb.get("micro_batches")}
            ok = all(type(v) is int for v in counts.values())
            return counts if ok else None
    return None
