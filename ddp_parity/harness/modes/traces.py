"""--traces RUN_A RUN_B: compare two existing run directories; launch nothing.

The report goes to --out, or to a new runs/traces-<time> folder: never beside the runs, where it
would replace an earlier report silently."""

from __future__ import annotations

from pathlib import Path

from ddp_parity.compare.modules import replay_instruction
from ddp_parity.harness import comparing
from ddp_parity.harness.outdir import OutDir, check_out, default_out
from ddp_parity.harness.program import harness_command
from ddp_parity.harness.replay import step_to_replay
from ddp_parity.trace_files import read_meta


def prepare(args):
    """Checks before anything is read or written; fixes the output folder in args.out."""
    args.out = args.out or str(default_out("traces"))
    check_out(Path(args.out), args.overwrite)
    for control in args.noise_control:  # refused before anything is written, like the runs themselves
        read_meta(control)
    return comparing.build_key_map(args.strip_prefix, args.key_map)


def compare_existing(args) -> int:
    key_map = prepare(args)
    run_a, run_b = (Path(p) for p in args.traces)
    out_dir = OutDir(Path(args.out), args.overwrite)
    with out_dir as out:
        # the runs are named by their own side names (or folders): they may be any two runs
        report = comparing.compare_and_report(
            out, {"a": run_a, "b": run_b}, args.rtol, args.atol, key_map, {"logs": {}},
            ignore_config=args.ignore_config, named_by_runs=True,
            noise=comparing.Controls.measured(run_a, [Path(c) for c in args.noise_control], args.noise_factor)
            if args.noise_control else None,
        )  # fmt: skip
        out_dir.commit()
    step = step_to_replay(report.first_divergence, run_a, run_b, under_noise=report.noise is not None)
    if step is not None:  # the divergence lies after the watched steps: say how to watch it
        print(replay_instruction(step, run_a, run_b, harness=harness_command()))
    return comparing.exit_code(report)
