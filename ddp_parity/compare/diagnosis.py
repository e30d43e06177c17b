"""Why two runs differ: the first point where they part ways, in causal order, and its one cause.

    crash -> stall -> metadata -> configuration -> optimizer param groups -> initial weights
    -> resume -> step structure -> samples -> batch contents -> loss -> gradient -> learning rate
    -> parameters after the step -> buffers -> final parameters -> validation -> equivalent

The causes, each one definition beside its check, and their order (`CAUSES`) are in
ddp_parity.compare.causes; this module runs the checks in that order over the comparison (the one
walk over the traces, plus meta.json, validation and the final parameters): the first finding is
the diagnosis, a `findings.Finding`, held to one story (story.py). `find_warnings` lists what is
suspicious even in an equivalent pair (a run that learned nothing, NaN/Inf).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import replace

from ddp_parity.compare.batch_inputs import NOT_COMPARABLE
from ddp_parity.compare.causes import CATEGORIES, CHECKS, UPSTREAM_CATEGORIES
from ddp_parity.compare.causes.base import FEW_ULPS, Context, aligned_records, unchecked_sentence
from ddp_parity.compare.causes.configuration import changes_only_rounding, config_differences, strip_config
from ddp_parity.compare.causes.end import check_equivalent
from ddp_parity.compare.causes.hooked import add_hooked_facts, hook_warnings
from ddp_parity.compare.causes.implicated import cannot_explain
from ddp_parity.compare.causes.measured import (
    WHAT,
    check_measured,
    hooks_order_relation,
    reduced_in_place_relation,
    relation_of,
)
from ddp_parity.compare.causes.noise import ROUNDING_FINDINGS, is_rounding, judge_under_noise
from ddp_parity.compare.causes.parting import apart_sentence, evidence_of, facts_apart_at, lr_at_parting
from ddp_parity.compare.comparator import compare_runs, run_labels
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.modules import format_module_finding, localise
from ddp_parity.compare.story import check_story
from ddp_parity.compare.update_replay import replay_sentence, replay_update
from ddp_parity.compare.walk import Criterion, step_divergence, without_batch_digest

# the names this module has always offered (tests, the harness): defined in compare/causes
__all__ = [
    "CATEGORIES",
    "FEW_ULPS",
    "ROUNDING_FINDINGS",
    "changes_only_rounding",
    "config_differences",
    "diagnose_comparison",
    "diagnose_failure",
    "diagnosis_under_noise",
    "find_warnings",
    "format_diagnosis",
    "is_rounding",
]

# causes that sit in the setup rather than in the numbers: when every number still agrees bit for
# bit they are reported as a warning beside an equivalent verdict
SETUP_CATEGORIES = ("config", "param_groups", "buffers")


def diagnose_comparison(cmp, names, *, ignore_config=(), stall=None, rounding_is_noise=False) -> Finding:
    """The diagnosis of a comparison (pipeline.build_report calls it). `rounding_is_noise`: the thread
    counts and the arithmetic (kernel set, BLAS path, CPU) are left out of the setup checks, their
    differences being judged against measured noise (--tolerance noise)."""
    ignored = tuple(strip_config(k) for k in ignore_config)
    ctx = Context(cmp, tuple(names), ignored, stall, rounding_is_noise=rounding_is_noise)
    first = ctx.earliest
    if first is not None and first["quantity"] in ("loss", "grad_norm", "param_digest", "batch"):
        ctx.cache["module"] = _localise(cmp, first)
        ctx.pass_watched_equal(ctx.cache["module"])
    found, idle = _first_finding(ctx)
    found = lr_at_parting(ctx, found) or found  # an lr apart at the parting step says more than no cause
    if idle:  # said beside the cause (or the equivalent verdict), never a difference hidden
        found.evidence["not_the_cause"] = [{"kind": f.kind, "why": why} for f, why in idle]
        found.explanation += " Also recorded, not the cause: " + "; ".join(why for _, why in idle) + "."
    if found.category in SETUP_CATEGORIES and stall is None and cmp.equivalent:
        # every number agrees bit for bit: a setup difference did not change this run, so it is a
        # warning beside an equivalent verdict, never a cause (it may still change a larger run)
        setup = found
        found = check_measured(ctx) or check_equivalent(ctx, setup_differs=setup)
        found.setup_differs = setup
    found.module = ctx.cache.get("module")
    _say_measured_before(found, ctx)
    _say_watched_equal(found, ctx)
    _add_replay(found, cmp, ctx)
    if found.category not in UPSTREAM_CATEGORIES and not found.unchecked:
        found.unchecked = ctx.unchecked()
    if found.unchecked:
        found.explanation += " " + unchecked_sentence(found.unchecked)
    if "init_note" in ctx.cache:
        found.evidence["init_note"] = ctx.cache["init_note"]
    if found.category != "equivalent":
        add_hooked_facts(found, ctx)
        _say_apart_at_parting(found, ctx)
        _say_ranks_parting_otherwise(found, ctx)
    if cmp.meta_errors:
        found.evidence["unreadable_meta"] = {ctx.label(s): e for s, e in cmp.meta_errors.items()}
    check_story(found, cmp.run_a, cmp.run_b, ctx.earliest)
    return found


# where the checks read past a loss the module watch saw change nothing at its step
WATCHED_EQUAL = (
    " At step {step} rank {rank} the {quantity} differs too ({a!r} vs {b!r}), but the module watch of that step finds "
    "every call of the modules both sides share and all {grads} parameter gradients equal, only the parameters "
    "after the step apart: the {quantity} as recorded did not change what the step computed (a figure reduced in "
    "place for logging after backward, or read from another value), so neither the batch nor the model's input is "
    "the cause; what differs in the training is what this finding names."
)


def _say_watched_equal(found: Finding, ctx: Context) -> None:
    """Where the checks read past a loss that the module watch saw change nothing, say so."""
    passed = ctx.watched_equal
    if passed is None:
        return
    found.evidence["watched_equal"] = passed
    found.explanation += WATCHED_EQUAL.format(**passed, grads=passed["grads_compared"])


def _first_finding(ctx: Context) -> tuple[Finding, list[tuple[Finding, str]]]:
    """The first check in causal order that finds, and the setup findings passed over as unable to explain the
    first divergence (each with why)."""
    idle: list[tuple[Finding, str]] = []
    for check in CHECKS:  # the last, equivalent, always finds
        found = check(ctx)
        if found is not None and found.category in SETUP_CATEGORIES:
            why = cannot_explain(ctx, found)
            if why:
                idle.append((found, why))
                continue
        if found is not None:
            return found, idle
    raise AssertionError("the equivalent check always finds")


def _said_by(found: Finding) -> tuple[str, ...]:
    """The facts apart (parting.Apart.what) a finding already states in its own words: never said twice."""
    said = ("lr",) if found.evidence.get("lr") else ()  # the lr's own findings, and the lr at the parting step
    said += ("param_group", "param_groups") if found.evidence.get("groups") else ()  # a hyperparameter's finding
    return said + (("optimizer_steps",) if found.category == "step_count" else ())


def _say_apart_at_parting(found: Finding, ctx: Context) -> None:
    """Every other fact recorded apart at the step the finding names (parting.facts_apart_at): inside an
    undetermined finding, right after its facts (they are the only leads it has); beside any other, as "also
    different at this step"."""
    if found.step is None or "also_different" in found.evidence:
        return
    apart = facts_apart_at(ctx, found.step, found.rank, leave_out=_said_by(found))
    if not apart:
        return
    found.evidence["also_different"] = evidence_of(apart, found.step, found.rank)
    sentence = apart_sentence(apart, found.step, found.rank)
    if found.category == "undetermined":  # said before the candidates, which none of these facts is among
        head, sep, rest = found.explanation.partition(". ")
        found.explanation = f"{head}{sep}{sentence} {rest}" if sep else f"{head} {sentence}"
        return
    found.explanation += " " + sentence


