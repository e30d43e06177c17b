"""Issue 46's twelfth pass, the class found on llm.c's port (slip 2): a learning rate that never moves on one side,
because the scheduler that side built is never stepped, was read as "another base rate scaled by world or batch size"
where the moving side's rate happened to be a whole multiple of it at the steps the rates part ("raw's lr is 2.000 ×
lightning's at steps 2, 3 and equal at step 1 ... and not after step 3"). The records refute a base rate (the rates
are equal before they part) and say what happened: the side's rate is its first value at every step, the hooks saw it
build a scheduler (hooks.json `schedulers`) and counted no scheduler.step() call before any step. The diagnosis now
names the schedule never stepped on that side, at the step the rates part (the other side's first move), with the
mechanisms that fit what was recorded (on a Lightning side: the default interval 'epoch' within one epoch, manual
optimization, a scheduler not returned from configure_optimizers) and never a factor.

On the tests' own loop (tests/hooks_programs/facts_loop.py under `ddp-parity record`'s hooks): its StepLR (halving
every 2 steps) stepped after each optimizer.step(), built and never stepped (--scheduler-never-stepped), or left
unstepped while the rate is set by hand (--lr-by-hand before), or stepped once after its last step (--scheduler-at-end,
as a scheduler stepped at an epoch's end)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import PYTHON, REPO, check_ok, child_env, run_cmd

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env

FACTS_LOOP = REPO / "tests" / "hooks_programs" / "facts_loop.py"
RUNS = {
    "stepped": [],
    "stuck": ["--scheduler-never-stepped"],
    "byhand": ["--lr-by-hand", "before"],
    "atend": ["--scheduler-at-end"],
}
FACTOR_WORDS = ("base rate", " × ", "factor")

pytestmark = pytest.mark.slow  # four recorded runs of a one-process loop: a few seconds each on a busy box


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("schedstuck")
    out = {}
    for name, flags in RUNS.items():
        out[name] = root / name
        check_ok(run_cmd([PYTHON, FACTS_LOOP, "--steps", "6", *flags], env=recording_env(out[name], name, child_env())))
    return out


def _diagnosis(a, b) -> dict:
    report = compare_traces(a, b)
    assert report["verdict"] == "different", report["diagnosis"]
    d = report["diagnosis"]
    assert d["kind"] == "optimizer.lr", (d["kind"], d["explanation"])
    assert not any(words in d["explanation"] + d["advice"] for words in FACTOR_WORDS), d["explanation"]
    return d


def test_a_scheduler_never_stepped_is_named_where_the_rates_part_not_another_base_rate(runs):
    """stepped: 0.1, 0.1, 0.05, 0.05, 0.025, 0.025; stuck: 0.1 throughout. Where they part (step 3, stepped's
    first move) stuck's rate is 2 × stepped's at steps 3, 4, then 4 ×: once read as a base rate scaled on one side."""
    d = _diagnosis(runs["stepped"], runs["stuck"])
    assert d["step"] == 3, (d["step"], d["explanation"])
    assert d["evidence"]["lr_relation"] == "constant_side" and d["evidence"]["constant_side"] == "stuck", d["evidence"]
    assert d["evidence"]["schedulers_not_stepped"] == {"stuck": ["StepLR"]}, d["evidence"]
    text = d["explanation"]
    assert "stuck's lr is 0.1 at every one of the 6 steps both recorded (1..6)" in text, text
    assert "stuck built a StepLR and never stepped it" in text, text
    assert "none on stuck, 5 on stepped" in text, text
    assert "its scheduler.step() is never called" in text, text
    assert d["advice"].startswith("On stuck, step the scheduler once per optimizer step"), d["advice"]


def test_a_scheduler_built_and_never_stepped_beside_a_rate_set_by_hand_is_named_not_said_left_out(runs):
    """byhand steps no torch scheduler either (it sets its rate by hand, its StepLR unstepped): both sides count no
    scheduler.step(), yet stuck's rate is held by the scheduler it built and never stepped (the llm.c shape)."""
    d = _diagnosis(runs["byhand"], runs["stuck"])
    assert d["evidence"]["constant_side"] == "stuck", d["evidence"]
    assert d["evidence"]["schedulers_not_stepped"] == {"stuck": ["StepLR"]}, d["evidence"]
    text = d["explanation"]
    assert "stuck built a StepLR and never stepped it" in text, text
    assert "byhand stepped no torch scheduler either: its rate moves by hand" in text, text
    assert d["advice"].startswith("On stuck, step the scheduler once per optimizer step"), d["advice"]


def _as_lightning(tmp_path, run, **loop):
    """A copy of `run` whose hooks also recorded a Lightning loop (the hooks' `lightning_loop` fact)."""
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    hooks = copy / "trace" / "rank0.hooks.json"
    facts = json.loads(hooks.read_text())
    facts["lightning_loop"] = {"count": 1, "items": [{"before_step": 1, "order": 9, **loop}]}
    hooks.write_text(json.dumps(facts))
    return copy


def test_on_a_lightning_side_the_mechanisms_that_fit_its_loop_are_named(runs, tmp_path):
    automatic = _as_lightning(tmp_path / "auto", runs["stuck"], automatic_optimization=True)
    text = _diagnosis(runs["stepped"], automatic)["explanation"]
    assert "interval 'epoch'" in text and "not returned from configure_optimizers" in text, text
    assert "manual optimization" not in text, text
    manual = _as_lightning(tmp_path / "manual", runs["stuck"], automatic_optimization=False)
    d = _diagnosis(runs["stepped"], manual)
    assert "manual optimization" in d["explanation"] and "interval 'epoch'" not in d["explanation"], d["explanation"]
    assert "self.lr_schedulers()" in d["advice"], d["advice"]


def test_a_scheduler_stepped_only_after_the_last_step_is_said_stepped_at_the_end_not_never(runs):
    """atend steps its StepLR once, after its 6th step: no call before any step compared, one the hooks saw after."""
    d = _diagnosis(runs["stepped"], runs["atend"])
    assert d["evidence"]["schedulers_not_stepped"] == {"atend": ["StepLR"]}, d["evidence"]
    text = d["explanation"]
    assert "atend built a StepLR and stepped it only after the last of these steps (after step 6" in text, text
    assert "never stepped it" not in text and "called at the end alone (after step 6: once per epoch" in text, text
    assert d["advice"].startswith("On atend, step the scheduler once per optimizer step"), d["advice"]
