"""The one pass over two runs' traces: every rank of both runs in lock step, one criterion, one
sample key. The per-quantity figures of the report and the diagnosis both read its result.

One rule for equality everywhere (`Criterion.equal`): bitwise-identical values are equal (two NaNs
included: JSON carries no NaN payload; tensors compare their bit patterns), and nothing else is,
unless a tolerance is given: then |a - b| <= atol + rtol * |b| (b is the second run) also passes.
`-0.0` and `0.0` differ bitwise; such a difference is reported as a "signed zero".
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from ddp_parity.compare import relations
from ddp_parity.compare.collectives import own_scalar_reductions
from ddp_parity.compare.pairing import narrowed
from ddp_parity.fingerprints import digest_indices
from ddp_parity.trace_files import RunFiles, TraceFormatError, iter_records

# per-step quantities in causal order: what a step consumed (which samples, what they held), what
# it computed, what it applied
STEP_QUANTITIES = ("samples", "batch", "loss", "grad_norm", "lr", "param_digest")
NUMERIC = ("loss", "grad_norm", "lr", "param_digest")
SAMPLE_KEYS = ("indices", "indices_digest", "batch_digest")
WARMUP_STEPS = 5  # step times of the first steps (compilation, allocation) are left out of the median


# ---------------------------------------------------------------------------------------------
# equality


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def identical(a, b) -> bool:
    """Bitwise identity of two trace values (numbers, strings, lists of them)."""
    if a == b:
        if a == 0 and _is_number(a) and _is_number(b):
            return math.copysign(1.0, a) == math.copysign(1.0, b)
        if isinstance(a, list):
            return all(identical(x, y) for x, y in zip(a, b))
        return True
    if isinstance(a, float) and isinstance(b, float):
        return a != a and b != b  # both NaN
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return all(identical(x, y) for x, y in zip(a, b))
    return False


def difference_note(a, b) -> str | None:
    """A word on a difference worth naming: a sign of zero, a NaN/Inf on one side."""
    if _is_number(a) and _is_number(b):
        if a == b == 0:
            return "signed zero"
        if math.isfinite(a) != math.isfinite(b):
            return "non-finite on one side"
    return None


@dataclass
class Criterion:
    rtol: float = 0.0
    atol: float = 0.0

    def __post_init__(self):
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if not (_is_number(value) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    @property
    def exact(self) -> bool:
        return self.rtol == 0.0 and self.atol == 0.0

    def describe(self):
        return "exact" if self.exact else {"rtol": self.rtol, "atol": self.atol}

    @classmethod
    def from_description(cls, described) -> Criterion:
        """The criterion a report's `criterion` (describe()'s output) names; exact unless it gives tolerances."""
        if isinstance(described, dict):
            return cls(float(described.get("rtol") or 0.0), float(described.get("atol") or 0.0))
        return cls()

    def equal(self, a, b) -> bool:
        if identical(a, b):
            return True
        if self.exact:
            return False
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(self.equal(x, y) for x, y in zip(a, b))
        if not (_is_number(a) and _is_number(b)):
            return False
        return abs(a - b) <= self.atol + self.rtol * abs(b)


def _diff(a: float, b: float) -> float:
    if identical(a, b):
        return 0.0
    d = abs(a - b)
    return math.inf if math.isnan(d) else d


# ---------------------------------------------------------------------------------------------
# statistics of one quantity


@dataclass
class Stats:
    """How one quantity compared: counts and the largest differences."""

    compared: int = 0
    equal: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    first: dict | None = None

    def add(self, a: float, b: float, criterion: Criterion, where: dict) -> bool:
        self.compared += 1
        ok = criterion.equal(a, b)
        self.equal += ok
        diff = _diff(a, b)
        self.max_abs = max(self.max_abs, diff)
        self.max_rel = max(self.max_rel, diff / abs(b) if b != 0 else (0.0 if diff == 0 else math.inf))
        if not ok and self.first is None:
            self.first = {**where, "a": a, "b": b}
            note = difference_note(a, b)
            if note:
                self.first["note"] = note
        return ok

    def add_tensor(self, a: torch.Tensor, b: torch.Tensor, criterion: Criterion, name: str, chunk: int = 1 << 22):
        """Compare two tensors in chunks, so extra memory stays a few chunks, not a tensor copy."""
        self.add_chunks(zip(a.reshape(-1).split(chunk), b.reshape(-1).split(chunk)), criterion, name)

    def add_chunks(self, chunks: Iterable[tuple[torch.Tensor, torch.Tensor]], criterion: Criterion, name: str) -> None:
        """Compare one pair of tensors given as consecutive flat chunks of equal lengths."""
        self.compared += 1
        ok, max_abs, max_rel, first, start = True, 0.0, 0.0, None, 0
        for ca, cb in chunks:
            differ = _bits(ca) != _bits(cb)
            if bool(differ.any()):  # else: bitwise equal, the common case and the cheapest
                da, db = ca.double(), cb.double()
                diff = torch.where(differ, (da - db).abs(), torch.zeros_like(da))
                diff = torch.nan_to_num(diff, nan=math.inf)
                tolerated = diff <= criterion.atol + criterion.rtol * db.abs()
                bad = differ if criterion.exact else differ & ~tolerated
                rel = torch.where(diff == 0, torch.zeros_like(diff), diff / db.abs())
                max_abs = max(max_abs, diff.max().item())
                max_rel = max(max_rel, rel.max().item())
                if bool(bad.any()):
                    ok = False
                    if first is None:
                        at = int(bad.nonzero()[0])
                        first = {"tensor": name, "element": start + at, "a": ca[at].item(), "b": cb[at].item()}
                        note = difference_note(first["a"], first["b"])
                        if note:
                            first["note"] = note
                del da, db, diff, bad, rel
            start += ca.numel()
        self.equal += ok
        self.max_abs, self.max_rel = max(self.max_abs, max_abs), max(self.max_rel, max_rel)
        if not ok and self.first is None:
            self.first = first

    def merge(self, other: Stats) -> None:
        self.compared += other.compared
        self.equal += other.equal
        self.max_abs, self.max_rel = max(self.max_abs, other.max_abs), max(self.max_rel, other.max_rel)
        self.first = self.first or other.first

    @property
    def all_equal(self) -> bool:
        return self.equal == self.compared

    def summary(self) -> dict:
        return {
            "compared": self.compared,
            "equal": self.equal,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "first_divergence": self.first,
        }


_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit patterns as integers: equal exactly when the values are bitwise identical."""
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    return t.view(_INT_VIEW[t.element_size()])


