"""Issue 46's tenth pass, the class found on timm's and Swin's ports: two shapes of the learning-rate series left as a
list of candidates ("another expression, another warmup or length, or the rate set at another point of the step";
"another schedule, another length in steps, or another interval"). (A) One side's rate never moves while the other's
changes (timm's slip 2: a per-update schedule never stepped on one side): the records prove that side's schedule is
never stepped, or, where no epoch boundary tells, never stepped or stepped once per epoch. (B) The same schedule k times
as long on one side (Swin's slip 3: a schedule sized in micro-batches, not optimizer updates): the stretch is fitted on
the two series and k named with every recorded count it equals.

On a loop of the tests' own (tests/loops_of_our_own.py: a LambdaLR warming up linearly, then a cosine, never stepped
on one side, or sized twice as long under an accumulation of 2), and on series exact by construction."""

from __future__ import annotations

from loops_of_our_own import Loop, pair

from ddp_parity import compare_traces
from ddp_parity.compare import relations

OLD_WORDS = ("another expression, another warmup or length", "another schedule, another length in steps")
# 8 steps an epoch (64 samples, 2 micro-batches of 4 a step): the epoch boundary at step 9
WARMING = Loop(steps=10, schedule="warmup", accumulate=2, config={"data": {"batch_size": 4}})


def _diagnosis(tmp_path, a: Loop, b: Loop) -> dict:
    d = compare_traces(*pair(tmp_path, a, b))["diagnosis"]
    assert d["kind"] == "optimizer.lr", (d["kind"], d["explanation"])
    assert not any(words in d["explanation"] for words in OLD_WORDS), d["explanation"]
    return d


# ---------------------------------------------------------------------------------------------
# (A) a rate that never moves on one side


def test_constant_side_is_the_side_whose_series_never_moves_while_the_other_changes_twice():
    steps = [1, 2, 3, 4]
    assert relations.constant_side(steps, [1, 1, 1, 1], [1, 2, 3, 4]) == 0
    assert relations.constant_side(steps, [1, 2, 3, 4], [1, 1, 1, 1]) == 1
    assert relations.constant_side(steps, [1, 1, 1, 1], [1, 1, 1, 2]) is None  # one change: a milestone on one side
    assert relations.constant_side(steps, [1, 1, 1, 1], [1, 1, 1, 1]) is None


def test_a_schedule_never_stepped_on_one_side_is_named_with_its_steps_and_the_epoch_boundary(tmp_path):
    """The changed side builds the LambdaLR (its rate at step 1 is the warm-up's start, lr / 10) and never steps it;
    the steps compared cross the epoch boundary at step 9, where a schedule stepped per epoch would have moved."""
    d = _diagnosis(tmp_path, WARMING, WARMING.changed(scheduler_steps=0))
    assert d["step"] == 2 and d["evidence"]["lr_relation"] == "constant_side", d["evidence"]
    assert d["evidence"]["constant_side"] == "changed", d["evidence"]
    text = d["explanation"]
    start = WARMING.lr * 0.1
    assert f"changed's lr is {start!r} at every one of the 10 steps both recorded (1..10)" in text, text
    assert "reference's changes at 8 of them (step 2..9)" in text, text
    assert "at the epoch boundaries among them either (step 9)" in text and "not stepped per epoch" in text, text
    assert "never stepped" in text, text
    assert d["advice"].startswith("On changed, step the schedule once per optimizer step, after optimizer.step()")


def test_with_no_epoch_boundary_a_rate_that_never_moves_names_both_never_stepped_and_stepped_per_epoch(tmp_path):
    short = WARMING.changed(steps=6)
    d = _diagnosis(tmp_path, short, short.changed(scheduler_steps=0))
    assert d["evidence"]["lr_relation"] == "constant_side", d["evidence"]
    text = d["explanation"]
    assert "No epoch boundary among the steps compared tells a schedule never stepped from one stepped once" in text
    assert "or stepped once per epoch" in text, text


def test_the_recorded_scheduler_steps_prove_a_schedule_never_stepped(tmp_path):
    counted = WARMING.changed(steps=6, record_scheduler_count=True)
    d = _diagnosis(tmp_path, counted, counted.changed(scheduler_steps=0))
    assert d["evidence"]["lr_relation"] == "constant_side", d["evidence"]
    text = d["explanation"]
    assert "The scheduler.step() calls recorded: none on changed, 5 on reference." in text, text
    assert "A schedule never stepped holds the rate it started at" in text and "per epoch" not in text, text


