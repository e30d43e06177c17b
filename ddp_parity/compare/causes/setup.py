"""Causes of the setup, found before any step's numbers: a crash, a stall, what meta.json lacks,
the configuration, the sharding plan, the optimizer's param groups, the initial weights (the seed: seeds.py).

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

import functools
import inspect
import json
from pathlib import Path

import torch

from ddp_parity.compare.causes.base import Cause, Context, Evidence, aligned_records, finding, fmt
from ddp_parity.compare.causes.configuration import SEED_KEY, same_value
from ddp_parity.compare.causes.implicated import stable
from ddp_parity.compare.causes.initial_state import init_digests, init_finding
from ddp_parity.compare.causes.seed_records import draws_before_wrap, seeds_by_rank
from ddp_parity.compare.comparator import match_keys, missing_meta, strip_known_prefixes
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.modules import params_differing_before
from ddp_parity.trace_files import SCHEDULER_BOOKKEEPING


def _differences(d: Finding) -> list[str]:
    return list(d.evidence.get("values") or {})


# ---------------------------------------------------------------------------------------------
# crash


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
        CRASH,
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


CRASH = Cause(
    "crash",
    check_crash,
    why="The other ranks' errors (a closed connection, a timeout in a collective) follow from this one: "
    "a rank that dies leaves its peers waiting in the next collective.",
    fix="Fix the error {side} rank {error_rank} raised ({type}: {message}); its traceback is in {path}.",
    doc="A rank of an unfinished run raised (its `errors/rank{r}.json`): side, rank, step and message; "
    "the other ranks' errors are its follow-ons.",
)


# ---------------------------------------------------------------------------------------------
# stall


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
        return finding(ctx, STALL, None, None, evidence, f"{who_side} stopped making progress{took} before any step.")
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
        return finding(ctx, STALL, top + 1, waiting[0], evidence, facts)
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
        return finding(ctx, STALL, top + 1, long_rank, evidence, facts)
    facts = (
        f"{who_side} hung{took} with every rank at step {top}: all of them wait in a collective after that "
        "step that not all joined (a barrier, a validation all_reduce or a checkpoint save run by some ranks only)."
    )
    return finding(ctx, STALL, top, waiting[0], evidence, facts)


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


STALL = Cause(
    "stall",
    check_stall,
    why="The classic cause is uneven shards: one rank gets more batches than the others, so at the end "
    "of an epoch it enters an all-reduce its peers never reach.",
    fix="Give every rank the same number of batches: shard with DistributedSampler (it pads to "
    "ceil(N / world_size)) and use the same drop_last for sampler and DataLoader; never put a "
    "collective under a rank-dependent condition; for truly uneven inputs use DDP's Join context.",
    doc="The harness's heartbeats stopped: the rank waiting in a collective its peers never join "
    "(uneven shards, a rank that died or skipped a step).",
)


# ---------------------------------------------------------------------------------------------
# metadata


def check_metadata(ctx: Context) -> Finding | None:
    lacking = {ctx.label(s): missing for s in ("a", "b") if (missing := _missing(ctx.cmp.metas.get(s)))}
    if not lacking:
        return None
    facts = "; ".join(f"meta.json of {name} lacks {', '.join(keys)}" for name, keys in lacking.items()) + "."
    return finding(ctx, METADATA, None, None, {"missing": lacking}, facts)


def _missing(meta) -> list[str]:
    return missing_meta(meta) if meta is not None else []


METADATA = Cause(
    "metadata",
    check_metadata,
    why="Without the setup (configuration, world size, per-rank facts) nothing says the runs trained "
    "under the same conditions, so they are never called equivalent.",
    fix="Record with TraceRecorder(run_dir, side=..., config=...) and call start() after "
    "init_process_group, so that meta.json holds side, world_size, config and ranks.",
    doc="meta.json lacks side, world_size, config or ranks: the setup cannot be checked, so the pair is "
    "never called equivalent.",
)


# ---------------------------------------------------------------------------------------------
# configuration: one check, five kinds


def check_config(ctx: Context) -> Finding | None:
    diffs, seed = ctx.config_diffs()
    if not diffs:
        return None
    if seed is not None:
        diffs = {**diffs, SEED_KEY: seed}
    lines = [f"{key}: {fmt(a)} vs {fmt(b)}" for key, (a, b) in diffs.items()]
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
    return finding(ctx, CONFIG_KINDS[kind], None, rank, evidence, facts, keys=keys)


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


CONFIG = Cause(
    "config",
    check_config,
    why="Configuration comes first in the causal order: whatever differs downstream (weights, samples, "
    "losses) may be its consequence, so fix it before reading anything after it.",
    fix="Give both sides the same value of {keys} (or leave a run-control key out with --ignore-config KEY).",
    doc="A resolved-config key differs between the sides: the key to align (`--ignore-config KEY` for "
    "run-control keys).",
)
CONFIG_THREADS = Cause(
    "config.threads",
    check_config,
    why="The number of intra-op threads decides how a CPU kernel splits its reductions, so different "
    "thread counts sum in a different order and round differently: typically the first loss already "
    "differs in its last bits and the runs drift apart from there.",
    fix="Pin threads on every rank of both sides: export OMP_NUM_THREADS=N and call torch.set_num_threads(N) "
    "before building the model (the config's `threads:` key).",
    doc="The intra-op thread counts differ (`ranks[r].threads`, OMP_NUM_THREADS): another reduction order.",
    requires=Evidence("a thread count that differs", lambda d: any("threads" in k for k in _differences(d))),
)
CONFIG_ARITHMETIC = Cause(
    "config.arithmetic",
    check_config,
    why="Another CPU, another ATen kernel set (ATEN_CPU_CAPABILITY), another BLAS path (MKL_CBWR) or another "
    "GPU adds and multiplies in another order or with other instructions: the same code rounds "
    "differently, typically from the first step, and the runs drift apart from there. Bits cannot "
    "match across these; the difference says nothing yet about the code.",
    fix="To compare the code bit for bit, run both sides under the same {keys}. Where they cannot share it "
    "(a laptop against CI, two GPU models), judge the pair against the rounding noise of that "
    "arithmetic, not its bits.",
    doc="Another CPU, ATen kernel set, BLAS path or GPU (`ranks[r].arithmetic`), said first: `raw ran "
    "with ATen capability DEFAULT, lightning with AVX512`.",
    requires=Evidence(
        "an arithmetic setting that differs", lambda d: any(".arithmetic." in k for k in _differences(d))
    ),
)
CONFIG_STATE = Cause(
    "config.state",
    check_config,
    why="Each rank records the state it ran under (thread counts, environment, the world as it saw it); "
    "these values change what or where a rank computes.",
    fix="Give every rank of both sides the same {keys} (set them in the launch environment, before the "
    "process group and the model are created).",
    doc="A rank's recorded state differs: its environment (`ranks[r].env`), the world it saw, a version.",
)
CONFIG_TORCH_FLAGS = Cause(
    "config.torch_flags",
    check_config,
    why="These global torch settings choose kernels and precisions (deterministic algorithms, cuDNN "
    "benchmark, TF32, float32 matmul precision, default dtype): the same code computes other bits.",
    fix="Set {keys} to the same value on every rank of both sides, before the model is built "
    "(Lightning's `deterministic=True` sets torch.use_deterministic_algorithms; spawned processes "
    "must set the flags themselves, Lightning #12685).",
    doc="A global torch setting differs (`ranks[r].torch_flags`: deterministic algorithms, TF32, matmul "
    "precision): Lightning #12685.",
)
CONFIG_KINDS = {
    cause.kind: cause for cause in (CONFIG, CONFIG_THREADS, CONFIG_ARITHMETIC, CONFIG_STATE, CONFIG_TORCH_FLAGS)
}


# ---------------------------------------------------------------------------------------------
# the sharding plan (FSDP2)


def check_sharding_plan(ctx: Context) -> Finding | None:
    """Both sides sharded with FSDP2, not alike: the fully_shard modules and policies each run read
    back from its model (meta.json `sharding`), so a plan hard-coded on one side shows too."""
    plans = {s: ctx.meta(s).get("sharding") for s in ("a", "b")}
    if not (plans["a"] and plans["b"]) or plans["a"] == plans["b"]:
        return None
    lines = _plan_differences(ctx, plans["a"], plans["b"])
    facts = f"The runs do not shard alike ({ctx.names[0]} vs {ctx.names[1]}): {'; '.join(lines)}."
    evidence = {"differences": lines, "sharding": ctx.both(plans["a"], plans["b"])}
    return finding(ctx, CONFIG_SHARDING, None, None, evidence, facts)


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


CONFIG_SHARDING = Cause(
    "config.sharding",
    check_sharding_plan,
    why="fully_shard decides which parameters are gathered and reduced together, and in which dtype: a "
    "bf16 reduce_dtype rounds every gradient sum to bf16; a module left out of the blocks is gathered "
    "with the root for the whole step (more memory per rank; at a world of 2 the same numbers).",
    fix="Apply one sharding plan on both sides: fully_shard on the same modules, then the root, with the "
    "same MixedPrecisionPolicy and reshard_after_forward (here ddp_parity.sharding.shard with the "
    "`fsdp:` section, which the raw loop, the LightningModule's configure_model and Fabric all call).",
    doc="`meta.sharding` differs: a module with its own `fully_shard` on one side only, another "
    "`reduce_dtype`/`param_dtype`/`reshard_after_forward`.",
)


# ---------------------------------------------------------------------------------------------
# the optimizer's param groups


# the param-group keys a scheduler changes as training goes (LambdaLR, StepLR, OneCycleLR's lr and its
# momentum or betas, CyclicLR's): read after a scheduler step (or set by hand) they differ between two
# records of an equal training, so they are compared as per-step series (the recorded lr), never as
# construction facts, unless a record made at the optimizer's construction holds them
SCHEDULED_KEYS = ("lr", "initial_lr", "momentum", "betas", "max_lr", "min_lr", "max_momentum", "base_momentum")
CYCLED_KEYS = ("momentum", "betas")  # moved by OneCycleLR and CyclicLR, always with the lr
# meta.json's record of every optimizer as constructed, before any scheduler touched it (written by the
# hooks of `ddp-parity record`, which see the construction): where both sides hold the stepped one, every
# key is compared
CONSTRUCTED_KEY = "optimizer_built"


def constructed_optimizer(meta: dict) -> dict | None:
    """The optimizer the run stepped, as constructed (meta.optimizer_built's entry marked `stepped`, its
    parameters named), or None where the run was not recorded by hooks or named no parameter."""
    stepped = [o for o in _built(meta) if o.get("stepped")]
    return stepped[0] if len(stepped) == 1 and stepped[0].get("named") else None


def check_param_groups(ctx: Context) -> Finding | None:
    constructed = [constructed_optimizer(ctx.meta(s)) for s in ("a", "b")]
    at_construction = all(isinstance(o, dict) for o in constructed)
    opt_a, opt_b = constructed if at_construction else (ctx.meta("a").get("optimizer"), ctx.meta("b").get("optimizer"))
    if not (isinstance(opt_a, dict) and isinstance(opt_b, dict)):
        return None
    na, nb = ctx.names
    if opt_a.get("class") and opt_b.get("class") and opt_a["class"] != opt_b["class"]:
        facts = f"The optimizers differ: {opt_a['class']} on {na}, {opt_b['class']} on {nb}."
        evidence = {"optimizer_class": ctx.both(opt_a["class"], opt_b["class"])}
        return finding(ctx, PARAM_GROUPS_CLASS, None, None, evidence, facts, a=na, b=nb, b_class=opt_b["class"])
    settings_a, settings_b = _settings_by_param(opt_a), _settings_by_param(opt_b)
    pairs = match_keys(list(settings_a), list(settings_b), None)
    only = {"a": pairs.pop("__only_a__"), "b": pairs.pop("__only_b__")}
    if at_construction and pairs:
        left_out = _trained_by_one_optimizer(ctx, only)
        if left_out is not None:
            return left_out
    # a key both sides recorded alike as every step ran: the value it was built with never reached an update
    # (the loop sets it before each step); one recorded apart is dated from the step it parts at
    used_alike = _used_alike_every_step(ctx, opt_a, opt_b)
    differing: dict[str, list] = {}
    for name, (ka, kb) in sorted(pairs.items()):
        sa, sb = settings_a[ka], settings_b[kb]
        for key in sorted(set(sa) | set(sb)):
            if used_alike(ka, kb, key):
                continue
            if not same_value(stable(sa.get(key)), stable(sb.get(key))):  # a function by its name, not address
                differing.setdefault(f"{key}: {fmt(sa.get(key))} vs {fmt(sb.get(key))}", []).append(name)
    reads = keys_the_optimizer_reads(str(opt_a.get("class") or ""))
    applied = _applied_apart_each_step(ctx, opt_a, opt_b, pairs, reads) if at_construction and reads else None
    if applied is not None:  # what each step applied is recorded: it, not the groups as built, is the training's
        own = {s: n for s, n in differing.items() if is_own_key(_key_of(s), reads)}
        if applied and not _same_members(opt_a, opt_b, pairs):
            return _applied_apart_finding(ctx, str(opt_a.get("class")), applied, own)
        # every setting the optimizer reads alike at every step (or apart in groups of the same members, which the
        # steps' own groups date: optimizer.hyperparameters): the program's own keys apart are no setup difference
        differing = {s: n for s, n in differing.items() if s not in own}
    if reads:  # a setting the optimizer reads leads; a key of the program's own is never said to be applied
        differing = dict(sorted(differing.items(), key=lambda item: is_own_key(_key_of(item[0]), reads)))
    if not at_construction:  # a scheduled key apart on every parameter may be a schedule read elsewhere
        apart = {s.split(":", 1)[0]: set() for s in differing}
        for setting, names in differing.items():
            apart[setting.split(":", 1)[0]].update(names)
        scheduled = {k for k, names in apart.items() if k in SCHEDULED_KEYS and len(names) == len(pairs)}
        if "lr" not in scheduled:  # no record holds a momentum or betas series: without the lr apart too (the
            scheduled -= set(CYCLED_KEYS)  # schedules that move them move the lr), they are the groups' own
        differing = {s: n for s, n in differing.items() if s.split(":", 1)[0] not in scheduled}
    if not differing:
        return _other_optimizers_apart(ctx) if at_construction else None
    lines = [f"{setting} for {_name_list(names)}" for setting, names in differing.items()]
    when = (
        "as constructed"
        if at_construction
        else "where no schedule explains them (an lr apart on every parameter, with the momentum or betas beside "
        "it, is compared step by step, as a schedule read at another point)"
    )
    facts = f"The optimizer's param groups differ {when} ({na} vs {nb}): {'; '.join(lines)}."
    facts += _lr_factor_words(ctx, settings_a, settings_b, pairs)
    setting, names = next(iter(differing.items()))
    key = setting.split(":", 1)[0]
    facts += _own_optimizer_words(opt_a, key)
    evidence = {"differences": {setting: names for setting, names in differing.items()}, "compared": when}
    why = GROUP_WHY.get(key, GROUP_WHY[""]).format(key=key, when=_from_when(ctx, key))
    if reads and is_own_key(key, reads):
        why = OWN_KEY_WHY.format(key=key, optimizer=opt_a.get("class"))
    fix = GROUPS_FIX.format(names=_name_list(names), key=key)
    only_lr = all(s.split(":", 1)[0] == "lr" for s in differing)
    if only_lr and _lr_ratio(settings_a, settings_b, pairs, every=True) is not None:
        fix = GROUPS_SCALED_FIX  # the same split on both sides, one rate scaled: no split to change
    return finding(ctx, PARAM_GROUPS, None, None, evidence, facts, why=why, fix=fix)


def _other_optimizers_apart(ctx: Context) -> Finding | None:
    """The optimizers each side built besides the one whose steps are counted (a GAN's generator's beside its
    discriminator's), each paired with the other side's holding the most of its parameters by name, compared as
    constructed: a setting apart there is that optimizer's param groups, from its first step."""
    others = [[o for o in _built(ctx.meta(s)) if o.get("named") and not o.get("stepped")] for s in ("a", "b")]
    na, nb = ctx.names
    for opt_a in others[0]:
        settings_a = _settings_by_param(opt_a)
        best = max(others[1], key=lambda o: len(set(_settings_by_param(o)) & set(settings_a)), default=None)
        if best is None:
            continue
        settings_b = _settings_by_param(best)
        shared = [name for name in settings_a if name in settings_b]  # in the optimizer's own order
        differing: dict[str, list] = {}
        for name in shared:
            sa, sb = settings_a[name], settings_b[name]
            for key in sorted(set(sa) | set(sb)):
                if not same_value(stable(sa.get(key)), stable(sb.get(key))):
                    differing.setdefault(f"{key}: {fmt(sa.get(key))} vs {fmt(sb.get(key))}", []).append(name)
        if not differing:
            continue
        lines = [f"{setting} for {_name_list(names)}" for setting, names in differing.items()]
        facts = (
            f"The {opt_a.get('class')} optimizer over {_name_list(shared, 3)} (built besides the one whose steps are "
            f"counted, the first to step) has other param groups as constructed ({na} vs {nb}): {'; '.join(lines)}."
        )
        setting, names = next(iter(differing.items()))
        key = setting.split(":", 1)[0]
        evidence = {"differences": differing, "compared": "as constructed", "optimizer": opt_a.get("class")}
        why = GROUP_WHY.get(key, GROUP_WHY[""]).format(key=key, when="from that optimizer's first step")
        fix = GROUPS_FIX.format(names=_name_list(names), key=key)
        return finding(ctx, PARAM_GROUPS, None, None, evidence, facts, why=why, fix=fix)
    return None


def _built(meta: dict) -> list[dict]:
    """meta.optimizer_built: every optimizer the hooks saw constructed ([] where the run was recorded otherwise)."""
    built = meta.get(CONSTRUCTED_KEY)
    return [o for o in built if isinstance(o, dict)] if isinstance(built, list) else []


def _trained_by_one_optimizer(ctx: Context, only: dict) -> Finding | None:
    """The stepped optimizers as constructed, every parameter of one paired with the other's, where the other
    also holds parameters of its own that it trains (frozen ones aside): the first side's optimizer leaves them
    out, so they keep their initial values there (a GAN's discriminators chained into one optimizer, one left
    out)."""
    extra = {s: [n for n in only[s] if n not in set(ctx.meta(s).get("params_frozen") or [])] for s in ("a", "b")}
    if bool(extra["a"]) == bool(extra["b"]):
        return None  # none, or each side has its own: the pairing, not the optimizers, is what differs
    holder = "a" if extra["a"] else "b"
    lacking = "b" if holder == "a" else "a"
    names = extra[holder]
    facts = (
        f"The optimizers as constructed train other parameters: {ctx.label(holder)}'s holds {len(names)} parameter(s) "
        f"that {ctx.label(lacking)}'s does not ({_name_list(names)}), every one of {ctx.label(lacking)}'s being "
        f"{ctx.label(holder)}'s too."
    )
    side, other = ctx.label(lacking), ctx.label(holder)
    why = (
        f"An optimizer updates only the parameters it is given: on {side} those parameters keep what they had "
        f"(whatever gradients they get, no step applies them), on {other} they train."
    )
    fix = (
        f"On {side}, give the optimizer the same parameters as on {other} ({_name_list(names, 3)}): build it over "
        "every module it should train (itertools.chain of each module's parameters())."
    )
    evidence = {"optimizer_params_alone": {ctx.label(holder): names}, "compared": "as constructed"}
    return finding(ctx, PARAM_GROUPS, None, None, evidence, facts, why=why, fix=fix)


def recorded_groups(ctx: Context, rank=0):
    """[(step, a's groups, b's groups)] of the param groups the records hold as each step ran (the hooks'
    `param_groups`, every key but the params), at the aligned steps where both sides hold the same number."""
    out = []
    for ra, rb in aligned_records(ctx, rank):
        ga, gb = ra.get("param_groups"), rb.get("param_groups")
        if isinstance(ga, list) and isinstance(gb, list) and ga and len(ga) == len(gb):
            if all(isinstance(g, dict) for g in (*ga, *gb)):
                out.append((ra.get("step"), ga, gb))
    return out


def _used_alike_every_step(ctx: Context, opt_a: dict, opt_b: dict):
    """(a's name, b's name, key) -> whether every recorded step ran both parameters with the same value of the key:
    the records hold each group's values, not its parameters, so a parameter's value is its group's where the
    optimizer's groups are known by name (a parameter in the weight-decay group on one side and in the other
    group on the other used other values at every step, though each group's own values were alike). Without
    named groups, a key alike in every group at every step is alike for every parameter."""
    index_a, index_b = _group_index(opt_a), _group_index(opt_b)
    if not (index_a and index_b):
        alike = keys_used_alike_every_step(ctx)
        return lambda ka, kb, key: key in alike
    steps = [(ra.get("param_groups"), rb.get("param_groups")) for ra, rb in aligned_records(ctx, 0)]
    if not steps or not all(isinstance(ga, list) and isinstance(gb, list) for ga, gb in steps):
        return lambda ka, kb, key: False
    known: dict[tuple, bool] = {}

    def used_alike(ka: str, kb: str, key: str) -> bool:
        where = (index_a.get(ka), index_b.get(kb), key)
        if where not in known:
            ia, ib, _ = where
            known[where] = (
                ia is not None
                and ib is not None
                and all(
                    ia < len(ga)
                    and ib < len(gb)
                    and isinstance(ga[ia], dict)
                    and isinstance(gb[ib], dict)
                    and key in ga[ia]
                    and key in gb[ib]
                    and json.dumps(ga[ia][key], default=str) == json.dumps(gb[ib][key], default=str)
                    for ga, gb in steps
                )
            )
        return known[where]

    return used_alike


def _group_index(optimizer: dict) -> dict[str, int]:
    """{parameter name: the index of its param group} as the optimizer was recorded ({} where it names none)."""
    out = {}
    for index, group in enumerate(optimizer.get("param_groups") or []):
        if isinstance(group, dict):
            for name in group.get("params") or []:
                out[str(name)] = index
    return out


def keys_used_alike_every_step(ctx: Context) -> set[str]:
    """The param-group keys both sides recorded in every group at every aligned step with the same values (none
    where a step's groups are missing on a side): what each update used, whatever the optimizer was built with,
    which a loop that sets them before each step overwrites."""
    steps = recorded_groups(ctx)
    if not steps or len(steps) != sum(1 for _ in aligned_records(ctx, 0)):
        return set()
    keys = None
    for _, ga, gb in steps:
        for group in (*ga, *gb):
            keys = set(group) if keys is None else keys & set(group)
    return {k for k in (keys or set()) - {"params"} if _first_step_apart(steps, k) is None}


def _first_step_apart(steps: list, key: str):
    """The first recorded step whose groups hold another `key` on the two sides, None where none does."""
    for step, ga, gb in steps:
        if any(json.dumps(a.get(key), default=str) != json.dumps(b.get(key), default=str) for a, b in zip(ga, gb)):
            return step
    return None


def _from_when(ctx: Context, key: str, step=None) -> str:
    """ "from the first step on", or from the first recorded step whose groups hold `key` apart (`step`, or found
    where the steps' groups were recorded alike in number; a warmup from 0 leaves the first steps alike)."""
    steps = recorded_groups(ctx)
    if step is None:
        step = _first_step_apart(steps, key) if steps else None
    first = next((ra.get("step") for ra, _ in aligned_records(ctx, 0)), None)
    if step is None or step == first:
        moving = _first_step_with_a_rate(ctx) if key != "lr" else None
        if moving is not None and moving > 1:  # a warmup from 0: the steps before moved no parameter
            return (
                f"from step {moving} on (the first whose recorded lr is above 0 on both sides; the steps before moved "
                "nothing)"
            )
        return "from the first step on"
    return f"from step {step} on (the first step whose recorded {key} differs; the steps before used the same)"


def _first_step_with_a_rate(ctx: Context) -> int | None:
    """The first aligned step whose recorded lr is above 0 on both sides (None where a side recorded none)."""
    for ra, rb in aligned_records(ctx, 0):
        la, lb = ra.get("lr"), rb.get("lr")
        if not isinstance(la, (int, float)) or not isinstance(lb, (int, float)):
            return None
        if la > 0 and lb > 0:
            return ra.get("step")
    return None


def _own_optimizer_words(opt: dict, key: str) -> str:
    """A sentence where the optimizer is none of torch's (MoCo v3's LARS, a program's own): which parameters it applies
    a group's setting to is its own code's choice, so the names listed are those the groups hold."""
    name = str(opt.get("class") or "")
    if not name or _torch_optimizer_class(name) is not None:
        return ""
    return (
        f" {name} is not one of torch's optimizers: which of these parameters it applies {key} to is its own code's "
        "choice (a LARS skips 1-D parameters), so the names are those its param groups hold."
    )


def _lr_ratio(settings_a: dict, settings_b: dict, pairs: dict, every: bool = False) -> float | None:
    """k where every group's lr apart on one side is the other's times one whole number k (-k: the second side's
    is the larger); `every`: only where every paired parameter's lr is apart so. None otherwise."""
    ratios = set()
    for ka, kb in pairs.values():
        a, b = settings_a[ka].get("lr"), settings_b[kb].get("lr")
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))) or a == b or not a or not b:
            if every:
                return None
            continue
        ratios.add(round(max(a, b) / min(a, b), 9) * (1 if a > b else -1))
    if len(ratios) != 1:
        return None
    ratio = ratios.pop()
    return ratio if abs(abs(ratio) - round(abs(ratio))) <= 1e-9 else None


