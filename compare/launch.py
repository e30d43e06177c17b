"""Launch the two implementations as real process trees, with a timeout, and never leave one behind.

torchrun starts its workers in sessions of their own, so killing a process group is not enough:
on timeout, failure or Ctrl-C the whole tree of descendants (found through /proc) is killed.
Commands are argument lists, never a shell.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parent.parent
SIDES = ("raw", "lightning")


def free_port() -> int:
    """A free TCP port on the loopback interface (rendezvous never binds beyond it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_args(nproc: int, port: int, max_restarts: int = 0) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--nnodes=1",
            "--master_addr=127.0.0.1", f"--master_port={port}", f"--max-restarts={max_restarts}"]


@dataclass
class Launch:
    """One implementation's run: its command, environment, run directory and log."""

    side: str
    command: list[str]
    env: dict
    run_dir: Path
    log_path: Path


def build_launch(side: str, config: str, nproc: int, overrides: list[str], out: Path, threads: int,
                 lightning_launcher: str = "lightning", max_restarts: int = 0,
                 extra_env: Optional[dict] = None) -> Launch:
    run_dir, port = out / side, free_port()
    common = ["--config", str(config), "--run_dir", str(run_dir), "--threads", str(threads),
              "--trainer.devices", str(nproc), "--trainer.enable_progress_bar", "false", *overrides]
    if side == "raw":
        command = [*torchrun_args(nproc, port, max_restarts), str(REPO / "raw" / "train.py"), *common]
    elif lightning_launcher == "torchrun":
        command = [*torchrun_args(nproc, port, max_restarts), "-m", "lightning_impl", "fit", *common]
    else:
        command = [sys.executable, "-m", "lightning_impl", "fit", *common]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), **(extra_env or {})}
    env.pop("DDP_PARITY_RUN_DIR", None)
    return Launch(side, command, env, run_dir, out / f"{side}.log")


@dataclass
class Outcome:
    side: str
    returncode: Optional[int]
    seconds: float
    timed_out: bool = False
    interrupted: bool = False
    errors: list = field(default_factory=list)   # error files the ranks wrote
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.interrupted

    def describe(self) -> str:
        if self.timed_out:
            return f"{self.side}: timed out after {self.seconds:.0f} s"
        if self.interrupted:
            return f"{self.side}: interrupted"
        return f"{self.side}: exit code {self.returncode}"


def run_launch(launch: Launch, timeout: float) -> Outcome:
    """Run one side to completion or timeout; its output goes to its log file."""
    launch.log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(launch.log_path, "w") as log:
        log.write("$ " + " ".join(launch.command) + "\n")
        log.flush()
        proc = subprocess.Popen(launch.command, env=launch.env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        outcome = Outcome(launch.side, None, 0.0)
        try:
            outcome.returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            outcome.timed_out = True
        except KeyboardInterrupt:
            outcome.interrupted = True
        finally:
            kill_tree(proc.pid)
            proc.wait()
    outcome.seconds = time.monotonic() - started
    if not outcome.ok:
        outcome.errors = read_error_files(launch.run_dir)
        outcome.log_tail = tail(launch.log_path, 60)
    if outcome.interrupted:
        raise KeyboardInterrupt
    return outcome


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (torchrun's workers live in sessions of their own)."""
    for _ in range(3):  # a second pass catches children spawned while the first was killing
        pids = descendants(pid) + [pid]
        alive = False
        for target in pids:
            try:
                os.kill(target, signal.SIGKILL)
                alive = True
            except (ProcessLookupError, PermissionError):
                pass
        if not alive:
            return


def read_error_files(run_dir: Path) -> list[dict]:
    """The errors the ranks recorded (ddp_parity.runs.write_error_file), earliest first."""
    found = []
    for path in sorted((run_dir / "errors").glob("rank*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            continue
    return sorted(found, key=lambda e: e.get("time", 0))


def tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
