"""Exact relations between what two runs recorded: is one side's series a function of the other's?

When two runs differ, the numbers often carry the cause: a loss exactly 2.000 times the other's at
every step is a loss not divided by 2 accumulated micro-batches; a learning rate that is the other's
shifted by one step is a schedule one iteration ahead (or read after scheduler.step()); a gradient
norm below the 2-norm of the same gradients is another norm; a parameter with a gradient on one side
only is frozen there. Each function here is pure (lists of numbers in, a `Relation` or None out) and
says only what the numbers prove; the causes (compare/causes/) decide what it means for the story.
docs/relations.md says what each relation proves and what it cannot.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

EXACT = 1e-6  # relative: the same number up to float32 rounding of one operation
HOLDS = 1e-3  # relative: a factor that still holds at later steps, once the parameters moved apart a little


@dataclass(frozen=True)
class Relation:
    """One side's recorded series as an exact function of the other's, with its numbers."""

    kind: str  # "factor", "shift", "norm", "one_side", "update_factor"
    quantity: str  # what was related: "loss", "grad_norm", "lr", "param_grad", "update"
    side: str  # the side whose values are the function of the other's
    other: str
    value: float | int | str  # the factor, the shift in steps, the norm's name, the parameter names
    first: int | None = None  # the steps it holds at
    last: int | None = None
    count: str | None = None  # which recorded count the factor equals ("accumulate_grad_batches=2"): the first
    sentence: str = ""
    counts: tuple = ()  # every recorded count the factor equals, most telling first (`count` is the first)
    ranks: tuple = ()  # the ranks it holds on, where it was read on several ranks and holds on some only
    steps: tuple = ()  # the steps that carry a factor, where steps that agree lie between or before them
    excluded: tuple = ()  # counts the factor equals that are the same at steps that agree: ruled out
    agreeing: tuple = ()  # the steps that agree (equal, not zero) before or between those that carry it
    accumulation: tuple = ()  # (short, configured): the steps that carry it are a shorter accumulation's

    def to_json(self) -> dict:
        return asdict(self)


def number(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def _close(x: float, y: float, rtol: float) -> bool:
    return abs(x - y) <= rtol * max(abs(x), abs(y), 1e-30)


# ---------------------------------------------------------------------------------------------
# the series two runs recorded


def series(pairs: list[tuple[dict, dict]], key: str) -> tuple[list, list, list]:
    """(steps, a's values, b's values) of one record key over aligned record pairs."""
    return [ra.get("step") for ra, _ in pairs], [ra.get(key) for ra, _ in pairs], [rb.get(key) for _, rb in pairs]


def layer_column(record: dict, fields: list[str], field: str) -> list | None:
    """One field of every parameter's row in a record's `layers` (sketch.py), or None unrecorded."""
    rows = record.get("layers")
    if not rows or field not in fields:
        return None
    i = fields.index(field)
    return [row[i] if len(row) > i else None for row in rows]


def sketch_rows(record: dict, fields: list[str]) -> list[list[float]] | None:
    """Every parameter's sketch projections (the linear columns of `layers`), or None unrecorded."""
    rows = record.get("layers")
    cols = [i for i, f in enumerate(fields) if f.startswith("sketch")]
    if not rows or not cols:
        return None
    return [[float(row[i]) for i in cols] for row in rows]


# ---------------------------------------------------------------------------------------------
# a constant factor


def constant_factor(steps: list, a: list, b: list) -> tuple[float, int, int, bool] | None:
    """a = factor × b: exactly (to float32 rounding) at the first step they differ, and within HOLDS at
    every step after it up to `last`. Returns (factor, first, last, holds at every compared step from
    the first on), or None where they are equal or not proportional."""
    pairs = [(s, number(x), number(y)) for s, x, y in zip(steps, a, b)]
    pairs = [(s, x, y) for s, x, y in pairs if x is not None and y is not None]
    start = next((i for i, (_, x, y) in enumerate(pairs) if x != y), None)
    if start is None:
        return None
    s0, x0, y0 = pairs[start]
    if x0 == 0 or y0 == 0:
        return None
    factor = x0 / y0
    if _close(factor, 1.0, EXACT) or factor < 0:
        return None
    if integer_of(factor) is None:
        return None
    last = s0
    for s, x, y in pairs[start + 1 :]:
        if y == 0 or not _close(x / y, factor, HOLDS):
            return factor, s0, last, False
        last = s
    return factor, s0, last, True