def _lr_factor_words(ctx: Context, settings_a: dict, settings_b: dict, pairs: dict) -> str:
    """Where every group's lr on one side is the other's times one whole number k (or 1/k), k named, with the
    world size where k is it: an lr scaled by the world size, or worked out from another batch (global vs per
    rank)."""
    ratio = _lr_ratio(settings_a, settings_b, pairs)
    if ratio is None:
        return ""
    k = abs(ratio)
    big, small = (ctx.names[0], ctx.names[1]) if ratio > 0 else (ctx.names[1], ctx.names[0])
    world = ctx.meta("a").get("world_size")
    every = _lr_ratio(settings_a, settings_b, pairs, every=True) is not None
    apart = sum(1 for ka, kb in pairs.values() if settings_a[ka].get("lr") != settings_b[kb].get("lr"))
    scope = "in every group" if every else f"for the {apart} parameter(s) whose lr differs (the others' are equal)"
    said = f" {big}'s lr is {round(k)} × {small}'s {scope}"
    if every and isinstance(world, int) and round(k) == world:
        said += (
            f"; {round(k)} is the world size: an lr scaled by the world size on one side, or worked out from the "
            "global batch on one side and from each rank's share on the other (lr × batch_size / 256 before or "
            "after the batch is divided by the processes)"
        )
    return said + "."


