"""Launch the two implementations as real process trees, with a timeout, and never leave one behind.

torchrun starts its workers in sessions of their own, so killing a process group is not enough:
on timeout, failure or Ctrl-C the whole tree of descendants (found through /proc) is killed.
Commands are argument lists, never a shell.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddp_parity.harness.liveness import Liveness
from ddp_parity.lifeline import LIFELINE_ENV, set_parent_death_signal
from ddp_parity.trace_files import read_progress

# the checkout ddp_parity is installed from (pip install -e .): the twins are launched from there.
# Installed from a wheel it is site-packages, which holds no twins (only ddp_parity is packaged).
REPO = Path(__file__).resolve().parents[2]
# the twins' files, within the checkout
RAW_SCRIPT = Path("raw") / "train.py"
LIGHTNING_PACKAGE = Path("lightning_impl")
SIDES = ("raw", "lightning", "fabric")  # the twins the harness can launch
# the module each Lightning-family side runs (`python -m MODULE` or `torchrun ... -m MODULE`)
LIGHTNING_MODULES = {"lightning": ["-m", "lightning_impl", "fit"], "fabric": ["-m", "lightning_impl.fabric"]}
STRATEGIES = ("ddp", "fsdp")  # a side may name one: `raw-fsdp` is raw/train.py with trainer.strategy fsdp


def side_parts(side: str) -> tuple[str, str | None]:
    """`raw` -> ("raw", None); `raw-fsdp` -> ("raw", "fsdp"): the twin, and the strategy the side
    runs with when its name says one (else the config's)."""
    twin, _, strategy = side.partition("-")
    return twin, (strategy if strategy in STRATEGIES else None)


def is_side(side: str) -> bool:
    twin, strategy = side_parts(side)
    return twin in SIDES and side == (f"{twin}-{strategy}" if strategy else twin)


def strategy_flags(side: str) -> list[str]:
    strategy = side_parts(side)[1]
    return ["--trainer.strategy", strategy] if strategy else []


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000  # below it lie the well-known and the commonly configured service ports
_handed_out: set[int] = set()  # this process's picks: two launches started together never share one
_picking = threading.Lock()  # launches started from threads at once pick one at a time


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now, drawn below the kernel's ephemeral range.
    A port from bind(0) lies in that range, and so does the local port of every outgoing connection
    (gloo's mesh, store clients, any other job's): one of those can take it in the second before the
    rendezvous binds it, and the launch dies of EADDRINUSE. Below the range only another explicit
    pick can; the draw is random (not `random`, which a test may have seeded) and checked by a bind."""
    ports = range(LOWEST_PORT, ephemeral_low())
    if len(ports) > 100:
        draw = random.SystemRandom()
        with _picking:
            for _ in range(100):
                port = draw.choice(ports)
                if port not in _handed_out and port_is_free(port):
                    _handed_out.add(port)
                    return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # no room below the range: the kernel's pick
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ephemeral_low() -> int:
    """The first port the kernel hands out on its own (Linux's default where it cannot be read)."""
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def torchrun_args(nproc: int, port: int, max_restarts: int = 0, nnodes: int = 1, node_rank: int = 0) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        f"--nnodes={nnodes}",
        f"--node_rank={node_rank}",
        "--master_addr=127.0.0.1",
        f"--master_port={port}",
        f"--max-restarts={max_restarts}",
    ]


@dataclass
class Launch:
    """One implementation's run: one command per node (all nodes on this machine), its
    environment, run directory and log (node 0 logs to `log_path`, node n to `<side>.node<n>.log`)."""

    side: str
    commands: list[list[str]]
    env: dict
    run_dir: Path
    log_path: Path
    cwd: Path | None = None  # where the commands run (None: the checkout, REPO)
    processes: int = 1  # training processes it runs, all nodes together (how many cores it keeps busy)

    @property
    def command(self) -> list[str]:
        return self.commands[0]

    def log_for(self, node: int) -> Path:
        return self.log_path if node == 0 else self.log_path.with_name(f"{self.side}.node{node}.log")


def build_launch(
    side: str,
    config: str,
    nproc: int,
    overrides: list[str],
    out: Path,
    threads: int,
    lightning_launcher: str = "lightning",
    max_restarts: int = 0,
    nnodes: int = 1,
    extra_env: dict | None = None,
    run_dir: Path | None = None,
    mistake: str | None = None,
    name: str | None = None,
) -> Launch:
    """The command lines of one side ("raw", "lightning", "fabric" or "reference"). Several nodes
    always go through torchrun (Lightning then runs with num_nodes under it); the rendezvous stays
    on 127.0.0.1. `name` labels the run (its folder and log) when one side runs twice, e.g. "raw-fault"."""
    name = name or side
    side = side_parts(side)[0]  # `raw-fsdp` runs raw/train.py (its strategy flag is in `overrides`)
    run_dir, port = run_dir or out / name, free_port()
    common = [
        "--config",
        str(config),
        "--run_dir",
        str(run_dir),
        "--threads",
        str(threads),
        "--trainer.devices",
        str(nproc),
        "--trainer.num_nodes",
        str(nnodes),
        "--trainer.enable_progress_bar",
        "false",
        *overrides,
    ]
    if side == "raw" and mistake:  # the raw loop with one classic mistake (raw/mistakes.py)
        target = [str(REPO / "raw" / "mistakes.py"), mistake, *common]
    elif side == "raw":
        target = [str(REPO / RAW_SCRIPT), *common]
    elif side == "reference":  # raw/reference.py bends raw/train.py to train on the global batches
        target = [str(REPO / "raw" / "reference.py"), *common]
    else:
        target = [*LIGHTNING_MODULES[side], *common]
    if side == "reference":  # one plain process emulating nproc x nnodes ranks
        commands = [[sys.executable, *target]]
    elif side == "raw" or lightning_launcher == "torchrun" or nnodes > 1:
        commands = [[*torchrun_args(nproc, port, max_restarts, nnodes, node), *target] for node in range(nnodes)]
    else:
        commands = [[sys.executable, *target]]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        LIFELINE_ENV: "1",  # every process of the run dies with the harness, even on SIGKILL
        **(extra_env or {}),
    }
    env.pop("DDP_PARITY_RUN_DIR", None)
    processes = 1 if side == "reference" else nproc * nnodes
    return Launch(name, commands, env, run_dir, out / f"{name}.log", processes=processes)


