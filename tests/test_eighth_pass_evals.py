"""Eighth pass, class `evals`: evaluations recorded and compared, yet the words say none; an evaluation recorded with
a constant output digest (fixmatch r4-r6 and slip 3, pycls r4-r6, issue 46).

fixmatch's hooks recorded an EMA's evaluations on both sides and compared them, while the table's row and the
EQUIVALENT line said none were recorded: a copy's evaluations count as evaluations wherever the words speak of them.
pycls's port validated through `self.model` in a `validation_step` Lightning runs as the LightningModule's forward:
the hooks digested that forward's output (None), one digest whatever the weights. They now digest the part holding
the trained parameters, and a digest the weights did not move is left out and said, never compared."""

from __future__ import annotations

import json

import pytest
from conftest import PYTHON, REPO, check_ok, child_env, run_cmd
from test_diagnosis import make_meta, make_records, pair, run_diagnosis

from ddp_parity.compare.findings import Report
from ddp_parity.compare.report import table_rows
from ddp_parity.hooks import recording_env
from ddp_parity.trace_files import read_evaluations


def hooked_pair(tmp_path, evaluations: dict[str, list[dict]], records=None):
    """Two equal trainings recorded as the hooks record, each side with the evaluations given (on ranks 0 and 1)."""
    records = records or make_records()
    a, b = pair(tmp_path, meta_a=make_meta("raw"), meta_b=make_meta("lightning"), records_a=records, records_b=records)
    for run, side in ((a, "raw"), (b, "lightning")):
        meta = json.loads(run.joinpath("meta.json").read_text())
        run.joinpath("meta.json").write_text(json.dumps({**meta, "recorded_by": "hooks"}))
        for rank in (0, 1):
            text = "".join(json.dumps(x) + "\n" for x in evaluations[side])
            (run / "trace" / f"rank{rank}.evaluations.jsonl").write_text(text)
    report, diagnosis = run_diagnosis(a, b)
    rows = {row[0]: row for row in table_rows(Report.from_json(report))}
    return report, diagnosis, rows


def evaluation(step: int, digest: str, role: str = "model", module: str = "Net") -> dict:
    return {"step": step, "micro_batch": 0, "epoch": 0, "forwards": 2, "output_digest": digest * 32,
            "module": module, "role": role, "training": False}  # fmt: skip


def test_a_copys_evaluations_compared_are_said_compared(tmp_path):
    """fixmatch: only an EMA was evaluated (role copy), equal on both sides: counted in the row and the EQUIVALENT
    line, never "none recorded" nor "no validation recorded"."""
    both = [evaluation(2, "aa", "copy"), evaluation(4, "bb", "copy")]
    report, diagnosis, rows = hooked_pair(tmp_path, {"raw": both, "lightning": both})
    assert rows["evaluations"][1:3] == ["4", "4"], rows["evaluations"]
    assert "no validation recorded" not in diagnosis["explanation"], diagnosis["explanation"]
    assert "the hooks' evaluations (4 compared by their outputs' digests)" in diagnosis["explanation"]


def test_evaluations_that_differ_are_said_in_the_equivalent_line(tmp_path):
    """fixmatch slip 3: the copy's evaluations differ with the training equal; the line says so."""
    raw = [evaluation(2, "aa", "copy"), evaluation(4, "bb", "copy")]
    lightning = [evaluation(2, "aa", "copy"), evaluation(4, "cc", "copy")]
    report, diagnosis, rows = hooked_pair(tmp_path, {"raw": raw, "lightning": lightning})
    assert rows["evaluations"][1:3] == ["4", "2"], rows["evaluations"]
    assert report["evaluations"]["first_divergence"]["role"] == "copy"
    assert "The hooks' evaluations differ: 2 of 4 compared gave the same outputs" in diagnosis["explanation"]
    assert "no validation recorded" not in diagnosis["explanation"]


def test_an_evaluation_one_side_ran_alone_moves_no_pairing(tmp_path):
    """Lightning's sanity check after step 0: the evaluations after steps 2 and 4 are paired at their points."""
    raw = [evaluation(2, "aa"), evaluation(4, "bb")]
    lightning = [evaluation(0, "ee"), *raw]
    report, diagnosis, rows = hooked_pair(tmp_path, {"raw": raw, "lightning": lightning})
    assert rows["evaluations"][1:3] == ["4", "4"], rows["evaluations"]