def factor_shown(factor: float) -> int | str:
    """k for an integer factor k >= 2 (to float32 rounding), else the factor to 4 digits (a shorter accumulation's
    configured / short: 4/3 is 1.333)."""
    found = integer_of(factor)
    return found[0] if found and found[1] else f"{factor:.4g}"


def integer_of(factor: float) -> tuple[int, bool] | None:
    """(k, True) where factor = k, (k, False) where factor = 1/k, for an integer k >= 2 (to float32
    rounding): the only factors a slip of a count makes."""
    for k, up in ((factor, True), (1 / factor, False)):
        if k >= 1.5 and _close(k, round(k), EXACT):
            return round(k), up
    return None


def count_named(factor: float, counts: dict[str, int]) -> str | None:
    """Which recorded count the factor (or its inverse) equals: "accumulate_grad_batches=2" (the first
    of `counts_named`)."""
    named = counts_named(factor, counts)
    return named[0] if named else None


def counts_named(factor: float, counts: dict[str, int]) -> list[str]:
    """Every recorded count the factor (or its inverse) equals, in the order of `counts`: with an
    accumulation of 2 at a world size of 2 both fit, and the numbers cannot tell which one slipped."""
    found = integer_of(factor)
    if found is None:
        return []
    named = [f"{name}={value}" for name, value in counts.items() if value == found[0]]
    return named + ([f"{GRAD_SCALE}={found[0]}"] if loss_scale_power(found[0]) else [])


# a factor 2^n, n >= 8, is what GradScaler multiplies the loss by (scaler.scale(loss): 2^16 at the start by
# default, halved on an overflow, doubled every growth_interval steps): a loss recorded after scaler.scale(...)
# is that power of two × the other side's. Below 2^8 the counts (accumulation, world size) are the likelier fit.
GRAD_SCALE = "GradScaler's loss scale"
MIN_SCALE_POWER = 8


def loss_scale_power(k: int) -> int | None:
    """n where k = 2^n with n >= MIN_SCALE_POWER (a factor a GradScaler's scale makes), else None."""
    n = k.bit_length() - 1
    return n if k > 0 and k == 1 << n and n >= MIN_SCALE_POWER else None


def counts_in_words(named: list[str]) -> str:
    """ "2 is the accumulate_grad_batches and the world_size" for counts_named's list."""
    if not named:
        return ""
    k = named[0].split("=")[1]
    names = [n.split("=")[0] for n in named]
    power = loss_scale_power(int(k)) if k.isdigit() else None
    names = [f"{n} (2^{power})" if n == GRAD_SCALE else n for n in names]
    joined = names[0] if len(names) == 1 else ", the ".join(names[:-1]) + " and the " + names[-1]
    return f"{k} is the {joined}"


def factor_relation(
    quantity: str, labels: tuple[str, str], steps: list, a: list, b: list, counts: dict, micro: list | None = None
):
    """The Relation "X's quantity is k × Y's", with X the larger side, or None. Where steps that agree (equal, not
    zero) lie before or between the steps that carry the factor, which steps carry it is read before any count is
    named: a count the same at steps that agree cannot be it (`excluded`), and where the steps that carry it are
    exactly those whose micro-batches (`micro`, recorded alike on both sides) are fewer than at the steps that agree,
    it is that shorter accumulation's (`accumulation`), divided by the configured count on one side and by its own
    length on the other (a factor configured / short, an integer or not)."""
    carried = carrying_steps(steps, a, b)
    if carried is None:
        return None
    factor, carrying, agreeing = carried
    if not agreeing:
        return _constant_relation(quantity, labels, steps, a, b, counts)
    side, other = labels
    if factor < 1:
        factor, side, other = 1 / factor, other, side
    by_step = dict(zip(steps, micro or []))
    short = shorter_accumulation(factor, carrying, agreeing, by_step)
    if short is None and integer_of(factor) is None:
        return None
    fitting, excluded = counts_at_steps(factor, counts, carrying, agreeing, by_step)
    sentence = f"{side}'s {quantity} is {factor:.3f} × {other}'s at {steps_named(carrying)} and equal at "
    sentence += steps_named(agreeing)
    if excluded:
        sentence += f" ({excluded_in_words(excluded)})"
    if short is not None:
        sentence += f"; {SHORT_ACCUMULATION_SAID.format(short=short[0], configured=short[1], side=side, other=other)}"
    elif fitting:
        sentence += f"; {counts_in_words(fitting)}"
        if len(fitting) > 1:
            sentence += " (each fits at those steps: the numbers cannot tell which count slipped)"
    first, last = carrying[0], carrying[-1]
    return Relation(
        "factor",
        quantity,
        side,
        other,
        factor,
        first,
        last,
        fitting[0] if fitting else None,
        sentence + ".",
        tuple(fitting),
        steps=tuple(carrying),
        excluded=tuple(excluded),
        agreeing=tuple(agreeing),
        accumulation=short or (),
    )