def test_a_rate_set_by_hand_once_per_epoch_within_one_epoch_names_the_per_epoch_reading_too(tmp_path):
    """Neither side steps a scheduler (the counts recorded 0, as the hooks record a loop that sets its lr by hand): the
    reference warms up from 0 at every step, the changed side once per epoch, so over epoch 0 its rate stays 0."""
    by_hand = WARMING.changed(steps=6, lr_read="warmup", record_scheduler_count=True, schedule=None)
    d = _diagnosis(tmp_path, by_hand, by_hand.changed(warmup_per_epoch=True))
    assert d["evidence"]["lr_relation"] == "constant_side", d["evidence"]
    text = d["explanation"]
    assert "changed's lr is 0.0 at every one of the 6 steps" in text, text
    assert "Neither side stepped a torch scheduler" in text and "it sets the rate once per epoch only" in text, text
    assert d["advice"].startswith("On changed, set the rate at every optimizer step as reference does"), d["advice"]


def test_a_scheduler_stepped_whose_rate_never_moves_is_not_said_never_stepped(tmp_path):
    counted = WARMING.changed(steps=6, record_scheduler_count=True)
    d = _diagnosis(tmp_path, counted, counted.changed(schedule="exp", gamma=1.0))
    assert d["evidence"]["lr_relation"] == "constant_side", d["evidence"]
    text = d["explanation"]
    assert "changed recorded 5 scheduler.step() call(s) over these steps, 5 on reference" in text, text
    assert "never stepped" not in text and "flat over these steps" in text, text


# ---------------------------------------------------------------------------------------------
# (B) the same schedule k times as long


def test_time_stretch_maps_the_long_series_at_k_times_the_steps_onto_the_other():
    steps = list(range(1, 9))
    short = [1, 1, 2, 3, 4, 5, 6, 7]  # from step 2: one a step
    long = [1, 1, 1.5, 2, 2.5, 3, 3.5, 4]  # from step 2: half of it a step
    k, origin, side, matched = relations.time_stretch(steps, short, long)
    assert (k, origin, side) == (2, 2, 1) and matched[:2] == [(3, 4), (4, 6)], matched
    assert relations.time_stretch(steps, long, short)[:3] == (2, 2, 0)
    assert relations.time_stretch(steps, short, [1, 1, 1.5, 2, 2.5, 3, 3.5, 9]) is None  # step 8 is not step 5's
    assert relations.time_stretch(steps, short, short) is None


def test_a_warm_up_stretched_alone_is_fitted_from_its_start_peak_and_slopes():
    steps = list(range(1, 9))
    short = [1, 3, 5, 5, 4, 3, 2, 1]  # 1 to 5 by 2 a step, then down by 1
    long = [1, 2, 3, 4, 5, 4, 3, 2]  # 1 to 5 by 1 a step, then down by 1: the decay not stretched
    assert relations.time_stretch(steps, short, long) is None
    k, side, rise, longer = relations.warmup_stretch(steps, short, long)
    assert (k, side, rise["at"], longer["at"]) == (2, 1, 3, 5), (rise, longer)
    relation = relations.warmup_relation("lr", ("a", "b"), steps, short, long, {"micro-batches per step": 2})
    assert "the same warm-up 2 times as long on b" in relation.sentence, relation.sentence
    assert relation.counts == ("micro-batches per step=2",), relation


def test_a_schedule_sized_in_micro_batches_is_named_as_the_same_schedule_k_times_as_long(tmp_path):
    """The changed side sizes its warm-up and cosine twice as long (in micro-batches, under 2 a step): its rate at
    step 1 + 2·(s − 1) is the reference's at step s, and 2 is the micro-batches per step."""
    d = _diagnosis(tmp_path, WARMING, WARMING.changed(schedule_stretch=2))
    assert d["step"] == 2 and d["evidence"]["lr_relation"] == "stretch", d["evidence"]
    relation = d["evidence"]["relation"]
    assert (relation["side"], relation["value"], relation["counts"]) == ("changed", 2, ["micro-batches per step=2"])
    text = d["explanation"]
    assert "changed's lr at steps 3, 5, 7, 9 is reference's at steps 2, 3, 4, 5" in text, text
    assert "the same schedule 2 times as long on changed, counted from step 1" in text, text
    assert "2 is the micro-batches per step" in text and "sized in micro-batches" in text, text
    assert "cannot tell" not in text, text  # one count fits
    assert d["advice"].startswith("Size the schedule in optimizer updates on both sides"), d["advice"]
