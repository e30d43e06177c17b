"""What else the records show apart at the step the runs part, beside the finding's own quantity.

A finding names one cause; the step it names may show other recorded differences too (ppo's KL early stop at
another depth: the loss parts at step 3, and the lr of that step, the torch generator moved on one side only and the
optimizer steps' count part with it). Where the cause stays undetermined they are the only facts that point
somewhere, so they are named in the finding; beside any other finding they are listed as "also different at this
step", never left for the user to find. Each is read from what both sides recorded, never from what one side lacks:

    the lr and every param group's hyperparameters the step ran with, the scheduler.step() calls before it,
    the autocast kinds entered by then (the hooks note each kind once), the optimizer steps each run took,
    a generator moved since the step before on one side only

(the program's own collectives of the step: hooked.collectives_parting, said beside every finding already).
`ranks_apart` reads the other ranks at the same step: a rank that parts there for another recorded reason is named
with its own cause (ppo's round 1: a DataLoader draw on rank 0, a torch seed on rank 1).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ddp_parity.compare.causes.base import (
    Cause,
    Context,
    Evidence,
    aligned_records,
    finding,
    fmt,
    ratio_of,
    same_indices_at,
)
from ddp_parity.compare.causes.hooked import generator_moves
from ddp_parity.compare.causes.update import group_differences
from ddp_parity.compare.findings import Finding
from ddp_parity.trace_files import fact_items, read_hook_facts


@dataclass(frozen=True)
class Apart:
    """One recorded fact apart at the parting step: `what` it is, both sides' values, and the clause that says it."""

    what: str  # "lr", "param_group", "scheduler_steps", "autocast", "optimizer_steps", "rng_moved"
    a: object
    b: object
    said: str

    def to_json(self) -> dict:
        return {"what": self.what, "a": self.a, "b": self.b, "said": self.said}


def facts_apart_at(ctx: Context, step, rank, leave_out: tuple = ()) -> list[Apart]:
    """Every fact above that the two sides recorded apart at `step` on `rank`, in the order a step uses them;
    `leave_out`: the kinds the finding already says."""
    if not isinstance(step, int):
        return []
    rank = rank if isinstance(rank, int) else 0
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    found: list[Apart] = []
    if pair is not None:
        found += _rate_apart(ctx, *pair) + _groups_apart(ctx, *pair) + _scheduler_calls_apart(ctx, *pair)
    found += _autocast_apart(ctx, step, rank) + _moved_on_one_side(ctx, step, rank) + _steps_apart(ctx, rank)
    return [a for a in found if a.what not in leave_out]


def apart_sentence(apart: list[Apart], step, rank) -> str:
    """'Also different at step 3 rank 0: the lr (...); the optimizer steps (...).' or ''."""
    if not apart:
        return ""
    return f"Also different at step {step} rank {rank}: " + "; ".join(a.said for a in apart) + "."


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _rate_apart(ctx: Context, ra: dict, rb: dict) -> list[Apart]:
    """The lr the step ran with (the rate its update applies), with the ratio between the two."""
    a, b = ra.get("lr"), rb.get("lr")
    if not (_number(a) and _number(b)) or a == b:
        return []
    ratio = ratio_of(a, b)
    times = f": {ctx.names[0]}'s is {ratio:.6g} × {ctx.names[1]}'s" if ratio else ""
    return [Apart("lr", a, b, f"the lr ({a!r} on {ctx.names[0]} vs {b!r} on {ctx.names[1]}{times})")]


def _groups_apart(ctx: Context, ra: dict, rb: dict) -> list[Apart]:
    """Each param group's hyperparameter the step ran with, apart (the lr of a group only where the step's own lr
    is equal: update.group_differences); another number of groups is said as such."""
    ga, gb = ra.get("param_groups"), rb.get("param_groups")
    if not (isinstance(ga, list) and isinstance(gb, list)) or not all(isinstance(g, dict) for g in (*ga, *gb)):
        return []
    if len(ga) != len(gb):
        said = f"the param groups ({len(ga)} on {ctx.names[0]} vs {len(gb)} on {ctx.names[1]})"
        return [Apart("param_groups", len(ga), len(gb), said)]
    return [
        Apart(
            "param_group",
            d["a"],
            d["b"],
            f"param group {d['group']}'s {d['key']} ({fmt(d['a'])} on {ctx.names[0]} vs {fmt(d['b'])} on "
            f"{ctx.names[1]})",
        )
        for d in group_differences(ctx, ga, gb, ra, rb)
    ]


