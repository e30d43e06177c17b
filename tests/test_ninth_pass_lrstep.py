"""Issue 46's ninth pass, the class found on BasicSR's and ViT fine-tuning's ports: (a) a learning rate apart at
isolated steps, equal around each, read as another schedule ("another schedule, another length in steps, or another
interval"; fix "after optimizer.step() ... the same interval"), where the scheduler steps were recorded equal and
the rate is set otherwise at those steps alone (a warm-up's last step, its bound off by one); (b) a world-size
candidate kept for a gradient factor ("averaged over the world size once too often or not at all"; fix "average
the gradients over the ranks exactly once") where both sides average by DDP alone with the same arguments.

On loops of the tests' own: tests/loops_of_our_own.py (a LambdaLR recomputing each rate from its base rate, the
rate set by hand at one step on one side), and tests/hooks_programs/facts_ddp.py under `ddp-parity record`'s hooks
(two ranks, DDP on both sides, the gradients doubled by hand after backward on one side)."""

from __future__ import annotations

import pytest
from conftest import REPO, _torchrun_prefix, check_ok, child_env, recorded_once, run_cmd
from loops_of_our_own import Loop, pair

from ddp_parity import compare_traces
from ddp_parity.compare import relations
from ddp_parity.hooks import recording_env

WARMED = Loop(steps=6, schedule="lambda", gamma=0.9, record_scheduler_count=True)
OLD_WORDS = "another schedule, another length in steps, or another interval"


# ---------------------------------------------------------------------------------------------
# (a) the lr apart at isolated steps


def test_isolated_steps_are_the_single_steps_the_series_part_at_and_agree_again_after():
    steps = [1, 2, 3, 4, 5, 6]
    assert relations.isolated_steps(steps, [1, 2, 3, 4, 5, 6], [1, 2, 9, 4, 5, 6]) == [3]
    assert relations.isolated_steps(steps, [1, 2, 3, 4, 5, 6], [9, 2, 9, 4, 5, 6]) == [1, 3]
    assert relations.isolated_steps(steps, [1, 2, 3, 4, 5, 6], [1, 2, 9, 9, 5, 6]) is None  # two in a row
    assert relations.isolated_steps(steps, [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 9]) is None  # apart up to the end
    assert relations.isolated_steps(steps, [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]) is None


def test_an_lr_set_by_hand_at_one_step_is_named_with_its_step_and_values_not_as_another_schedule(tmp_path):
    """The changed side sets the base rate at step 3 (a warm-up that ends a step late), its LambdaLR computing every
    other step's rate: the rates differ at step 3 alone, the scheduler.step() calls recorded equal at every step."""
    d = compare_traces(*pair(tmp_path, WARMED, WARMED.changed(lr_at=(3, WARMED.lr))))["diagnosis"]
    assert (d["kind"], d["step"]) == ("optimizer.lr", 3), (d["kind"], d["explanation"])
    assert d["evidence"]["lr_relation"] == "isolated" and d["evidence"]["isolated_steps"] == [3], d["evidence"]
    assert d["evidence"]["scheduler_steps_equal"] is True
    text = d["explanation"]
    assert OLD_WORDS not in text and "the same interval" not in d["advice"], (text, d["advice"])
    assert "differ at step 3 alone" in text and "equal at the other 5 steps both recorded" in text, text
    assert "scheduler.step() calls recorded before each optimizer step equal on both sides" in text, text
    assert "sets the rate by hand at those steps" in text and "bound off by one" in text, text
    assert "optimizer was built with" not in text, text  # an explicit trace reads its optimizer at step 1, not as built
    assert d["advice"].startswith("Give step 3 the same rate on both sides"), d["advice"]


def test_without_the_scheduler_steps_recorded_an_isolated_lr_names_the_scheduler_as_a_candidate_too(tmp_path):
    plain = WARMED.changed(record_scheduler_count=False)
    d = compare_traces(*pair(tmp_path, plain, plain.changed(lr_at=(3, plain.lr))))["diagnosis"]
    assert d["kind"] == "optimizer.lr" and d["evidence"]["lr_relation"] == "isolated", d["evidence"]
    assert d["evidence"]["scheduler_steps_equal"] is False
    assert "were not recorded on both sides" in d["explanation"], d["explanation"]
    assert "scheduler stepped otherwise at those steps" in d["explanation"], d["explanation"]
    assert OLD_WORDS not in d["explanation"]


def test_an_lr_apart_from_a_step_on_is_no_isolated_step(tmp_path):
    d = compare_traces(*pair(tmp_path, WARMED, WARMED.changed(lr_from=(3, 0.1))))["diagnosis"]
    assert d["kind"] == "optimizer.lr" and d["evidence"]["lr_relation"] != "isolated", d["evidence"]


# ---------------------------------------------------------------------------------------------
# (b) the world size where both sides average by DDP alone

FACTS_DDP = REPO / "tests" / "hooks_programs" / "facts_ddp.py"


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory):
    """facts_ddp.py twice under the hooks: DDP (the run test_hooks_facts.py reads too, made once per session);
    DDP with every .grad doubled by hand after backward."""
    tmp = tmp_path_factory.mktemp("ninth-lrstep-ddp")
    (tmp / "doubled-out").mkdir()
    cmd = [*_torchrun_prefix(2), FACTS_DDP, "--out", tmp / "doubled-out", "--grad-times", "2"]
    check_ok(run_cmd(cmd, env=recording_env(tmp / "doubled", "doubled", child_env())))
    ddp, _ = recorded_once(tmp_path_factory, "ddp", "facts_ddp.py", "--out", "{out}")
    return {"ddp": ddp, "doubled": tmp / "doubled"}


@pytest.mark.slow
def test_a_gradient_factor_equal_to_the_world_size_is_not_put_on_the_averaging_where_ddp_averages_alike(ddp_runs):
    d = compare_traces(ddp_runs["ddp"], ddp_runs["doubled"])["diagnosis"]
    assert d["kind"] == "gradients.factor", (d["kind"], d["explanation"])
    text = d["explanation"]
    assert "averaged over the world size" not in text and "over the ranks exactly once" not in d["advice"], (
        text,
        d["advice"],
    )
    assert "the world_size is 2 too, but DDP averages alike on both sides" in text, text
    assert "not of the averaging over the ranks: both sides average the gradients over the ranks by DDP alone" in text
    assert d["evidence"]["averaged_by_ddp_alike"] is True, d["evidence"]
