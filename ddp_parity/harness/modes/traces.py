"""--traces RUN_A RUN_B: compare two existing run directories; launch nothing.

The report goes to --out, or to a new runs/traces-<time> folder: never beside the runs, where it
would replace an earlier report silently."""

from __future__ import annotations

from pathlib import Path

from ddp_parity.compare.given_controls import ControlError, checked_controls
from ddp_parity.compare.modules import replay_instruction
from ddp_parity.harness import comparing
from ddp_parity.harness.exits import UsageError
from ddp_parity.harness.outdir import OutDir, check_out, default_out
from ddp_parity.harness.program import harness_command
from ddp_parity.harness.replay import step_to_replay
from ddp_parity.harness.validate import check_rank_files, check_trace_pair
from ddp_parity.trace_files import check_run_folder


def prepare(args):
    """Checks before anything is written; fixes the output folder in args.out. Returns the key map
    and the measured controls (None without --noise-control)."""
    run_a, run_b = (Path(p) for p in args.traces)
    for run in (run_a, run_b, *map(Path, args.noise_control)):
        check_run_folder(run)  # a file, a symlink loop: named before any path is resolved
    args.out = args.out or str(default_out("traces"))
    check_out_holds_no_input(Path(args.out), [run_a, run_b, *map(Path, args.noise_control)])
    check_out(Path(args.out), args.overwrite)
    check_trace_pair(run_a, run_b)
    key_map = comparing.build_key_map(args.strip_prefix, args.key_map)
    controls = [Path(c) for c in args.noise_control]
    for control in controls:
        check_rank_files(control)
    if not controls:
        return key_map, None
    try:
        return key_map, checked_controls(run_a, run_b, controls, args.noise_factor, args.ignore_config)
    except ControlError as err:
        raise UsageError(str(err)) from None


def check_out_holds_no_input(out: Path, inputs: list[Path]) -> None:
    """--out one of the runs compared, or a folder above one: its results are the inputs (and
    --overwrite would move them aside while they are read)."""
    for run in inputs:
        run_at, out_at = run.resolve(), out.resolve()
        relation = "is" if run_at == out_at else "holds" if out_at in run_at.parents else None
        if run_at in out_at.parents:
            relation = "is inside"  # the report's files would land among the run's own
        if relation:
            raise UsageError(
                f"--out {out}: {relation} the input run {run}; the report goes into a folder of its own: "
                "choose another --out"
            )


def compare_existing(args) -> int:
    key_map, controls = prepare(args)
    run_a, run_b = (Path(p) for p in args.traces)
    out_dir = OutDir(Path(args.out), args.overwrite)
    with out_dir as out:
        # the runs are named by their own side names (or folders): they may be any two runs
        report = comparing.compare_and_report(
            out, {"a": run_a, "b": run_b}, args.rtol, args.atol, key_map, {"logs": {}},
            ignore_config=args.ignore_config, named_by_runs=True,
            noise=controls,
        )  # fmt: skip
        out_dir.commit()
    step = step_to_replay(report.first_divergence, run_a, run_b, under_noise=report.noise is not None)
    if step is not None:  # the divergence lies after the watched steps: say how to watch it
        print(replay_instruction(step, run_a, run_b, harness=harness_command()))
    return comparing.exit_code(report)