def _scheduler_calls_apart(ctx: Context, ra: dict, rb: dict) -> list[Apart]:
    """The scheduler.step() calls recorded since the optimizer step before (`scheduler_steps_before`)."""
    a, b = ra.get("scheduler_steps_before"), rb.get("scheduler_steps_before")
    if not (_number(a) and _number(b)) or a == b:
        return []
    said = f"the scheduler.step() calls since the step before ({a} on {ctx.names[0]} vs {b} on {ctx.names[1]})"
    return [Apart("scheduler_steps", a, b, said)]


def _autocast_kinds(ctx: Context, side: str, rank: int, step: int) -> set[str] | None:
    """The autocast kinds the hooks saw entered by `step` ("cpu torch.bfloat16"), or None where the side was not
    recorded by the hooks (an explicit recorder notes no autocast: unrecorded, never "none")."""
    facts = read_hook_facts(ctx.run(side), rank)
    if not facts:
        return None
    return {
        f"{i.get('device_type')} {i.get('dtype')}" + ("" if i.get("enabled", True) else " (disabled)")
        for i in fact_items(facts, "autocast")
        if isinstance(i.get("before_step"), int) and i["before_step"] <= step
    }


def _autocast_apart(ctx: Context, step: int, rank: int) -> list[Apart]:
    kinds = [_autocast_kinds(ctx, s, rank, step) for s in ("a", "b")]
    if None in kinds or kinds[0] == kinds[1]:
        return []
    shown = [", ".join(sorted(k)) or "none" for k in kinds]
    said = (
        f"the autocast entered by this step ({shown[0]} on {ctx.names[0]} vs {shown[1]} on {ctx.names[1]}: "
        "the hooks note each autocast kind entered)"
    )
    return [Apart("autocast", sorted(kinds[0]), sorted(kinds[1]), said)]


def _moved_on_one_side(ctx: Context, step: int, rank: int) -> list[Apart]:
    """A generator whose state moved between the step before's start and this one's on one side only: one side
    drew from it there (a new rollout, a shuffle, a dropout mask) and the other did not."""
    out = []
    for name, moved in generator_moves(ctx, step, rank).items():
        if moved[0] == moved[1]:
            continue
        side, other = (0, 1) if moved[0] else (1, 0)
        said = (
            f"{name}'s generator moved since step {step - 1}'s start on {ctx.names[side]} only (drawn from there; "
            f"{ctx.names[other]}'s state is the same at both starts)"
        )
        out.append(Apart("rng_moved", moved[0], moved[1], said))
    return out


def _steps_apart(ctx: Context, rank: int) -> list[Apart]:
    """The optimizer steps each run recorded on `rank`: one side stepping more, or stopping earlier."""
    walk = ctx.cmp.walk
    counts = [walk.counts[s].get(rank) for s in ("a", "b")] if walk is not None else [None, None]
    if not all(isinstance(c, int) for c in counts) or counts[0] == counts[1]:
        return []
    more = ctx.names[0] if counts[0] > counts[1] else ctx.names[1]
    said = (
        f"the optimizer steps of the whole run ({counts[0]} on {ctx.names[0]} vs {counts[1]} on {ctx.names[1]}: "
        f"{more} steps {abs(counts[0] - counts[1])} more)"
    )
    return [Apart("optimizer_steps", counts[0], counts[1], said)]


def evidence_of(apart: list[Apart], step, rank) -> dict:
    """report.json's `also_different`: the step, the rank and each fact apart there."""
    return {"step": step, "rank": rank, "facts": [json.loads(json.dumps(a.to_json(), default=str)) for a in apart]}


# ---------------------------------------------------------------------------------------------
# the lr apart at the step the runs part, where no cause was found


