"""What a sampler's order at a step is a function of, read on both sides for the sampler seed's finding
(causes/seeds.py): a DistributedSampler shuffles with its seed + the epoch set_epoch last gave it, over the
dataset's length, padded or cut (drop_last) to a multiple of num_replicas, and takes every num_replicas-th index
from its rank. Where the seeds differ, the other settings may differ as well (a script whose set_epoch counts its
epochs from 1 against Lightning's from 0): each one recorded apart is named side by side, and where the records
allow it (torch's DistributedSampler on both sides, every setting recorded, one dataset length that both samplers'
num_samples allow and for which each side's own settings give exactly the indices it recorded at the step) the
order is recomputed to say which of them part the step's indices, so that the fix covers all of those and names
none that changes nothing. No Cause here: the seed's check says what it means.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ddp_parity.compare.causes.base import Context, fmt
from ddp_parity.compare.causes.samples import last_pass
from ddp_parity.compare.walk import records_of

# the settings a DistributedSampler's order is a function of (beside the dataset's length), in the order said
ORDER_FIELDS = ("seed", "epoch", "shuffle", "drop_last", "num_replicas", "rank")
# a dataset longer than this is not permuted again to check the records (the words then name every setting apart)
MOST_RECOMPUTED = 5_000_000


@dataclass
class SamplerOrder:
    """The sampler settings apart at the parting step, and what recomputing the order says of them.
    `apart`: {setting: (a's, b's)} recorded on both sides and apart, the seed first; `needed`: those that part the
    step's indices (every one apart where the order could not be recomputed); `recomputed`: the evidence of the
    recomputation, None where it could not be made."""

    apart: dict
    needed: list
    recomputed: dict | None = None

    @property
    def seed_idle(self) -> bool:
        """The seeds are apart on this rank, and the recomputed order shows they change none of the step's indices."""
        return "seed" in self.apart and self.recomputed is not None and "seed" not in self.needed

    @property
    def others(self) -> list:
        """The settings apart beside the seed."""
        return [k for k in self.apart if k != "seed"]


def order_settings(ctx: Context, side: str, rank, step) -> dict:
    """The sampler `step` trained from on `side`'s `rank`: the hooks' record of the pass it drew from (its
    DataLoader iterator, which carries the epoch the pass drew its order at), else meta.json's record of the rank's
    sampler (no epoch). {} where neither was recorded."""
    began = last_pass(ctx, side, rank, step) if isinstance(step, int) else None
    sampler = (began or {}).get("sampler")
    if isinstance(sampler, dict) and sampler.get("class"):
        return dict(sampler)
    for i, facts in enumerate(ctx.meta(side).get("ranks") or []):
        if isinstance(facts, dict) and facts.get("rank", i) == rank and isinstance(facts.get("sampler"), dict):
            return dict(facts["sampler"])
    return {}


def sampler_order(ctx: Context, rank, step) -> SamplerOrder | None:
    """The settings of the samplers `step` trained from on `rank` that differ, the seed among them; None where
    a side recorded no sampler or the classes differ (a seed of two kinds of sampler is not one order's)."""
    settings = [order_settings(ctx, s, rank, step) for s in ("a", "b")]
    if not all(settings) or settings[0].get("class") != settings[1].get("class"):
        return None
    apart = {
        k: (settings[0][k], settings[1][k])
        for k in ORDER_FIELDS
        if k in settings[0] and k in settings[1] and settings[0][k] != settings[1][k]
    }
    found = SamplerOrder(apart, list(apart))
    if len(apart) > 1 or (apart and "seed" not in apart):
        found.recomputed = _recompute(ctx, rank, step, settings, apart)
        if found.recomputed is not None:
            found.needed = found.recomputed["needed"]
    return found


