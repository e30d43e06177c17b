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


def set_epoch_calls(run, rank, step=None) -> str:
    """Every set_epoch call `ddp-parity record`'s hooks saw on `rank` up to `step` (made before it; all of them
    without a step), or "": per sampler where the hooks recorded which (`sampler_built`, the `samplers` entry),
    since a side with several samplers (a validation loader's, two training loaders') sets each its own epoch; a
    call repeated with the same value before the same step once, with its count."""
    facts = read_hook_facts(run, rank)
    calls = [c for c in fact_items(facts, "set_epoch") if step is None or _made_by(c, step)]
    groups: dict = {}
    for call in calls:
        groups.setdefault(call.get("sampler_built"), []).append(call)
    if list(groups) == [None]:
        return _calls_said(calls)
    return " and ".join(f"on {_sampler_named(facts, k)} {_calls_said(v)}" for k, v in groups.items())


def _made_by(fact: dict, step) -> bool:
    return isinstance(fact.get("before_step"), int) and fact["before_step"] <= step


def _calls_said(calls: list) -> str:
    runs: list = []  # [(epoch, before_step), count]
    for c in calls:
        key = (c.get("epoch"), c.get("before_step"))
        if runs and runs[-1][0] == key:
            runs[-1][1] += 1
        else:
            runs.append([key, 1])
    return ", ".join(f"set_epoch({e}) before step {b}" + (f" (x{n})" if n > 1 else "") for (e, b), n in runs)


def _sampler_named(facts: dict, order) -> str:
    """A sampler by its `samplers` entry (class, length, shuffle) and what the hooks' iterators say of it: whether a
    step trained from a loader drawing from it (the training sampler) or none did (an evaluation's, or a second
    loader's whose batches reached the step beside the trained one)."""
    if order is None:
        return "a sampler the hooks did not see built"
    sampler = next((s for s in fact_items(facts, "samplers") if s.get("order") == order), {})
    drawn = [i for i in fact_items(facts, "loader_iterators") if i.get("sampler_built") == order]
    said = [f"{sampler['num_samples']} samples"] if isinstance(sampler.get("num_samples"), int) else []
    said += ["shuffle off"] if sampler.get("shuffle") is False else []
    if drawn:
        trained = any(i.get("trained") is True for i in drawn)
        said.append("steps trained from its loader" if trained else "no step trained from its loader")
    inside = f" ({', '.join(said)})" if said else ""
    return f"{sampler.get('class', 'sampler')} #{order}{inside}"


def iterator_length(run, rank, item: dict) -> int | None:
    """The batches a hooks-recorded DataLoader iterator's loader holds: its recorded `length` (len(loader)); for
    records without it, the sampler's num_samples over the batch size of the first step the iterator trained (its
    recorded indices) where it divides evenly, so that a last batch kept short or dropped makes no difference.
    None where neither says."""
    if isinstance(item.get("length"), int):
        return item["length"]
    sampler = item.get("sampler") if isinstance(item.get("sampler"), dict) else {}
    samples = sampler.get("num_samples")
    if item.get("trained") is not True or sampler.get("batch_sampler") or not isinstance(samples, int):
        return None
    first = next((r for r in records_of(run, rank) if r.get("step") == item.get("before_step")), None)
    indices = first.get("indices") if first is not None else None
    if not isinstance(indices, list) or not indices or not all(isinstance(i, int) for i in indices):
        return None
    if first.get("micro_batches", 1) != 1 or samples % len(indices):
        return None
    return samples // len(indices)


def restarted_early(ctx: Context, rank, step) -> dict | None:
    """{side, dataset, made, batches, length, anew, other}: where one side dropped a training DataLoader iterator
    (one a step trained from) before it ran out, with fewer batches than its loader holds, and made a new one over
    the same dataset before a step up to `step`, at which the other side made none over it: the loop's epoch ended
    before the loader's on that side. `other`: the other side's iterator over that dataset the same step trained
    from ({made, batches, length, anew: the step its successor was made before, or None})."""
    for side, dropped, anew, going, theirs in _passes_begun_on_one_side(ctx, rank, step):
        length = iterator_length(ctx.run(side), rank, dropped)
        if length is None or not isinstance(dropped.get("batches"), int) or dropped["batches"] >= length:
            continue
        mine = {"made": dropped["before_step"], "batches": dropped["batches"], "length": length}
        return {
            "side": side,
            "dataset": dropped.get("dataset"),
            **mine,
            "anew": anew["before_step"],
            "epochs": [(dropped.get("sampler") or {}).get("epoch"), (anew.get("sampler") or {}).get("epoch")],
            "other": _pass_said(ctx.run(other(side)), rank, going, theirs),
        }
    return None


