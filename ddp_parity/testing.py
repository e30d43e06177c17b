"""Parity as a test in your own suite: launch two training commands, compare their traces bitwise,
fail with the diagnosis.

    from ddp_parity.testing import assert_parity

    def test_migration_keeps_training_the_same(tmp_path):
        assert_parity(
            ["torchrun", "--nproc_per_node=2", "--master_port={port}", "train_raw.py", "--run_dir", "{run_dir}"],
            ["python", "train_lightning.py", "--run_dir", "{run_dir}", "--devices", "2"],
            workdir=tmp_path,
        )

Both commands must record a trace (TraceRecorder / TraceCallback) into the `{run_dir}` they are
given. With the pytest plugin (installed with the package) the `parity` fixture does the same
with the workdir taken from `tmp_path`. Outcomes follow compare/run.py's exit codes: equivalent
returns the report; different raises RunsDiffer (an AssertionError, code 1); bad arguments (a
command that cannot be started, a workdir that holds results or that another call is using) raise
ParityUsageError (a ValueError, code 2) before anything is launched or written; a run that
crashed, hung or timed out raises RunFailed (an AssertionError, code 3). Nothing else is raised.

The workdir is claimed for the call's life (two calls on one workdir: the second is refused), and
each command runs in a session of its own that is swept at the end, so even what a command
daemonised is gone when assert_parity returns or raises.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from ddp_parity.compare.findings import Finding, Report
from ddp_parity.compare.report import (
    PLOT_FILE,
    REPORT_FILE,
    format_summary,
    plot_loss_curves,
    strict_json,
    write_report,
)
from ddp_parity.distributed import WORKER_ENV_KEYS
from ddp_parity.harness.commands import processes_started
from ddp_parity.harness.exits import UsageError
from ddp_parity.harness.launch import Launch, Outcome, available_cores, free_port, run_launch, run_launches
from ddp_parity.harness.outdir import CLAIM_FILE, DirClaim
from ddp_parity.trace_files import TraceFormatError

EXIT_DIFFERENT, EXIT_USAGE, EXIT_FAILED = 1, 2, 3
DEFAULT_TIMEOUT_S = 900.0  # per command
DEFAULT_STALL_S = 300.0  # no rank moved for this long: a hang (generous: CI machines are loaded)
RUN_DIR, PORT = "{run_dir}", "{port}"
SIDES = ("a", "b")
# evidence keys the message shows elsewhere (the summary, the error lines)
NOT_EVIDENCE = ("sides", "verdict", "report_first_divergence", "steps_equal_before", "traceback")

# variables that would make a launched command think it is a worker of the job running the tests
SCRUBBED_ENV = (*WORKER_ENV_KEYS, "MASTER_PORT", "DDP_PARITY_RUN_DIR", "PL_GLOBAL_SEED")


class ParityUsageError(ValueError):
    """A bad argument to assert_parity; nothing was launched or written."""

    exit_code = EXIT_USAGE


class ParityFailure(AssertionError):
    """The two runs are not equivalent (a test failure). `.report` is report.json's dict."""

    exit_code = EXIT_DIFFERENT

    def __init__(self, message: str, report: dict):
        super().__init__(message)
        self.report = report


class RunsDiffer(ParityFailure):
    """Both runs finished and their traces differ."""


class RunFailed(ParityFailure):
    """A run crashed, stalled or timed out."""

    exit_code = EXIT_FAILED


# ---------------------------------------------------------------------------------------------
# the entry point


