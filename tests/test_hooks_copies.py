"""Issue 46's class 7, its evaluation half (ConvNeXt's rank 1 evaluated an EMA copied from its own weights before
DDP's broadcast, the training bitwise equal): a copy of the trained model kept beside it (an EMA) is found by the
hooks, its forwards in eval mode recorded as evaluations of `role` `copy`, and compared with the other side's copies
only. The two-rank program (tests/hooks_programs/ema_eval.py) is recorded by the hooks with no line changed, under
torchrun on gloo.
"""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import REPO, _torchrun_prefix, check_ok, child_env, recorded_once, run_cmd
from torch import nn
from torch.optim.swa_utils import AveragedModel

from ddp_parity import compare_traces
from ddp_parity.hooks import evaluation, recording_env
from ddp_parity.trace_files import read_evaluations, read_hook_facts, read_records

PROGRAM = REPO / "tests" / "hooks_programs" / "ema_eval.py"
# "again" also saves whole modules at its end (--snapshots), compared with the same program run with no recording;
# "after" (made once per session: test_ninth_pass_copies.py reads it too) saves its state_dicts after steps 4 and 8
AFTER = ("--save-dir", "{out}")
VARIANTS = {
    "again": ("--snapshots",),
    "before": ("--ema-before-ddp",),
    "train-mode": ("--ema-left-in-train-mode",),
    "last-skipped": ("--ema-skips-last-update",),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hooks-copies")
    after, stdout = recorded_once(tmp_path_factory, "after", "ema_eval.py", *AFTER)
    out = {}
    for name, args in VARIANTS.items():
        out[name] = check_ok(
            run_cmd([*_torchrun_prefix(2), PROGRAM, *args], env=recording_env(tmp / name, name, child_env()))
        ).stdout
    out["unrecorded"] = check_ok(run_cmd([*_torchrun_prefix(2), PROGRAM, "--snapshots"], env=child_env())).stdout
    return {name: tmp / name for name in VARIANTS} | {"after": after, "stdout": out | {"after": stdout}}


@pytest.mark.slow
def test_an_ema_evaluated_beside_the_model_is_recorded_as_a_copy_on_every_rank(runs):
    evaluations = read_evaluations(runs["after"])
    assert sorted(evaluations) == [0, 1]
    for rank in (0, 1):
        records = evaluations[rank]
        assert [(r["role"], r["step"], r["forwards"]) for r in records] == [("copy", s, 1) for s in (2, 4, 6, 8)]
        assert all(r["module"] == "Sequential" and r["training"] is False for r in records), records
    # the EMA is rank 0's weights on both ranks (copied after the broadcast): the same outputs
    assert [r["output_digest"] for r in evaluations[0]] == [r["output_digest"] for r in evaluations[1]]


@pytest.mark.slow
def test_the_same_ema_twice_is_equivalent_with_nothing_said(runs):
    report = compare_traces(runs["after"], runs["again"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    said = [w for w in report["warnings"] if w["kind"] in ("evaluation_differs", "copy_differs")]
    assert not said, said
    assert all(len(r["copy_digest"]) == 2 for r in read_records(runs["after"], 1))  # the EMA's first and last


@pytest.mark.slow
def test_an_ema_copied_before_the_broadcast_is_said_on_the_rank_it_differs_on(runs):
    """The training is bitwise equal (the EMA takes no part in it), so the verdict is EQUIVALENT; rank 1's EMA started
    from rank 1's own weights, so its evaluations differ from the first, said as a copy's; rank 0's are equal."""
    assert runs["stdout"]["after"] == runs["stdout"]["before"]  # rank 0 prints: the same loss and EMA figures
    report = compare_traces(runs["after"], runs["before"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    [said] = [w for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert (said["rank"], said["role"], said["step"]) == (1, "copy", 2), said
    message = said["message"]
    assert message.startswith("rank 1: the evaluation of a copy of the trained model (Sequential, an EMA) after step 2")
    assert "before DDP's broadcast" in message, message
    # the copy's own values, digested after every step: apart on rank 1 from the first step, equal on rank 0
    [copy] = [w for w in report["warnings"] if w["kind"] == "copy_differs"]
    assert (copy["rank"], copy["step"]) == (1, 1) and "while the training is equal" in copy["message"], copy


@pytest.mark.slow
def test_an_ema_not_updated_after_the_last_step_is_said_at_the_end(runs):
    """A step's copy digest is taken at its optimizer step, before the update after it: the last update is seen only
    in the copies' state at the end, which both ranks of the loop that skips it hold apart from the other side's."""
    report = compare_traces(runs["after"], runs["last-skipped"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    said = [w for w in report["warnings"] if w["kind"] == "copy_differs"]
    assert [(w["rank"], w["step"]) for w in said] == [(0, 8), (1, 8)], said
    assert "at the end on after and last-skipped, equal at every optimizer step before" in said[0]["message"], said
    assert "its update after the last step (8) differs" in said[0]["message"], said


@pytest.mark.slow
def test_a_copy_seen_on_one_side_only_is_said_with_what_the_hooks_cannot_see(runs):
    """vision_classification's port kept its EMA outside the module tree and never called eval() on it: the hooks
    see no copy there, so nothing is compared, and the warning says which side evaluates one in eval mode and why
    the other's may be unseen (training mode), never that the outputs are equal or differ."""
    assert runs["stdout"]["after"] == runs["stdout"]["train-mode"]  # no BatchNorm, no dropout: the same figures
    report = compare_traces(runs["after"], runs["train-mode"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    [said] = [w for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert said["role"] == "copy" and said["message"].startswith("after evaluates a copy of the trained model"), said
    assert "in eval mode 8 time(s) over its ranks; the hooks saw none on train-mode" in said["message"], said
    assert "call eval() on it before evaluating" in said["message"], said


def test_a_copy_is_laid_out_as_a_trained_module_and_holds_none_of_its_parameters():
    """What the hooks take for a copy: a deepcopy and an AveragedModel (its parameters under `module.`) of the
    trained model, in a LightningModule-like holder or apart, each taken as a core is (the outermost copy, then its
    innermost part holding all its parameters: the AveragedModel's `module`); never the model, a module of another
    layout, or one holding a trained parameter."""
    torch.manual_seed(0)
    core = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    holder = nn.ModuleDict({"model": core, "ema": copy.deepcopy(core).requires_grad_(False)})
    averaged = AveragedModel(core)
    other = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    sharing = nn.Sequential(core[0], nn.ReLU(), nn.Linear(3, 2))
    trained = {id(p) for p in core.parameters()}
    signatures = {evaluation._signature(m) for m in core.modules()} - {()}
    found = evaluation.copies_of(signatures, [core, *holder.modules(), averaged, other, sharing, averaged], trained)
    assert [id(m) for m in found] == [id(holder["ema"]), id(averaged.module)]


def test_a_copy_of_a_part_is_the_same_module_whether_seen_whole_or_in_parts():
    """I-JEPA's target encoder, a frozen copy of the trained encoder: seen as the Linear a top call ran (the model
    given to DDP whole) or as the Sequential around it (the parts given to DDP one by one), it is one copy, its
    innermost part holding all its parameters, so both sides treat it alike."""
    encoder = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
    target = copy.deepcopy(encoder).requires_grad_(False)
    trained = {id(p) for p in encoder.parameters()}
    signatures = {evaluation._signature(m) for m in encoder.modules()} - {()}
    assert evaluation.copies_of(signatures, [target[0]], trained) == [target[0]]
    assert evaluation.copies_of(signatures, [*target.modules()], trained) == [target[0]]


@pytest.mark.slow
def test_whole_modules_saved_under_the_hooks_are_the_bytes_saved_without_them(runs):
    """EDM pickles its EMA, a deepcopy of the network: the hooks' forward hooks (closures) went along with the module,
    and the pickle raised inside the program. The hooks are left out of what pickles or copies a module, so the
    program runs, and its files are byte for byte those of the run with no recording."""
    saved = {n: [line for line in runs["stdout"][n].splitlines() if " saved " in line] for n in ("again", "unrecorded")}
    assert [line.split()[0] for line in saved["again"]] == ["ema", "model", "copy"], runs["stdout"]["again"]
    assert saved["again"] == saved["unrecorded"]
    pickled = {
        n: [line for line in runs["stdout"][n].splitlines() if " pickled " in line] for n in ("again", "unrecorded")
    }
    assert len(pickled["again"]) == 1 and pickled["again"] == pickled["unrecorded"]


@pytest.mark.slow
def test_a_module_pickled_is_no_checkpoint_save_of_each_tensor(runs):
    """pickle.dumps(ema) pickles each storage by a torch.save of its own into a buffer (torch.storage's __reduce__):
    those were recorded as checkpoint saves, one per tensor. The three torch.save calls of the program are the
    saves."""
    saves = read_hook_facts(runs["again"], 0)["checkpoints"]["items"]
    assert [(c["op"], c["kinds"]) for c in saves] == [("torch.save", ["model"])] * 3, saves