# ---------------------------------------------------------------------------------------------
# the sample key


def sample_key(record: dict):
    """(kind, value) of what a step consumed: its indices (or their digest), else a batch digest."""
    for key in SAMPLE_KEYS:
        if key in record:
            return key, record[key]
    return None


def comparable_samples(rec_a: dict, rec_b: dict):
    """The two records' samples in a form that compares, or (None, None) when they cannot be
    compared (none recorded, or indices on one side and a batch fingerprint on the other)."""
    ka, kb = sample_key(rec_a), sample_key(rec_b)
    if ka is None or kb is None:
        return None, None
    if ka[0] == kb[0]:
        return ka[1], kb[1]
    if {ka[0], kb[0]} == {"indices", "indices_digest"}:
        return tuple(digest_indices(k[1]) if k[0] == "indices" else k[1] for k in (ka, kb))
    return None, None


def short(value, limit: int = 12):
    if isinstance(value, list) and len(value) > limit:
        return value[:limit] + ["..."]
    return value


# ---------------------------------------------------------------------------------------------
# the walk


@dataclass
class SideFacts:
    """What the walk learns about one side on the way, for the warnings."""

    grad_norms: int = 0
    nonzero_grad_norms: int = 0
    losses: int = 0
    first_loss: object = None
    loss_changes: bool = False
    non_finite: dict | None = None  # the first NaN/Inf: {step, rank, quantity, value}
    digests: int = 0  # records with a parameter digest
    first_digest: dict = field(default_factory=dict)  # rank -> its first record's parameter digest
    digest_changes: bool = False  # a rank's parameters after some step differ from those after its first


@dataclass
class WalkResult:
    criterion: Criterion
    ranks: dict = field(default_factory=dict)  # side -> ranks with a trace
    counts: dict = field(default_factory=lambda: {"a": {}, "b": {}})  # side -> rank -> records
    quantities: dict = field(default_factory=lambda: {name: Stats() for name in STEP_QUANTITIES})
    first: dict | None = None  # the first divergence of a per-step value, in causal order
    # the first divergence of the training: `first`, unless that one is measured only (a loss, gradient norm or
    # lr apart at a step whose parameter digest after it is equal on both sides); then a later step's, or None
    first_trained: dict | None = None
    # a gradient norm a few ulps apart at a step whose rate is 0 on both sides, the parameters after it equal:
    # held until a later step shows what it moved (an lr apart beyond rounding where the parameters part wins)
    held: dict | None = None
    trained_equal_before: int = 0  # as steps_equal_before, counted up to first_trained
    trained_last_equal_step: int | None = None
    structure: dict | None = None  # the first structural divergence: ranks, count, numbering
    sketches: dict | None = None  # the `layers` rows and columns compared beside the digest, if any
    layers_parted: int | None = None  # the first step after which a layer's sketch differs (any rank), if any
    # both sides' hooks sum their own gradient norm over param groups in another order (comparator's
    # hooks_norm_orders_apart), and the first norm passed over as that order's, not the training's
    norm_orders_apart: bool = False
    measured_in_order: dict | None = None
    # the first loss passed over as reduced over the ranks before it was recorded (a loss tensor all-reduced or
    # reduced in place for logging, before backward): {quantity, step, rank, a, b, side, how}
    reduced_in_place: dict | None = None
    steps_equal_before: int = 0  # lock-step positions that matched on every rank before the first divergence
    rank_steps_compared: int = 0  # rank-steps whose two records were compared (both present, the same step number)
    # side -> the quantities its recorder marked unrecorded (meta.json `unrecorded`) whose placeholders the walk left
    # out: never compared, never a health check's evidence
    placeholders: dict = field(default_factory=lambda: {"a": [], "b": []})
    last_equal_step: int | None = None
    problems: list = field(default_factory=list)
    unreadable: list = field(default_factory=list)
    uneven_sides: set = field(default_factory=set)
    curves: dict = field(default_factory=dict)
    times: dict = field(default_factory=dict)
    facts: dict = field(default_factory=lambda: {"a": SideFacts(), "b": SideFacts()})

    @property
    def earliest(self) -> dict | None:
        """The first divergence the traces show: a structural one at or before the first value one wins."""
        s, f = self.structure, self.first
        if s is None or f is None:
            return s or f
        return s if (s.get("position", 0) <= f.get("position", 0)) else f

    def steps_summary(self) -> dict:
        return {
            "ranks_a": self.ranks.get("a", []),
            "ranks_b": self.ranks.get("b", []),
            "steps_a": dict(sorted(self.counts["a"].items())),
            "steps_b": dict(sorted(self.counts["b"].items())),
        }


def trace_streams(run: RunFiles, tolerant: bool, unreadable: list) -> dict:
    """rank -> record iterator of one run. Tolerant: a missing or cut-off trace ends there (a
    crashed run); otherwise it raises TraceFormatError."""
    if run.ranks_error is not None:
        if not tolerant:
            raise run.ranks_error
        unreadable.append(str(run.ranks_error))
        return {}

    def records(stream):
        try:
            yield from stream
        except (TraceFormatError, OSError) as err:
            if not tolerant:
                raise
            unreadable.append(str(err))

    return {rank: records(stream) for rank, stream in run.streams.items()}


# the per-step quantities that rounding moves (`exact_only` walks leave them out; --tolerance noise judges
# them against the measured noise), and the rest, which no rounding moves: exact under any tolerance
FLOATS = ("loss", "grad_norm", "param_digest")
EXACT_UNDER_NOISE = tuple(q for q in STEP_QUANTITIES if q not in FLOATS)


