"""Issue 46 b, f and g, issue 47 K and its misleading fixes: advice never asks to make equal what both sides
recorded equal, never calls recorded evidence unrecorded, and every fact that differs is shown side by side.
Pairs trained by the tests' own loop (tests/loops_of_our_own.py) and a small LightningModule of the tests'
own; each test fails on the code before these fixes (9adac1c), as its docstring says why."""

from __future__ import annotations

import json

import lightning as L
import torch
from loops_of_our_own import Loop, pair
from test_recorder_lightning import Clipped, loader, quiet_trainer

from ddp_parity import TraceCallback, compare_traces
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.modules import replay_instruction
from ddp_parity.compare.story import said_against_records
from ddp_parity.trace import read_records
from ddp_parity.trace_files import WATCH_STEP_ENV

SAMPLER = {"class": "DistributedSampler", "shuffle": True, "seed": 3, "drop_last": False, "num_replicas": 1, "rank": 0}


def diagnose(tmp_path, a: Loop, b: Loop) -> dict:
    return compare_traces(*pair(tmp_path, a, b))["diagnosis"]


def said(d: dict) -> str:
    return json.dumps(d)


# ---------------------------------------------------------------------------------------------
# b. advice against the tool's own records


def test_identical_recorded_samplers_are_never_told_to_be_made_the_same(tmp_path):
    """Both sides record the same sampler; the order is drawn otherwise (before: "Build the same
    DistributedSampler")."""
    d = diagnose(tmp_path, Loop(sampler=SAMPLER), Loop(sampler=SAMPLER, order_seed=4))
    assert d["category"] == "data_order", d["explanation"]
    assert "Build the same DistributedSampler" not in d["advice"], d["advice"]
    assert "samplers both sides recorded are the same" in d["advice"]


def test_the_other_sides_recorded_sampler_explains_an_unshuffled_side_without_asking_to_record(tmp_path):
    """One side recorded its (shuffling) sampler, the other none and takes the samples in index order: not
    shuffled, the recorded sampler shown beside "unrecorded" (before: "record one on each side")."""
    d = diagnose(tmp_path, Loop(sampler=SAMPLER), Loop(indices="identity"))
    assert d["kind"] == "data_order.not_shuffled", d["explanation"]
    assert "record one on each side" not in d["advice"]
    assert any("shuffle: true" in s and "unrecorded" in s for s in d["evidence"]["sampler_differences"]), d


def test_a_side_without_a_sampler_is_asked_to_match_the_recorded_one_not_to_record_both(tmp_path):
    d = diagnose(tmp_path, Loop(sampler=SAMPLER), Loop(order_seed=4))
    assert d["kind"] == "data_order.unrecorded", d["explanation"]
    assert "record one on each side" not in d["advice"] and "reference's recorded sampler" in d["advice"]
    assert "unrecorded" in " ".join(d["evidence"]["sampler_differences"])


def test_epochs_recorded_1_vs_0_are_named_with_the_step_the_samples_meet(tmp_path):
    """One side starts at epoch 1 (set_epoch(1) first): its step k is the other's step k + 16 (16 steps an
    epoch). Before: another sample order, the epochs unsaid."""
    d = diagnose(tmp_path, Loop(first_epoch=1, steps=18), Loop(steps=18))
    assert d["kind"] == "data_order.epoch", d["explanation"]
    assert "epoch 1" in d["explanation"] and "epoch 0" in d["explanation"], d["explanation"]
    assert d["evidence"]["same_samples_at"] == {"reference": 1, "changed": 17}
    assert "set_epoch" in d["advice"]


def test_a_watch_step_already_set_is_never_asked_for_again(tmp_path, monkeypatch):
    """Both sides ran with DDP_PARITY_WATCH_STEP=1 (recorded per rank), yet neither watched (the loop has no
    recorder.watch): the replay instruction says so, and never asks to re-run with the same variable."""
    monkeypatch.setenv(WATCH_STEP_ENV, "1")
    a, b = pair(tmp_path, Loop(), Loop(loss_scale=2.0))
    d = compare_traces(a, b)["diagnosis"]
    instruction = replay_instruction(1, a, b, harness="ddp-parity")
    assert "Re-run both of your commands" not in instruction and "already ran with" in instruction, instruction
    assert f"{WATCH_STEP_ENV}=1 in" not in said(d)
    assert any("already set" in u["record"] for u in d["unchecked"] if u["evidence"].startswith("watch")), d


# ---------------------------------------------------------------------------------------------
# f. like paired with like


def test_the_watch_pairs_training_forwards_with_training_forwards(tmp_path):
    """One side evaluates (eval mode, gradients on) inside step 1 before training, and scales its loss by 2:
    its evaluation forward is not paired with the other's training forward (before: "batch contents
    differ" on equal batches)."""
    base = Loop(watch=True)
    d = diagnose(tmp_path, base, base.changed(eval_at=1, loss_scale=2.0))
    assert d["category"] != "data_pipeline" and "batch contents" not in d["explanation"], d["explanation"]
    assert (d.get("module") or {}).get("reading_kind") != "batch", d["module"]


# ---------------------------------------------------------------------------------------------
# g. facts recorded and compared