# another rank's findings read from its numbers alone: re-diagnosed on one step without the walk's passes over what was
# only measured (a loss recorded k x the other's at every step), they would name a second cause the records deny
FROM_NUMBERS_ALONE = ("undetermined", "loss", "recording", "numerics")


def _say_ranks_parting_otherwise(found: Finding, ctx: Context) -> None:
    """Each other rank that parts at the finding's step for another recorded reason: its own diagnosis, named with
    its rank beside this one (two causes at one step on two ranks are two fixes)."""
    walk = ctx.cmp.walk
    if found.step is None or not isinstance(found.rank, int) or walk is None or walk.structure is not None:
        return
    if found.evidence.get("fed_alike") or found.evidence.get("shared_by_ranks"):
        return  # a rank fed another's data parts every rank through the gradients DDP averages: no other cause
    others = []
    for rank in walk.ranks.get("a", []):
        other = _finding_on_rank(ctx, found.step, rank) if rank != found.rank else None
        if other is not None and other.category not in FROM_NUMBERS_ALONE and other.kind != found.kind:
            others.append(other)
    if not others:
        return
    found.evidence["ranks_apart"] = [
        {"rank": o.rank, "kind": o.kind, "headline": o.headline, "advice": o.advice} for o in others
    ]
    found.explanation += "".join(
        f" Rank {o.rank} parts at the same step for another recorded reason ({o.kind}): {o.headline}" for o in others
    )
    found.advice += "".join(f" On rank {o.rank} ({o.kind}): {o.advice}" for o in others)


