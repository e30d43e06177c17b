"""A scheduler stepped another number of times per optimizer step on one side: read from the counts the
records hold (`scheduler_steps_before`: the scheduler.step() calls since the previous optimizer step, which
the hooks record at every step and an explicit loop may pass to record()), never inferred from the lr's shape.

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

from collections import Counter

from ddp_parity.compare.causes.base import Cause, Context, Evidence, aligned_records, finding
from ddp_parity.compare.findings import Finding
from ddp_parity.trace_files import fact_items, read_hook_facts

COUNT = "scheduler_steps_before"
COUNTS_READ = 10_000  # the aligned steps read for the counts: enough to see a per-epoch pattern


def check_scheduler_steps(ctx: Context) -> Finding | None:
    """The lr (or, with no lr recorded, the parameters) first parts at step s, both sides recorded how many
    scheduler.step() calls came before each optimizer step, the schedulers' positions (the calls summed up to s)
    differ there, and the counts differ at some step after the first and at or before s, or (s the first step)
    the usual count per optimizer step after the first differs: the schedules ran apart because one side
    stepped its scheduler more often (per micro-batch under accumulation steps it before the first optimizer
    step too, so the rates part at step 1). A first step's count apart with the same usual count is left to
    the causes of a scheduler stepped before the optimizer (optimizer.lr_ahead, optimizer.effective_lr)."""
    f = ctx.earliest
    if f is None or not isinstance(f.get("step"), int) or not _rate_parts(ctx, f):
        return None
    every = recorded_counts(ctx, f["rank"])
    rows = [r for r in every if r[0] <= f["step"]]
    if not rows or len(every) < 2:
        return None
    apart_after_first = any(ca != cb for _, ca, cb, _ in rows[1:])
    if not apart_after_first and (len(rows) > 1 or _usual(every, 1) == _usual(every, 2)):
        return None
    if sum(r[1] for r in rows) == sum(r[2] for r in rows):
        return None  # both schedulers took as many steps in all by then: the counts do not part the rates
    if any(all(r[i] == 0 for r in every) for i in (1, 2)):
        return None  # a side that never steps a scheduler sets its lr by hand: the counts say nothing of its rate
    said = {side: _per_step(every, i) for side, i in (("a", 1), ("b", 2))}
    first = next((step for step, ca, cb, _ in rows[1:] if ca != cb), rows[0][0])
    side, other = _side_that_differs(every)
    what = "learning rate" if f["quantity"] == "lr" else "parameters (no lr recorded there)"
    facts = (
        f"The {what} first differs at step {f['step']} rank {f['rank']} ({f['a']!r} vs {f['b']!r}), and the "
        f"scheduler.step() calls recorded before each optimizer step ({COUNT}) differ from step {first}: over steps "
        f"{every[1][0]}..{every[-1][0]} {ctx.label('a')} stepped its scheduler {said['a']}, {ctx.label('b')} "
        f"{said['b']} (up to step {f['step']}: {sum(r[1] for r in rows)} vs {sum(r[2] for r in rows)} scheduler "
        "steps in all)."
    )
    facts += _several_schedulers(ctx, f["rank"], every)
    shown = rows if len(rows) > 1 else every[:8]  # parted at the first step: the steps after it show the rates
    evidence = {
        COUNT: {ctx.label(s): [r[i] for r in shown] for s, i in (("a", 1), ("b", 2))},
        "steps": [r[0] for r in shown],
        "per_step": {ctx.label(s): said[s] for s in ("a", "b")},
        f["quantity"]: ctx.both(f["a"], f["b"]),
    }
    values = {"side": ctx.label(side), "other": ctx.label(other), "times": said[side], "theirs": said[other]}
    return finding(ctx, OPTIMIZER_SCHEDULER_STEPS, f["step"], f["rank"], evidence, facts, **values)


def _several_schedulers(ctx: Context, rank, rows: list[tuple]) -> str:
    """Where a side built several schedulers (one per optimizer: a GAN's), its counts are theirs together: said,
    with each one's share of its usual count."""
    words = []
    for side, i in (("a", 1), ("b", 2)):
        built = fact_items(read_hook_facts(ctx.run(side), rank), "schedulers")
        if len(built) > 1:
            usual = _usual(rows, i)
            classes = ", ".join(sorted({str(b.get("class")) for b in built}))
            each = f": {usual / len(built):g} each, where they step alike" if usual else ""
            words.append(
                f" {ctx.label(side)} built {len(built)} schedulers ({classes}): its counts are their calls together "
                f"({usual} per optimizer step{each})."
            )
    return "".join(words)


def _rate_parts(ctx: Context, f: dict) -> bool:
    """The divergence is the rate itself, or the parameters where a side recorded no rate at that step."""
    if f["quantity"] == "lr":
        return True
    if f["quantity"] != "param_digest":
        return False
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, f["rank"]) if ra.get("step") == f["step"]), None)
    return pair is not None and any(r.get("lr") is None for r in pair)


