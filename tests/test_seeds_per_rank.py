"""Issue 46's seed classes, seen on public programs: each on programs of the tests' own.

1. the seeds the hooks recorded are read on every rank and said per rank ("rank 1: a seeded [43], b [42]"), never
   only on the rank of the first divergence;
2. another number of samples per optimizer step (another accumulation, another batch size) is named before any seed
   or sampler seed, the seeds that differ as well said beside it;
3. a sentence about the initial weights says what the recorded init digests (init_params_sha256) say;
4. the advice never asks to make equal what both sides recorded equal (a global seed recorded alike on every rank).

The two-rank program (tests/hooks_programs/seed_ranks.py) is recorded by the hooks with no line changed, under
torchrun on gloo; the explicit recording is the tests' own loop (tests/loops_of_our_own.py).
"""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import REPO, _torchrun_prefix, check_ok, child_env, run_cmd
from loops_of_our_own import Loop, pair

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env
from ddp_parity.trace import META_FILE

PROGRAM = REPO / "tests" / "hooks_programs" / "seed_ranks.py"
VARIANTS = {
    "base": (),
    "again": (),
    "byrank": ("--seed-by-rank",),
    "reseed": ("--reseed",),
    "reacc2": ("--reseed", "--accumulate", "2"),
    "ss1": ("--sampler-seed", "1"),
    "ss2": ("--sampler-seed", "2"),
    "ss2byrank": ("--sampler-seed", "2", "--seed-by-rank"),
    "built_first": ("--build-before-seed",),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """seed_ranks.py on two ranks, one run per variant, each recorded by the hooks."""
    tmp = tmp_path_factory.mktemp("seed-ranks")
    out = {}
    for name, args in VARIANTS.items():
        cmd = [*_torchrun_prefix(2), PROGRAM, *args]
        check_ok(run_cmd(cmd, env=recording_env(tmp / name, name, child_env())))
        out[name] = tmp / name
    return out


def diagnosis(runs, a: str, b: str) -> dict:
    return compare_traces(runs[a], runs[b])["diagnosis"]


@pytest.mark.slow
def test_a_seed_per_rank_on_one_side_is_said_rank_by_rank(runs):
    """1. seed + rank against one seed: rank 0 seeds alike, rank 1 otherwise; said per rank, the advice for
    rank 1 only."""
    d = diagnosis(runs, "base", "byrank")
    assert (d["kind"], d["step"], d["rank"]) == ("rng.seed", 1, 1), (d["kind"], d["explanation"])
    said = d["explanation"]
    assert "rank 1: base seeded [42], byrank [43]" in said and "rank(s) 0: both seeded alike [42]" in said, said
    assert "Seed rank(s) 1 with the same value" in d["advice"], d["advice"]


@pytest.mark.slow
def test_seeds_read_on_every_rank_where_rank_0_alone_was_re_seeded(runs):
    """1. seed + rank against a re-seed: on rank 0 (where the runs part) the same value set more often, on rank 1
    another value. Read on rank 0 alone this was a re-seed; every rank's seeds are said, rank 1's other value
    named."""
    d = diagnosis(runs, "byrank", "reseed")
    assert d["kind"] == "rng.seed", (d["kind"], d["explanation"])
    said = d["explanation"]
    assert "rank 1: byrank seeded [43], reseed [42, 42]" in said, said
    assert "rank 0: byrank seeded [42], reseed [42, 42]" in said and "On rank(s) 0 the values are the same" in said


@pytest.mark.slow
def test_equal_seeds_on_every_rank_name_no_seed(runs):
    report = compare_traces(runs["base"], runs["again"])
    assert report["verdict"] == "equivalent", report["diagnosis"]["explanation"]


@pytest.mark.slow
def test_another_accumulation_is_named_before_a_re_seed(runs):
    """2. One side re-seeds and accumulates 2 micro-batches per step: the runs part at step 1 because a step takes
    twice the samples, whatever the seeds; the accumulation is the headline, the seeds said beside it: the same
    value set once more (pyg_gin's slip 3), never seeds that differ."""
    d = diagnosis(runs, "base", "reacc2")
    assert d["kind"] == "data_order.accumulation", (d["kind"], d["explanation"])
    assert "base stepped its optimizer after 1 micro-batch(es) and reacc2 after 2" in d["explanation"]
    assert "seeded again with the same value on reacc2" in d["explanation"], d["explanation"]
    assert "differ as well" not in d["explanation"] and "seed" not in d["advice"].lower(), d["advice"]


def test_another_number_of_samples_per_step_is_named_before_a_sampler_seed(tmp_path):
    """2. Explicit recording, no micro-batches recorded: the sampler seeds differ and each step of one side takes
    twice the samples (an accumulation of 2). Named as the samples per step, both counts side by side, never as the
    sampler's seed."""
    sampler = {"class": "DistributedSampler", "shuffle": True, "num_replicas": 1, "rank": 0, "drop_last": False}
    base = Loop(sampler=sampler | {"seed": 3})
    d = compare_traces(*pair(tmp_path, base, base.changed(accumulate=2, order_seed=4, sampler=sampler | {"seed": 4})))[
        "diagnosis"
    ]
    assert d["kind"] == "data_order.batch_size", (d["kind"], d["explanation"])
    assert "consumed 4 samples on reference and 8 on changed" in d["explanation"], d["explanation"]
    assert "accumulate_grad_batches" in d["advice"] and "seed_everything" not in d["advice"], d["advice"]


@pytest.mark.slow
def test_the_initial_weights_are_said_as_their_digests_say(runs):
    """3. Other sampler seeds, and one side seeds each rank with seed + rank: rank 1 builds other weights before DDP
    gives it rank 0's, rank 0's are equal. Never "the initial weights differ as well"; where every rank's digests
    are equal, said so."""
    d = diagnosis(runs, "ss1", "ss2byrank")
    assert d["kind"] == "sampler_seed", (d["kind"], d["explanation"])
    assert "differ as well" not in d["explanation"], d["explanation"]
    assert "Rank 0's initial weights are equal on both sides" in d["explanation"], d["explanation"]
    d = diagnosis(runs, "ss1", "ss2")
    assert "The initial weights are equal on every rank" in d["explanation"], d["explanation"]


@pytest.mark.slow
def test_no_advice_to_pin_a_seed_both_sides_recorded_alike(runs):
    """4. Only the samplers' seeds differ; both sides seeded 42 on every rank: the advice seeds the samplers, never
    seed_everything."""
    d = diagnosis(runs, "ss1", "ss2")
    assert d["kind"] == "sampler_seed", (d["kind"], d["explanation"])
    assert "seed_everything" not in d["advice"] and "the same seed" in d["advice"], d["advice"]
    assert "The global seeds are the same on both sides" in d["explanation"], d["explanation"]


@pytest.mark.slow
def test_initial_states_apart_only_by_a_frozen_copy_one_side_holds_are_equal_weights(runs, tmp_path):
    """Other sampler seeds, and one side's recorded model also holds a frozen EMA copy (a LightningModule holding
    the model and its EMA, DiT's and I-JEPA's ports): its whole-state init digests differ from the other side's,
    yet every parameter both hold is equal. Never "the initial weights differ", never "one cause, two symptoms"."""
    port = tmp_path / "ss2"
    shutil.copytree(runs["ss2"], port)
    meta = json.loads((port / META_FILE).read_text())
    for facts in meta["ranks"]:
        facts["init_parameters_by_name"]["ema.0.weight"] = "0" * 16
        facts["init_params_sha256"] = facts["init_parameters_sha256"] = "f" * 64
    meta["params_frozen"] = [*meta.get("params_frozen", []), "ema.0.weight"]
    (port / META_FILE).write_text(json.dumps(meta))
    d = compare_traces(runs["ss1"], port)["diagnosis"]
    assert d["kind"] == "sampler_seed", (d["kind"], d["explanation"])
    assert "differ as well" not in d["explanation"], d["explanation"]
    assert "The initial weights are equal on every rank" in d["explanation"], d["explanation"]


@pytest.mark.slow
def test_ranks_apart_under_one_seed_say_the_model_was_built_before_it(runs):
    """The eighth first pass (vqvae2's slip 3, a LightningModule built before seed_everything): on one side the
    ranks built other weights although each of them recorded the same seed before step 1, the other side's ranks
    alike. A seed puts every rank's generator in one state, so weights drawn apart were drawn before it: said, and
    the fix is to build after the seed on that side, never the list of every way an RNG state can differ."""
    d = diagnosis(runs, "base", "built_first")
    assert d["kind"] == "init", (d["kind"], d["explanation"])
    said = d["explanation"]
    assert "every rank of built_first seeded the same value before step 1" in said, said
    assert "drawn before that seed" in said and "another seed, seeding after" not in said, said
    assert d["advice"].startswith("On built_first, build the model after the seed"), d["advice"]