def _finding_on_rank(ctx: Context, step: int, rank) -> Finding | None:
    """The diagnosis of `rank`'s own divergence at `step` (the walk names one rank's), or None where it has none."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    if pair is not None and _batch_digests_set_aside(ctx.cmp):  # as the walk read this comparison: never a data
        pair = tuple(without_batch_digest(record) for record in pair)  # finding from digests of other things
    first = step_divergence(*pair, rank, ctx.cmp.criterion) if pair is not None else None
    if first is None:
        return None
    first["position"] = (ctx.earliest or {}).get("position", 0)  # the same lock-step place as the walk's own
    walk = replace(ctx.cmp.walk, first=first, first_trained=first)
    there = replace(ctx, cmp=replace(ctx.cmp, walk=walk), cache={})
    try:
        found, _ = _first_finding(there)
        found = lr_at_parting(there, found) or found  # as on the finding's own rank
    except Exception:  # noqa: BLE001 - another rank's cause is extra evidence; its failure must not hide the diagnosis
        return None
    return found if found.step == step and found.rank == rank else None


def _batch_digests_set_aside(cmp) -> bool:
    """Whether the comparison walked its records without their batch digests (batch_inputs.NOT_COMPARABLE)."""
    return any(isinstance(note, dict) and note.get("kind") == NOT_COMPARABLE for note in cmp.notes)


def _say_measured_before(found: Finding, ctx: Context) -> None:
    """Where the checks read the training's first divergence past a measured-only one, say that one too."""
    before = ctx.measured_before
    if before is None:
        return
    found.evidence["measured_before"] = {k: before.get(k) for k in ("quantity", "step", "rank", "a", "b")}
    in_order = ctx.cmp.walk.measured_in_order or {}
    if all(before.get(k) == in_order.get(k) for k in ("quantity", "step", "rank")):
        _say_summed_in_order(found, ctx, in_order)
        return
    reduced = ctx.cmp.walk.reduced_in_place or {}
    if all(before.get(k) == reduced.get(k) for k in ("quantity", "step", "rank")):
        _say_reduced_in_place(found, ctx, before)
        return
    relation = relation_of(ctx, before["quantity"], before["rank"]) if before["quantity"] in WHAT else None
    named = f": {relation.sentence[:-1]}" if relation is not None else ""
    found.explanation += (
        f" Earlier, only what was measured differs: the {before['quantity']} at step {before['step']} rank "
        f"{before['rank']} ({before['a']!r} vs {before['b']!r}){named}. {_equal_after(ctx, before)}; what differs "
        "in the training is what this finding names."
    )
    if relation is not None:
        found.evidence["measured_before"]["relation"] = relation.to_json()
    apart = (ctx.earliest or {}).get("measured_apart")
    if apart and not _reads_the_factor_at(found, ctx.earliest.get("step")):
        # the step the training parts at still shows that recording factor: said, never called equal
        found.explanation += f" {_still_apart(ctx, apart)}"


