"""Why two runs differ: the first point where they part ways, in causal order, and its one cause.

    crash -> stall -> metadata -> configuration -> optimizer param groups -> initial weights
    -> resume -> step structure -> samples -> batch contents -> loss -> gradient -> learning rate
    -> parameters after the step -> buffers -> final parameters -> validation -> equivalent

`CHECKS` is that order: each check is a small function over the comparison (the one walk over the
traces, ddp_parity.compare.walk, plus meta.json, validation and the final parameters) that returns a
finding or None; the first finding is the diagnosis, a `findings.Finding` (category, kind, step,
rank, evidence, explanation, advice, module).

The why and the fix of each kind of finding live in one table (advice.py). `find_warnings` lists
what is suspicious even in an equivalent pair (a run that learned nothing, NaN/Inf).
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ddp_parity.compare import evidence as recorded_evidence
from ddp_parity.compare.advice import ADVICE, CANDIDATES, MISSING_EVIDENCE, MODULE_STATE, RECORDING_FIX, RESUME
from ddp_parity.compare.comparator import compare_runs, match_keys, missing_meta, run_labels
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.modules import display, format_module_finding, localise
from ddp_parity.compare.story import COMPUTATION_READINGS, UPSTREAM_CATEGORIES, check_story
from ddp_parity.compare.walk import Criterion, comparable_samples, identical, records_of, short

# every category a diagnosis may name: the causes found before any step's numbers (story.py's list),
# then those read from the numbers and the module watch
CATEGORIES = (
    *UPSTREAM_CATEGORIES,
    "data_pipeline",
    "rng",
    "module_state",
    "numerics",
    "loss",
    "reduction_order",
    "gradients",
    "optimizer",
    "undetermined",
    "noise",
)
# the explanations of a difference that say "rounding" (a category, or a setup kind that changes only
# how sums round): under --tolerance noise the measured noise decides whether they hold
ROUNDING_FINDINGS = ("numerics", "reduction_order", "undetermined", "config.threads", "config.arithmetic")

# resolved-config keys (dotted) that cannot change the numbers a run computes; a key matches an
# entry or lies below one. LightningCLI's extra keys exist on one side only and are skipped anyway:
# only keys both sides have are compared. `ignore_config` adds to these.
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
META_KEYS = ("world_size", "backend", "device")  # meta.json facts outside `config` that change numerics
VERSION_KEYS = ("torch",)
RANK_FACT_KEYS = ("threads", "omp_num_threads")
# environment that changes what a rank computes; the launcher's own variables (TORCHELASTIC_*,
# MASTER_ADDR, SLURM_*, GROUP_RANK ...) differ between launchers without changing a bit
NUMERIC_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
# the world as a rank saw it: its rank and the world size decide its shard; local_rank and node_rank
# only say where it ran (they differ between a one-node and a simulated multi-node launch)
WORLD_KEYS = ("rank", "world_size")
SEED_KEY = "seed_everything"
FEW_ULPS = 16  # "a few ulps": a reduction order, not a different computation
BUFFER_HINTS = ("running_mean", "running_var", "num_batches_tracked")


# ---------------------------------------------------------------------------------------------
# what every check reads


@dataclass
class Context:
    cmp: object  # comparator.Comparison
    names: tuple
    ignore_config: tuple = ()
    stall: dict | None = None
    cache: dict = field(default_factory=dict)
    rounding_is_noise: bool = False  # --tolerance noise: setup facts that change only rounding are no cause

    @property
    def walk(self):
        return self.cmp.walk

    def meta(self, side: str) -> dict:
        return self.cmp.metas.get(side) or {}

    def run(self, side: str) -> str:
        return self.cmp.run_a if side == "a" else self.cmp.run_b

    def label(self, side: str) -> str:
        return self.names[0] if side == "a" else self.names[1]

    @property
    def earliest(self) -> dict | None:
        return self.walk.earliest if self.walk else None

    def base(self, **extra) -> dict:
        evidence = {"sides": {"a": self.names[0], "b": self.names[1]}}
        if self.walk is not None:
            evidence["steps_equal_before"] = self.walk.steps_equal_before
        return {**evidence, **extra}

    def both(self, a, b) -> dict:
        return {self.names[0]: a, self.names[1]: b}

    def have(self) -> dict[str, set[str]]:
        """{side label: the evidence kinds that run recorded} (the watch kinds about the first divergence)."""
        if "have" not in self.cache:
            step = self.earliest.get("step") if self.earliest else None
            self.cache["have"] = {self.label(s): recorded_evidence.recorded(self.run(s), step) for s in ("a", "b")}
        return self.cache["have"]

    def both_have(self, kind: str) -> bool:
        return all(kind in found for found in self.have().values())

    def unchecked(self) -> list[dict]:
        return unchecked_at(self.earliest, self.have())

    def config_diffs(self) -> tuple[dict, tuple | None]:
        if "config" not in self.cache:
            diffs, seed = config_differences(self.meta("a"), self.meta("b"), self.ignore_config)
            if self.rounding_is_noise:
                diffs = {key: pair for key, pair in diffs.items() if not changes_only_rounding(key)}
            self.cache["config"] = diffs, seed
        return self.cache["config"]


def unchecked_at(first: dict | None, have: dict[str, set[str]]) -> list[dict]:
    """What the divergence `first` (its quantity and step) needs that a side did not record (`have`:
    {side label: the evidence kinds it recorded}): each with the sides lacking it, what could not be
    checked, and the change to the record call that records it."""
    if first is None:
        return []
    needed = recorded_evidence.needed(first["quantity"], first.get("step"))
    out = []
    for kind, sides in recorded_evidence.missing(have, needed).items():
        what, change = (text.format(step=first.get("step")) for text in MISSING_EVIDENCE[kind])
        out.append({"evidence": kind, "sides": sides, "not_checked": what, "record": change})
    return out


def finding(ctx: Context, kind: str, step, rank, evidence: dict, facts: str, **values) -> Finding:
    advice = ADVICE[kind]
    category = kind.split(".")[0]
    assert category in CATEGORIES, category
    return Finding(
        category,
        kind,
        step,
        rank,
        explanation=" ".join(part for part in (facts, advice.why.format(**values)) if part),
        advice=advice.fix.format(**values),
        evidence=ctx.base(**evidence),
    )


# ---------------------------------------------------------------------------------------------
# the checks, in causal order


def check_crash(ctx: Context) -> Finding | None:
    """A run that stopped with an error: which side, rank and step, and the message, before anything."""
    if ctx.stall:
        return None  # the harness stopped a hung run: errors its ranks left on the way out are follow-ons
    crashed = []
    for side in ("a", "b"):
        if ctx.meta(side).get("finished") is True:
            continue  # errors of an earlier attempt that the run recovered from: see `resume`
        errors = read_errors(ctx.run(side))
        if errors:
            crashed.append((errors[0].get("time") or 0, side, errors))
    if not crashed:
        return None
    _, side, errors = min(crashed, key=lambda c: c[0])
    first = errors[0]
    evidence = {
        "side": ctx.label(side),
        "errors": [{k: e.get(k) for k in ("rank", "type", "message", "step", "phase")} for e in errors],
        "traceback": (first.get("traceback") or "").strip().splitlines()[-6:],
    }
    step, rank = first.get("step"), first.get("rank")
    when = [f"after step {step}" if step is not None else "", f"during {first['phase']}" if first.get("phase") else ""]
    when = ", ".join(w for w in when if w)
    facts = f"{ctx.label(side)} crashed: rank {rank} raised {first.get('type')}: {first.get('message')}"
    facts += f" ({when})." if when else "."
    if len(errors) > 1:
        facts += f" {len(errors) - 1} other rank(s) failed after it."
    return finding(
        ctx,
        "crash",
        step,
        rank,
        evidence,
        facts,
        side=ctx.label(side),
        error_rank=rank,
        type=first.get("type"),
        message=first.get("message"),
        path=first.get("path"),
    )


def check_stall(ctx: Context) -> Finding | None:
    if not ctx.stall:
        return None
    stall = ctx.stall
    side = "b" if stall.get("side") in (ctx.names[1], "b", "lightning") and stall.get("side") != ctx.names[0] else "a"
    raw_ranks = stall.get("ranks") or {}
    if isinstance(raw_ranks, (list, tuple)):
        raw_ranks = dict(enumerate(raw_ranks))
    last = {int(r): (int(s) if s is not None else 0) for r, s in raw_ranks.items()}
    for r in range(ctx.meta(side).get("world_size") or (max(last) + 1 if last else 0)):
        last.setdefault(r, 0)  # no heartbeat: the rank never finished a step
    evidence = {"side": stall.get("side"), "last_step": dict(sorted(last.items())), "seconds": stall.get("seconds")}
    seconds = stall.get("seconds")
    took = f" for {seconds:.0f} s" if isinstance(seconds, (int, float)) else ""
    who_side = stall.get("side") or "a run"
    if not last:
        return finding(ctx, "stall", None, None, evidence, f"{who_side} stopped making progress{took} before any step.")
    top = max(last.values())
    waiting = sorted(r for r, s in last.items() if s == top)
    behind = sorted(r for r, s in last.items() if s < top)
    batches = per_rank_batches(ctx.meta(side))
    if behind:
        where = ", ".join(f"rank {r} after step {last[r]}" for r in behind)
        who = f"rank {waiting[0]}" if len(waiting) == 1 else "ranks " + ", ".join(map(str, waiting))
        facts = (
            f"{who_side} hung{took}: {who} finished step {top} and waits at the next collective (the gradient "
            f"all-reduce of step {top + 1}, or the next barrier) for peers that stopped earlier ({where}) and "
            "never join it: uneven shards, or a rank that died or skipped a step."
        )
        return finding(ctx, "stall", top + 1, waiting[0], evidence, facts)
    if len(set(batches.values())) > 1:
        most = max(batches.values())
        long_rank = min(r for r, n in batches.items() if n == most)
        evidence["batches_per_epoch"] = batches
        counts = ", ".join(f"rank {r}: {n}" for r, n in sorted(batches.items()))
        facts = (
            f"{who_side} hung{took} with every rank at step {top}: the ranks have different numbers of batches "
            f"per epoch ({counts}); rank {long_rank} trains one more batch and waits in the all-reduce of "
            f"step {top + 1}, which its peers never join."
        )
        return finding(ctx, "stall", top + 1, long_rank, evidence, facts)
    facts = (
        f"{who_side} hung{took} with every rank at step {top}: all of them wait in a collective after that "
        "step that not all joined (a barrier, a validation all_reduce or a checkpoint save run by some ranks only)."
    )
    return finding(ctx, "stall", top, waiting[0], evidence, facts)


def check_metadata(ctx: Context) -> Finding | None:
    lacking = {ctx.label(s): missing for s in ("a", "b") if (missing := _missing(ctx.cmp.metas.get(s)))}
    if not lacking:
        return None
    facts = "; ".join(f"meta.json of {name} lacks {', '.join(keys)}" for name, keys in lacking.items()) + "."
    return finding(ctx, "metadata", None, None, {"missing": lacking}, facts)


def _missing(meta) -> list[str]:
    return missing_meta(meta) if meta is not None else []


def check_config(ctx: Context) -> Finding | None:
    diffs, seed = ctx.config_diffs()
    if not diffs:
        return None
    if seed is not None:
        diffs = {**diffs, SEED_KEY: seed}
    lines = [f"{key}: {_fmt(a)} vs {_fmt(b)}" for key, (a, b) in diffs.items()]
    rank = next((int(k[6 : k.index("]")]) for k in diffs if k.startswith("ranks[") and k[6] != "*"), None)
    threads = [
        k for k in diffs if k.endswith(("].threads", "].omp_num_threads", "num_threads")) or k == "config.threads"
    ]
    arithmetic = [k for k in diffs if ".arithmetic." in k]
    flags = [k for k in diffs if ".torch_flags." in k and k not in threads]
    state = [k for k in diffs if not k.startswith("config.")]
    found = (("config.threads", threads), ("config.arithmetic", arithmetic), ("config.torch_flags", flags))
    kind = next((kind for kind, keys in found if keys), "config.state" if state else "config")
    facts = f"The runs are not configured alike ({ctx.names[0]} vs {ctx.names[1]}): {'; '.join(lines)}."
    keys = ", ".join(k.replace("config.", "", 1).replace("ranks[*].", "", 1) for k in (flags or state or diffs))
    if kind == "config.arithmetic":
        sentence, keys = arithmetic_sentence(ctx, {k: diffs[k] for k in arithmetic})
        facts = f"{sentence} {facts}"
    evidence = {"differences": lines, "values": {k: list(v) for k, v in diffs.items()}}
    return finding(ctx, kind, None, rank, evidence, facts, keys=keys)


ARITHMETIC_NAMES = {"cpu": "CPU", "gpu": "GPU", "aten_cpu_capability": "ATen capability", "blas": "BLAS"}


def arithmetic_sentence(ctx: Context, diffs: dict) -> tuple[str, str]:
    """(`raw ran with ATen capability DEFAULT, lightning with AVX512.`, the settings named) from the
    differing arithmetic facts, the named hardware and kernel set before the variables that chose them."""
    by_name = {key.rsplit(".", 1)[1]: pair for key, pair in diffs.items()}
    names = [n for n in ARITHMETIC_NAMES if n in by_name] + sorted(n for n in by_name if n not in ARITHMETIC_NAMES)

    def said(name: str, value) -> str:
        if name in ARITHMETIC_NAMES:
            return f"{ARITHMETIC_NAMES[name]} {value}"
        return f"{name}={value}" if value is not None else f"{name} unset"

    first = " and ".join(said(n, by_name[n][0]) for n in names)
    second = " and ".join(said(n, by_name[n][1]) for n in names)
    a, b = ctx.names
    sentence = f"The runs computed under different arithmetic: {a} ran with {first}, {b} with {second}."
    return sentence, ", ".join(ARITHMETIC_NAMES.get(n, n) for n in names)


def check_sharding_plan(ctx: Context) -> Finding | None:
    """Both sides sharded with FSDP2, not alike: the fully_shard modules and policies each run read
    back from its model (meta.json `sharding`), so a plan hard-coded on one side shows too."""
    plans = {s: ctx.meta(s).get("sharding") for s in ("a", "b")}
    if not (plans["a"] and plans["b"]) or plans["a"] == plans["b"]:
        return None
    lines = _plan_differences(ctx, plans["a"], plans["b"])
    facts = f"The runs do not shard alike ({ctx.names[0]} vs {ctx.names[1]}): {'; '.join(lines)}."
    evidence = {"differences": lines, "sharding": ctx.both(plans["a"], plans["b"])}
    return finding(ctx, "config.sharding", None, None, evidence, facts)


def _plan_differences(ctx: Context, plan_a: dict, plan_b: dict) -> list[str]:
    lines = []
    for module in sorted(set(plan_a) | set(plan_b)):
        where = module or "the root"
        if module not in plan_a or module not in plan_b:
            lines.append(f"{where}: its own fully_shard on {ctx.label('a' if module in plan_a else 'b')} only")
            continue
        for key in plan_a[module]:
            values = plan_a[module][key], plan_b[module].get(key)
            if None not in values and values[0] != values[1]:  # None: a module holding no parameters itself
                lines.append(f"{where} {key}: {values[0]} vs {values[1]}")
    return lines


def check_seed(ctx: Context) -> Finding | None:
    """An unpinned global seed shows up in the config, the initial weights and the sampler at once:
    name the seed, not its symptoms."""
    _, seed = ctx.config_diffs()
    seeds = _sampler_seeds(ctx.meta("a")), _sampler_seeds(ctx.meta("b"))
    first = ctx.earliest
    on_samples = first is not None and first["quantity"] == "samples"
    if seed is None and not (_seeds_differ(*seeds) and on_samples):
        return None
    if _seeds_differ(*seeds) or (seed is not None and on_samples):
        return _sampler_seed(ctx, seeds, seed)
    if _init_finding(ctx) is None and first is None:
        facts = f"seed_everything differs: {_fmt(seed[0])} on {ctx.names[0]}, {_fmt(seed[1])} on {ctx.names[1]}."
        return finding(ctx, "config.seed", None, None, {"seed_everything": ctx.both(*seed)}, facts)
    return None


def _sampler_seed(ctx: Context, seeds: tuple, seed) -> Finding:
    f = ctx.earliest if ctx.earliest and ctx.earliest["quantity"] == "samples" else None
    evidence = {"sampler_seed": ctx.both(*seeds)}
    if seed is not None:
        evidence["seed_everything"] = ctx.both(*seed)
    if f:
        evidence["indices"] = ctx.both(f["a"], f["b"])
    common = sorted(set(seeds[0]) & set(seeds[1]))
    rank = f["rank"] if f else next((r for r in common if seeds[0][r] != seeds[1][r]), None)
    if _seeds_differ(*seeds):
        r0 = rank if rank in common else common[0]
        facts = (
            f"The DistributedSamplers are seeded differently ({ctx.names[0]}: seed {seeds[0][r0]}, "
            f"{ctx.names[1]}: seed {seeds[1][r0]}), so they shuffle the dataset into different permutations"
        )
    else:
        facts = "The global seed differs, and with it the sampler's shuffle"
    facts += f": the samples differ from step {f['step']} on (rank {f['rank']})." if f else "."
    if seed is not None:
        facts += (
            f" seed_everything resolves to {_fmt(seed[0])} on {ctx.names[0]} and {_fmt(seed[1])} on {ctx.names[1]}."
        )
    if _init_finding(ctx) is not None:
        facts += " The same seed also decides the initial weights, which differ as well: one cause, two symptoms."
    return finding(ctx, "sampler_seed", f["step"] if f else None, rank, evidence, facts)


def check_param_groups(ctx: Context) -> Finding | None:
    opt_a, opt_b = ctx.meta("a").get("optimizer"), ctx.meta("b").get("optimizer")
    if not (isinstance(opt_a, dict) and isinstance(opt_b, dict)):
        return None
    na, nb = ctx.names
    if opt_a.get("class") and opt_b.get("class") and opt_a["class"] != opt_b["class"]:
        facts = f"The optimizers differ before any step: {opt_a['class']} on {na}, {opt_b['class']} on {nb}."
        evidence = {"optimizer_class": ctx.both(opt_a["class"], opt_b["class"])}
        return finding(ctx, "param_groups.class", None, None, evidence, facts, a=na, b=nb, b_class=opt_b["class"])
    settings_a, settings_b = _settings_by_param(opt_a), _settings_by_param(opt_b)
    pairs = match_keys(list(settings_a), list(settings_b), None)
    pairs.pop("__only_a__"), pairs.pop("__only_b__")
    differing: dict[str, list] = {}
    for name, (ka, kb) in sorted(pairs.items()):
        sa, sb = settings_a[ka], settings_b[kb]
        for key in sorted(set(sa) | set(sb)):
            if not _same(sa.get(key), sb.get(key)):
                differing.setdefault(f"{key}: {_fmt(sa.get(key))} vs {_fmt(sb.get(key))}", []).append(name)
    if not differing:
        return None
    lines = [f"{setting} for {_name_list(names)}" for setting, names in differing.items()]
    facts = f"The optimizer's param groups differ before any step ({na} vs {nb}): {'; '.join(lines)}."
    setting, names = next(iter(differing.items()))
    key = setting.split(":", 1)[0]
    evidence = {"differences": {setting: names for setting, names in differing.items()}}
    return finding(ctx, "param_groups", None, None, evidence, facts, names=_name_list(names), key=key)


def _settings_by_param(optimizer: dict) -> dict[str, dict]:
    out = {}
    for group in optimizer.get("param_groups") or []:
        if not isinstance(group, dict):
            continue
        hyper = {k: v for k, v in group.items() if k != "params"}
        for name in group.get("params") or []:
            out[str(name)] = hyper
    return out


def _param_order(optimizer) -> list[str]:
    if not isinstance(optimizer, dict):
        return []
    return [str(n) for g in optimizer.get("param_groups") or [] if isinstance(g, dict) for n in g.get("params") or []]


def _name_list(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check_init(ctx: Context) -> Finding | None:
    found = _init_finding(ctx)
    if found is None:
        return None
    init = _init_digests(ctx.meta("a")), _init_digests(ctx.meta("b"))
    if not found["rank0_differs"] and ctx.earliest is not None:
        ctx.cache["init_note"] = (
            "init_params_sha256 differs on rank(s) other than 0, but rank 0's weights match across the sides "
            "and DDP broadcasts them at construction: harmless by itself"
        )
        return None
    evidence = {"init_params_sha256": ctx.both(*init), "ranks_differing_across_sides": found["across"]}
    parts = []
    if found["across"]:
        parts.append(
            f"The initial weights differ between the sides (init_params_sha256 of rank(s) "
            f"{', '.join(map(str, found['across']))}), before a single sample is consumed."
        )
    within = [ctx.label(s) for s, v in found["within"].items() if v]
    if within:
        parts.append(
            f"On {' and '.join(within)} the ranks built different weights; that alone is harmless, because "
            "constructing DistributedDataParallel broadcasts rank 0's parameters to every replica."
        )
    if found["rank0_differs"]:
        parts.append("Rank 0's weights differ across the sides, so each side trains from its own start.")
    return finding(ctx, "init", None, found["rank"], evidence, " ".join(parts))


def _init_finding(ctx: Context) -> dict | None:
    if "init" in ctx.cache:
        return ctx.cache["init"]
    init_a, init_b = _init_digests(ctx.meta("a")), _init_digests(ctx.meta("b"))
    across = [r for r in sorted(set(init_a) & set(init_b)) if init_a[r] and init_b[r] and init_a[r] != init_b[r]]
    within = {side: len({d for d in init.values() if d}) > 1 for side, init in (("a", init_a), ("b", init_b))}
    result = None
    if across or any(within.values()):
        rank0 = bool(init_a.get(0) and init_b.get(0) and init_a[0] != init_b[0])
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
        result = {"across": across, "within": within, "rank0_differs": rank0, "rank": rank}
    ctx.cache["init"] = result
    return result


def _init_digests(meta: dict) -> dict:
    return {f.get("rank", r): f.get("init_params_sha256") for r, f in enumerate(meta.get("ranks") or [])}


def check_resume(ctx: Context) -> Finding | None:
    """The first divergence at or after a side's resume point: what the resume got wrong."""
    first = ctx.earliest
    side = _resumed_side(ctx, first)
    if side is None:
        return None
    at, name = _resume_step(ctx.meta(side)), ctx.label(side)
    step, rank, q = first.get("step"), first.get("rank"), first["quantity"]
    evidence = {"resumed_side": name, "resumed_from_step": at, "quantity": q}
    shown = _what_the_resume_shows(ctx, first, side, evidence)
    if shown is None:
        return None
    said, key = shown
    resumed_how = f"resumed after step {at}" if at else "was restarted, counting its steps from 0"
    facts = f"{name} {resumed_how}, and the runs part ways at step {step} (rank {rank}), from the resume on: {said}"
    cause, fix = RESUME[key]
    return finding(ctx, "resume", step, rank, evidence, facts, cause=cause.format(at=at), fix=fix)


