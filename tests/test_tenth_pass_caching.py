"""Tenth pass, class `caching`: no-grad forwards in training mode inside the training step, recorded as evaluations
(openclip rounds 4-7, issue 46).

A feature-caching pass (open_clip's --accum-freq: every micro-batch's features computed without gradients, in
training mode, before each micro-batch is re-run with them) gave the hooks one "evaluation" at every step. Paired
with the other side's real validation at the same point, it made a mode difference: the diagnosis told the side
that does not evaluate there to call model.eval(), and outranked the first training-record difference (the rate).
Now such forwards are part of the step: the hooks record the DataLoader batch they ran on before its backward
(`pending_batch_of`) and part a group where the mode changes; records that do not say are taken as part of the step
where they recur at every step. One side evaluating on a rank where the other records none is said as that, with
the ranks each side evaluates on; and an evaluation's mode never hides a rate that differs.

The traces are made here: a training of `test_diagnosis`'s, eight steps on two ranks, with the evaluation records
the hooks write for a loop that caches features at every step and validates after steps 4 and 8, on rank 0 only
(raw) or on every rank (lightning)."""

from __future__ import annotations

import collections
import json
import weakref

import pytest
import torch
from conftest import REPO, _torchrun_prefix, check_ok, child_env, run_cmd
from test_diagnosis import make_meta, make_records, pair, run_diagnosis

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env, state
from ddp_parity.hooks.data import PASS, YIELDED
from ddp_parity.hooks.evaluation import Evaluation, forward_done
from ddp_parity.trace_files import read_evaluations

STEPS, VALIDATED_AFTER, TRAIN_LOADER = 8, (4, 8), 3  # TRAIN_LOADER: the `order` of the training loader's entry


def group(step: int, rank: int, training: bool, forwards: int = 2, pending: int | None | str = "unsaid") -> dict:
    """One record of rank{rank}.evaluations.jsonl; its digest a function of what ran (equal on both sides)."""
    record = {"step": step, "micro_batch": 0, "epoch": 0, "forwards": forwards, "module": "Net", "role": "model",
              "training": training, "grad_enabled": False, "inference_mode": False, "grads_held": False,
              "output_digest": f"{step:02d}{rank}{int(training)}{forwards}".ljust(64, "0")}  # fmt: skip
    if pending != "unsaid":
        record["pending_batch_of"] = pending
    return record


def caching_then_validating(rank: int, validating: bool, split: bool) -> list[dict]:
    """A caching pass before every step; after steps 4 and 8 a validation where `validating`. Not `split` (as the
    hooks wrote before they parted groups by mode): a validation and the next step's caching pass are one record."""
    out = []
    for step in range(STEPS + 1):
        validates = validating and step in VALIDATED_AFTER
        caches = step < STEPS
        if validates and caches and not split:
            out.append(group(step, rank, training=False, forwards=4))
            continue
        if validates:
            out.append(group(step, rank, training=False, pending=TRAIN_LOADER + 1 if split else "unsaid"))
        if caches:
            out.append(group(step, rank, training=True, pending=TRAIN_LOADER if split else "unsaid"))
    return out


def hooked_pair(tmp_path, split: bool, rate_apart_from: int | None = None):
    """raw validates on rank 0 only, lightning on every rank; both cache features at every step. From step
    `rate_apart_from` on, lightning's learning rate (and so its parameters) differs."""
    records_b = make_records()
    for rank_records in records_b.values():
        for record in rank_records:
            if rate_apart_from is not None and record["step"] >= rate_apart_from:
                record["lr"] = 0.002
                record["param_digest"] = [d + 1 for d in record["param_digest"]]
    a, b = pair(tmp_path, meta_a=make_meta("raw"), meta_b=make_meta("lightning"), records_b=records_b)
    for run, validating_ranks in ((a, {0}), (b, {0, 1})):
        meta = json.loads(run.joinpath("meta.json").read_text())
        run.joinpath("meta.json").write_text(json.dumps({**meta, "recorded_by": "hooks"}))
        for rank in (0, 1):
            records = caching_then_validating(rank, rank in validating_ranks, split)
            (run / "trace" / f"rank{rank}.evaluations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
            loaders = [{"order": TRAIN_LOADER, "trained": True}, {"order": TRAIN_LOADER + 1, "trained": False}]
            facts = {"loader_iterators": {"count": 2, "items": loaders}}
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))
    return run_diagnosis(a, b)


def test_a_caching_pass_never_hides_the_rate_behind_an_evaluation_mode(tmp_path):
    """openclip round 4: the records as the hooks wrote them then (a validation and the next caching pass one record,
    no `pending_batch_of`). The caching passes recur at every step: part of the step, never an evaluation in training
    mode; the rate that differs from step 6 is the diagnosis."""
    report, d = hooked_pair(tmp_path, split=False, rate_apart_from=6)
    assert report["verdict"] == "different", d
    assert d["kind"] != "module_state.evaluation_mode", d
    assert (d["category"], d["step"]) == ("optimizer", 6), d
    assert "training mode" not in d["explanation"] and "model.eval()" not in d["advice"], d
    evaluations = report["evaluations"]
    assert evaluations["recorded"] == [2, 4], evaluations  # the validations alone: raw's rank 0, lightning's two
    assert evaluations["in_step"] == [15, 14], evaluations  # the caching passes, not compared as evaluations