def _say_summed_in_order(found: Finding, ctx: Context, before: dict) -> None:
    """The gradient norm the walk passed over as the hooks' own sum in another order: what proves it measured, and
    where the training parts (at that very step where the parameters after it differ: never called 'earlier')."""
    relation = hooks_order_relation(ctx, before)
    found.evidence["measured_before"]["relation"] = relation.to_json()
    trained = ctx.earliest or {}
    if trained.get("step") == before["step"]:
        after = "The parameters after that step differ"
        after += (
            " (the layers' sketches; the parameter digest of the first and last tensors is equal)"
            if trained.get("layers_apart")
            else ""
        )
        found.explanation += f" At the same step, {relation.sentence} {after}: that is what this finding names."
        return
    found.explanation += (
        f" Earlier, {relation.sentence} {_equal_after(ctx, before)}; what differs in the training is what this "
        "finding names."
    )


def _say_reduced_in_place(found: Finding, ctx: Context, before: dict) -> None:
    """The loss the walk passed over as reduced over the ranks before it was recorded: what proves it recorded
    only (the parameters after that step may still differ: by what this finding names, never by that loss)."""
    relation = reduced_in_place_relation(ctx, before["rank"])
    if relation is None:
        return
    found.evidence["measured_before"]["relation"] = relation.to_json()
    found.explanation += (
        f" The loss differs first (step {before['step']} rank {before['rank']}) only as recorded: {relation.sentence} "
        "What differs in the training is what this finding names."
    )


def _equal_after(ctx: Context, before: dict) -> str:
    """What proves the training of the measured-only step the same: the digest and every layer's sketch where both
    sides sketched the layers alike, else the digest alone, said for what it covers."""
    pair = next((p for p in aligned_records(ctx, before["rank"]) if p[0].get("step") == before["step"]), ({}, {}))
    sketches = ctx.cmp.walk.sketches
    if sketches and all(isinstance(r.get("layers"), list) for r in pair):
        rows = sketches["rows"]
        every = all(len(r["layers"]) == rows for r in pair)
        which = "every layer's sketch" if every else f"the sketches of the {rows} layers both sides record alike"
        return (
            f"The parameter digest and {which} after that step are equal on both sides: it did not change the "
            "training there"
        )
    return (
        "The parameter digest after that step is equal on both sides (sums of the first and last parameter tensors; "
        "the others were not sketched alike on both sides): nothing recorded shows that it changed the training there"
    )


def _reads_the_factor_at(found: Finding, step) -> bool:
    """The finding's own relation holds at `step` among the steps that carry it (a shorter accumulation's, some
    steps' term): its story already says the factor there was trained, so it is never called measured only."""
    relation = found.evidence.get("relation")
    return isinstance(relation, dict) and step in (relation.get("steps") or ())


def _still_apart(ctx: Context, apart: dict) -> str:
    """The measured factor the walk passed over at the step the training parts at, the larger side first."""
    ratio, (big, small) = apart["ratio"], ctx.names
    if ratio < 1:
        ratio, big, small = 1 / ratio, small, big
    q = apart["quantity"]
    return (
        f"At step {ctx.earliest['step']} too {big}'s {q} is {ratio:.6g} × {small}'s, the factor of the steps where "
        f"the parameters stayed equal: measured, not trained (where this finding calls the {q} equal, it is equal "
        "up to that factor)."
    )


