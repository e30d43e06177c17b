"""--cmd "COMMAND A" --cmd "COMMAND B": launch two training commands as they are, record both with no line
changed, compare them as --traces does.

    python compare/run.py --cmd "torchrun --nproc_per_node=2 train.py" --cmd "python train_lightning.py"

Each command is a side of the harness (a `launch.Launch`): started in this working directory with its own
free MASTER_PORT (and torchrun's PET_MASTER_PORT, so two torchruns never meet on the default port),
its log in OUT/<name>.log, watched for stalls through the heartbeats its ranks write, and stopped with
every process it started on a failure, a timeout or a signal. Each records into OUT/<name>
(ddp_parity.hooks.recording_env); the report, its page and plot are --traces's. Both run with the same
thread count: OMP_NUM_THREADS (and MKL_NUM_THREADS) as set here, else 1, torchrun's own choice, since
a different count changes how CPU sums round.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ddp_parity.harness.commands import (
    check_apart_from_inputs,
    check_found,
    command_env,
    processes_started,
    split_command,
)
from ddp_parity.harness.exits import EXIT_FAILED, UsageError
from ddp_parity.harness.launch import Launch, Outcome, available_cores, free_port, run_all
from ddp_parity.harness.outdir import OutDir, check_out, default_out
from ddp_parity.harness.preload import importing_comparison
from ddp_parity.harness.progress import make_progress
from ddp_parity.harness.validate import stall_setting
from ddp_parity.hooks import recording_env
from ddp_parity.lifeline import LIFELINE_ENV
from ddp_parity.trace_files import TraceFormatError

DEFAULT_NAMES = ("a", "b")
# the flags that mean something with --cmd (argparse dests); any other given is refused, not ignored
WITH_CMD = {
    "cmd", "names", "out", "overwrite", "timeout", "stall_timeout", "rtol", "atol", "tolerance", "keep_going",
    "parallel", "sequential", "quiet", "strip_prefix", "key_map", "ignore_config",
}  # fmt: skip
FLAG_OF = {"overrides": "--set"}  # dests whose flag is not --<dest with dashes>
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
UNREADABLE_HINT = (
    "did the command run its training in Python processes that import torch? every one of them records "
    "(ddp_parity.hooks); see its log"
)


@dataclass
class CommandPlan:
    """The two commands' validated inputs."""

    names: tuple[str, str]
    commands: list[list[str]]
    out: Path
    timeout: float
    stall: tuple[float | None, bool]
    key_map: object = None


def flag_of(dest: str) -> str:
    return FLAG_OF.get(dest, "--" + dest.replace("_", "-"))


def check_flags(args) -> None:
    """Two commands, and only flags that apply to them."""
    refused = sorted(getattr(args, "given", set()) - WITH_CMD)
    if refused:
        raise UsageError(
            f"--cmd with {flag_of(refused[0])}: the commands are launched as they are; {flag_of(refused[0])} "
            "applies to the harness's own twins (drop one of them)"
        )
    if len(args.cmd) != 2:
        raise UsageError(f'--cmd: give exactly two commands (--cmd "COMMAND A" --cmd "COMMAND B"), got {len(args.cmd)}')
    if args.tolerance == "noise":
        raise UsageError(
            "--cmd with --tolerance noise: not yet; record noise controls with `ddp-parity record` and compare "
            "with --traces A B --noise-control C"
        )


def parse_names(text: str | None) -> tuple[str, str]:
    """--names A,B: the two runs' folders under OUT and their labels (default a,b)."""
    if text is None:
        return DEFAULT_NAMES
    names = tuple(name.strip() for name in text.split(","))
    if len(names) != 2 or names[0] == names[1] or not all(NAME.fullmatch(name) for name in names):
        raise UsageError(
            f"--names {text}: two different names, one for each --cmd, of letters, digits, '_', '.', '-' "
            "(e.g. --names raw,lightning)"
        )
    return names  # type: ignore[return-value]