def without_floats(record: dict) -> dict:
    """A record as an exact-only walk sees it: samples, batch digest, lr and step numbers; the loss 0."""
    return {**{k: v for k, v in record.items() if k not in FLOATS}, "loss": 0.0}


def without_batch_digest(record: dict) -> dict:
    """A record without its batch digest: where the sides digest other things as their batch."""
    return {k: v for k, v in record.items() if k != "batch_digest"}


def walk_runs(
    run_a: RunFiles,
    run_b: RunFiles,
    criterion: Criterion,
    tolerant: bool = False,
    exact_only: bool = False,
    digest_positions: list[tuple[int, int]] | None = None,
    sketches: dict | None = None,
    norm_orders_apart: bool = False,
    batch_digests: bool = True,
) -> WalkResult:
    """One walk over both runs. `exact_only` (--tolerance noise): the float quantities left out, so the
    first divergence is the first difference in what no rounding can move. `digest_positions`: where
    the sides' param_digest sum other parameters, the elements that sum the same one (pairing.py).
    `sketches`: the `layers` rows and columns both sides sketched alike (comparator.sketch_pairing).
    `norm_orders_apart`: both sides' hooks sum the gradient norm in other orders (hooks_norm_orders_apart).
    `batch_digests=False`: the records' batch digests left out (they digest other things on the two sides:
    batch_inputs.py), so the samples are compared only where indices were recorded."""
    unreadable: list = []
    streams = {"a": trace_streams(run_a, tolerant, unreadable), "b": trace_streams(run_b, tolerant, unreadable)}
    unrecorded = {side: unrecorded_loss_from(run.meta) for side, run in (("a", run_a), ("b", run_b))}
    streams = {
        side: {r: placeholders_dropped(it, loss_unrecorded_from_step(run.meta, r)) for r, it in per.items()}
        for (side, per), run in zip(streams.items(), (run_a, run_b))
    }
    if digest_positions is not None:
        streams = narrowed(streams, digest_positions)
    if exact_only:
        streams = {side: {r: map(without_floats, it) for r, it in per.items()} for side, per in streams.items()}
    if not batch_digests:
        streams = {side: {r: map(without_batch_digest, it) for r, it in per.items()} for side, per in streams.items()}
    names = {"a": run_a.name, "b": run_b.name}
    result = walk_streams(streams, criterion, names=names, sketches=sketches, norm_orders_apart=norm_orders_apart)
    result.unreadable = unreadable
    result.placeholders = {side: ["loss"] if unrecorded[side] else [] for side in ("a", "b")}
    return result


UNRECORDED_FROM = re.compile(r"^from step (\d+)\b")


def unrecorded_loss_from(meta) -> dict:
    """rank (None: every rank) -> the first step from which the run's recorder marked the loss unrecorded (meta.json
    `unrecorded`, {what: "loss", why: "from step N: ...", rank}: the hooks saw no backward before the optimizer step
    and wrote a NaN in its place); {} where it marked none."""
    items = meta.get("unrecorded") if isinstance(meta, dict) else None
    out: dict = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or item.get("what") != "loss":
            continue
        found = UNRECORDED_FROM.match(str(item.get("why", "")))
        step = int(found.group(1)) if found else 0  # no step said: every step may hold the placeholder
        rank = item.get("rank") if isinstance(item.get("rank"), int) else None
        out[rank] = min(step, out.get(rank, step))
    return out


def loss_unrecorded_from_step(meta, rank) -> int | None:
    """The first step from which the recorder marked `rank`'s loss unrecorded (unrecorded_loss_from), or None."""
    steps = [s for key, s in unrecorded_loss_from(meta).items() if key is None or key == rank]
    return min(steps) if steps else None


def loss_placeholder(record: dict, meta, rank) -> bool:
    """The record's loss is the recorder's placeholder for a loss it marked unrecorded (placeholders_dropped)."""
    return next(placeholders_dropped([record], loss_unrecorded_from_step(meta, rank))).get("loss", 0) is None


def placeholders_dropped(records: Iterable[dict], from_step: int | None) -> Iterator[dict]:
    """A rank's records with the recorder's placeholder for an unrecorded loss (NaN, from the step its note names)
    made None: nothing recorded, so nothing compared, nothing learned from it (a NaN there is no value the
    training reached). A number recorded at such a step (a later step with a backward) is kept."""
    if from_step is None:
        yield from records
        return
    for rec in records:
        loss = rec.get("loss")
        if isinstance(loss, float) and loss != loss and isinstance(rec.get("step"), int) and rec["step"] >= from_step:
            rec = {**rec, "loss": None}
        yield rec


