"""Why two runs differ: walk the causal order to the first point where they part ways and name it.

    configuration -> initial weights -> samples consumed -> loss -> gradient -> learning rate
    -> parameters after the step

`diagnose(run_a, run_b, report, stall=None)` reads only the two run directories (meta.json and the
per-rank traces, streamed one step at a time across ranks and stopped at the first divergence) and
the comparison report (`compare_runs(...).to_dict()`), and returns

    {"category", "step", "rank", "evidence", "explanation", "advice"}

with category one of CATEGORIES. `format_diagnosis(d)` renders it for the terminal summary.
Pure Python: no tensors are loaded, nothing is recomputed.
"""

from __future__ import annotations

import hashlib
import json
import math
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ddp_parity.trace import TraceFormatError, digest_indices, iter_records, read_meta, trace_ranks

CATEGORIES = (
    "equivalent",
    "config",
    "init",
    "data_order",
    "set_epoch",
    "sampler_seed",
    "numerics",
    "gradients",
    "optimizer",
    "step_count",
    "stall",
)

# resolved-config keys (dotted) that cannot change the numbers a run computes; a key matches an
# entry or lies below one. LightningCLI's extra keys (`config`, `optimizer`, `lr_scheduler`, Trainer
# defaults) exist on one side only and are skipped anyway: only keys both sides have are compared.
IGNORED_CONFIG_KEYS = (
    "run_dir",
    "ckpt_path",
    "config",
    "checkpoint",
    "weights_only",
    "trainer.enable_progress_bar",
    "trainer.logger",
    "trainer.enable_model_summary",
    "trainer.enable_checkpointing",
    "trainer.default_root_dir",
    "trainer.callbacks",
    "trainer.log_every_n_steps",
    "trainer.enable_autolog_hparams",
    "trainer.profiler",
    "trainer.model_registry",
)
# meta.json facts outside `config` that change numerics
META_KEYS = ("world_size", "backend", "device")
VERSION_KEYS = ("torch",)
RANK_FACT_KEYS = ("threads", "omp_num_threads")
SEED_KEY = "seed_everything"


# ---------------------------------------------------------------------------------------------
# the entry points


def diagnose(run_a, run_b, report: dict | None, stall: dict | None = None) -> dict:
    """Name the first point where run_a and run_b diverge, in causal order (see the module doc)."""
    report = report or {}
    rtol, atol = _tolerance(report.get("criterion"))
    meta_a, err_a = _meta(run_a)
    meta_b, err_b = _meta(run_b)
    name_a, name_b = _side_name(meta_a, run_a, "a"), _side_name(meta_b, run_b, "b")
    sides = {"a": name_a, "b": name_b}
    base = {"sides": sides, "verdict": report.get("verdict"), "report_first_divergence": report.get("first_divergence")}
    unreadable = {name: err for name, err in ((name_a, err_a), (name_b, err_b)) if err}
    if unreadable:
        base["unreadable_meta"] = unreadable

    config_diffs, seed_diff = ({}, None)
    if meta_a is not None and meta_b is not None:
        config_diffs, seed_diff = config_differences(meta_a, meta_b)

    if stall:
        return _stall(stall, run_a, run_b, meta_a, meta_b, sides, base, config_diffs, seed_diff)

    if config_diffs:
        if seed_diff is not None:
            config_diffs = {**config_diffs, SEED_KEY: seed_diff}
        return _config(config_diffs, sides, base)

    if seed_diff is not None:
        base["seed_everything"] = {name_a: seed_diff[0], name_b: seed_diff[1]}
    seeds = _sampler_seeds(meta_a), _sampler_seeds(meta_b)
    seeds_differ = _seeds_differ(*seeds)
    init = _init_digests(meta_a), _init_digests(meta_b)
    init_finding = _init_finding(*init)

    if init_finding is not None and init_finding["rank0_differs"] and seed_diff is None:
        return _init(init_finding, init, seed_diff, sides, base, report)  # no need to read the traces

    walk = Walk(run_a, run_b, rtol, atol).run()

    # an unpinned global seed (LightningCLI's `seed_everything: true` picks one at random) shows up
    # in the config, the initial weights and the sampler at once: name the seed, not its symptoms
    if seed_diff is not None and (seeds_differ or (walk.found and walk.found["quantity"] == "samples")):
        return _sampler_seed(walk, seeds, seed_diff, init_finding, sides, base)
    if seed_diff is not None and init_finding is None and walk.found is None:
        return _config({SEED_KEY: seed_diff}, sides, base)

    if init_finding is not None and (init_finding["rank0_differs"] or walk.found is None):
        return _init(init_finding, init, seed_diff, sides, base, report)
    if init_finding is not None:
        base["init_note"] = (
            "init_params_sha256 differs on rank(s) other than 0, but rank 0's weights match "
            "across the sides and DDP broadcasts them at construction: harmless by itself"
        )
        base["init_params_sha256"] = {name_a: init[0], name_b: init[1]}

    if walk.found is None:
        if walk.unreadable:
            base["unreadable_traces"] = walk.unreadable
        return _after_clean_walk(walk, report, sides, base)
    quantity = walk.found["quantity"]
    if quantity in ("count", "numbering", "ranks"):
        return _step_count(walk, meta_a, meta_b, sides, base)
    if quantity == "samples":
        if seeds_differ:
            return _sampler_seed(walk, seeds, None, None, sides, base)
        return _samples(walk, meta_a, meta_b, sides, base)
    if quantity == "loss":
        return _numerics(walk, sides, base)
    if quantity == "grad_norm":
        return _gradients(walk, sides, base)
    return _optimizer(walk, sides, base)


