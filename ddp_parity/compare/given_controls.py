"""Noise controls a user names (`--noise-control RUN`, `compare_traces(controls=...)`), checked before
they are used.

A control made by the harness (harness/controls.py) is right by construction; one the user names may
be one of the pair, a copy of another control, a run of another setup or of another version of the
script, and its envelope would then swallow a bug. Each is refused in one line naming what is wrong
(docs/bad-input.md): a ControlError, which the command line shows as a usage error (exit 2)."""

from __future__ import annotations

import os
from pathlib import Path

from ddp_parity.compare.causes.configuration import changes_only_rounding, config_differences
from ddp_parity.compare.comparator import load_meta
from ddp_parity.compare.noise import FIRST_STEP_FLOOR, Controls, first_step_distance
from ddp_parity.trace_files import iter_records, trace_ranks


class ControlError(ValueError):
    """A named control that cannot measure the noise of the run it is said to repeat."""


# the config keys the harness's own controls vary (controls.py); threads and the arithmetic are the
# others (causes.configuration.changes_only_rounding)
VARIED_CONFIG = ("config.model.init_ulps", "config.model.init_ulps_seed")
# optimizer group entries that are bookkeeping, not a hyperparameter of the step
GROUP_BOOKKEEPING = ("params", "initial_lr")


def run_identity(meta: dict) -> tuple | None:
    """What makes a recorded run that run: when it started (to the microsecond: two runs of one
    process start apart) and the processes that recorded it; a copy of its folder keeps it. None
    where meta.json does not say."""
    ranks = [r for r in meta.get("ranks") or [] if isinstance(r, dict)]
    processes = tuple((r.get("rank"), r.get("host"), r.get("pid")) for r in ranks)
    starts = tuple(a.get("time") for a in meta.get("attempts") or [] if isinstance(a, dict))
    if not meta.get("started") or not processes or not any(starts):
        return None
    return (meta["started"], starts, processes)


def same_folder(a: Path, b: Path) -> bool:
    """The same directory, whatever links or spellings lead to it."""
    try:
        return a.resolve() == b.resolve() or os.path.samefile(a, b)
    except OSError:
        return False


def recorded_steps(run: Path) -> dict[int, list[int]]:
    """The steps each rank recorded, in order ({rank: steps})."""
    return {rank: [record["step"] for record in iter_records(run, rank)] for rank in trace_ranks(run)}


def steps_not_covered(run_steps: dict[int, list[int]], control_steps: dict[int, list[int]]) -> tuple[int, list]:
    """(a rank, the steps of the run it records that the control's same rank does not), or (lowest rank, [])."""
    for rank, steps in sorted(run_steps.items()):
        missing = sorted(set(steps) - set(control_steps.get(rank, [])))
        if missing:
            return rank, missing
    return min(run_steps, default=0), []


def optimizer_setup(meta: dict) -> tuple:
    optimizer = meta.get("optimizer") or {}
    groups = [
        {k: v for k, v in group.items() if k not in GROUP_BOOKKEEPING}
        for group in optimizer.get("param_groups") or []
        if isinstance(group, dict)
    ]
    return optimizer.get("class"), groups


def setup_differences(meta_side: dict, meta_control: dict, ignore=()) -> tuple[dict, dict]:
    """(what the control may vary and did, what else differs), each {key: [side's, control's]}."""
    diffs, seed = config_differences(meta_side, meta_control, ignore)
    if seed is not None:
        diffs["config.seed_everything"] = seed
    varied = {k: list(v) for k, v in diffs.items() if changes_only_rounding(k) or k in VARIED_CONFIG}
    other = {k: list(v) for k, v in diffs.items() if k not in varied}
    if optimizer_setup(meta_side) != optimizer_setup(meta_control):
        other["optimizer.param_groups"] = [optimizer_setup(meta_side)[1], optimizer_setup(meta_control)[1]]
    return varied, other