def walk_streams(
    streams: dict, criterion: Criterion, names: dict, sketches: dict | None = None, norm_orders_apart: bool = False
) -> WalkResult:
    """Step through both sides' records, every rank in lock step (record i of every rank is the same
    optimizer step), once to the end: figures per quantity, the first divergence, the counts. `sketches`:
    {"rows": n, "columns": [...]}, the first n rows of the records' `layers` that both sides sketched alike
    and their projection columns, which a step whose parameter digest is equal must also have equal to be
    called measured only. `norm_orders_apart`: the sides' hooks sum their own gradient norm in another order, so a
    norm a few ulps apart over equal gradients is measured, not trained (_measured_in_another_order)."""
    result = WalkResult(criterion, sketches=sketches, norm_orders_apart=norm_orders_apart)
    result.ranks = {side: sorted(streams[side], key=str) for side in ("a", "b")}
    common = [r for r in result.ranks["a"] if r in streams["b"]]
    if result.ranks["a"] != result.ranks["b"]:
        result.problems.append(f"the runs have different ranks: {result.ranks['a']} vs {result.ranks['b']}")
        lacking = next((("b", r) for r in result.ranks["a"] if r not in streams["b"]), None) or next(
            ("a", r) for r in result.ranks["b"] if r not in streams["a"]
        )
        result.structure = {"quantity": "ranks", "step": None, "rank": lacking[1], "side": lacking[0], "position": 0}
    sums = {"a": LossSums(), "b": LossSums()}
    times: dict[str, array] = {"a": array("d"), "b": array("d")}
    timed_rank = min(common, key=str) if common else None
    fast = criterion.exact
    parted: set = set()  # ranks whose step numbers parted ways: compared no further
    equal_counts = dict.fromkeys(STEP_QUANTITIES, 0)
    measured_ratios: dict = {}  # (rank, quantity): a / b where that quantity was apart with the parameters equal
    quantities, facts = result.quantities, result.facts
    position = 0
    while True:
        recs = {side: {r: next(it, None) for r, it in streams[side].items()} for side in ("a", "b")}
        if not any(rec is not None for side in recs.values() for rec in side.values()):
            break
        found_here = []
        for side in ("a", "b"):
            counts = result.counts[side]
            for r, rec in recs[side].items():
                if rec is None:
                    continue
                counts[r] = counts.get(r, 0) + 1
                sums[side].add(position, rec["step"], math.nan if rec["loss"] is None else rec["loss"])
                time_s = rec.pop("time_s", None)  # wall time: summarised, never compared
                if r == timed_rank and time_s is not None:
                    times[side].append(time_s)
                _learn(facts[side], rec, r)
        for r in common:
            ra, rb = recs["a"][r], recs["b"][r]
            if ra is None or rb is None:
                if (ra or rb) is not None and result.structure is None:
                    present = ra or rb
                    result.structure = {"quantity": "count", "step": present["step"], "rank": r, "position": position}
                continue
            if r in parted:
                continue
            if ra["step"] != rb["step"]:
                parted.add(r)
                result.problems.append(f"rank {r}: step numbers part ways: {ra['step']} vs {rb['step']}")
                if result.structure is None:
                    result.structure = {
                        "quantity": "numbering",
                        "step": min(ra["step"], rb["step"]),
                        "rank": r,
                        "step_numbers": {"a": ra["step"], "b": rb["step"]},
                        "position": position,
                    }
                continue
            result.rank_steps_compared += 1
            if fast and ra == rb and not _has_zero(ra):  # every field bitwise equal (a NaN never is ==)
                equal_counts["samples"] += 1
                for name in STEP_QUANTITIES[2:]:
                    equal_counts[name] += ra.get(name) is not None
                if "batch_digest" in ra and sample_key(ra)[0] != "batch_digest":
                    equal_counts["batch"] += 1
                continue
            if result.layers_parted is None and _layers_apart(ra, rb, sketches):
                result.layers_parted = ra["step"]
            divergence = _compare_step(ra, rb, r, quantities, criterion)
            if divergence is not None:
                divergence["position"] = position
                found_here.append(divergence)
        _check_ranks_in_step(recs, position, result)
        if result.structure is not None and result.structure["step"] is None:  # ranks missing: where it starts
            result.structure["step"] = next(rec["step"] for side in recs.values() for rec in side.values() if rec)
        order = {name: i for i, name in enumerate(STEP_QUANTITIES)}
        present = next((rec for side in recs.values() for rec in side.values() if rec is not None), None)
        if found_here and result.first is None:
            result.first = min(found_here, key=lambda d: (order[d["quantity"]], str(d["rank"])))
        if result.first is None and result.structure is None:
            result.steps_equal_before += 1
            result.last_equal_step = present["step"] if present else None
        if result.first_trained is None and result.structure is None:
            training = _trained_divergences(found_here, recs, measured_ratios, criterion, sketches, result)
            chosen = min(training, key=lambda d: (order[d["quantity"]], str(d["rank"]))) if training else None
            if chosen is not None and result.held is None and _rounded_norm_at_rest(chosen, recs):
                result.held = chosen  # what it moved shows at a later step: an lr apart there outranks it
                held_counts = result.trained_equal_before, result.trained_last_equal_step
            elif chosen is not None:
                result.first_trained = _lr_over_held(result.held, chosen)
                if result.first_trained is result.held:
                    result.trained_equal_before, result.trained_last_equal_step = held_counts
            if chosen is None or result.held is chosen:
                result.trained_equal_before += 1
                result.trained_last_equal_step = present["step"] if present else None
        position += 1
    if result.first_trained is None and result.held is not None:  # nothing parted after it: it is the first
        result.first_trained = result.held
        result.trained_equal_before, result.trained_last_equal_step = held_counts
    for name, n in equal_counts.items():
        quantities[name].compared += n
        quantities[name].equal += n
    for r in common:
        count_a, count_b = result.counts["a"].get(r, 0), result.counts["b"].get(r, 0)
        if count_a != count_b:
            result.problems.append(f"rank {r}: {count_a} steps in {names['a']} but {count_b} in {names['b']}")
    if quantities["batch"].compared == 0:
        del quantities["batch"]  # no batch digests beside the indices: nothing to show
    result.curves = {side: per.means() for side, per in sums.items()}
    result.times = {"a": step_time_summary(times["a"]), "b": step_time_summary(times["b"])}
    return result


MEASURED_QUANTITIES = ("loss", "grad_norm", "lr")
RATIO_QUANTITIES = ("loss", "grad_norm")  # a recording factor (a loss × GradScaler's scale) holds step after step
# kept in place of a ratio where the measured-only values were a few float32 ulps apart (another order of one sum)
ROUNDING = "rounding"