# ---------------------------------------------------------------------------------------------
# the settings the optimizer reads, as each step ran


def _torch_optimizer_class(name: str) -> type | None:
    """torch.optim's optimizer class of that name, None where the class is none of torch's (a program's own)."""
    found = getattr(torch.optim, name, None) if name else None
    return found if isinstance(found, type) and issubclass(found, torch.optim.Optimizer) else None


@functools.cache
def keys_the_optimizer_reads(class_name: str) -> frozenset[str] | None:
    """The param-group keys a torch optimizer reads as it steps: its `defaults`' keys (every group is filled from
    them, and step() reads nothing else of a group), found by building one over a 1-element tensor. A key besides
    them is the program's own (VAR's lr_sc, wd_sc: scales its loop reads to set lr and weight_decay by hand). None
    for a class that is none of torch's: which keys its own code reads, the records cannot say."""
    optimizer = _torch_optimizer_class(class_name)
    if optimizer is None:
        return None
    try:
        return frozenset(optimizer([torch.zeros(1, requires_grad=True)]).defaults)
    except Exception:  # a constructor that needs more than the parameters: the keywords it takes are its defaults
        return frozenset(p for p in inspect.signature(optimizer).parameters if p != "params")


def _key_of(setting: str) -> str:
    """The key of a difference's label ("weight_decay: 0.0 vs 0.05" -> "weight_decay")."""
    return setting.split(":", 1)[0]


