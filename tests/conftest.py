"""Shared helpers for the end-to-end tests: real processes, real torchrun, real Lightning, gloo on CPU.

Every launch runs from the repository root in a session of its own (start_new_session=True), on a
free port of 127.0.0.1, with OMP_NUM_THREADS=1, and is waited for with a timeout; whatever is left
of its process group afterwards (a timeout, a failure, a worker that outlived its launcher) is
killed with os.killpg. No sleeps, no killing by name.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ddp_parity.harness.launch import kill_tree
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


# Runs shared between test files (session fixtures): the tests that read one share one xdist group.
SHARED_RUNS = ("default_harness_run", "raw_default_run", "lightning_default_run")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`-n 2 --dist loadgroup`, the README's slow tier) each file's tests stay on one
    worker, so its module-scoped runs are made once; the tests that read the README's main run join it
    on one worker. Two workers on two cores overlap one test's start-up with another's training."""
    for item in items:
        shared = any(name in item.fixturenames for name in SHARED_RUNS)
        item.add_marker(pytest.mark.xdist_group("default_harness_run" if shared else item.nodeid.split("::")[0]))


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV and not k.startswith("TORCHELASTIC_")}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
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


@pytest.fixture(scope="session")
def default_harness_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`python compare/run.py` exactly as the README's main command runs it (the default config: 3 epochs,
    2 processes a side), once per session: (its --out folder, the finished process). Its raw and
    lightning run directories are the suite's reference runs of the two twins; read them, never edit
    them (copy first)."""
    out = tmp_path_factory.mktemp("default") / "out"
    result = run_harness("--out", str(out))
    return out, result


@pytest.fixture(scope="session")
def raw_default_run(default_harness_run) -> Path:
    """torchrun --nproc_per_node=2 raw/train.py on the default config (3 epochs), as the harness launched it."""
    return default_harness_run[0] / "raw"


@pytest.fixture(scope="session")
def lightning_default_run(default_harness_run) -> Path:
    """python -m lightning_impl fit (Lightning's own launcher, devices=2) on the default config (3 epochs)."""
    return default_harness_run[0] / "lightning"


# the harness's small run: 1 epoch of 8 steps per rank
SMALL_HARNESS_RUN = ("--set", "trainer.max_epochs=1", "--set", "data.num_samples=512")


@pytest.fixture(scope="session")
def harness_run_at_once(tmp_path_factory) -> Path:
    """`compare/run.py --parallel` (both sides at once) on the small config: its --out folder."""
    out = tmp_path_factory.mktemp("harness_at_once") / "out"
    result = run_harness("--out", str(out), "--parallel", *SMALL_HARNESS_RUN)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


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


def harness_in_process(*args: str) -> tuple[int, str, str]:
    """`compare/run.py ARGS` called in this process (no launch can happen before the checks it
    exercises): (exit code, stdout, stderr). argparse's own errors come back as exit code 2 too."""
    import contextlib
    import io

    from ddp_parity.harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


def assert_one_line_error(code: int, stderr: str, *words: str) -> None:
    """Exit 2 and exactly one line saying what is wrong, naming every word given."""
    assert code == 2, stderr
    lines = [line for line in stderr.strip().splitlines() if "error" in line]
    assert len(lines) == 1, stderr
    for word in words:
        assert word in lines[0], lines[0]