def _resumed_side(ctx: Context, first: dict | None) -> str | None:
    """The side whose resume the first divergence comes after, if any."""
    if first is None:
        return None
    # a restart counted from step 0: only its first step's weights say anything about the resume
    from_zero_telling = first.get("step") == 1 and first["quantity"] in ("loss", "grad_norm", "batch")
    for side in ("a", "b"):
        at = _resume_step(ctx.meta(side))
        if at is not None and (first.get("step") or 0) > at and (at or from_zero_telling):
            return side
    return None


def _what_the_resume_shows(ctx: Context, first: dict, side: str, evidence: dict) -> tuple[str, str] | None:
    """What the first divergence after the resume shows, as facts, and the RESUME key of its cause."""
    q, rank = first["quantity"], first.get("rank")
    if q == "numbering":
        return f"the step numbers jump ({_fmt(first.get('step_numbers'))}).", "numbering"
    if q == "count":
        counts, other = ctx.walk.counts, "b" if side == "a" else "a"
        return (
            f"{ctx.label(side)} records {counts[side].get(rank, 0)} steps on rank {rank} where the other run "
            f"records {counts[other].get(rank, 0)}.",
            "count",
        )
    if q == "samples":
        return _resumed_samples(ctx, first, side, evidence)
    if q == "lr":
        return f"the learning rate differs ({first['a']!r} vs {first['b']!r}).", "scheduler"
    if q == "param_digest":
        return (
            "the first update after the resume differs with the same samples, loss, gradient norm and learning rate.",
            "optimizer",
        )
    if q in ("loss", "grad_norm", "batch"):
        return f"with the same samples the {q} differs ({_fmt(first['a'])} vs {_fmt(first['b'])}).", "model_or_rng"
    return None