def format_diagnosis(d: dict) -> str:
    """A few lines for the terminal: what and where, then the fix."""
    where = ""
    if d.get("step") is not None:
        where += f" at step {d['step']}"
    if d.get("rank") is not None:
        where += f" rank {d['rank']}"
    headline = _first_sentence(d.get("explanation", ""))
    lines = textwrap.wrap(f"diagnosis: {d.get('category')}{where}: {headline}", width=110, subsequent_indent="  ")
    if d.get("category") != "equivalent" and d.get("advice"):
        lines += textwrap.wrap(f"fix: {d['advice']}", width=110, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# configuration


def config_differences(meta_a: dict, meta_b: dict) -> tuple[dict, tuple | None]:
    """{dotted key: (a, b)} for numerics-relevant meta facts both sides record with different
    values, and the seed_everything pair (kept apart) or None."""
    diffs: dict[str, tuple] = {}
    for key in META_KEYS:
        if (
            key in meta_a
            and key in meta_b
            and not _same(*(_device_type(m[key]) if key == "device" else m[key] for m in (meta_a, meta_b)))
        ):
            diffs[key] = (meta_a[key], meta_b[key])
    va, vb = meta_a.get("versions") or {}, meta_b.get("versions") or {}
    for key in VERSION_KEYS:
        if key in va and key in vb and not _same(va[key], vb[key]):
            diffs[f"versions.{key}"] = (va[key], vb[key])
    flat_a, flat_b = _flatten(meta_a.get("config") or {}), _flatten(meta_b.get("config") or {})
    seed = None
    for key in sorted(set(flat_a) & set(flat_b)):
        if _ignored(key) or _same(flat_a[key], flat_b[key]):
            continue
        if key == SEED_KEY:
            seed = (flat_a[key], flat_b[key])
        else:
            diffs[f"config.{key}"] = (flat_a[key], flat_b[key])
    ranks_a, ranks_b = meta_a.get("ranks") or [], meta_b.get("ranks") or []
    for r, (fa, fb) in enumerate(zip(ranks_a, ranks_b)):
        fa, fb = fa or {}, fb or {}
        r = fa.get("rank", r)
        for key in RANK_FACT_KEYS:
            if key in fa and key in fb and not _same(fa[key], fb[key]):
                diffs[f"ranks[{r}].{key}"] = (fa[key], fb[key])
    return diffs, seed


def _device_type(device):
    """ "cuda:0" and "cuda" alike: the index a rank runs on does not change what it computes."""
    return device.split(":", 1)[0] if isinstance(device, str) else device


def _flatten(config: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def _ignored(key: str) -> bool:
    return any(key == k or key.startswith(k + ".") for k in IGNORED_CONFIG_KEYS)


def _normal(value):
    """ "2" and 2 (LightningCLI keeps `devices` a string), 1.0 and 1, tuples and lists compare alike."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, (int, float)) and not isinstance(parsed, bool) else value
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    return value


def _same(a, b) -> bool:
    return _normal(a) == _normal(b)


def _config(diffs: dict, sides: dict, base: dict) -> dict:
    na, nb = sides["a"], sides["b"]
    lines = [f"{key}: {_fmt(a)} vs {_fmt(b)}" for key, (a, b) in diffs.items()]
    rank = next((int(k[6 : k.index("]")]) for k in diffs if k.startswith("ranks[")), None)
    threads = [k for k in diffs if k.startswith("ranks[") or k in ("config.threads",)]
    parts = [f"The runs are not configured alike ({na} vs {nb}): {'; '.join(lines)}."]
    if threads:
        parts.append(
            "The number of intra-op threads decides how a CPU kernel splits its reductions, so "
            "different thread counts sum in a different order and round differently: typically the "
            "first loss already differs in its last bits and the runs drift apart from there."
        )
    if SEED_KEY in diffs:
        parts.append(
            "The global seed differs too: it decides the initial weights and the DistributedSampler's "
            "shuffle (LightningCLI's `seed_everything: true` picks a random seed)."
        )
    parts.append(
        "Configuration comes first in the causal order: whatever differs downstream (weights, "
        "samples, losses) may be its consequence, so fix it before reading anything after it."
    )
    others = [k for k in diffs if k not in threads and k != SEED_KEY]
    fixes = []
    if threads:
        fixes.append(
            "pin threads on every rank of both sides: export OMP_NUM_THREADS=N and call "
            "torch.set_num_threads(N) before building the model (the config's `threads:` key)"
        )
    if others:
        fixes.append("give both sides the same value of " + ", ".join(k.replace("config.", "", 1) for k in others))
    if SEED_KEY in diffs:
        fixes.append("pin seed_everything in the config (an integer, not `true`)")
    advice = "; ".join(fixes)
    advice = advice[0].upper() + advice[1:] + "."
    return _result(
        "config",
        None,
        rank,
        {**base, "differences": lines, "values": {k: list(v) for k, v in diffs.items()}},
        " ".join(parts),
        advice,
    )


# ---------------------------------------------------------------------------------------------
# initial weights


def _init_digests(meta: dict | None) -> dict:
    if not meta:
        return {}
    return {
        (f or {}).get("rank", r): (f or {}).get("init_params_sha256") for r, f in enumerate(meta.get("ranks") or [])
    }


def _init_finding(init_a: dict, init_b: dict) -> dict | None:
    across = [
        r
        for r in sorted(set(init_a) & set(init_b))
        if init_a[r] is not None and init_b[r] is not None and init_a[r] != init_b[r]
    ]
    within = {
        side: len({d for d in init.values() if d is not None}) > 1 for side, init in (("a", init_a), ("b", init_b))
    }
    if not across and not any(within.values()):
        return None
    rank0 = init_a.get(0) is not None and init_b.get(0) is not None and init_a[0] != init_b[0]
    rank = (
        across[0]
        if across
        else next(
            r
            for init in (init_a, init_b)
            if len(set(init.values())) > 1
            for r in sorted(init)
            if init[r] != init.get(0)
        )
    )
    return {"across": across, "within": within, "rank0_differs": rank0, "rank": rank}


def _init(finding: dict, init: tuple, seed_diff, sides: dict, base: dict, report: dict) -> dict:
    na, nb = sides["a"], sides["b"]
    evidence = {
        **base,
        "init_params_sha256": {na: init[0], nb: init[1]},
        "ranks_differing_across_sides": finding["across"],
        "ranks_differ_within": {sides[s]: v for s, v in finding["within"].items()},
    }
    parts = []
    if finding["across"]:
        parts.append(
            f"The initial weights differ between the sides (init_params_sha256 of rank(s) "
            f"{', '.join(map(str, finding['across']))}), before a single sample is consumed."
        )
    within = [sides[s] for s, v in finding["within"].items() if v]
    if within:
        parts.append(
            f"On {' and '.join(within)} the ranks built different weights; that alone is harmless, "
            "because constructing DistributedDataParallel broadcasts rank 0's parameters to every "
            "replica, so all replicas of a side still train identically from rank 0's weights."
        )
    if finding["rank0_differs"]:
        parts.append(
            "What makes the runs diverge is that rank 0's weights differ across the sides: after "
            "the broadcast each side trains from its own rank 0's start, so the first loss differs."
        )
    else:
        parts.append(
            f"Rank 0's weights match across the sides, so after the broadcast both start alike "
            f"(the comparison's verdict: {report.get('verdict')})."
        )
    parts.append(
        "The usual cause is the model being built under a different RNG state: another seed, "
        "seeding after instead of before building the network, or an extra random draw (a "
        "dropout, a data shuffle, a dataloader iterator) between seeding and construction."
    )
    if seed_diff is not None:
        parts.append(
            f"Here seed_everything differs ({_fmt(seed_diff[0])} vs {_fmt(seed_diff[1])}); "
            "LightningCLI's `seed_everything: true` picks a random seed."
        )
    advice = (
        "Seed identically and build the model right after seeding on both sides (seed_everything "
        "pinned to an integer in the config, the network constructed before anything else draws "
        "random numbers); or load the same initial state_dict on both sides."
    )
    return _result("init", None, finding["rank"], evidence, " ".join(parts), advice)


# ---------------------------------------------------------------------------------------------
# the streaming walk over both traces


class Walk:
    """Step through both runs' traces, all ranks in lock step, and stop at the first divergence
    in causal order: step structure, samples (any rank), loss, grad_norm, lr, param_digest."""

    def __init__(self, run_a, run_b, rtol: float = 0.0, atol: float = 0.0):
        self.runs = {"a": run_a, "b": run_b}
        self.rtol, self.atol = rtol, atol
        self.found: dict | None = None
        self.steps_compared = 0
        self.last_step: int | None = None
        self.unreadable: list[str] = []
        self.counts: dict[str, dict[int, int]] = {"a": {}, "b": {}}
        self.ranks: dict[str, list[int]] = {}
        self.repeats: dict | None = None  # for a samples divergence: does each side repeat its first epoch

    def run(self) -> Walk:
        for side, run in self.runs.items():
            try:
                self.ranks[side] = trace_ranks(run)
            except (TraceFormatError, OSError) as err:
                self.unreadable.append(str(err))
                self.ranks[side] = []
        ranks = sorted(set(self.ranks["a"]) | set(self.ranks["b"]))
        streams = {side: {r: self._records(side, r) for r in self.ranks[side]} for side in self.runs}
        if not ranks:
            return self
        while True:
            recs = {side: {r: next(streams[side][r], None) for r in streams[side]} for side in self.runs}
            present = [rec for side in recs for rec in recs[side].values() if rec is not None]
            if not present:
                break
            for side in recs:
                for r, rec in recs[side].items():
                    if rec is not None:
                        self.counts[side][r] = self.counts[side].get(r, 0) + 1
            missing = [(side, r) for side in self.runs for r in ranks if recs[side].get(r) is None]
            step_numbers = {rec["step"] for rec in present}
            if missing or len(step_numbers) > 1:
                self._finish_counts(streams, ranks)
                self.found = self._structure(recs, ranks, missing, step_numbers)
                break
            step = present[0]["step"]
            self.found = self._compare_step(step, recs, ranks)
            if self.found is not None:
                if self.found["quantity"] == "samples":
                    self.repeats = {
                        side: {r: self._repeats_first_epoch(side, r, recs[side][r].get("epoch")) for r in ranks}
                        for side in self.runs
                    }
                break
            self.steps_compared += 1
            self.last_step = step
        return self

    # -- reading --------------------------------------------------------------------------------

    def _records(self, side: str, rank: int) -> Iterator[dict]:
        try:
            yield from iter_records(self.runs[side], rank)
        except (TraceFormatError, OSError) as err:  # a line cut off by a kill: the trace ends there
            self.unreadable.append(str(err))

    def _finish_counts(self, streams: dict, ranks: list[int]) -> None:
        for side in self.runs:
            for r in ranks:
                self.counts[side][r] = self.counts[side].get(r, 0) + sum(1 for _ in streams[side].get(r, ()))

    # -- the checks, in causal order ---------------------------------------------------------

    def _structure(self, recs, ranks, missing, step_numbers) -> dict:
        lacking = [(s, r) for s, r in missing if r not in self.ranks[s]]
        if lacking:
            side, rank = lacking[0]
            return {
                "quantity": "ranks",
                "step": min(step_numbers) if step_numbers else None,
                "rank": rank,
                "side": side,
            }
        if missing:
            step = min(step_numbers)
            # the rank to name: the first whose count differs between the sides, else the one with
            # the most steps on the uneven side (it waits for the others at the next collective)
            rank = next((r for r in ranks if self.counts["a"].get(r, 0) != self.counts["b"].get(r, 0)), None)
            if rank is None:
                side = next(s for s in self.runs if len(set(self.counts[s].values())) > 1)
                rank = max(ranks, key=lambda r: (self.counts[side].get(r, 0), -r))
            return {"quantity": "count", "step": step, "rank": rank}
        numbers = {(s, r): rec["step"] for s in recs for r, rec in recs[s].items() if rec is not None}
        first = min(numbers.values())
        rank = (
            next(r for (s, r), n in sorted(numbers.items(), key=lambda kv: kv[0][1]) if n != first)
            if len({n for n in numbers.values()}) > 1
            else None
        )
        return {
            "quantity": "numbering",
            "step": first,
            "rank": rank,
            "step_numbers": {s: {r: n for (s2, r), n in numbers.items() if s2 == s} for s in self.runs},
        }

    def _compare_step(self, step: int, recs: dict, ranks: list[int]) -> dict | None:
        ra, rb = recs["a"], recs["b"]
        for r in ranks:
            ka, kb = _comparable_keys(ra[r], rb[r])
            if ka is not None and ka != kb:
                return {
                    "quantity": "samples",
                    "step": step,
                    "rank": r,
                    "epoch": ra[r].get("epoch"),
                    "epoch_b": rb[r].get("epoch"),
                    "a": _short(ka),
                    "b": _short(kb),
                }
        for name in ("loss", "grad_norm", "lr", "param_digest"):
            for r in ranks:
                a, b = ra[r].get(name), rb[r].get(name)
                if a is None or b is None:
                    continue
                if not self._equal(a, b):
                    return {"quantity": name, "step": step, "rank": r, "epoch": ra[r].get("epoch"), "a": a, "b": b}
        return None

    def _equal(self, a, b) -> bool:
        if a == b:  # the common case first
            return True
        if isinstance(a, list) or isinstance(b, list):
            if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
                return False
            return all(self._equal(x, y) for x, y in zip(a, b))
        try:
            a, b = float(a), float(b)
        except (TypeError, ValueError):
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if self.rtol == 0.0 and self.atol == 0.0:
            return a == b
        return abs(a - b) <= self.atol + self.rtol * abs(b)

    # -- set_epoch: does a side consume its first epoch's order again? ----------------------

    def _repeats_first_epoch(self, side: str, rank: int, epoch) -> bool:
        """Whether this rank consumed, in `epoch`, exactly the samples of its first epoch in the same
        order (so both the multiset and the order). A second streaming pass over this one trace, up
        to the end of `epoch`, keeping digests of two epochs only; done once, at a samples divergence."""
        first_epoch, first, this = None, [], []
        for rec in self._records(side, rank):
            e = rec.get("epoch")
            if first_epoch is None:
                first_epoch = e
            if e is None or epoch is None or epoch == first_epoch:
                return False
            if e == first_epoch:
                first.append(_key_digest(_sample_key(rec)))
            elif e == epoch:
                this.append(_key_digest(_sample_key(rec)))
            elif this:
                break  # past the divergent epoch
        if not this or not first:
            return False
        # a trace that ends inside the epoch (a killed run) is judged on what it holds
        return this == first or (len(this) < len(first) and this == first[: len(this)])


def _sample_key(record: dict):
    for key in ("indices", "indices_digest", "batch_digest"):
        if key in record:
            return key, record[key]
    return None


def _comparable_keys(rec_a: dict, rec_b: dict):
    """The two records' samples in a form that compares, or (None, None) when they cannot be
    compared (none recorded, or indices on one side and a batch fingerprint on the other)."""
    ka, kb = _sample_key(rec_a), _sample_key(rec_b)
    if ka is None or kb is None:
        return None, None
    if ka[0] == kb[0]:
        return ka[1], kb[1]
    kinds = {ka[0], kb[0]}
    if kinds == {"indices", "indices_digest"}:
        as_digest = lambda k: digest_indices(k[1]) if k[0] == "indices" else k[1]  # noqa: E731
        return as_digest(ka), as_digest(kb)
    return None, None


def _key_digest(key) -> str:
    if key is not None and key[0] == "indices":
        return digest_indices(key[1])
    return hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# the categories found by the walk


def _samples(walk: Walk, meta_a, meta_b, sides: dict, base: dict) -> dict:
    f = walk.found
    na, nb = sides["a"], sides["b"]
    step, rank, epoch = f["step"], f["rank"], f.get("epoch")
    evidence = {**base, "epoch": epoch, "indices": {na: f["a"], nb: f["b"]}, "steps_equal_before": walk.steps_compared}
    sampler_diffs = _sampler_differences(meta_a, meta_b, sides)
    if sampler_diffs:
        evidence["sampler_differences"] = sampler_diffs
    repeats = walk.repeats
    if repeats is not None:
        rep = {sides[s]: {r: v for r, v in repeats[s].items()} for s in repeats}
        evidence["repeats_first_epoch"] = rep
        ra, rb = repeats["a"].get(rank, False), repeats["b"].get(rank, False)
        if ra != rb:
            stuck = na if ra else nb
            other = nb if ra else na
            evidence["repeating_side"] = stuck
            explanation = (
                f"In epoch {epoch} {stuck} replays its first epoch: from step {step} rank {rank} consumes "
                f"exactly the indices, in exactly the order, that it consumed in its first epoch, while {other} "
                f"draws a new permutation (the sides matched for {walk.steps_compared} step(s) before). A "
                "DistributedSampler shuffles with seed + epoch, and its epoch only changes when "
                "set_epoch(epoch) is called; without that call every epoch replays the first epoch's order. "
                "Lightning calls set_epoch on the sampler it injects; a hand-written loop must do it itself."
            )
            advice = (
                f"On {stuck}: call sampler.set_epoch(epoch) at the start of every epoch, before "
                "iterating the DataLoader (also after resuming from a checkpoint)."
            )
            return _result("set_epoch", step, rank, evidence, explanation, advice)
    explanation = (
        f"The first difference is in the data: at step {step} (epoch {epoch}) rank {rank} consumed other "
        f"samples on {na} than on {nb} ({_fmt(f['a'])} vs {_fmt(f['b'])}), after {walk.steps_compared} "
        "step(s) that matched. Since the inputs differ, every later loss and gradient differs as a "
        "consequence, not as a cause. Typical reasons: a different sampler (class, shuffle, drop_last, "
        "num_replicas/rank sharding), a different batch size or accumulation split, the DataLoader "
        "created or iterated differently (an extra iterator drawing from the RNG, workers with "
        "unseeded generators), or a resumed run that does not skip to the batch where it stopped."
    )
    if sampler_diffs:
        explanation += f" The recorded samplers differ: {'; '.join(sampler_diffs)}."
    advice = (
        "Make both sides build the same DistributedSampler(dataset, num_replicas=world_size, rank=rank, "
        "shuffle=..., seed=seed, drop_last=...) with the same batch size, and iterate it the same way; "
        "compare the samplers in meta.json ranks[*].sampler."
    )
    return _result("data_order", step, rank, evidence, explanation, advice)


def _sampler_seeds(meta: dict | None) -> dict:
    if not meta:
        return {}
    return {
        (f or {}).get("rank", r): ((f or {}).get("sampler") or {}).get("seed")
        for r, f in enumerate(meta.get("ranks") or [])
        if ((f or {}).get("sampler") or {}).get("seed") is not None
    }


def _seeds_differ(a: dict, b: dict) -> bool:
    return any(a[r] != b[r] for r in set(a) & set(b))


def _sampler_differences(meta_a, meta_b, sides: dict) -> list[str]:
    out = []
    for r, (fa, fb) in enumerate(zip((meta_a or {}).get("ranks") or [], (meta_b or {}).get("ranks") or [])):
        sa, sb = (fa or {}).get("sampler") or {}, (fb or {}).get("sampler") or {}
        for key in sorted(set(sa) & set(sb)):
            if key != "seed" and sa[key] != sb[key]:
                out.append(f"ranks[{r}].sampler.{key}: {_fmt(sa[key])} vs {_fmt(sb[key])}")
    return out


def _sampler_seed(walk: Walk, seeds: tuple, seed_diff, init_finding, sides: dict, base: dict) -> dict:
    na, nb = sides["a"], sides["b"]
    f = walk.found if walk.found and walk.found["quantity"] == "samples" else None
    evidence = {**base, "sampler_seed": {na: seeds[0], nb: seeds[1]}}
    if seed_diff is not None:
        evidence["seed_everything"] = {na: seed_diff[0], nb: seed_diff[1]}
    if f:
        evidence["indices"] = {na: f["a"], nb: f["b"]}
    rank = (
        f["rank"] if f else next((r for r in sorted(set(seeds[0]) & set(seeds[1])) if seeds[0][r] != seeds[1][r]), None)
    )
    parts = []
    if _seeds_differ(*seeds):
        r0 = rank if rank in seeds[0] and rank in seeds[1] else next(iter(sorted(set(seeds[0]) & set(seeds[1]))))
        parts.append(
            f"The DistributedSamplers are seeded differently ({na}: seed {seeds[0][r0]}, {nb}: seed "
            f"{seeds[1][r0]}), so they shuffle the dataset into different permutations"
        )
    else:
        parts.append("The global seed differs, and with it the sampler's shuffle")
    parts[-1] += f": the samples differ from step {f['step']} on (rank {f['rank']})." if f else "."
    if seed_diff is not None:
        parts.append(f"seed_everything resolves to {_fmt(seed_diff[0])} on {na} and {_fmt(seed_diff[1])} on {nb}.")
    parts.append(
        "Lightning seeds the DistributedSampler it injects from the global seed (PL_GLOBAL_SEED), and "
        "LightningCLI's `seed_everything: true` (its default) picks a random seed on every run; a "
        "hand-written loop must pass the same seed to DistributedSampler(seed=...)."
    )
    if init_finding is not None:
        parts.append(
            "The same seed also decides the initial weights, which differ as well "
            "(init_params_sha256): one cause, two symptoms."
        )
    advice = (
        "Pin seed_everything to an integer in the config (not `true`), and seed the raw loop's "
        "DistributedSampler with that same value: DistributedSampler(..., seed=seed_everything)."
    )
    return _result("sampler_seed", f["step"] if f else None, rank, evidence, " ".join(parts), advice)


def _numerics(walk: Walk, sides: dict, base: dict) -> dict:
    f = walk.found
    na, nb = sides["a"], sides["b"]
    evidence = {
        **base,
        "loss": {na: f["a"], nb: f["b"]},
        "abs_diff": _absdiff(f["a"], f["b"]),
        "steps_equal_before": walk.steps_compared,
    }
    first = walk.steps_compared == 0
    explanation = (
        f"Both sides fed rank {f['rank']} the same samples at step {f['step']}, yet its loss differs "
        f"({f['a']!r} on {na} vs {f['b']!r} on {nb}, {_absdiff(f['a'], f['b']):.3g} apart)"
        + (
            ", at the very first step: the forward pass itself computes differently. "
            if first
            else f", after {walk.steps_compared} step(s) that matched in samples, loss, gradient norm, learning "
            "rate and parameters. "
        )
        + "With identical inputs and weights the forward pass differs only through how it is computed: the "
        "number of intra-op threads (the reduction order of CPU kernels), the precision or autocast "
        "setting, non-deterministic or differently selected kernels (cuDNN benchmark, TF32), dropout "
        "drawing from a different RNG state, or the loss reduced differently (mean vs sum, label handling)."
    )
    advice = (
        "Pin threads (OMP_NUM_THREADS and torch.set_num_threads on every rank), use the same precision "
        "on both sides, set torch.use_deterministic_algorithms(True) / deterministic=True with "
        "cudnn.benchmark off and TF32 off, and compute the loss with the same reduction."
    )
    return _result("numerics", f["step"], f["rank"], evidence, explanation, advice)


def _gradients(walk: Walk, sides: dict, base: dict) -> dict:
    f = walk.found
    na, nb = sides["a"], sides["b"]
    ratio = _ratio(f["a"], f["b"])
    evidence = {
        **base,
        "grad_norm": {na: f["a"], nb: f["b"]},
        "ratio": ratio,
        "steps_equal_before": walk.steps_compared,
    }
    hint = ""
    if ratio is not None:
        near = min((1, 2, 3, 4, 8, 1 / 2, 1 / 3, 1 / 4, 1 / 8), key=lambda k: abs(ratio / k - 1))
        if abs(ratio / near - 1) < 0.02 and near != 1:
            hint = (
                f" The norms differ by a factor of about {near:g}, the signature of a loss scaled by "
                "the number of accumulated micro-batches or of gradients averaged over the world size "
                "once too often or not at all."
            )
    explanation = (
        f"At step {f['step']} rank {f['rank']} consumed the same samples and computed the same loss on "
        f"both sides, but the gradient norm differs ({f['a']!r} on {na} vs {f['b']!r} on {nb}): the "
        "backward pass or the gradient all-reduce treats the loss differently."
        + hint
        + " Usual causes: with gradient accumulation the loss must be divided by accumulate_grad_batches "
        "before backward (Lightning does); DDP's no_sync() must skip the all-reduce on every micro-batch "
        "but the last one (syncing early, or never, changes the averaged gradient); DDP already averages "
        "gradients over ranks, so dividing again by world_size (or summing) breaks parity; gradient "
        "clipping measured before vs after unscaling."
    )
    advice = (
        "Divide the loss by accumulate_grad_batches before backward, wrap all but the last micro-batch "
        "of each step in model.no_sync(), and let DDP do the averaging (no extra division by world size)."
    )
    return _result("gradients", f["step"], f["rank"], evidence, explanation, advice)


def _optimizer(walk: Walk, sides: dict, base: dict) -> dict:
    f = walk.found
    na, nb = sides["a"], sides["b"]
    evidence = {**base, f["quantity"]: {na: f["a"], nb: f["b"]}, "steps_equal_before": walk.steps_compared}
    if f["quantity"] == "lr":
        explanation = (
            f"At step {f['step']} the samples, loss and gradient norm match, but the learning rate differs "
            f"({f['a']!r} on {na} vs {f['b']!r} on {nb}): the learning-rate schedule is stepped differently. "
            "Typical: scheduler.step() per optimizer step on one side and per epoch on the other (Lightning's "
            "`interval`), a step counted per micro-batch instead of per optimizer step under accumulation, "
            "a warm-up or a different step_size/gamma, or the schedule stepped before instead of after the "
            "optimizer."
        )
        advice = (
            "Step the scheduler exactly where Lightning does: after optimizer.step(), once per epoch for "
            "interval 'epoch' or once per optimizer step (not per micro-batch) for interval 'step', with "
            "the same schedule parameters."
        )
    else:
        explanation = (
            f"At step {f['step']} rank {f['rank']} consumed the same samples with the same loss, gradient norm "
            f"and learning rate, yet the parameters after the step differ (param_digest {_fmt(f['a'])} on "
            f"{na} vs {_fmt(f['b'])} on {nb}): the update itself differs. Typical: another optimizer or its "
            "hyper-parameters (betas, eps, weight decay, momentum, AdamW vs Adam), gradient clipping "
            "applied on one side only or by another norm, zero_grad missing (gradients accumulating "
            "across steps) or set_to_none differences, or a fused/foreach implementation that rounds "
            "differently."
        )
        advice = (
            "Build the same optimizer with the same hyper-parameters and implementation on both sides, "
            "clip the same way (clip_grad_norm_ with gradient_clip_val after unscaling, before step), and "
            "zero the gradients once per optimizer step."
        )
    return _result("optimizer", f["step"], f["rank"], evidence, explanation, advice)


def _step_count(walk: Walk, meta_a, meta_b, sides: dict, base: dict) -> dict:
    f = walk.found
    na, nb = sides["a"], sides["b"]
    counts = {na: dict(sorted(walk.counts["a"].items())), nb: dict(sorted(walk.counts["b"].items()))}
    evidence = {**base, "steps": counts, "steps_equal_before": walk.steps_compared}
    if walk.unreadable:
        evidence["unreadable_traces"] = walk.unreadable
    sampler_diffs = _sampler_differences(meta_a, meta_b, sides)
    if sampler_diffs:
        evidence["sampler_differences"] = sampler_diffs
    desc = "; ".join(f"{side}: " + ", ".join(f"rank {r} {n}" for r, n in c.items()) for side, c in counts.items())
    if f["quantity"] == "ranks":
        what = (
            f"{sides[f['side']]} has no trace for rank {f['rank']}: the runs did not use the same ranks "
            f"(steps per rank: {desc})."
        )
    elif f["quantity"] == "numbering":
        evidence["step_numbers"] = {sides[s]: v for s, v in f["step_numbers"].items()}
        what = (
            f"After {walk.steps_compared} matching step(s) the step numbers part ways at step {f['step']} "
            f"({'; '.join(f'{sides[s]}: ' + str(v) for s, v in f['step_numbers'].items())}): the sides "
            "count optimizer steps differently (per micro-batch vs per optimizer step, or a step skipped)."
        )
    else:
        uneven = [side for side, c in counts.items() if len(set(c.values())) > 1]
        what = f"The runs recorded different numbers of steps ({desc}); step {f['step']} is missing on some rank."
        if uneven:
            what += (
                f" On {' and '.join(uneven)} the ranks themselves disagree, which in DDP means a rank ran "
                "more batches than its peers: its extra step's gradient all-reduce has no partner."
            )
    explanation = (
        what + " Everything matched until then, so the difference is in how many batches each rank "
        "gets per epoch or how many epochs/steps run: DistributedSampler pads the dataset so every "
        "rank gets ceil(N / world_size) samples (or drops the tail with drop_last=True), and the "
        "DataLoader's drop_last then decides whether a short last batch is a step; a hand-built "
        "shard, a different drop_last, max_steps/max_epochs, or accumulation leftovers at an epoch's "
        "end change the count. A run that was killed also ends early."
    )
    advice = (
        "Shard with DistributedSampler on both sides (same drop_last for sampler and DataLoader, same "
        "batch size) so every rank gets the same number of batches, and stop on the same max_epochs / "
        "max_steps; with accumulation, treat the epoch's leftover micro-batches the same way."
    )
    empty = [sides[s] for s in ("a", "b") if not any(walk.counts[s].values())]
    if empty:
        explanation = (
            f"{' and '.join(empty)} recorded no step at all (steps per rank: {desc}): that run failed "
            "or was stopped before its first optimizer step finished (or never wrote its trace), so "
            "there is nothing to compare yet."
        )
        advice = (
            f"Look at {' and '.join(empty)}'s log for the error (a rank that failed at start-up, a wrong "
            "run directory, a timeout), fix it and run the comparison again."
        )
    return _result("step_count", f["step"], f["rank"], evidence, explanation, advice)


def _after_clean_walk(walk: Walk, report: dict, sides: dict, base: dict) -> dict:
    """Every step matched: the report decides between equivalent and what the traces do not show."""
    evidence = {**base, "steps_compared": walk.steps_compared}
    verdict = report.get("verdict")
    if verdict == "equivalent" or (not report and walk.steps_compared > 0):
        return _result(
            "equivalent",
            None,
            None,
            evidence,
            f"No divergence: configuration, initial weights and all {walk.steps_compared} steps "
            "(samples, loss, gradient norm, learning rate, parameter digest) match on every rank"
            + (", and so do validation and the final parameters." if report else "."),
            "Nothing to fix.",
        )
    validation = report.get("validation") or {}
    params = report.get("params") or {}
    problems = report.get("problems") or []
    if params.get("first_divergence") or (params.get("compared") and params.get("equal") != params.get("compared")):
        evidence["params"] = {k: params.get(k) for k in ("first_divergence", "max_abs", "compared", "equal")}
        return _result(
            "optimizer",
            walk.last_step,
            None,
            evidence,
            f"All {walk.steps_compared} recorded steps match, including the per-step parameter digest "
            "(sums of the first and the last parameter tensors), but the final parameters differ "
            f"({_fmt(params.get('first_divergence'))}): an update touched tensors the digest does not "
            "cover (a middle layer, a buffer such as BatchNorm's running statistics), or the last "
            "update after the final record differs.",
            "Compare the optimizer, clipping and any extra step at the end of training; check "
            "buffers (running statistics) are updated the same way on both sides.",
        )
    if validation.get("first_divergence"):
        evidence["validation"] = validation["first_divergence"]
        v = validation["first_divergence"]
        return _result(
            "numerics",
            v.get("step"),
            None,
            evidence,
            f"Training matches step for step, but validation differs ({v.get('metric')} at step "
            f"{v.get('step')}: {v.get('a')!r} vs {v.get('b')!r}): the metric is computed or reduced "
            "across ranks differently. A DistributedSampler pads the validation set with repeated "
            "samples when it does not divide by the world size; averaging per-rank means instead of "
            "summing counts weights ranks unequally.",
            "Reduce validation metrics as sums and counts across ranks (all_reduce of both), and count "
            "each sample once (no padding duplicates), the way Lightning's sync_dist/torchmetrics do.",
        )
    if problems:
        evidence["problems"] = problems
        return _result(
            "step_count",
            walk.last_step,
            None,
            evidence,
            f"The recorded steps match, but the comparison reports structural problems: "
            f"{'; '.join(problems[:3])}. Most often one run did not finish (no final parameters, "
            "a validation missing) or the sides validate at different points.",
            "Rerun the side that did not finish (see its log); make both validate at the same "
            "epochs (check_val_every_n_epoch, val_check_interval).",
        )
    if walk.unreadable or walk.steps_compared == 0:
        evidence["unreadable_traces"] = walk.unreadable
        return _result(
            "step_count",
            None,
            None,
            evidence,
            "No step could be compared: a trace is missing or unreadable "
            f"({'; '.join(walk.unreadable[:2]) or 'no records'}).",
            "Check that both runs started and wrote trace/rank*.jsonl (see their logs).",
        )
    return _result(
        "equivalent",
        None,
        None,
        evidence,
        f"No divergence found in configuration, initial weights or the {walk.steps_compared} steps; "
        f"the report's verdict is {verdict!r}.",
        "Nothing to fix in the traces.",
    )


# ---------------------------------------------------------------------------------------------
# a stall


def _stall(stall: dict, run_a, run_b, meta_a, meta_b, sides: dict, base: dict, config_diffs: dict, seed_diff) -> dict:
    side = stall.get("side")
    run, meta = (run_a, meta_a) if side in (None, sides["a"], "a") else (run_b, meta_b)
    raw_ranks = stall.get("ranks") or {}
    if isinstance(raw_ranks, (list, tuple)):
        raw_ranks = dict(enumerate(raw_ranks))
    last = {int(r): (int(s) if s is not None else 0) for r, s in raw_ranks.items()}
    world = (meta or {}).get("world_size") or (max(last) + 1 if last else 0)
    for r in range(world):
        last.setdefault(r, 0)  # no heartbeat: the rank never finished a step
    evidence = {**base, "side": side, "last_step": dict(sorted(last.items())), "seconds": stall.get("seconds")}
    if config_diffs or seed_diff is not None:
        evidence["config_differences"] = [
            f"{k}: {_fmt(a)} vs {_fmt(b)}"
            for k, (a, b) in {**config_diffs, **({SEED_KEY: seed_diff} if seed_diff else {})}.items()
        ]
    try:
        # records are flushed in blocks, so a hung run's traces may lag its heartbeats
        evidence["trace_records_written"] = {r: sum(1 for _ in iter_records(run, r)) for r in trace_ranks(run)}
    except (TraceFormatError, OSError):
        pass
    sampler = [((f or {}).get("sampler") or {}) for f in (meta or {}).get("ranks") or []]
    if sampler:
        evidence["sampler"] = sampler[0]
    seconds = stall.get("seconds")
    took = f" for {seconds:.0f} s" if isinstance(seconds, (int, float)) else ""
    if not last:
        return _result(
            "stall",
            None,
            None,
            evidence,
            f"{side or 'a run'} stopped making progress{took} before any rank reported a step.",
            "Check the log for a rank stuck in init_process_group (address, port, world size).",
        )
    top = max(last.values())
    waiting = sorted(r for r, s in last.items() if s == top)
    behind = sorted(r for r, s in last.items() if s < top)
    if behind:
        where = ", ".join(f"rank {r} after step {last[r]}" for r in behind)
        who = f"rank {waiting[0]}" if len(waiting) == 1 else "ranks " + ", ".join(map(str, waiting))
        explanation = (
            f"{side or 'A run'} hung{took}: {who} finished step {top} and "
            f"{'waits' if len(waiting) == 1 else 'wait'} at the next collective (the gradient all-reduce of "
            f"step {top + 1}, or the next barrier) for peers that stopped earlier ({where}) and never join it. "
            "The classic cause is uneven shards: one rank gets more "
            "batches than the others (a hand-made split, drop_last differing between sampler and DataLoader, "
            "an odd dataset size without DistributedSampler's padding), so at the end of an epoch it enters an "
            "all-reduce its peers, already done with the epoch, never reach; a rank that died or skipped a "
            "step (an early `continue`, a NaN guard on one rank) hangs the others the same way."
        )
    elif len(set(per_rank_batches(meta).values())) > 1:
        batches = per_rank_batches(meta)
        most = max(batches.values())
        long_ranks = sorted(r for r, n in batches.items() if n == most)
        counts = ", ".join(f"rank {r}: {n}" for r, n in sorted(batches.items()))
        evidence["batches_per_epoch"] = batches
        explanation = (
            f"{side or 'A run'} hung{took} with every rank at step {top}: the ranks have different numbers of "
            f"batches per epoch ({counts}). Rank {long_ranks[0]} trains one more batch and waits in the gradient "
            f"all-reduce of step {top + 1}, which its peers, already past the end of the epoch and waiting in "
            "the next collective, never join: uneven shards, the classic DDP hang."
        )
        return _result(
            "stall",
            top + 1,
            long_ranks[0],
            evidence,
            explanation,
            "Give every rank the same number of batches: shard with DistributedSampler (it pads to "
            "ceil(N / world_size)) or drop the tail on every rank; for truly uneven inputs use DDP's "
            "Join context.",
        )
    else:
        explanation = (
            f"{side or 'A run'} hung{took} with every rank at step {top}: all of them wait in a collective "
            "after that step that not all joined, or joined in another order: a barrier, a validation "
            "all_gather/all_reduce or checkpoint save that only some ranks run (`if rank == 0:` around a "
            "collective), or a next epoch where one rank has no batch. Uneven shards are the classic cause."
        )
    advice = (
        "Give every rank the same number of batches: shard with DistributedSampler (it pads to "
        "ceil(N / world_size)) and use the same drop_last for sampler and DataLoader; never put a "
        "collective under a rank-dependent condition; for truly uneven inputs use DDP's Join context."
    )
    return _result("stall", top + 1 if behind else top, waiting[0], evidence, explanation, advice)


# ---------------------------------------------------------------------------------------------
# helpers


def per_rank_batches(meta: dict | None) -> dict[int, int]:
    """Batches per epoch of each rank, from the sampler facts in meta.json and the batch size."""
    meta = meta or {}
    data = (meta.get("config") or {}).get("data") or {}
    batch, drop_last = data.get("batch_size"), bool(data.get("drop_last"))
    found = {}
    for facts in meta.get("ranks") or []:
        samples = ((facts or {}).get("sampler") or {}).get("num_samples")
        if isinstance(batch, int) and batch > 0 and isinstance(samples, int):
            found[int(facts.get("rank", len(found)))] = samples // batch if drop_last else -(-samples // batch)
    return found


def _meta(run) -> tuple[dict | None, str | None]:
    try:
        return read_meta(run), None
    except (TraceFormatError, OSError) as err:
        return None, str(err)


def _side_name(meta: dict | None, run, fallback: str) -> str:
    name = (meta or {}).get("side") or (Path(str(run)).name if run else fallback) or fallback
    return str(name)


def _tolerance(criterion) -> tuple[float, float]:
    if isinstance(criterion, dict):
        return float(criterion.get("rtol") or 0.0), float(criterion.get("atol") or 0.0)
    return 0.0, 0.0


def _result(category: str, step, rank, evidence: dict, explanation: str, advice: str) -> dict:
    assert category in CATEGORIES, category
    return {
        "category": category,
        "step": step,
        "rank": rank,
        "evidence": _jsonable(evidence),
        "explanation": explanation,
        "advice": advice,
    }


def _jsonable(value: Any):
    """Evidence that json.dumps takes as is (tuples as lists; keys as they are)."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _short(value, limit: int = 12):
    if isinstance(value, list) and len(value) > limit:
        return value[:limit] + ["..."]
    return value


def _fmt(value, limit: int = 80) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _absdiff(a, b) -> float:
    try:
        return abs(float(a) - float(b))
    except (TypeError, ValueError):
        return math.nan


def _ratio(a, b) -> float | None:
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    return a / b if b else None


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]
