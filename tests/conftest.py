"""Shared helpers for the end-to-end tests: real processes, real torchrun, real Lightning, gloo on CPU.

Every launch runs from the repository root in a session of its own (start_new_session=True), on a
free port of 127.0.0.1, with OMP_NUM_THREADS=1, and is waited for with a timeout; whatever is left
of its process group afterwards (a timeout, a failure, a worker that outlived its launcher) is
killed with os.killpg. No sleeps, no killing by name.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ddp_parity.compare.story import STORY_CHECK_ENV
from ddp_parity.harness.launch import free_port, kill_tree
from ddp_parity.hooks import recording_env
from ddp_parity.testing import SCRUBBED_ENV
from ddp_parity.trace import FINAL_PARAMS_FILE, read_records

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = REPO / "configs" / "default.yaml"
PYTHON = sys.executable
TORCHRUN = str(Path(sys.executable).parent / "torchrun")

# One training run of this suite takes seconds; a launch that has not ended after this long hangs.
RUN_TIMEOUT_S = float(os.environ.get("DDP_PARITY_TEST_TIMEOUT", "150"))

# Variables that would make a child think it is a worker of some other job (the list assert_parity
# scrubs), or fire a fault, or die with a harness that is not its parent.
_SCRUBBED_ENV = (
    *SCRUBBED_ENV,
    "DDP_PARITY_FAULT",
    "DDP_PARITY_FAULT_MARKER",
    "DDP_PARITY_DIE_WITH_PARENT",
    "PL_TRAINER_GPUS",
)


# every diagnosis built while the suite runs, in this process or any it launches, is checked for one
# consistent story (ddp_parity.compare.story); a broken one is logged here and fails the session
STORY_LOG = Path(tempfile.gettempdir()) / f"ddp-parity-story-{os.getpid()}.jsonl"
os.environ.setdefault(STORY_CHECK_ENV, str(STORY_LOG))


@pytest.fixture(scope="session", autouse=True)
def every_story_is_consistent():
    """After the session's last test (on each pytest-xdist worker too): any diagnosis with a broken story
    fails the run, listed."""
    yield
    log = Path(os.environ[STORY_CHECK_ENV])
    broken = log.read_text().splitlines() if log.exists() else []
    if log == STORY_LOG:
        log.unlink(missing_ok=True)
    if broken:
        pytest.fail(f"{len(broken)} diagnosis(es) with an inconsistent story:\n" + "\n".join(broken), pytrace=False)


def child_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV and not k.startswith("TORCHELASTIC_")}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    for key, value in (extra or {}).items():  # None: the key left out, whatever this process's environment holds
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # nothing of the group is left


def run_cmd(
    cmd: Sequence[str], env: dict | None = None, timeout: float = RUN_TIMEOUT_S, log: Path | None = None
) -> subprocess.CompletedProcess:
    """Run `cmd` from the repository root in a new session; always reap its whole process group.

    `log`: a file to append the command and its full output to (failures quote only part of it).
    """
    cmd = [str(c) for c in cmd]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=child_env(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_tree(proc.pid)  # before reaping it: torchrun starts its workers in sessions of their own
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
    finally:
        # a worker that outlived its launcher (or the launcher itself on an exception) dies here
        _kill_group(proc.pid)
    result = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    result.log = log
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as f:
            f.write(
                f"$ {' '.join(cmd)}\n# exit code {proc.returncode}{' (timed out)' if timed_out else ''}\n"
                f"--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n"
            )
    if timed_out:
        pytest.fail(f"timed out after {timeout:.0f}s (process group killed)\n{describe(result)}", pytrace=False)
    return result


def _clip(text: str, head: int, tail: int) -> str:
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n[... {len(text) - head - tail} characters left out ...]\n{text[-tail:]}"


def describe(result: subprocess.CompletedProcess) -> str:
    log = getattr(result, "log", None)
    return (
        f"command: {' '.join(result.args)}\nexit code: {result.returncode}\n"
        + (f"full output: {log}\n" if log else "")
        + f"--- stdout ---\n{_clip(result.stdout, 2000, 3000)}\n--- stderr ---\n{_clip(result.stderr, 6000, 6000)}"
    )


def check_ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, describe(result)
    return result


def _log_path(tmp_path: Path, run_dir: Path) -> Path:
    """Beside the run directory, never inside it (some tests check that it was not created)."""
    return Path(tmp_path) / f"{Path(run_dir).name}.log"


def _torchrun_prefix(nproc: int) -> list[str]:
    return [
        TORCHRUN,
        "--nnodes=1",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "--max-restarts=0",
    ]


def run_raw(
    tmp_path: Path,
    nproc: int | None,
    *overrides: str,
    run_dir: Path | None = None,
    config: Path | None = DEFAULT_CONFIG,
    env: dict | None = None,
    timeout: float = RUN_TIMEOUT_S,
) -> subprocess.CompletedProcess:
    """raw/train.py: `nproc=None` is one plain `python raw/train.py`, otherwise torchrun with nproc workers.

    The run directory is `run_dir` (default: tmp_path / "raw"); `config=None` leaves `--config`
    out. Overrides come last, so they win over the config file.
    """
    run_dir = Path(run_dir if run_dir is not None else Path(tmp_path) / "raw")
    prefix = [PYTHON] if nproc is None else _torchrun_prefix(nproc)
    args = ["raw/train.py"]
    if config is not None:
        args += ["--config", str(config)]
    args += ["--run_dir", str(run_dir), "--trainer.enable_progress_bar", "false", *overrides]
    return run_cmd(prefix + args, env=env, timeout=timeout, log=_log_path(tmp_path, run_dir))


def run_lightning(
    tmp_path: Path,
    *overrides: str,
    run_dir: Path | None = None,
    launcher: str = "lightning",
    nproc: int = 2,
    config: Path | None = DEFAULT_CONFIG,
    subcommand: str = "fit",
    env: dict | None = None,
    timeout: float = RUN_TIMEOUT_S,
) -> subprocess.CompletedProcess:
    """`python -m lightning_impl fit` under Lightning's own launcher (the config's devices), or under
    `torchrun --nproc_per_node=nproc -m lightning_impl fit`."""
    run_dir = Path(run_dir if run_dir is not None else Path(tmp_path) / "lightning")
    args = ["-m", "lightning_impl", subcommand]
    if config is not None:
        args += ["--config", str(config)]
    args += ["--run_dir", str(run_dir), "--trainer.enable_progress_bar", "false", *overrides]
    env = dict(env or {})
    log = _log_path(tmp_path, run_dir)
    if launcher == "lightning":
        env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
        return run_cmd([PYTHON, *args], env=env, timeout=timeout, log=log)
    if launcher == "torchrun":
        return run_cmd(_torchrun_prefix(nproc) + args, env=env, timeout=timeout, log=log)
    raise ValueError(f"launcher must be 'lightning' or 'torchrun', got {launcher!r}")


# ---------------------------------------------------------------------------------------------
# reading runs


def final_params(run_dir: Path) -> dict[str, torch.Tensor]:
    path = Path(run_dir) / FINAL_PARAMS_FILE
    assert path.is_file(), f"{path} is missing"
    return load_file(str(path))


def strip_prefix(params: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    assert all(k.startswith(prefix) for k in params), sorted(params)
    return {k[len(prefix) :]: v for k, v in params.items()}


def assert_params_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    """Bitwise: same keys, same dtypes and shapes, torch.equal on every tensor."""
    assert sorted(a) == sorted(b), f"keys differ: {sorted(a)} vs {sorted(b)}"
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        assert torch.equal(a[key], b[key]), f"{key} differs (max |diff| {(a[key] - b[key]).abs().max().item()})"


def losses(run_dir: Path, rank: int = 0) -> list[float]:
    return [r["loss"] for r in read_records(run_dir, rank)]


def steps(run_dir: Path, rank: int = 0) -> list[int]:
    return [r["step"] for r in read_records(run_dir, rank)]


# ---------------------------------------------------------------------------------------------
# runs shared by several tests (each made once per session, read-only afterwards)


def made_once_per_session(tmp_path_factory, name: str, make) -> Path:
    """A folder `make(folder)` fills once per test session, however many pytest-xdist workers ask for it
    (the README's slow tier runs one worker per core, each file on one worker): the first to ask makes
    it under a lock in the session's temporary root, the others wait for it and read the same folder."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when the process dies
        if not done.exists():
            folder.mkdir(exist_ok=True)
            make(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def default_harness_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`python compare/run.py` exactly as the README's main command runs it (the default config: 3 epochs,
    2 processes a side), once per session: (its --out folder, the finished process). Its raw and
    lightning run directories are the suite's reference runs of the two twins; read them, never edit
    them (copy first)."""

    def run(folder: Path) -> None:
        result = run_harness("--out", str(folder / "out"))
        (folder / "result.json").write_text(json.dumps([result.args, result.returncode, result.stdout, result.stderr]))

    folder = made_once_per_session(tmp_path_factory, "default-harness-run", run)
    args, returncode, stdout, stderr = json.loads((folder / "result.json").read_text())
    return folder / "out", subprocess.CompletedProcess(args, returncode, stdout, stderr)


@pytest.fixture(scope="session")
def raw_default_run(default_harness_run) -> Path:
    """torchrun --nproc_per_node=2 raw/train.py on the default config (3 epochs), as the harness launched it."""
    return default_harness_run[0] / "raw"


@pytest.fixture(scope="session")
def lightning_default_run(default_harness_run) -> Path:
    """python -m lightning_impl fit (Lightning's own launcher, devices=2) on the default config (3 epochs)."""
    return default_harness_run[0] / "lightning"


HOOKS_PROGRAMS = REPO / "tests" / "hooks_programs"


def recorded_once(tmp_path_factory, side: str, program: str, *args: str, ranks: int = 2):
    """tests/hooks_programs/`program` under torchrun with `ranks` ranks, recorded by the hooks as `side`, once
    per session for every file that reads the same run (a program's arguments naming a folder get one of
    the run's own: `{out}` in `args` is replaced by a fresh folder beside the run): (the run directory,
    the finished process's stdout). Read it, never edit it (copy first)."""
    key = "-".join(["recorded", side, Path(program).stem, *args]).replace("/", "_").replace("{out}", "out")

    def make(folder: Path) -> None:
        (folder / "out").mkdir(exist_ok=True)
        argv = [str(folder / "out") if a == "{out}" else a for a in args]
        cmd = [*_torchrun_prefix(ranks), HOOKS_PROGRAMS / program, *argv]
        result = check_ok(run_cmd(cmd, env=recording_env(folder / side, side, child_env())))
        (folder / "stdout.txt").write_text(result.stdout)

    folder = made_once_per_session(tmp_path_factory, key, make)
    return folder / side, (folder / "stdout.txt").read_text()


@pytest.fixture(scope="session")
def recorded_scheduler_slip(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """`compare/run.py record` (a process: `ddp-parity record`) of tests/hooks_programs/raw_loop.py under torchrun,
    its scheduler stepped before the optimizer, once per session: test_record_cli reads what the command said,
    test_hooks the slip its hooks recorded (the default watched steps, as test_hooks records its loop). (the
    finished record process, RUN)"""

    def make(folder: Path) -> None:
        loop = [
            *_torchrun_prefix(2),
            HOOKS_PROGRAMS / "raw_loop.py",
            "--save",
            folder / "w.pt",
            "--slip",
            "scheduler_first",
        ]
        record = [PYTHON, REPO / "compare" / "run.py", "record", "--out", folder / "scheduler_first", "--", *loop]
        result = run_cmd(record, env={"DDP_PARITY_WATCH_STEP": None})
        (folder / "result.json").write_text(json.dumps([result.args, result.returncode, result.stdout, result.stderr]))

    folder = made_once_per_session(tmp_path_factory, "recorded-scheduler-slip", make)
    args, returncode, stdout, stderr = json.loads((folder / "result.json").read_text())
    return subprocess.CompletedProcess(args, returncode, stdout, stderr), folder / "scheduler_first"


# the harness's small run: 1 epoch of 2 steps per rank, Lightning named first (the order of --sides is
# the order of the report: tests/test_harness_sides.py)
SMALL_HARNESS_RUN = ("--sides", "lightning,raw", "--set", "trainer.max_epochs=1", "--set", "data.num_samples=128")


@pytest.fixture(scope="session")
def harness_run_at_once(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`compare/run.py --parallel` (both sides at once) on the small run, once per session whichever file
    asks first (the order of sides, the overlap of sides): (its --out folder, the finished process)."""

    def run(folder: Path) -> None:
        result = run_harness("--out", str(folder / "out"), "--parallel", *SMALL_HARNESS_RUN, timeout=400)
        (folder / "result.json").write_text(json.dumps([result.args, result.returncode, result.stdout, result.stderr]))

    folder = made_once_per_session(tmp_path_factory, "harness-run-at-once", run)
    args, returncode, stdout, stderr = json.loads((folder / "result.json").read_text())
    assert returncode == 0, stdout[-3000:] + stderr[-2000:]
    return folder / "out", subprocess.CompletedProcess(args, returncode, stdout, stderr)


# the per-step fields two runs must agree on exactly (everything but wall time)
PARITY_KEYS = ("step", "epoch", "loss", "lr", "grad_norm", "indices")


def assert_traces_equal(a: Path, b: Path, ranks: Sequence[int] = (0, 1), keys: Sequence[str] = PARITY_KEYS) -> None:
    """Every rank's step records agree field by field, with exact (==) float equality."""
    for rank in ranks:
        ra, rb = read_records(a, rank), read_records(b, rank)
        assert len(ra) == len(rb), f"rank {rank}: {len(ra)} steps in {a}, {len(rb)} in {b}"
        assert ra, f"rank {rank}: no steps recorded"
        for x, y in zip(ra, rb):
            for key in keys:
                assert key in x and key in y, f"rank {rank} step {x.get('step')}: `{key}` missing"
                assert x[key] == y[key], f"rank {rank} step {x['step']} `{key}`: {x[key]!r} ({a}) != {y[key]!r} ({b})"


def run_harness(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python compare/run.py ARGS` in a session of its own; its whole process tree is killed after."""
    proc = subprocess.Popen(
        [PYTHON, "compare/run.py", *args],
        cwd=REPO,
        env=child_env(env),
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        kill_tree(proc.pid)  # before reaping: nothing the harness started may outlive a test
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def main_in_process(main, *args) -> tuple[int, str, str]:
    """An entry point's `main(argv)` called in this process: (exit code, stdout, stderr). A SystemExit
    (argparse's own errors, a CLI that exits) is its code; a main that returns None exited 0."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args]) or 0
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


def harness_in_process(*args) -> tuple[int, str, str]:
    """`compare/run.py ARGS` called in this process: the checks before any launch, and --traces (which
    launches nothing)."""
    from ddp_parity.harness.cli import main

    return main_in_process(main, *args)


def lightning_in_process(*args, main=None) -> tuple[int, str, str]:
    """`python -m lightning_impl ARGS` called in this process, for inputs refused before anything starts
    (a process each would cost a Lightning import). Whatever the CLI sets on its way (the environment,
    e.g. PL_GLOBAL_SEED, and the global RNGs) is put back, so nothing leaks into the runs this worker
    launches next. `main`: the entry point called (the CLI itself by default)."""
    from lightning_impl.cli import cli_main

    env, argv = dict(os.environ), sys.argv
    sys.argv = ["lightning_impl"]  # pytest's own arguments are not the CLI's (LightningCLI warns of both)
    try:
        with torch.random.fork_rng():
            return main_in_process(main or cli_main, *args)
    finally:
        sys.argv = argv
        os.environ.clear()
        os.environ.update(env)


def module_from_file(name: str, path: Path):
    """A script (not in a package) imported as module `name`, registered in sys.modules (dataclasses
    resolve their annotations through it)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def assert_one_line_error(code: int, stderr: str, *words: str) -> None:
    """Exit 2 and exactly one line saying what is wrong, naming every word given."""
    assert code == 2, stderr
    lines = [line for line in stderr.strip().splitlines() if "error" in line]
    assert len(lines) == 1, stderr
    for word in words:
        assert word in lines[0], lines[0]