def _recompute(ctx: Context, rank, step, settings: list, apart: dict) -> dict | None:
    """{dataset_length, needed, alone: {setting: the indices b's sampler would give at the step with a's value of
    that setting alone}, position}: the order recomputed where both sides' samplers are torch's DistributedSampler
    with every setting recorded, and one dataset length fits both samplers' num_samples and gives each side exactly
    the indices it recorded at `step`, at the same place in its shard. None where it cannot be."""
    if any(s.get("class") != "DistributedSampler" for s in settings):
        return None  # a subclass or a sampler of the program's own may order otherwise
    if not all(isinstance(s.get(k), int) for s in settings for k in ("seed", "epoch", "num_replicas", "rank")):
        return None
    if not all(isinstance(s.get(k), bool) for s in settings for k in ("shuffle", "drop_last")):
        return None
    if not all(isinstance(s.get("num_samples"), int) for s in settings):
        return None
    recorded = [_indices_at(ctx.run(side), rank, step) for side in ("a", "b")]
    if None in recorded or len(recorded[0]) != len(recorded[1]):
        return None
    fits = []
    for length in sorted(set(_lengths(settings[0])) & set(_lengths(settings[1]))):
        if length > MOST_RECOMPUTED:
            return None
        places = [_place(_shard(length, s), r) for s, r in zip(settings, recorded)]
        if None not in places and places[0] == places[1]:
            fits.append((length, places[0]))
    if len(fits) != 1:
        return None  # no length, or several, give both sides' indices: the records do not pin the order
    length, place = fits[0]
    n = len(recorded[0])

    shards: dict = {}

    def given(changed: set) -> list:
        """b's indices at the step with a's value of each setting in `changed`."""
        mine = {**settings[1], **{k: settings[0][k] for k in changed}}
        key = tuple(mine[k] for k in ORDER_FIELDS)
        if key not in shards:
            shards[key] = _shard(length, mine)[place : place + n]
        return shards[key]

    target = recorded[0]
    every = set(apart)
    needed = [k for k in apart if given(every - {k}) != target]
    if not needed or given(set(needed)) != target:
        needed = list(apart)  # the settings act together: every one named
    alone = {k: given({k}) for k in apart}
    return {"dataset_length": length, "needed": needed, "alone": alone, "position": place, "target": target}


def _indices_at(run, rank, step) -> list | None:
    """The sample indices `rank` recorded at `step`, flat (a list per micro-batch joined); None where unrecorded."""
    record = next((r for r in records_of(run, rank) if r.get("step") == step), None)
    indices = record.get("indices") if record else None
    if not isinstance(indices, list) or not indices:
        return None
    flat = [i for part in indices for i in part] if all(isinstance(i, list) for i in indices) else indices
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in flat):
        return None
    return flat


def _lengths(s: dict) -> range:
    """The dataset lengths for which a DistributedSampler of these num_replicas and drop_last gives num_samples."""
    n, k = s["num_samples"], s["num_replicas"]
    if k < 1 or n < 0:
        return range(0)
    if s["drop_last"]:
        return range(n * k, (n + 1) * k)
    return range(max((n - 1) * k + 1, 0), n * k + 1)