def is_own_key(key: str, reads: frozenset[str] | None) -> bool:
    """A key the optimizer never reads and no scheduler keeps (initial_lr, max_lr ... stay compared as before):
    the program's own, which acts only where its loop reads it."""
    return reads is not None and key not in reads and key not in SCHEDULED_KEYS


def _applied_apart_each_step(ctx: Context, opt_a: dict, opt_b: dict, pairs: dict, reads: frozenset[str]):
    """{"key: a's vs b's": (names, first step)} of the settings the optimizer reads that the steps ran with apart,
    per parameter: its group's values in each step's recorded param_groups, the groups known by name as
    constructed, the values said at the first step they part. A scheduled key (the lr) apart on every parameter is
    left to the lr's series. None where a side's steps hold no groups, or another number of groups than it was
    built with (a group added later): the steps' groups cannot be given to the parameters."""
    index_a, index_b = _group_index(opt_a), _group_index(opt_b)
    built = (len(opt_a.get("param_groups") or []), len(opt_b.get("param_groups") or []))
    steps = [(ra.get("step"), ra.get("param_groups"), rb.get("param_groups")) for ra, rb in aligned_records(ctx, 0)]
    if not (index_a and index_b and steps) or not all(
        _groups_as_built(ga, built[0]) and _groups_as_built(gb, built[1]) for _, ga, gb in steps
    ):
        return None
    by_groups: dict[tuple, dict] = {}  # a few pairs of groups, however many parameters
    apart: dict[str, tuple[list, int]] = {}
    for name, (ka, kb) in sorted(pairs.items()):
        where = (index_a.get(ka), index_b.get(kb))
        if None in where:
            continue
        if where not in by_groups:
            by_groups[where] = _settings_apart(steps, *where, reads)
        for setting, step in by_groups[where].items():
            names, first = apart.get(setting, ([], step))
            apart[setting] = ([*names, name], min(first, step))
    scheduled = {_key_of(s) for s, (names, _) in apart.items() if _key_of(s) in SCHEDULED_KEYS}
    every = {
        k for k in scheduled if len({n for s, (ns, _) in apart.items() if _key_of(s) == k for n in ns}) == len(pairs)
    }
    return {s: found for s, found in apart.items() if _key_of(s) not in every}


