"""Two differences of one sampler, only the first named; a seed set again with the same value called 'the seeds
differ' (issue 46, twelfth pass: pyg_gin's round 1 and slip 3, benchmarks/programs/pyg_gin/SCORE.md).

The script's DistributedSampler had seed 0 and its set_epoch counted the epochs from 1; Lightning's injected one had
seed 12345 and epoch 0. The tool named the seed alone, and its fix alone left step 1's samples apart (seed 0 + epoch
0 gives other indices than seed 0 + epoch 1). And beside another batch size, `[12345]` against `[12345, 12345]`
(Lightning seeding again with the same value) was said as "The seeds differ as well".

The rule now: where the sampler seeds differ at the step the samples part, every other setting a DistributedSampler's
order is a function of (the epoch the step's pass drew at, shuffle, drop_last, num_replicas, rank) recorded apart is
named beside it; where the records allow, the order is recomputed to say which of them part the step's indices (the
fix covers all of those, and none that changes nothing); and a global seed set again with the same value is said as
that. On a loop of the tests' own (tests/hooks_programs/epoch_loop.py) recorded by the hooks, never the corpus'."""

from __future__ import annotations

import json

import pytest
from conftest import PYTHON, REPO, check_ok, child_env, run_cmd

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env

PROGRAM = REPO / "tests" / "hooks_programs" / "epoch_loop.py"
VARIANTS = {
    "base": (),
    # another sampler seed, set_epoch counted from 1, and drop_last (one replica: it drops nothing)
    "port": ("--sampler-seed", "5", "--first-epoch", "1", "--drop-last"),
    # the port with the seed made equal alone: what the seed's fix alone would give
    "seed_fixed": ("--first-epoch", "1", "--drop-last"),
    # half the batch, torch.manual_seed(0) called twice
    "halved": ("--batch-size", "2", "--seeds", "2"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """epoch_loop.py, one process, 2 steps, once per variant, recorded by the hooks."""
    tmp = tmp_path_factory.mktemp("sampler2")
    out = {}
    for name, args in VARIANTS.items():
        env = recording_env(tmp / name, name, child_env())
        check_ok(run_cmd([PYTHON, PROGRAM, "--steps", "2", *args], env=env))
        out[name] = tmp / name
    return out


def _diagnosis(runs, a: str, b: str) -> dict:
    return compare_traces(runs[a], runs[b])["diagnosis"]


def _step_1_indices(run) -> list:
    return json.loads((run / "trace" / "rank0.jsonl").read_text().splitlines()[0])["indices"]


def test_every_sampler_setting_that_parts_the_samples_is_named_beside_the_seed(runs):
    """pyg_gin r1: the seed and the epoch both part step 1's indices; both are named side by side, the fix covers
    both, and drop_last, recorded apart but changing none of these indices (recomputed), is said so and not
    advised."""
    d = _diagnosis(runs, "base", "port")
    assert (d["kind"], d["step"], d["rank"]) == ("sampler_seed", 1, 0), (d["kind"], d["explanation"])
    said = d["explanation"]
    headline = (
        "differ in seed (base: seed 0, port: seed 5) and the epoch of step 1's pass (base: epoch 0, port: epoch 1)"
    )
    assert f"{headline}, so they order the dataset otherwise" in said.split(". ")[0], said  # the headline
    assert "drew its order at epoch 0 on base and at epoch 1 on port" in said, said
    assert d["evidence"]["sampler_order_apart"] == {
        "seed": {"base": 0, "port": 5},
        "epoch": {"base": 0, "port": 1},
        "drop_last": {"base": False, "port": True},
    }, d["evidence"]
    recomputed = d["evidence"]["sampler_order_recomputed"]
    assert (recomputed["dataset_length"], recomputed["needed"]) == (24, ["seed", "epoch"]), recomputed
    assert "each still apart from base's" in said and "with base's seed and epoch together, base's" in said, said
    assert "Made equal, drop_last (False vs True) would change none of these indices" in said, said
    advice = d["advice"]
    assert "the same seed" in advice and "sampler.set_epoch" in advice, advice
    assert "base gave 0 and port 1" in advice and "drop_last" not in advice, advice


def test_the_recomputed_order_is_what_the_seeds_fix_alone_gives(runs):
    """The port with its sampler seed made equal and nothing else: still apart at step 1 (its epoch), and the
    indices it records there are those the finding recomputed for the seed's fix alone."""
    d = _diagnosis(runs, "base", "port")
    alone = d["evidence"]["sampler_order_recomputed"]["alone"]
    assert alone["seed"] == _step_1_indices(runs["seed_fixed"]), alone
    assert alone["drop_last"] == _step_1_indices(runs["port"]), alone  # drop_last alone: the port's own indices
    fixed = _diagnosis(runs, "base", "seed_fixed")
    assert (fixed["kind"], fixed["step"]) == ("data_order.epoch", 1), (fixed["kind"], fixed["explanation"])


def test_a_seed_set_again_with_the_same_value_is_never_said_to_differ(runs):
    """pyg_gin slip 3: beside another batch size, the global seed [0] against [0, 0] is the same seed set once
    more, not seeds that differ."""
    d = _diagnosis(runs, "base", "halved")
    assert d["kind"] == "data_order.batch_size", (d["kind"], d["explanation"])
    said = d["explanation"]
    assert "differ as well" not in said, said
    assert "seeded again with the same value on halved (rank(s) 0: base seeded [0], halved [0, 0])" in said, said
