"""What the recorded samples and samplers show, read for the data checks (causes/data.py): the order a
side's indices follow over an epoch (the identity, a stride, a permutation), the samplers side by side, a
batch drawn without a step, the set_epoch calls the hooks saw. No Cause here: the checks say what it means.
"""

from __future__ import annotations

import json

from ddp_parity.compare.causes.base import Context, fmt
from ddp_parity.compare.walk import comparable_samples, records_of
from ddp_parity.trace_files import fact_items, read_hook_facts

UNRECORDED = "unrecorded"


def set_epoch_calls(run, rank) -> str:
    """The set_epoch values `ddp-parity record`'s hooks saw on `rank` (before which step), or ""."""
    items = (read_hook_facts(run, rank).get("set_epoch") or {}).get("items") or []
    return ", ".join(f"set_epoch({i.get('epoch')}) before step {i.get('before_step')}" for i in items[:4])


def consumed_later(ctx: Context, rank, step, side: str) -> int | None:
    """The later step at which the other side consumed the samples `side` consumed at `step`."""
    mine = next((r for r in records_of(ctx.run(side), rank) if r.get("step") == step), None)
    if mine is None:
        return None
    key = json.dumps(comparable_samples(mine, mine)[0], sort_keys=True)
    for record in records_of(ctx.run(other(side)), rank):
        if record.get("step", 0) > step and json.dumps(comparable_samples(record, record)[0], sort_keys=True) == key:
            return record["step"]
    return None


def skipped_batch(ctx: Context, rank, step) -> tuple[str, int] | None:
    """(side, k): after equal samples at earlier steps of the epoch, `side`'s samples at `step` and after
    are the other side's k steps later (k <= 2): a batch drawn at `step` without an optimizer step."""
    if ctx.walk is None or ctx.walk.steps_equal_before < 1:
        return None
    keyed = {s: [(r.get("step"), r.get("epoch"), _key(r)) for r in records_of(ctx.run(s), rank)] for s in ("a", "b")}
    for side in ("a", "b"):
        mine, theirs = keyed[side], keyed[other(side)]
        at = next((i for i, r in enumerate(mine) if r[0] == step), None)
        if at is None or not at or mine[at - 1][1] != mine[at][1]:
            continue  # the first step of an epoch: data_order.ahead's, drawn before the epoch's first step
        for k in (1, 2):
            pairs = list(zip(mine[at:], theirs[at + k :]))[:3]
            if pairs and all(m[2] is not None and m[2] == t[2] and m[1] == t[1] for m, t in pairs):
                return side, k
    return None


def _key(record: dict) -> str | None:
    key = comparable_samples(record, record)[0]
    return None if key is None else json.dumps(key, sort_keys=True)


def unshuffled_side(ctx: Context, rank, epoch) -> tuple[str, str] | None:
    """(side, shape) where one side's indices over the epoch on `rank` follow the identity order or a
    constant stride (a DistributedSampler without shuffle takes rank, rank + world, ...) and the other's
    do not: the shape of the evidence says "not shuffled", never "other samples"."""
    shapes = {s: _order_shape(_epoch_indices(ctx.run(s), rank, epoch)) for s in ("a", "b")}
    for side in ("a", "b"):
        if shapes[side] and not shapes[other(side)]:
            return side, shapes[side]
    return None


def _epoch_indices(run, rank, epoch) -> list:
    out = []
    for record in records_of(run, rank):
        if record.get("epoch") == epoch:
            indices = record.get("indices")
            if not isinstance(indices, list):
                return []
            out += indices
        elif out:
            break
    return out


def _order_shape(indices: list) -> str | None:
    """ "the identity order (0, 1, 2, ...)" or "a stride of k (r, r + k, ...)" for an increasing
    sequence of constant step; None for anything else (a permutation, too few, not integers)."""
    if len(indices) < 3 or not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
        return None
    steps = {b - a for a, b in zip(indices, indices[1:])}
    if len(steps) != 1 or (k := steps.pop()) < 1:
        return None
    start = indices[0]
    if k == 1:
        return f"the identity order ({start}, {start + 1}, {start + 2}, ...): not shuffled"
    return f"a stride of {k} ({start}, {start + k}, {start + 2 * k}, ...): not shuffled, sharded by rank"


def sampler_differences(ctx: Context) -> list[str]:
    """The recorded sampler facts that differ, side by side (a key or a sampler one side did not record
    said "unrecorded" there); the seed is sampler_seed's, compared before."""
    out = []
    for r, (fa, fb) in enumerate(zip(ctx.meta("a").get("ranks") or [], ctx.meta("b").get("ranks") or [])):
        sa, sb = (f.get("sampler") if isinstance(f, dict) else None for f in (fa, fb))
        if not sa and not sb:
            continue
        if not (isinstance(sa, dict) and isinstance(sb, dict)):
            out.append(f"ranks[{r}].sampler: {_sampler_words(sa)} vs {_sampler_words(sb)}")
            continue
        for key in sorted(set(sa) | set(sb)):
            if key != "seed" and sa.get(key, UNRECORDED) != sb.get(key, UNRECORDED):
                out.append(
                    f"ranks[{r}].sampler.{key}: {fmt(sa.get(key, UNRECORDED))} vs {fmt(sb.get(key, UNRECORDED))}"
                )
    return out