def lr_at_parting(ctx: Context, found: Finding) -> Finding | None:
    """In place of an undetermined finding: the runs part at step k in the loss (or the gradient norm), and the lr
    recorded for step k differs too, every earlier step equal, the samples not proved apart (a samples or batch
    difference is found before). The rate acts after the loss, so it did not make the loss part: it shows that
    something the program counts (an iteration, a phase, a schedule's steps) is already apart at step k."""
    f = ctx.earliest
    if found.category != "undetermined" or f is None or f.get("quantity") not in ("loss", "grad_norm"):
        return None
    step, rank = f.get("step"), f.get("rank") if isinstance(f.get("rank"), int) else 0
    rates = {ra.get("step"): (ra.get("lr"), rb.get("lr")) for ra, rb in aligned_records(ctx, rank)}
    now, before = rates.get(step), rates.get(step - 1) if isinstance(step, int) else None
    if now is None or not all(_number(x) for x in now) or now[0] == now[1]:
        return None
    apart = facts_apart_at(ctx, step, rank, leave_out=("lr",))
    facts = (
        f"The runs part at step {step} rank {rank} in the {WHAT_PARTS[f['quantity']]} ({fmt(f['a'])} on "
        f"{ctx.names[0]} vs {fmt(f['b'])} on {ctx.names[1]}), and the learning rate recorded for that very step "
        f"differs too ({now[0]!r} vs {now[1]!r}){_rate_moves(ctx, step, now, before)}; "
        f"{_samples_words(ctx, step, rank)}."
    )
    if apart:
        facts += " " + apart_sentence(apart, step, rank)
    changed = _changed_side(ctx, now, before)
    evidence = {"lr": ctx.both(*now), f["quantity"]: ctx.both(f["a"], f["b"])}
    if apart:
        evidence["also_different"] = evidence_of(apart, step, rank)
    result = finding(
        ctx,
        OPTIMIZER_LR_AT_PARTING,
        step,
        rank,
        evidence,
        facts,
        quantity=WHAT_PARTS[f["quantity"]],
        step=step,
        side=changed,
    )
    result.unchecked = found.unchecked  # what would tell the loss's own cause, still unrecorded
    return result


WHAT_PARTS = {"loss": "loss", "grad_norm": "gradient norm"}


def _rate_moves(ctx: Context, step, now: tuple, before) -> str:
    """Which side's rate changed since the step before (both recorded it there, equal)."""
    if before is None or not all(_number(x) for x in before) or before[0] != before[1]:
        return ""
    moved = [ctx.names[i] for i in (0, 1) if now[i] != before[i]]
    if len(moved) == 1:
        other = ctx.names[1] if moved[0] == ctx.names[0] else ctx.names[0]
        return f": {moved[0]}'s rate changed from {before[0]!r} at step {step - 1}, {other}'s did not"
    return f": both changed from {before[0]!r} at step {step - 1}, each to another value"


def _changed_side(ctx: Context, now: tuple, before) -> str:
    """The side whose rate moved at the parting step, or 'each side' (both moved, or the step before unrecorded)."""
    if before is None or not all(_number(x) for x in before) or before[0] != before[1]:
        return "each side"
    moved = [ctx.names[i] for i in (0, 1) if now[i] != before[i]]
    return moved[0] if len(moved) == 1 else "each side"


def _samples_words(ctx: Context, step, rank) -> str:
    """What the records say of the step's samples: compared equal, or not compared (never called equal)."""
    if same_indices_at(ctx, rank, step):
        return "the step's sample indices are recorded equal"
    return "the step's samples were not compared (a side recorded no indices), so they may differ as well"


OPTIMIZER_LR_AT_PARTING = Cause(
    "optimizer.lr_at_parting",
    lr_at_parting,
    why="A rate is set before its step from what the program counts (an iteration, an epoch, a schedule's steps), "
    "and it acts on the update after the {quantity} is computed: apart at the very step the {quantity} parts, after "
    "equal steps, it shows the two sides at another point of the program at step {step} (one began another "
    "iteration or phase: an inner loop of another length, an early stop or break placed otherwise, a schedule "
    "stepped at another point), and what that step trains on (its batch's contents, the state it starts from) may "
    "differ for the same reason.",
    fix="Find what moves {side}'s rate at step {step} (a scheduler.step() or an lr set from an iteration count) and "
    "what ends the loop before it (its length, an early stop or break and the loop it sits in), and place them "
    "alike on both sides, so that both reach step {step} at the same point of the program.",
    doc="In place of an undetermined finding: the loss (or gradient norm) parts at a step whose recorded lr parts "
    "too, every earlier step equal and the samples not proved apart: the step sits at another point of the "
    "program on one side; the other facts recorded apart there are named with it.",
    requires=Evidence("the lr of the parting step, side by side", lambda d: bool(d.evidence.get("lr"))),
)
