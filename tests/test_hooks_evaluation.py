"""Evaluation recorded with no line changed (ddp_parity/hooks/evaluation.py): a DDP loop that knows
nothing of any recorder evaluates between micro-batches or before its first step; the hooks write each
evaluation (the step it follows, the micro-batches since, a digest of its outputs), the causes that
ask when a side validated read those records, and two evaluations are compared by their outputs alone.
Recording changes nothing the loop prints or trains."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from conftest import PYTHON, REPO, _torchrun_prefix, check_ok, child_env, run_cmd

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env, state
from ddp_parity.hooks.evaluation import Evaluation
from ddp_parity.trace_files import read_evaluations, read_validation

PROGRAM = REPO / "tests" / "hooks_programs" / "eval_loop.py"

RUNS = {
    # name: the loop's arguments
    "between": ("--eval", "1:1"),  # after step 1 and the first micro-batch of step 2, every rank
    "again": ("--eval", "1:1"),
    "zeroed": ("--eval", "1:1", "--zero-before-eval"),  # as Lightning drops the gradients before validating
    "other_data": ("--eval", "1:1", "--eval-seed", "2"),  # the same point, other evaluation batches
    "from_training": ("--eval", "0:0", "--eval-ranks", "0", "--eval-from-training"),  # nanoGPT's iteration 0
    "extra_buffer": ("--eval", "1:1", "--extra-buffer"),  # iterable round 1: state the other side does not hold
    "never_synced": ("--eval", "1:1", "--sync", "never"),  # issue 46: a no_sync left on for every micro-batch
    "every_synced": ("--eval", "1:1", "--sync", "every"),  # issue 46: DDP syncs every micro-batch, not the last only
}


def run(tmp: Path, name: str, *args: str, record: bool = True):
    run_dir, weights = tmp / name, tmp / f"{name}.pt"
    env = recording_env(run_dir, name, child_env()) if record else None
    result = check_ok(run_cmd([*_torchrun_prefix(2), PROGRAM, "--save", weights, *args], env=env))
    return result, run_dir, weights


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hooks-eval")
    found = {name: run(tmp, name, *args) for name, args in RUNS.items()}
    found["plain"] = run(tmp, "plain", *RUNS["between"], record=False)
    return found


@pytest.mark.slow
def test_an_evaluation_between_micro_batches_is_recorded_with_its_outputs(runs):
    _, run_dir, _ = runs["between"]
    evaluations = read_evaluations(run_dir)
    assert sorted(evaluations) == [0, 1]
    for rank in (0, 1):
        [record] = evaluations[rank]
        assert (record["step"], record["micro_batch"], record["forwards"]) == (1, 1, 2), record
        assert (record["training"], record["grad_enabled"], record["grads_held"]) == (False, False, True), record
        assert len(record["output_digest"]) == 64
    # the ranks evaluated the same batches with the same (replicated) parameters
    assert evaluations[0][0]["output_digest"] == evaluations[1][0]["output_digest"]
    [zeroed] = read_evaluations(runs["zeroed"][1])[0]
    assert zeroed["grads_held"] is False  # the loop dropped the first micro-batch's gradients


@pytest.mark.slow
def test_recording_evaluations_changes_nothing_the_loop_prints_or_trains(runs):
    recorded, _, weights = runs["between"]
    plain, _, plain_weights = runs["plain"]
    assert recorded.stdout == plain.stdout
    assert plain.stdout.count(" loss ") == 4 and "eval at 1:1: " in plain.stdout
    a, b = torch.load(weights, weights_only=True), torch.load(plain_weights, weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k].view(-1), b[k].view(-1)) for k in a)


@pytest.mark.slow
def test_the_same_evaluation_twice_is_equivalent_with_nothing_said(runs):
    report = compare_traces(runs["between"][1], runs["again"][1])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    assert not [w for w in report["warnings"] if w["kind"] == "evaluation_differs"], report["warnings"]


@pytest.mark.slow
def test_an_evaluation_on_other_data_is_said_beside_an_equal_training(runs):
    """No figure the program computes is compared: the outputs' digests part, the training does not."""
    report = compare_traces(runs["between"][1], runs["other_data"][1])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    said = [w for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert [(w["rank"], w["step"], w["micro_batch"]) for w in said] == [(0, 1, 1), (1, 1, 1)], said
    assert "after 1 micro-batch(es) of step 2" in said[0]["message"]


@pytest.mark.slow
def test_gradients_dropped_before_an_evaluation_between_micro_batches_are_named(runs):
    """The slip of hf_accelerate round 5 in a loop of our own: the same samples and loss at step 2, another
    gradient norm; the evaluations recorded between the micro-batches name it, and the side."""
    report = compare_traces(runs["between"][1], runs["zeroed"][1])
    d = report["diagnosis"]
    assert (d["kind"], d["step"]) == ("gradients.across_validation", 2), d
    assert d["evidence"]["grads_held_at_evaluation"] == {"between": True, "zeroed": False}, d["evidence"]
    assert "on zeroed, keep them" in d["advice"], d["advice"]


@pytest.mark.slow
def test_an_evaluation_drawing_from_the_training_generator_is_named(runs):
    """nanoGPT round 4 in a loop of our own: rank 0 evaluates before its first step with batches of the
    training's generator; its later draws move, rank 1's do not."""
    report = compare_traces(runs["from_training"][1], runs["between"][1])
    d = report["diagnosis"]
    assert (d["kind"], d["step"], d["rank"]) == ("data_order.evaluation", 1, 0), d
    assert d["evidence"]["validation_steps_one_side"] == {"side": "from_training", "steps": [0]}, d["evidence"]
    [record] = read_evaluations(runs["from_training"][1])[0]
    assert (record["step"], record["micro_batch"], record["grads_held"]) == (0, 0, None), record


@pytest.mark.slow
def test_initial_states_apart_only_by_a_buffer_held_on_one_side_are_an_equal_training_with_the_buffer_said(runs):
    """The iterable slip in a loop of our own: the initial-state digest covers buffers, so it differs; the
    parameters and every common buffer are equal, so the states' names differ, not the initial weights. The
    training is equal (issue 46: the verdict comes from the training), and the buffer held alone is said."""
    report = compare_traces(runs["between"][1], runs["extra_buffer"][1])
    d = report["diagnosis"]
    assert (report["verdict"], d["kind"]) == ("equivalent", "equivalent"), d
    assert "['table'] on extra_buffer only" in d["evidence"]["init_note"], d["evidence"]
    [alone] = [w["message"] for w in report["warnings"] if w["kind"] == "one_side_only"]
    assert alone.startswith("1 buffer(s) on extra_buffer only, no parameter: table."), alone
    assert not [w for w in report["warnings"] if w["kind"] == "evaluation_differs"], report["warnings"]


def test_an_evaluation_output_that_cannot_be_digested_is_said_not_raised(tmp_path):
    """The recorder is a guest: an output part it cannot digest by value is named in the record."""
    live = state.Recording(tmp_path, "guest")
    module = torch.nn.Linear(2, 1).eval()
    evaluation = Evaluation(live, module)
    evaluation.add((module(torch.ones(1, 2)), object()))
    record = evaluation.record()
    assert record["forwards"] == 1 and record["undigested"] == ["batch[1]: object"], record
    assert (record["step"], record["micro_batch"], record["grads_held"], record["training"]) == (0, 0, None, False)


EXPLICIT = """
import sys, torch
from ddp_parity import TraceRecorder
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
recorder = TraceRecorder(sys.argv[1], side="explicit")
recorder.start()
for step in range(1, 3):
    loss = model(torch.ones(1, 2)).sum()
    loss.backward()
    optimizer.step()
    recorder.record(step, loss, model=model)
    model.eval()
    with torch.no_grad():
        recorder.record_validation(0, step, {"out": model(torch.ones(1, 2)).item()})
    model.train()
recorder.finish(model)
"""


def test_an_evaluation_is_not_recorded_twice_where_the_program_records_itself(tmp_path):
    """Its validation goes to validation.jsonl by its own recorder; the hooks stand down and write no
    evaluation record of it, anywhere."""
    env = recording_env(tmp_path / "hooks", "hooks", child_env())
    result = check_ok(run_cmd([PYTHON, "-c", EXPLICIT, tmp_path / "explicit"], env=env))
    assert "the hooks stand down" in result.stderr
    assert [v["step"] for v in read_validation(tmp_path / "explicit")] == [1, 2]
    assert read_evaluations(tmp_path / "explicit") == {} and not (tmp_path / "hooks").exists()


def test_evaluation_records_are_read_tolerantly(tmp_path):
    """A line that is not an evaluation record is left out, never raised: these records only add."""
    trace = tmp_path / "trace"
    trace.mkdir()
    good = {"step": 3, "micro_batch": 0, "forwards": 1, "output_digest": "ab"}
    text = "\n".join([json.dumps(good), "[1, 2]", '{"step": "3", "micro_batch": 0}', "{not json", ""])
    (trace / "rank1.evaluations.jsonl").write_text(text)
    (trace / "rankx.evaluations.jsonl").write_text(json.dumps(good))
    assert read_evaluations(tmp_path) == {1: [good]}


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


@pytest.mark.slow
def test_a_step_no_micro_batch_synced_is_named_with_both_sync_patterns(runs):
    """Issue 46: the hooks record each backward's DDP sync; where one side synced none of a step's micro-batches
    (its ranks step on their own gradients), the finding names it with the patterns side by side."""
    d = compare_traces(runs["between"][1], runs["never_synced"][1])["diagnosis"]
    assert (d["kind"], d["step"]) == ("gradients.sync_pattern", 1), d["explanation"]
    assert "between [no sync, sync], never_synced [no sync, no sync]" in d["explanation"], d["explanation"]
    assert d["advice"].startswith("On never_synced, let the last micro-batch's backward sync"), d["advice"]


@pytest.mark.slow
def test_syncing_every_micro_batch_is_named_where_it_parts_the_runs_and_never_where_it_does_not(runs):
    """Syncing every micro-batch sums the same averaged gradients in another order: whether that parts the bits
    depends on the CPU's rounding, so the test reads the records. Equal parameters: equivalent, nothing blamed;
    parted: the sync patterns are the finding (never a generic optimizer or gradients cause)."""
    report = compare_traces(runs["between"][1], runs["every_synced"][1])
    d = report["diagnosis"]
    if report["verdict"] == "equivalent":
        assert d["kind"] != "gradients.sync_pattern", d["explanation"]
    else:
        assert (d["kind"], d["step"]) == ("gradients.sync_pattern", 1), d["explanation"]
        assert "between [no sync, sync], every_synced [sync, sync]" in d["explanation"], d["explanation"]


VAL_LOOP = REPO / "tests" / "hooks_programs" / "val_loop.py"


@pytest.mark.slow
def test_a_validation_sampler_given_set_epoch_on_one_side_only_is_named(tmp_path):
    """LoRA's port: Lightning calls set_epoch on the validation's DistributedSampler each epoch, the program never
    did, so the second validation ran on other samples with the training equal. The hooks digest the indices each
    DataLoader yields and note its sampler's epoch when it is iterated: the warning names the other samples and the
    epochs, where it said only 'other inputs or otherwise'."""
    found = {}
    for name, args in (("plain", ()), ("set-epoch", ("--val-set-epoch",))):
        env = recording_env(tmp_path / name, name, child_env())
        found[name] = check_ok(run_cmd([PYTHON, VAL_LOOP, *args], env=env)).stdout.splitlines()
    # the program's own figures: the same first validation (epoch 0 either way), another second one
    assert found["plain"][0] == found["set-epoch"][0] and found["plain"][1] != found["set-epoch"][1], found
    report = compare_traces(tmp_path / "plain", tmp_path / "set-epoch")
    assert report["verdict"] == "equivalent", report["diagnosis"]
    [said] = [w for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert (said["rank"], said["step"]) == (0, 8), said
    message = said["message"]
    assert "it ran on other samples: its DataLoader (TensorDataset) yielded other sample indices" in message, message
    assert "was at epoch 0 on plain and 1 on set-epoch: set_epoch was called on it on one side only" in message, message