def _trained_divergences(
    found_here: list, recs: dict, ratios: dict, criterion: Criterion, sketches: dict | None = None, result=None
) -> list[dict]:
    """The step's divergences in the training: each measured-only one is passed over (its ratio kept), and
    one whose value is still the other side's × the ratio an earlier measured-only step showed (a loss recorded
    × the scale, step after step) is passed over for the step's next quantity apart, which is the training's.
    A gradient norm the hooks summed in another order over equal gradients is passed over whatever the parameters
    did: where they part at that step, the training's divergence is the parameters after it."""
    training = []
    for d in found_here:
        reduced = loss_reduced_before_recorded(d, recs)
        if reduced is not None:  # what was recorded, not what was backpropagated: the step's next quantity apart
            if result is not None:
                result.reduced_in_place = result.reduced_in_place or reduced
            nxt = _next_apart(d, recs, criterion)
            if nxt is not None:
                training.append(nxt)
            continue
        if result is not None and _measured_in_another_order(d, recs, sketches, result.norm_orders_apart):
            clips = [recs[s][d["rank"]].get("clip_max_norm") for s in ("a", "b")]
            said = {**d, "clip_max_norms": clips} if None not in clips else d  # clipped, bound nowhere
            result.measured_in_order = result.measured_in_order or said
            ratios.setdefault((d["rank"], d["quantity"]), ROUNDING)
            parted = _parameters_parted_unseen(d, recs, sketches)
            if parted is not None:
                training.append(parted)
            continue
        if _measured_only(d, recs, sketches):
            ratio = _ratio(d.get("a"), d.get("b"))
            if d["quantity"] in RATIO_QUANTITIES and ratio is not None:
                ratios.setdefault((d["rank"], d["quantity"]), ROUNDING if _rounding_apart(d["a"], d["b"]) else ratio)
            continue
        nxt = _past_measured_ratios(d, recs, ratios, criterion)
        if nxt is None and _layers_apart(recs["a"][d["rank"]], recs["b"][d["rank"]], sketches):
            nxt = d  # every recorded figure keeps its measured ratio, yet a layer the digest does not cover moved
        if nxt is not None:
            training.append(nxt)
    return training


def loss_reduced_before_recorded(d: dict, recs: dict) -> dict | None:
    """A loss apart on one rank that is, on one side, the sum (or the mean) over the ranks of the other side's losses
    at that step, where that side made a reduction of one number of its own during the step: the loop reduced its
    loss tensor in place (to log it) before it was recorded. A collective called on a tensor is no autograd op, so
    what backward computes is unchanged; the records show the value written, not the one backpropagated."""
    if d.get("quantity") != "loss":
        return None
    rank = d["rank"]
    for side, other in (("a", "b"), ("b", "a")):
        mine = recs[side].get(rank)
        theirs = [rec.get("loss") if rec else None for rec in recs[other].values()]
        how = relations.over_ranks(mine.get("loss"), theirs) if mine else None
        ops = own_scalar_reductions(mine) if how else []
        if ops:
            shown = sorted({f"{e.get('op')} {e.get('reduce_op') or ''} {e.get('dtype')} {e.get('shape')}" for e in ops})
            return {
                **{k: d.get(k) for k in ("quantity", "step", "rank", "a", "b")},
                "side": side,
                "how": how,
                "ranks": len(theirs),
                "collectives": [" ".join(o.split()) for o in shown],
            }
    return None


def _next_apart(d: dict, recs: dict, criterion: Criterion) -> dict | None:
    """The step's next quantity apart on `d`'s rank after `d`'s (in causal order), or None."""
    ra, rb = recs["a"][d["rank"]], recs["b"][d["rank"]]
    for name in NUMERIC[NUMERIC.index(d["quantity"]) + 1 :]:
        a, b, named = compared_values(ra, rb, name, criterion)
        if a is not None and b is not None and not criterion.equal(a, b):
            return {
                **{k: v for k, v in d.items() if k not in ("a", "b", "note")},
                "quantity": name,
                "a": a,
                "b": b,
                **named,
            }
    return None


def _past_measured_ratios(d: dict, recs: dict, ratios: dict, criterion: Criterion) -> dict | None:
    """`d`, or where its quantity keeps the measured ratio, the step's next quantity apart (None: none)."""
    ra, rb = recs["a"][d["rank"]], recs["b"][d["rank"]]
    if ra.get("param_digest") is None or rb.get("param_digest") is None:
        return d  # without the parameters after the step, nothing says the training of this step is the same
    passed = None  # the first quantity passed over, with its ratio
    rounded = None  # the first quantity passed over as a few ulps apart again: the training's unless a later one is
    for name in NUMERIC[NUMERIC.index(d["quantity"]) :] if d["quantity"] in NUMERIC else ():
        a, b = ra.get(name), rb.get(name)
        if a is None or b is None or criterion.equal(a, b):
            continue
        kept = ratios.get((d["rank"], name))
        if kept == ROUNDING:
            if _rounding_apart(a, b):
                rounded = rounded or {**d, "quantity": name, "a": a, "b": b}
                continue  # a clip coefficient that rounded alike before may not now: kept unless another moved more
            kept = None
        if rounded is not None and name == "param_digest":
            return rounded  # nothing between the norm and the update moved: the norm's rounding did
        ratio = _ratio(a, b)
        if isinstance(kept, float) and ratio is not None and abs(ratio - kept) <= 1e-6 * abs(kept):
            passed = passed or {"quantity": name, "ratio": kept}
            continue  # the same recording factor as where the parameters stayed equal: measured, not trained
        if passed is None and rounded is None:
            return d
        return {**d, "quantity": name, "a": a, "b": b, **({"measured_apart": passed} if passed else {})}
    if rounded is not None:
        return rounded
    return None if d["quantity"] in NUMERIC else d


def next_quantity_apart(d: dict, ra: dict, rb: dict, criterion: Criterion) -> dict | None:
    """`d` moved to the first quantity after its own, in causal order, that the step's two records hold apart
    (None: none is): where other evidence shows `d`'s quantity did not change the training, the training's
    divergence at that step is the next one."""
    later = NUMERIC[NUMERIC.index(d["quantity"]) + 1 :] if d.get("quantity") in NUMERIC else ()
    for name in later:
        a, b = ra.get(name), rb.get(name)
        if a is not None and b is not None and not criterion.equal(a, b):
            return {**d, "quantity": name, "a": a, "b": b}
    return None


def _ratio(a, b) -> float | None:
    if not (_is_number(a) and _is_number(b)) or b == 0 or not math.isfinite(a / b):
        return None
    return a / b


