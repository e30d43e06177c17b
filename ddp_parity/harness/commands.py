"""A user's own command, launched as it is (`ddp-parity record -- COMMAND`, `--cmd "COMMAND"`): the checks
made before it runs, the environment it runs with, and its exit status as a shell reports it.

Every check raises UsageError with one line naming the input: a command that is not there, and an
output folder that is, or lies inside, or holds, a file or folder the command names (its script, its
data), or lies in the checkout's sources.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from ddp_parity.distributed import WORKER_ENV_KEYS
from ddp_parity.harness.exits import UsageError

# variables that would make the command think it is a worker of a job this process belongs to
SCRUBBED_ENV = (*WORKER_ENV_KEYS, "MASTER_PORT", "DDP_PARITY_RUN_DIR", "PL_GLOBAL_SEED")
SCRUBBED_PREFIXES = ("TORCHELASTIC_",)
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
DEFAULT_THREADS = "1"  # what torchrun sets for several processes a node when OMP_NUM_THREADS is unset
# flags that say how many processes a command starts on this machine (torchrun, Lightning, argparse)
PROCESS_FLAGS = re.compile(r"--(?:nproc[_-]per[_-]node|devices|trainer\.devices)(?:=(\d+))?$")


def split_command(text: str, option: str) -> list[str]:
    """`--cmd "torchrun --nproc_per_node=2 train.py"` as an argument list (shell quoting, no shell)."""
    try:
        command = shlex.split(text)
    except ValueError as err:
        raise UsageError(f"{option} {text!r}: cannot be split into arguments ({err})") from None
    if not command:
        raise UsageError(f'{option} {text!r}: no command; give the command to run, e.g. "python train.py"')
    return command


def check_found(command: Sequence[str], option: str, cwd: Path | None = None, path: str | None = None) -> None:
    """The command's program is on PATH, or (when it names a path) a file that may be run."""
    program = command[0]
    folder = Path(cwd or os.getcwd())
    if os.sep in program:
        file = folder / program
        if not (file.is_file() and os.access(file, os.X_OK)):
            what = "not an executable file" if file.exists() else "no such file"
            raise UsageError(f"{option}: cannot run {program!r}: {what} (from {folder})")
        return
    if shutil.which(program, path=path if path is not None else os.environ.get("PATH", os.defpath)) is None:
        raise UsageError(f"{option}: cannot run {program!r}: no such program on PATH")


def paths_named(command: Sequence[str], cwd: Path | None = None) -> list[Path]:
    """The files and folders that exist among a command's arguments (`data/`, `--config=c.yaml`,
    `--out_dir out`), resolved against `cwd`; the program itself is left out (the interpreter's folder
    is no input). What does not exist yet is an output of the command, not an input."""
    folder = Path(cwd or os.getcwd())
    found = []
    for arg in command[1:]:
        for candidate in (arg, arg.partition("=")[2]) if "=" in arg else (arg,):
            if not candidate or candidate.startswith("-"):
                continue
            path = folder / os.path.expanduser(candidate)
            try:
                if path.exists():
                    found.append(Path(os.path.abspath(path)))
            except (OSError, ValueError):  # a name too long, a NUL byte: not a path
                continue
    return found


def check_apart_from_inputs(out: Path, commands: Sequence[Sequence[str]], option: str, cwd: Path | None = None):
    """The output folder is none of the files and folders a command names, lies inside none of them
    (the recording would be written among the program's inputs, and read by it), and holds none (an
    --overwrite would move them aside)."""
    out = Path(os.path.abspath(out)).resolve()
    for command in commands:
        for path in paths_named(command, cwd):
            real = path.resolve()
            if real == out or real in out.parents:
                where = "is" if real == out else "lies inside"
                raise UsageError(
                    f"{option} {out}: {where} {path}, which the command names ({shlex.join(command)[:120]}); "
                    "record into a folder of its own, outside the program's files"
                )
            if out in real.parents:
                raise UsageError(
                    f"{option} {out}: holds {path}, which the command names; record into a folder of its own"
                )


def command_env(base: Mapping[str, str], threads: bool = False) -> dict[str, str]:
    """`base` without the variables of a job this process may be part of (a command started from
    inside a torchrun worker must not join that job). `threads`: OMP_NUM_THREADS and MKL_NUM_THREADS
    set (to the user's OMP_NUM_THREADS, else 1) so that two commands compared run with the same."""
    env = {k: v for k, v in base.items() if k not in SCRUBBED_ENV and not k.startswith(SCRUBBED_PREFIXES)}
    env["PYTHONUNBUFFERED"] = "1"
    if threads:
        count = base.get("OMP_NUM_THREADS") or DEFAULT_THREADS
        env.update(dict.fromkeys(THREAD_VARIABLES, count))
    return env


def exit_status(returncode: int) -> int:
    """A process's exit status as a shell reports it: its code, or 128+n when signal n killed it."""
    return 128 - returncode if returncode < 0 else returncode


def processes_started(command: Sequence[str]) -> int:
    """How many processes a command runs, read from --nproc_per_node / --devices (1 if neither)."""
    for i, arg in enumerate(command):
        match = PROCESS_FLAGS.match(arg)
        if not match:
            continue
        value = match.group(1) or (command[i + 1] if i + 1 < len(command) else "")
        if value.isdigit():
            return int(value)
    return 1