def remade_at_epoch(ctx: Context, rank, step) -> dict | None:
    """{side, dataset, made, batches, length, anew, sampler, global_draw, other}: where one side made a new training
    iterator over a dataset before a step up to `step`, the last having given a whole pass (its loader's `length`
    batches), while the other side made none there and kept the iterator it trained from going past its own
    loader's length (its sampler gives more batches than len(loader): an infinite or repeating batch sampler): one
    loop re-iterates its loader at each of its epochs, the other takes each epoch's batches from one iterator kept
    across them. `sampler`: the new iterator's, as the hooks recorded it; `global_draw`: making it drew from the
    global generator (the loader has no generator= of its own); `other` as restarted_early's."""
    for side, dropped, anew, going, theirs in _passes_begun_on_one_side(ctx, rank, step):
        length = iterator_length(ctx.run(side), rank, dropped)
        if length is None or not isinstance(dropped.get("batches"), int) or dropped["batches"] < length:
            continue  # dropped with batches left: restarted_early's
        kept = _pass_said(ctx.run(other(side)), rank, going, theirs)
        if not _went_past_its_length(kept):
            continue  # the other side's iterator gave a pass at most: not one kept across epochs
        return {
            "side": side,
            "dataset": dropped.get("dataset"),
            **{"made": dropped["before_step"], "batches": dropped["batches"], "length": length},
            "anew": anew["before_step"],
            "sampler": anew.get("sampler") if isinstance(anew.get("sampler"), dict) else {},
            "global_draw": anew.get("global_draw") is True,
            "other": kept,
        }
    return None


def _went_past_its_length(said: dict) -> bool:
    """An iterator ({batches, length}) that gave more batches than its loader holds: its sampler gives more than
    one pass (an infinite batch sampler), and the loop kept that iterator beyond one pass."""
    batches, length = said["batches"], said["length"]
    return isinstance(batches, int) and isinstance(length, int) and batches > length


def _passes_begun_on_one_side(ctx: Context, rank, step):
    """(side, dropped, anew, going, theirs) for each new training iterator `side` made over a dataset before a step
    up to `step` (`anew`, following `dropped`) where the other side made none over it before that step, an iterator
    of its own over it (`going`, the last of `theirs` made earlier) going on: where the two loops' passes part."""
    passes = {s: _training_passes(ctx, s, rank) for s in ("a", "b")}
    for side in ("a", "b"):
        for dropped, anew in zip(passes[side], passes[side][1:]):
            if anew["before_step"] > step or dropped.get("dataset") != anew.get("dataset"):
                continue
            theirs = [i for i in passes[other(side)] if i.get("dataset") == dropped.get("dataset")]
            if not theirs or any(i["before_step"] == anew["before_step"] for i in theirs):
                continue  # both sides began a pass there: not where they part
            going = [i for i in theirs if i["before_step"] < anew["before_step"]]
            if going:
                yield side, dropped, anew, going[-1], theirs


def replayed_from(ctx: Context, side: str, rank, anew: int, made: int) -> int | None:
    """The number of steps, from `anew` on, at which `side`'s rank consumed exactly the samples it consumed at the
    same place from `made` on (its recorded indices or batch digests): its new iterator gave its last one's order
    again. None where the samples at `anew` differ from those at `made` or either is unrecorded."""
    keyed = {r.get("step"): _key(r) for r in records_of(ctx.run(side), rank)}
    n = 0
    while (key := keyed.get(anew + n)) is not None and key == keyed.get(made + n) and made + n < anew:
        n += 1
    return n or None


def _training_passes(ctx: Context, side: str, rank) -> list[dict]:
    """The hooks' DataLoader iterators a step trained from, in the order they were made."""
    items = fact_items(read_hook_facts(ctx.run(side), rank), "loader_iterators")
    items = [i for i in items if i.get("trained") is True and isinstance(i.get("before_step"), int)]
    return sorted((i for i in items if isinstance(i.get("order"), int)), key=lambda i: i["order"])


