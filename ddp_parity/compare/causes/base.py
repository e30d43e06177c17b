"""What every cause is made of, and what every check reads.

A cause is one `Cause`: the kind the report names, the check that finds it, the two sentences it
says (why such a difference arises, and the one fix), the evidence it may not give its fix without,
and the line docs/diagnosis.md shows. A check is a function of the `Context` (the comparison, the
side labels, what each side recorded) that returns a `Finding` made by `finding(ctx, cause, ...)`
or None; the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ddp_parity.compare import evidence as recorded_evidence
from ddp_parity.compare.batch_inputs import NOT_COMPARABLE
from ddp_parity.compare.causes.configuration import changes_only_rounding, config_differences, flatten
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.walk import (
    comparable_samples,
    float32_ulps,
    loss_placeholder,
    next_quantity_apart,
    records_of,
    sample_key,
    short,
)

FEW_ULPS = 16  # "a few ulps": a reduction order, not a different computation


class Words(NamedTuple):
    """A why and a fix in a cause's own table of variants (a module's mode, what a resume lost)."""

    why: str
    fix: str


@dataclass(frozen=True)
class Evidence:
    """What a finding must hold before it may give its fix: said in words, and held against the
    finding itself (story.py checks every finding against its cause's)."""

    says: str
    holds: Callable[[Finding], bool]


# a cause read straight off its own facts (a setup fact, an error file, a count): its check is its evidence
DIRECT = Evidence("its own facts, read straight off the runs' files", lambda d: True)


@dataclass(frozen=True)
class Cause:
    """One cause: the kind it reports, the check that finds it, its words, its evidence, its docs line.
    `why` and `fix` are formatted with the values the check passes to `finding`."""

    kind: str  # the report's kind: "category" or "category.variant"
    check: Callable  # the function that finds it
    why: str  # appended to the facts in the explanation
    fix: str  # the advice line
    doc: str  # what docs/diagnosis.md's table of kinds says of it
    requires: Evidence = DIRECT

    @property
    def category(self) -> str:
        return self.kind.split(".")[0]


def finding(ctx: Context, cause: Cause, step, rank, evidence: dict, facts: str, /, **values) -> Finding:
    """The Finding of `cause`: the check's facts, then the cause's why and fix filled with `values`
    (positional parameters only, so that a value may be called anything: resume's `{cause}`)."""
    return Finding(
        cause.category,
        cause.kind,
        step,
        rank,
        explanation=" ".join(part for part in (facts, cause.why.format(**values)) if part),
        advice=cause.fix.format(**values),
        evidence=ctx.base(**evidence),
    )


RECORDING_WHY = "The training is the same; only what was written down differs, so nothing in the training needs fixing."


def recording(check: Callable, fix: str, doc: str) -> Cause:
    """A side that recorded a quantity otherwise than the other, not trained otherwise: the kind
    `recording`, one cause per way of recording, each with the right way as its fix."""
    return Cause("recording", check, RECORDING_WHY, fix, doc)


# ---------------------------------------------------------------------------------------------
# what every check reads


# the cache key of the walk the checks read past a loss or gradient norm the module watch saw change nothing
WATCHED_PAST = "watched_past_walk"


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
        """The comparison's walk, seen from the training: where its first divergence is measured only (a loss,
        gradient norm or lr apart with the parameters after that step equal) and the training parts later (or
        at the end), the checks read that later divergence, the measured one said beside (`measured_before`).
        Where the module watch then shows that divergence's loss or gradient norm changed nothing it computes
        (`pass_watched_equal`), the checks read the step's next quantity apart."""
        return self.cache.get(WATCHED_PAST) or self._trained_walk()

    def _trained_walk(self):
        walk = self.cmp.walk
        first = getattr(walk, "first", None)
        if first is None or first is getattr(walk, "first_trained", first) or self.cmp.training_equal:
            return walk
        if "training_walk" not in self.cache:
            self.cache["training_walk"] = replace(
                walk,
                first=walk.first_trained,
                steps_equal_before=walk.trained_equal_before,
                last_equal_step=walk.trained_last_equal_step,
            )
        return self.cache["training_walk"]

    @property
    def measured_before(self) -> dict | None:
        """The measured-only first divergence the training view passed over, if it did."""
        walk = self.cmp.walk
        return walk.first if walk is not None and self._trained_walk() is not walk else None

    @property
    def watched_equal(self) -> dict | None:
        """The loss or gradient norm the module watch showed changed nothing the training computed, where the
        checks read past it (`pass_watched_equal`)."""
        walk = self.cache.get(WATCHED_PAST)
        return walk.first.get("watched_equal") if walk is not None else None

    def pass_watched_equal(self, module: dict | None) -> None:
        """Read past the training's first divergence where it is a loss and the module watch of its step
        (`module`, localise's finding) saw every call both sides share and every parameter's gradient equal, only
        the parameters after the step apart: that loss did not change the training (reduced in place for logging,
        read from another value), and the step's next quantity apart (the lr, the parameters) is where the training
        parts. Never a gradient norm: the watch sees each gradient as backward made it, so a norm apart over those
        is a gradient changed after backward (averaged by hand, clipped, scaled), which the training used."""
        first = self.earliest
        if first is None or first.get("quantity") != "loss" or not module:
            return
        if module.get("step") != first.get("step") or module.get("reading_kind") != "optimizer":
            return
        if not module.get("grads_compared"):
            return  # no gradient compared: nothing shows the figure left the training alone
        pair = next((p for p in aligned_records(self, first["rank"]) if p[0].get("step") == first["step"]), None)
        nxt = next_quantity_apart(first, *pair, self.cmp.walk.criterion) if pair is not None else None
        if nxt is None:
            return
        passed = {k: first.get(k) for k in ("quantity", "step", "rank", "a", "b")}
        said = {**passed, "grads_compared": module["grads_compared"]}
        self.cache[WATCHED_PAST] = replace(self._trained_walk(), first={**nxt, "watched_equal": said})
        self.cache.pop("have", None)

    def recorded_only(self, divergence: dict | None) -> bool:
        """The divergence is proved a difference in what was recorded, not in the training: the comparison proved
        the training the same (samples and parameters equal), or the walk found that loss reduced over the ranks
        in place before it was recorded. No cause of the training (a generator, the data) may stand on it."""
        if divergence is None:
            return False
        if self.cmp.training_equal:
            return True
        reduced = getattr(self.cmp.walk, "reduced_in_place", None) or {}
        return all(divergence.get(k) == reduced.get(k) for k in ("quantity", "step", "rank"))

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
        what, change = (text.format(step=first.get("step")) for text in recorded_evidence.MISSING_EVIDENCE[kind])
        asked = [s for s in sides if recorded_evidence.WATCH_ASKED_KIND in have.get(s, ())]
        hooked = all(recorded_evidence.HOOKS_KIND in have.get(s, ()) for s in sides)
        by_default = [s for s in sides if recorded_evidence.HOOKS_WATCHED_KIND in have.get(s, ())]
        if kind in ("watch", "watch_step") and asked:  # never ask for the variable a side already had
            change = recorded_evidence.ALREADY_ASKED.format(step=first.get("step"))
        elif kind == "watch_step" and by_default and len(by_default) == len(sides):  # nor for steps watched already
            change = recorded_evidence.HOOKS_WATCHED.format(step=first.get("step"))
        elif hooked and kind in recorded_evidence.HOOKS_MISSING:  # recorded with no line changed: no line to add
            change = recorded_evidence.HOOKS_MISSING[kind].format(step=first.get("step"))
        if hooked:
            what = recorded_evidence.HOOKS_NOT_CHECKED.get(kind, what)
        out.append({"evidence": kind, "sides": sides, "not_checked": what, "record": change})
    return out


def unchecked_sentence(unchecked: list[dict]) -> str:
    parts = [f"{u['not_checked']} ({' and '.join(u['sides'])} did not record it: {u['record']})" for u in unchecked]
    return "Not checked: " + "; ".join(parts) + "."


# ---------------------------------------------------------------------------------------------
# small readings shared by the checks


def config_values(ctx: Context, names: tuple) -> dict:
    """Config values whose last key component is one of `names`, from both sides."""
    out = {}
    for side in ("a", "b"):
        for key, value in flatten(ctx.meta(side).get("config") or {}).items():
            if key.rsplit(".", 1)[-1] in names:
                out[f"{ctx.label(side)}:{key}"] = value
    return out


def aligned_records(ctx: Context, rank, limit: int = 100_000):
    for i, (ra, rb) in enumerate(zip(records_of(ctx.run("a"), rank), records_of(ctx.run("b"), rank))):
        if i >= limit:
            return
        yield ra, rb


def same_indices_at(ctx: Context, rank, step) -> bool:
    """Both sides recorded `step`'s sample indices on `rank`, and they are the same, in the same order: whatever
    built the samplers, they ordered this step's samples alike."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    return pair is not None and pair[0].get("indices") is not None and pair[0].get("indices") == pair[1].get("indices")


def same_batch_at(ctx: Context, rank, step) -> bool:
    """Both sides recorded `step`'s batch digest on `rank`, and it is the same: the step's tensors were equal."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    digests = [r.get("batch_digest") for r in pair] if pair is not None else [None]
    return digests[0] is not None and digests[0] == digests[-1]


def samples_equal_at(ctx: Context, rank, step) -> bool:
    """Both sides recorded `step`'s samples on `rank` alike (indices, or batch digests over the same things) and they
    are equal: only then may a finding say the sides consumed the same samples there."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    if pair is None:
        return False
    a, b = comparable_samples(*pair)
    digests_set_aside = any(note.get("kind") == NOT_COMPARABLE for note in getattr(ctx.cmp, "notes", []))
    if digests_set_aside and (sample_key(pair[0]) or ("",))[0] == "batch_digest":
        return False  # batch digests over other things on the two sides: equal or not, they say nothing
    return a is not None and a == b


def consumed_words(ctx: Context, rank, step) -> str:
    """'consumed the same samples' where the step's samples were compared (both sides recorded them alike) and
    equal, else what was not compared: a side fed by its own generator records a batch digest alone, which is no
    sample."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    if samples_equal_at(ctx, rank, step):
        return "consumed the same samples"
    keys = {s: sample_key(r) for s, r in zip("ab", pair or ({}, {}))}
    unbatched = [ctx.label(s) for s, key in keys.items() if key is None]  # nothing of this step's data recorded
    unindexed = [ctx.label(s) for s, key in keys.items() if key is not None and key[0] == "batch_digest"]
    said = [f"{' and '.join(unbatched)} recorded no batch at this step"] if unbatched else []
    said += [f"{' and '.join(unindexed)} recorded no indices"] if unindexed else []
    return f"consumed samples the records do not compare ({'; '.join(said) or 'a side recorded no indices'})"


def loss_unrecorded_at(ctx: Context, rank, step) -> list[str]:
    """The sides (labels) whose loss at `step` on `rank` is the recorder's placeholder for a loss it marked
    unrecorded (meta.json `unrecorded`): no loss was recorded there, so none is the same or apart."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    if pair is None:
        return []
    return [ctx.label(s) for s, rec in zip("ab", pair) if loss_placeholder(rec, ctx.meta(s), rank)]


def same_loss_words(ctx: Context, rank, step, same: str = "computed the same loss on both sides") -> str:
    """`same` where both sides recorded the step's loss, else that it was not compared and why: a loss the recorder
    left unrecorded is never said to be the same."""
    unrecorded = loss_unrecorded_at(ctx, rank, step)
    if not unrecorded:
        return same
    return f"its loss was not compared (the recorder marked it unrecorded on {' and '.join(unrecorded)})"


def samples_said(ctx: Context) -> str:
    """'the samples at every step' where every rank-step's samples were compared (and so found equal), else ''."""
    quantities = getattr(ctx.cmp, "quantities", {}) or {}
    samples, walk = quantities.get("samples"), getattr(ctx.cmp, "walk", None)
    steps = getattr(walk, "rank_steps_compared", 0)
    if samples is None or not samples.compared or samples.compared < steps:
        return ""
    return "the samples at every step"


def same_param_sets(ctx: Context) -> bool:
    only = ctx.cmp.params_only_in
    return not (only.get("a") or only.get("b"))


def nonzero(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0


def fmt(value, limit: int = 80) -> str:
    text = json.dumps(short(value), default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def abs_diff(a, b) -> float:
    try:
        return abs(float(a) - float(b))
    except (TypeError, ValueError):
        return math.nan


def ratio_of(a, b) -> float | None:
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    return a / b if b else None


def float32_ulps_or_far(a, b) -> int:
    u = float32_ulps(a, b)
    return 10**9 if u is None else u


def max_relative(a, b) -> float | None:
    """The largest |a - b| / max(|a|, |b|) over two numbers or two equal-length lists of numbers."""
    pairs = list(zip(a, b)) if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) else [(a, b)]
    try:
        return max(abs(float(x) - float(y)) / max(abs(float(x)), abs(float(y)), 1e-30) for x, y in pairs)
    except (TypeError, ValueError):
        return None
