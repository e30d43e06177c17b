"""A loss scaled on one side, read from its numbers and the divisions the hooks recorded: one definition for the
loss factor's placement (forward) and for the generators' causes (seeds), which must never take a scaling for a
draw from another point of a random stream."""

from __future__ import annotations

from ddp_parity.compare import relations
from ddp_parity.compare.causes.base import Context, aligned_records


def loss_scaled_at(ctx: Context, rank, step: int) -> bool:
    """One side's loss is exactly k × the other's (k not 1) from `step`, and either holds so at more steps from there
    or is the other's root divided once more by k as the hooks recorded (loss_divisors): a loss scaled or divided on
    one side (loss.factor reads which count), which no other point of a random stream makes. `rank` None: the first
    divergence's."""
    if rank is None:
        rank = (ctx.earliest or {}).get("rank")
        rank = rank if isinstance(rank, int) else 0
    steps, a, b = relations.series(list(aligned_records(ctx, rank)), "loss")
    relation = relations.factor_relation("loss", ctx.names, steps, a, b, {})
    if relation is None or relation.first != step:
        return False
    if isinstance(relation.last, int) and relation.last > relation.first:
        return True
    return extra_division(ctx, relation, rank, step) is not None


def root_divisions_at(ctx: Context, relation, rank, step) -> tuple[list, list] | None:
    """(the larger side's backward roots' divisions, the smaller side's) at `step` as the hooks recorded them
    (loss_divisors), as many roots on each; None where a side recorded none there."""
    small = "a" if ctx.label("a") == relation.other else "b"
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    if pair is None:
        return None
    big_roots, small_roots = (pair[1], pair[0]) if small == "a" else pair
    big_roots, small_roots = big_roots.get("loss_divisors"), small_roots.get("loss_divisors")
    if not (isinstance(big_roots, list) and isinstance(small_roots, list)) or len(big_roots) != len(small_roots):
        return None
    return big_roots, small_roots


def extra_division(ctx: Context, relation, rank, step) -> tuple[list, list] | None:
    """(the larger side's root divisions, the smaller's) at `step` where every root of the smaller side is the other
    side's root with one division by the factor more (anywhere in the chain; divisions by 1 left aside: they scale
    nothing); None where the records do not show that (no roots recorded, another number of roots, other divisions)."""
    roots = root_divisions_at(ctx, relation, rank, step)
    if roots is None:
        return None
    big_roots, small_roots = roots
    if not big_roots or not all(isinstance(r, list) for r in (*big_roots, *small_roots)):
        return None
    for big, less in zip(big_roots, small_roots):
        big, less = [d for d in big if d != 1], [d for d in less if d != 1]
        if not any(
            isinstance(d, (int, float))
            and abs(d - relation.value) <= relations.EXACT * abs(relation.value)
            and less[:i] + less[i + 1 :] == big
            for i, d in enumerate(less)
        ):
            return None
    return big_roots[0], small_roots[0]
