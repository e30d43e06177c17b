"""The class llmc's first pass found (benchmarks/programs/llmc/SCORE.md, issue 46's twelfth pass): a quantity the
recorder left unrecorded judged as if recorded. Where no backward runs before an optimizer step, the hooks cannot
take the step's loss: the record holds a NaN placeholder and meta.json `unrecorded` says so. The tool then warned
"the loss never changes ...: nothing trains" and "loss is nan at step 1 ... lower the learning rate", and its
EQUIVALENT line said the loss (and samples nobody recorded) "match".

The rules now: a loss the recorder marked unrecorded is never a health check's evidence (no `no_learning` from its
placeholder, never `non_finite`), never compared, never said to match; the EQUIVALENT line lists the per-step
quantities compared and names those that were not.

A small program of the tests' own (tests/hooks_programs/seed_loop.py --grads-by-hand: gradients set by
torch.autograd.grad, no backward), recorded by the hooks twice, one process each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, child_env

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env

SEED_LOOP = REPO / "tests" / "hooks_programs" / "seed_loop.py"


def recorded(run_dir: Path, *args: str) -> Path:
    env = recording_env(run_dir, run_dir.name, child_env())
    proc = subprocess.run(
        [sys.executable, str(SEED_LOOP), *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )
    assert proc.returncode == 0 and "step 4 loss" in proc.stdout, proc.stderr
    return run_dir


@pytest.fixture(scope="module")
def by_hand(tmp_path_factory) -> dict:
    """Two recordings of the loop that sets its gradients itself, compared."""
    root = tmp_path_factory.mktemp("unrecorded")
    a, b = recorded(root / "raw", "--grads-by-hand"), recorded(root / "lightning", "--grads-by-hand")
    return {"runs": (a, b), "report": compare_traces(a, b)}


def test_the_recording_marks_the_loss_unrecorded(by_hand):
    """The premise: the hooks left the loss out the way the recorder marks it (a placeholder and a note)."""
    a, _ = by_hand["runs"]
    meta = json.loads((a / "meta.json").read_text())
    assert any(item.get("what") == "loss" for item in meta.get("unrecorded", [])), meta.get("unrecorded")
    kinds = [w["kind"] for w in by_hand["report"]["warnings"]]
    assert kinds.count("recorder_unrecorded") == 2, by_hand["report"]["warnings"]


def test_an_unrecorded_loss_is_never_nothing_trains_nor_non_finite(by_hand):
    report = by_hand["report"]
    assert report["verdict"] == "equivalent", report["diagnosis"]
    judged = [w for w in report["warnings"] if w["kind"] in ("no_learning", "non_finite")]
    assert judged == [], judged


def test_the_equivalent_line_never_says_an_unrecorded_loss_matches(by_hand):
    report = by_hand["report"]
    said = report["diagnosis"]["explanation"]
    matched = said.split(" match")[0]  # the list of what matched, before "match on every rank"
    assert "loss" not in matched, said
    assert "gradient norm" in matched and "parameter digest" in matched, said
    assert "not compared at any step" in said.lower() and "loss (the recorder marked it unrecorded" in said, said


def test_a_divergence_never_says_an_unrecorded_loss_is_the_same(by_hand, tmp_path):
    """The gradients doubled on one side (its loss × 2, still no backward): the runs part at step 1 in the gradient
    norm, and the loss before it, unrecorded on both sides, is never called "the same": it is named not compared."""
    a, _ = by_hand["runs"]
    doubled = recorded(tmp_path / "doubled", "--grads-by-hand", "--loss-times", "2")
    d = compare_traces(a, doubled)["diagnosis"]
    assert d["step"] == 1, (d["kind"], d["explanation"])
    assert "same loss" not in d["explanation"] and "losses" not in d["explanation"], d["explanation"]
    assert "loss was not compared (the recorder marked it unrecorded on raw and doubled)" in d["explanation"], d