def _sampler_words(sampler) -> str:
    if not isinstance(sampler, dict) or not sampler:
        return UNRECORDED
    return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in sorted(sampler.items())) + "}"


def samplers_identical(ctx: Context) -> bool:
    """Both sides recorded a sampler on every rank, with every fact (the seed too) the same."""
    ranks = [ctx.meta(s).get("ranks") or [] for s in ("a", "b")]
    return (
        len(ranks[0]) == len(ranks[1]) > 0
        and all(samplers_recorded(ctx, s) for s in ("a", "b"))
        and all(fa.get("sampler") == fb.get("sampler") for fa, fb in zip(*ranks))
    )


def samplers_recorded(ctx: Context, side: str) -> bool:
    ranks = ctx.meta(side).get("ranks") or []
    return bool(ranks) and all(isinstance(r, dict) and r.get("sampler") for r in ranks)


def other(side: str) -> str:
    return "b" if side == "a" else "a"


def pass_epochs(ctx: Context, side: str, rank, step) -> tuple[list, str] | None:
    """The sampler epochs at which each pass over a training DataLoader began up to `step` (the hooks' DataLoader
    iterators a step trained from, started before `step` + 1), and the sampler's class; None where unrecorded."""
    items = fact_items(read_hook_facts(ctx.run(side), rank), "loader_iterators")
    passes = [
        i
        for i in items
        if i.get("trained") is True
        and isinstance(i.get("before_step"), int)
        and i["before_step"] <= step
        and isinstance(i.get("sampler"), dict)
        and isinstance(i["sampler"].get("epoch"), int)
    ]
    if not passes:
        return None
    return [i["sampler"]["epoch"] for i in passes], str(passes[-1]["sampler"].get("class"))


def last_pass(ctx: Context, side: str, rank, step) -> dict | None:
    """The hooks' DataLoader iterator `step` trained from (the last pass begun before it), or None."""
    items = fact_items(read_hook_facts(ctx.run(side), rank), "loader_iterators")
    passes = [i for i in items if i.get("trained") is True and isinstance(i.get("before_step"), int)]
    passes = [i for i in passes if i["before_step"] <= step and isinstance(i.get("order"), int)]
    return passes[-1] if passes else None


def sampler_epochs_apart(ctx: Context, rank, step) -> dict | None:
    """{a: epoch, b: epoch, class, note} where the pass each side trained `step` from drew its order with a sampler
    of the same class at another epoch (the hooks' DataLoader iterators, the epoch read at the pass's first batch);
    None where a side recorded none, the classes differ (their own cause) or the epochs agree."""
    found = {s: pass_epochs(ctx, s, rank, step) for s in ("a", "b")}
    if None in found.values() or found["a"][1] != found["b"][1] or found["a"][0][-1] == found["b"][0][-1]:
        return None
    return {"a": found["a"][0][-1], "b": found["b"][0][-1], "class": found["a"][1]}


def other_loaders_apart(ctx: Context, rank, step: int) -> list[tuple[dict, dict]]:
    """Pairs (a's, b's) of DataLoader iterators that fed the training up to `step` beside the one whose batches the
    backwards took (a labeled loader beside an unlabeled one, both read each step), built with other sampler
    arguments, their indices apart. Such an iterator yielded batches across steps (its last before a later step
    than the one it was made before) and no backward was paired with them; an evaluation's loader yields all its
    batches between two steps. Paired in order among those over the same dataset class made before the same step."""
    rank = rank if isinstance(rank, int) else 0
    keyed = [_feeding_beside(ctx.run(side), rank, step) for side in ("a", "b")]
    pairs = []
    for key, mine in keyed[0].items():
        for ia, ib in zip(mine, keyed[1].get(key, [])):
            digests = ia.get("indices_sha256"), ib.get("indices_sha256")
            if all(digests) and digests[0] != digests[1] and _sampler_args(ia) != _sampler_args(ib):
                pairs.append((ia, ib))
    return pairs


def _feeding_beside(run, rank: int, step: int) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for item in fact_items(read_hook_facts(run, rank), "loader_iterators"):
        made, last = item.get("before_step"), item.get("last_batch_before_step")
        spans_steps = isinstance(made, int) and isinstance(last, int) and made <= step <= last and last > made
        if item.get("trained") is False and spans_steps:
            out.setdefault((item.get("dataset"), made), []).append(item)
    return out


def _sampler_args(item: dict) -> dict:
    """The sampler's arguments as built (its epoch is set_epoch's, compared by the epoch checks)."""
    return {k: v for k, v in (item.get("sampler") or {}).items() if k != "epoch"}


def sampler_args_apart(ia: dict, ib: dict) -> dict[str, tuple]:
    """{argument: (a's value, b's value)} of two iterators' samplers as built, those that differ."""
    a, b = _sampler_args(ia), _sampler_args(ib)
    return {k: (a.get(k, UNRECORDED), b.get(k, UNRECORDED)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