def assert_parity(
    cmd_a: Sequence[str],
    cmd_b: Sequence[str],
    *,
    workdir: str | os.PathLike,
    rtol: float = 0.0,
    atol: float = 0.0,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    stall_timeout: float | None = DEFAULT_STALL_S,
    parallel: bool | None = None,
    cwd: str | os.PathLike | None = None,
    ignore_config: Sequence[str] = (),
) -> dict:
    """Run both commands, compare their traces (bitwise unless rtol/atol say otherwise) and return
    the report (report.json's dict); raise RunsDiffer / RunFailed (AssertionErrors) otherwise.

    `{run_dir}` in a command becomes workdir/a or workdir/b, `{port}` a free port of 127.0.0.1
    (also exported as MASTER_ADDR=127.0.0.1 / MASTER_PORT). `env` is added to the environment of
    both. `parallel`: run both at once (default: when the machine has a core for every process).
    `cwd`: where the commands run (default: the current directory). `ignore_config`: config keys
    the diagnosis leaves out (run-control keys that differ on purpose). Every process either command
    started is gone when this returns or raises.
    """
    __tracebackhide__ = True  # pytest shows the caller's line and the message, not this function
    workdir = Path(workdir)
    check_arguments(cmd_a, cmd_b, workdir, rtol, atol, timeout, stall_timeout)
    check_startable(cmd_a, cmd_b, env, cwd)
    with claimed(workdir):
        check_no_results(workdir)  # again under the claim: another call may have written them since
        return run_and_judge(
            launches=[build_side(side, cmd, workdir, env, cwd) for side, cmd in zip(SIDES, (cmd_a, cmd_b))],
            workdir=workdir,
            criterion=(rtol, atol),
            limits=(timeout or DEFAULT_TIMEOUT_S, stall_timeout or None),
            parallel=parallel,
            ignore_config=ignore_config,
        )


def run_and_judge(launches: list[Launch], workdir: Path, criterion, limits, parallel, ignore_config) -> dict:
    """Run both, compare, write the report; return it when equivalent, else raise."""
    __tracebackhide__ = True
    (rtol, atol), (timeout, stall) = criterion, limits
    outcomes = start_both(launches, timeout, stall, parallel)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        report = failed_report(launches, outcomes, failed[0], rtol, atol)
        write_report(workdir, report)
        raise RunFailed(failure_message(report, workdir), strict_json(report.to_json()))
    try:
        report = compare_and_diagnose(launches[0].run_dir, launches[1].run_dir, rtol, atol, ignore_config)
    except TraceFormatError as err:  # a command that exited 0 without recording where it was told
        report = unreadable_report(launches, outcomes, err, rtol, atol)
        write_report(workdir, report)
        raise RunFailed(failure_message(report, workdir), strict_json(report.to_json())) from None
    report.sections["logs"] = {launch.side: str(launch.log_path) for launch in launches}
    report.sections["plot"] = str(plot_loss_curves(workdir, report.curves, labels=report.labels))
    write_report(workdir, report)
    if report.verdict != "equivalent":
        raise RunsDiffer(difference_message(report, workdir), strict_json(report.to_json()))
    return strict_json(report.to_json())


def compare_and_diagnose(run_a: Path, run_b: Path, rtol: float, atol: float, ignore_config=()) -> Report:
    """The report (diagnosis and warnings included), the loss curves with it."""
    from ddp_parity.compare.pipeline import compare_to_report  # the comparison imports torch: only when comparing
    from ddp_parity.compare.walk import Criterion

    return compare_to_report(run_a, run_b, Criterion(rtol, atol), ignore_config=tuple(ignore_config))


# ---------------------------------------------------------------------------------------------
# arguments and launches


def check_arguments(cmd_a, cmd_b, workdir: Path, rtol, atol, timeout, stall_timeout) -> None:
    for name, cmd in (("cmd_a", cmd_a), ("cmd_b", cmd_b)):
        if isinstance(cmd, (str, bytes)) or not cmd or not all(isinstance(arg, str) for arg in cmd):
            raise ParityUsageError(f"{name} must be a non-empty list of strings (no shell), got {cmd!r}")
        if not any(RUN_DIR in arg for arg in cmd):
            raise ParityUsageError(
                f"{name} must contain {RUN_DIR} where the run writes its trace (e.g. '--run_dir', '{RUN_DIR}')"
            )
    for name, value in (("rtol", rtol), ("atol", atol)):
        if not isinstance(value, (int, float)) or value < 0:
            raise ParityUsageError(f"{name} must be a number >= 0 (0: bitwise), got {value!r}")
    for name, value in (("timeout", timeout), ("stall_timeout", stall_timeout)):
        if value is not None and (not isinstance(value, (int, float)) or value <= 0):
            raise ParityUsageError(f"{name} must be a positive number of seconds or None, got {value!r}")
    check_not_in_use(workdir)
    check_no_results(workdir)


