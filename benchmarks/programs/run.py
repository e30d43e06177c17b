"""Launch one program's raw loop (torchrun, 2 ranks) and its Lightning port (the Trainer's own launcher), then
compare their traces with `compare/run.py --traces`: the same commands a user types, on free ports of 127.0.0.1,
with the thread count set explicitly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ddp_parity import compare_traces
from ddp_parity.harness.launch import free_port, torchrun_args
from ddp_parity.hooks import recording_env

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parents[1]  # the checkout these programs are in, wherever this is run from
NPROC = 2
THREADS = "1"  # per rank: both sides the same, set before either imports torch
TIMEOUT_S = 300


@dataclass(frozen=True)
class Program:
    name: str
    folder: str  # under benchmarks/programs/
    raw: list[str]  # the loop's script and its arguments; {out} is the side's output directory
    port: list[str]  # the Lightning port's script and arguments
    style: str  # what the loop does that the tutorial's does not
    source: str  # repository, path, license
    prepare: Callable[[Path], object] | None = None  # writes the data files the program reads, under its cwd
    ignore_config: tuple[str, ...] = ()  # config keys that name the side's own output place
    trace: str = "trace"  # the run directory under {out}
    # "explicit": the program records itself (its `# parity` lines, TraceCallback); "hooks": no line records, each
    # side runs with the recording switched on as `ddp-parity record` does (its run directory: {out}/trace)
    recording: str = "explicit"
    # how the raw loop starts its ranks: "torchrun" (2 ranks), or "python" (the script spawns its own processes,
    # reading MASTER_PORT)
    raw_launch: str = "torchrun"
    # False: scored and rescored by hand (`python -m benchmarks.programs --only NAME`, rescore.py), not run by the test
    # suite, whose time budget each pair run costs about a minute of
    suite: bool = True

    def command(self, args: list[str], out: Path) -> list[str]:
        return [str(HERE / self.folder / args[0])] + [a.replace("{out}", str(out)) for a in args[1:]]


@dataclass
class PairResult:
    program: Program
    rc: int
    verdict: str
    diagnosis: dict = field(default_factory=dict)
    seconds: float = 0.0
    failed: str | None = None  # which side did not finish, and where its log is


def side_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS=THREADS, MKL_NUM_THREADS=THREADS, PYTHONUNBUFFERED="1", **extra)
    return env


def run_side(command: list[str], env: dict, cwd: Path, log: Path) -> int:
    """The side's exit status; past TIMEOUT_S its whole process group is killed (torchrun's ranks, Lightning's
    children) and 124 returned."""
    with open(log, "w") as out:
        proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return 124


def recorded(program: Program, env: dict, work: Path, side: str) -> dict:
    """The side's environment, with the recording switched on where the program does not record itself."""
    if program.recording != "hooks":
        return env
    return recording_env(work / side / program.trace, side, env)


def run_raw(program: Program, work: Path) -> int:
    if program.raw_launch == "torchrun":
        command = torchrun_args(NPROC, free_port()) + program.command(program.raw, work / "raw")
        env = side_env()
    else:
        command = [sys.executable] + program.command(program.raw, work / "raw")
        env = side_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    return run_side(command, recorded(program, env, work, "raw"), work, work / "raw.log")


def run_port(program: Program, work: Path) -> int:
    command = [sys.executable] + program.command(program.port, work / "lightning")
    env = side_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    return run_side(command, recorded(program, env, work, "lightning"), work, work / "lightning.log")


def compare(program: Program, work: Path, runs: list[Path] | None = None) -> tuple[int, str, dict]:
    """compare/run.py --traces over the pair's two runs (work/raw/TRACE and work/lightning/TRACE, or `runs`)."""
    out = work / "compare"
    ignore = [a for key in program.ignore_config for a in ("--ignore-config", key)]
    traces = [str(run) for run in runs or [work / side / program.trace for side in ("raw", "lightning")]]
    harness = [sys.executable, str(CHECKOUT / "compare" / "run.py")]
    command = [*harness, "--traces", *traces, "--out", str(out), "--overwrite", *ignore]
    proc = subprocess.run(command, cwd=CHECKOUT, env=side_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    (work / "compare.log").write_text(proc.stdout + proc.stderr)
    verdict = next((line for line in proc.stdout.splitlines() if line.startswith("verdict:")), proc.stderr.strip())
    report = out / "report.json"
    diagnosis = json.loads(report.read_text()).get("diagnosis", {}) if report.exists() else {}
    return proc.returncode, verdict, diagnosis


def compare_cli_here(program: Program, work: Path, runs: list[Path] | None = None) -> tuple[int, str, dict]:
    """`compare` with compare/run.py's own main called in this process, the same arguments, exit code, verdict
    line and report.json (the tests' way: --traces launches nothing, and an interpreter costs seconds of CPU)."""
    import contextlib
    import io

    from ddp_parity.harness.cli import main

    out = work / "compare"
    ignore = [a for key in program.ignore_config for a in ("--ignore-config", key)]
    traces = [str(run) for run in runs or [work / side / program.trace for side in ("raw", "lightning")]]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(["--traces", *traces, "--out", str(out), "--overwrite", *ignore]) or 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    (work / "compare.log").write_text(stdout.getvalue() + stderr.getvalue())
    verdict = next((line for line in stdout.getvalue().splitlines() if line.startswith("verdict:")), stderr.getvalue())
    report = out / "report.json"
    diagnosis = json.loads(report.read_text()).get("diagnosis", {}) if report.exists() else {}
    return code, verdict.strip(), diagnosis


def compare_here(program: Program, work: Path) -> tuple[int, str, dict]:
    """The same comparison through the public API, in this process (no interpreter to start: the tests' way)."""
    traces = [work / side / program.trace for side in ("raw", "lightning")]
    report = compare_traces(*traces, ignore_config=program.ignore_config)
    return (0 if report["verdict"] == "equivalent" else 1), f"verdict: {report['verdict']}", report["diagnosis"]


def run_pair(program: Program, work: Path, in_process: bool = False) -> PairResult:
    """Raw, then the port, then the comparison (compare/run.py, or `compare_traces` here with in_process); a side
    that fails is reported with its log, not compared."""
    started = time.perf_counter()
    work.mkdir(parents=True)  # a new folder: a snapshot left by an earlier run would be resumed
    if program.prepare is not None:
        program.prepare(work)
    for side, launch in (("raw", run_raw), ("lightning", run_port)):
        if (rc := launch(program, work)) != 0:
            failed = f"{side} exited {rc}; log: {work / (side + '.log')}"
            return PairResult(program, 3, "FAILED", seconds=time.perf_counter() - started, failed=failed)
    rc, verdict, diagnosis = (compare_here if in_process else compare)(program, work)
    return PairResult(program, rc, verdict, diagnosis, time.perf_counter() - started)
