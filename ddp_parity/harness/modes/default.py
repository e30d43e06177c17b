"""The default mode: launch every side with the same config, compare each pair, report.

The way to the launches imports no torch: the comparison's modules (comparing, fault, reference,
replay) are imported where they are first used, and meanwhile in the background while the sides
train (harness/preload.py), so their seconds of start-up overlap the training.
"""

from __future__ import annotations

from pathlib import Path

from ddp_parity.compare.findings import Report
from ddp_parity.harness.controls import control_launches, control_side, controls_varied
from ddp_parity.harness.exits import EXIT_DIFFERENT, EXIT_FAILED
from ddp_parity.harness.launch import (
    Launch,
    Outcome,
    available_cores,
    build_launch,
    run_all,
    side_parts,
)
from ddp_parity.harness.modes.mistake import mistake_overrides
from ddp_parity.harness.outdir import OutDir, default_out
from ddp_parity.harness.preload import importing_comparison
from ddp_parity.harness.progress import make_progress
from ddp_parity.harness.validate import Plan, plan_launch


def prepare(args) -> Plan:
    """Every check of a launch, before anything is launched or written."""
    return plan_launch(args, mistake_overrides(args.mistake, args.sides, args.fault))


def launch_and_compare(args, plan: Plan | None = None) -> tuple[int, Report]:
    """Run every side, compare; return the exit code and the report."""
    plan = plan or prepare(args)
    out_dir = OutDir(Path(args.out) if args.out else default_out(), args.overwrite)
    with out_dir as out:
        code, report = run_plan(args, plan, out)
        out_dir.commit()
    return code, report


def build_launches(args, plan: Plan, out: Path) -> list[Launch]:
    launches = [plan.side_launch(args, side, out) for side in plan.sides]
    if args.reference:
        launches.append(
            build_launch(
                "reference", args.config, plan.nproc, plan.flags("raw"), out, plan.cfg.threads, nnodes=plan.nnodes
            )
        )
    if args.fault:
        from ddp_parity.harness.modes import fault  # imports the comparison (torch) before launching

        launches += fault.fault_launches(args, plan, out)
    if args.tolerance == "noise":
        launches += control_launches(args, plan, out)
    return launches


def run_plan(args, plan: Plan, out: Path) -> tuple[int, Report]:
    launches = build_launches(args, plan, out)
    for launch in launches:
        command = " ".join(launch.command[:6])
        print(f"[{launch.side}] {command} ... (log: {launch.log_path}, timeout {plan.timeout:.0f} s)", flush=True)
    with importing_comparison():
        outcomes = run_sides(args, launches, plan)
    # imported meanwhile, in the background (harness/preload.py); here they are ready
    from ddp_parity.harness import comparing
    from ddp_parity.harness.modes import fault, reference

    logs = {o.side: str(out / f"{o.side}.log") for o in outcomes}
    failed = [o for o in outcomes if not o.ok]
    world = {"nproc": plan.nproc, "nnodes": plan.nnodes, "world_size": plan.world_size}
    seconds = sum(o.seconds for o in outcomes)
    runs = {side: out / side for side in plan.sides}
    if failed and not args.keep_going:
        report = comparing.failed_report(
            failed[0],
            outcomes,
            runs,
            comparing.describe_criterion(args.rtol, args.atol),
            labels=tuple(plan.sides[:2]),
            logs=logs,
            **world,
            **({"sides": plan.sides} if len(plan.sides) > 2 else {}),
        )
        return EXIT_FAILED, comparing.write_failure(out, report)
    extra = {"logs": logs, **world, "seconds": seconds}
    controls = [launch.run_dir for launch in launches if "-control-" in launch.side]
    noise = None
    if controls:
        side = runs[control_side(args, plan.sides)]
        noise = comparing.Controls.measured(side, controls, args.noise_factor, controls_varied(plan))
    if args.reference:
        extra["reference"] = reference.reference_report(out, args.rtol, args.atol, plan.sides, noise)
    if args.fault:
        extra["fault"] = fault.fault_report(out, args.fault, plan.sides, args.rtol, args.atol, noise)
    ignore = ignored_config(args, plan.sides)
    report = comparing.compare_and_report(
        out, runs, args.rtol, args.atol, plan.key_map, extra, ignore_config=ignore, noise=noise
    )
    localise_by_replay(plan, launches, report, out)
    code = comparing.exit_code(report)
    if args.fault:
        print(fault.format_fault(report.sections["fault"]))
        if not fault.fault_fired_everywhere(report.sections["fault"]):
            print("FAILED: the fault never fired on every side, so the restart was not tested")
            code = EXIT_FAILED
        elif not fault.fault_passed(report.sections["fault"]):
            code = max(code, EXIT_DIFFERENT)
    if args.reference:
        print(reference.format_reference(report.sections["reference"]))
        if not reference.all_equivalent(report.sections["reference"]):
            code = max(code, EXIT_DIFFERENT)
    return (EXIT_FAILED if failed else code), report


