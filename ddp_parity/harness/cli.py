"""Do a hand-written DDP loop and its Lightning twin train the same? Launch both, compare, report.

    python compare/run.py                                   # default config, 2 processes, bitwise
    python compare/run.py --set data.batch_size=16 --nproc 4
    python compare/run.py --sides raw,fabric,lightning      # every pair of three twins
    python compare/run.py --traces RUN_DIR_A RUN_DIR_B      # compare two existing runs, launch nothing
    python compare/run.py --rtol 1e-6 --atol 0              # tolerances instead of bitwise
    python compare/run.py --tolerance noise                 # against noise measured by control runs
    python compare/run.py --cmd "torchrun ... train.py" --cmd "python port.py"  # your two programs, unchanged

`ddp-parity` takes the same flags, and also subcommands: `ddp-parity run ...`, `ddp-parity traces A B ...`,
`ddp-parity matrix FILE ...`, `ddp-parity slurm --nodes N --devices D ...` (sbatch scripts for both sides),
`ddp-parity record --out RUN -- COMMAND ...` (record any training command with no line changed).
Installed from a package, without a checkout, it has no twins to launch: `--traces`, `--cmd`, `record`
and `slurm` work.

Exit codes: 0 equivalent (or equivalent within noise), 1 not equivalent, 2 bad usage, config or a
damaged input run, 3 a run failed or timed out, 4 the tool itself failed (an output it could not write,
or a bug: the traceback's file is named), 128+n stopped by signal n (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP).
"""

from __future__ import annotations

import argparse
import os
import sys

from ddp_parity.config import ConfigError
from ddp_parity.harness.exits import (
    EXIT_TOOL_FAILED,
    EXIT_USAGE,
    Interrupted,
    UsageError,
    internal_failure_line,
    restore_signals,
    stop_on_signals,
    system_failure_line,
)
from ddp_parity.harness.launch import REPO, SIDES
from ddp_parity.harness.program import program_name
from ddp_parity.harness.validate import (
    check_noise_options,
    check_tolerances,
    check_twins_in_checkout,
    parse_sides,
    stall_setting,
)
from ddp_parity.trace_files import TraceFormatError

