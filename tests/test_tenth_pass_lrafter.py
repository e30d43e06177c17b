"""Issue 46's tenth pass, the class found on open_clip's port (slip 3): a learning rate apart at step 1 alone, where
one side's first step runs at the lr its optimizer was built with and every later rate agrees, was put on a
warm-up's bound off by one ("one side sets the rate by hand at those steps, typically a warm-up's last step, its
bound off by one"; fix "compare the bound of the warm-up"). The records say more: nothing had set that side's rate
before its first optimizer.step(), and each later step ran at the rate the other side sets before it: that side sets
the rate after optimizer.step() instead of before it. The warm-up reading is named only where the records leave it
open (the common rates no longer rising after step 1), and never where the built-lr reading does not fit.

On the tests' own loop (tests/loops_of_our_own.py): a warm-up then decay set by hand from a step counter (no
scheduler object), called before optimizer.step() on one side and after it, with the counter advanced, on the
other; meta.optimizer_built written as the hooks of `ddp-parity record` write it (an explicit trace has none)."""

from __future__ import annotations

from loops_of_our_own import Loop, pair

from ddp_parity import compare_traces

PARAMS = ["0.weight", "0.bias", "2.weight", "2.bias"]
WARMUP_WORDS = "bound off by one"
AFTER_WORDS = "sets the rate after optimizer.step() instead of before it"


def built(lr: float) -> dict:
    """meta.optimizer_built as the hooks write it: the SGD as constructed, at `lr`."""
    groups = [{"params": PARAMS, "lr": lr, "momentum": 0.0, "weight_decay": 0.0}]
    return {"optimizer_built": [{"class": "SGD", "param_groups": groups, "named": True, "stepped": True}]}


BEFORE = Loop(steps=6, gamma=0.9, hand_lr="before", record_scheduler_count=True, extra_meta=built(0.05))
AFTER = BEFORE.changed(hand_lr="after")


def diagnosis(tmp_path, a: Loop, b: Loop) -> dict:
    report = compare_traces(*pair(tmp_path, a, b))
    assert report["verdict"] == "different", report["diagnosis"]
    return report["diagnosis"]


def test_a_first_step_at_the_built_lr_is_a_rate_set_after_the_step_not_a_warmup_bound(tmp_path):
    """A warm-up of 3 steps: the rates still rise after step 1 on both sides, so no warm-up had ended at step 1 on
    the changed side, whose step 1 ran at the lr it was built with: the warm-up reading is ruled out."""
    d = diagnosis(tmp_path, BEFORE, AFTER)
    assert (d["kind"], d["step"]) == ("optimizer.lr", 1), (d["kind"], d["explanation"])
    evidence = d["evidence"]
    assert evidence["lr_relation"] == "set_after_step" and evidence["set_after_step"] == "changed", evidence
    assert evidence["built_lr"] == {"reference": 0.05, "changed": 0.05} and evidence["warmup_bound_ruled_out"]
    text = d["explanation"]
    assert "changed's rate at step 1 is the lr its optimizer was built with (0.05), reference's is not" in text, text
    assert "equal at the other 5 steps both recorded" in text, text
    assert "Neither side stepped a scheduler" in text and "the rate is set by hand" in text, text
    assert f"changed {AFTER_WORDS}" in text and WARMUP_WORDS not in text, text
    assert d["advice"].startswith("On changed, set the rate before optimizer.step(), from the same step count as")
    assert "warm-up" not in d["advice"], d["advice"]


def test_where_the_rates_no_longer_rise_the_warmup_bound_is_named_beside_it_with_what_tells_them_apart(tmp_path):
    """A warm-up of 2 steps (step 2 already at the built lr, decaying after): a warm-up ended before step 1 on one
    side and at step 2 on the other gives the same rates, so both are named, the rate set after the step first."""
    before, after = BEFORE.changed(hand_warmup=2), AFTER.changed(hand_warmup=2)
    d = diagnosis(tmp_path, after, before)  # the late side is the reference this time
    assert d["evidence"]["lr_relation"] == "set_after_step" and d["evidence"]["set_after_step"] == "reference"
    assert d["evidence"]["warmup_bound_ruled_out"] is False, d["evidence"]
    text = d["explanation"]
    assert f"reference {AFTER_WORDS}" in text, text
    assert "bound off by one only where reference's warm-up ended before step 1 and changed's at step 2" in text
    assert d["advice"].startswith("On reference, set the rate before optimizer.step()"), d["advice"]


def test_without_the_optimizer_as_built_a_step_1_apart_keeps_the_isolated_step_reading(tmp_path):
    """An explicit trace records no optimizer as built: nothing says step 1 ran at the built lr."""
    before, after = BEFORE.changed(extra_meta={}), AFTER.changed(extra_meta={})
    d = diagnosis(tmp_path, before, after)
    assert d["evidence"]["lr_relation"] == "isolated", d["evidence"]
    assert AFTER_WORDS not in d["explanation"] and "optimizer was built with" not in d["explanation"]


def test_a_step_1_apart_where_neither_side_ran_the_built_lr_is_no_rate_set_after_the_step(tmp_path):
    d = diagnosis(tmp_path, BEFORE, BEFORE.changed(lr_at=(1, 0.01)))
    assert d["evidence"]["lr_relation"] == "isolated", d["evidence"]
    assert AFTER_WORDS not in d["explanation"] and WARMUP_WORDS in d["explanation"], d["explanation"]


def test_a_later_step_apart_at_the_built_lr_stays_a_warmup_bound(tmp_path):
    """The changed side reaches the built lr a step early (step 3 of a 4-step warm-up): its step 1 got its rate."""
    before = BEFORE.changed(hand_warmup=4)
    d = diagnosis(tmp_path, before, before.changed(lr_at=(3, 0.05)))
    assert (d["step"], d["evidence"]["lr_relation"]) == (3, "isolated"), d["evidence"]
    assert WARMUP_WORDS in d["explanation"] and AFTER_WORDS not in d["explanation"], d["explanation"]
