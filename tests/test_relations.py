"""Exact relations between the two runs (issue 37): compare/relations.py on series exact by
construction, the diagnosis naming them on hand-made traces, and the five slips of the issue made
through the public plugin API (TraceRecorder, TraceCallback) on the corpus's models, each named with
its relation and the fix for its mechanism."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from test_diagnosis import WORLD, make_meta, make_records, pair, run_diagnosis, trained_apart

from benchmarks.bugs.cases import RELATION_CASES
from benchmarks.bugs.run import run_case
from ddp_parity.compare import relations
from ddp_parity.compare.causes.base import Context
from ddp_parity.compare.causes.undetermined import undetermined

STEPS = list(range(1, 9))
LOSSES = [2.5 - 0.125 * i for i in range(8)]  # dyadic: a factor of 2 is exact


# ---------------------------------------------------------------------------------------------
# a constant factor


def test_a_loss_twice_the_other_at_every_step_is_a_factor_named_after_the_accumulation():
    doubled = [2 * x for x in LOSSES]
    r = relations.factor_relation("loss", ("raw", "lightning"), STEPS, doubled, LOSSES, {"accumulate_grad_batches": 2})
    assert (r.kind, r.side, r.other, r.value, r.first, r.last) == ("factor", "raw", "lightning", 2.0, 1, 8)
    assert r.count == "accumulate_grad_batches=2"
    assert r.sentence == ("raw's loss is 2.000 × lightning's at every step (1..8); 2 is the accumulate_grad_batches.")


def test_a_factor_below_one_is_said_from_the_larger_side():
    halved = [x / 2 for x in LOSSES]
    r = relations.factor_relation("grad_norm", ("raw", "lightning"), STEPS, halved, LOSSES, {"world_size": 2})
    assert (r.side, r.value, r.count) == ("lightning", 2.0, "world_size=2")


def test_a_factor_that_stops_holding_says_until_when():
    changed = [2 * x for x in LOSSES[:5]] + [x * 1.5 for x in LOSSES[5:]]
    factor, first, last, every = relations.constant_factor(STEPS, changed, LOSSES)
    assert (factor, first, last, every) == (2.0, 1, 5, False)


def test_no_factor_between_equal_or_unrelated_series_or_a_factor_that_is_no_count():
    assert relations.constant_factor(STEPS, LOSSES, LOSSES) is None
    assert relations.constant_factor(STEPS, [x * 1.37 for x in LOSSES], LOSSES) is None
    assert relations.count_named(3.0, {"accumulate_grad_batches": 2}) is None
    # equal up to step 3, then a factor of 4 from the first step that differs
    later = LOSSES[:3] + [4 * x for x in LOSSES[3:]]
    assert relations.constant_factor(STEPS, later, LOSSES)[:2] == (4.0, 4)


# ---------------------------------------------------------------------------------------------
# a shift by k steps


SCHEDULE = [0.01 * 0.5 ** (i // 2) for i in range(12)]


@pytest.mark.parametrize("k", [1, 2])
def test_a_schedule_k_steps_ahead_is_a_shift_naming_the_side_ahead(k):
    behind, ahead = SCHEDULE[:8], SCHEDULE[k : 8 + k]
    assert relations.step_shift(ahead, behind) == (k, 0)
    assert relations.step_shift(behind, ahead) == (k, 1)
    r = relations.shift_relation("lr", ("raw", "lightning"), STEPS, behind, ahead)
    assert (r.kind, r.side, r.value) == ("shift", "lightning", k)


def test_no_shift_between_equal_constant_or_unrelated_series():
    assert relations.step_shift(SCHEDULE, SCHEDULE) is None
    assert relations.step_shift([0.01] * 8, [0.02] * 8) is None
    assert relations.step_shift(SCHEDULE[:8], [x * 3 for x in SCHEDULE[:8]]) is None


# ---------------------------------------------------------------------------------------------
# the gradient norm under another norm, over a subset


NAMES = ["fc1.weight", "fc1.bias", "fc2.weight"]
LAYER_NORMS = [3.0, 0.0, 4.0]  # the 2-norm of all of them is 5


def test_the_recorded_total_is_named_the_2_norm_a_subset_or_below_it():
    assert relations.norm_of(5.0, NAMES, LAYER_NORMS) == ("L2", None)
    assert relations.norm_of(4.0, NAMES, LAYER_NORMS) == ("L2", ["fc2.weight"])
    assert relations.norm_of(3.0, NAMES, LAYER_NORMS) == ("L2", ["fc1.bias", "fc1.weight"])
    # 2.5: no module's 2-norm, below the total: neither the 2-norm nor the 1-norm (the 1-norm is never below)
    assert relations.norm_of(2.5, NAMES, LAYER_NORMS) == ("below L2", None)
    assert relations.norm_of(7.5, NAMES, LAYER_NORMS) == ("above L2", None)
    # with each gradient's largest |g| recorded, the infinity norm is proved
    assert relations.norm_of(2.5, NAMES, LAYER_NORMS, layer_maxabs=[2.5, 0.0, 1.0]) == ("inf", None)
    # with each gradient's sum of |g| recorded, the 1-norm is proved (and not claimed where the sum differs)
    assert relations.norm_of(7.5, NAMES, LAYER_NORMS, layer_l1=[4.0, 0.0, 3.5]) == ("L1", None)
    assert relations.norm_of(7.5, NAMES, LAYER_NORMS, layer_l1=[4.0, 0.0, 3.0]) == ("above L2", None)
    assert relations.norm_of(5.0, NAMES, [math.nan] * 3) is None  # unrecorded (no .grad when recorded)


# ---------------------------------------------------------------------------------------------
# per-layer updates related by one constant


def test_every_layers_update_times_one_constant_is_an_effective_lr_factor():
    before = [[1.0, -2.0, 0.5], [0.25, 0.75, -1.0]]
    update = [[0.0625, -0.125, 0.25], [0.5, 0.03125, -0.0625]]
    after_b = [[x + u for x, u in zip(r, ru)] for r, ru in zip(before, update)]
    after_a = [[x + 0.5 * u for x, u in zip(r, ru)] for r, ru in zip(before, update)]
    assert relations.update_factor(before, after_a, after_b) == 0.5
    # one layer's update halved, the other's not: no single constant (weight decay on some layers, say)
    mixed = [after_a[0], after_b[1]]
    assert relations.update_factor(before, mixed, after_b) is None
    assert relations.update_factor(before, after_b, after_b) is None


def test_a_gradient_on_one_side_only_names_the_parameters_and_the_side_without():
    r = relations.one_side_relation("lightning", "raw", ["embed.weight"], 1)
    assert (r.kind, r.side, r.value) == ("one_side", "lightning", "embed.weight")
    assert r.sentence == "embed.weight get(s) a gradient on raw and none on lightning at step 1."
    assert relations.one_side_relation("lightning", "raw", [], 1) is None


# ---------------------------------------------------------------------------------------------
# the diagnosis names the relation (hand-made traces)


def test_a_loss_exactly_twice_the_other_names_the_factor_and_the_accumulation(tmp_path):
    records_a, records_b = make_records(), make_records()
    for r in range(WORLD):
        for rec in records_a[r]:
            rec["loss"] *= 2
            rec["grad_norm"] *= 2  # a loss scaled in the training scales its gradients
    trained_apart(records_a)
    config = {"trainer": {"accumulate_grad_batches": 2}}
    a, b = pair(
        tmp_path,
        meta_a=make_meta("raw", config=config),
        meta_b=make_meta("lightning", config=config),
        records_a=records_a,
        records_b=records_b,
    )
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("loss.factor", 1)
    assert d["evidence"]["relation"]["count"] == "accumulate_grad_batches=2"
    assert "raw's loss is 2.000 × lightning's at every step" in d["explanation"]
    assert "On raw, divide each micro-batch's loss" in d["advice"]
    # the same count fits the other side dividing twice (EDM's port: Lightning divides by accumulate_grad_batches too)
    assert "lightning divides its loss by the accumulation count (2) twice" in d["explanation"], d["explanation"]
    assert "On lightning, return each micro-batch's loss from training_step without dividing" in d["advice"]


def test_an_lr_one_step_ahead_with_parameters_parting_is_the_schedule_not_the_recording(tmp_path):
    """A rate read after scheduler.step() leaves the parameters equal (recording: test_causes); a schedule
    one iteration ahead applies the shifted rates, so the parameters part: the two are told apart."""
    records_a, records_b = make_records(), make_records()
    schedule = [0.001 * 0.9**i for i in range(len(records_a[0]) + 1)]
    for r in range(WORLD):
        for i, (ra, rb) in enumerate(zip(records_a[r], records_b[r])):
            ra["lr"], rb["lr"] = schedule[i], schedule[i + 1]
            rb["param_digest"] = [x + 0.5 for x in rb["param_digest"]]
    _, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b))
    assert (d["kind"], d["step"]) == ("optimizer.lr_ahead", 1)
    assert d["evidence"]["ahead"] == "lightning" and d["evidence"]["params_part_at"] == 1
    assert "scheduler.step() after optimizer.step()" in d["advice"]


# ---------------------------------------------------------------------------------------------
# the five slips of the issue, through the public plugin API


ISSUE_SLIPS = {
    "loss not divided by the accumulation vs Trainer (transformer)": ("loss.factor", "2.000 ×", "Divide the loss"),
    "lr schedule one iteration ahead (mlp)": ("optimizer.lr_ahead", "1 step(s) ahead", "after optimizer.step()"),
    "scheduler.step() before optimizer.step(), the lr read before both (mlp)": (
        "optimizer.effective_lr",
        "one constant",
        "after optimizer.step()",
    ),
    # the gradients and the parameters equal, only the norm measured otherwise: EQUIVALENT, a recording note
    "gradient norm with norm_type=inf vs Trainer (cnn)": (
        "recording.measured",
        "the infinity norm of the same gradients: it equals their largest |g|",
        "norm_type=2.0",
    ),
    "token embedding frozen on one side (transformer)": ("frozen", "embed.weight", "requires_grad_(False)"),
    # not one of the issue's five: the other norm_type a slip picks, proved by the recorded sums of |g|
    "gradient norm as the 1-norm (cnn)": (
        "recording.measured",
        "the 1-norm of the same gradients: it equals the sum of their |g|",
        "norm_type=2.0",
    ),
}


@pytest.mark.parametrize("name", list(ISSUE_SLIPS))
def test_each_slip_of_the_issue_is_named_with_its_relation_and_fix(tmp_path, name):
    case = next(c for c in RELATION_CASES if c.name == name)
    kind, relation_words, fix_words = ISSUE_SLIPS[name]
    outcome = run_case(case, tmp_path)
    d = outcome.diagnosis
    assert (d["kind"], d["step"]) == (kind, case.step), d["explanation"]
    assert relation_words in d["explanation"] and fix_words in d["advice"]
    assert outcome.right and not outcome.story


# ---------------------------------------------------------------------------------------------
# the story never lists a candidate the recorded evidence excludes


def _context(module_found: bool):
    """A grad_norm divergence at step 1 that both sides watched: the watch found every call and .grad
    equal (module_found False) or a parameter's .grad different."""
    first = {"quantity": "grad_norm", "step": 1, "rank": 0, "a": 0.0673, "b": 0.684}
    cmp = SimpleNamespace(walk=SimpleNamespace(earliest=first, steps_equal_before=0), metas={})
    ctx = Context(cmp, ("raw", "lightning"))
    ctx.cache["have"] = {
        label: {"batch", "optimizer", "param_digest", "watch", "watch_step", "watch_state"} for label in ctx.names
    }
    ctx.cache["module"] = {"reading_kind": "param_grad", "name": "fc1.weight"} if module_found else None
    return ctx, first


def test_an_all_equal_module_watch_excludes_the_reduction_and_a_module_computing_differently():
    ctx, first = _context(module_found=False)
    d = undetermined(ctx, first, ["gradients", "numerics", "module_state"], "facts.", {})
    listed = [c["cause"] for c in d.candidates]
    assert "gradients" not in listed and "numerics" not in listed and "module_state" not in listed
    assert listed == ["norm", "reduction_order"]
    # without that evidence (the watch found a difference) the candidates stand as given
    ctx, first = _context(module_found=True)
    d = undetermined(ctx, first, ["gradients", "numerics"], "facts.", {})
    assert [c["cause"] for c in d.candidates] == ["gradients", "numerics"]