def _resumed_samples(ctx: Context, first: dict, side: str, evidence: dict) -> tuple[str, str]:
    """Where the resumed side's samples were consumed before: an epoch replayed, skipped, or its order lost."""
    step, name = first.get("step"), ctx.label(side)
    match = _samples_seen_elsewhere(ctx, side, "b" if side == "a" else "a", first.get("rank"), step)
    if match is None:
        return f"the samples differ ({_fmt(first['a'])} vs {_fmt(first['b'])}) without repeating others.", "order"
    evidence.update(match)
    seen_at, epoch = match["matches_step"], match.get("matches_epoch")
    if seen_at > step:
        return f"at step {step} {name} consumes the samples of step {seen_at} (epoch {epoch}): it skips ahead.", "skip"
    if match.get("epoch") is not None and match["epoch"] != epoch:
        # the epoch counter went on but the order is an earlier epoch's: the order state was lost
        return (
            f"at step {step} {name} is in epoch {match['epoch']} but consumes the samples the runs consumed at "
            f"step {seen_at} (epoch {epoch}), in the same order: its epoch count was restored, the data order "
            "was not.",
            "order_lost",
        )
    return (
        f"at step {step} {name} consumes the samples the runs consumed at step {seen_at} (epoch {epoch}): it "
        f"trains epoch {epoch} again.",
        "replay",
    )


def _resume_step(meta: dict) -> int | None:
    step = meta.get("resumed_from_step")
    if isinstance(step, int) and not isinstance(step, bool) and step > 0:
        return step
    attempts = meta.get("attempts") or []
    starts = [a.get("start_step") for a in attempts if isinstance(a, dict) and isinstance(a.get("start_step"), int)]
    # a restart counted from step 0 is still a resume: a loop that derives its step from a snapshot's
    # epoch index (the tutorial's `epochs_run` = 0 after epoch 0) loads trained weights "at step 0"
    return max(starts) if len(starts) > 1 and max(starts) >= 0 else None


def _samples_seen_elsewhere(ctx: Context, side: str, other: str, rank, step) -> dict | None:
    """Where else the resumed side's samples at `step` were consumed (by the other run)."""
    target = None
    for rec in records_of(ctx.run(side), rank):
        if rec["step"] == step:
            target = rec
            break
    if target is None:
        return None
    for rec in records_of(ctx.run(other), rank):
        if rec["step"] != step:
            a, b = comparable_samples(target, rec)
            if a is not None and a == b:
                return {"matches_step": rec["step"], "matches_epoch": rec.get("epoch"), "epoch": target.get("epoch")}
    return None


def check_structure(ctx: Context) -> Finding | None:
    first = ctx.earliest
    if first is None or first["quantity"] not in ("ranks", "count", "numbering"):
        return None
    if first["quantity"] == "numbering":
        offset = _step_offset(ctx, first["rank"])
        if offset is not None:
            side = "a" if offset > 0 else "b"  # the side whose numbers run ahead
            facts = (
                f"Every record matches once the steps are aligned, but {ctx.label(side)} numbers them "
                f"{abs(offset)} higher (step {first['step_numbers']['a']} vs {first['step_numbers']['b']} for the "
                "same optimizer step): the sides count steps from different origins (0 vs 1), not a training "
                "difference."
            )
            evidence = {"step_offset": offset, "step_numbers": ctx.both(*first["step_numbers"].values())}
            return finding(ctx, "recording", first["step"], first["rank"], evidence, facts, fix=RECORDING_FIX["step"])
    return _step_count(ctx, first)


def _step_offset(ctx: Context, rank) -> int | None:
    """a's step - b's step when it is constant and every other value of the records agrees."""
    offset = None
    n = 0
    for ra, rb in zip(records_of(ctx.run("a"), rank), records_of(ctx.run("b"), rank)):
        d = ra["step"] - rb["step"]
        if offset is None:
            offset = d
        if d != offset or d == 0:
            return None
        for key in ("loss", "grad_norm", "lr", "indices", "param_digest"):
            if not identical(ra.get(key), rb.get(key)):
                return None
        n += 1
    return offset if n else None