def check_controls(run_a: Path, run_b: Path, controls: list[Path], ignore=()) -> list[dict]:
    """Each control refused in one line when it is one of the pair (by folder or by the run it
    recorded), repeats another control, was recorded under another setup than RUN_A's beyond how
    its sums round, or does not cover RUN_A's world and steps. Returns what each varied."""
    meta_a, meta_b = load_meta(run_a), load_meta(run_b)  # types checked: one line for a bad one
    steps_a = recorded_steps(run_a)
    seen: list[tuple[Path, tuple | None]] = []
    varied_all = []
    for control in controls:
        meta = load_meta(control)
        name = f"--noise-control {control}"
        for run, meta_run, which in ((run_a, meta_a, "RUN_A"), (run_b, meta_b, "RUN_B")):
            if same_folder(control, run) or run_identity(meta) == run_identity(meta_run) is not None:
                raise ControlError(
                    f"{name}: is {which} ({run}) itself; a control is RUN_A's code run again under another "
                    "rounding, never one of the pair"
                )
        for other, identity in seen:
            if same_folder(control, other) or identity == run_identity(meta) is not None:
                raise ControlError(f"{name}: repeats the control {other}; give each control run once")
        seen.append((control, run_identity(meta)))
        varied, other = setup_differences(meta_a, meta, ignore)
        world = other.pop("world_size", None)
        if world is not None:
            raise ControlError(
                f"{name}: world size {world[1]}, RUN_A's is {world[0]}; a control runs at the world of the side "
                "it repeats"
            )
        if other:
            key, (theirs, its) = next(iter(other.items()))
            raise ControlError(
                f"{name}: `{key.removeprefix('config.')}` is {its!r}, RUN_A's {theirs!r}; a control may change only "
                "how sums round (threads, ATEN_CPU_CAPABILITY, model.init_ulps)"
                + (f" ({len(other) - 1} more keys differ)" if len(other) > 1 else "")
            )
        rank, missing = steps_not_covered(steps_a, recorded_steps(control))
        if missing:
            on_rank = f" on rank {rank}" if len(steps_a) > 1 else ""
            raise ControlError(
                f"{name}: recorded no step {_steps(missing)}{on_rank} of RUN_A's {_steps(steps_a[rank])}; a control "
                "must cover every step it judges, on every rank"
            )
        varied_all.append(varied)
    return varied_all


def check_single_control(run_a: Path, run_b: Path, control: Path, factor: float) -> None:
    """One control has no second to measure the spread of rounding against (`reproduces` null). Held
    to the floor instead: past `factor` times FIRST_STEP_FLOOR from RUN_A at the first step and
    nearer RUN_B than RUN_A there, it is RUN_B's code run again, and its envelope would hold the pair's
    own difference (a 2% loss bug judged within noise): refused."""
    to_a, to_b = first_step_distance(run_a, control), first_step_distance(run_b, control)
    if to_a is None or to_b is None or to_a <= factor * FIRST_STEP_FLOOR or to_b >= to_a:
        return
    raise ControlError(
        f"--noise-control {control}: is {to_b:.3g} from RUN_B but {to_a:.3g} from RUN_A at the first step: it "
        f"repeats RUN_B's code, not RUN_A's, and its envelope would hold the pair's own difference; record the "
        f"control from RUN_A's code (and name two or more: one alone has no spread to be checked against)"
    )


def check_reproduction(controls: Controls) -> None:
    """A control far from RUN_A at the first step, before rounding compounds, is another program."""
    for setup in controls.setups:
        if setup["reproduces"] is False:
            raise ControlError(
                f"--noise-control {setup['path']}: does not reproduce RUN_A: {setup['first_step_distance']:.3g} "
                f"apart at the first step, where the closest two of RUN_A and its controls are "
                f"{setup['spread']:.3g} apart (x{controls.factor:g} allowed); record it from RUN_A's code and setup"
            )


def checked_controls(run_a, run_b, controls: list, factor: float, ignore=()) -> Controls:
    """The controls, each checked (check_controls), measured from RUN_A and checked to reproduce it."""
    controls = [Path(c) for c in controls]
    varied = check_controls(Path(run_a), Path(run_b), controls, ignore)
    if len(controls) == 1:
        check_single_control(Path(run_a), Path(run_b), controls[0], factor)
    measured = Controls.measured(run_a, controls, factor, varied)
    check_reproduction(measured)
    return measured


def _steps(steps: list[int]) -> str:
    return f"{steps[0]}..{steps[-1]}" if len(steps) > 2 else ",".join(map(str, steps))