def _pass_said(run, rank, item: dict, same_dataset: list[dict]) -> dict:
    later = [i["before_step"] for i in same_dataset if i["order"] > item["order"]]
    return {
        "made": item["before_step"],
        "batches": item.get("batches"),
        "length": iterator_length(run, rank, item),
        "anew": later[0] if later else None,
    }


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


def feeding_iterator(items: list[dict], step: int) -> dict | None:
    """The training DataLoader iterator that fed `step`: the last one begun before it (a validation loader's
    iterator, `trained` false, feeds no training step)."""
    begun = [
        i
        for i in items
        if i.get("trained") is not False and isinstance(i.get("before_step"), int) and i["before_step"] <= step
    ]
    return max(
        begun, key=lambda i: (i["before_step"], i.get("order") if isinstance(i.get("order"), int) else 0), default=None
    )


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
        if item.get("trained") is False and spans_steps(item) and made <= step <= last:
            out.setdefault((item.get("dataset"), made), []).append(item)
    return out


def spans_steps(item: dict) -> bool:
    """A DataLoader iterator yielded batches across steps (its last before a later step than the one it was made
    before): a loader feeding the training beside another, where an evaluation's yields all its batches between two
    steps. False where `last_batch_before_step` was not recorded (older hooks)."""
    made, last = item.get("before_step"), item.get("last_batch_before_step")
    return isinstance(made, int) and isinstance(last, int) and last > made


def _sampler_args(item: dict) -> dict:
    """The sampler's arguments as built (its epoch is set_epoch's, compared by the epoch checks)."""
    return {k: v for k, v in (item.get("sampler") or {}).items() if k != "epoch"}


def sampler_args_apart(ia: dict, ib: dict) -> dict[str, tuple]:
    """{argument: (a's value, b's value)} of two iterators' samplers as built, those that differ."""
    a, b = _sampler_args(ia), _sampler_args(ib)
    return {k: (a.get(k, UNRECORDED), b.get(k, UNRECORDED)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def pass_epochs_agree(ctx: Context, rank, step) -> int | None:
    """The sampler epoch at which the pass each side trained `step` from drew its order, where the hooks recorded it
    on both sides and it is the same; None where a side recorded none or they differ. A loop's `epoch` field is the
    loop's count, not the sampler's: where this agrees, the records' epochs apart are no set_epoch difference."""
    found = {s: pass_epochs(ctx, s, rank, step) for s in ("a", "b")}
    if None in found.values() or found["a"][0][-1] != found["b"][0][-1]:
        return None
    return found["a"][0][-1]


def _ran_out(run, rank, item: dict) -> bool:
    """The iterator gave every batch its loader holds (its pass ended where its loader did)."""
    length = iterator_length(run, rank, item)
    return isinstance(length, int) and isinstance(item.get("batches"), int) and item["batches"] >= length


def step_across_passes(ctx: Context, side: str, rank, step) -> dict | None:
    """{dataset, made, batches} where `step` on `side` took batches from two passes over a training
    DataLoader: the last batch of a pass that ran out (made before step `made`, `batches` batches) and the first of
    the next, made before the same step. A loop whose accumulation counts each epoch's batches and never steps (nor
    zero_grad) at the epoch's end carries the epoch's left-over micro-batches into the next epoch's first step."""
    passes = _training_passes(ctx, side, rank)
    for ended, begun in zip(passes, passes[1:]):
        if ended.get("last_batch_before_step") != step or begun["before_step"] != step:
            continue
        if ended.get("dataset") == begun.get("dataset") and _ran_out(ctx.run(side), rank, ended):
            return {"dataset": ended.get("dataset"), "made": ended["before_step"], "batches": ended["batches"]}
    return None


def step_ends_pass(ctx: Context, side: str, rank, step) -> dict | None:
    """{dataset, made, batches, next_made} where `step` on `side` ended with the last batch of a training pass that
    ran out and no new pass was made before it (`next_made`: the step the next pass was made before, None where none
    was): the loop stepped at the epoch's last batch (Lightning's accumulate_grad_batches does, whatever is left)."""
    passes = _training_passes(ctx, side, rank)
    for i, ended in enumerate(passes):
        later = passes[i + 1 :]
        if ended.get("last_batch_before_step") != step or any(p["before_step"] <= step for p in later):
            continue
        if _ran_out(ctx.run(side), rank, ended):
            said = {"dataset": ended.get("dataset"), "made": ended["before_step"], "batches": ended["batches"]}
            return {**said, "next_made": later[0]["before_step"] if later else None}
    return None
