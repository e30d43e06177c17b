"""What each rank was fed at a step, as the records show it, and the relations between the ranks that follow:

- `fed_at`: a rank's step by its recorded inputs: the module watch's input to the model at each training forward
  of the step (what the network was given), the batch digest (what the loader yielded), the sample indices;
- `fed_alike`: a rank of one side fed exactly what another rank was fed (another rank of its own side, or another
  rank of the other side), while the other side's same rank was fed something else: a rank reading another rank's
  data;
- `rounding_refused`: why a reading of rounding (a few ulps summed in another order) cannot hold at a step: the
  parameters part after it by far more than rounding makes, or a rank's inputs differ there.

Two ranks' inputs are compared by the most direct record both hold (the model's input, then the batch digest, then
the indices); a batch digest is compared across the sides only where the comparison did not set the digests aside
as digests of other things (batch_inputs.NOT_COMPARABLE).
"""

from __future__ import annotations

import json

from ddp_parity.compare.batch_inputs import NOT_COMPARABLE, model_inputs
from ddp_parity.compare.causes.base import Context, max_relative
from ddp_parity.compare.walk import records_of
from ddp_parity.watch import read_module_trace

# the records of what a rank was fed, the most direct first, with the words a finding says them in
FED_KINDS = {
    "model_input": "the module watch's input to the model at each training forward of the step",
    "batch_digest": "the batch digest",
    "indices": "the sample indices",
}
# a relative difference of the parameters after a step that no rounding of a step's gradient reaches (a few ulps of
# float32 are 1e-6 relative; a digest that sums a tensor of many terms loses a few digits more, never three)
FAR_BEYOND_ROUNDING = 1e-3


def _ranks(ctx: Context, side: str) -> list[int]:
    world = ctx.meta(side).get("world_size")
    return list(range(world)) if isinstance(world, int) and world > 0 else [0]


def _run(ctx: Context, side: str):
    """The side's run directory; None for a comparison held without one (nothing on disk to read)."""
    return getattr(ctx.cmp, f"run_{side}", None)


def _record_at(ctx: Context, side: str, rank, step) -> dict | None:
    run = _run(ctx, side)
    return next((r for r in records_of(run, rank) if r.get("step") == step), None) if run is not None else None


def fed_at(ctx: Context, side: str, rank: int, step) -> dict[str, str]:
    """{kind: value} of what `rank` of `side` was fed at `step`, for each kind of FED_KINDS it recorded there."""
    key = ("fed", side, rank, step)
    if key in ctx.cache:
        return ctx.cache[key]
    out: dict[str, str] = {}
    record = _record_at(ctx, side, rank, step)
    if record is not None:
        if isinstance(record.get("indices"), list):
            out["indices"] = json.dumps(record["indices"])
        if record.get("batch_digest") is not None:
            out["batch_digest"] = str(record["batch_digest"])
    try:
        watched = read_module_trace(_run(ctx, side), rank).get(step) if _run(ctx, side) is not None else None
    except Exception:  # noqa: BLE001 - a module trace that cannot be read: the other records stand
        watched = None
    inputs = model_inputs(watched) if watched is not None else None
    if inputs and None not in inputs:
        out["model_input"] = json.dumps(inputs)
    ctx.cache[key] = out
    return out


def _digests_set_aside(ctx: Context) -> bool:
    return any(note.get("kind") == NOT_COMPARABLE for note in getattr(ctx.cmp, "notes", None) or [])


def _same(ctx: Context, p: tuple[str, int], q: tuple[str, int], step) -> tuple[bool | None, str] | None:
    """(equal, kind) of what ranks p and q ((side, rank)) were fed at `step`, `kind` the most direct record both
    hold: equal True where every record both hold agrees, False where the most direct differs, None where it agrees
    and a less direct one differs (the same batch at other indices: positions in each rank's own dataset, or
    digests of other things: neither said). None where they hold no record in common."""
    fp, fq = fed_at(ctx, *p, step), fed_at(ctx, *q, step)
    kinds = [
        k
        for k in FED_KINDS
        if k in fp and k in fq and not (k == "batch_digest" and p[0] != q[0] and _digests_set_aside(ctx))
    ]
    if not kinds:
        return None
    if fp[kinds[0]] != fq[kinds[0]]:
        return False, kinds[0]
    return (True if all(fp[k] == fq[k] for k in kinds) else None), kinds[0]


def fed_alike(ctx: Context, step) -> dict | None:
    """A rank of one side fed at `step` exactly what another rank was fed, while the other side's same rank was fed
    something else: {"side", "rank", "other_side", "same_as": [(side, rank)...], "by", "other_ranks_apart"}, where
    `other_ranks_apart` says the other side fed those ranks apart (each its own). None where the records show none."""
    for side, other in (("a", "b"), ("b", "a")):
        for rank in _ranks(ctx, side):
            apart = _same(ctx, (side, rank), (other, rank), step)
            if apart is None or apart[0] is not False:
                continue  # fed the same as the other side's same rank, or not compared: nothing to say
            same_as, by = [], {apart[1]}
            for q in [(side, r) for r in _ranks(ctx, side) if r != rank] + [(other, r) for r in _ranks(ctx, other)]:
                if q == (other, rank):
                    continue
                equal = _same(ctx, (side, rank), q, step)
                if equal is None or equal[0] is not True:
                    continue
                if q[0] == side:  # two ranks of one side fed alike: a difference only where the other side's differ
                    theirs = _same(ctx, (other, rank), (other, q[1]), step)
                    if theirs is None or theirs[0] is not False:
                        continue
                same_as.append(q)
                by.add(equal[1])
            if same_as:
                return {"side": side, "rank": rank, "other_side": other, "same_as": same_as, "by": sorted(by)}
    return None


def inputs_apart(ctx: Context, step) -> list[int]:
    """The ranks whose inputs at `step` the records show apart between the two sides."""
    ranks = sorted(set(_ranks(ctx, "a")) & set(_ranks(ctx, "b")))
    return [r for r in ranks if (_same(ctx, ("a", r), ("b", r), step) or (True,))[0] is False]


def _param_digests_after(ctx: Context, rank, step) -> tuple | None:
    a, b = _record_at(ctx, "a", rank, step), _record_at(ctx, "b", rank, step)
    if a is None or b is None or a.get("param_digest") is None or b.get("param_digest") is None:
        return None
    return a["param_digest"], b["param_digest"]


def rounding_refused(ctx: Context, f: dict) -> str | None:
    """Why a reading of rounding (another order of the same sums, a few ulps) cannot explain divergence `f`, in a
    clause, or None where the records allow it: the parameters after that step part by far more than rounding of a
    step's gradients makes, or a rank's inputs differ at that step."""
    step, rank = f.get("step"), f.get("rank")
    key = ("rounding_refused", step, rank)
    if key in ctx.cache:
        return ctx.cache[key]
    why = None
    digests = _param_digests_after(ctx, rank, step)
    relative = max_relative(*digests) if digests is not None else None
    apart = inputs_apart(ctx, step)
    if relative is not None and relative > FAR_BEYOND_ROUNDING:
        why = (
            f"the parameters after step {step} part by {relative:.2g} relative on rank {rank} (param_digest "
            f"{digests[0]} vs {digests[1]}), far beyond what rounding of the step's gradients makes"
        )
    elif apart:
        why = f"the inputs of step {step} differ on rank(s) {', '.join(map(str, apart))} (the records of what each fed)"
    ctx.cache[key] = why
    return why