def _rounding_apart(a, b) -> bool:
    """Two values a few float32 ulps apart: another order of the same sum, not a recording factor. Such a norm
    can leave the parameters equal for steps (clipping's coefficient rounds alike) and part them at the next, so
    where it is apart again it stays the training's candidate, never 'the same factor, measured'."""
    ulps = float32_ulps(a, b)
    return ulps is not None and ulps <= FEW_FLOAT32_ULPS


def _layers_apart(ra: dict, rb: dict, sketches: dict | None) -> bool:
    """Both records hold the `layers` rows both sides sketched alike (`sketches`), and a row's projections
    differ: a parameter moved otherwise after this step."""
    rows_a, rows_b = ra.get("layers"), rb.get("layers")
    if not sketches or not isinstance(rows_a, list) or not isinstance(rows_b, list):
        return False
    n, cols = sketches["rows"], sketches["columns"]
    if len(rows_a) < n or len(rows_b) < n:
        return False
    return any(not identical([x[i] for i in cols], [y[i] for i in cols]) for x, y in zip(rows_a[:n], rows_b[:n]))


# what a record holds where the step clipped: its grad_norm is then clip_grad_norm_'s, which the clip used
CLIPPED_BY = ("clip_max_norm", "clip_value")


def _measured_in_another_order(divergence: dict, recs: dict, sketches: dict | None, orders_apart: bool) -> bool:
    """A gradient norm a few float32 ulps apart, with every parameter's gradient norm equal (the `layers` grad_norm
    column, every row paired): the same gradients summed in another order, which no update read. Either only the
    hooks measured it (neither record holds a clip: their own 2-norm), summed over each optimizer's param groups in
    orders that differ (`orders_apart`); or each side's clip_grad_norm_ measured it and bound on neither side
    (`clip_binds_nowhere`). A clip that binds scales the update by its norm: that norm is never passed over here."""
    if divergence["quantity"] != "grad_norm" or not _rounding_apart(divergence["a"], divergence["b"]):
        return False
    ra, rb = recs["a"].get(divergence["rank"]), recs["b"].get(divergence["rank"])
    if not ra or not rb:
        return False
    if any(r.get(k) is not None for r in (ra, rb) for k in CLIPPED_BY):
        if not clip_binds_nowhere(divergence, ra, rb):
            return False
    elif not orders_apart:
        return False
    return _gradient_norms_equal(ra, rb, sketches)


# clip_grad_norm_ scales the gradients by min(1, max_norm / (norm + 1e-6)): below max_norm by more than this
# relative margin (far wider than the norm's own rounding), the factor is exactly 1 and the norm reaches no update
CLIP_UNBOUND_MARGIN = 1e-4


def clip_binds_nowhere(divergence: dict, ra: dict, rb: dict) -> bool:
    """Both records clipped by norm (`clip_max_norm`, no `clip_value`), each side's norm well below its max_norm:
    each clip multiplied the gradients by exactly 1, so the norm, however summed, changed no update."""
    for rec, norm in ((ra, divergence["a"]), (rb, divergence["b"])):
        max_norm = rec.get("clip_max_norm")
        if rec.get("clip_value") is not None or not isinstance(max_norm, (int, float)) or isinstance(max_norm, bool):
            return False
        if not isinstance(norm, (int, float)) or not norm + 1e-6 < max_norm * (1 - CLIP_UNBOUND_MARGIN):
            return False
    return True


def _gradient_norms_equal(ra: dict, rb: dict, sketches: dict | None) -> bool:
    """Every parameter's gradient norm (the `layers` column comparator.sketch_pairing names where every row pairs)
    bitwise equal in the two records: each is one tensor's norm, whatever order the total sums them in."""
    column = (sketches or {}).get("grad_column")
    rows_a, rows_b = ra.get("layers"), rb.get("layers")
    if column is None or not isinstance(rows_a, list) or not isinstance(rows_b, list) or len(rows_a) != len(rows_b):
        return False
    if len(rows_a) != sketches["rows"] or not all(len(x) > column and len(y) > column for x, y in zip(rows_a, rows_b)):
        return False
    return identical([x[column] for x in rows_a], [y[column] for y in rows_b])


def _parameters_parted_unseen(divergence: dict, recs: dict, sketches: dict | None) -> dict | None:
    """The parameters after the divergence's step as the training's divergence, where a layer's sketch differs and
    the digest (the first and last tensors only) is equal, so no digest divergence of the step says so
    (`layers_apart`); None where the layers are alike or the digest differs (that divergence is the step's own)."""
    ra, rb = recs["a"][divergence["rank"]], recs["b"][divergence["rank"]]
    digests = ra.get("param_digest"), rb.get("param_digest")
    if None in digests or digests[0] != digests[1] or not _layers_apart(ra, rb, sketches):
        return None
    return {**divergence, "quantity": "param_digest", "a": digests[0], "b": digests[1], "layers_apart": True}


def _measured_only(divergence: dict, recs: dict, sketches: dict | None = None) -> bool:
    """A loss, gradient norm or lr apart at a step whose parameter digest after it both sides recorded, equal,
    and where both sketched the layers alike (`sketches`), every layer's projections equal too: what was measured
    differs there, the training of that step did not."""
    if divergence["quantity"] not in MEASURED_QUANTITIES:
        return False
    ra, rb = recs["a"].get(divergence["rank"]), recs["b"].get(divergence["rank"])
    if not ra or not rb or ra.get("param_digest") is None or rb.get("param_digest") is None:
        return False
    if ra.get("lr") == 0 or rb.get("lr") == 0:  # a rate of 0 moves no parameter (warmup): equal proves nothing there
        return False
    return ra["param_digest"] == rb["param_digest"] and not _layers_apart(ra, rb, sketches)