def recorded_counts(ctx: Context, rank) -> list[tuple]:
    """(step, count a, count b, epoch) of every aligned step; [] where a side left a count out."""
    rows = []
    for ra, rb in aligned_records(ctx, rank, limit=COUNTS_READ):
        if not isinstance(ra.get("step"), int):
            break
        ca, cb = ra.get(COUNT), rb.get(COUNT)
        if not (_count(ca) and _count(cb)):
            return []
        rows.append((ra["step"], ca, cb, ra.get("epoch")))
    return rows


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _per_step(rows: list[tuple], i: int) -> str:
    """How often one side stepped its scheduler per optimizer step after the first: "2 times per optimizer
    step", or its usual count with the steps that break it ("0 times per optimizer step, 1 at steps 4, 7 (the
    first step of each epoch)")."""
    counts = [(r[0], r[i], r[3], prev[3]) for prev, r in zip(rows, rows[1:])]
    usual = Counter(c for _, c, _, _ in counts).most_common(1)[0][0]
    said = f"{usual} time{'s' if usual != 1 else ''} per optimizer step"
    odd = [(step, c, epoch != before) for step, c, epoch, before in counts if c != usual]
    if not odd:
        return said
    shown = ", ".join(f"{c} at step {step}" for step, c, _ in odd[:4]) + (", ..." if len(odd) > 4 else "")
    at_epochs = all(new_epoch for _, _, new_epoch in odd)
    return f"{said} but {shown}" + (" (each the first step of an epoch: once per epoch)" if at_epochs else "")


def _usual(rows: list[tuple], i: int) -> int:
    """One side's most common count per optimizer step after the first."""
    return Counter(r[i] for r in rows[1:]).most_common(1)[0][0]


def _side_that_differs(rows: list[tuple]) -> tuple[str, str]:
    """(side, other): the side whose usual count is not 1 where the other's is (one scheduler.step() per
    optimizer step is what both frameworks do for a per-step schedule); else the side that stepped more."""
    usual = {s: _usual(rows, i) for s, i in (("a", 1), ("b", 2))}
    if usual["a"] != 1 and usual["b"] == 1:
        return "a", "b"
    if usual["b"] != 1 and usual["a"] == 1:
        return "b", "a"
    return ("a", "b") if sum(r[1] for r in rows) > sum(r[2] for r in rows) else ("b", "a")


OPTIMIZER_SCHEDULER_STEPS = Cause(
    "optimizer.scheduler_steps",
    check_scheduler_steps,
    why="Each optimizer step applies the rate its scheduler has reached, and a scheduler moves one position per "
    "scheduler.step(): stepped more (or less) often per optimizer step on one side, its schedule runs that much "
    "faster (or slower). The usual slips: scheduler.step() per micro-batch under gradient accumulation, a hand "
    "call in training_step while Lightning's lr_scheduler_config steps it too, or per batch where the other side "
    "steps per epoch (Lightning's interval).",
    fix="On {side}, step the scheduler as {other} does ({theirs}; {side}: {times}): once per optimizer step, "
    "after optimizer.step() (not per micro-batch under accumulation; not both by hand and through "
    "configure_optimizers' lr_scheduler_config: keep one), or once per epoch on both for interval 'epoch'.",
    doc=f"The lr parts and the scheduler.step() calls recorded before each optimizer step (`{COUNT}`: hooks, or "
    "record()) differ after the first step, the schedulers' positions apart by then: one side steps its scheduler "
    "k times per optimizer step (per micro-batch, a hand call beside Lightning's, per batch vs per epoch).",
    requires=Evidence("both sides' scheduler.step() counts per optimizer step", lambda d: bool(d.evidence.get(COUNT))),
)