def test_a_clip_recorded_by_both_sides_is_named_when_it_differs(tmp_path):
    """The same gradients clipped at 0.01 and 0.02 (the clip facts the hooks record, given to record()):
    optimizer.clip with both values (before: the generic `optimizer`)."""
    base = Loop(clip=0.01, record_clip=True)
    d = diagnose(tmp_path, base, base.changed(clip=0.02))
    assert d["kind"] == "optimizer.clip", d["explanation"]
    assert "clip_max_norm: 0.01 vs 0.02" in d["explanation"] and "max_norm" in d["advice"]


def _fit(run_dir, clip: float) -> None:
    torch.manual_seed(0)
    trainer = quiet_trainer(TraceCallback(str(run_dir), side=f"clip{clip}"), gradient_clip_val=clip, devices=1)
    trainer.fit(Clipped(), loader())


def test_trace_callback_records_the_trainers_clipping_and_a_differing_clip_is_named(tmp_path):
    L.seed_everything(0, verbose=False)
    _fit(tmp_path / "a", 0.01)
    _fit(tmp_path / "b", 0.005)
    records = read_records(tmp_path / "a", 0)
    assert {(r["clip_max_norm"], r["clip_norm_type"]) for r in records} == {(0.01, 2.0)}
    d = compare_traces(tmp_path / "a", tmp_path / "b")["diagnosis"]
    assert d["kind"] == "optimizer.clip" and "clip_max_norm: 0.01 vs 0.005" in d["explanation"], d["explanation"]


def test_config_keys_on_one_side_only_are_named_beside_equivalent(tmp_path):
    """Equal training, one side records a key the other does not: EQUIVALENT names it, never "the
    configuration matches" over keys it could not compare."""
    a = Loop()
    b = Loop(config={"data": {"batch_size": 4}, "trainer": {"gradient_clip_val": 1.0}})
    d = diagnose(tmp_path, a, b)
    assert d["category"] == "equivalent", d["explanation"]
    assert "trainer.gradient_clip_val" in d["explanation"], d["explanation"]
    assert d["evidence"]["config_one_side"] == {"reference": [], "changed": ["trainer.gradient_clip_val"]}


def test_weights_tied_on_one_side_only_are_named_from_meta_tied(tmp_path):
    """Issue 47 K: layer 4's weight tied to layer 2's on one side (before: `optimizer` or `init`)."""
    d = diagnose(tmp_path, Loop(deep=True), Loop(deep=True, tie=True))
    assert d["kind"] == "tied", d["explanation"]
    assert "4.weight = 2.weight" in d["explanation"] and "changed" in d["advice"]


# ---------------------------------------------------------------------------------------------
# issue 47's misleading fixes


def test_a_step_offset_of_3_is_not_said_as_origins_0_vs_1(tmp_path):
    d = diagnose(tmp_path, Loop(), Loop(step_offset=3))
    assert d["category"] == "recording", d["explanation"]
    assert "(0 vs 1)" not in d["explanation"] and "3 higher" in d["explanation"], d["explanation"]


def test_a_batch_skipped_without_a_step_gets_no_sampler_fix(tmp_path):
    """A batch drawn at step 5 and skipped (a training_step returning None), 2 steps before the end: too
    short for a shift relation, so it was `data_order` with the sampler's fix."""
    d = diagnose(tmp_path, Loop(), Loop(skip_at=5))
    assert d["kind"] == "data_order.skipped", d["explanation"]
    assert "DistributedSampler" not in d["advice"] and "step 5" in d["advice"], d["advice"]


def test_another_step_numbering_is_not_given_a_sharding_fix(tmp_path):
    """Steps numbered 2, 4, 6 against 1, 2, 3: a structural finding, without "Shard with DistributedSampler"."""
    d = diagnose(tmp_path, Loop(), Loop(step_factor=2))
    assert d["category"] == "step_count", d["explanation"]
    assert "Shard with DistributedSampler" not in d["advice"] and "optimizer.step()" in d["advice"], d["advice"]


# ---------------------------------------------------------------------------------------------
# item 3: every sentence checked against the records (the story check runs it on every diagnosis the
# tests make, the bug corpus's among them: tests/test_bugs.py asserts its story is whole)


def test_the_story_check_refuses_advice_against_the_records(tmp_path, monkeypatch):
    monkeypatch.setenv(WATCH_STEP_ENV, "2")
    a, b = pair(tmp_path, Loop(sampler=SAMPLER), Loop(sampler=SAMPLER))
    first = {"quantity": "samples", "step": 2, "rank": 0, "epoch": 1, "epoch_b": 0}
    against = Finding(
        "data_order",
        "data_order",
        2,
        0,
        explanation="Other samples at step 2.",
        advice="Build the same DistributedSampler(...) on both sides. To compare the samplers, record one on each "
        "side. Or set DDP_PARITY_WATCH_STEP=2 in both commands' environment.",
        unchecked=[{"evidence": "batch", "sides": ["reference"], "not_checked": "the batch", "record": "batch="}],
    )
    problems = said_against_records(against, a, b, first)
    assert len(problems) == 4, problems  # the sampler twice, the watch variable, the epochs (1 vs 0) unnamed
    assert not any("batch" in p for p in problems)  # neither side recorded batch contents: rightly unchecked
    right = Finding("data_order", "data_order", 2, 0, explanation="Epoch 1: epoch 1 vs epoch 0.", advice="-")
    assert said_against_records(right, a, b, first) == []
