"""Fault tolerance you can check: crash a rank at a step, let torchrun restart it, and end bit for
bit where an uninterrupted run ends; and every bad input gets one clear line and exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import harness_in_process, run_harness

from ddp_parity.compare.comparator import compare_runs
from ddp_parity.faults import FAULT_ENV, MARKER_ENV
from ddp_parity.harness.launch import build_launch, run_launch
from ddp_parity.trace import read_meta

REPO = Path(__file__).resolve().parents[1]
CONFIG = str(REPO / "configs" / "default.yaml")
# 512 samples, 2 ranks, batch 32: 8 steps per epoch, 2 epochs; a checkpoint every 3 steps and at epoch ends
SMALL = ["--data.num_samples", "512", "--trainer.max_epochs", "2", "--checkpoint.every_n_train_steps", "3"]


def train_raw(out: Path, name: str, fault: str | None = None, overrides=SMALL):
    env = {FAULT_ENV: fault, MARKER_ENV: str(out / f"{name}.marker")} if fault else None
    launch = build_launch(
        "raw", CONFIG, 2, list(overrides), out, 1, max_restarts=1 if fault else 0, name=name, extra_env=env
    )
    outcome = run_launch(launch, timeout=180)
    assert outcome.ok, outcome.describe() + "\n" + outcome.log_tail
    return launch.run_dir


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    return train_raw(tmp_path_factory.mktemp("faults"), "uninterrupted")


@pytest.mark.slow
@pytest.mark.parametrize(
    "fault, resumed_from",
    [
        ("1:1", None),  # the very first step: no checkpoint yet, the restart starts over
        # the epoch's last step, killed while writing its epoch-end checkpoint: the half-written file is
        # ignored, the older step checkpoint is the newest complete one, and the run resumes mid-epoch with
        # exactly the batches that were left (a kill before the write is the same resume without the file)
        ("0:8:checkpoint", "step-00000006.pt"),
        ("1:11:raise", "step-00000009.pt"),  # an exception instead of SIGKILL, in the second epoch
    ],
)
def test_raw_crash_and_restart_ends_bitwise_equal(uninterrupted, tmp_path, fault, resumed_from):
    run = train_raw(tmp_path, "faulty", fault)
    assert (tmp_path / "faulty.marker").exists(), "the fault never fired"
    meta = read_meta(run)
    assert (Path(meta["resumed_from"]).name if meta["resumed_from"] else None) == resumed_from
    report = compare_runs(uninterrupted, run).to_dict()
    assert report["verdict"] == "equivalent", report["first_divergence"] or report["problems"]
    assert report["losses"]["compared"] == 2 * 16 and report["params"]["max_abs"] == 0.0
    assert not list((run / "checkpoints").glob(".*.tmp")) or fault.endswith("checkpoint")


# The harness's --fault on both sides (mid-epoch, resumed from a step checkpoint and last.ckpt, every pair
# bitwise): tests/test_lightning.py's mid-epoch resume with DataLoader workers, the harder case of it.


# ---------------------------------------------------------------------------------------------
# bad input: one line naming the problem, exit code 2, nothing already written lost


def raw(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "raw/train.py", "--config", CONFIG, "--trainer.enable_progress_bar", "false", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line_error(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.strip().splitlines() if "error" in line]
    assert len(lines) == 1, result.stderr[-2000:]
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("trained") / "run"
    assert raw("--run_dir", str(run), "--data.num_samples", "64", "--trainer.max_epochs", "1").returncode == 0
    return run


@pytest.mark.slow
def test_world_size_larger_than_the_dataset(tmp_path):
    launch = build_launch("raw", CONFIG, 2, ["--data.num_samples", "1"], tmp_path, 1)
    outcome = run_launch(launch, timeout=120)
    assert outcome.returncode != 0 and "data.num_samples` (1) must be at least the world size (2)" in outcome.log_tail


def copy_run(trained: Path, tmp_path: Path) -> Path:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    return run


@pytest.mark.slow
def test_truncated_checkpoint_is_refused_and_kept(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    ckpt = next((run / "checkpoints").glob("step-*.pt"))
    ckpt.write_bytes(ckpt.read_bytes()[:1000])
    before = ckpt.read_bytes()
    one_line_error(raw("--run_dir", str(run), "--data.num_samples", "64", "--resume"), "cannot be loaded", ckpt.name)
    assert ckpt.read_bytes() == before


@pytest.mark.slow
def test_checkpoint_of_another_model_shape_is_refused(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    one_line_error(
        raw("--run_dir", str(run), "--data.num_samples", "64", "--model.hidden_dim", "32", "--resume"),
        "cannot be loaded",
        "size mismatch",
    )


class Payload:
    """A pickled object whose loading would run code (it would create a file)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