def _constant_relation(quantity: str, labels: tuple[str, str], steps: list, a: list, b: list, counts: dict):
    """A factor from the first step the series differ, no step agreeing before it: every count it equals fits."""
    found = constant_factor(steps, a, b)
    if found is None:
        return None
    factor, first, last, every = found
    side, other = labels
    if factor < 1:
        factor, side, other = 1 / factor, other, side
    named = counts_named(factor, counts)
    span = f"at every step ({first}..{last})" if every else f"from step {first} to {last}"
    sentence = f"{side}'s {quantity} is {factor:.3f} × {other}'s {span}"
    if named:
        sentence += f"; {counts_in_words(named)}"
        if len(named) > 1:
            sentence += " (each fits: the numbers cannot tell which count slipped)"
    count = named[0] if named else None
    return Relation("factor", quantity, side, other, factor, first, last, count, sentence + ".", tuple(named))


# what the steps of a shorter accumulation carrying the factor prove (an epoch's left-over micro-batches stepped
# alone: Lightning divides each micro-batch's loss by accumulate_grad_batches, a loop often by the accumulation's
# own length)
SHORT_ACCUMULATION_SAID = (
    "the steps that carry it are those of a shorter accumulation (micro_batches {short} on both sides, where the "
    "steps that agree have {configured}): {other} divides that accumulation's loss by the configured count "
    "({configured}), {side} by its own length ({short})"
)


def carrying_steps(steps: list, a: list, b: list) -> tuple[float, list, list] | None:
    """(k, the steps where a = k × b, the steps where a = b, not zero), read up to the first step that is neither (the
    runs parted otherwise there: what follows tells nothing). k is the ratio at the first step they differ, exact to
    float32 rounding; at later steps within HOLDS. None where they never differ or the first difference is no
    positive factor."""
    pairs = [(s, number(x), number(y)) for s, x, y in zip(steps, a, b)]
    pairs = [(s, x, y) for s, x, y in pairs if x is not None and y is not None]
    first = next(((x, y) for _, x, y in pairs if x != y), None)
    if first is None or first[0] == 0 or first[1] == 0:
        return None
    factor = first[0] / first[1]
    if _close(factor, 1.0, EXACT) or factor < 0:
        return None
    carrying, agreeing = [], []
    for s, x, y in pairs:
        if x == y:
            if x != 0:  # a zero hides a factor: it neither carries nor agrees
                agreeing.append(s)
        elif y != 0 and _close(x / y, factor, HOLDS):
            carrying.append(s)
        else:
            break
    return factor, carrying, agreeing


def shorter_accumulation(factor: float, carrying: list, agreeing: list, micro: dict) -> tuple[int, int] | None:
    """(short, configured) where every step that carries the factor accumulated `short` micro-batches and every step
    that agrees `configured` > short (micro-batches recorded alike on both sides at each of them), and the factor is
    configured / short: the shorter accumulation's loss divided by the configured count on one side and by its own
    length on the other. None otherwise."""
    if not carrying or not agreeing:
        return None
    short = {micro.get(s) for s in carrying}
    configured = {micro.get(s) for s in agreeing}
    if len(short) != 1 or len(configured) != 1:
        return None
    m, c = short.pop(), configured.pop()
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (m, c)) or m >= c:
        return None
    return (m, c) if _close(factor, c / m, EXACT) else None