def test_one_side_validating_on_every_rank_is_said_as_that_not_as_a_mode(tmp_path):
    """openclip rounds 5-7: the training equal, raw validating on rank 0 only. The warning says lightning evaluates
    on rank 1 where raw records none, and on which ranks each side evaluates; never a mode, never model.eval()."""
    for split in (False, True):
        report, d = hooked_pair(tmp_path / str(split), split=split)
        assert report["verdict"] == "equivalent", d
        said = [w for w in report["warnings"] if w["kind"] == "evaluation_differs"]
        assert [(w["rank"], w["step"]) for w in said] == [(1, 4)], said
        message = said[0]["message"]
        assert "lightning evaluates after step 4 and the other side records no evaluation there" in message, message
        assert "raw records evaluations on rank(s) 0, lightning on rank(s) 0, 1" in message, message
        assert "training mode" not in message and "model.eval()" not in message, message
        assert report["evaluations"]["compared"] == report["evaluations"]["equal"] == 2, report["evaluations"]


def test_an_evaluation_left_in_training_mode_at_its_own_points_is_still_one(tmp_path):
    """What the class must not swallow: no-grad forwards in training mode only where the program validates (after
    steps 4 and 8, model.eval() forgotten) are an evaluation, said with its mode."""
    a, b = pair(tmp_path, meta_a=make_meta("raw"), meta_b=make_meta("lightning"))
    for run, training in ((a, True), (b, False)):
        meta = json.loads(run.joinpath("meta.json").read_text())
        run.joinpath("meta.json").write_text(json.dumps({**meta, "recorded_by": "hooks"}))
        for rank in (0, 1):
            records = [group(step, rank, training=training) for step in VALIDATED_AFTER]
            (run / "trace" / f"rank{rank}.evaluations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    report, d = run_diagnosis(a, b)
    said = [w["message"] for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert said and "raw ran it with the model in training mode" in said[0], report["warnings"]
    assert report["evaluations"].get("in_step", [0, 0]) == [0, 0], report["evaluations"]


def test_the_hooks_part_a_group_where_the_mode_changes(tmp_path):
    """A validation in eval mode, then the next step's caching pass in training mode with no training forward
    between: two records, each in its own mode, never one of four forwards in the first one's mode."""
    live = state.Recording(tmp_path, "guest")
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        for training in (False, False, True, True):
            model.train(training)
            forward_done(live, model, model(torch.ones(1, 2)))
    kept = [*live.evaluations, live.evaluation]
    assert [(ev.training, ev.forwards) for ev in kept] == [(False, 2), (True, 2)]


class _Iterator:
    """Stands in for a DataLoader iterator the data hooks have seen yield."""


def test_the_hooks_say_which_loaders_batch_was_waiting_for_its_backward(tmp_path):
    """Forwards run after a batch was fetched and before a backward took it name that iterator's `loader_iterators`
    entry; with nothing waiting (every batch trained from), none."""
    live = state.Recording(tmp_path, "guest")
    model = torch.nn.Linear(2, 1)
    iterator = _Iterator()
    iterator.__dict__[PASS] = ({"order": TRAIN_LOADER}, None, None)
    iterator.__dict__[YIELDED] = collections.deque([([0, 1], None)])
    live.last_iterator = weakref.ref(iterator)
    assert Evaluation(live, model).record()["pending_batch_of"] == TRAIN_LOADER
    iterator.__dict__[YIELDED].popleft()  # a backward took it
    assert Evaluation(live, model).record()["pending_batch_of"] is None


@pytest.mark.slow
def test_a_loop_caching_features_is_recorded_and_compared_as_training(tmp_path):
    """tests/hooks_programs/caching_loop.py recorded by the hooks, validating on rank 0 only against every rank: each
    step's caching pass is its own record on the step's batch, the validations apart from it; equal training, the
    warning names the ranks, never a mode."""
    runs = {}
    for name, ranks in (("raw", "0"), ("lightning", "all")):
        env = recording_env(tmp_path / name, name, child_env())
        program = REPO / "tests" / "hooks_programs" / "caching_loop.py"
        check_ok(
            run_cmd([*_torchrun_prefix(2), program, "--save", tmp_path / f"{name}.pt", "--eval-ranks", ranks], env=env)
        )
        runs[name] = tmp_path / name
    records = read_evaluations(runs["raw"])[0]
    assert [(r["step"], r["training"]) for r in records] == [
        (0, True),
        (1, True),
        (2, False),
        (2, True),
        (3, True),
        (4, False),
    ]
    assert all(isinstance(r["pending_batch_of"], int) for r in records), records
    report = compare_traces(runs["raw"], runs["lightning"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    assert report["evaluations"]["in_step"] == [8, 8] and report["evaluations"]["recorded"] == [2, 4]
    [said] = [w["message"] for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert (
        "lightning evaluates after step 2" in said
        and "raw records evaluations on rank(s) 0, lightning on rank(s) 0, 1" in said
    )
    assert "training mode" not in said, said
