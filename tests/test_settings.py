"""Parity across the settings real training uses, exact distributed validation, and the reference
mode that measures the tutorial's claim (DDP over N ranks ~ one process on N x B)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import run_harness
from safetensors.torch import load_file

from ddp_parity.config import parse_raw_config
from ddp_parity.data import build_datasets
from ddp_parity.model import build_net
from ddp_parity.validation import ValidationMetrics

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def harness(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return run_harness(*args, timeout=timeout)


# Rows run elsewhere in the suite, at a size that proves more: fp32 at world 2 is the README's main
# run (test_compare.py), world-4 the raw-vs-Lightning pair of the reference test below.
MATRIX_ROWS_ELSEWHERE = ("fp32", "world-4", "fsdp", "ddp-vs-fsdp", "fsdp-crash-resume")  # FSDP2: test_fsdp.py
# Four FSDP2 ranks a side on two cores cost more than the suite's budget allows: `python compare/run.py
# --matrix configs/matrix.yaml` runs it (docs/fsdp.md has its figures).
MATRIX_ROWS_NOT_IN_SUITE = ("fsdp-world-4",)
# The other rows, several settings to a run where they do not touch the same keys: each setting still
# trains end to end on both sides and must be bitwise, in a third of the launches.
# A row's world (nproc, nnodes) applies to its whole run: two-nodes is a world of 2 like the other DDP
# runs, world-1 takes the settings that mean the same at any world size.
MATRIX_RUNS = {
    ".".join(rows): rows
    for rows in [
        ("accumulate-3", "clip-norm", "lr-per-step", "drop-last-uneven"),
        ("two-nodes", "bf16-mixed", "workers-2", "keep-last-uneven"),
        ("world-1", "dropout", "lr-per-epoch"),
        ("fsdp-bf16-policy", "fsdp-accumulate-3", "fsdp-clip-norm"),
    ]
}


SIZE_KEYS = {"data.num_samples", "data.val_samples", "trainer.max_epochs"}


def combined_matrix(entries: list[dict]) -> list[dict]:
    """MATRIX_RUNS's entries: each the union of its rows' settings. Rows of one run never set one key twice,
    but for the size keys every row sets (the later row's size wins: 515 samples for the uneven rows)."""
    by_name = {e["name"]: e for e in entries}
    combined = []
    for name, rows in MATRIX_RUNS.items():
        entry = {"name": name, "set": {}}
        for row in rows:
            clash = {k for k, v in by_name[row]["set"].items() if entry["set"].get(k, v) != v} - SIZE_KEYS
            assert not clash, (name, row, clash)
            entry["set"].update(by_name[row]["set"])
            entry.update({k: v for k, v in by_name[row].items() if k not in ("name", "set")})
        combined.append(entry)
    return combined


def test_every_cpu_row_of_the_matrix_is_bitwise_equal(tmp_path):
    """configs/matrix.yaml: dropout, precision, accumulation with a leftover, clipping, schedules per step and
    per epoch, drop_last on uneven data, world 1/2/4, two nodes and DataLoader workers; each at its smallest size."""
    import yaml

    entries = yaml.safe_load((REPO / "configs" / "matrix.yaml").read_text())
    covered = {row for rows in MATRIX_RUNS.values() for row in rows}
    every_row = covered | set(MATRIX_ROWS_ELSEWHERE) | set(MATRIX_ROWS_NOT_IN_SUITE)
    assert {e["name"] for e in entries} == every_row  # a new row is placed in a run, or said to run elsewhere
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(yaml.safe_dump(combined_matrix(entries)))
    out = tmp_path / "matrix"
    result = harness("--matrix", str(matrix), "--parallel", "--out", str(out))
    rows = json.loads((out / "matrix.json").read_text())["rows"]
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert len(rows) == len(MATRIX_RUNS) and all(r["verdict"] == "equivalent" for r in rows), rows
    for name in (r["name"] for r in rows):
        report = json.loads((out / name / "report.json").read_text())
        assert report["losses"]["max_abs"] == 0.0 and report["params"]["max_abs"] == 0.0
        assert (
            report["validation"]["compared"] > 0 and report["validation"]["equal"] == report["validation"]["compared"]
        )
    runs = {run["name"].split(".")[0]: run for run in rows}  # each matrix run by its first row
    accumulate = json.loads((out / runs["accumulate-3"]["name"] / "report.json").read_text())
    assert accumulate["steps"]["steps_a"]["0"] == 2 * 3  # 8 micro-batches per epoch: 2 full steps + a leftover
    assert runs["two-nodes"]["world_size"] == 2 and runs["world-1"]["world_size"] == 1


def logits_as_the_ranks_batched_them(net, val_set, batch_size: int, world: int) -> torch.Tensor:
    """Every validation sample's logits computed in the batch it had on its rank (rank r: samples
    r, r + world, ..., in loader batches): a row's rounding may depend on its batch's shape."""
    logits = torch.empty(len(val_set), net(val_set.x[:1]).shape[1])
    for rank in range(world):
        shard = list(range(rank, len(val_set), world))
        for start in range(0, len(shard), batch_size):
            rows = shard[start : start + batch_size]
            logits[rows] = net(val_set.x[rows])
    return logits


@pytest.mark.float_sensitive
def test_validation_counts_every_sample_once_and_matches_one_process(default_harness_run):
    """301 validation samples over 2 ranks: DistributedSampler would pad to 302. The synced count is
    the set size, and the figures are those of every sample seen once. How far a one-process
    evaluation (one batch of 301) may be from them is computed here, never picked: each sample's loss
    may round differently in another batch shape, by an amount read from the two evaluations."""
    out = default_harness_run[0]
    cfg = parse_raw_config(["--config", str(REPO / "configs/default.yaml")])
    _, val_set = build_datasets(cfg.data)
    for side in ("raw", "lightning"):
        last = [json.loads(line) for line in (out / side / "validation.jsonl").read_text().splitlines()][-1]
        assert last["val_count"] == 301
        net = build_net(cfg.model)
        params = load_file(out / side / "final.safetensors")
        net.load_state_dict({k.removeprefix("net.") if side == "lightning" else k: v for k, v in params.items()})
        with torch.no_grad():
            ranked = logits_as_the_ranks_batched_them(net, val_set, cfg.data.batch_size, 2)
            alone = net(val_set.x)
        per_sample = torch.nn.functional.cross_entropy(ranked, val_set.y, reduction="none").double()
        n, total = len(per_sample), float(per_sample.abs().sum())
        # the metric sums each batch in float32 (in whatever order the CPU's kernel takes) and the batch
        # sums in float64: the recursive-summation bound, (batch - 1) ulps of float32 per term, holds for
        # any order; n ulps of float64 for the rest
        rounding = ((cfg.data.batch_size - 1) * 2.0**-24 * 1.01 + n * 2.0**-53) * total / n
        assert abs(last["val_loss"] - math.fsum(per_sample.tolist()) / n) <= rounding
        assert last["val_acc"] == (ranked.argmax(1) == val_set.y).float().mean().item()

        metrics = ValidationMetrics(cfg.model.num_classes)
        metrics.update(alone, val_set.y)
        single = metrics.compute()
        assert single["val_count"] == 301
        # the one batch of 301: its own float32 sum, and each loss as that batch shape rounded it
        single_rounding = (n - 1) * 2.0**-24 * 1.01 * total / n
        moved = float((torch.nn.functional.cross_entropy(alone, val_set.y, reduction="none") - per_sample).abs().max())
        assert abs(last["val_loss"] - single["val_loss"]) <= moved + rounding + single_rounding
        if torch.equal(ranked.argmax(1), alone.argmax(1)):  # no near-tie flipped by another batch shape
            assert last["val_acc"] == single["val_acc"]


@pytest.mark.float_sensitive
def test_reference_mode_measures_ddp_against_one_process(tmp_path):
    """World 4 against one process on the same global batches: the same samples every step, and
    differences at float32 roundoff (measured: 1 ulp of the loss, 3e-8 in parameters)."""
    out = tmp_path / "ref"
    result = harness(
        "--out",
        str(out),
        "--reference",
        "--parallel",
        "--nproc",
        "4",
        "--set",
        "trainer.max_epochs=2",
        "--set",
        "data.num_samples=512",
        "--set",
        "data.val_samples=101",
    )
    assert result.returncode == 0, result.stdout[-3000:]
    report = json.loads((out / "report.json").read_text())
    # the matrix's world-4 row: raw and Lightning bitwise equal at world size 4
    assert report["verdict"] == "equivalent" and report["world_size"] == 4
    assert report["losses"]["max_abs"] == 0.0 and report["params"]["max_abs"] == 0.0
    ref = report["reference"]
    for side in ("raw", "lightning"):
        against = ref["against"][side]
        samples = against["per_step"]["samples"]
        assert samples["compared"] == 8 and samples["equal"] == 8  # 512 / (4 x 32) = 4 steps x 2 epochs
        assert against["per_step"]["loss"]["max_rel"] <= 1e-6
        assert against["params"]["max_abs"] <= 1e-6
        assert against["validation"]["max_rel"] <= 1e-6


@pytest.mark.float_sensitive
def test_reference_at_world_2_is_bitwise(tmp_path):
    """With two ranks DDP's average (g0 + g1) / 2 is the reference's gradient 0.5 g0 + 0.5 g1 to the bit
    on any IEEE-754 machine: each g_r is the same computation on the same 32 rows, scaling by a power of
    two is exact, and a sum of two terms is the same in either order (at world 4 it is not: see above)."""
    ddp, ref = tmp_path / "ddp", tmp_path / "reference"
    from ddp_parity.compare.comparator import Criterion, compare_to_reference
    from ddp_parity.harness.launch import build_launch, run_launches

    launches = [
        build_launch(
            side,
            str(REPO / "configs/default.yaml"),
            2,
            ["--trainer.max_epochs", "1", "--data.num_samples", "512"],
            tmp_path,
            1,
            run_dir=path,
        )
        for side, path in (("raw", ddp), ("reference", ref))
    ]
    assert all(o.ok for o in run_launches(launches, timeout=180))
    report = compare_to_reference(ddp, ref, Criterion()).to_dict()
    assert report["per_step"]["loss"]["max_abs"] == 0.0 and report["params"]["max_abs"] == 0.0
    assert report["per_step"]["samples"]["equal"] == 8


def test_fp16_with_grad_scaler_runs_on_cpu_and_the_harness_refuses_to_compare_it(tmp_path):
    """fp16 AMP is the CUDA path; on CPU the raw loop still runs it (GradScaler state in the
    checkpoint), while Lightning would silently switch to bf16, so the harness refuses the pair."""
    run = tmp_path / "fp16"
    proc = subprocess.run(
        [
            sys.executable,
            "raw/train.py",
            "--config",
            "configs/default.yaml",
            "--run_dir",
            str(run),
            "--trainer.precision",
            "16-mixed",
            "--trainer.max_epochs",
            "1",
            "--data.num_samples",
            "256",
            "--trainer.enable_progress_bar",
            "false",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    ckpt = torch.load(next((run / "checkpoints").glob("step-*.pt")), weights_only=True)
    assert ckpt["scaler"]["scale"] > 1 and ckpt["scaler"]["_growth_tracker"] == 8  # 256 samples / 32: 8 unskipped steps
    refused = harness("--out", str(tmp_path / "pair"), "--set", "trainer.precision=16-mixed", timeout=60)
    assert refused.returncode == 2 and "bf16-mixed" in refused.stderr