def available_cores() -> int:
    """The cores this process may run on: its affinity mask (taskset, a container's cpuset), else all."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass
class Outcome:
    side: str
    returncode: int | None
    seconds: float
    timed_out: bool = False
    interrupted: bool = False
    errors: list = field(default_factory=list)  # error files the ranks wrote
    log_tail: str = ""
    stall: dict | None = None  # {"ranks": {rank: last step}, "phases": {rank: phase}, "seconds": s} when it hung

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.interrupted and not self.stall

    def describe(self) -> str:
        if self.stall:
            phases = self.stall.get("phases") or {}
            where = ", ".join(
                f"rank {r} after step {s}" + (f" in {phases[r]}" if phases.get(r) else "")
                for r, s in sorted(self.stall["ranks"].items())
            )
            quiet = self.stall["seconds"]
            return f"{self.side}: stalled (no rank made progress of any kind for {quiet:.0f} s: {where})"
        if self.timed_out:
            return f"{self.side}: timed out after {self.seconds:.0f} s"
        if self.interrupted:
            return f"{self.side}: interrupted"
        return f"{self.side}: exit code {self.returncode}"


def run_launch(
    launch: Launch, timeout: float, stall_seconds: float | None = None, progress=None, stall_auto: bool = False
) -> Outcome:
    """Run every node's command of one side to completion, timeout or stall."""
    return run_launches([launch], timeout, stall_seconds, progress, stall_auto)[0]


def watch(
    running,
    outcomes: dict,
    started: float,
    timeout: float,
    stall_seconds: float | None,
    progress=None,
    stall_auto: bool = False,
) -> None:
    """Wait for every side to end. A side none of whose ranks made progress of any kind (a step,
    a phase change, a validation batch, CPU time of the training thread) for the stall timeout is a
    stall: the classic DDP hang where a rank waits in a collective its peers never join. It is
    stopped at once, not at the run's timeout. `stall_auto`: the timeout adapts to the run (see
    liveness.Liveness); `stall_seconds` None and not auto: no stall detection."""
    pending = {launch.side: (launch, procs) for launch, procs, _ in running}
    liveness = {side: Liveness(stall_seconds, adaptive=stall_auto) for side in pending}
    while pending:
        now = time.monotonic()
        for side, (launch, procs) in list(pending.items()):
            outcome = outcomes[side]
            codes = [proc.poll() for proc in procs]
            beats = read_progress(launch.run_dir)
            if all(code is not None for code in codes):
                outcome.returncode = next((c for c in codes if c != 0), 0)
            elif any(code not in (None, 0) for code in codes) and len(procs) > 1:
                outcome.returncode = next(c for c in codes if c not in (None, 0))  # one node failed
            elif now - started > timeout:
                outcome.timed_out = True
            elif stall_seconds or stall_auto:
                outcome.stall = liveness[side].observe(beats, now)
            if progress is not None:
                progress.show_beats(side, beats, now - started, outcome)
            if outcome.returncode is not None or outcome.timed_out or outcome.stall:
                outcome.seconds = now - started
                for proc in procs:
                    kill_tree(proc.pid)
                del pending[side]
                if progress is not None:
                    progress.end(side, outcome)
        if pending:  # wait on a running process, at most POLL_S, then look again
            first = next(iter(pending.values()))[1]
            try:
                next(p for p in first if p.poll() is None).wait(timeout=POLL_S)
            except (subprocess.TimeoutExpired, StopIteration):
                pass