def _same_members(opt_a: dict, opt_b: dict, pairs: dict) -> bool:
    """Both optimizers built with as many groups, every paired parameter in the group of the same place: the steps'
    groups then pair group by group."""
    index_a, index_b = _group_index(opt_a), _group_index(opt_b)
    if len(opt_a.get("param_groups") or []) != len(opt_b.get("param_groups") or []):
        return False
    return all(index_a.get(ka) == index_b.get(kb) for ka, kb in pairs.values())


def _groups_as_built(groups, count: int) -> bool:
    return isinstance(groups, list) and len(groups) == count and all(isinstance(g, dict) for g in groups)


def _settings_apart(steps: list, ia: int, ib: int, reads: frozenset[str]) -> dict[str, int]:
    """{"key: a's vs b's": the first step} of each key the optimizer reads that group ia on one side and ib on the
    other held apart at some recorded step (the values of that step)."""
    out = {}
    for key in sorted(reads):
        for step, ga, gb in steps:
            va, vb = ga[ia].get(key), gb[ib].get(key)
            if json.dumps(va, default=str) != json.dumps(vb, default=str):
                out[f"{key}: {fmt(va)} vs {fmt(vb)}"] = step
                break
    return out


def _applied_apart_finding(ctx: Context, optimizer: str, applied: dict, own: dict) -> Finding:
    """The settings the optimizer read apart as the steps ran lead; the program's own keys apart as constructed on
    those parameters only are their likely reason (its loop sets the read ones from them), the others are said
    inert (apart where every setting the optimizer reads was alike)."""
    na, nb = ctx.names
    lines = [f"{setting} from step {step} for {_name_list(names)}" for setting, (names, step) in applied.items()]
    facts = f"The settings {optimizer} reads differ as each step ran ({na} vs {nb}): {'; '.join(lines)}."
    facts += _group_counts_words(ctx)
    parted = {n for names, _ in applied.values() for n in names}
    likely = {s: names for s, names in own.items() if set(names) <= parted}
    inert = {s: names for s, names in own.items() if s not in likely}
    keys = sorted({_key_of(s) for s in applied})
    if likely:
        facts += (
            f" The param groups also hold keys of the program's own, which {optimizer} never reads, apart as "
            f"constructed on these parameters: {'; '.join(f'{s} for {_name_list(n)}' for s, n in likely.items())}: "
            f"the likely reason, where the loop sets {', '.join(keys)} from them before each step."
        )
    if inert:
        facts += (
            f" Also apart as constructed, keys {optimizer} never reads that are apart as well on parameters whose "
            f"every setting it reads was alike at every step, so they alone part nothing: "
            f"{'; '.join(f'{s} for {_name_list(n)}' for s, n in inert.items())}."
        )
    setting, (names, step) = next(iter(applied.items()))
    key = _key_of(setting)
    evidence = {
        "differences": {s: found[0] for s, found in applied.items()},
        "compared": "as each step ran",
        "first_step": {s: found[1] for s, found in applied.items()},
    }
    if own:
        evidence["own_keys_as_constructed"] = {"likely": likely, "inert": inert}
    why = GROUP_WHY.get(key, GROUP_WHY[""]).format(key=key, when=_from_when(ctx, key, step))
    fix = GROUPS_FIX.format(names=_name_list(names), key=key)
    if likely:
        fix = fix[:-1] + GROUPS_OWN_KEYS_FIX.format(key=key, own=", ".join(sorted({_key_of(s) for s in likely})))
    return finding(ctx, PARAM_GROUPS, None, None, evidence, facts, why=why, fix=fix)