def _step_count(ctx: Context, f: dict) -> dict:
    walk = ctx.walk
    counts = ctx.both(dict(sorted(walk.counts["a"].items())), dict(sorted(walk.counts["b"].items())))
    evidence = {"steps": counts}
    if walk.unreadable:
        evidence["unreadable_traces"] = walk.unreadable
    desc = "; ".join(f"{side}: " + ", ".join(f"rank {r} {n}" for r, n in c.items()) for side, c in counts.items())
    empty = [ctx.label(s) for s in ("a", "b") if not any(walk.counts[s].values())]
    if empty:
        facts = f"{' and '.join(empty)} recorded no step at all (steps per rank: {desc})."
        return finding(
            ctx,
            "step_count.empty",
            None if f is None else f.get("step"),
            f and f.get("rank"),
            evidence,
            facts,
            side=" and ".join(empty),
        )
    if f["quantity"] == "ranks":
        facts = (
            f"{ctx.label(f['side'])} has no trace for rank {f['rank']}: the runs did not use the same ranks ({desc})."
        )
    elif f["quantity"] == "numbering":
        evidence["step_numbers"] = ctx.both(*f["step_numbers"].values())
        facts = (
            f"After {walk.steps_equal_before} matching step(s) the step numbers part ways on rank {f['rank']} "
            f"({f['step_numbers']['a']} vs {f['step_numbers']['b']}): the sides count optimizer steps differently "
            "(per micro-batch vs per optimizer step, or a step skipped)."
        )
    else:
        facts = f"The runs recorded different numbers of steps ({desc}); step {f['step']} is missing on some rank."
        uneven = [side for side, c in counts.items() if len(set(c.values())) > 1]
        if uneven:
            facts += (
                f" On {' and '.join(uneven)} the ranks themselves disagree, which in DDP means a rank ran more "
                "batches than its peers: its extra step's gradient all-reduce has no partner."
            )
    return finding(ctx, "step_count", f.get("step"), f.get("rank"), evidence, facts)