def _rounded_norm_at_rest(divergence: dict, recs: dict) -> bool:
    """A gradient norm a few float32 ulps apart at a step whose lr is 0 on both sides, with the parameter digests
    after it equal: no parameter moved there, so whether it changes the training shows only later."""
    if divergence["quantity"] != "grad_norm":
        return False
    ra, rb = recs["a"].get(divergence["rank"]), recs["b"].get(divergence["rank"])
    if not _rounding_apart(divergence["a"], divergence["b"]) or not ra or not rb:
        return False
    at_rest = ra.get("lr") == 0 and rb.get("lr") == 0
    return at_rest and ra.get("param_digest") is not None and ra.get("param_digest") == rb.get("param_digest")


def _lr_over_held(held: dict | None, chosen: dict) -> dict:
    """The training's first divergence: an lr apart beyond rounding (walk's _lr_before_rounded_norm) at the step the
    parameters part, over a norm a few ulps apart held from a step that moved nothing; else the held one."""
    if held is None:
        return chosen
    if chosen["quantity"] == "lr":
        ulps = float32_ulps(chosen["a"], chosen["b"]) if _is_number(chosen["a"]) and _is_number(chosen["b"]) else None
        if ulps is None or ulps > FEW_FLOAT32_ULPS:
            return chosen
    return held


def _check_ranks_in_step(recs: dict, position: int, result: WalkResult) -> None:
    """The ranks of one side must record the same number of steps: in DDP a rank with an extra step
    waits in an all-reduce no peer joins. Named once per side, as a problem and a structural divergence."""
    for side, per_rank in recs.items():
        present = [r for r, rec in per_rank.items() if rec is not None]
        if present and len(present) < len(per_rank):
            if side in result.uneven_sides:
                continue
            result.uneven_sides.add(side)
            missing = [r for r, rec in per_rank.items() if rec is None]
            step = per_rank[present[0]]["step"]
            result.problems.append(
                f"side {side}: rank(s) {missing} recorded fewer steps than rank(s) {present} (from step {step})"
            )
            if result.structure is None:
                rank = present[0]  # a rank with the extra step: it waits for the others
                result.structure = {"quantity": "count", "step": step, "rank": rank, "position": position}


def _has_zero(rec: dict) -> bool:
    """A zero somewhere: `==` takes -0.0 for 0.0, so such a record takes the full path."""
    for name in ("loss", "grad_norm", "lr"):
        if rec.get(name) == 0:
            return True
    digest = rec.get("param_digest")
    return bool(digest) and 0 in digest


def _learn(facts: SideFacts, rec: dict, rank) -> None:
    loss, grad = rec["loss"], rec.get("grad_norm")
    if loss is not None:  # None: a placeholder of a loss the recorder could not take, no record of one
        facts.losses += 1
        if facts.first_loss is None:
            facts.first_loss = loss
        elif not facts.loss_changes and not identical(loss, facts.first_loss):
            facts.loss_changes = True
    if grad is not None:
        facts.grad_norms += 1
        facts.nonzero_grad_norms += grad != 0
    digest = rec.get("param_digest")
    if digest is not None:
        facts.digests += 1
        first = facts.first_digest.setdefault(rank, digest)
        facts.digest_changes = facts.digest_changes or not identical(digest, first)
    if facts.non_finite is None:
        for name, value in (("loss", loss), ("grad_norm", grad)):
            if value is not None and value - value != 0:  # NaN or +-Inf
                facts.non_finite = {"step": rec["step"], "rank": rank, "quantity": name, "value": value}
                break


def step_divergence(rec_a: dict, rec_b: dict, rank, criterion: Criterion) -> dict | None:
    """One step's first divergence on one rank in causal order, as the walk finds it, its counts left alone: what
    another rank than the walk's first shows at the step the runs part."""
    return _compare_step(rec_a, rec_b, rank, {name: Stats() for name in STEP_QUANTITIES}, criterion)


def _compare_step(rec_a: dict, rec_b: dict, rank, quantities: dict, criterion: Criterion) -> dict | None:
    """Compare one step on one rank; return its first divergence in causal order, if any."""
    where = {"step": rec_a["step"], "epoch": rec_a.get("epoch"), "rank": rank}
    first = None
    samples_a, samples_b = comparable_samples(rec_a, rec_b)
    stats = quantities["samples"]
    if samples_a is not None or samples_b is not None:  # (None, None): nothing comparable, never counted equal
        stats.compared += 1
        if samples_a == samples_b:
            stats.equal += 1
        else:
            first = {**where, "quantity": "samples", "a": short(samples_a), "b": short(samples_b)}
            if rec_b.get("epoch") != rec_a.get("epoch"):
                first["epoch_b"] = rec_b.get("epoch")
            stats.first = stats.first or first
    kind = sample_key(rec_a)
    # the batch digests beside the indices: where a side recorded a batch digest alone (a loop fed by its own
    # generator), what each side digests as its batch may be another structure, so it is no training difference
    if "batch_digest" in rec_a and "batch_digest" in rec_b and kind and kind[0] != "batch_digest":
        stats = quantities["batch"]
        stats.compared += 1
        if rec_a["batch_digest"] == rec_b["batch_digest"]:
            stats.equal += 1
        else:
            found = {**where, "quantity": "batch", "a": rec_a["batch_digest"], "b": rec_b["batch_digest"]}
            stats.first = stats.first or found
            first = first or found
    for name in NUMERIC:
        a, b, named = compared_values(rec_a, rec_b, name, criterion)
        if a is None or b is None:
            continue
        if isinstance(a, list):  # param_digest: compared element by element, counted once
            if len(a) == len(b) and a:
                worst = max(range(len(a)), key=lambda i: _diff(a[i], b[i]))
                ok = quantities[name].add(a[worst], b[worst], criterion, where) and criterion.equal(a, b)
            else:
                ok = quantities[name].add(math.nan, 0.0, criterion, where)
        else:
            ok = quantities[name].add(a, b, criterion, {**where, **named})
        if not ok and first is None:
            first = {**where, "quantity": name, "a": a, "b": b, **named}
            note = difference_note(a, b) if not isinstance(a, list) else None
            if note:
                first["note"] = note
    return _lr_before_rounded_norm(first, rec_a, rec_b, where)