def _group_counts_words(ctx: Context) -> str:
    """How many param groups each side built its optimizer with, where the counts differ (a split against one
    group: the usual way weight decay is left off biases and norms on one side only); "" where alike or unknown."""
    counts = [len((constructed_optimizer(ctx.meta(s)) or {}).get("param_groups") or []) for s in ("a", "b")]
    if not all(counts) or counts[0] == counts[1]:
        return ""
    return f" {ctx.names[0]} built it with {counts[0]} param group(s), {ctx.names[1]} with {counts[1]}."


# why a param-group key that differs changes the update, by key
GROUP_WHY = {
    "weight_decay": "The optimizer applies each group's weight decay to its parameters, so these parameters are "
    "updated differently {when}: a typical split is weight decay on every parameter on one side "
    "and biases and norms excluded on the other.",
    "": "The optimizer applies each group's {key} to its parameters, so these parameters are updated differently "
    "{when}.",
}


def _settings_by_param(optimizer: dict) -> dict[str, dict]:
    out = {}
    for group in optimizer.get("param_groups") or []:
        if not isinstance(group, dict):
            continue
        hyper = {k: v for k, v in group.items() if k != "params" and k not in SCHEDULER_BOOKKEEPING}
        for name in group.get("params") or []:
            out[str(name)] = hyper
    return out