DEFAULT_CONFIG = REPO / "configs" / "default.yaml"
SUBCOMMANDS = {"run": [], "traces": ["--traces"], "matrix": ["--matrix"]}
PATH_OPTIONS = ("config", "out", "key_map", "matrix")  # files and folders the user names
PATH_KEYS = ("ckpt_path",)  # config keys naming a file, in --set / --set-SIDE
NOT_PATHS = ("last", "null", "None", "")  # values of those keys that name no file


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=program_name(), description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="config file every side reads")
    p.add_argument("--nproc", type=int, default=None, help="processes per node (default: trainer.devices)")
    p.add_argument(
        "--nnodes",
        type=int,
        default=None,
        help="nodes, all on this machine (default: trainer.num_nodes); several go through torchrun",
    )
    p.add_argument(
        "--sides",
        default="raw,lightning",
        metavar="A,B[,C]",
        help=f"the twins to launch and compare pairwise, from {', '.join(SIDES)}, each optionally with its strategy "
        "(raw:ddp,raw:fsdp) (default: raw,lightning)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key on every side, e.g. data.batch_size=16 (repeatable)",
    )
    for side in SIDES:
        p.add_argument(
            f"--set-{side}",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"override a key on the {side} side only (to see a difference being caught)",
        )
    p.add_argument("--out", default=None, help="output directory (default: runs/compare-<time>)")
    p.add_argument("--overwrite", action="store_true", help="replace the results an output directory holds")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run (default: from the config)")
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=None,
        help="stop a side none of whose ranks made progress of any kind for this many seconds "
        "(default: adapts to the run, at least 20 s; <= 0: off)",
    )
    p.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0: exact)")
    p.add_argument("--atol", type=float, default=0.0, help="absolute tolerance (default 0: exact)")
    p.add_argument(
        "--tolerance",
        choices=("exact", "noise"),
        default=None,
        help="exact: bitwise, or within --rtol/--atol; noise: judge the float quantities against the noise "
        "measured by control runs, one side run again under changes of rounding alone (docs/tolerance.md)",
    )
    p.add_argument(
        "--noise-control",
        action="append",
        default=[],
        metavar="RUN",
        help="with --traces: a run of RUN_A's code again under a change of rounding alone (another ATen "
        "capability, init_ulps, threads); implies --tolerance noise (repeatable; two or more advised)",
    )
    p.add_argument(
        "--noise-factor",
        type=float,
        default=None,
        help="with --tolerance noise: how far past the controls' envelope a quantity must go to be called "
        "different (default 10, at most 1e6)",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="after a run fails, still run the other sides and compare what was recorded",
    )
    at_once = p.add_mutually_exclusive_group()
    at_once.add_argument(
        "--parallel",
        action="store_true",
        help="run the sides at once even where the cores are too few (default: at once when every "
        "side's processes x threads fit the cores, else one after the other)",
    )
    at_once.add_argument(
        "--sequential",
        action="store_true",
        help="run the sides one after the other even where the cores allow both at once (clean step times)",
    )
    p.add_argument("--quiet", action="store_true", help="no live progress lines while the sides train")
    p.add_argument(
        "--lightning-launcher",
        choices=("lightning", "torchrun"),
        default="lightning",
        help="Lightning's own launcher (re-runs the command per rank) or torchrun",
    )
    p.add_argument(
        "--reference",
        action="store_true",
        help="also train one plain process on the global batches DDP sees, and measure every side against it",
    )
    p.add_argument(
        "--mistake",
        default=None,
        metavar="NAME",
        help="run the raw side with one classic DDP mistake and see the diagnosis (`--mistake list`)",
    )
    p.add_argument(
        "--fault",
        default=None,
        metavar="RANK:STEP",
        help="also run every side with RANK killed after STEP (once) under torchrun --max-restarts=1, "
        "and compare each with its uninterrupted run",
    )
    p.add_argument(
        "--matrix",
        default=None,
        metavar="FILE",
        help="run every configuration of a YAML list (configs/matrix.yaml) and print one row each",
    )
    p.add_argument(
        "--strip-prefix",
        action="append",
        default=[],
        metavar="PREFIX",
        help="drop PREFIX from parameter names of both runs before pairing them (repeatable)",
    )
    p.add_argument(
        "--key-map",
        default=None,
        metavar="FILE",
        help='JSON object renaming parameters (after --strip-prefix) before pairing: {"name": "other name"}',
    )
    p.add_argument("--traces", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare two existing run directories")
    p.add_argument(
        "--cmd",
        action="append",
        default=[],
        metavar="COMMAND",
        help='give twice: launch your own two training commands as they are ("torchrun --nproc_per_node=2 '
        'train.py", "python train_lightning.py"), record both with no line changed into OUT/a and OUT/b, '
        "and compare them as --traces does",
    )
    p.add_argument(
        "--names",
        default=None,
        metavar="A,B",
        help="with --cmd: the two runs' names, their folders under --out and labels (default: a,b)",
    )
    p.add_argument(
        "--ignore-config",
        action="append",
        default=[],
        metavar="KEY",
        help="leave a (run-control) config key out of the configuration comparison, e.g. snapshot_path (repeatable)",
    )
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse and check every flag on its own; whatever needs the config is checked by the mode."""
    if argv and argv[0] in SUBCOMMANDS:
        argv = SUBCOMMANDS[argv[0]] + argv[1:]
    p = build_parser()
    args = p.parse_args(argv)
    try:
        check_tolerances(args.rtol, args.atol)
        check_noise_options(args)
        stall_setting(args.stall_timeout)
        args.sides = parse_sides(args.sides)
    except UsageError as err:
        p.error(str(err))
    for name in ("nproc", "nnodes"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be positive, got {getattr(args, name)}")
    if args.timeout is not None and not args.timeout > 0:
        p.error(f"--timeout must be positive, got {args.timeout}")
    resolve_user_paths(args)
    args.given = given_options(argv) if args.cmd else set()  # --cmd refuses the flags it cannot honour
    return args


def given_options(argv: list[str]) -> set[str]:
    """The flags (argparse dests) the command line gives, whatever their values: parsed again with
    every default suppressed, so that what is left was given."""
    p = build_parser()
    for action in p._actions:  # argparse keeps no public list of them
        action.default = argparse.SUPPRESS
    return set(vars(p.parse_args(argv)))


def absolute(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))


def resolve_user_paths(args: argparse.Namespace) -> None:
    """Every path the user gives, made absolute against the user's working directory before
    anything starts: the sides run with the checkout as their working directory."""
    for name in PATH_OPTIONS:
        if getattr(args, name):
            setattr(args, name, absolute(getattr(args, name)))
    if args.traces:
        args.traces = [absolute(path) for path in args.traces]
    args.noise_control = [absolute(path) for path in args.noise_control]
    args.overrides = [absolute_assignment(item) for item in args.overrides]
    for side in SIDES:
        name = f"set_{side}"
        setattr(args, name, [absolute_assignment(item) for item in getattr(args, name)])


def absolute_assignment(item: str) -> str:
    """`ckpt_path=x.ckpt` -> `ckpt_path=/cwd/x.ckpt`; any other KEY=VALUE as it is."""
    key, sep, value = item.partition("=")
    if sep and key in PATH_KEYS and value not in NOT_PATHS:
        return f"{key}={absolute(value)}"
    return item


def dispatch(args) -> int:
    # each mode imported when chosen: --traces needs the comparison (torch) at once, a launch not yet
    if args.cmd:  # the user's own two commands: no twins needed
        from ddp_parity.harness.modes import cmd

        return cmd.run_commands(args)
    if not args.traces or args.mistake == "list":  # every mode but --traces runs the checkout's files
        check_twins_in_checkout()
    if args.mistake == "list":
        from ddp_parity.harness.modes import mistake

        return mistake.print_catalogue()
    if args.traces:
        from ddp_parity.harness.modes import traces

        return traces.compare_existing(args)
    if args.matrix:
        from ddp_parity.harness.modes import matrix

        return matrix.run_matrix(args)
    from ddp_parity.harness.modes import default

    return default.launch_and_compare(args)[0]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["slurm"]:  # `ddp-parity slurm ...`: write the sbatch scripts of both sides
        from ddp_parity.harness import slurm

        return slurm.main(argv[1:], prog=f"{program_name()} slurm")
    if argv[:1] == ["record"]:  # `ddp-parity record --out RUN -- COMMAND`: one command, recorded unchanged
        from ddp_parity.harness.modes import record

        return record.main(argv[1:], prog=f"{program_name()} record")
    args = parse_args(argv)
    previous = stop_on_signals()
    try:
        return dispatch(args)
    except (ConfigError, UsageError, TraceFormatError) as err:
        print(f"{program_name()}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM, SIGHUP: the launcher has stopped every process
        signum = err.signum if isinstance(err, Interrupted) else 2
        print(
            f"{program_name()}: interrupted (signal {signum}); every process it started has been stopped",
            file=sys.stderr,
        )
        return err.exit_code if isinstance(err, Interrupted) else 130
    except OSError as err:  # the inputs' own errors are TraceFormatError: this is an output or the machine
        print(f"{program_name()}: {system_failure_line(err)}", file=sys.stderr)
        return EXIT_TOOL_FAILED
    except Exception as err:  # a failure of the tool itself: never exit 1, which says the runs differ
        print(f"{program_name()}: {internal_failure_line(err)}", file=sys.stderr)
        return EXIT_TOOL_FAILED
    finally:
        restore_signals(previous)


if __name__ == "__main__":
    sys.exit(main())