def test_an_output_digest_the_weights_did_not_move_is_left_out_and_said(tmp_path):
    """pycls r4: one digest after steps 0, 2 and 4 while the parameter digest changed: not compared, said in the
    row, the EQUIVALENT line and a warning naming both explanations and what tells them apart."""
    raw = [evaluation(2, "aa"), evaluation(4, "bb")]
    lightning = [evaluation(s, "51", module="Steps") for s in (0, 2, 4)]
    report, diagnosis, rows = hooked_pair(tmp_path, {"raw": raw, "lightning": lightning})
    assert rows["evaluations"][1] == "0", rows["evaluations"]
    assert rows["evaluations"][5] == (
        "nothing compared (6 on lightning left out, their outputs unmoved by the weights; 4 on raw, none on "
        "lightning to pair them with)"
    ), rows["evaluations"]
    assert "No evaluation was compared: 6 on lightning left out" in diagnosis["explanation"]
    [said] = [w["message"] for w in report["warnings"] if w["kind"] == "evaluation_unseen"]
    assert said.startswith("lightning's evaluations of Steps after steps 0, 2, 4 (rank(s) 0, 1) gave one output")
    assert "The module named tells them apart" in said
    assert not [w for w in report["warnings"] if w["kind"] == "evaluation_differs"], report["warnings"]


def test_a_copy_whose_weights_stayed_may_give_the_same_outputs(tmp_path):
    """A target network updated now and then: its outputs repeat while its own digest (copy_digest) stays, whatever
    the model's parameter digest does. Compared, never left out."""
    records = make_records()
    for found in records.values():
        for record in found:
            record["copy_digest"] = [1.0, 2.0]
    both = [evaluation(2, "aa", "copy"), evaluation(4, "aa", "copy")]
    report, diagnosis, rows = hooked_pair(tmp_path, {"raw": both, "lightning": both}, records)
    assert rows["evaluations"][1:3] == ["4", "4"], rows["evaluations"]
    assert not [w for w in report["warnings"] if w["kind"] == "evaluation_unseen"], report["warnings"]


@pytest.mark.slow
def test_evaluations_through_a_submodule_of_a_forward_that_is_a_validation_step_are_digested(tmp_path):
    """The wrapper's forward dispatches to a validation step that calls the model and its frozen EMA and returns None
    (Lightning's forward redirection): the hooks digest the model's and the EMA's outputs, one digest per step; the
    pass before the first step that runs the EMA alone is no evaluation of the model."""
    program = REPO / "tests" / "hooks_programs" / "redirected_eval.py"
    check_ok(run_cmd([PYTHON, program], env=recording_env(tmp_path / "run", "run", child_env())))
    [records] = read_evaluations(tmp_path / "run").values()
    by_role = {role: [r for r in records if r["role"] == role] for role in ("model", "copy")}
    assert [r["step"] for r in by_role["model"]] == [0, 1, 2, 3], records  # the sanity check's EMA pass: not seen
    assert [r["step"] for r in by_role["copy"]] == [1, 2, 3], records
    assert {r["module"] for r in records} == {"Sequential"}, records
    assert len({r["output_digest"] for r in by_role["model"]}) == 4, records


def test_evaluations_of_other_forward_counts_are_unlike_and_never_said_to_differ(tmp_path):
    """pycls re-recorded: each side's evaluation after a step held precise BN's forwards (training mode, gradients
    off) beside the test's, 4 on raw and 8 on lightning, and the EQUIVALENT line said "the hooks' evaluations differ"
    of an equal pair. Another number of forwards at one point is unlike work: not compared, and said so."""
    raw = [evaluation(2, "aa"), evaluation(4, "bb")]
    lightning = [{**evaluation(2, "cc"), "forwards": 4}, evaluation(4, "bb")]
    report, diagnosis, rows = hooked_pair(tmp_path, {"raw": raw, "lightning": lightning})
    said = diagnosis["explanation"]
    assert "evaluations differ" not in said, said
    assert "2 evaluation(s) ran another number of forwards on the two sides (after step 2 on rank 0: 2 on raw" in said
    assert report["evaluations"]["compared"] == report["evaluations"]["equal"] == 2, report["evaluations"]
    warned = [w["message"] for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert warned and all("ran 2 forward(s) on raw and 4 on lightning" in w for w in warned), warned
    assert not any("gave other outputs" in w for w in warned), warned
