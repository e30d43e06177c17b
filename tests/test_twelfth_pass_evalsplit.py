"""Twelfth pass, class `evalsplit`: evaluations recorded per forward, and evaluation data that differ left unsaid under
EQUIVALENT (annotated_transformer rounds 4-6, issue 46).

The loop evaluates in eval() with gradients on (no torch.no_grad) and applies its head (a generator the model holds
but its forward does not call) outside the DDP wrapper; its port calls the head inside the forward the wrapper runs
(a LightningModule's step), where the hooks record no forward of it apart. The hooks wrote a record per run of one
module's forwards (model, head, model, head: four of one forward each) and the tool warned "ran 1 forward(s) on raw
and 2 on lightning ... a recalibration or two evaluations", the table "none at a point both sides share". Now an
evaluation is what runs between two steps (or micro-batches) in one mode: each module's forwards there are one
record, the records at one point one evaluation, compared like with like (the modules both recorded). And the
validation's DistributedSampler shuffled on one side only was never warned while the EQUIVALENT line said the
samplers matched: an evaluation's sampler that differs is warned, side by side, and the line no longer says so."""

from __future__ import annotations

import pytest
from conftest import PYTHON, REPO, _torchrun_prefix, check_ok, child_env, run_cmd
from test_eleventh_pass_evalrollout import hooked_pair

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env
from ddp_parity.trace_files import read_evaluations

EVAL_LOOP = REPO / "tests" / "hooks_programs" / "eval_loop.py"
VAL_LOOP = REPO / "tests" / "hooks_programs" / "val_loop.py"

HEAD_RUNS = {
    # the annotated Transformer's evaluation: eval() with gradients on, the head applied outside the wrapper
    "outside": ("--eval", "1:1", "--head", "outside", "--eval-grad-on"),
    # its port's: no_grad, the head called inside the forward the wrapper runs
    "inside": ("--eval", "1:1", "--head", "inside"),
}


@pytest.fixture(scope="module")
def head_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evalsplit-head")
    found = {}
    for name, args in HEAD_RUNS.items():
        env = recording_env(tmp / name, name, child_env())
        check_ok(run_cmd([*_torchrun_prefix(2), EVAL_LOOP, "--save", tmp / f"{name}.pt", *args], env=env))
        found[name] = tmp / name
    return found