@pytest.mark.slow
def test_checkpoint_with_pickled_objects_is_refused_not_executed(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    ckpt = next((run / "checkpoints").glob("step-*.pt"))
    payload = torch.load(ckpt, weights_only=True)
    witness = tmp_path / "code-ran"
    payload["model"]["evil"] = Payload(witness)
    torch.save(payload, ckpt)
    one_line_error(
        raw("--run_dir", str(run), "--data.num_samples", "64", "--resume"), "cannot be loaded", "weights_only"
    )
    assert not witness.exists()


@pytest.mark.slow
def test_traces_of_another_format_version_or_cut_off_are_named(trained, tmp_path):
    run_b = copy_run(trained, tmp_path)

    def compare():  # compare/run.py --traces, its main in this process (it launches nothing)
        return harness_in_process("--traces", trained, run_b, "--out", tmp_path / "cmp")

    trace = run_b / "trace" / "rank0.jsonl"
    trace.write_text(trace.read_text()[:-15])
    code, _, stderr = compare()
    assert code == 2 and "rank0.jsonl, line 2: cut off" in stderr
    meta = json.loads((run_b / "meta.json").read_text())
    (run_b / "meta.json").write_text(json.dumps({**meta, "format_version": 7}))
    code, _, stderr = compare()
    assert code == 2 and "format_version 7 is not supported" in stderr


@pytest.mark.slow
def test_traces_of_different_configs_say_what_differs(trained, tmp_path):
    other = tmp_path / "other"
    assert (
        raw(
            "--run_dir", str(other), "--data.num_samples", "64", "--trainer.max_epochs", "1", "--model.lr", "0.002"
        ).returncode
        == 0
    )
    code, _, _ = harness_in_process("--traces", trained, other, "--out", tmp_path / "cmp")  # launches nothing
    assert code == 1
    diagnosis = json.loads((tmp_path / "cmp" / "report.json").read_text())["diagnosis"]
    assert diagnosis["category"] == "config"
    assert any("model.lr" in item for item in json.dumps(diagnosis["evidence"]).split('"')), diagnosis["evidence"]


def lightning(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "lightning_impl", "fit", "--config", CONFIG, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_lightning_bad_value_is_one_line_and_exit_2(tmp_path):
    one_line_error(lightning("--run_dir", str(tmp_path / "r"), "--data.batch_size", "-3"), "data.batch_size")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_lightning_port_in_use_is_named_before_anything_starts(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = lightning("--run_dir", str(tmp_path / "r"), env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    one_line_error(result, f"MASTER_PORT {port}", "already in use")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_lightning_refuses_a_run_dir_that_holds_a_run(trained):
    before = (trained / "meta.json").read_bytes()
    one_line_error(lightning("--run_dir", str(trained)), "already holds a run")
    assert (trained / "meta.json").read_bytes() == before


@pytest.mark.slow
def test_a_fault_that_never_fires_is_a_failure_not_a_pass(tmp_path):
    """A checkpoint-write fault at a step that writes no checkpoint crashes nothing: exit 3, said. One
    process a side: whether a fault fired is read per run, whatever the world size."""
    out = tmp_path / "out"
    proc = run_harness(
        *("--fault", "0:1:checkpoint", "--out", str(out), "--parallel", "--nproc", "1"),
        *("--set", "data.num_samples=128", "--set", "trainer.max_epochs=1"),
    )
    assert proc.returncode == 3, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "crashed: NO" in proc.stdout and "never fired" in proc.stdout
    fault = json.loads((out / "report.json").read_text())["fault"]
    assert fault["fired"] == {"raw": False, "lightning": False}
