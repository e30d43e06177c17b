"""The catalogue of classic DDP mistakes: for each, the harness exits non-zero and names the right
first-divergence step and cause category. Small runs: 256 samples, 2 ranks, 4 steps per epoch."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import DEFAULT_CONFIG, final_params, harness_in_process, run_harness, strip_prefix
from test_fsdp import FSDP_MISTAKES  # the FSDP2 slips: run against a clean sharded run there

from ddp_parity import compare_traces
from ddp_parity.harness.launch import build_launch, run_launch
from ddp_parity.trace import read_records, read_validation

pytestmark = pytest.mark.slow

# name -> (exit code, category, step, rank); None: not step-specific
EXPECTED = {
    "no-set-epoch": (1, "set_epoch", 5, 0),  # epoch 1's first step replays epoch 0
    "sampler-seed": (1, "sampler_seed", 1, 0),
    "unseeded-init": (1, "init", None, None),
    "thread-mismatch": (1, "config", None, None),  # when the thread counts change the bits: see its own test
    "no-loss-scaling-for-accumulation": (1, "gradients", 1, 0),
    "uneven-shards": (3, "stall", 5, 0),  # rank 0 has 5 batches, rank 1 has 4
}
# mistakes that show only on a crashed-and-resumed run (--fault): their own test below
FAULT_MISTAKES = ["resume-off-by-one"]


def run_mistake(name: str, out: Path, *extra: str, stall_timeout: str = "8") -> subprocess.CompletedProcess:
    return run_harness(
        "--mistake",
        name,
        *extra,
        "--out",
        str(out),
        "--parallel",
        "--stall-timeout",
        stall_timeout,
        "--set",
        "data.num_samples=256",
        "--set",
        "trainer.max_epochs=2",
        timeout=240,
    )


# Mistakes that change no config key: their Lightning side is one and the same clean run, so it is
# launched once (below) and each raw side is compared with it by the harness's own --traces path.
# The other mistakes run end to end through `compare/run.py --mistake`.
SHARED_LIGHTNING = ("no-set-epoch", "sampler-seed", "unseeded-init")
SMALL = ["--data.num_samples", "256", "--trainer.max_epochs", "2"]


def launch_side(side: str, out: Path, mistake: str | None = None) -> Path:
    """One side launched exactly as the harness launches it (2 ranks, 1 thread, the small run)."""
    launch = build_launch(side, DEFAULT_CONFIG, 2, SMALL, out, 1, mistake=mistake)
    outcome = run_launch(launch, timeout=180, stall_seconds=60)
    assert outcome.ok, outcome.describe() + "\n" + outcome.log_tail
    return launch.run_dir


@pytest.fixture(scope="module")
def clean_lightning(tmp_path_factory) -> Path:
    return launch_side("lightning", tmp_path_factory.mktemp("clean"))


def assert_named(name: str, code: int, stdout: str, report: dict) -> None:
    expected_code, category, step, rank = EXPECTED[name]
    assert code == expected_code, stdout[-3000:]
    diagnosis = report["diagnosis"]
    assert diagnosis["category"] == category, diagnosis
    if step is not None:
        assert (diagnosis["step"], diagnosis["rank"]) == (step, rank), diagnosis
    assert diagnosis["advice"] and f"diagnosis: {category}" in stdout


@pytest.mark.parametrize("name", SHARED_LIGHTNING)
def test_each_mistake_against_the_shared_clean_side_is_named(name, clean_lightning, tmp_path):
    raw = launch_side("raw", tmp_path, mistake=name)
    code, stdout, stderr = harness_in_process("--traces", raw, clean_lightning, "--out", tmp_path / "out")
    assert_named(name, code, stdout + stderr, json.loads((tmp_path / "out" / "report.json").read_text()))
    if name == "unseeded-init":  # DDP's broadcast: the replicas of the mistaken run still agree with each other
        meta = json.loads((raw / "meta.json").read_text())
        assert meta["replicas_identical"] is True
        assert meta["ranks"][0]["init_params_sha256"] != meta["ranks"][1]["init_params_sha256"]


@pytest.mark.parametrize(
    "name", [name for name in EXPECTED if name != "thread-mismatch" and name not in SHARED_LIGHTNING]
)
def test_each_mistake_is_named(name, tmp_path):
    result = run_mistake(name, tmp_path / name)
    report = json.loads((tmp_path / name / "report.json").read_text())
    assert_named(name, result.returncode, result.stdout + result.stderr[-2000:], report)
    if name == "uneven-shards":  # stopped by the stall watcher, not by the run's timeout
        assert "stalled" in report["failure"]["summary"] and "timed out" not in report["failure"]["summary"]


def numbers_part(a: Path, b: Path, keys=("param_digest",)) -> bool:
    """Whether two runs' recorded numbers differ in any bit: the per-step `keys` on every rank (what the
    training produced; with "loss" and "grad_norm", what it measured too), the final parameters, and with
    the loss the validation (read here, independently of the comparison under test)."""
    for rank in (0, 1):
        for ra, rb in zip(read_records(a, rank), read_records(b, rank), strict=True):
            if any(ra.get(k) != rb.get(k) for k in keys):
                return True
    if "loss" in keys and [v["val_loss"] for v in read_validation(a)] != [v["val_loss"] for v in read_validation(b)]:
        return True
    pa, pb = final_params(a), strip_prefix(final_params(b), "net.")
    return not all(torch.equal(pa[k], pb[k]) for k in pa)


@pytest.mark.float_sensitive
def test_a_thread_count_other_than_the_configs_is_named_and_is_noise(tmp_path):
    """The raw processes run 2 threads where the config says 1. Whether that changes the bits depends on the
    CPU and its kernels (a reduction split over two threads may or may not round apart): the test reads
    it from the runs. One harness run under --tolerance noise, read twice. Exactly (the comparison
    again, in this process): apart, different with the config difference named as the cause; alike,
    equivalent with the thread difference a warning. Against the noise the three controls measure
    (the Lightning side again, raw carrying the mistake): equivalent either way, exit 0, the thread
    difference said beside the verdict, never a silent pass."""
    out = tmp_path / "thread-mismatch"
    result = run_mistake("thread-mismatch", out, "--tolerance", "noise")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    meta = json.loads((out / "raw" / "meta.json").read_text())
    assert [r["threads"] for r in meta["ranks"]] == [2, 2], meta["ranks"]  # the mistake was made
    # ATen's scalar kernels are the third control, unless this process already runs them
    scalar_already = os.environ.get("ATEN_CPU_CAPABILITY", "").lower() == "default"
    third = "lightning-control-ulp-c" if scalar_already else "lightning-control-aten-default"
    names = [Path(c).name for c in report["noise"]["controls"]]
    assert names == ["lightning-control-ulp-a", "lightning-control-ulp-b", third]
    assert 'id="noise-plot"' in (out / "report.html").read_text()
    exact = compare_traces(out / "raw", out / "lightning", labels=("raw", "lightning"))
    if numbers_part(out / "raw", out / "lightning"):
        assert exact["verdict"] == "different" and exact["diagnosis"]["category"] == "config", exact["diagnosis"]
        assert any(d.endswith("].threads: 2 vs 1") for d in exact["diagnosis"]["evidence"]["differences"])
        assert report["verdict"] == "equivalent_within_noise", report["noise"]["departure"]
        assert report["diagnosis"]["category"] == "noise" and "EQUIVALENT WITHIN NOISE" in result.stdout
    elif numbers_part(out / "raw", out / "lightning", keys=("loss", "grad_norm", "param_digest")):
        # the training alike, a measured figure apart (a loss reduced over two threads): a recording note
        assert exact["verdict"] == "equivalent" and exact["diagnosis"]["kind"] == "recording.measured", exact
        assert report["verdict"] in ("equivalent", "equivalent_within_noise"), report["diagnosis"]
    else:
        assert exact["verdict"] == report["verdict"] == "equivalent"
    assert any("].threads: 2 vs 1" in w["message"] for w in report["warnings"]), report["warnings"]


def test_an_off_by_one_resume_is_named_on_the_restarted_run(tmp_path):
    """Rank 1 killed after step 6 (epoch 1); the checkpoint of epoch 0's end (step 4) is resumed at
    epoch 0's first batch, so steps 5..8 train epoch 0 again. The uninterrupted runs agree; the
    restarted raw run is named `resume` against both its own uninterrupted run and Lightning's restart."""
    out = tmp_path / "resume-off-by-one"
    result = run_mistake("resume-off-by-one", out, "--fault", "1:6", stall_timeout="60")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "equivalent", report["diagnosis"]  # raw vs lightning, neither restarted
    fault = report["fault"]
    assert fault["fired"] == {"raw": True, "lightning": True}
    assert fault["pairs"]["lightning vs lightning-fault"]["verdict"] == "equivalent"
    for pair in ("raw vs raw-fault", "raw-fault vs lightning-fault"):
        d = fault["pairs"][pair]["diagnosis"]
        assert (d["category"], d["step"], d["rank"]) == ("resume", 5, 0), (pair, d)
        assert (d["evidence"]["resumed_from_step"], d["evidence"]["matches_step"]) == (4, 1), (pair, d)
        assert "trains epoch 0 again" in d["explanation"] and "epochs *done*" in d["advice"], (pair, d)
    assert "diagnosis: resume at step 5 rank 0" in result.stdout


def test_a_mistake_that_needs_a_restart_without_fault_is_bad_usage(tmp_path):
    # compare/run.py's main in this process: refused before anything is launched (the harness runs as a process in
    # the slow tier's mistakes above)
    code, _, stderr = harness_in_process("--mistake", "resume-off-by-one", "--out", tmp_path / "out")
    assert code == 2 and "add --fault RANK:STEP" in stderr, stderr
    assert not (tmp_path / "out").exists()


def test_the_catalogue_lists_itself():
    code, stdout, _ = harness_in_process("--mistake", "list")  # in this process: it launches nothing
    assert code == 0
    listed = sorted(line.split()[0] for line in stdout.strip().splitlines())
    assert listed == sorted([*EXPECTED, *FAULT_MISTAKES, *FSDP_MISTAKES])
