"""Issue 46's tenth pass, the class found on open_clip's port (slip 3): a learning rate apart at step 1 alone, where
one side's first step runs at the lr its optimizer was built with and every later rate agrees, was put on a
warm-up's bound off by one ("one side sets the rate by hand at those steps, typically a warm-up's last step, its
bound off by one"; fix "compare the bound of the warm-up"). The records say more: nothing had set that side's rate
before its first optimizer.step(), and each later step ran at the rate the other side sets before it: that side sets
the rate after optimizer.step() instead of before it. The warm-up reading is named only where the records leave it
open (the common rates no longer rising after step 1), and never where the built-lr reading does not fit.

On the tests' own loop (tests/loops_of_our_own.py): a warm-up then decay set by hand from a step counter (no
scheduler object), called before optimizer.step() on one side and after it, with the counter advanced, on the
other; meta.optimizer_built (and hooks.json's lr_at_end) written as the hooks of `ddp-parity record` write them
(an explicit trace has neither); and tests/hooks_programs/facts_loop.py --lr-by-hand under the hooks themselves."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import PYTHON, REPO, check_ok, child_env, run_cmd
from loops_of_our_own import Loop, pair, set_lr_by_hand

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env

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


def rate_at_end(s: Loop, done: int) -> float:
    """The lr param group 0 holds after set_lr_by_hand(done), as the loop computes it."""
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=s.lr)
    set_lr_by_hand(optimizer, s, done)
    return optimizer.param_groups[0]["lr"]


def test_a_rate_seen_set_after_the_last_step_rules_the_warmup_bound_out(tmp_path):
    """The hooks' lr_at_end: the late side's rate was set again after its last step (the rate of step 7, which never
    came), the other side's is its step 6's: what the step-1 numbers left open is recorded."""
    before, after = BEFORE.changed(hand_warmup=2), AFTER.changed(hand_warmup=2)
    a, b = pair(tmp_path, before, after)
    for run, done in ((a, 5), (b, 6)):
        end = {"lr_at_end": {"after_step": 6, "lr": rate_at_end(before, done)}}
        (run / "trace" / "rank0.hooks.json").write_text(json.dumps(end))
    d = compare_traces(a, b)["diagnosis"]
    assert d["evidence"]["lr_relation"] == "set_after_step" and d["evidence"]["warmup_bound_ruled_out"] is True
    assert d["evidence"]["lr_moved_after_last_step"] == {"reference": False, "changed": True}, d["evidence"]
    text = d["explanation"]
    assert "After its last step changed's rate was set again" in text and "reference's was not" in text, text
    assert f"changed {AFTER_WORDS}" in text and WARMUP_WORDS not in text, text


FACTS_LOOP = REPO / "tests" / "hooks_programs" / "facts_loop.py"


@pytest.mark.slow
def test_under_the_hooks_a_rate_set_after_the_step_is_named_from_what_they_recorded(tmp_path):
    """facts_loop.py twice under `ddp-parity record`'s hooks, its lr set by hand before or after optimizer.step():
    the optimizer as built and the lr at the end come from the hooks, no line of the loop records anything."""
    runs = {}
    for when in ("before", "after"):
        runs[when] = tmp_path / when
        cmd = [PYTHON, FACTS_LOOP, "--lr-by-hand", when]
        check_ok(run_cmd(cmd, env=recording_env(runs[when], when, child_env())))
    ends = {
        when: json.loads((run / "trace" / "rank0.hooks.json").read_text())["lr_at_end"] for when, run in runs.items()
    }
    assert ends == {"before": {"after_step": 4, "lr": 0.025}, "after": {"after_step": 4, "lr": 0.0125}}, ends
    d = compare_traces(runs["before"], runs["after"])["diagnosis"]
    assert (d["kind"], d["step"]) == ("optimizer.lr", 1), (d["kind"], d["explanation"])
    assert d["evidence"]["set_after_step"] == "after" and d["evidence"]["built_lr"] == {"before": 0.1, "after": 0.1}
    text = d["explanation"]
    assert "after's rate was set again (0.025 at step 4, 0.0125 at the end" in text, text
    assert f"after {AFTER_WORDS}" in text and WARMUP_WORDS not in text, text
    assert d["advice"].startswith("On after, set the rate before optimizer.step()"), d["advice"]