def counts_at_steps(factor: float, counts: dict, carrying: list, agreeing: list, micro: dict) -> tuple[list, list]:
    """(the counts the factor equals that may have slipped, those ruled out): a count the same at a step that agrees
    as at the steps that carry the factor would have scaled that step too. The counts of `counts` are the same at
    every step; the micro-batches per step, where `micro` holds them, are each step's own."""
    fitting, excluded = [], []
    for named in counts_named(factor, counts):
        name = named.split("=")[0]
        if name == MICRO_BATCHES and micro:
            at = {micro.get(s) for s in carrying}
            value = at.pop() if len(at) == 1 else None
            if value is None or not _close(factor, value, EXACT):
                continue  # the steps that carry it accumulated another number: it does not equal the factor there
            named = f"{name}={value}"
            same = any(micro.get(s) == value for s in agreeing)
        else:
            same = bool(agreeing)
        (excluded if same else fitting).append(named)
    return fitting, excluded


MICRO_BATCHES = "micro-batches per step"


def steps_in_words(steps: list) -> str:
    """ "2, 4, 6", "3..8" for a run of consecutive steps, "1, 3, 5 and 12 more" past six."""
    runs: list[list] = []
    for s in steps:
        if runs and isinstance(s, int) and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    said = [f"{r[0]}..{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs]
    shown = ", ".join(said[:6])
    return shown + (f" and {len(said) - 6} more" if len(said) > 6 else "")


def steps_named(steps: list) -> str:
    """ "step 2" or "steps 2, 4, 6"."""
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {steps_in_words(steps)}"


def excluded_in_words(excluded: list[str]) -> str:
    """ "the world_size, 2, is the same at the steps that agree, so it did not slip" for the counts ruled out."""
    named = [f"the {n.split('=')[0]}, {n.split('=')[1]}," for n in excluded]
    joined = named[0] if len(named) == 1 else " ".join(named[:-1]) + " and " + named[-1]
    verb = "is" if len(named) == 1 else "are"
    verdict = "it did not slip" if len(named) == 1 else "none of them slipped"
    return f"{joined} {verb} the same at the steps that agree, so {verdict}"


# ---------------------------------------------------------------------------------------------
# a shift by k steps


def step_shift(a: list, b: list, max_k: int = 3) -> tuple[int, int] | None:
    """(k, 0) where a[i] == b[i + k] at every overlapping i (a holds at each step what b holds k steps
    later: a is ahead), (k, 1) where b[i] == a[i + k] (b is ahead); None where the series are equal,
    constant or unrelated."""
    if a == b or len(set(map(str, a))) < 2 or equal_where_changing(a, b):
        return None
    for k in range(1, max_k + 1):
        if len(a) - k < 2:
            break
        if a[:-k] == b[k:]:
            return k, 0
        if b[:-k] == a[k:]:
            return k, 1
    return None


def equal_where_changing(a: list, b: list) -> bool:
    """The two series are equal at two consecutive steps whose value changes between them: a series k steps ahead
    of the other cannot be (a[i] = b[i] = b[i + k] keeps a monotone schedule flat from i to i + k, so a[i + 1] would
    equal a[i]), so no shift is proven (VAR's slip: a schedule restarted at an epoch of 3 steps, equal at steps 1-3
    as it warmed up, was "3 steps ahead"). Equal steps on a plateau (StepLR's, k steps shorter on the side ahead)
    hold one value each and refute nothing."""
    both = [x if x == y else None for x, y in zip(a, b)]
    return any(x is not None and y is not None and x != y for x, y in zip(both, both[1:]))


def shift_relation(quantity: str, labels: tuple[str, str], steps: list, a: list, b: list):
    found = step_shift(a, b)
    if found is None:
        return None
    k, ahead = found
    side, other = (labels[0], labels[1]) if ahead == 0 else (labels[1], labels[0])
    sentence = (
        f"{side}'s {quantity} at each step {'are' if quantity.endswith('s') else 'is'} {other}'s {k} step(s) later: "
        f"{side} is {k} step(s) ahead "
        f"(steps {steps[0]}..{steps[-1]})."
    )
    return Relation("shift", quantity, side, other, k, steps[0], steps[-1], None, sentence)


# ---------------------------------------------------------------------------------------------
# a series that starts again at an epoch's first step


def restarting_side(a: list, b: list, at: int, length: int) -> int | None:
    """0 where a's values over the `length` steps from index `at` (an epoch's first step; at most `at` of them)
    repeat its own from index 0 and b's do not, 1 the other way round; None where neither or both do."""
    span = range(at, min(at + min(length, at), len(a), len(b)))
    if at < 1 or not span:
        return None
    restarts = [all(x[i] == x[i - at] for i in span) for x in (a, b)]
    return restarts.index(True) if restarts.count(True) == 1 else None


def restart_relation(quantity: str, labels: tuple[str, str], steps: list, a: list, b: list, at: int, length: int):
    """The Relation "X's quantity over the epoch from steps[at] is its own from steps[0] again": a schedule counted
    from the iteration within the epoch, which a shift of `at` steps also fits (the other side's rate `at` steps
    later) where the other side's first epoch is the same. Tested before the shift: the restart is what the equal
    first epoch proves. None where no side restarts there."""
    found = restarting_side(a, b, at, length)
    if found is None:
        return None
    side, other = (labels[0], labels[1]) if found == 0 else (labels[1], labels[0])
    n = min(length, at, len(steps) - at)
    first, last = steps[at], steps[at + n - 1]
    sentence = (
        f"{side}'s {quantity} over steps {first}..{last} repeats its own of steps {steps[0]}..{steps[n - 1]}, "
        f"where {other}'s goes on."
    )
    return Relation("restart", quantity, side, other, at, first, last, None, sentence)


# ---------------------------------------------------------------------------------------------
# apart at isolated steps, equal around them


def isolated_steps(steps: list, a: list, b: list) -> list | None:
    """The steps where a and b differ, where each of them stands alone: the steps on both sides of it (where
    there is one) equal, and an equal step after the last of them, so the series agree again after each
    difference. None where they never differ, or differ at two steps in a row or up to the last step.
    Another schedule, length or interval moves the values after it too; a value set otherwise at one step
    (a warm-up's bound off by one) does not."""
    pairs = [(s, number(x), number(y)) for s, x, y in zip(steps, a, b)]
    pairs = [(s, x, y) for s, x, y in pairs if x is not None and y is not None]
    apart = [i for i, (_, x, y) in enumerate(pairs) if x != y]
    if not apart or apart[-1] == len(pairs) - 1:
        return None
    if any(j - i == 1 for i, j in zip(apart, apart[1:])):
        return None
    return [pairs[i][0] for i in apart]


# ---------------------------------------------------------------------------------------------
# a value reduced over the ranks before it was recorded


def over_ranks(value, others: list) -> str | None:
    """ "sum" or "mean" where `value` is the sum (or the mean) over the ranks of the other side's values at the same
    step (`others`, one a rank, every rank), to the rounding of a float32 sum of that many numbers; else None.
    A loss reduced in place (dist.reduce / dist.all_reduce of the loss tensor itself) holds the sum on the
    reduce's destination (every rank, for all_reduce) from then on, and the loop records that. Where the other side's
    values are all equal, the sum is the world size times each: a factor that other counts may equal as well (the
    micro-batches), which the factor relation names with all of them, so none is claimed here."""
    x, values = number(value), [number(v) for v in others]
    if x is None or len(values) < 2 or any(v is None for v in values):
        return None
    tol = EXACT * len(values)
    if all(_close(v, values[0], tol) for v in values):
        return None
    total = float(sum((np.float32(v) for v in values), np.float32(0)))
    if _close(x, total, tol):
        return "sum"
    mean = total / len(values)
    if _close(x, mean, tol):
        return "mean"
    return None


# ---------------------------------------------------------------------------------------------
# the gradient norm under another norm, or over a subset of the parameters


def l2(values) -> float:
    return math.sqrt(sum(v * v for v in values if number(v) is not None))


def norm_of(
    recorded: float,
    names: list[str],
    layer_norms: list[float],
    layer_maxabs: list[float] | None = None,
    layer_l1: list[float] | None = None,
):
    """Which norm of these per-parameter gradients the recorded total is: ("L2", None) over all of
    them, ("L2", [names]) over a subset (whole modules), ("inf", None) where the largest |g| was
    recorded and equals it, ("L1", None) where each gradient's sum of |g| was recorded and their sum
    equals it, ("below L2", None) where it is below the 2-norm of all of them (neither the 2-norm nor
    the 1-norm, which is never below it: the infinity norm or a subset, the max-abs of each gradient
    unrecorded), ("above L2", None) above it (the 1-norm or another, the 1-norms unrecorded), or None."""
    have = [(n, float(v)) for n, v in zip(names, layer_norms) if number(v) is not None]
    if not have or number(recorded) is None:
        return None
    total = l2(v for _, v in have)
    if _close(recorded, total, 1e-5):
        return "L2", None
    if layer_maxabs is not None:
        top = max((float(v) for v in layer_maxabs if number(v) is not None), default=None)
        if top is not None and _close(recorded, top, 1e-5):
            return "inf", None
    if layer_l1 is not None:
        sums = [float(v) for v in layer_l1 if number(v) is not None]
        if sums and _close(recorded, math.fsum(sums), 1e-5):
            return "L1", None
    for subset in _module_subsets([n for n, _ in have]):
        if _close(recorded, l2(v for n, v in have if n in subset), 1e-5):
            return "L2", sorted(subset)
    return ("below L2", None) if recorded < total else ("above L2", None)


def _module_subsets(names: list[str]):
    """Each module's parameters alone, and all but each module's: the subsets a slip picks."""
    modules: dict[str, set] = {}
    for n in names:
        modules.setdefault(n.rsplit(".", 1)[0], set()).add(n)
    everything = set(names)
    for group in modules.values():
        yield group
        if group != everything:
            yield everything - group


# ---------------------------------------------------------------------------------------------
# a gradient on one side only


def one_side_relation(side: str, other: str, names: list[str], step) -> Relation | None:
    """`names`: the parameters with a gradient on `other` and none on `side` at `step` (the module
    watch's param_grads, matched by name): frozen, detached or unused on `side`."""
    if not names:
        return None
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    sentence = f"{shown} get(s) a gradient on {other} and none on {side} at step {step}."
    return Relation("one_side", "param_grad", side, other, ", ".join(names), step, step, None, sentence)


# ---------------------------------------------------------------------------------------------
# per-layer updates related by one constant


def update_factor(before: list[list[float]], after_a: list[list[float]], after_b: list[list[float]]):
    """a's update = c × b's update for every layer (from the same parameters `before`), read from the
    layers' sketches (linear: the sketch of an update is the difference of the sketches): c, or None
    where the layers' ratios differ (not one constant) or no layer moved."""
    ratios = []
    for row0, ra, rb in zip(before, after_a, after_b):
        for x0, xa, xb in zip(row0, ra, rb):
            ua, ub = xa - x0, xb - x0
            if abs(ub) > 1e-12 * max(abs(x0), 1.0):
                ratios.append(ua / ub)
    if not ratios:
        return None
    c = ratios[0]
    if _close(c, 1.0, HOLDS) or not all(_close(r, c, HOLDS) for r in ratios):
        return None
    return c


# ---------------------------------------------------------------------------------------------
# a series that never moves on one side while the other's does


def numbers_by_step(steps: list, a: list, b: list) -> tuple[dict, dict]:
    """{step: value} of each side, over the steps where both recorded a number (in step order)."""
    kept = [(s, number(x), number(y)) for s, x, y in zip(steps, a, b) if isinstance(s, int)]
    kept = [(s, x, y) for s, x, y in kept if x is not None and y is not None]
    return {s: x for s, x, _ in kept}, {s: y for s, _, y in kept}


def changes_at(values: dict) -> list:
    """The steps whose value differs from the step before it."""
    order = list(values)
    return [s for prev, s in zip(order, order[1:]) if values[s] != values[prev]]


MIN_CHANGES = 2  # the moving side changes at two steps at least: one change alone is a milestone on one side only


def constant_side(steps: list, a: list, b: list) -> int | None:
    """0 where a holds one value at every step both recorded and b changes at MIN_CHANGES of them or more, 1 the
    other way round; None otherwise."""
    xa, xb = numbers_by_step(steps, a, b)
    for index, (mine, theirs) in enumerate(((xa, xb), (xb, xa))):
        if len(mine) > MIN_CHANGES and not changes_at(mine) and len(changes_at(theirs)) >= MIN_CHANGES:
            return index
    return None


def constant_relation(quantity: str, labels: tuple[str, str], steps: list, a: list, b: list) -> Relation | None:
    """The Relation "X's quantity is v at every step compared while Y's changes": X's series never moves."""
    found = constant_side(steps, a, b)
    if found is None:
        return None
    side, other = (labels[0], labels[1]) if found == 0 else (labels[1], labels[0])
    mine, theirs = numbers_by_step(steps, a, b)[:: 1 if found == 0 else -1]
    first, last, moved = min(mine), max(mine), changes_at(theirs)
    sentence = (
        f"{side}'s {quantity} is {next(iter(mine.values()))!r} at every one of the {len(mine)} steps both recorded "
        f"({first}..{last}), where {other}'s changes at {len(moved)} of them (step {steps_in_words(moved)})."
    )
    return Relation("constant", quantity, side, other, next(iter(mine.values())), first, last, None, sentence)


# ---------------------------------------------------------------------------------------------
# the same schedule, k times as long on one side

MAX_STRETCH = 16  # the largest whole factor looked for: an accumulation, a world size, a short epoch
MIN_MATCHES = 2  # steps where the series differ and the stretch maps one onto the other: one alone is a coincidence


def time_stretch(steps: list, a: list, b: list) -> tuple[int, int, int, list] | None:
    """(k, origin, long, matched): the series `long` (0 for a, 1 for b) holds at step origin + k·(s − origin) what the
    other holds at step s, for every step s after the origin whose image both recorded (exactly, to float32
    rounding), at MIN_MATCHES of them at least where the two series differ: the same schedule k times as long,
    counted from the origin (a step before the first difference). `matched`: the (s, image) pairs that differ.
    The smallest k fits first; None where none does."""
    xa, xb = numbers_by_step(steps, a, b)
    shared = list(xa)
    first = next((s for s in shared if xa[s] != xb[s]), None)
    if first is None:
        return None
    # the origin: where both schedules start (the step before the first, or a few steps in), or just before the
    # first difference (a flat start)
    origins = sorted(set(range(shared[0] - 1, shared[0] + 3)) | set(range(first - 3, first)))
    origins = [o for o in origins if shared[0] - 1 <= o < first]
    for k in range(2, MAX_STRETCH + 1):
        for origin in origins:
            for long, (short_v, long_v) in enumerate(((xa, xb), (xb, xa))):
                matched = _stretched_onto(short_v, long_v, k, origin)
                if matched is not None:
                    return k, origin, 1 - long, matched
    return None


def _stretched_onto(short: dict, long: dict, k: int, origin: int) -> list | None:
    """The (s, origin + k·(s − origin)) pairs that differ where `long` at the image equals `short` at s for every
    step s after the origin whose image `long` recorded, with MIN_MATCHES such pairs; None where one fails."""
    matched = []
    for s in short:
        t = origin + k * (s - origin)
        if s <= origin or t not in long:
            continue
        if not _close(short[s], long[t], EXACT):
            return None  # fails fast: most (k, origin) pairs fail at their first image
        if short[s] != long[s]:
            matched.append((s, t))
    return matched if len(matched) >= MIN_MATCHES else None


def stretch_relation(quantity: str, labels: tuple[str, str], steps: list, a: list, b: list, counts: dict):
    """The Relation "X's quantity is Y's schedule k times as long", k named by the recorded counts it equals, or
    None where no whole stretch fits."""
    found = time_stretch(steps, a, b)
    if found is None:
        return None
    k, origin, long, matched = found
    side, other = (labels[0], labels[1]) if long == 0 else (labels[1], labels[0])
    images = ", ".join(str(t) for _, t in matched[:4])
    sources = ", ".join(str(s) for s, _ in matched[:4])
    sentence = (
        f"{side}'s {quantity} at steps {images} is {other}'s at steps {sources}: the same schedule {k} times as long "
        f"on {side}, counted from step {origin}"
    )
    xa, xb = numbers_by_step(steps, a, b)
    if origin in xa:  # the step the two schedules start from, equal on both sides
        sentence += f", where both are {xa[origin]!r}"
    sentence += _same_peak_words(*((xa, xb) if long == 1 else (xb, xa)), side, other)
    return _counted_relation("stretch", quantity, side, other, k, matched, sentence, counts)


def _same_peak_words(short: dict, long: dict, side: str, other: str) -> str:
    """ "(the same peak 0.0015, reached at step 4 on raw, step 6 on lightning)" where both series reach the same
    largest value, the long side later; '' otherwise."""
    top_short, top_long = max(short.values()), max(long.values())
    at_short = next(s for s, v in short.items() if v == top_short)
    at_long = next(s for s, v in long.items() if v == top_long)
    if not _close(top_short, top_long, EXACT) or at_long <= at_short:
        return ""
    return f" (the same peak {top_long!r}, reached at step {at_short} on {other}, step {at_long} on {side})"


def _counted_relation(kind, quantity, side, other, k, matched, sentence, counts: dict) -> Relation:
    named = [f"{name}={value}" for name, value in counts.items() if value == k]
    if named:
        sentence += f"; {counts_in_words(named)}"
        if len(named) > 1:
            sentence += " (each fits: the numbers cannot tell which count sized it)"
    first, last = matched[0][0], matched[-1][1]
    count = named[0] if named else None
    return Relation(kind, quantity, side, other, k, first, last, count, sentence + ".", tuple(named))


def warmup_stretch(steps: list, a: list, b: list) -> tuple[int, int, dict, dict] | None:
    """(k, long, rise of the short side, rise of the long side) where both series rise linearly from the same value
    at the same step to the same largest value, the long side's increments 1/k of the other's (a whole k >= 2): the
    same warm-up k times as long. A rise: {from, start, peak, at, increment}. None otherwise."""
    xa, xb = numbers_by_step(steps, a, b)
    rises = [linear_rise(x) for x in (xa, xb)]
    if None in rises:
        return None
    ra, rb = rises
    if ra["from"] != rb["from"] or ra["start"] != rb["start"] or not _close(ra["peak"], rb["peak"], EXACT):
        return None
    for long, (short, longer) in enumerate(((ra, rb), (rb, ra))):
        found = integer_of(short["increment"] / longer["increment"])
        if found and found[1] and longer["at"] > short["at"]:
            return found[0], 1 - long, short, longer
    return None


def linear_rise(values: dict) -> dict | None:
    """The series' first rise: from the last step before it first grows, by one increment a step (to float32
    rounding) up to its largest value, which no later step exceeds; None where it never grows or not linearly."""
    order = list(values)
    start = next((i for i in range(len(order) - 1) if values[order[i + 1]] > values[order[i]]), None)
    if start is None:
        return None
    top = max(values.values())
    end = next((i for i in range(start, len(order)) if values[order[i]] == top), None)
    if end is None:  # its largest value came before the rise: no warm-up to it
        return None
    rise = [values[order[i]] for i in range(start, end + 1)]
    increments = [y - x for x, y in zip(rise, rise[1:])]
    if not all(_close(d, increments[0], EXACT) for d in increments):
        return None
    return {"from": order[start], "start": rise[0], "peak": top, "at": order[end], "increment": increments[0]}


def warmup_relation(quantity: str, labels: tuple[str, str], steps: list, a: list, b: list, counts: dict):
    """The Relation "X's warm-up is Y's k times as long: the same start and peak, increments 1/k", or None."""
    found = warmup_stretch(steps, a, b)
    if found is None:
        return None
    k, long, short, longer = found
    side, other = (labels[0], labels[1]) if long == 0 else (labels[1], labels[0])
    sentence = (
        f"both {quantity}s rise from {short['start']!r} at step {short['from']} to the same peak {short['peak']!r}, "
        f"{other}'s by {short['increment']:.6g} a step up to step {short['at']}, {side}'s by "
        f"{longer['increment']:.6g} (1/{k} of it) up to step {longer['at']}: the same warm-up {k} times as long on "
        f"{side}"
    )
    matched = [(short["from"], short["at"]), (longer["from"], longer["at"])]
    return _counted_relation("warmup_stretch", quantity, side, other, k, matched, sentence, counts)
