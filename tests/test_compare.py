"""The harness end to end: `python compare/run.py` launching real torchrun and Lightning runs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import harness_in_process, run_harness

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def harness(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_harness(*args, env=env, timeout=timeout)


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (a test's own output folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(f"{entry.name}: {cmdline}")
    return found


def report(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def test_default_run_is_bitwise_equivalent(default_harness_run):
    out, result = default_harness_run  # the README's main command, exactly
    assert result.returncode == 0, result.stdout + result.stderr
    rep = report(out)
    assert rep["verdict"] == "equivalent" and rep["criterion"] == "exact"
    assert rep["losses"]["compared"] == 2 * 3 * 32 == rep["losses"]["equal"]
    assert rep["losses"]["max_abs"] == 0.0
    assert rep["params"]["compared"] == 4 == rep["params"]["equal"]
    assert rep["validation"]["compared"] == rep["validation"]["equal"] == 9
    assert rep["timing"]["raw_median_ms"] > 0 and rep["timing"]["lightning_median_ms"] > 0
    assert "verdict: EQUIVALENT" in result.stdout and "final params" in result.stdout
    assert rep["diagnosis"]["category"] == "equivalent"
    png = (out / "loss_curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    assert matplotlib.image.imread(out / "loss_curves.png").shape[0] > 100
    assert (out / "raw.log").stat().st_size > 0 and (out / "lightning.log").stat().st_size > 0
    assert processes_mentioning(str(out)) == []


def test_a_one_sided_learning_rate_is_caught_at_step_1(tmp_path):
    out = tmp_path / "out"
    # one process a side: --set-raw reaches the raw side's command whatever its world size
    small = ("--nproc", "1", "--set", "trainer.max_epochs=1", "--set", "data.num_samples=128")
    result = harness("--out", str(out), "--parallel", *small, "--set-raw", "model.lr=0.002")
    assert result.returncode == 1, result.stdout + result.stderr
    first = report(out)["first_divergence"]
    assert (first["step"], first["quantity"], first["a"], first["b"]) == (1, "lr", 0.002, 0.001)
    assert "verdict: DIFFERENT" in result.stdout


def test_saved_runs_compare_with_traces_and_edits_are_found(default_harness_run, tmp_path):
    raw, lightning = tmp_path / "raw", tmp_path / "lightning"  # copies: the shared runs stay as they were
    shutil.copytree(default_harness_run[0] / "raw", raw)
    shutil.copytree(default_harness_run[0] / "lightning", lightning)
    # --traces in this process (as a process: the installed `ddp-parity --traces`, test_installed.py)
    code, _, _ = harness_in_process("--traces", raw, lightning, "--out", tmp_path / "again")
    assert code == 0 and report(tmp_path / "again")["verdict"] == "equivalent"

    # edit one loss in the Lightning trace: step 3 on rank 1
    trace = lightning / "trace" / "rank1.jsonl"
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    records[2]["loss"] += 1e-3
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    # the samples and every parameter digest still equal: the training is the same, only a recorded loss
    # differs (issue 46: the verdict comes from the training), said as a recording note of step 3 rank 1
    code, _, _ = harness_in_process("--traces", raw, lightning, "--out", tmp_path / "edited")
    edited = report(tmp_path / "edited")
    assert code == 0 and edited["verdict"] == "equivalent"
    note = edited["diagnosis"]["evidence"]["measured"][0]
    assert (edited["diagnosis"]["kind"], note["quantity"], note["step"], note["rank"]) == (
        "recording.measured",
        "loss",
        3,
        1,
    )

    # drop the last two steps of rank 0: a step-count mismatch, said plainly
    trace0 = lightning / "trace" / "rank0.jsonl"
    trace0.write_text("".join(line + "\n" for line in trace0.read_text().splitlines()[:-2]))
    code, stdout, _ = harness_in_process("--traces", raw, lightning, "--out", tmp_path / "short")
    assert code == 1
    assert "rank 0: 96 steps" in stdout and "but 94" in stdout


def test_a_rank_that_crashes_gives_exit_3_with_its_error(tmp_path):
    out = tmp_path / "out"
    result = harness(
        "--out",
        str(out),
        "--set",
        "trainer.max_epochs=1",
        env={"DDP_PARITY_FAULT": "1:3:raise", "DDP_PARITY_FAULT_MARKER": str(tmp_path / "fired")},
    )
    assert result.returncode == 3, result.stdout + result.stderr
    rep = report(out)
    assert rep["verdict"] == "failed"
    assert rep["failure"]["side"] == "raw" and rep["failure"]["rank"] == 1
    assert "InjectedFault" in result.stdout and "rank 1 raises after step 3" in result.stdout
    assert processes_mentioning(str(out)) == []


def test_bad_input_through_the_real_entry_point_exits_2_before_launching_anything(tmp_path):
    """`python compare/run.py` as a process: one line on stderr, exit 2, nothing written (every other
    refusal is checked in process by tests/test_harness_input.py, through the same main())."""
    out = tmp_path / "out"
    result = harness("--out", str(out), "--set", "data.bogus=1", timeout=60)
    assert result.returncode == 2
    assert "data.bogus" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_an_output_directory_with_results_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text('{"keep": true}')
    result = harness("--out", str(out), timeout=60)
    assert result.returncode == 2 and "--overwrite" in result.stderr
    assert (out / "report.json").read_text() == '{"keep": true}'