def _name_list(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


GROUPS_FIX = (
    "Build the same param groups on both sides: give {names} the same {key} on both sides (one param group for "
    "them, or the same split)."
)
# the program's own key its loop sets a setting from, apart on the parameters whose setting parts
GROUPS_OWN_KEYS_FIX = (
    "; where the loop sets {key} from the groups' own keys ({own}), build the groups with the same values of those "
    "keys on both sides."
)
# a key of the program's own apart as constructed, the settings each step used unrecorded
OWN_KEY_WHY = (
    "{optimizer} never reads {key}: it is a key of the program's own, which acts only where its loop reads it to set "
    "what the optimizer does read (lr, weight_decay) before each step. The settings each step ran with were not "
    "recorded, so whether these parameters were updated differently is unchecked."
)
# every parameter's lr k × the other's: the groups are split alike, the rate they were all given differs
GROUPS_SCALED_FIX = (
    "Give the optimizer the same base learning rate on both sides: the lr it is built with, or the expression "
    "that computes it (from the batch size per rank or in all, and the world size); the split into groups is "
    "not what differs."
)

PARAM_GROUPS = Cause(
    "param_groups",
    check_param_groups,
    why="{why}",
    fix="{fix}",
    doc="`meta.optimizer`'s groups give some parameters other settings (weight decay on biases on one "
    "side only): where the hooks recorded the groups as built (`meta.optimizer_built`) and as each step ran "
    "(`param_groups`), the settings a torch optimizer reads (its `defaults`' keys) are compared per parameter as the "
    "steps ran, and a program's own group keys (VAR's `lr_sc`, `wd_sc`) are named as their likely reason, never as "
    "applied; otherwise as constructed, or where no schedule explains them (an lr apart on every parameter, with "
    "the momentum or betas beside it, is a per-step series; a momentum apart alone is the groups' own).",
)
PARAM_GROUPS_CLASS = Cause(
    "param_groups.class",
    check_param_groups,
    why="Another optimizer class computes another update from the same gradients.",
    fix="Use {b_class} on {a} as on {b} (or the other way round), with the same hyperparameters.",
    doc="The optimizer classes differ.",
)


# ---------------------------------------------------------------------------------------------
# the initial weights


def check_tied(ctx: Context) -> Finding | None:
    """meta.tied (written at finish(model)) differs: weights tied on one side only, or tied otherwise."""
    metas = [ctx.meta(s) for s in ("a", "b")]
    if not all(m.get("finished") for m in metas):
        return None  # a run that never finished with its model records no ties: unrecorded, not untied
    ties = [_ties(m.get("tied")) for m in metas]
    if ties[0] == ties[1]:
        return None
    said = [", ".join(f"{k} = {v}" for k, v in sorted(t.items())) or "none" for t in ties]
    side = ctx.label("a" if len(ties[0]) > len(ties[1]) else "b")
    evidence = {"tied": ctx.both(*said)}
    facts = (
        f"The parameters tied to another (meta.tied) differ: {said[0]} on {ctx.names[0]}, {said[1]} on {ctx.names[1]}."
    )
    return finding(ctx, TIED, None, None, evidence, facts, side=side)


def _ties(tied) -> dict:
    """{alias: the name it shares its tensor with}, without a wrapper's prefix (`module.`, or one leading
    attribute every name has, a LightningModule's `net.`)."""
    if not isinstance(tied, dict):
        return {}
    pairs = {strip_known_prefixes(str(k)): strip_known_prefixes(str(v)) for k, v in tied.items()}
    names = [n for pair in pairs.items() for n in pair]
    if len({n.split(".", 1)[0] for n in names}) == 1 and all("." in n for n in names):
        pairs = {k.split(".", 1)[1]: v.split(".", 1)[1] for k, v in pairs.items()}
    return pairs


def check_init(ctx: Context) -> Finding | None:
    found = init_finding(ctx)
    if found is None:
        return None
    init = init_digests(ctx.meta("a")), init_digests(ctx.meta("b"))
    if not found["across"]:  # every rank built what the same rank of the other side built: nothing to make equal
        ctx.cache["init_note"] = (
            "init_params_sha256 differs between the ranks of each side, and each rank's matches the same rank's on "
            "the other side (a seed per rank, alike on both): DDP broadcasts rank 0's weights at construction"
        )
        return None
    if not found["rank0_differs"]:  # whether or not the runs part later: rank 0's weights are every rank's start
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
        drawn = [draws_before_wrap(ctx.run(s), 0) for s in ("a", "b")]
        if None not in drawn and len(drawn[0]) != len(drawn[1]) and parts:
            evidence["loader_draws_before_the_model"] = ctx.both(*drawn)
            parts[0] = parts[0].rstrip(".") + (  # the headline: the one recorded draw that differs
                ", and between the last seed and DDP's wrap of the model (where the hooks digest the initial weights) "
                f"rank 0 iterated {len(drawn[0])} DataLoader(s) drawing from the global generator on {ctx.names[0]} "
                f"({', '.join(drawn[0]) or 'none'}) and {len(drawn[1])} on {ctx.names[1]} "
                f"({', '.join(drawn[1]) or 'none'})."
            )
            parts.append(
                "Each such iterator draws one number (its workers' base seed), so a model built after it draws other "
                "initial weights: iterate the loaders after building the model, or alike on both sides."
            )
        one = one_parameter_apart(ctx, 1, 0)
        if one is not None:
            evidence["params_differing"] = one
            return finding(ctx, INIT_PARAMETER, None, 0, evidence, " ".join(parts) + " " + _one_sentence(one), **one)
    first = _built_before_the_seed(ctx, found["within"])
    if first is not None:
        side, seeds = first
        evidence["seeds_before_step_1_alike_on_every_rank"] = {"side": ctx.label(side), "seeds": seeds}
        parts.append(
            f"Yet every rank of {ctx.label(side)} seeded the same value before step 1 ({fmt(seeds)} on each, as the "
            "hooks recorded), and a seed puts every rank's generator in one state."
        )
        return finding(ctx, INIT, None, found["rank"], evidence, " ".join(parts), **_init_built_first(ctx.label(side)))
    return finding(ctx, INIT, None, found["rank"], evidence, " ".join(parts), **INIT_USUAL)


def _built_before_the_seed(ctx: Context, within: dict) -> tuple[str, list] | None:
    """(the side, its seeds) where one side's ranks built other weights although each of its ranks recorded the
    same seeds before step 1, the other side's ranks building alike: weights drawn by one code after one seed are
    equal on every rank, so these were drawn before it (or from a generator no seed set)."""
    apart = [side for side, differs in within.items() if differs]
    recorded = seeds_by_rank(ctx)
    if len(apart) != 1 or not recorded or len(recorded) < 2:
        return None
    side = apart[0]
    seeds = [list(pair[0 if side == "a" else 1]) for pair in recorded.values()]
    if not seeds[0] or any(s != seeds[0] for s in seeds):
        return None
    return side, seeds[0]


def _init_built_first(side: str) -> dict:
    return {
        "mechanism": f"The weights were drawn before that seed: {side} builds its model before seeding (or draws "
        "them from a generator no seed set), so each rank draws them from a state of its own.",
        "how": f"On {side}, build the model after the seed (Lightning: seed_everything before the LightningModule "
        "is constructed, or the network built in configure_model), as the other side does",
    }


def one_parameter_apart(ctx: Context, step: int, rank) -> dict | None:
    """{param, equal}: where the module watch of `step` finds exactly one parameter different before the
    step's first forward and the others equal (at least one), the shape of the evidence says no seed is the
    cause (another RNG state changes every parameter): that parameter was initialised or loaded otherwise."""
    found = params_differing_before(ctx.run("a"), ctx.run("b"), step, rank)
    if found is None or len(found[0]) != 1 or found[1] < 2:
        return None
    return {"param": found[0][0], "equal": found[1] - 1}


def _one_sentence(one: dict) -> str:
    return (
        f"The module watch finds only {one['param']} different before step 1; the other {one['equal']} parameter(s) "
        "are equal."
    )


TIED = Cause(
    "tied",
    check_tied,
    why="A tied weight is one tensor under two names: its gradient is the sum of both uses and one update moves "
    "both; untied, each name has its own tensor, gradient and update, and the two start apart.",
    fix="Tie the same parameters on both sides ({side} ties what the other does not): assign the one tensor to "
    "both attributes (lm_head.weight = wte.weight) after building the model, or tie on neither.",
    doc="meta.tied differs: weights tied on one side only (or tied to another parameter).",
)
INIT_PARAMETER = Cause(
    "init.parameter",
    check_init,
    why="One parameter apart with every other equal is no other RNG state (a seed changes every parameter): "
    "{param} is initialised, loaded or overwritten otherwise on one side (its own init call, a checkpoint or "
    "pretrained tensor, a tied weight).",
    fix="Initialise {param} the same way on both sides: the same init call (or none), in the same order, or load "
    "it from the same source.",
    doc="One parameter different at step 1 (the watch's `params_before`), every other equal: that parameter "
    "initialised or loaded otherwise, never a seed.",
)
INIT_USUAL = {
    "mechanism": "The usual cause is the model being built under a different RNG state: another seed, seeding "
    "after instead of before building the network, or an extra random draw between seeding and construction.",
    "how": "Seed identically and build the model right after seeding on both sides (seed_everything pinned to an "
    "integer, the network constructed before anything else draws random numbers)",
}
INIT = Cause(
    "init",
    check_init,
    why="{mechanism}",
    fix="{how}.",
    doc="`init_params_sha256` differs on rank 0 across the sides (or the watch finds a parameter "
    "different before step 1): the model built under another RNG state.",
)
