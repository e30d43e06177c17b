"""Issue 46, a class found on public programs: a scheduler stepped k times per optimizer step is read from the
recorded counts (scheduler_steps_before), never guessed from the lr's shape where the counts say otherwise; on
pairs trained by the tests' own loop."""

from __future__ import annotations

from loops_of_our_own import Loop, pair
from test_diagnosis import make_records, run_diagnosis, trained_apart
from test_diagnosis import pair as hand_made_pair

from ddp_parity import compare_traces

COUNTED = Loop(schedule="exp", record_scheduler_count=True)


def diagnosis(tmp_path, a: Loop, b: Loop) -> dict:
    return compare_traces(*pair(tmp_path, a, b))


def test_a_scheduler_stepped_twice_per_optimizer_step_is_named_from_the_counts(tmp_path):
    """Per micro-batch, or a hand call beside Lightning's: the recorded counts say 2 against 1, the side named."""
    d = diagnosis(tmp_path, COUNTED, COUNTED.changed(scheduler_steps=2))["diagnosis"]
    assert d["kind"] == "optimizer.scheduler_steps", d["explanation"]
    text = d["explanation"]
    assert "reference stepped its scheduler 1 time per optimizer step, changed 2 times per optimizer step" in text
    assert d["evidence"]["scheduler_steps_before"]["changed"][1:] == [2] * (len(d["evidence"]["steps"]) - 1)
    assert d["advice"].startswith("On changed, step the scheduler as reference does"), d["advice"]


def test_equal_counts_never_say_the_scheduler_was_stepped_another_number_of_times(tmp_path):
    """Another gamma with both sides stepping once per optimizer step: the lr decays otherwise, and the counts the
    records hold rule the stepping out, so no sentence may offer it."""
    d = diagnosis(tmp_path, COUNTED, COUNTED.changed(gamma=0.99))["diagnosis"]
    assert d["kind"] == "optimizer.lr", d["explanation"]
    assert "number of times" not in d["explanation"] + d["advice"], d["explanation"]
    assert "stepped their schedulers equally often" in d["explanation"]


def test_unrecorded_counts_leave_the_lr_shape_to_say(tmp_path):
    """Without the counts (an explicit loop that records none) nothing is read from them."""
    base = Loop(schedule="exp")
    d = diagnosis(tmp_path, base, base.changed(scheduler_steps=2))["diagnosis"]
    assert d["kind"] == "optimizer.lr", d["explanation"]


def test_a_scheduler_stepped_per_epoch_against_per_step_says_once_per_epoch(tmp_path):
    """Hand-made records of the hooks' form: raw steps its scheduler after every optimizer step, lightning once
    per epoch (its count 1 only at each epoch's first step); the rates part at step 2 and so do the parameters."""
    records = {side: make_records() for side in ("a", "b")}
    for side, per_rank in records.items():
        for recs in per_rank.values():
            for i, rec in enumerate(recs):
                epoch_start = i > 0 and rec["epoch"] != recs[i - 1]["epoch"]
                count = (1 if i > 0 else 0) if side == "a" else int(epoch_start)
                rec["scheduler_steps_before"] = count
                rec["lr"] = 0.1 * 0.9 ** (i if side == "a" else rec["epoch"])
    a, b = hand_made_pair(tmp_path, records_a=records["a"], records_b=trained_apart(records["b"], from_step=2))
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("optimizer.scheduler_steps", 2), d["explanation"]
    assert "lightning 0 times per optimizer step but 1 at step" in d["explanation"], d["explanation"]
    assert "(each the first step of an epoch: once per epoch)" in d["explanation"], d["explanation"]
    assert d["advice"].startswith("On lightning, step the scheduler as raw does"), d["advice"]


def test_a_scheduler_stepped_per_micro_batch_parts_the_rates_at_step_1_and_is_named_from_the_counts(tmp_path):
    """LoRA's loop steps its schedule after every micro-batch (accumulation 2): one scheduler step before the first
    optimizer step, two before each later one; its port once per optimizer step. The rates part at step 1, where
    the first count alone cannot tell this from a schedule one step ahead: the usual counts after it do."""
    records = {side: make_records() for side in ("a", "b")}
    for side, per_rank in records.items():
        for recs in per_rank.values():
            for i, rec in enumerate(recs):
                rec["scheduler_steps_before"] = (1 if i == 0 else 2) if side == "a" else (0 if i == 0 else 1)
                position = 2 * i + 1 if side == "a" else i
                rec["lr"] = 0.1 * 0.9**position
    a, b = hand_made_pair(tmp_path, records_a=records["a"], records_b=trained_apart(records["b"], from_step=1))
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("optimizer.scheduler_steps", 1), d["explanation"]
    said = "raw stepped its scheduler 2 times per optimizer step, lightning 1 time per optimizer step"
    assert said in d["explanation"], d["explanation"]
    assert d["evidence"]["scheduler_steps_before"]["raw"][:3] == [1, 2, 2], d["evidence"]
    assert d["advice"].startswith("On raw, step the scheduler as lightning does"), d["advice"]


def test_a_schedule_one_step_ahead_is_not_said_to_be_stepped_more_often(tmp_path):
    """The first count apart (1 vs 0) and the same count after it: a scheduler stepped before the first optimizer
    step, not more often; left to the causes of a schedule ahead."""
    records = {side: make_records() for side in ("a", "b")}
    for side, per_rank in records.items():
        for recs in per_rank.values():
            for i, rec in enumerate(recs):
                rec["scheduler_steps_before"] = 1 if side == "a" or i > 0 else 0
                rec["lr"] = 0.1 * 0.9 ** (i + 1 if side == "a" else i)
    a, b = hand_made_pair(tmp_path, records_a=records["a"], records_b=trained_apart(records["b"], from_step=1))
    _, d = run_diagnosis(a, b)
    assert d["kind"] != "optimizer.scheduler_steps", d["explanation"]