def diagnose_failure(run_a, run_b, criterion=None, stall: dict | None = None, labels=None) -> Finding:
    """The diagnosis of a failed launch (a crash, a stall): reads what the runs left, tolerantly.
    `criterion`: the report's (Criterion.describe()'s form)."""
    cmp = compare_runs(run_a, run_b, Criterion.from_description(criterion), tolerant=True)
    return diagnose_comparison(cmp, run_labels(cmp, labels), stall=stall)


# the findings about an update that a replay of the optimizer step can prove or refute
REPLAYED_CATEGORIES = ("optimizer", "param_groups")


def _add_replay(found: Finding, cmp, ctx: Context) -> None:
    """Where both sides dumped the update of the step the parameters part at (DDP_PARITY_DUMP_UPDATE),
    the replay's result goes beside the finding: which ingredient reconciles the two, or that none alone does."""
    first = ctx.earliest
    if found.category not in REPLAYED_CATEGORIES or first is None or first.get("step") is None:
        return
    try:
        replay = replay_update(cmp.run_a, cmp.run_b, first.get("rank") or 0, first["step"])
    except Exception:  # noqa: BLE001 - a replay is extra proof; its failure must not hide the diagnosis
        return
    if replay is not None:
        found.evidence["replay"] = replay
        found.explanation += " " + replay_sentence(replay, ctx.names)


def _localise(cmp, first: dict) -> dict | None:
    """The module localisation of the first divergence, where module watches were recorded."""
    try:
        return localise(cmp.run_a, cmp.run_b, first.get("step"), first.get("rank"))
    except Exception:  # noqa: BLE001 - a localisation is extra evidence; its failure must not hide the diagnosis
        return None


def _unrecorded(meta) -> list[dict]:
    """meta.json `unrecorded`: what a side's recorder noted it could not take ([{what, why}])."""
    items = meta.get("unrecorded") if isinstance(meta, dict) else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _unrecorded_by_ranks(meta) -> dict[tuple, str]:
    """{(what, why): " (rank(s) 0, 1)" or ""}: what a side's recorder could not take, once for every rank that
    noted the same (each rank's hooks note it alike)."""
    ranks: dict[tuple, list] = {}
    for item in _unrecorded(meta):
        ranks.setdefault((item.get("what"), item.get("why")), []).append(item.get("rank"))
    return {
        key: f" (rank(s) {', '.join(map(str, sorted(r for r in seen if isinstance(r, int))))})"
        if any(isinstance(r, int) for r in seen)
        else ""
        for key, seen in ranks.items()
    }


def _zero_gradients_words(facts) -> str:
    """Every gradient norm zero, said with what the records show of the loss and the parameters: "nothing
    trains" only where the parameter digests never change (or none was recorded); where they do move, they
    move by what is no gradient (weight decay, a momentum buffer, a change outside the step)."""
    shown = [f"every recorded gradient norm is zero ({facts.grad_norms} steps)"]
    if facts.losses > 1 and not facts.loss_changes:
        shown.append(f"the loss is {facts.first_loss!r} at every step")
    moves = facts.digests > 1 and facts.digest_changes
    if facts.digests > 1 and not moves:
        shown.append("the parameters after every step are those after the first")
    said = ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]
    if moves:
        return (
            f"{said}: no gradient trains the parameters, yet their digest changes from step to step: they move by "
            "what is no gradient (weight decay, a momentum buffer, a change outside the step); a loss that does not "
            "depend on the parameters (one constant in them) or detached outputs give zero gradients"
        )
    return (
        f"{said}: nothing trains (a loss that does not depend on the parameters, such as one constant in them, or "
        "detached outputs)"
    )