def check_not_in_use(workdir: Path) -> None:
    """A run still writing in the workdir is named as such, not by the results it wrote so far."""
    if (workdir / CLAIM_FILE).exists():
        with claimed(workdir):
            pass


def check_no_results(workdir: Path) -> None:
    held = [str(workdir / side) for side in SIDES if (workdir / side).exists() and any((workdir / side).iterdir())]
    held += [str(workdir / REPORT_FILE)] if (workdir / REPORT_FILE).exists() else []
    if held:
        raise ParityUsageError(f"workdir {workdir} already holds results ({', '.join(held)}); give a fresh directory")


def launch_env(env: Mapping | None, port: int) -> dict:
    """The environment of a command: ours without the variables of a job we may be part of."""
    full_env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV and not k.startswith("TORCHELASTIC_")}
    full_env.update({"PYTHONUNBUFFERED": "1", **(env or {}), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    return full_env


def check_startable(cmd_a, cmd_b, env, cwd) -> None:
    """Each command's program exists and may be run, from `cwd` with `env`'s PATH, and `cwd` is a
    folder: refused before anything is launched or written (not a FileNotFoundError from the launch)."""
    if env is not None and not (
        isinstance(env, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise ParityUsageError(f"env must be a mapping of strings to strings, got {env!r}")
    folder = Path(cwd or os.getcwd())
    if not folder.is_dir():
        raise ParityUsageError(f"cwd {cwd}: no such directory")
    for name, cmd in (("cmd_a", cmd_a), ("cmd_b", cmd_b)):
        program = cmd[0]
        if os.sep in program:
            path = folder / program
            found = path.is_file() and os.access(path, os.X_OK)
        else:
            found = shutil.which(program, path=launch_env(env, 0).get("PATH", os.defpath)) is not None
        if not found:
            where = f"in {folder}" if os.sep in program else "on PATH"
            raise ParityUsageError(f"{name}: cannot run {program!r}: no such executable {where}")


@contextlib.contextmanager
def claimed(workdir: Path):
    """The workdir, held by this call alone until it returns or raises."""
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ParityUsageError(f"workdir {workdir}: cannot create it ({err.strerror or err})") from None
    claim = DirClaim(workdir, "workdir")
    try:
        claim.acquire()
    except UsageError as err:
        raise ParityUsageError(str(err)) from None
    try:
        yield
    finally:
        claim.release()


def build_side(side: str, cmd: Sequence[str], workdir: Path, env: Mapping | None, cwd) -> Launch:
    """One command with its placeholders filled, its own port, and a clean environment."""
    run_dir, port = workdir / side, free_port()
    command = [arg.replace(RUN_DIR, str(run_dir)).replace(PORT, str(port)) for arg in cmd]
    log = workdir / f"{side}.log"
    return Launch(side, [command], launch_env(env, port), run_dir, log, cwd=Path(cwd or os.getcwd()))


def start_both(launches: list[Launch], timeout: float, stall, parallel) -> list[Outcome]:
    """run_both, with a command the system cannot start (e.g. a script without its #! line) a
    ParityUsageError like a missing one: every process is stopped and what they wrote removed."""
    try:
        return run_both(launches, timeout, stall, parallel)
    except OSError as err:
        for launch in launches:  # the workdir held no results when claimed: these are the failed start's
            shutil.rmtree(launch.run_dir, ignore_errors=True)
            for node in range(len(launch.commands)):
                launch.log_for(node).unlink(missing_ok=True)
        raise ParityUsageError(f"cannot start {err.filename or 'a command'}: {err.strerror or err}") from None


def run_both(launches: list[Launch], timeout: float, stall: float | None, parallel: bool | None) -> list[Outcome]:
    """Both at once when every process gets a core (the usual CI runner has 2-4: one after the
    other), else one after the other, stopping at the first failure."""
    if parallel is None:
        parallel = sum(processes_started(launch.command) for launch in launches) <= available_cores()
    if parallel:
        return run_launches(launches, timeout, stall)
    outcomes = []
    for launch in launches:
        outcomes.append(run_launch(launch, timeout, stall))
        if not outcomes[-1].ok:
            break
    return outcomes


# ---------------------------------------------------------------------------------------------
# reports and messages


def failed_report(launches: list[Launch], outcomes: list[Outcome], failed: Outcome, rtol, atol) -> Report:
    """report.json for a run that crashed, hung or timed out: the harness's own failed report."""
    from ddp_parity.harness.comparing import failed_report as build

    runs, criterion, extra = launched(launches, rtol, atol)
    return build(
        failed, outcomes, runs, criterion, not_run=[launch.side for launch in launches[len(outcomes) :]], **extra
    )


def unreadable_report(launches: list[Launch], outcomes: list[Outcome], err: Exception, rtol, atol) -> Report:
    """Both commands exited 0 but a trace cannot be read: the harness's report of it."""
    from ddp_parity.harness.comparing import unreadable_report as build

    runs, criterion, extra = launched(launches, rtol, atol)
    return build(
        err, outcomes, runs, criterion, f"did the command write its trace into the {RUN_DIR} it was given?", **extra
    )


def launched(launches: list[Launch], rtol, atol) -> tuple[dict, dict, dict]:
    """What a report of these launches says of them: their run folders, the criterion, logs and commands."""
    from ddp_parity.compare.comparator import Criterion

    runs = {launch.side: launch.run_dir for launch in launches}
    extra = {
        "logs": {launch.side: str(launch.log_path) for launch in launches},
        "commands": {launch.side: launch.command for launch in launches},
    }
    return runs, Criterion(rtol, atol).describe(), extra


def difference_message(report: Report, workdir: Path) -> str:
    return "\n".join(
        [
            "the two runs do not train the same",
            format_summary(report),
            describe_diagnosis(report.diagnosis),
            kept_paths(report, workdir),
        ]
    )


def failure_message(report: Report, workdir: Path) -> str:
    failure, sections = report.failure, report.sections
    rank = failure.get("rank")
    lines = [
        f"run {failure['side']} failed"
        + (f" on rank {rank}" if rank is not None else "")
        + f": {failure['summary'].removeprefix(failure['side'] + ': ')}"
        + (f" (run {', '.join(sections['not_run'])} was not started)" if sections.get("not_run") else ""),
        f"  command {failure['side']}: {' '.join(sections['commands'][failure['side']])}",
    ]
    lines += ["  " + line for line in failure.get("error_lines", [])]
    if report.diagnosis:
        lines.append(describe_diagnosis(report.diagnosis))
    lines.append(kept_paths(report, workdir))
    return "\n".join(lines)


def describe_diagnosis(d: Finding) -> str:
    """Category, step, rank, the evidence and the advice: enough to act on from a CI log."""
    where = [f"{name} {value}" for name, value in (("step", d.step), ("rank", d.rank)) if value is not None]
    if d.step is None and d.category == "config":  # found in what the runs were given
        where.append("before any step")
    lines = [f"diagnosis: {d.category} ({', '.join(where)})" if where else f"diagnosis: {d.category}"]
    if d.explanation:
        lines.append(f"  why: {d.explanation}")
    evidence = {k: v for k, v in d.evidence.items() if k not in NOT_EVIDENCE}
    if evidence:
        text = json.dumps(evidence, default=str, sort_keys=True)
        lines.append(f"  evidence: {text[:1500]}{' ...' if len(text) > 1500 else ''}")
    if d.module:
        lines.append(f"  module: {json.dumps(d.module, default=str, sort_keys=True)}")
    if d.advice:
        lines.append(f"  fix: {d.advice}")
    return "\n".join(lines)


def kept_paths(report: Report, workdir: Path) -> str:
    """Where the evidence stays; a run that was never started is said so, not listed as kept."""
    plot = workdir / PLOT_FILE
    lines = ["kept for inspection:"]
    for side, run_dir in report.runs.items():
        lines.append(f"  run {side}:  {run_dir}" + ("" if Path(run_dir).exists() else " (not started)"))
    lines.append(f"  report: {workdir / REPORT_FILE}")
    if plot.exists():
        lines.append(f"  plot:   {plot}")
    logs = [log for log in report.sections.get("logs", {}).values() if Path(log).exists()]
    lines.append(f"  logs:   {', '.join(logs)}")
    return "\n".join(lines)
