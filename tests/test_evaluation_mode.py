"""Issue 46, evaluation forgotten in train() mode, seen on a public program: a DDP loop of the tests' own
(tests/hooks_programs/eval_loop.py, recorded by the hooks with no line changed) with BatchNorm evaluates
after its second step and after its last, each rank on its own share of the evaluation data; one side leaves
out model.eval(). The training records are equal, the running statistics are not: the finding names the
evaluation's mode, the side, the step it followed, the consequence and the fix, never replicas diverging
across ranks (a validation outside the DDP wrapper) or SyncBatchNorm."""

from __future__ import annotations

import pytest
from conftest import REPO, _torchrun_prefix, check_ok, child_env, run_cmd

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env
from ddp_parity.trace_files import read_evaluations

PROGRAM = REPO / "tests" / "hooks_programs" / "eval_loop.py"
COMMON = ("--batchnorm", "--eval-per-rank")


def _run(tmp, name: str, *args: str, plain: bool = False):
    """The loop recorded by the hooks; `plain`: without BatchNorm (a model no mode changes)."""
    run_dir = tmp / name
    env = recording_env(run_dir, name, child_env())
    common = COMMON[1:] if plain else COMMON
    check_ok(run_cmd([*_torchrun_prefix(2), PROGRAM, "--save", tmp / f"{name}.pt", *common, *args], env=env))
    return run_dir


@pytest.mark.slow
@pytest.mark.parametrize("at", ["2:0", "4:0"])
def test_an_evaluation_left_in_training_mode_is_named_by_its_mode(tmp_path, at):
    """At 2:0 the training goes on after the evaluation (the next training forward broadcasts rank 0's
    buffers again); at 4:0 (after the last step) each rank ends with the running statistics of its own share."""
    right = _run(tmp_path, "eval_mode", "--eval", at)
    slipped = _run(tmp_path, "train_mode", "--eval", at, "--eval-in-train-mode")
    [record] = read_evaluations(slipped)[0]
    assert record["training"] is True and read_evaluations(right)[0][0]["training"] is False
    report = compare_traces(right, slipped)
    d = report["diagnosis"]
    assert report["verdict"] == "different", d
    assert d["kind"] == "module_state.evaluation_mode", d
    step = int(at.split(":")[0])
    assert d["step"] == step, d
    said = d["explanation"]
    assert f"train_mode's evaluation after step {step} ran its forwards with the model in training mode" in said
    assert "eval_mode's evaluation" in said and "in eval mode" in said, said
    assert "running statistics from the evaluation data" in said and "replicas" not in said, said
    assert "running_mean" in said, said  # the buffers the records show apart
    assert "On train_mode, call model.eval() before evaluating and model.train() after it" in d["advice"], d


@pytest.mark.slow
def test_an_evaluation_in_training_mode_that_moves_nothing_is_no_finding(tmp_path):
    """Without BatchNorm or dropout the mode changes no output, no buffer and no step: the verdict comes from
    the training, and it is equal."""
    right = _run(tmp_path, "eval_mode", "--eval", "4:0", plain=True)
    slipped = _run(tmp_path, "train_mode", "--eval", "4:0", "--eval-in-train-mode", plain=True)
    assert read_evaluations(slipped)[0][0]["training"] is True
    report = compare_traces(right, slipped)
    assert report["verdict"] == "equivalent", report["diagnosis"]