def _no_config_words(name: str, meta: dict) -> str:
    """Why a side has no configuration, and what to do: a program recorded with no line changed is never told
    to add lines (the hooks compare the setup they see instead)."""
    if meta.get("recorded_by") == "hooks":
        return (
            f"{name}: recorded by the hooks of ddp-parity record, which read no configuration of the program's own "
            "(meta.json config is empty): the setup is compared from what the hooks saw (the optimizer as built, "
            "the samplers, the seeds, the clipping); a setting none of these shows is not compared"
        )
    return (
        f"{name}: recorded no configuration (meta.json config is empty): the comparison cannot check that both "
        "sides were set up alike; pass config= to TraceRecorder / TraceCallback, or call self.save_hyperparameters() "
        "in the LightningModule"
    )


def _bitwise_equal_through(cmp) -> float:
    """The last step through which the training is bitwise equal on every rank (inf: all of it; -1: none, or the
    comparison is not bitwise)."""
    walk = cmp.walk
    if walk is None or not cmp.criterion.exact or not sum(walk.counts["a"].values()):
        return -1
    parted = [d.get("step") for d in (walk.first_trained, walk.structure) if d is not None]
    parted += [walk.layers_parted] if walk.layers_parted is not None else []  # a layer the digest does not cover
    if not parted:
        return math.inf
    return min(s if isinstance(s, int) else 0 for s in parted) - 1


def find_warnings(cmp, names) -> list[dict]:
    """Suspicious even when equivalent: a side that learned nothing, NaN/Inf values, a side whose
    configuration was not recorded (nothing then says the two were set up alike), what a side's recorder
    could not record."""
    out = [
        {"kind": "config_unrecorded", "message": _no_config_words(name, cmp.metas[side])}
        for side, name in zip(("a", "b"), names)
        if isinstance(cmp.metas.get(side), dict) and not cmp.metas[side].get("config")
    ]
    out += [
        {
            "kind": "recorder_unrecorded",
            "message": f"{name}{ranks}: the recorder could not record {what} ({why}); training went on, and what "
            "needs it is not compared on this side",
        }
        for side, name in zip(("a", "b"), names)
        for (what, why), ranks in _unrecorded_by_ranks(cmp.metas.get(side)).items()
    ]
    out += hook_warnings(cmp.run_a, cmp.run_b, names, _bitwise_equal_through(cmp))
    if cmp.walk is None:
        return out
    for side, name in zip(("a", "b"), names):
        facts = cmp.walk.facts[side]
        if facts.grad_norms and facts.nonzero_grad_norms == 0:
            out.append({"kind": "no_learning", "message": f"{name}: {_zero_gradients_words(facts)}"})
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
    for said in _parting_lines(d):
        lines += textwrap.wrap(said, width=110, initial_indent="  ", subsequent_indent="    ")
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


def _parting_lines(d: Finding) -> list[str]:
    """What else was recorded apart at the finding's step, and the other ranks' causes there (its evidence, read
    tolerantly: a report read back may have been edited by hand)."""
    lines = []
    also = d.evidence.get("also_different")
    facts = also.get("facts") if isinstance(also, dict) else None
    if isinstance(facts, list) and facts:
        said = "; ".join(str(f.get("said")) for f in facts if isinstance(f, dict))
        lines.append(f"also different at step {also.get('step')} rank {also.get('rank')}: {said}")
    for other in d.evidence.get("ranks_apart") or []:
        if isinstance(other, dict):
            rank, kind = other.get("rank"), other.get("kind")
            lines.append(f"rank {rank} parts at that step too, for another reason ({kind}): {other.get('headline')}")
    return lines


def diagnosis_under_noise(
    exact: Finding, judgement: dict, names, within: bool, exact_step, setup=None, hard: bool = False, runs=None
) -> Finding:
    """The exact diagnosis judged against the noise the controls measured (causes/noise.py's
    `judge_under_noise`, which says how); a finding made there is held to one story when `runs`
    (a, b) are given."""
    found, first, judged = judge_under_noise(exact, judgement, names, within, exact_step, setup, hard, runs)
    if judged and runs is not None:
        check_story(found, runs[0], runs[1], first)  # within the noise no step is blamed: none needs evidence
    return found
