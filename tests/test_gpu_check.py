"""scripts/gpu_check.sh --dry-run: every step of the GPU check walked on CPU/gloo with tiny sizes, so the
script cannot arrive at a lent GPU broken. Each check must pass, or be skipped with the reason (what
only CUDA can do); the summary lists every check walked. Two checks are the code of another with other
arguments (bf16 is fp32's parity check, the Lightning-vs-raw benchmark the recording one's): they are
left out of the walk, and that they share that code is checked, not assumed."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import REPO, child_env, module_from_file

from ddp_parity.harness.launch import kill_tree

pytestmark = pytest.mark.slow

EVERY_CHECK = [
    "environment",
    "raw_on_device",
    "resume_bitwise",
    "parity_fp32",
    "parity_bf16",
    "parity_fp16",
    "world2_one_device",
    "mistake",
    "bench_lightning_vs_raw",
    "bench_recording",
]
SAME_CODE_AS = {"parity_bf16": "parity_fp32", "bench_lightning_vs_raw": "bench_recording"}
EXPECTED_CHECKS = [name for name in EVERY_CHECK if name not in SAME_CODE_AS]


def gpu_check_module():
    return module_from_file("gpu_check", REPO / "scripts" / "gpu_check.py")


def test_the_checks_left_out_of_the_dry_run_are_the_code_of_one_walked():
    checks = dict(gpu_check_module().CHECKS)
    assert list(checks) == EVERY_CHECK
    for left_out, walked in SAME_CODE_AS.items():
        assert checks[left_out].__code__ is checks[walked].__code__, (left_out, walked)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check") / "out"
    proc = subprocess.Popen(
        [str(REPO / "scripts" / "gpu_check.sh"), "--dry-run", "--only", ",".join(EXPECTED_CHECKS), str(out)],
        cwd=REPO,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=1500)
    finally:
        kill_tree(proc.pid)
    return proc.returncode, output, out


def test_dry_run_walks_every_check_and_passes(dry_run):
    code, output, out = dry_run
    summary_path = out / "summary.json"
    assert summary_path.is_file(), f"no summary.json (exit {code}):\n{output[-4000:]}"
    summary = json.loads(summary_path.read_text())
    checks = {c["name"]: c for c in summary["checks"]}
    assert list(checks) == EXPECTED_CHECKS
    for name, check in checks.items():
        assert check["status"] in ("pass", "skip"), f"{name}: {check['status']}: {check['line']}\n{output[-4000:]}"
        assert check["line"].strip(), f"{name}: no one-line verdict"
        if check["status"] == "skip":
            assert "CUDA" in check["line"] or "CPU" in check["line"], f"{name}: skipped without a reason"
    assert checks["parity_fp16"]["status"] == "skip"  # fp16 + GradScaler is CUDA-only
    assert checks["resume_bitwise"]["status"] == "pass" and checks["mistake"]["status"] == "pass"
    assert code == 0 and summary["ok"], output[-4000:]
    for name in EXPECTED_CHECKS:  # one verdict line per check on stdout
        assert any(line.split()[1:2] == [name] for line in output.splitlines() if line.split()), name


def test_dry_run_writes_few_files(dry_run):
    _, _, out = dry_run
    files = sorted(p.name for p in out.rglob("*") if p.is_file())
    assert len(files) < 8, files
    assert {"summary.json", "checks.log", "reports.json", "report-mistake.html", "bench.log"} <= set(files)
    assert "verdict: DIFFERENT" in (out / "report-mistake.html").read_text()


def test_refuses_an_outdir_that_holds_files(tmp_path, capsys):
    """The check is main()'s, called in this process: the dry run above walks scripts/gpu_check.sh, and a
    process of its own here would only add the wrapper's start-up (it imports Lightning) to the suite."""
    (tmp_path / "x").write_text("keep me")
    # --only environment: were the refusal gone, this would run one instant check, not the whole walk
    code = gpu_check_module().main(["--dry-run", "--only", "environment", str(tmp_path)])
    stderr = capsys.readouterr().err
    assert code == 2 and "OUTDIR" in stderr and len(stderr.strip().splitlines()) == 1
    assert (tmp_path / "x").read_text() == "keep me"