def _num_samples(length: int, k: int, drop_last: bool) -> int:
    if drop_last and length % k:
        return -(-(length - k) // k)
    return -(-length // k)


def _shard(length: int, s: dict) -> list:
    """The indices torch's DistributedSampler gives its rank over a dataset of `length` (its __iter__)."""
    k = s["num_replicas"]
    total = _num_samples(length, k, s["drop_last"]) * k
    if s["shuffle"]:
        g = torch.Generator()
        g.manual_seed(s["seed"] + s["epoch"])
        indices = torch.randperm(length, generator=g).tolist()
    else:
        indices = list(range(length))
    if not s["drop_last"]:
        padding = total - len(indices)
        if padding and indices:
            indices += (indices * -(-padding // len(indices)))[:padding]
    else:
        indices = indices[:total]
    return indices[s["rank"] : total : k]


def _place(shard: list, indices: list) -> int | None:
    """Where `indices` stand as one run in `shard`, if they stand there once."""
    n = len(indices)
    places = [i for i in range(len(shard) - n + 1) if shard[i] == indices[0] and shard[i : i + n] == indices]
    return places[0] if len(places) == 1 else None


# ---------------------------------------------------------------------------------------------
# the words


def order_facts(ctx: Context, found: SamplerOrder, rank, step) -> str:
    """The settings apart beside the seed, side by side, and what the recomputed order says of them; "" where the
    seed alone is apart (and nothing recomputed says otherwise)."""
    na, nb = ctx.names
    if not found.others and found.recomputed is None:
        return ""
    words = []
    for k in found.others:
        a, b = found.apart[k]
        if k == "epoch":
            words.append(
                f"the pass rank {rank} trained step {step} from drew its order at epoch {a} on {na} and at epoch {b} "
                f"on {nb} (the epoch set_epoch last gave the sampler, as the hooks' DataLoader iterators read it)"
            )
        else:
            words.append(f"{k} is {_value(a)} on {na} and {_value(b)} on {nb}")
    facts = f" Beside the seed: {_listed(words)}." if words else ""
    rec = found.recomputed
    if rec is None:
        if len(found.needed) > 1:
            facts += (
                f" Each of these {len(found.needed)} settings decides the order a DistributedSampler gives (a function "
                "of its seed + epoch, the dataset's length, shuffle, drop_last, num_replicas and rank), and the "
                "records do not let it be recomputed here: every one is named, and the samples are the same only "
                "where all of them are."
            )
        return facts
    length, needed = rec["dataset_length"], rec["needed"]
    facts += (
        f" Recomputed (a DistributedSampler's order is a function of its seed + epoch, the dataset's length, shuffle, "
        f"drop_last, num_replicas and rank; here {length} samples, for which each side's own settings give exactly "
        f"the indices it recorded at step {step} on rank {rank}):"
    )
    target = _shown(rec["target"])
    if len(needed) > 1:
        alone = _listed([f"{_shown(rec['alone'][k])} with {na}'s {k} alone" for k in needed])
        facts += (
            f" {nb} would consume {alone}, each still apart from {na}'s {target}; with {na}'s {_listed(needed)} "
            f"together, {na}'s."
        )
    else:
        facts += f" with {na}'s {needed[0]} alone, {nb} would consume {na}'s {target}."
    idle = [k for k in found.apart if k not in needed]
    if idle:
        said = _listed([f"{k} ({_value(found.apart[k][0])} vs {_value(found.apart[k][1])})" for k in idle])
        facts += f" Made equal, {said} would change none of these indices."
    return facts


def order_headline(ctx: Context, found: SamplerOrder, step) -> str:
    """The settings that part the step's indices, each side by side: "seed (raw: seed 0, lightning: seed 12345) and
    the epoch of step 1's pass (raw: epoch 1, lightning: epoch 0)"."""
    na, nb = ctx.names
    words = []
    for k in found.needed:
        a, b = found.apart[k]
        if k in ("seed", "epoch"):
            what = "seed" if k == "seed" else f"the epoch of step {step}'s pass"
            words.append(f"{what} ({na}: {k} {a}, {nb}: {k} {b})")
        else:
            words.append(f"{k} ({na}: {_value(a)}, {nb}: {_value(b)})")
    return _listed(words)


def order_fix(ctx: Context, found: SamplerOrder, step) -> list[str]:
    """A clause of the fix for each setting beside the seed that parts the step's indices."""
    na, nb = ctx.names
    clauses = []
    for k in found.needed:
        if k == "seed":
            continue
        a, b = found.apart[k]
        if k == "epoch":
            clauses.append(
                "give the samplers the same epoch at each step: count the epochs given to sampler.set_epoch alike on "
                f"both sides ({na} gave {a} and {nb} {b} before step {step}'s pass; Lightning gives the sampler of its "
                "training loader its current_epoch, counted from 0)"
            )
        elif k in ("num_replicas", "rank"):
            clauses.append(
                f"shard alike: num_replicas=world size and rank=the process's rank on both ({k} {_value(a)} on {na}, "
                f"{_value(b)} on {nb})"
            )
        else:
            clauses.append(f"the same {k} on both ({_value(a)} on {na}, {_value(b)} on {nb})")
    return clauses


def order_evidence(ctx: Context, found: SamplerOrder) -> dict:
    evidence = {}
    if found.others:
        evidence["sampler_order_apart"] = {k: ctx.both(*found.apart[k]) for k in found.apart}
    if found.recomputed is not None:
        rec = found.recomputed
        evidence["sampler_order_recomputed"] = {
            "dataset_length": rec["dataset_length"],
            "needed": rec["needed"],
            "alone": {k: v[:12] for k, v in rec["alone"].items()},
        }
    return evidence


def _shown(indices: list, most: int = 6) -> str:
    """Indices as the first divergence shows them: the first few, then "..."."""
    return "[" + ", ".join(map(str, indices[:most])) + (", ...]" if len(indices) > most else "]")


def _value(v) -> str:
    """A setting as the program writes it (True, 0), anything else as the report shows values."""
    return repr(v) if isinstance(v, (bool, int)) else fmt(v)


def _listed(items: list) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