@pytest.mark.slow
def test_an_evaluation_with_a_head_called_outside_the_wrapper_is_one_evaluation_compared_like_with_like(head_runs):
    """Each module's forwards at the point are one record (2 of the model, 2 of the head), never split by the other's;
    compared with the port's (2 of the model, the head unseen inside its forward) by the module both recorded: equal,
    no evaluation_differs, and the head's forwards said as recorded on one side only."""
    report = compare_traces(head_runs["outside"], head_runs["inside"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    said = [w["message"] for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert not said, said
    evaluations = report["evaluations"]
    assert (evaluations["compared"], evaluations["equal"], evaluations["unlike"]) == (2, 2, None), evaluations
    assert evaluations["recorded"] == [2, 2], evaluations
    assert evaluations["parts_one_side"] == [{"Linear": 2}, {}], evaluations
    explanation = report["diagnosis"]["explanation"]
    assert "the hooks' evaluations (2 compared by their outputs' digests)" in explanation, explanation
    assert "outside's evaluations also ran a part of the model on its own (Linear, at 2 evaluation(s))" in explanation
    for rank, records in read_evaluations(head_runs["outside"]).items():
        assert [(r["module"], r["forwards"], r["grad_enabled"]) for r in records] == [
            ("Headed", 2, True),
            ("Linear", 2, True),
        ], (rank, records)
        assert {(r["step"], r["micro_batch"]) for r in records} == {(1, 1)}, records


def _split_records(rank: int) -> list[dict]:
    """What hooks before this fix wrote for such an evaluation: model, head, model, head, one forward each."""
    return [
        {"step": 4, "micro_batch": 0, "epoch": 0, "forwards": 1, "module": module, "role": "model", "training": False,
         "grad_enabled": True, "inference_mode": False, "grads_held": True, "pending_batch_of": None,
         "output_digest": f"{module}{i}{rank}".ljust(64, "0")}
        for i, module in enumerate(("Net", "Linear", "Net", "Linear"))
    ]  # fmt: skip


def test_an_evaluation_recorded_in_pieces_is_no_other_number_of_forwards(tmp_path):
    """The kept runs' records (annotated_transformer round 4): one side's evaluation in four one-forward records, the
    other's in one of two forwards at the same point. One evaluation each, as many forwards of the model: no
    evaluation_differs, and nothing says "none at a point both sides share"; their digests cannot be compared (other
    pieces), and that is said."""
    one = {"step": 4, "micro_batch": 0, "epoch": 0, "forwards": 2, "module": "Net", "role": "model",
           "training": False, "grad_enabled": False, "inference_mode": False, "grads_held": True,
           "pending_batch_of": None, "output_digest": "ab".ljust(64, "0")}  # fmt: skip
    evaluations = {"raw": {r: _split_records(r) for r in (0, 1)}, "lightning": {r: [dict(one)] for r in (0, 1)}}
    report, d = hooked_pair(tmp_path, evaluations)
    assert report["verdict"] == "equivalent", d
    assert not [w for w in report["warnings"] if w["kind"] == "evaluation_differs"], report["warnings"]
    summary = report["evaluations"]
    assert summary["recorded"] == [2, 2] and summary["unlike"] is None, summary
    assert summary["split"]["count"] == 2 and summary["split"]["pieces"] == [[[1, 1]], [[2]]], summary
    assert "none at a point both sides share" not in d["explanation"], d["explanation"]
    assert "2 pair(s) at points both sides share, none comparable" in d["explanation"], d["explanation"]


@pytest.fixture(scope="module")
def val_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evalsplit-val")
    found = {}
    for name, args in (("shuffled", ()), ("unshuffled", ("--val-no-shuffle",))):
        env = recording_env(tmp / name, name, child_env())
        found[name] = check_ok(run_cmd([PYTHON, VAL_LOOP, *args], env=env)).stdout.splitlines()
    return tmp, found


def test_a_validation_sampler_shuffled_on_one_side_only_is_warned_and_never_said_to_match(val_runs):
    """The training equal, the validation's DistributedSampler built with shuffle=True on one side and False on the
    other: a warning names the sampler's arguments side by side and the indices its iterators yielded; the EQUIVALENT
    line does not say the samplers match, and says which differs."""
    tmp, printed = val_runs
    assert printed["shuffled"] != printed["unshuffled"], printed  # the program's own validation figures part
    report = compare_traces(tmp / "shuffled", tmp / "unshuffled")
    assert report["verdict"] == "equivalent", report["diagnosis"]
    [said] = [w for w in report["warnings"] if w["kind"] == "evaluation_sampler_differs"]
    message = said["message"]
    assert "the evaluation's DataLoader (TensorDataset) has another sampler on the two sides" in message, message
    assert "shuffle True on shuffled, False on unshuffled (DistributedSampler)" in message, message
    assert "its iterators yielded other sample indices at 2 of them" in message, message
    explanation = report["diagnosis"]["explanation"]
    assert "samplers, seeds" not in explanation, explanation
    assert "The recorded samplers differ: an evaluation's DataLoader on rank(s) 0: shuffle True" in explanation


def test_equal_validation_samplers_are_not_warned(val_runs):
    """What the check must not say: the same validation sampler on both sides is no difference."""
    tmp, _ = val_runs
    report = compare_traces(tmp / "shuffled", tmp / "shuffled")
    assert not [w for w in report["warnings"] if w["kind"] == "evaluation_sampler_differs"], report["warnings"]
    assert "samplers, seeds" in report["diagnosis"]["explanation"], report["diagnosis"]["explanation"]
