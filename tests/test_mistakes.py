"""The catalogue of classic DDP mistakes: for each, the harness exits non-zero and names the right
first-divergence step and cause category. Small runs: 256 samples, 2 ranks, 4 steps per epoch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_harness

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# name -> (exit code, category, step, rank); None: not step-specific
EXPECTED = {
    "no-set-epoch": (1, "set_epoch", 5, 0),  # epoch 1's first step replays epoch 0
    "sampler-seed": (1, "sampler_seed", 1, 0),
    "unseeded-init": (1, "init", None, None),
    "thread-mismatch": (1, "config", None, None),
    "no-loss-scaling-for-accumulation": (1, "gradients", 1, 0),
    "uneven-shards": (3, "stall", 5, 0),  # rank 0 has 5 batches, rank 1 has 4
}


def run_mistake(name: str, out: Path) -> subprocess.CompletedProcess:
    return run_harness(
        "--mistake",
        name,
        "--out",
        str(out),
        "--parallel",
        "--stall-timeout",
        "8",
        "--set",
        "data.num_samples=256",
        "--set",
        "trainer.max_epochs=2",
        timeout=240,
    )


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_mistake_is_named(name, tmp_path):
    code, category, step, rank = EXPECTED[name]
    result = run_mistake(name, tmp_path / name)
    assert result.returncode == code, result.stdout[-3000:] + result.stderr[-2000:]
    report = json.loads((tmp_path / name / "report.json").read_text())
    diagnosis = report["diagnosis"]
    assert diagnosis["category"] == category, diagnosis
    if step is not None:
        assert (diagnosis["step"], diagnosis["rank"]) == (step, rank), diagnosis
    assert diagnosis["advice"] and f"diagnosis: {category}" in result.stdout
    if name == "uneven-shards":  # stopped by the stall watcher, not by the run's timeout
        assert "stalled" in report["failure"]["summary"] and "timed out" not in report["failure"]["summary"]
    if name == "unseeded-init":  # DDP's broadcast: the replicas of the mistaken run still agree with each other
        meta = json.loads((tmp_path / name / "raw" / "meta.json").read_text())
        assert meta["replicas_identical"] is True
        assert meta["ranks"][0]["init_params_sha256"] != meta["ranks"][1]["init_params_sha256"]


def test_the_catalogue_lists_itself():
    result = subprocess.run(
        [sys.executable, "compare/run.py", "--mistake", "list"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert sorted(line.split()[0] for line in result.stdout.strip().splitlines()) == sorted(EXPECTED)
