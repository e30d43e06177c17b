"""`ddp-parity record --out RUN -- COMMAND [ARGS...]`: run a training command with no line of it changed,
and record every rank's trace into RUN.

    ddp-parity record --out runs/mine -- torchrun --nproc_per_node=2 train.py --epochs 2
    ddp-parity record --out runs/port -- python train_lightning.py      # Lightning's own launcher
    ddp-parity --traces runs/mine runs/port                             # then compare the two

The command runs in this working directory with this environment, plus the two things that switch
the recording on in every Python process it starts (ddp_parity.hooks.recording_env). Nothing else is
set: no thread count (torchrun sets OMP_NUM_THREADS=1 itself for several processes a node), no port.
The exit status is the command's (128+n when signal n ended it); SIGINT, SIGTERM, SIGHUP, SIGQUIT,
SIGUSR1 and SIGUSR2 sent to this process are passed on to the command's process group.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from ddp_parity.harness.commands import check_apart_from_inputs, check_found, exit_status
from ddp_parity.harness.exits import EXIT_USAGE, UsageError
from ddp_parity.harness.outdir import OutDir, check_out
from ddp_parity.hooks import recording_env
from ddp_parity.lifeline import set_parent_death_signal
from ddp_parity.trace_files import TRACE_DIR

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def build_parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Run a training command unchanged and record every rank's trace (no line of the program "
        "changed): python script.py, torchrun ..., python -m torch.distributed.run ..., a Lightning script with "
        "its own launcher. The exit status is the command's.",
        usage=f"{prog} --out RUN [--overwrite] [--side NAME] -- COMMAND [ARGS...]",
    )
    p.add_argument("--out", required=True, metavar="RUN", help="the run directory every rank records into")
    p.add_argument("--overwrite", action="store_true", help="replace what RUN holds (kept until the command ran)")
    p.add_argument("--side", default=None, help="the run's name in its meta.json and reports (default: RUN's name)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command and its arguments, after --")
    return p


def parse(argv: list[str], prog: str) -> argparse.Namespace:
    args = build_parser(prog).parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    args.out = Path(os.path.abspath(os.path.expanduser(args.out)))
    return args


def prepare(args) -> None:
    """Every check, before anything is written or run: a command, found; RUN outside the checkout's
    sources and apart from the files the command names; RUN empty (or --overwrite)."""
    if not args.command:
        raise UsageError("no command to record; give it after --, e.g. `-- torchrun --nproc_per_node=2 train.py`")
    check_found(args.command, "COMMAND")
    check_apart_from_inputs(args.out, [args.command], "--out")
    check_out(args.out, args.overwrite, "--out", everything=True)


def main(argv: list[str], prog: str) -> int:
    args = parse(argv, prog)
    try:
        prepare(args)
        out_dir = OutDir(args.out, args.overwrite, "--out", everything=True)
        with out_dir as run_dir:
            env = recording_env(run_dir, args.side or run_dir.name, os.environ)
            returncode = run_forwarding_signals(args.command, env)
            out_dir.commit()  # whatever the command did, RUN holds what it recorded
    except UsageError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{prog}: {describe_recording(args.out)}", file=sys.stderr)
    return exit_status(returncode)


def run_forwarding_signals(command: list[str], env: dict) -> int:
    """Run the command in a process group of its own and wait for it; the signals this process gets
    go on to that group. In a terminal the group is made the foreground one, so that Ctrl-C, Ctrl-\\
    and a debugger's reads reach the program as they would without recording."""
    proc: subprocess.Popen | None = None
    pending: list[int] = []

    def forward(signum, frame):
        if proc is None:
            pending.append(signum)
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    terminal = foreground_terminal()
    try:
        try:
            proc = subprocess.Popen(command, env=env, preexec_fn=lambda: start_group(terminal))
        except OSError as err:  # found, but the system will not start it (no #! line, no permission)
            raise UsageError(f"COMMAND: cannot start {command[0]!r}: {err.strerror or err}") from None
        for signum in pending:
            forward(signum, None)
        return proc.wait()
    finally:
        take_terminal_back(terminal)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def foreground_terminal() -> int | None:
    """stdin's terminal when this process's group is its foreground group (an interactive run), else None."""
    try:
        fd = sys.stdin.fileno()
        return fd if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp() else None
    except (OSError, ValueError, AttributeError):
        return None


def start_group(terminal: int | None) -> None:
    """In the child, before exec: a process group of its own, the terminal's foreground when there is
    one, and death with this process (a SIGKILL of the recorder leaves no training behind)."""
    os.setpgid(0, 0)
    if terminal is not None:
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may not take the terminal otherwise
        with contextlib.suppress(OSError):
            os.tcsetpgrp(terminal, os.getpgrp())
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    set_parent_death_signal()


def take_terminal_back(terminal: int | None) -> None:
    if terminal is None:
        return
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.tcsetpgrp(terminal, os.getpgrp())
    signal.signal(signal.SIGTTOU, previous)


def describe_recording(run: Path) -> str:
    """One line on what RUN holds after the command: the ranks recorded, or that none was."""
    ranks = sorted(
        int(p.name.removeprefix("rank").removesuffix(".jsonl"))
        for p in (run / TRACE_DIR).glob("rank*.jsonl")
        if p.name.removeprefix("rank").removesuffix(".jsonl").isdigit()
    )
    if not ranks:
        return (
            f"{run} holds no trace: no process of the command recorded a step (did it run Python with torch, "
            "and reach an optimizer step?)"
        )
    which = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks[0]}..{ranks[-1]}"
    return f"{run} holds the trace of {which}; compare it with another run: --traces {run} OTHER_RUN"