def check_samples(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "samples":
        return None
    step, rank, epoch = f["step"], f["rank"], f.get("epoch")
    evidence = {"epoch": epoch, "indices": ctx.both(f["a"], f["b"])}
    repeats = {s: _repeats_first_epoch(ctx.run(s), rank, epoch) for s in ("a", "b")}
    if repeats["a"] != repeats["b"]:
        stuck = "a" if repeats["a"] else "b"
        evidence["repeating_side"] = ctx.label(stuck)
        facts = (
            f"In epoch {epoch} {ctx.label(stuck)} replays its first epoch: from step {step} rank {rank} consumes "
            "exactly the indices, in exactly the order, of its first epoch, while "
            f"{ctx.label('b' if stuck == 'a' else 'a')} draws a new permutation."
        )
        return finding(ctx, "set_epoch", step, rank, evidence, facts, side=ctx.label(stuck))
    sampler = _sampler_differences(ctx)
    if sampler:
        evidence["sampler_differences"] = sampler
    facts = (
        f"The first difference is in the data: at step {step} (epoch {epoch}) rank {rank} consumed other samples "
        f"on {ctx.names[0]} than on {ctx.names[1]} ({_fmt(f['a'])} vs {_fmt(f['b'])})."
    )
    text = "; ".join(sampler) + "." if sampler else "they agree, so the DataLoader is built or iterated differently."
    return finding(ctx, "data_order", step, rank, evidence, facts, sampler=text)


def _repeats_first_epoch(run, rank, epoch) -> bool:
    """Whether this rank consumed, in `epoch`, exactly the samples of its first epoch in the same order."""
    first_epoch, first, this = None, [], []
    for rec in records_of(run, rank):
        e = rec.get("epoch")
        if first_epoch is None:
            first_epoch = e
        if e is None or epoch is None or epoch == first_epoch:
            return False
        if e == first_epoch:
            first.append(json.dumps(comparable_samples(rec, rec)[0]))
        elif e == epoch:
            this.append(json.dumps(comparable_samples(rec, rec)[0]))
        elif this:
            break
    if not this or not first:
        return False
    return this == first or (len(this) < len(first) and this == first[: len(this)])


def check_batch(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "batch":
        return None
    workers = _config_values(ctx, ("num_workers", "persistent_workers"))
    evidence = {"batch_digest": ctx.both(f["a"], f["b"]), "data_loader": workers}
    facts = (
        f"At step {f['step']} rank {f['rank']} consumed the same sample indices on both sides, but the batch "
        f"tensors differ (batch_digest {str(f['a'])[:16]} vs {str(f['b'])[:16]})."
    )
    if workers:
        facts += f" DataLoader settings: {_fmt(workers)}."
    return finding(ctx, "data_pipeline", f["step"], f["rank"], evidence, facts)


def check_module(ctx: Context) -> Finding | None:
    """The module watch's finding at the first divergence decides the category whenever it names where
    the difference is born: the batch (first input differs, indices equal), a random layer, a module in
    another mode, a module's own computation, or the loss (every forward call equal, the loss not)."""
    f, module = ctx.earliest, ctx.cache.get("module")
    if f is None or not module or module.get("step") != f.get("step"):
        return None
    kind = module.get("reading_kind")
    evidence = {"module": module}
    where = f"at step {f['step']} rank {f['rank']}, {module['phase']} of {display(module['name'])} ({module['type']})"
    if kind == "batch":
        facts = (
            f"The sample indices are equal, but {where} already receives another input: the first module's input "
            "differs, so the batch contents differ before the model."
        )
        return finding(ctx, "data_pipeline", f["step"], f["rank"], evidence, facts)
    if kind == "state":
        return _module_state(ctx, f, module, where)
    if kind == "params":
        facts = (
            f"The module watch finds parameter {module['name']} different before the first forward of step "
            f"{f['step']} (rank {f['rank']}): the sides start this step from other weights."
        )
        if f["step"] == 1:
            return finding(ctx, "init", f["step"], f["rank"], evidence, facts)
        return _undetermined(ctx, f, ["earlier_update", "param_groups", "optimizer"], facts, evidence)
    if kind in ("random", *COMPUTATION_READINGS) and not ctx.both_have("watch_state"):
        facts = f"The module watch finds the first difference {where}: inputs equal, outputs differ."
        return _undetermined(ctx, f, ["rng" if kind == "random" else "numerics", "module_state"], facts, evidence)
    if kind == "random":
        facts = (
            f"The sample indices, the inputs and the module's mode are equal, but {where} draws another mask: its "
            "input is equal and its output differs."
        )
        values = {"where": f"layer {display(module['name'])} ({module['type']}) draws its mask at step {f['step']}"}
        return finding(ctx, "rng", f["step"], f["rank"], evidence, facts, **values)
    if kind == "loss_grad" and f["quantity"] == "loss":
        facts = (
            f"Both sides fed rank {f['rank']} the same samples at step {f['step']} and every module call of the "
            f"forward pass is equal, yet the loss differs ({f['a']!r} vs {f['b']!r})."
        )
        return finding(ctx, "loss", f["step"], f["rank"], {**evidence, "loss": ctx.both(f["a"], f["b"])}, facts)
    if kind in COMPUTATION_READINGS:
        facts = (
            f"The module watch finds where the difference is born: {where} computes another result from an "
            "equal input, in the same mode on both sides."
        )
        values = {"name": display(module["name"]), "type": module["type"]}
        return finding(ctx, "numerics.module", f["step"], f["rank"], evidence, facts, **values)
    return None  # the gradients' reduction or the optimizer: the checks of those quantities read it


def _module_state(ctx: Context, f: dict, module: dict, where: str) -> Finding:
    state = module.get("state") or {}
    key = next(k for k in MODULE_STATE if k in state)
    va, vb = state[key]
    name = display(module["name"])
    # a module out of training mode is the usual slip (eval() left on after validation): name that side
    slipped = ctx.label("a") if key == "training" and va is False else ctx.label("b")
    said = "; ".join(
        f"{ctx.label('a')} runs `{name}` with {k}={a}, {ctx.label('b')} with {b}" for k, (a, b) in state.items()
    )
    facts = f"The module watch finds the first difference {where}: its input is equal, but {said}."
    advice = MODULE_STATE[key]
    values = {"name": name, "side": slipped, "a": va, "b": vb}
    fix = advice.fix.format(**values)
    return finding(
        ctx, "module_state", f["step"], f["rank"], {"module": module, "state": state}, facts, what=advice.why, fix=fix
    )


def check_stale_optimizer(ctx: Context) -> Finding | None:
    """One side never trains: a gradient norm of exactly 0 over its optimizer's parameters at every
    step and the model's parameters never changing, while the other side's gradients are not 0. Its
    optimizer holds tensors no backward reaches (built before fully_shard replaced the parameters)."""
    f = ctx.earliest
    if f is None or f["quantity"] not in ("loss", "grad_norm", "param_digest"):
        return None
    records = {s: [r for r, _ in zip(records_of(ctx.run(s), f["rank"]), range(STALE_STEPS))] for s in ("a", "b")}
    for side, other in (("a", "b"), ("b", "a")):
        mine, theirs = records[side], records[other]
        frozen = len({json.dumps(r.get("param_digest")) for r in mine}) == 1
        if len(mine) < 2 or not frozen or any(r.get("grad_norm") != 0 for r in mine):
            continue
        if not any(_nonzero(r.get("grad_norm")) for r in theirs):
            continue
        facts = (
            f"On {ctx.label(side)} the gradient norm over the optimizer's parameters is 0 at every step and the "
            f"model's parameters never change (param_digest {_fmt(mine[0].get('param_digest'))} from step "
            f"{mine[0]['step']} to {mine[-1]['step']}), while {ctx.label(other)} trains from the same samples."
        )
        evidence = {
            "grad_norm": ctx.both(mine[0].get("grad_norm"), theirs[0].get("grad_norm")),
            "frozen": ctx.label(side),
        }
        return finding(ctx, "optimizer.stale_params", f["step"], f["rank"], evidence, facts, side=ctx.label(side))
    return None


STALE_STEPS = 50  # the steps read to tell a side that never trains


def check_sharded_reduction(ctx: Context) -> Finding | None:
    """DDP against FSDP2 at a world of more than 2, alike in everything else: DDP all-reduces each
    gradient, FSDP2 reduce-scatters it, and with 3 or more terms the two sums may add in different
    orders. A first difference at float rounding level is that, not a bug. (At world 2 each sum has
    two terms and a + b == b + a: there a difference is a real one, and the checks below name it.)"""
    f = ctx.earliest
    sharded = {s: bool(ctx.meta(s).get("sharded")) for s in ("a", "b")}
    world = ctx.meta("a").get("world_size")
    if f is None or f["quantity"] not in ROUNDED_QUANTITIES or sharded["a"] == sharded["b"]:
        return None
    if not isinstance(world, int) or world <= 2 or ctx.config_diffs()[0]:
        return None
    relative = _max_relative(f["a"], f["b"])
    if relative is None or relative > ROUNDING_RELATIVE:
        return None
    fsdp = ctx.label("a" if sharded["a"] else "b")
    facts = (
        f"{fsdp} shards with FSDP2, the other side replicates with DDP, at a world of {world}; the first "
        f"difference is the {f['quantity']} at step {f['step']} rank {f['rank']} ({_fmt(f['a'])} vs {_fmt(f['b'])}, "
        f"relative {relative:.1e}), with the same samples and everything before it equal."
    )
    evidence = {f["quantity"]: ctx.both(f["a"], f["b"]), "relative": relative, "world_size": world, "sharded": fsdp}
    return finding(ctx, "reduction_order.sharding", f["step"], f["rank"], evidence, facts, world=world)


def check_accumulation_sync(ctx: Context) -> Finding | None:
    """Both sides shard with FSDP2 and accumulate, and part at rounding level from the first step on:
    one side reduce-scatters after every micro-batch (sums of averages), the other only after the
    last (the average of sums). The same numbers in another order; which side, the traces cannot say."""
    f = ctx.earliest
    sharded = all(ctx.meta(s).get("sharded") for s in ("a", "b"))
    k = next((v for v in _config_values(ctx, ("accumulate_grad_batches",)).values() if isinstance(v, int)), 1)
    if f is None or f["quantity"] not in ROUNDED_QUANTITIES or not sharded or k <= 1:
        return None
    relative = _max_relative(f["a"], f["b"])
    if ctx.walk.steps_equal_before != 0 or relative is None or relative > ROUNDING_RELATIVE or ctx.config_diffs()[0]:
        return None
    facts = (
        f"Both sides shard with FSDP2 and accumulate {k} micro-batches per step; they part at step {f['step']} "
        f"rank {f['rank']} in the {f['quantity']} ({_fmt(f['a'])} vs {_fmt(f['b'])}, relative {relative:.1e}), "
        "the first step, with the same samples and losses."
    )
    evidence = {f["quantity"]: ctx.both(f["a"], f["b"]), "relative": relative, "accumulate_grad_batches": k}
    return finding(ctx, "gradients.accumulation_sync", f["step"], f["rank"], evidence, facts)


ROUNDED_QUANTITIES = ("loss", "grad_norm", "param_digest", "validation", "final_params")
ROUNDING_RELATIVE = 1e-5  # a first difference this small is float32 rounding (2^-23 is 1.2e-7 per ulp)


def _max_relative(a, b) -> float | None:
    """The largest |a - b| / max(|a|, |b|) over two numbers or two equal-length lists of numbers."""
    pairs = list(zip(a, b)) if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) else [(a, b)]
    try:
        return max(abs(float(x) - float(y)) / max(abs(float(x)), abs(float(y)), 1e-30) for x, y in pairs)
    except (TypeError, ValueError):
        return None


def check_loss(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "loss":
        return None
    evidence = {"loss": ctx.both(f["a"], f["b"]), "abs_diff": _absdiff(f["a"], f["b"])}
    facts = (
        f"Both sides fed rank {f['rank']} the same samples at step {f['step']}, yet its loss differs "
        f"({f['a']!r} on {ctx.names[0]} vs {f['b']!r} on {ctx.names[1]})."
    )
    if ctx.both_have("watch_state") and ctx.cache.get("module") is None:
        # every module call, gradient and update of the watched step is equal: only the loss value is not
        facts += " Every module call of this step is equal on both sides."
        return finding(ctx, "loss", f["step"], f["rank"], evidence, facts)
    return _undetermined(ctx, f, _loss_candidates(ctx, f), facts, evidence)


def _loss_candidates(ctx: Context, f: dict) -> list[str]:
    """What can make the loss differ with equal samples, most likely first, given what was recorded."""
    dropout = any(_nonzero(v) for v in _config_values(ctx, ("dropout",)).values())
    ranked = ["rng"] if dropout else []
    if not ctx.both_have("batch"):
        ranked.append("data_pipeline")
    ranked += ["module_state", "loss", *_earlier_update_candidates(ctx, f), "numerics"]
    if not dropout:
        ranked.append("rng")  # a random layer the config does not mention
    return ranked


def _earlier_update_candidates(ctx: Context, f: dict) -> list[str]:
    """After an update, an earlier step may already have differed where nothing compared it."""
    if (f.get("step") or 0) <= 1:
        return []
    out = [] if ctx.both_have("param_digest") else ["earlier_update"]
    return out + ([] if ctx.both_have("optimizer") else ["param_groups"])


def _undetermined(ctx: Context, f: dict, causes: list[str], facts: str, evidence: dict) -> Finding:
    """No single cause: what is known, the candidates ranked, and what would tell them apart."""
    causes = list(dict.fromkeys(causes))
    unchecked = ctx.unchecked()
    ranked = "; ".join(f"({i}) {CANDIDATES[c][0]}" for i, c in enumerate(causes, 1))
    separate = "; ".join(dict.fromkeys(CANDIDATES[c][1] for c in causes)) + "."
    changes = "; ".join(f"on {' and '.join(u['sides'])}, {u['record']}" for u in unchecked)
    kind = "undetermined.unrecorded" if unchecked else "undetermined"
    facts = f"{facts} {_equal_up_to(ctx, f)}"
    result = finding(
        ctx, kind, f["step"], f["rank"], evidence, facts, ranked=ranked, separate=separate, changes=changes
    )
    result.candidates = [
        {
            "cause": c,
            "category": CANDIDATE_CATEGORY.get(c, c),
            "what": CANDIDATES[c][0],
            "tells_apart": CANDIDATES[c][1],
        }
        for c in causes
    ]
    result.unchecked = unchecked
    return result


# a candidate that is a cause within a category
CANDIDATE_CATEGORY = {"earlier_update": "optimizer"}


def _equal_up_to(ctx: Context, f: dict) -> str:
    """What the traces show equal up to the first divergence."""
    equal = ["the configuration", "the initial weights"]
    if ctx.both_have("optimizer"):
        equal.append("the optimizer's param groups")
    equal.append(f"all {ctx.walk.steps_equal_before} earlier step(s)")
    equal.append("this step's samples")
    if ctx.both_have("batch"):
        equal.append("batch contents")
    return f"Equal up to there: {', '.join(equal)}."


def check_grad_norm(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "grad_norm":
        return None
    clamp = _clamped_side(ctx, f["rank"])
    if clamp is not None:
        side, value = clamp
        facts = (
            f"The gradient norms agree wherever they are below {value:g} and {ctx.label(side)}'s never exceed it: "
            f"{ctx.label(side)} records the norm after clipping (clamped at the clip value), the other side before."
        )
        evidence = {"grad_norm": ctx.both(f["a"], f["b"]), "clamped_side": ctx.label(side), "clip_value": value}
        return finding(ctx, "recording", f["step"], f["rank"], evidence, facts, fix=RECORDING_FIX["grad_norm"])
    ulps = _ulps(f["a"], f["b"])
    evidence = {"grad_norm": ctx.both(f["a"], f["b"]), "ulps": ulps}
    # every earlier step matched bit for bit and this one's samples and loss do too: a few ulps in the
    # norm are the order it was summed in, at step 1 or later (a later step only means the orders
    # happened to round alike until then)
    if ulps is not None and ulps <= FEW_ULPS and _same_param_sets(ctx):
        if ctx.both_have("optimizer") and not _earlier_update_candidates(ctx, f):
            return _reduction_order(ctx, f, evidence, "gradient norm")
    ratio = _ratio(f["a"], f["b"])
    facts = (
        f"At step {f['step']} rank {f['rank']} consumed the same samples and computed the same loss on both sides, "
        f"but the gradient norm differs ({f['a']!r} on {ctx.names[0]} vs {f['b']!r} on {ctx.names[1]})."
    )
    if ratio is not None:
        near = min((2, 3, 4, 8, 1 / 2, 1 / 3, 1 / 4, 1 / 8), key=lambda k: abs(ratio / k - 1))
        if abs(ratio / near - 1) < 0.02:
            evidence["ratio"] = ratio
            return finding(ctx, "gradients.factor", f["step"], f["rank"], evidence, facts, factor=near)
    module = ctx.cache.get("module")
    if module and module.get("reading_kind") == "param_grad":
        evidence["module"] = module
        return finding(ctx, "gradients", f["step"], f["rank"], evidence, facts, param=module["name"])
    causes = ["gradients", "numerics", *_earlier_update_candidates(ctx, f)]
    if ulps is not None and ulps <= FEW_ULPS:
        causes.insert(0, "reduction_order")
    if module and module.get("reading_kind") == "loss_grad":
        causes = ["gradients", "loss", *causes]
    return _undetermined(ctx, f, causes, facts, evidence)


def _reduction_order(ctx: Context, f: dict, evidence: dict, what: str) -> Finding:
    order_a, order_b = _param_order(ctx.meta("a").get("optimizer")), _param_order(ctx.meta("b").get("optimizer"))
    facts = (
        f"The {what} differs by {evidence.get('ulps')} ulp(s) from step {f['step']} on ({_fmt(f['a'])} vs "
        f"{_fmt(f['b'])}), with the same parameters, samples and losses: the same parameters were summed in "
        "another order."
    )
    if order_a and order_b:
        evidence["param_order"] = ctx.both(order_a[:8], order_b[:8])
    lightning = [s for s in ("a", "b") if ctx.meta(s).get("side") == "lightning"]
    if len(lightning) == 1:  # Lightning's order is the optimizer's: the other side is the one to change
        side = ctx.label("b" if lightning == ["a"] else "a")
    else:  # the traces cannot say which side summed in the model's order: do not guess a label
        side = "the side that clips over model.parameters() (or in any order but the optimizer's)"
    return finding(ctx, "reduction_order", f["step"], f["rank"], evidence, facts, side=side)


def _same_param_sets(ctx: Context) -> bool:
    only = ctx.cmp.params_only_in
    return not (only.get("a") or only.get("b"))


def _clamped_side(ctx: Context, rank) -> tuple[str, float] | None:
    """The side whose recorded gradient norm stops at a ceiling the other side's goes past."""
    pairs = [(ra.get("grad_norm"), rb.get("grad_norm")) for ra, rb in _aligned(ctx, rank)]
    pairs = [(a, b) for a, b in pairs if isinstance(a, (int, float)) and isinstance(b, (int, float))]
    clip = next(
        (v for v in _config_values(ctx, ("gradient_clip_val", "clip_val", "max_norm")).values() if _nonzero(v)), None
    )
    for side, idx in (("a", 0), ("b", 1)):
        low = [p[idx] for p in pairs if p[0] != p[1]]
        high = [p[1 - idx] for p in pairs if p[0] != p[1]]
        if not low or not all(h > lv for h, lv in zip(high, low)):
            continue
        ceiling = float(clip) if isinstance(clip, (int, float)) else max(low)
        if all(abs(v - ceiling) <= 1e-4 * ceiling for v in low) and all(p[idx] <= ceiling * (1 + 1e-4) for p in pairs):
            return side, ceiling
    return None


def _aligned(ctx: Context, rank, limit: int = 100_000):
    for i, (ra, rb) in enumerate(zip(records_of(ctx.run("a"), rank), records_of(ctx.run("b"), rank))):
        if i >= limit:
            return
        yield ra, rb


def check_lr(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "lr":
        return None
    evidence = {"lr": ctx.both(f["a"], f["b"])}
    shift = _lr_shift(ctx, f["rank"])
    if shift is not None:
        facts = (
            f"The learning rates are one sequence shifted by one step: {ctx.label(shift)} records at each step the "
            "value the other side records at the next one; it reads the rate after scheduler.step(), not the "
            "rate the optimizer step used."
        )
        evidence["ahead"] = ctx.label(shift)
        return finding(ctx, "recording", f["step"], f["rank"], evidence, facts, fix=RECORDING_FIX["lr"])
    facts = (
        f"At step {f['step']} the samples, loss and gradient norm match, but the learning rate differs "
        f"({f['a']!r} on {ctx.names[0]} vs {f['b']!r} on {ctx.names[1]})."
    )
    return finding(ctx, "optimizer.lr", f["step"], f["rank"], evidence, facts)


def _lr_shift(ctx: Context, rank) -> str | None:
    la, lb = [], []
    for ra, rb in _aligned(ctx, rank):
        la.append(ra.get("lr"))
        lb.append(rb.get("lr"))
    if len(la) < 3 or len(set(map(str, la))) < 2:
        return None
    if la[:-1] == lb[1:]:
        return "a"
    if lb[:-1] == la[1:]:
        return "b"
    return None


def check_param_digest(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "param_digest":
        return None
    ulps = max((_ulps_or_far(x, y) for x, y in zip(f["a"], f["b"])), default=None)
    evidence = {"param_digest": ctx.both(f["a"], f["b"]), "ulps": ulps}
    if ulps is not None and ulps <= FEW_ULPS and ctx.walk.steps_equal_before == 0 and _same_param_sets(ctx):
        clipping = [v for v in _config_values(ctx, ("gradient_clip_val",)).values() if _nonzero(v)]
        if clipping and ctx.both_have("optimizer"):
            return _reduction_order(ctx, f, evidence, "parameter digest after the step (clipping on)")
    facts = (
        f"At step {f['step']} rank {f['rank']} consumed the same samples with the same loss, gradient norm and "
        f"learning rate, yet the parameters after the step differ (param_digest {_fmt(f['a'])} vs {_fmt(f['b'])})."
    )
    if ctx.both_have("optimizer"):  # the param groups were compared equal: the update itself differs
        return finding(ctx, "optimizer", f["step"], f["rank"], evidence, facts)
    return _undetermined(ctx, f, ["param_groups", "reduction_order", "optimizer"], facts, evidence)


def check_buffers(ctx: Context) -> Finding | None:
    """Buffers (BatchNorm running statistics) differing between ranks of a side or between sides."""
    replicas = {s: ctx.meta(s).get("replicas_identical") for s in ("a", "b")}
    bufs = {s: _buffer_digests(ctx.meta(s)) for s in ("a", "b")}
    split = [s for s in ("a", "b") if replicas[s] is False or _ranks_disagree(bufs[s])]
    params = ctx.cmp.params
    only_buffers = _differing_tensors(ctx) and all(_is_buffer(n, bufs) for n in _differing_tensors(ctx))
    if len(split) == 1:
        side = split[0]
        name = _first_differing_buffer(bufs[side]) or next(iter(_differing_tensors(ctx)), None)
        evidence = {"replicas_identical": ctx.both(*replicas.values()), "buffer": name}
        values = {"side": ctx.label(side), "name": name or "replicas_identical: false"}
        return finding(ctx, "buffers.replicas", None, None, evidence, "", **values)
    across = _first_buffer_across(bufs)
    if across or (only_buffers and params.compared and not params.all_equal and ctx.earliest is None):
        name = across or next(iter(_differing_tensors(ctx)))
        return finding(ctx, "buffers.sync", None, None, {"buffer": name}, "", name=name)
    return None


def _buffer_digests(meta: dict) -> dict:
    return {f.get("rank", r): f.get("buffers_sha256") or {} for r, f in enumerate(meta.get("ranks") or [])}


def _ranks_disagree(per_rank: dict) -> bool:
    return len({json.dumps(v, sort_keys=True) for v in per_rank.values() if v}) > 1


def _first_differing_buffer(per_rank: dict) -> str | None:
    maps = [v for v in per_rank.values() if v]
    for name in sorted(set().union(*maps)) if maps else []:
        if len({m.get(name) for m in maps}) > 1:
            return name
    return None


def _first_buffer_across(bufs: dict) -> str | None:
    a, b = bufs["a"].get(0) or {}, bufs["b"].get(0) or {}
    pairs = match_keys(list(a), list(b), None)
    pairs.pop("__only_a__"), pairs.pop("__only_b__")
    return next((name for name, (ka, kb) in sorted(pairs.items()) if a[ka] != b[kb]), None)


def _differing_tensors(ctx: Context) -> list[str]:
    return [row["name"] for row in ctx.cmp.param_tensors if not row["equal"]]


def _is_buffer(name: str, bufs: dict) -> bool:
    known = {k for s in bufs.values() for per in s.values() for k in per}
    return name in known or name.endswith(BUFFER_HINTS)


def check_final_params(ctx: Context) -> Finding | None:
    params = ctx.cmp.params
    if ctx.earliest is not None or params.all_equal:
        return None
    first = params.first or {}
    facts = (
        f"All {ctx.walk.steps_equal_before} recorded steps match, including the per-step parameter digest, but "
        f"the final parameters differ ({_fmt(first)}): an update touched tensors the digest does not cover, or "
        "the last update after the final record differs."
    )
    return finding(ctx, "optimizer", ctx.walk.last_equal_step, None, {"params": first}, facts)


def check_validation(ctx: Context) -> Finding | None:
    v = ctx.cmp.validation.first
    if ctx.earliest is not None or v is None:
        return None
    evidence = {"validation": v}
    rounded = _float32_rounded_side(v.get("a"), v.get("b"))
    if rounded is not None:
        facts = (
            f"Training matches step for step; validation {v.get('metric')} at step {v.get('step')} differs only by "
            f"float32 rounding ({v.get('a')!r} vs {v.get('b')!r}): {ctx.label(rounded)} recorded the value rounded "
            "to float32 (as `self.log` keeps it)."
        )
        return finding(ctx, "recording", v.get("step"), None, evidence, facts, fix=RECORDING_FIX["validation"])
    facts = (
        f"Training matches step for step, but validation differs ({v.get('metric')} at step {v.get('step')}: "
        f"{v.get('a')!r} vs {v.get('b')!r}): the metric is computed or reduced across ranks differently."
    )
    return finding(ctx, "numerics.validation", v.get("step"), None, evidence, facts)


def _float32_rounded_side(a, b) -> str | None:
    if not (isinstance(a, float) and isinstance(b, float)) or a == b:
        return None
    if float(np.float32(a)) == b and float(np.float32(b)) == b:
        return "b"
    if float(np.float32(b)) == a and float(np.float32(a)) == a:
        return "a"
    return None


def check_problems(ctx: Context) -> Finding | None:
    problems = ctx.cmp.all_problems
    if not problems:
        return None
    if ctx.walk is not None and not any(ctx.walk.counts[s] for s in ("a", "b")):
        return _step_count(ctx, None)
    facts = (
        f"The recorded steps match, but the comparison reports structural problems: {'; '.join(problems[:3])}. "
        "Most often one run did not finish (no final parameters, a validation missing) or the sides validate "
        "at different points."
    )
    return finding(
        ctx, "step_count", ctx.walk.last_equal_step if ctx.walk else None, None, {"problems": problems}, facts
    )


# causes that sit in the setup rather than in the numbers: when every number still agrees bit for
# bit they are reported as a warning beside an equivalent verdict
SETUP_CATEGORIES = ("config", "param_groups", "buffers")


def _unchecked_sentence(unchecked: list[dict]) -> str:
    parts = [f"{u['not_checked']} ({' and '.join(u['sides'])} did not record it: {u['record']})" for u in unchecked]
    return "Not checked: " + "; ".join(parts) + "."


def check_equivalent(ctx: Context, setup_differs: Finding | None = None) -> Finding:
    n = ctx.walk.steps_equal_before if ctx.walk else 0
    if setup_differs is None:
        facts = (
            f"No divergence: configuration, initial weights and all {n} steps (samples, loss, gradient norm, "
            "learning rate, parameter digest) match on every rank, and so do validation and the final parameters."
        )
        return finding(ctx, "equivalent", None, None, {"steps_compared": n}, facts)
    facts = (
        f"No divergence in the numbers: all {n} steps, validation and the final parameters match bit for bit, "
        f"but the setup differs ({setup_differs.category}; see the warning)."
    )
    return replace(finding(ctx, "equivalent", None, None, {"steps_compared": n}, facts), setup_differs=setup_differs)


CHECKS: tuple[Callable[[Context], Finding | None], ...] = (
    check_crash,
    check_stall,
    check_metadata,
    check_config,
    check_sharding_plan,
    check_seed,
    check_param_groups,
    check_init,
    check_resume,
    check_structure,
    check_samples,
    check_batch,
    check_stale_optimizer,
    check_sharded_reduction,
    check_accumulation_sync,
    check_module,
    check_loss,
    check_grad_norm,
    check_lr,
    check_param_digest,
    check_buffers,
    check_final_params,
    check_validation,
    check_problems,
)


# ---------------------------------------------------------------------------------------------
# entry points


def diagnose_comparison(cmp, names, *, ignore_config=(), stall=None, rounding_is_noise=False) -> Finding:
    """The diagnosis of a comparison (pipeline.build_report calls it). `rounding_is_noise`: the thread
    counts and the arithmetic (kernel set, BLAS path, CPU) are left out of the setup checks, their
    differences being judged against measured noise (--tolerance noise)."""
    ignored = tuple(_strip_config(k) for k in ignore_config)
    ctx = Context(cmp, tuple(names), ignored, stall, rounding_is_noise=rounding_is_noise)
    first = ctx.earliest
    if first is not None and first["quantity"] in ("loss", "grad_norm", "param_digest", "batch"):
        ctx.cache["module"] = _localise(cmp, first)
    for check in CHECKS:
        found = check(ctx)
        if found is not None:
            break
    else:
        found = check_equivalent(ctx)
    if found.category in SETUP_CATEGORIES and stall is None and cmp.equivalent:
        # every number agrees bit for bit: a setup difference did not change this run, so it is a
        # warning beside an equivalent verdict, never a cause (it may still change a larger run)
        setup = found
        found = check_equivalent(ctx, setup_differs=setup)
    found.module = ctx.cache.get("module")
    if found.category not in UPSTREAM_CATEGORIES and not found.unchecked:
        found.unchecked = ctx.unchecked()
    if found.unchecked:
        found.explanation += " " + _unchecked_sentence(found.unchecked)
    if "init_note" in ctx.cache:
        found.evidence["init_note"] = ctx.cache["init_note"]
    if cmp.meta_errors:
        found.evidence["unreadable_meta"] = {ctx.label(s): e for s, e in cmp.meta_errors.items()}
    check_story(found, cmp.run_a, cmp.run_b, ctx.earliest)
    return found


def diagnose_failure(run_a, run_b, criterion=None, stall: dict | None = None, labels=None) -> Finding:
    """The diagnosis of a failed launch (a crash, a stall): reads what the runs left, tolerantly.
    `criterion`: the report's (Criterion.describe()'s form)."""
    cmp = compare_runs(run_a, run_b, Criterion.from_description(criterion), tolerant=True)
    return diagnose_comparison(cmp, run_labels(cmp, labels), stall=stall)


def _localise(cmp, first: dict) -> dict | None:
    """The module localisation of the first divergence, where module watches were recorded."""
    try:
        return localise(cmp.run_a, cmp.run_b, first.get("step"), first.get("rank"))
    except Exception:  # noqa: BLE001 - a localisation is extra evidence; its failure must not hide the diagnosis
        return None


def find_warnings(cmp, names) -> list[dict]:
    """Suspicious even when equivalent: a side that learned nothing, NaN/Inf values."""
    out = []
    if cmp.walk is None:
        return out
    for side, name in zip(("a", "b"), names):
        facts = cmp.walk.facts[side]
        if facts.grad_norms and facts.nonzero_grad_norms == 0:
            out.append(
                {
                    "kind": "no_learning",
                    "message": f"{name}: every recorded gradient norm is zero ({facts.grad_norms} steps): "
                    "nothing trains (a loss that does not depend on the parameters, or detached outputs)",
                }
            )
        elif facts.losses > 1 and not facts.loss_changes:
            out.append(
                {
                    "kind": "no_learning",
                    "message": f"{name}: the loss never changes over {facts.losses} records: nothing trains",
                }
            )
        if facts.non_finite:
            nf = facts.non_finite
            out.append(
                {
                    "kind": "non_finite",
                    "message": f"{name}: {nf['quantity']} is {nf['value']} at step {nf['step']} rank {nf['rank']} "
                    "(lower the learning rate, check the inputs and the loss)",
                }
            )
    return out


def format_diagnosis(d: Finding) -> str:
    """A few lines for the terminal: what and where, then the fix."""
    lines = textwrap.wrap(f"diagnosis: {d.line}: {d.headline}", width=110, subsequent_indent="  ")
    if d.module:
        lines += textwrap.wrap(
            format_module_finding(d.module), width=110, initial_indent="  ", subsequent_indent="    "
        )
    if d.candidates:
        causes = ", ".join(c["cause"] for c in d.candidates)
        lines += textwrap.wrap(f"candidates, most likely first: {causes}", width=110, initial_indent="  ")
    for u in d.unchecked:
        lines += textwrap.wrap(
            f"not checked ({' and '.join(u['sides'])} did not record it): {u['not_checked']}",
            width=110,
            initial_indent="  ",
            subsequent_indent="    ",
        )
    if d.category != "equivalent" and d.advice:
        lines += textwrap.wrap(f"fix: {d.advice}", width=110, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# configuration


def config_differences(meta_a: dict, meta_b: dict, ignore=()) -> tuple[dict, tuple | None]:
    """{dotted key: (a, b)} for numerics-relevant facts both sides record with different values, and
    the seed_everything pair (kept apart) or None."""
    diffs: dict[str, tuple] = {}
    for key in META_KEYS:
        if key in meta_a and key in meta_b:
            a, b = (_device_type(m[key]) if key == "device" else m[key] for m in (meta_a, meta_b))
            if not _same(a, b):
                diffs[key] = (meta_a[key], meta_b[key])
    va, vb = meta_a.get("versions") or {}, meta_b.get("versions") or {}
    for key in VERSION_KEYS:
        if key in va and key in vb and not _same(va[key], vb[key]):
            diffs[f"versions.{key}"] = (va[key], vb[key])
    flat_a, flat_b = _flatten(meta_a.get("config") or {}), _flatten(meta_b.get("config") or {})
    seed = None
    for key in sorted(set(flat_a) & set(flat_b)):
        if _ignored(key, ignore) or _same(flat_a[key], flat_b[key]):
            continue
        if key == SEED_KEY:
            seed = (flat_a[key], flat_b[key])
        else:
            diffs[f"config.{key}"] = (flat_a[key], flat_b[key])
    for r, (fa, fb) in enumerate(zip(meta_a.get("ranks") or [], meta_b.get("ranks") or [])):
        r = fa.get("rank", r)
        for key in RANK_FACT_KEYS:
            if key in fa and key in fb and not _same(fa[key], fb[key]):
                diffs[f"ranks[{r}].{key}"] = (fa[key], fb[key])
        for group, keys in (("torch_flags", None), ("arithmetic", None), ("env", NUMERIC_ENV), ("world", WORLD_KEYS)):
            ga, gb = fa.get(group) or {}, fb.get(group) or {}
            for key in sorted(set(ga) & set(gb)):
                if (keys is None or key in keys) and not _same(ga[key], gb[key]):
                    diffs[f"ranks[{r}].{group}.{key}"] = (ga[key], gb[key])
    return _collapse_ranks(diffs, len(meta_a.get("ranks") or [])), seed


def changes_only_rounding(key: str) -> bool:
    """A setup fact that decides how sums round and nothing else: a thread count, the arithmetic."""
    return ".arithmetic." in key or key.endswith(("threads", "OMP_NUM_THREADS", "MKL_NUM_THREADS"))


def _collapse_ranks(diffs: dict, world: int) -> dict:
    """`ranks[*].key` for a per-rank fact that differs the same way on every rank: said once."""
    per_key: dict[str, list] = {}
    for key, pair in diffs.items():
        if key.startswith("ranks["):
            per_key.setdefault(key[key.index("]") + 2 :], []).append(pair)
    out = {}
    for key, pair in diffs.items():
        rest = key[key.index("]") + 2 :] if key.startswith("ranks[") else None
        pairs = per_key.get(rest, [])
        if rest is not None and world > 1 and len(pairs) == world and all(_same(p, pairs[0]) for p in pairs):
            out.setdefault(f"ranks[*].{rest}", pair)
        else:
            out[key] = pair
    return out


def _strip_config(key: str) -> str:
    return key[len("config.") :] if key.startswith("config.") else key


def _device_type(device):
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


def _ignored(key: str, extra=()) -> bool:
    return any(key == k or key.startswith(k + ".") for k in (*IGNORED_CONFIG_KEYS, *extra))


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


def _config_values(ctx: Context, names: tuple) -> dict:
    """Config values whose last key component is one of `names`, from both sides."""
    out = {}
    for side in ("a", "b"):
        for key, value in _flatten(ctx.meta(side).get("config") or {}).items():
            if key.rsplit(".", 1)[-1] in names:
                out[f"{ctx.label(side)}:{key}"] = value
    return out


def _nonzero(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0


def _sampler_seeds(meta: dict) -> dict:
    return {
        f.get("rank", r): (f.get("sampler") or {}).get("seed")
        for r, f in enumerate(meta.get("ranks") or [])
        if (f.get("sampler") or {}).get("seed") is not None
    }


def _seeds_differ(a: dict, b: dict) -> bool:
    return any(a[r] != b[r] for r in set(a) & set(b))


def _sampler_differences(ctx: Context) -> list[str]:
    out = []
    for r, (fa, fb) in enumerate(zip(ctx.meta("a").get("ranks") or [], ctx.meta("b").get("ranks") or [])):
        sa, sb = fa.get("sampler") or {}, fb.get("sampler") or {}
        for key in sorted(set(sa) & set(sb)):
            if key != "seed" and sa[key] != sb[key]:
                out.append(f"ranks[{r}].sampler.{key}: {_fmt(sa[key])} vs {_fmt(sb[key])}")
    return out


def per_rank_batches(meta: dict | None) -> dict[int, int]:
    """Batches per epoch of each rank, from the sampler facts in meta.json and the batch size."""
    meta = meta or {}
    data = (meta.get("config") or {}).get("data") or {}
    batch, drop_last = data.get("batch_size"), bool(data.get("drop_last"))
    found = {}
    for facts in meta.get("ranks") or []:
        samples = (facts.get("sampler") or {}).get("num_samples")
        if isinstance(batch, int) and batch > 0 and isinstance(samples, int):
            found[int(facts.get("rank", len(found)))] = samples // batch if drop_last else -(-samples // batch)
    return found


def read_errors(run) -> list[dict]:
    """The error files of a run (errors/rank*.json), the first error first."""
    found = []
    for path in sorted((Path(run) / "errors").glob("rank*.json")):
        try:
            error = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(error, dict):
            error.setdefault("rank", int(path.stem[4:]) if path.stem[4:].isdigit() else None)
            error["path"] = str(path)
            found.append(error)
    return sorted(found, key=lambda e: (e.get("time") or 0, str(e.get("rank"))))


# ---------------------------------------------------------------------------------------------
# small helpers


def _fmt(value, limit: int = 80) -> str:
    text = json.dumps(short(value), default=str) if not isinstance(value, str) else repr(value)
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


def _ulps(a, b) -> int | None:
    """Distance in float32 units in the last place (same sign), or None."""
    try:
        fa, fb = np.float32(a), np.float32(b)
    except (TypeError, ValueError):
        return None
    if not (np.isfinite(fa) and np.isfinite(fb)) or (fa < 0) != (fb < 0):
        return None
    return abs(int(fa.view(np.int32)) - int(fb.view(np.int32)))


def _ulps_or_far(a, b) -> int:
    u = _ulps(a, b)
    return 10**9 if u is None else u


# ---------------------------------------------------------------------------------------------
# under measured noise (--tolerance noise, compare/noise.py)


def is_rounding(found: Finding, departure: dict | None = None) -> bool:
    """A finding that blames rounding; under noise also one at a step before the pair leaves the
    envelope (until then the pair is only noise apart, whatever the exact checks make of its bits)."""
    if found.category in ROUNDING_FINDINGS or found.kind in ROUNDING_FINDINGS:
        return True
    return departure is not None and found.step is not None and found.step < departure["step"]


def diagnosis_under_noise(
    exact: Finding, judgement: dict, names, within: bool, exact_step, setup=None, hard: bool = False, runs=None
) -> Finding:
    """The exact comparison's diagnosis, judged against the noise the controls measured. Within the
    noise, the finding is `noise` (the exact finding's setup difference, if any, stays beside it as
    `setup_differs`). Beyond it, an exact finding that blames rounding cannot stand: the finding is
    read in causal order at the step the pair leaves the envelope (`loss.beyond_noise`,
    `gradients.beyond_noise`, `optimizer.beyond_noise`); any other finding (a config, the
    data, the optimizer) keeps its cause, the departure added to its evidence. `hard`: the finding is
    about what no rounding moves (samples, batch, lr): it stands whatever its step. `runs` (a, b):
    the departure's finding says what evidence of its step a side did not record, and every finding
    made here is checked for one story (compare/story.py)."""
    worst, departure = judgement["worst"], judgement["departure"]
    first, unchecked = None, []
    values = {"controls": ", ".join(judgement.get("control_labels") or ["?"]), "side": names[0]}
    values["factor"] = judgement["factor"]
    evidence = {"sides": {"a": names[0], "b": names[1]}, "noise": _noise_evidence(judgement)}
    if within:
        kind, step, candidates = "noise", None, []
        values.update(worst=worst.get("quantity"), worst_step=worst.get("step"), ratio=worst["ratio"])
        facts = f"{names[0]} and {names[1]} differ in their last bits from step {exact_step}."
    elif departure is not None and not hard and is_rounding(exact, departure):
        step = departure["step"]
        kind, candidates, quantity = _departure_cause(departure)
        first = {"quantity": quantity, "step": step}  # the divergence the evidence is about
        if runs is not None:
            have = {name: recorded_evidence.recorded(run, step) for name, run in zip(names, runs)}
            unchecked = unchecked_at(first, have)
        where = departure["layer"] or departure["quantity"]
        values.update(where=where, step=step, before="")
        if exact_step is not None and exact_step < step:
            values["before"] = f" Their differences from step {exact_step} to step {step - 1} are rounding."
        facts = (
            f"At step {step} {departure['quantity']} is {departure['distance']:.3g} apart relative, "
            f"{departure['ratio']:.3g} times the bound the noise allows ({departure['bound']:.3g})."
        )
    else:
        return replace(exact, evidence={**exact.evidence, "noise": evidence["noise"]})
    advice = ADVICE[kind]
    explanation = f"{facts} {advice.why.format(**values)}"
    found = Finding(
        kind.split(".")[0],
        kind,
        step,
        explanation=f"{explanation} {_unchecked_sentence(unchecked)}" if unchecked else explanation,
        advice=advice.fix.format(**values),
        evidence=evidence,
        candidates=[] if within else candidates,
        unchecked=unchecked,
        setup_differs=setup if within and setup and _named_beside(setup) else None,
    )
    if runs is not None:
        check_story(found, runs[0], runs[1], first)  # within the noise no step is blamed: none needs evidence
    return found


def _named_beside(found: Finding) -> bool:
    """Within the noise, a finding that names a cause still says it beside the verdict: a setup
    difference, or a way of summing that only changes how the sums round (reduction_order, gradient
    sync on every FSDP2 micro-batch: still an extra reduce-scatter per micro-batch)."""
    return found.category not in ("numerics", "undetermined", "equivalent", "noise")


def _departure_cause(departure: dict) -> tuple[str, list[dict], str]:
    """The cause of a departure read in causal order at its step, everything before being noise: a
    loss that leaves comes from the forward pass or the loss (its function, a module's settings, the
    batch); a gradient that leaves with the loss inside, from what happens between the loss and the
    gradients; parameters that leave with both inside, from the update."""
    groups = set(departure.get("groups") or [])
    if "loss" in groups:
        kind, causes, quantity = "loss.beyond_noise", ["loss", "module_state", "data_pipeline"], "loss"
    elif groups & {"grad", "grad_norm"}:
        kind, causes, quantity = "gradients.beyond_noise", ["gradients", "loss"], "grad_norm"
    else:
        kind, causes, quantity = "optimizer.beyond_noise", ["optimizer", "param_groups"], "param_digest"
    candidates = [
        {"cause": c, "category": c, "what": CANDIDATES[c][0], "tells_apart": CANDIDATES[c][1]} for c in causes
    ]
    return kind, candidates, quantity


def _noise_evidence(judgement: dict) -> dict:
    return {key: judgement[key] for key in ("factor", "departure", "worst", "controls") if key in judgement}