POLL_S = 0.2  # how often the watcher looks at the processes and heartbeats


def run_launches(
    launches: list[Launch],
    timeout: float,
    stall_seconds: float | None = None,
    progress=None,
    stall_auto: bool = False,
) -> list[Outcome]:
    """Run several sides at once (each with all its nodes); output goes to their log files.
    Whatever happens (timeout, failure, Ctrl-C, SIGTERM), every process tree is killed before
    returning; each process is started with a parent-death signal, so not even a SIGKILL of the
    harness leaves one running."""
    started = time.monotonic()
    running: list[tuple[Launch, list, list]] = []
    outcomes = {launch.side: Outcome(launch.side, None, 0.0) for launch in launches}
    interrupted = None
    try:
        for launch in launches:
            launch.log_path.parent.mkdir(parents=True, exist_ok=True)
            procs, logs = [], []
            running.append((launch, procs, logs))
            for node, command in enumerate(launch.commands):
                log = open(launch.log_for(node), "w")
                logs.append(log)
                log.write("$ " + " ".join(command) + "\n")
                log.flush()
                procs.append(
                    subprocess.Popen(
                        command,
                        env=launch.env,
                        cwd=launch.cwd or REPO,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                        preexec_fn=set_parent_death_signal,
                    )
                )
            if progress is not None:
                progress.start(launch.side)
        watch(running, outcomes, started, timeout, stall_seconds, progress, stall_auto)
    except KeyboardInterrupt as err:  # Ctrl-C, and SIGTERM/SIGHUP turned into it by the CLI
        interrupted = err
    finally:
        with signals_held():  # a second Ctrl-C or SIGTERM must not cut the clean-up short
            for _, procs, logs in running:
                for proc in procs:
                    kill_tree(proc.pid)
                    kill_group(proc.pid)  # orphans of a launcher that exited first (Lightning's own)
                    kill_session(proc.pid)  # and whatever they daemonised into groups of their own
                    proc.wait()
                for log in logs:
                    log.close()
    for launch in launches:
        outcome = outcomes[launch.side]
        outcome.interrupted = interrupted is not None
        if not outcome.ok:
            outcome.errors = read_error_files(launch.run_dir)
            outcome.log_tail = "\n".join(tail(launch.log_for(n), 60) for n in range(len(launch.commands)))
    if interrupted is not None:
        raise interrupted
    return [outcomes[launch.side] for launch in launches]


@contextlib.contextmanager
def signals_held():
    """Defer SIGINT, SIGTERM and SIGHUP while the block runs (main thread only); a signal that came
    meanwhile is raised afterwards by its own handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stop = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, stop)


def process_table() -> list[tuple[int, int, int]]:
    """(pid, parent pid, session id) of every process visible in /proc."""
    table = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # state, ppid, pgrp, session, ...
        table.append((int(entry.name), int(fields[1]), int(fields[3])))
    return table


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for child, ppid, _ in process_table():
        children.setdefault(ppid, []).append(child)
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


def kill_group(pgid: int) -> None:
    """SIGKILL what is left of a process group we started with start_new_session=True (its id is
    the leader's pid, never reused while a member lives): children orphaned by an exited launcher."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_session(sid: int) -> None:
    """SIGKILL every process still in the session a command was started in (start_new_session:
    its id is the command's pid, which stays reserved while any member lives): what the command
    daemonised by forking twice, into a process group of its own, is found here."""
    for _ in range(3):  # a member forking while it is killed: look again
        members = [pid for pid, _, session in process_table() if session == sid]
        if not members:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


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


def run_all(launches, at_once: bool, keep_going: bool, timeout, stall, adaptive, progress) -> list[Outcome]:
    """Every launch at once, or one after the other stopping at the first failure unless `keep_going`;
    the progress display closed however it ends, and each side's end printed."""
    try:
        if at_once:
            outcomes = run_launches(launches, timeout, stall, progress, adaptive)
        else:
            outcomes = []
            for launch in launches:
                outcomes.append(run_launch(launch, timeout, stall, progress, adaptive))
                if not outcomes[-1].ok and not keep_going:
                    break
    finally:
        if progress is not None:
            progress.close()
    for outcome in outcomes:
        print(f"[{outcome.side}] {'done' if outcome.ok else 'FAILED'} in {outcome.seconds:.1f} s", flush=True)
    return outcomes