def compared_values(rec_a: dict, rec_b: dict, name: str, criterion: Criterion) -> tuple:
    """(a, b, what names them) of one quantity of a step's two records. The lr covers every param group: the
    record's `lr` is group 0's; where that is equal and another group's rate (`param_groups`) is not, that group's
    two rates, with its index (`group`): a rate multiplied for one group only moves that group's parameters."""
    a, b = rec_a.get(name), rec_b.get(name)
    if name != "lr" or a is None or b is None or not criterion.equal(a, b):
        return a, b, {}
    apart = group_lrs_apart(rec_a, rec_b, criterion)
    return (a, b, {}) if apart is None else (apart[1], apart[2], {"group": apart[0]})


def group_lrs_apart(rec_a: dict, rec_b: dict, criterion: Criterion) -> tuple[int, float, float] | None:
    """(index, a's lr, b's lr) of the first param group after group 0 whose rate differs, where both records hold
    as many groups with a rate each; else None."""
    groups = [r.get("param_groups") for r in (rec_a, rec_b)]
    if not all(isinstance(g, list) for g in groups) or len(groups[0]) != len(groups[1]):
        return None
    for i, (ga, gb) in enumerate(zip(*groups)):
        a, b = (g.get("lr") if isinstance(g, dict) else None for g in (ga, gb))
        if i and _is_number(a) and _is_number(b) and not criterion.equal(a, b):
            return i, a, b
    return None


FEW_FLOAT32_ULPS = 16  # as the causes' "a few ulps": a reduction order, not a different computation


def float32_ulps(a, b) -> int | None:
    """Distance in float32 units in the last place (same sign), or None."""
    try:
        fa, fb = np.float32(a), np.float32(b)
    except (TypeError, ValueError):
        return None
    if not (np.isfinite(fa) and np.isfinite(fb)) or (fa < 0) != (fb < 0):
        return None
    return abs(int(fa.view(np.int32)) - int(fb.view(np.int32)))


def _lr_before_rounded_norm(first: dict | None, rec_a: dict, rec_b: dict, where: dict) -> dict | None:
    """A gradient norm a few ulps apart (the same gradients summed in another order) beside an lr apart
    beyond rounding at the same step: the lr is the step's divergence. The rate is set before the step
    (by hand or by a schedule) and no gradient norm sets it, and a few ulps in a norm cannot move the
    parameters as a rate k times the other does; naming the norm would blame the order of a sum."""
    if first is None or first["quantity"] != "grad_norm":
        return first
    lr_a, lr_b = rec_a.get("lr"), rec_b.get("lr")
    if not (_is_number(lr_a) and _is_number(lr_b)) or identical(lr_a, lr_b):
        return first
    norm_ulps, lr_ulps = float32_ulps(first["a"], first["b"]), float32_ulps(lr_a, lr_b)
    if norm_ulps is None or norm_ulps > FEW_FLOAT32_ULPS or (lr_ulps is not None and lr_ulps <= FEW_FLOAT32_ULPS):
        return first
    return {**where, "quantity": "lr", "a": lr_a, "b": lr_b, "beside": {"grad_norm": [first["a"], first["b"]]}}


# ---------------------------------------------------------------------------------------------
# loss curves and step times


class LossSums:
    """Per step, the loss summed over ranks (for the plot), in flat arrays: 24 bytes a step where a
    dict of lists takes several hundred. Ranks record the same steps in the same order, so record i
    of every rank adds into slot i; a record out of line goes to a dict."""

    def __init__(self):
        self.steps, self.totals, self.counts = array("q"), array("d"), array("q")
        self.other: dict[int, list] = {}

    def add(self, position: int, step: int, loss: float) -> None:
        if position < len(self.steps) and self.steps[position] == step:
            self.totals[position] += loss
            self.counts[position] += 1
        elif position == len(self.steps) and not self.other:
            self.steps.append(step)
            self.totals.append(0.0 + loss)
            self.counts.append(1)
        else:
            entry = self.other.setdefault(step, [0.0, 0])
            entry[0] += loss
            entry[1] += 1

    def means(self, max_points: int = 20_000) -> dict[int, float]:
        """step -> mean loss over ranks, in step order; beyond `max_points` steps every k-th step
        and the last (a plot shows no more, and a dict of a million steps takes a hundred MB)."""
        steps, totals, counts = self.steps, self.totals, self.counts
        if self.other or any(a >= b for a, b in zip(steps, steps[1:])):  # out of line: merge by step
            per: dict[int, list] = {}
            for step, total, n in [*zip(steps, totals, counts), *((k, v[0], v[1]) for k, v in self.other.items())]:
                entry = per.setdefault(step, [0.0, 0])
                entry[0], entry[1] = entry[0] + total, entry[1] + n
            steps = array("q", sorted(per))
            totals = array("d", (per[s][0] for s in steps))
            counts = array("q", (per[s][1] for s in steps))
        stride = max(1, math.ceil(len(steps) / max_points))
        kept = list(range(0, len(steps), stride))
        if steps and kept[-1] != len(steps) - 1:
            kept.append(len(steps) - 1)
        return {steps[i]: totals[i] / counts[i] for i in kept}


def step_time_summary(times: array, warmup: int = WARMUP_STEPS) -> dict:
    kept = np.frombuffer(times, dtype=np.float64) if len(times) else np.empty(0)
    kept = kept[warmup:] if len(kept) > warmup else kept
    if not len(kept):
        return {"median_s": None, "steps": 0}
    middle = len(kept) // 2  # the same element as sorted(kept)[middle], without a list of floats
    return {"median_s": float(np.partition(kept, middle)[middle]), "steps": len(kept)}


def records_of(run, rank) -> Iterator[dict]:
    """One rank's records for a targeted second look (only after a divergence): a cut-off line ends it."""
    try:
        yield from iter_records(run, rank)
    except (TraceFormatError, OSError):
        return


KeyMap = Callable[[str], str]