def prepare(args) -> CommandPlan:
    """Every check of the two commands, before anything is launched or written."""
    check_flags(args)
    names = parse_names(args.names)
    commands = [split_command(text, "--cmd") for text in args.cmd]
    for text, command in zip(args.cmd, commands):
        check_found(command, f"--cmd {text!r}")
    out = Path(args.out or default_out("compare"))
    check_apart_from_inputs(out, commands, "--out")
    check_out(out, args.overwrite)
    stall = stall_setting(args.stall_timeout)
    key_map = None
    if args.strip_prefix or args.key_map:  # the comparison's module imports torch: only for a map to build
        from ddp_parity.harness.comparing import build_key_map

        key_map = build_key_map(args.strip_prefix, args.key_map)
    # no default timeout: a user's training may rightly take days; a hang is caught as a stall
    return CommandPlan(names, commands, out, args.timeout or math.inf, stall, key_map)


def command_launch(name: str, command: list[str], out: Path) -> Launch:
    """One command as a side of the harness: its port, its run folder and log, the recording switched on."""
    port = str(free_port())
    env = command_env(os.environ, threads=True)
    env.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=port,
        PET_MASTER_ADDR="127.0.0.1",  # torchrun's --master-addr and --master-port, unless the command gives them
        PET_MASTER_PORT=port,
        **{LIFELINE_ENV: "1"},  # every process of the command dies with the harness, even on SIGKILL
    )
    run_dir = out / name
    env = recording_env(run_dir, name, env)
    processes = processes_started(command)
    return Launch(name, [command], env, run_dir, out / f"{name}.log", cwd=Path.cwd(), processes=processes)


def run_commands(args) -> int:
    plan = prepare(args)
    out_dir = OutDir(plan.out, args.overwrite)
    with out_dir as out:
        code = launch_and_compare(args, plan, out)
        out_dir.commit()
    return code


def launch_and_compare(args, plan: CommandPlan, out: Path) -> int:
    launches = [command_launch(name, command, out) for name, command in zip(plan.names, plan.commands)]
    for launch in launches:
        print(f"[{launch.side}] {' '.join(launch.command)[:200]} (log: {launch.log_path})", flush=True)
    with importing_comparison():
        outcomes = run_both(args, launches, plan)
    from ddp_parity.harness import comparing  # imported meanwhile, in the background (harness/preload.py)

    runs = {launch.side: launch.run_dir for launch in launches}
    extra = {
        "logs": {launch.side: str(launch.log_path) for launch in launches},
        "commands": {launch.side: launch.command for launch in launches},
    }
    criterion = comparing.describe_criterion(args.rtol, args.atol)
    failed = [o for o in outcomes if not o.ok]
    if failed and not args.keep_going:
        report = comparing.failed_report(failed[0], outcomes, runs, criterion, labels=plan.names, **extra)
        comparing.write_failure(out, report)
        return EXIT_FAILED
    try:
        report = comparing.compare_and_report(
            out, runs, args.rtol, args.atol, plan.key_map, extra, ignore_config=args.ignore_config
        )
    except TraceFormatError as err:  # exited 0 without a readable trace: nothing was recorded
        comparing.write_failure(out, comparing.unreadable_report(err, outcomes, runs, criterion, UNREADABLE_HINT))
        return EXIT_FAILED
    return EXIT_FAILED if failed else comparing.exit_code(report)


def run_both(args, launches: list[Launch], plan: CommandPlan) -> list[Outcome]:
    """At once when every process of both gets a core (or --parallel), else one after the other
    (stopping at the first failure unless --keep-going), with live progress unless --quiet."""
    stall, adaptive = plan.stall
    needed = sum(launch.processes for launch in launches) * int(launches[0].env.get("OMP_NUM_THREADS", "1"))
    at_once = args.parallel or (not args.sequential and needed <= available_cores())
    progress = make_progress(args.quiet, {launch.side: None for launch in launches})
    return run_all(launches, at_once, args.keep_going, plan.timeout, stall, adaptive, progress)
