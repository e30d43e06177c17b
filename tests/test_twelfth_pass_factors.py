"""The class annotated_transformer's slip 1 found (benchmarks/programs/annotated_transformer/SCORE.md, 'Tool bugs
found' row 1, issue 46's twelfth pass): a loss factor that several recorded counts equal, pinned on one. The port
divided each micro-batch's loss by its accumulation count (2, also the world size); the loop's first optimizer step
follows one micro-batch, every later one two. The tool read the micro-batches per step from the first step only (1),
so the accumulation was no candidate, and it said "2 is the world_size: lightning divides its loss by the world size
although DDP already averages", fix "do not divide the loss by the world size": a division nothing made. Both sides
had recorded each backward root's divisions (`loss_divisors`): one side's roots carry a ÷2 the other's do not.

The rules now: the micro-batches per step are read from the steps both sides recorded alike (most of them), not from
the first step alone; where the roots' divisions show one extra division by the factor on one side, that division is
the mechanism, said with every count it equals (the accumulation, the world size), never one of them alone, and the
fix removes it (or makes it on the other side).

tests/hooks_programs/seed_ranks.py on two ranks (gloo) recorded by the hooks: accumulation 2, each micro-batch's loss
divided by 2 on one side and summed undivided on the other."""

from __future__ import annotations

import pytest
from conftest import REPO, _torchrun_prefix, check_ok, child_env, run_cmd

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env

PROGRAM = REPO / "tests" / "hooks_programs" / "seed_ranks.py"
FIRST_ALONE = ("--accumulate", "2", "--first-accumulate", "1")  # step 1 after one micro-batch, steps 2, 3 after two
VARIANTS = {
    "summed1": (*FIRST_ALONE, "--undivided"),
    "divided1": FIRST_ALONE,
    "summed": ("--accumulate", "2", "--undivided"),
    "divided": ("--accumulate", "2"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """seed_ranks.py on two ranks, one run per variant, each recorded by the hooks."""
    tmp = tmp_path_factory.mktemp("factors")
    out = {}
    for name, args in VARIANTS.items():
        check_ok(run_cmd([*_torchrun_prefix(2), PROGRAM, *args], env=recording_env(tmp / name, name, child_env())))
        out[name] = tmp / name
    return out


def diagnosis(runs, a: str, b: str) -> dict:
    return compare_traces(runs[a], runs[b])["diagnosis"]


def _assert_division_named(d: dict, a: str, b: str) -> None:
    """The extra division on b's roots is the mechanism, with both counts it equals; never the world size alone."""
    assert (d["kind"], d["step"]) == ("loss.factor", 1), (d["kind"], d["explanation"])
    said, advice = d["explanation"], d["advice"]
    assert said.startswith(f"{a}'s loss is 2.000 × {b}'s"), said
    assert f"{b} divides each micro-batch's loss by 2 once more than {a}" in said, said
    assert f"loss_divisors at step 1: {a} ÷1, {b} ÷2" in said, said
    # every count 2 equals is named, the accumulation (the micro-batches of the steps that take 2) first
    assert "the micro-batches per step" in said and "the world size" in said, said
    assert "the records cannot tell which" in said, said
    assert "although DDP already averages" not in said, said
    relation = d["evidence"]["relation"]
    assert relation["counts"] == ["micro-batches per step=2", "world_size=2"], relation
    # no Lightning loop recorded on either side: its own division is no candidate
    assert "Lightning" not in said and "twice" not in said, said
    assert advice.startswith(f"On {b}, remove the extra division of each micro-batch's loss by 2"), advice
    assert "do not divide the loss by the world size" not in advice, advice


@pytest.mark.slow
def test_a_loss_divided_by_the_accumulation_where_the_first_step_takes_one_micro_batch(runs):
    """annotated_transformer's shape: the micro-batches 1 at step 1, 2 after. Before: "2 is the world_size: divided1
    divides its loss by the world size (2) although DDP already averages", counts ["world_size=2"]."""
    d = diagnosis(runs, "summed1", "divided1")
    _assert_division_named(d, "summed1", "divided1")
    assert "(2 at steps 2, 3; 1 at step 1)" in d["explanation"], d["explanation"]


@pytest.mark.slow
def test_a_loss_divided_by_the_accumulation_equal_to_the_world_size(runs):
    """Accumulation 2 at every step on 2 ranks. Before: three mechanisms side by side, one of them Lightning dividing
    twice although no side recorded a Lightning loop, and the roots' divisions unread."""
    d = diagnosis(runs, "summed", "divided")
    _assert_division_named(d, "summed", "divided")
    assert "(2 at every step)" in d["explanation"], d["explanation"]