def ignored_config(args, sides: list[str]) -> tuple[str, ...]:
    """--ignore-config, plus trainer.strategy when the sides name different strategies on purpose
    (raw:ddp vs raw:fsdp): the comparison is then of the strategies, not a setup difference."""
    named = {side_parts(side)[1] for side in sides}
    return (*args.ignore_config, *(["trainer.strategy"] if len(named - {None}) > 1 else []))


def localise_by_replay(plan: Plan, launches: list[Launch], report: Report, out: Path) -> None:
    """A loss, gradient or parameter divergence after the watched steps: run the first pair again
    watching that step (DDP_PARITY_WATCH_STEP) and name the module where it is born."""
    from ddp_parity.harness import comparing  # imported while the sides trained (harness/preload.py)
    from ddp_parity.harness.replay import replay_and_localise, step_to_replay

    a, b = plan.sides[0], plan.sides[1]
    step = step_to_replay(report.first_divergence, out / a, out / b, under_noise=report.noise is not None)
    if step is None:
        return
    print(f"step {step} was not watched: replaying both sides watching it, to name the layer ...", flush=True)
    by_side = {launch.side: launch for launch in launches}
    stall, _ = plan.stall
    rank = (report.first_divergence or {}).get("rank") or 0
    replay = replay_and_localise(by_side[a], by_side[b], step, plan.timeout, stall, rank=rank)
    comparing.add_replay(out, report, replay)


def cores_needed(launches: list[Launch], plan: Plan) -> int:
    """Cores every launch keeps busy at once: each rank's threads and its DataLoader workers."""
    per_rank = plan.cfg.threads + plan.cfg.data.num_workers
    return sum(launch.processes for launch in launches) * per_rank


def launch_at_once(args, launches: list[Launch], plan: Plan) -> bool:
    """--parallel and --sequential decide; otherwise at once when the machine has a core for every
    thread of every launch (bitwise results do not depend on scheduling; step times would)."""
    if args.parallel or args.sequential:
        return args.parallel
    return cores_needed(launches, plan) <= available_cores()


def run_sides(args, launches: list[Launch], plan: Plan) -> list[Outcome]:
    """All at once where the cores allow (faster; the step times it reports are noisier), else one
    side after the other, with live progress unless --quiet."""
    stall, adaptive = plan.stall
    at_once = launch_at_once(args, launches, plan)
    if at_once and not args.parallel:
        print(
            f"launching {', '.join(launch.side for launch in launches)} at once: {cores_needed(launches, plan)} "
            f"cores needed, {available_cores()} here (--sequential: one after the other)",
            flush=True,
        )
    progress = make_progress(args.quiet, {launch.side: plan.total_steps for launch in launches})
    return run_all(launches, at_once, args.keep_going, plan.timeout, stall, adaptive, progress)
