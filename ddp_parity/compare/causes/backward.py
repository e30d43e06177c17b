"""Causes between the loss and the step, read from the gradient norm: how a side recorded it, the
order the gradients were summed in (clipping, DDP against FSDP2), a factor of k, a gradient that
is not what the modules computed, FSDP2's gradient sync under accumulation.

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

from ddp_parity.compare import pairing, relations
from ddp_parity.compare.causes.base import (
    FEW_ULPS,
    Cause,
    Context,
    Evidence,
    aligned_records,
    config_values,
    consumed_words,
    finding,
    float32_ulps,
    fmt,
    loss_unrecorded_at,
    max_relative,
    nonzero,
    ratio_of,
    recording,
    same_loss_words,
    same_param_sets,
    samples_equal_at,
)
from ddp_parity.compare.causes.fed import rounding_refused
from ddp_parity.compare.causes.forward import (
    LATER_FACTOR,
    carries_step,
    counts_ruled_out,
    equal_nonzero_before,
    factor_mechanisms,
    factor_of,
    steps_carrying_words,
)
from ddp_parity.compare.causes.hooked import AVERAGED_BY_DDP_ALIKE, averaged_by_ddp_alike
from ddp_parity.compare.causes.undetermined import earlier_update_candidates, undetermined, watch_found_all_equal
from ddp_parity.compare.comparator import match_keys
from ddp_parity.compare.evaluations import validations
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.pairing import param_order
from ddp_parity.compare.walk import records_of
from ddp_parity.watch import read_module_trace

ROUNDED_QUANTITIES = ("loss", "grad_norm", "param_digest", "validation", "final_params")
ROUNDING_RELATIVE = 1e-5  # a first difference this small is float32 rounding (2^-23 is 1.2e-7 per ulp)


# ---------------------------------------------------------------------------------------------
# a parameter with a gradient on one side only


def check_frozen(ctx: Context) -> Finding | None:
    """At the first divergence's watched step, a parameter has a .grad on one side and none on the
    other: it is frozen (requires_grad=False), detached or unused there. That is the cause, not the
    module whose backward then differs (nothing upstream of a frozen embedding needs its gradient)."""
    f = ctx.earliest
    if f is None or f.get("step") is None:
        return None
    relation = _one_sided_grads(ctx, f["step"], f["rank"]) or _one_sided_grad_rows(ctx, f["step"], f["rank"])
    if relation is None:
        return None
    names = relation.value.split(", ")
    facts = (
        f"{relation.sentence[:-1]}: {relation.side}'s step has no gradient for them, so it leaves them as they were."
    )
    evidence = {"relation": relation.to_json(), "frozen_side": relation.side, "params": names}
    return finding(ctx, FROZEN, f["step"], f["rank"], evidence, facts, side=relation.side, params=", ".join(names))


def _one_sided_grads(ctx: Context, step: int, rank) -> relations.Relation | None:
    """The parameters the module watch saw with a .grad on one side only at `step` (names matched as
    the comparator matches them: a LightningModule's `net.` prefix is no difference)."""
    watched = [read_module_trace(ctx.run(s), rank).get(step) or {} for s in ("a", "b")]
    grads_a, grads_b = (w.get("param_grads") or {} for w in watched)
    if not grads_a or not grads_b:
        return None  # unrecorded (or nothing had a gradient): no relation to read
    # only the parameters both watches hold: a program of several DDP wrappers (a GAN's generator and
    # discriminators) is watched through its first wrapper, a LightningModule whole
    held_a, held_b = ({**(w.get("params_after") or {}), **(w.get("params_before") or {})} for w in watched)
    pairs = match_keys(list(held_a or grads_a), list(held_b or grads_b), None)
    pairs.pop("__only_a__", None), pairs.pop("__only_b__", None)
    # a .grad only the step's optimizer reads matters (a GAN's other optimizer leaves its gradients in place)
    return _one_side(ctx, step, pairs, (held_a or grads_a, held_b or grads_b), (set(grads_a), set(grads_b)))


def _one_sided_grad_rows(ctx: Context, step: int, rank) -> relations.Relation | None:
    """The parameters whose layer row at `step` holds a gradient norm on one side and none (NaN: no .grad as the
    optimizer stepped) on the other, rows paired by name, among those the recorded optimizer steps: where no
    module watch holds the step (a loop that sets a parameter's .grad to None for its first iterations)."""
    rows = []
    for s in ("a", "b"):
        names = ((ctx.meta(s).get("layers") or {}).get("names")) or []
        record = next((r for r in records_of(ctx.run(s), rank) if r.get("step") == step), None)
        layers = record.get("layers") if isinstance(record, dict) else None
        if not isinstance(layers, list) or len(layers) != len(names):
            return None
        rows.append({str(n): row for n, row in zip(names, layers) if isinstance(row, list) and len(row) > 1})
    pairs = match_keys(list(rows[0]), list(rows[1]), None)
    pairs.pop("__only_a__", None), pairs.pop("__only_b__", None)
    graded = tuple({n for n, row in r.items() if _has_grad(row[1])} for r in rows)
    return _one_side(ctx, step, pairs, rows, graded)


def _one_side(ctx: Context, step: int, pairs: dict, held: tuple, graded: tuple) -> relations.Relation | None:
    """The relation where paired parameters (`pairs`' (a's name, b's name)) that the recorded optimizer steps have
    a gradient on one side only (`graded`: each side's names with one), all on the same side; None otherwise."""
    stepped = [_stepped_of(ctx.meta(s), names) for s, names in zip(("a", "b"), held)]
    only: tuple[list, list] = ([], [])
    for a, b in pairs.values():
        has = (a in graded[0], b in graded[1])
        if has[0] != has[1] and all(st is None or n in st for st, n in zip(stepped, (a, b))):
            only[0 if has[0] else 1].append(a if has[0] else b)
    if only[0] and not only[1]:  # b lacks them
        return relations.one_side_relation(ctx.names[1], ctx.names[0], only[0], step)
    if only[1] and not only[0]:
        return relations.one_side_relation(ctx.names[0], ctx.names[1], only[1], step)
    return None


def _has_grad(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # NaN: no gradient


def _stepped_of(meta: dict, watched) -> set[str] | None:
    """Which of the watch's parameter names the recorded optimizer steps (meta.optimizer, by name), None where
    that is unknown. The watch may hold one DDP wrapper's module (names without its attribute in the program:
    `conv_pre.bias`) where the optimizer's and the layers' names are the whole program's (`generator.conv_pre.bias`):
    the attribute is the one that makes every watched name a recorded layer's."""
    stepped = pairing.recorded_optimizer_names(meta)
    if stepped is None:
        return None
    layers = meta.get("layers") if isinstance(meta.get("layers"), dict) else {}
    known = {str(n) for n in (layers.get("names") or [])} | stepped
    watched = list(watched)
    if all(n in known for n in watched):
        return {n for n in watched if n in stepped}
    for prefix in sorted({k.split(".", 1)[0] for k in known if "." in k}):
        if all(f"{prefix}.{n}" in known for n in watched):
            return {n for n in watched if f"{prefix}.{n}" in stepped}
    return None


FROZEN = Cause(
    "frozen",
    check_frozen,
    why="A parameter with no gradient at a step (requires_grad off, a part of the model its loss does not use, or "
    "its .grad set to None before the step, as a loop that keeps a layer still for its first iterations does) is "
    "not updated there; every module whose backward would have fed it then differs only as a consequence.",
    fix="On {side}, give these parameters a gradient at the same steps as the other side: do not set "
    "requires_grad_(False) on {params}, or set their .grad to None at the same iterations on both sides (or freeze "
    "the same parameters on both sides, and build the optimizer after).",
    doc="A parameter has a `.grad` on one side only at the first divergence's step (the module watch, or the "
    "step's layer rows): frozen (`requires_grad_(False)`), detached, unused or its `.grad` set to None on that "
    "side; the parameters named.",
    requires=Evidence("a parameter with a gradient on one side only", lambda d: bool(d.evidence.get("params"))),
)


# ---------------------------------------------------------------------------------------------
# DDP against FSDP2 at a world of more than 2


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
    relative = max_relative(f["a"], f["b"])
    if relative is None or relative > ROUNDING_RELATIVE:
        return None
    fsdp = ctx.label("a" if sharded["a"] else "b")
    facts = (
        f"{fsdp} shards with FSDP2, the other side replicates with DDP, at a world of {world}; the first "
        f"difference is the {f['quantity']} at step {f['step']} rank {f['rank']} ({fmt(f['a'])} vs {fmt(f['b'])}, "
        f"relative {relative:.1e}), with the same samples and everything before it equal."
    )
    evidence = {f["quantity"]: ctx.both(f["a"], f["b"]), "relative": relative, "world_size": world, "sharded": fsdp}
    return finding(ctx, REDUCTION_ORDER_SHARDING, f["step"], f["rank"], evidence, facts, world=world)


REDUCTION_ORDER_SHARDING = Cause(
    "reduction_order.sharding",
    check_sharded_reduction,
    why="DDP sums each gradient across ranks in an all-reduce, FSDP2 in a reduce-scatter; with {world} "
    "terms the two add in different orders and round differently in the last bits. Neither side is "
    "wrong: this is the legitimate difference between the strategies, and it grows from step to step "
    "as rounding does.",
    fix="Nothing to fix in either loop. The exact verdict cannot call these runs equal; judge them against "
    "measured noise (--tolerance noise), or compare at a world of 2, where DDP and FSDP2 agree bit for bit.",
    doc="One side sharded with FSDP2, the other DDP, world > 2, everything before equal, the first "
    "difference within 1e-5 relative: all-reduce and reduce-scatter sum in other orders (legitimate).",
)


# ---------------------------------------------------------------------------------------------
# DDP's gradient sync per micro-batch (no_sync, require_backward_grad_sync), as the hooks record it


def check_sync_pattern(ctx: Context) -> Finding | None:
    """The gradients (or the parameters) part at a step whose micro-batches DDP synced otherwise on the two sides
    (`grad_sync`: per backward, whether DDP all-reduced it), in a run of several ranks. One side syncing none of the
    step's backwards steps on each rank's own gradients; both syncing the last, the average is the same sum in
    another order, which explains a rounding-level difference only."""
    f = ctx.earliest
    if f is None or f["quantity"] not in SYNC_PARTS or not _several_ranks(ctx):
        return None
    patterns = _sync_patterns(ctx, f["rank"])
    at = _sync_step(f, patterns)
    if at is None:
        return None
    here = patterns[at]
    unsynced = [s for s, p in zip("ab", here) if not p[-1]]
    if len(unsynced) == 1:
        shape, side = "unsynced", unsynced[0]
    elif unsynced:
        return None  # neither side syncs the step: the ranks' replicas part on both, and the pattern is no difference
    else:
        relative = max_relative(f["a"], f["b"])
        if relative is None or relative > ROUNDING_RELATIVE:
            return None  # both average the same gradients: another order rounds, it does not move them further
        shape, side = "order", "a" if sum(here[0]) > sum(here[1]) else "b"
    every = all(p == here for p in patterns.values())
    when = "at every step" if every else f"at step {at}"
    if at == f["step"] - 1:
        when += f" (step {at}'s update came before this loss)"
    elif at != f["step"]:
        when += f" (from step {at}, before this loss)"
    facts = (
        f"At step {f['step']} rank {f['rank']} the {SYNC_PARTS[f['quantity']]} differs ({fmt(f['a'])} vs "
        f"{fmt(f['b'])}), and DDP's "
        f"gradient sync per micro-batch (no_sync / require_backward_grad_sync, as each backward ran) differs {when}: "
        f"{ctx.label('a')} [{_pattern_words(here[0])}], {ctx.label('b')} [{_pattern_words(here[1])}]."
    )
    if at != f["step"]:
        facts += (
            f" Step {at}'s gradient norm and digested parameters were recorded equal: the gradients it averaged "
            "otherwise parted below what those show (a norm rounds alike, the digest sums a few tensors)."
        )
    evidence = {"grad_sync": ctx.both(*here), f["quantity"]: ctx.both(f["a"], f["b"]), "sync_shape": shape}
    why, fix = SYNC_WORDS[shape]
    other = ctx.label(other_side(side))
    values = {"side": ctx.label(side), "other": other}
    return finding(
        ctx,
        GRADIENTS_SYNC_PATTERN,
        f["step"],
        f["rank"],
        evidence,
        facts,
        why=why.format(**values),
        fix=fix.format(**values),
    )


def _sync_step(f: dict, patterns: dict) -> int | None:
    """The step whose sync patterns explain the first difference: that step's, for its gradient norm or the
    parameters after it; for a loss (computed before its step's update), the first earlier step whose patterns
    differ, with nothing recorded apart between it and the loss."""
    if f["quantity"] != "loss":
        here = patterns.get(f["step"])
        return f["step"] if here is not None and here[0] != here[1] else None
    apart = [step for step, (a, b) in patterns.items() if a != b and isinstance(step, int) and step < f["step"]]
    return min(apart) if apart else None


def _several_ranks(ctx: Context) -> bool:
    return all(isinstance(w := ctx.meta(s).get("world_size"), int) and w > 1 for s in ("a", "b"))


def _sync_patterns(ctx: Context, rank) -> dict:
    """{step: (a's flags, b's flags)} where both sides recorded every backward's sync flag (True/False)."""
    out = {}
    for ra, rb in aligned_records(ctx, rank):
        flags = (ra.get("grad_sync"), rb.get("grad_sync"))
        if all(isinstance(p, list) and p and all(isinstance(x, bool) for x in p) for p in flags):
            out[ra.get("step")] = flags
    return out


def _pattern_words(flags: list) -> str:
    return ", ".join("sync" if x else "no sync" for x in flags)


SYNC_PARTS = {"grad_norm": "gradient norm", "param_digest": "parameter digest after the step", "loss": "loss"}

# why, fix per shape of the two sync patterns (check_sync_pattern)
SYNC_WORDS = {
    "unsynced": (
        "DDP all-reduces a backward's gradients only while require_backward_grad_sync is on (no_sync() turns it "
        "off): {side} synced none of the step's backwards, so each of its ranks stepped on its own gradients, not "
        "the average over the ranks, and its replicas part from each other and from {other}'s.",
        "On {side}, let the last micro-batch's backward sync: no_sync() (or require_backward_grad_sync = False) "
        "around every micro-batch but the last of a step, as {other} does, never around the last.",
    ),
    "order": (
        "Both sides average the gradients over the ranks, at other micro-batches: syncing every micro-batch adds "
        "averaged gradients, syncing only the last averages their sum. The same numbers summed in another order "
        "part in the last bits; neither side is wrong.",
        "Sync at the same micro-batches on both sides: no_sync() (or require_backward_grad_sync = False) for every "
        "micro-batch but the last of a step, as Lightning does under accumulate_grad_batches ({side} syncs more "
        "of them than {other}).",
    ),
}


GRADIENTS_SYNC_PATTERN = Cause(
    "gradients.sync_pattern",
    check_sync_pattern,
    why="{why}",
    fix="{fix}",
    doc="The gradients or parameters part at a step whose per-micro-batch DDP sync the hooks recorded otherwise "
    "(`grad_sync`): a side syncing none of the step's backwards (no_sync left on), or, at rounding level, one "
    "syncing every micro-batch where the other syncs the last only. Named with both patterns.",
    requires=Evidence(
        "both sides' per-micro-batch sync flags at the step", lambda d: bool(d.evidence.get("grad_sync"))
    ),
)


# ---------------------------------------------------------------------------------------------
# FSDP2's gradient sync under accumulation


def check_accumulation_sync(ctx: Context) -> Finding | None:
    """Both sides shard with FSDP2 and accumulate, and part at rounding level from the first step on:
    one side reduce-scatters after every micro-batch (sums of averages), the other only after the
    last (the average of sums). The same numbers in another order; which side, the traces cannot say."""
    f = ctx.earliest
    sharded = all(ctx.meta(s).get("sharded") for s in ("a", "b"))
    k = next((v for v in config_values(ctx, ("accumulate_grad_batches",)).values() if isinstance(v, int)), 1)
    if f is None or f["quantity"] not in ROUNDED_QUANTITIES or not sharded or k <= 1:
        return None
    relative = max_relative(f["a"], f["b"])
    if ctx.walk.steps_equal_before != 0 or relative is None or relative > ROUNDING_RELATIVE or ctx.config_diffs()[0]:
        return None
    facts = (
        f"Both sides shard with FSDP2 and accumulate {k} micro-batches per step; they part at step {f['step']} "
        f"rank {f['rank']} in the {f['quantity']} ({fmt(f['a'])} vs {fmt(f['b'])}, relative {relative:.1e}), "
        "the first step, with the same samples and losses."
    )
    evidence = {f["quantity"]: ctx.both(f["a"], f["b"]), "relative": relative, "accumulate_grad_batches": k}
    return finding(ctx, GRADIENTS_ACCUMULATION_SYNC, f["step"], f["rank"], evidence, facts)


def check_zeroed_for_validation(ctx: Context) -> Finding | None:
    """A step whose micro-batches span a validation (recorded at the step before it), equal samples and loss,
    another gradient norm: one side zeroed the gradients it had accumulated before validating."""
    f = ctx.earliest
    if f is None or f["quantity"] != "grad_norm":
        return None
    counts = [rec.get("micro_batches") for rec in _records_at(ctx, f["rank"], f["step"])]
    if len(counts) != 2 or counts[0] != counts[1] or type(counts[0]) is not int or counts[0] < 2:
        return None
    spans = {s: [v for v in validations(ctx.run(s)) if v.get("step") == f["step"] - 1] for s in ("a", "b")}
    validated = [ctx.label(s) for s in ("a", "b") if spans[s]]
    if not validated or _right_after_the_step(spans["a"] + spans["b"]):
        return None
    # the hooks' record of each evaluation says whether a gradient was held as it started
    held = {
        s: {v.get("grads_held") for v in spans[s] if v.get("micro_batch") and v.get("rank") == f["rank"]} for s in "ab"
    }
    zeroed = [s for s in ("a", "b") if held[s] == {False} and held[other_side(s)] == {True}]
    trainers = zeroed or [s for s in ("a", "b") if _is_trainer(ctx.meta(s))]
    side = ctx.label(trainers[0]) if len(trainers) == 1 else "the side that zeroes its gradients before validating"
    other = ctx.label(other_side(trainers[0])) if len(trainers) == 1 else "the other side"
    evidence = {
        "grad_norm": ctx.both(f["a"], f["b"]),
        "micro_batches": counts[0],
        "validation_at_step": f["step"] - 1,
        "validated_by": validated,
    }
    if zeroed:
        evidence["grads_held_at_evaluation"] = ctx.both(*(sorted(held[s])[0] for s in ("a", "b")))
    facts = (
        f"At step {f['step']} rank {f['rank']} consumed the same {counts[0]} micro-batches and "
        f"{same_loss_words(ctx, f['rank'], f['step'])}, but the gradient norm differs ({f['a']!r} on "
        f"{ctx.names[0]} vs {f['b']!r} on {ctx.names[1]}); the step's micro-batches span a validation "
        f"({' and '.join(validated)} validated at step {f['step'] - 1}, after the step before)."
    )
    if zeroed:
        facts += (
            f" The evaluation's record on rank {f['rank']} says {side} held no gradient as it started, after "
            f"micro-batches that left theirs on {other}."
        )
    return finding(ctx, GRADIENTS_ACROSS_VALIDATION, f["step"], f["rank"], evidence, facts, side=side, other=other)


def _right_after_the_step(evaluations: list[dict]) -> bool:
    """Every evaluation recorded by the hooks with no backward of the next step before it (`micro_batch` 0, as
    Lightning's sanity check or a validation at a step's end): no micro-batch spans it, no gradient of the
    next step was there to keep or zero. An explicit record, which says no micro-batch, proves nothing."""
    return all(type(v.get("micro_batch")) is int and v["micro_batch"] == 0 for v in evaluations)


def _records_at(ctx: Context, rank, step) -> list[dict]:
    for ra, rb in aligned_records(ctx, rank):
        if ra.get("step") == step:
            return [ra, rb]
    return []


def other_side(side: str) -> str:
    return "b" if side == "a" else "a"


def _is_trainer(meta: dict) -> bool:
    """A run TraceCallback recorded (it writes the Trainer's precision and checkpoint beside the facts)."""
    return "precision" in meta and "resumed_from" in meta


GRADIENTS_ACROSS_VALIDATION = Cause(
    "gradients.across_validation",
    check_zeroed_for_validation,
    why="The micro-batches before the validation left their gradients in .grad; the step after it adds the "
    "next ones to them on one side only: Lightning zeroes every gradient before validating "
    "(LightningModule.on_validation_model_zero_grad), a loop that evaluates between micro-batches keeps them.",
    fix="Treat the gradients across a validation alike: on {side}, keep them (in a LightningModule, override "
    "on_validation_model_zero_grad to do nothing), or on {other}, zero them before validating "
    "(optimizer.zero_grad()); better, validate only right after an optimizer step.",
    doc="A step's micro-batches span a validation and its gradient norm differs with equal samples and loss: "
    "one side zeroed the accumulated gradients before validating (Lightning's on_validation_model_zero_grad); the "
    "hooks' evaluation records (`grads_held`) say which.",
)


GRADIENTS_ACCUMULATION_SYNC = Cause(
    "gradients.accumulation_sync",
    check_accumulation_sync,
    why="With gradient sync on, FSDP2 reduce-scatters after every backward and adds up the averaged "
    "shards; with it off until the last micro-batch, each rank adds up its micro-batches and one "
    "reduce-scatter averages the sum. The same numbers summed in another order part in the last bits.",
    fix="On both sides, call model.set_requires_gradient_sync(False) before every micro-batch's backward "
    "but the last of a step, and set_requires_gradient_sync(True) before the last (Fabric: "
    "fabric.no_backward_sync; Lightning's ModelParallelStrategy does neither: do it in the "
    "LightningModule's on_train_batch_start, as lightning_impl/module.py does).",
    doc="Both sides FSDP2 with accumulation, parting at rounding level at step 1: "
    "`set_requires_gradient_sync(False)` missing before the last micro-batch.",
)


# ---------------------------------------------------------------------------------------------
# a gradient norm recorded after clipping


def check_clipped_norm(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "grad_norm":
        return None
    if ctx.cmp.walk is not None and ctx.cmp.walk.measured_in_order is not None:
        return None  # every parameter's gradient norm equal, the total summed in another order: no clip at all
    clamp = _clamped_side(ctx, f["rank"])
    if clamp is None or _parameters_apart_at(ctx, f):
        return None  # a recording finding says the training is the same: never where the parameters part there
    side, value = clamp
    facts = (
        f"The gradient norms agree wherever they are below {value:g} and {ctx.label(side)}'s never exceed it: "
        f"{ctx.label(side)} records the norm after clipping (clamped at the clip value), the other side before."
    )
    evidence = {"grad_norm": ctx.both(f["a"], f["b"]), "clamped_side": ctx.label(side), "clip_value": value}
    return finding(ctx, RECORDED_CLIPPED_NORM, f["step"], f["rank"], evidence, facts)


def _parameters_apart_at(ctx: Context, f: dict) -> bool:
    """Both sides recorded the parameter digest after `f`'s step, and it differs."""
    for ra, rb in aligned_records(ctx, f["rank"]):
        if ra.get("step") == f["step"]:
            a, b = ra.get("param_digest"), rb.get("param_digest")
            return a is not None and b is not None and a != b
    return False


def _clamped_side(ctx: Context, rank) -> tuple[str, float] | None:
    """The side whose recorded gradient norm stops at a ceiling the other side's goes past."""
    pairs = [(ra.get("grad_norm"), rb.get("grad_norm")) for ra, rb in aligned_records(ctx, rank)]
    pairs = [(a, b) for a, b in pairs if isinstance(a, (int, float)) and isinstance(b, (int, float))]
    clip = next(
        (v for v in config_values(ctx, ("gradient_clip_val", "clip_val", "max_norm")).values() if nonzero(v)), None
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


RECORDED_CLIPPED_NORM = recording(
    check_clipped_norm,
    fix=(
        "Record the gradient norm before clipping, as clip_grad_norm_ returns it (Lightning: "
        "`on_before_optimizer_step` sees it), on both sides."
    ),
    doc="A side's gradient norm stops at the clip value the other's goes past: recorded after clipping.",
)


# ---------------------------------------------------------------------------------------------
# the gradient norm


def check_grad_norm(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "grad_norm":
        return None
    ulps = float32_ulps(f["a"], f["b"])
    evidence = {"grad_norm": ctx.both(f["a"], f["b"]), "ulps": ulps}
    # every earlier step matched bit for bit and this one's samples and loss do too: a few ulps in the
    # norm are the order it was summed in, at step 1 or later (a later step only means the orders
    # happened to round alike until then)
    refused = rounding_refused(ctx, f) if ulps is not None and ulps <= FEW_ULPS else None
    if refused:  # a few ulps in the norm, but the records show more apart than rounding: never read as an order
        evidence["not_rounding"] = refused
    elif ulps is not None and ulps <= FEW_ULPS and same_param_sets(ctx):
        if ctx.both_have("optimizer") and not earlier_update_candidates(ctx, f):
            return reduction_order_finding(ctx, f, evidence, "gradient norm")
    ratio = ratio_of(f["a"], f["b"])
    facts = (
        f"At step {f['step']} rank {f['rank']} {consumed_words(ctx, f['rank'], f['step'])} and "
        f"{same_loss_words(ctx, f['rank'], f['step'])}, "
        f"but the gradient norm differs ({f['a']!r} on {ctx.names[0]} vs {f['b']!r} on {ctx.names[1]})."
    )
    one_side = _clipped_on_one_side(ctx, f, evidence, facts)
    if one_side is not None:
        return one_side
    if watch_found_all_equal(ctx):  # every module gradient and every .grad equal: the norm is measured otherwise
        return _norm_finding(ctx, f, evidence, facts)
    if averaged_by_ddp_alike(ctx):  # the records a world-size candidate is left out for (hooks' ddp, collectives)
        evidence["averaged_by_ddp_alike"] = True
    relation = factor_of(ctx, "grad_norm", f["rank"])
    if carries_step(relation, f["step"]):
        read = steps_carrying_words(ctx, relation, f["rank"])
        later = read is None and equal_nonzero_before(ctx, f["rank"], f["step"], "grad_norm")
        relation = counts_ruled_out(relation) if later else relation
        evidence.update(ratio=ratio, relation=relation.to_json())
        words = [FACTOR_WORDS[m] for m in factor_mechanisms(relation) if m in FACTOR_WORDS] or [FACTOR_WORDS[""]]
        values = {"side": relation.side, "small": relation.other, "step": f["step"], "k": _k(relation.value)}
        words = [LATER_FACTOR.why] if later else words
        if read is not None:
            words, values = [read[0].why], {**values, **read[1]}
            facts = _loss_at_step_too(ctx, f, facts)
        said = f"{relation.sentence[:-1]}: " + "; or ".join(w.format(**values) for w in words)
        said += "."
        module = ctx.cache.get("module")
        if module and module.get("reading_kind") == "optimizer" and module.get("step") == f["step"]:
            said += (
                " The module watch finds every parameter's .grad equal at the end of backward: the factor came in "
                "after it, before the step (an all_reduce of the gradients by hand, a division or scaling of .grad)."
            )
        fix = _factor_fix(ctx, factor_mechanisms(relation), side=relation.side, small=relation.other)
        fix = LATER_FACTOR.fix.format(**values) if later else fix
        signature = LATER_SIGNATURE if later else _signature(ctx, relation.value)
        if read is not None:
            fix, signature = read[0].fix.format(**values), STEPS_SIGNATURE
        return finding(
            ctx, GRADIENTS_FACTOR, f["step"], f["rank"], evidence, f"{facts} {said}", signature=signature, fix=fix
        )
    if ratio is not None:
        near = min((2, 3, 4, 8, 1 / 2, 1 / 3, 1 / 4, 1 / 8), key=lambda k: abs(ratio / k - 1))
        if abs(ratio / near - 1) < 0.02:
            evidence["ratio"] = ratio
            signature, fix = _signature(ctx, near), _factor_fix(ctx, [], side="", small="")
            return finding(ctx, GRADIENTS_FACTOR, f["step"], f["rank"], evidence, facts, signature=signature, fix=fix)
    module = ctx.cache.get("module")
    if module and module.get("reading_kind") == "param_grad":
        evidence["module"] = module
        return finding(ctx, GRADIENTS, f["step"], f["rank"], evidence, facts, param=module["name"])
    causes = ["gradients", "numerics", *earlier_update_candidates(ctx, f)]
    if ulps is not None and ulps <= FEW_ULPS and not refused:
        causes.insert(0, "reduction_order")
    if module and module.get("reading_kind") == "loss_grad":
        causes = ["gradients", "loss", *causes]
    return undetermined(ctx, f, causes, facts, evidence)


def _loss_at_step_too(ctx: Context, f: dict, facts: str) -> str:
    """The facts with the step's loss said apart where it is (a factor read from the steps carrying it scales the
    loss backward ran on, and the gradient norm with it): never "the same loss" there."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, f["rank"]) if ra.get("step") == f["step"]), None)
    if pair is None or pair[0].get("loss") is None or pair[0].get("loss") == pair[1].get("loss"):
        return facts
    a, b = ctx.names
    return (
        f"At step {f['step']} rank {f['rank']} {consumed_words(ctx, f['rank'], f['step'])} on both sides, but the "
        f"loss ({pair[0]['loss']!r} on {a} vs {pair[1]['loss']!r} on {b}) and the gradient norm ({f['a']!r} on {a} "
        f"vs {f['b']!r} on {b}) differ."
    )


def _clipped_on_one_side(ctx: Context, f: dict, evidence: dict, facts: str) -> Finding | None:
    """Recorded by the hooks on both sides, one side called a clip function at this step and the other none: the
    clipping side's norm is the one clip_grad_norm_ measured before clipping, the other's that of the gradients
    its optimizer saw. Compared like with like (what each optimizer saw), the gradients part between backward
    and the step where those differ: the other side changes them by its own code, or not at all."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, f["rank"]) if ra.get("step") == f["step"]), None)
    if pair is None or not all(ctx.meta(s).get("recorded_by") == "hooks" for s in ("a", "b")):
        return None
    called = [r.get("clip_max_norm") is not None or r.get("clip_value") is not None for r in pair]
    if called[0] == called[1]:
        return None
    c, o = (0, 1) if called[0] else (1, 0)
    clipping, other = ctx.label("ab"[c]), ctx.label("ab"[o])
    seen = [pair[c].get("grad_norm_seen"), pair[o].get("grad_norm")]
    if seen[0] is None or seen[0] == seen[1]:
        return None  # the optimizers saw gradients of one norm: no clipping apart is proved here
    how = ", ".join(
        f"{k[5:]} {fmt(pair[c][k])}"
        for k in ("clip_max_norm", "clip_norm_type", "clip_value")
        if pair[c].get(k) is not None
    )
    evidence["clip"] = [f"{clipping}: a clip call ({how}); {other}: none (no clip_grad_norm_ or clip_grad_value_ call)"]
    evidence["grad_norm_seen"] = {clipping: seen[0], other: seen[1]}
    facts += (
        f" {clipping} called a clip function ({how}): its recorded norm is the one it measured before clipping, and "
        f"the gradients its optimizer saw have a norm of {fmt(seen[0])}; {other} called none: its recorded norm is "
        f"that of the gradients its optimizer saw, {fmt(seen[1])}. The optimizers saw other gradients"
    )
    if watch_found_all_equal(ctx):
        facts += ", and the module watch finds every parameter's .grad equal at the end of backward"
    facts += (
        f": {other} changes the gradients between backward and the step by code of its own (a clipping by hand, "
        f"per parameter or by value; a scaling), or leaves them as they are where {clipping} clips."
    )
    return finding(
        ctx, GRADIENTS_CLIPPED_ONE_SIDE, f["step"], f["rank"], evidence, facts, side=other, clipping=clipping
    )


# what a gradient-norm factor equal to each count means
FACTOR_WORDS = {
    "accumulation": "{side} sums its micro-batches' gradients without dividing the loss by the accumulation count",
    "accumulation_twice": "{small} divides its loss by the accumulation count twice (Lightning divides what "
    "training_step returns by accumulate_grad_batches itself)",
    "world_size": "the gradients are averaged over the world size on {small} once too often ({side} not at all)",
    "batch_size": "{side} sums the loss over the batch (reduction='sum') where {small} averages it",
    "": "no recorded count explains the factor",
}

# and its fix: a loop may average over ranks by hand (an all_reduce of each gradient, no DDP wrapper), so
# the world-size fix names both ways of averaging, never "no division" alone
FACTOR_FIX = {
    "accumulation": "On {side}, divide each micro-batch's loss by the number of accumulated micro-batches before "
    "backward: Divide the loss by accumulate_grad_batches, as Lightning does.",
    "accumulation_twice": "On {small}, return each micro-batch's loss from training_step without dividing it by the "
    "accumulation: Lightning divides it by accumulate_grad_batches itself.",
    "world_size": "Average the gradients over the ranks exactly once on both sides: under DDP add no division "
    "by the world size (DDP averages); where the gradients are all-reduced by hand, divide the sum by the world "
    "size (all_reduce(ReduceOp.SUM), then /= world_size). {side}'s are the larger: it averages too little, or "
    "{small} too much.",
    "batch_size": "Compute the loss with the same reduction on both sides (reduction='mean', the criterion's "
    "default), over the same samples.",
    "": "Divide the loss by the number of accumulated micro-batches before backward (and only then), and average "
    "the gradients over the ranks exactly once (DDP averages by itself; an all_reduce by hand needs / world_size).",
    # the averaging over the ranks recorded alike on both sides (hooked.averaged_by_ddp_alike): not advised
    "averaged_alike": "Give the optimizers the same gradients: on both sides, divide the loss by the number of "
    "accumulated micro-batches before backward and by nothing else (not by the world size), and leave .grad as "
    "backward and DDP leave it (no scaling by hand before the step); DDP averages over the ranks alike on both "
    "sides here.",
}


def _factor_fix(ctx: Context, mechanisms: list[str], *, side: str, small: str) -> str:
    """The fix of every mechanism the factor fits, each once; the generic one where none does (without the
    averaging over the ranks where both sides recorded it alike)."""
    fixes = [FACTOR_FIX[m].format(side=side, small=small) for m in mechanisms if m in FACTOR_FIX]
    if len(fixes) > 1:
        return "Whichever count slipped (the numbers fit each): " + " Or: ".join(fixes)
    return fixes[0] if fixes else FACTOR_FIX["averaged_alike" if averaged_by_ddp_alike(ctx) else ""]


def _signature(ctx: Context, factor) -> str:
    """What a gradient-norm factor is the signature of: the averaging over the ranks only where it may differ."""
    if averaged_by_ddp_alike(ctx):
        return SIGNATURE_AVERAGED_ALIKE.format(factor=factor, alike=AVERAGED_BY_DDP_ALIKE)
    return SIGNATURE.format(factor=factor)


def _norm_finding(ctx: Context, f: dict, evidence: dict, facts: str) -> Finding:
    """The module watch found every module gradient and every .grad equal at this step, yet the recorded
    gradient norms differ: one side measures the same gradients with another norm (or over a subset)."""
    said = {s: _norm_of_side(ctx, s, f) for s in ("a", "b")}
    l2_sides = [s for s in ("a", "b") if said[s] and said[s][0] == "L2" and said[s][1] is None]
    lightning = [s for s in ("a", "b") if ctx.meta(s).get("side") == "lightning"]
    odd = next((s for s in ("a", "b") if s not in l2_sides), None) if len(l2_sides) == 1 else None
    if odd is None and len(lightning) == 1:  # Lightning measures the 2-norm over the optimizer's parameters
        odd = "b" if lightning == ["a"] else "a"
    low, high = sorted(((f["a"], "a"), (f["b"], "b")))
    measure = said[odd] if odd else None
    if measure and measure[0] == "L2" and measure[1]:
        what = f"the 2-norm over a subset of the parameters only ({', '.join(measure[1][:4])})"
    elif measure and measure[0] == "inf":  # each gradient's largest |g| recorded: proved, not inferred
        what = (
            f"the infinity norm of the same gradients: it equals their largest |g| ({fmt(f[odd])}) exactly, "
            "where the 2-norm is the other side's"
        )
    elif measure and measure[0] == "L1":  # each gradient's sum of |g| recorded: proved, not inferred
        what = (
            f"the 1-norm of the same gradients: it equals the sum of their |g| ({fmt(f[odd])}), each gradient's "
            "1-norm as recorded, to float32 rounding, where the 2-norm is the other side's"
        )
    elif odd == low[1] or (measure and measure[0] == "below L2"):
        what = (
            "below the 2-norm of the same gradients, so neither the 2-norm nor the 1-norm (never below it): "
            "the infinity norm or a subset"
        )
    else:
        what = "another norm of the same gradients (the 1-norm or a subset)"
    side = ctx.label(odd) if odd else "the side whose value is not the 2-norm"
    evidence["norm"] = {ctx.label(s): said[s][0] if said[s] else "unrecorded" for s in ("a", "b")}
    evidence["measured_otherwise"] = ctx.label(odd) if odd else None
    evidence["ratio"] = ratio_of(high[0], low[0])
    layers = (
        ""
        if any(said.values())
        else " (each parameter's gradient norm was not recorded before zero_grad, so "
        "which norm is unrecorded: pass model= to record() before optimizer.zero_grad())"
    )
    facts += (
        f" The module watch finds every module gradient and every parameter's .grad equal: the same gradients, "
        f"measured otherwise. {side}'s value is {what}{layers}."
    )
    return finding(ctx, GRADIENTS_NORM_TYPE, f["step"], f["rank"], evidence, facts, side=side)


def _norm_of_side(ctx: Context, side: str, f: dict):
    """relations.norm_of for one side's recorded total and its per-parameter gradient norms (sketch.py's
    layers at this step), or None where those were not recorded (NaN after zero_grad)."""
    layers = ctx.meta(side).get("layers") or {}
    pair = next((p for p in aligned_records(ctx, f["rank"]) if p[0].get("step") == f["step"]), ({}, {}))
    column = relations.layer_column(pair[0 if side == "a" else 1], layers.get("fields") or [], "grad_norm")
    if column is None or not any(relations.number(v) is not None for v in column):
        return None
    # each gradient's largest |g| and sum of |g| (sketch.py's grad_maxabs, grad_l1) prove the infinity norm
    # and the 1-norm; older traces lack them
    record, fields = pair[0 if side == "a" else 1], layers.get("fields") or []
    norm_type = record.get("clip_norm_type")
    if ctx.meta(side).get("recorded_by") == "hooks" and norm_type in ("inf", 1, 1.0):
        # the hooks' grad_norm is what clip_grad_norm_ returned, under the norm_type it was given: recorded
        return ("inf", None) if norm_type == "inf" else ("L1", None)
    maxabs = relations.layer_column(record, fields, "grad_maxabs")
    l1 = relations.layer_column(record, fields, "grad_l1")
    return relations.norm_of(f[side], layers.get("names") or [], column, maxabs, l1)


def _same_inputs_words(ctx: Context, rank, step) -> str:
    """ "the same parameters, samples and losses" as far as the step's records compared them: samples compared
    nowhere and a loss the recorder left unrecorded are named as not compared, never said the same."""
    same, unsaid = ["parameters"], []
    if samples_equal_at(ctx, rank, step):
        same.append("samples")
    else:
        why = consumed_words(ctx, rank, step).removeprefix("consumed samples the records do not compare (")
        unsaid.append(f"the samples, {why.removesuffix(')')}")
    unrecorded = loss_unrecorded_at(ctx, rank, step)
    if unrecorded:
        unsaid.append(f"the losses, the recorder marked them unrecorded on {' and '.join(unrecorded)}")
    else:
        same.append("losses")
    said = "the same " + (", ".join(same[:-1]) + " and " + same[-1] if len(same) > 1 else same[0])
    return said + (f" (not compared: {'; '.join(unsaid)})" if unsaid else "")


def reduction_order_finding(ctx: Context, f: dict, evidence: dict, what: str) -> Finding:
    order_a, order_b = param_order(ctx.meta("a").get("optimizer")), param_order(ctx.meta("b").get("optimizer"))
    facts = (
        f"The {what} differs by {evidence.get('ulps')} ulp(s) from step {f['step']} on ({fmt(f['a'])} vs "
        f"{fmt(f['b'])}), with {_same_inputs_words(ctx, f['rank'], f['step'])}: the same parameters were summed in "
        "another order."
    )
    if order_a and order_b:
        evidence["param_order"] = ctx.both(order_a[:8], order_b[:8])
    lightning = [s for s in ("a", "b") if ctx.meta(s).get("side") == "lightning"]
    if len(lightning) == 1:  # Lightning's order is the optimizer's: the other side is the one to change
        side = ctx.label("b" if lightning == ["a"] else "a")
    else:  # the traces cannot say which side summed in the model's order: do not guess a label
        side = "the side that clips over model.parameters() (or in any order but the optimizer's)"
    return finding(ctx, REDUCTION_ORDER, f["step"], f["rank"], evidence, facts, side=side)


REDUCTION_ORDER = Cause(
    "reduction_order",
    check_grad_norm,
    why="The same numbers summed in another order round differently in the last bits. Lightning clips "
    "and measures the gradient norm over the optimizer's parameters in param-group order "
    "(`clip_gradients` iterates optimizer.param_groups), not over model.parameters().",
    fix="On {side}, compute the norm and clip over the parameters in the optimizer's order: "
    "torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g['params']], "
    "max_norm). Or the mirror on the other side: clip over model.parameters() there too (in Lightning, a "
    "configure_gradient_clipping that calls torch.nn.utils.clip_grad_norm_ over the network's parameters() in the "
    "LightningModule: the same tensors in the same order as the other side).",
    doc="A few float32 ulps in the gradient norm (or the update, with clipping), the same parameters, "
    "samples and losses: summed in another order (Lightning clips in param-group order). Never where the parameters "
    "after that step part by more than 1e-3 relative or the records show a rank's inputs apart there (not a candidate "
    "either).",
    requires=Evidence("both sides' param groups", lambda d: "param_order" in d.evidence),
)
# the evidence every optimizer.clip finding needs (here and in update.py)
CLIP_FACTS = Evidence("the clip facts of the step, side by side", lambda d: bool(d.evidence.get("clip")))
GRADIENTS_CLIPPED_ONE_SIDE = Cause(
    "optimizer.clip",
    check_grad_norm,
    why="One side clips with clip_grad_norm_ (or clip_grad_value_) and the other calls neither: the gradients each "
    "optimizer sees differ, so the updates differ wherever the clip binds.",
    fix="Treat the gradients alike between backward and optimizer.step(): where {side} changes them with code of its "
    "own (a per-parameter clip, a clip by value, a scaling), do the same on {clipping} (in a loop, between backward "
    "and optimizer.step(); in a LightningModule, configure_gradient_clipping or on_before_optimizer_step, with no "
    "gradient_clip_val); or clip with "
    "clip_grad_norm_ on both sides, with the same max_norm and norm_type.",
    doc="The gradient norms differ, one side recorded a clip call and the other none (hooks), and the norms each "
    "optimizer saw differ: the gradients were changed otherwise between backward and the step.",
    requires=CLIP_FACTS,
)
GRADIENTS_NORM_TYPE = Cause(
    "gradients.norm",
    check_grad_norm,
    why="clip_grad_norm_ measures the gradients with norm_type (2 unless told: Lightning's "
    "gradient_clip_algorithm='norm' is the 2-norm over the optimizer's parameters); another norm_type, or "
    "a norm over some parameters only, gives another number from the same gradients and clips at another point.",
    fix="On {side}, measure (and clip) the gradients with the 2-norm over all the optimizer's parameters: "
    "torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g['params']], max_norm, "
    "norm_type=2.0).",
    doc="The watch: every module gradient and `.grad` equal, the recorded gradient norms differ: the same "
    "gradients under another norm (`norm_type=inf`, L1) or over a subset of the parameters (docs/relations.md).",
    requires=Evidence("equal module gradients under a module watch", lambda d: "norm" in d.evidence),
)
SIGNATURE = (
    "A factor of about {factor:g} between the gradient norms is the signature of a loss scaled by the number of "
    "accumulated micro-batches, or of gradients averaged over the world size once too often or not at all."
)
SIGNATURE_AVERAGED_ALIKE = (
    "A factor of about {factor:g} between the gradient norms is the signature of a loss scaled by the number of "
    "accumulated micro-batches (or divided by hand by the world size), or of gradients scaled by hand between "
    "backward and the step; not of the averaging over the ranks: {alike}."
)
# a factor from a later step, the earlier steps' norms equal: no count's (each would act at every step)
LATER_SIGNATURE = "Scaled gradients scale the update from that step on."
# a factor some steps carry (a shorter accumulation's, a term of some steps): those steps' updates only
STEPS_SIGNATURE = (
    "Scaled gradients scale the update of the steps that carry the factor (where clipping binds on both sides, "
    "it takes most of the factor back out)."
)


def _k(value):
    found = relations.integer_of(value)
    return found[0] if found else value


GRADIENTS_FACTOR = Cause(
    "gradients.factor",
    check_grad_norm,
    why="{signature}",
    fix="{fix}",
    doc="The gradient norms differ by a factor 2, 3, 4, 8 (or its inverse) with equal loss: accumulation "
    "scaling, averaging over ranks (not named where the hooks recorded both sides averaging by DDP alone, with "
    "the same arguments, no collective of their own over gradients and the same sync). Where the step carries a "
    "factor that steps that agree lie before or between, those steps are read first (a shorter accumulation's, as "
    "`loss.factor`; a count the same at steps that agree is none), and the step's loss is said apart where it is.",
    requires=Evidence("a factor between the gradient norms", lambda d: "ratio" in d.evidence),
)
GRADIENTS = Cause(
    "gradients",
    check_grad_norm,
    why="Every module computes the same gradient, but the parameters' accumulated .grad differs, so "
    "what happens to the gradients between backward and the step differs: .grad not zeroed for some "
    "parameters (zero_grad on one optimizer of two), a parameter frozen (requires_grad=False) or unused "
    "on one side only, accumulation over another number of micro-batches, DDP's no_sync or averaging "
    "over ranks done differently.",
    fix="Zero the gradients of every parameter once per optimizer step (each optimizer's zero_grad), "
    "freeze the same parameters on both sides, "
    "accumulate the same micro-batches with the loss divided by accumulate_grad_batches, and let DDP "
    "do the averaging (no extra division by world size). First parameter whose .grad differs: {param}.",
    doc="The watch: every module gradient equal, a parameter's `.grad` differs or exists on one side "
    "only: zero_grad, a frozen layer, `no_sync`, double averaging (#591).",
    requires=Evidence(
        "equal module gradients with different .grad", lambda d: (d.module or {}).get("reading_kind") == "param_grad"
    ),
)
