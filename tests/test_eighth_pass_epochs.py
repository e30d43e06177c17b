"""The class fixmatch's round 2 found (benchmarks/programs/fixmatch/SCORE.md): an iterator restarted before it ran
out, read as a sampler epoch apart. Lightning's loop ended its epoch after limit_train_batches of the loader's
batches and made new iterators (set_epoch(1) on its samplers), where the authors' loop kept its iterator until it
ran out; the tool said the sides "draw from other epochs", advised set_epoch counted alike (which cannot put a side
back at its place in the pass), called Lightning's start "another" though both started at epoch 0, and listed the
first four set_epoch calls only. Now an iterator dropped with batches left (fewer `batches` than its loader's
`length`) and a new one made before the step where the samples part is the cause, the epochs apart its consequence;
every set_epoch call up to the step is listed, per sampler where the hooks say which. Hand-made traces and a loop of
the tests' own (tests/hooks_programs/epoch_loop.py), never the corpus program."""

from __future__ import annotations

import json
import random

import pytest
from conftest import PYTHON, REPO, check_ok, child_env, run_cmd
from test_diagnosis import BATCH, DATASET, WORLD, make_records, pair, run_diagnosis, trained_apart

from ddp_parity.hooks import recording_env

PER_RANK = DATASET // WORLD  # the samples a DistributedSampler gives each rank: 32, 4 batches of BATCH
SAMPLER = {"class": "DistributedSampler", "drop_last": False, "num_replicas": WORLD, "seed": 42, "shuffle": True}


def _records_of_passes(batches_per_pass: int, steps: int = 8, first_epoch: int = 0) -> dict:
    """make_records' shards, each pass over them cut after `batches_per_pass` batches and the next pass at the
    sampler's next epoch: what a loop whose epoch is shorter than its loader trains on."""
    out: dict = {r: [] for r in range(WORLD)}
    for step in range(1, steps + 1):
        epoch, i = first_epoch + (step - 1) // batches_per_pass, (step - 1) % batches_per_pass
        order = list(range(DATASET))
        random.Random(42 + epoch).shuffle(order)
        for r in range(WORLD):
            shard = order[r::WORLD]
            rec = {"step": step, "epoch": epoch, "loss": 2.5 - 0.01 * step - 0.001 * r, "lr": 0.001}
            rec.update(grad_norm=0.5 + 0.001 * step, time_s=0.01, indices=shard[i * BATCH : (i + 1) * BATCH])
            rec["param_digest"] = [-4.5 + 0.01 * step, 0.62 + 0.001 * step]
            out[r].append(rec)
    return out


def _facts(pass_starts: list[int], batches: list[int], length: int | None, built: bool = False) -> dict:
    """The hooks' facts of a loop that made a training iterator before each step of `pass_starts`, the iterator
    giving `batches` batches, its sampler set to its pass's epoch just before; `length` recorded or not (records of
    an older recorder); `built`: the calls and iterators name their sampler (its `samplers` entry), with an
    evaluation sampler set each pass too."""
    iterators, calls, order = [], [], 10
    for epoch, (start, n) in enumerate(zip(pass_starts, batches)):
        calls.append({"before_step": start, "epoch": epoch, "order": order, "sampler": "DistributedSampler"})
        if built:
            calls[-1]["sampler_built"] = 1
            calls.append({**calls[-1], "order": order + 1, "sampler_built": 2})
        sampler = {**SAMPLER, "epoch": epoch, "num_samples": PER_RANK}
        item = {"before_step": start, "order": order + 2, "dataset": "Shards", "batches": n, "trained": True}
        item.update(sampler=sampler, num_workers=0, global_draw=True, indices_sha256="")
        if length is not None:
            item["length"] = length
        if built:
            item["sampler_built"] = 1
        iterators.append(item)
        order += 3
    facts = {"loader_iterators": {"count": len(iterators), "items": iterators}}
    facts["set_epoch"] = {"count": len(calls), "items": calls}
    if built:
        samplers = [{**SAMPLER, "num_samples": PER_RANK, "before_step": 1, "order": 1}]
        samplers.append({**samplers[0], "shuffle": False, "order": 2})
        facts["samplers"] = {"count": 2, "items": samplers}
    return facts


def _write_facts(run, facts: dict) -> None:
    for rank in range(WORLD):
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))


def _pair_cut_after(tmp_path, length, built: bool = False):
    """raw keeps its iterator until it runs out (4 batches, a new one before step 5); lightning makes a new one
    after 2 (before steps 3, 5, 7): the samples part at step 3."""
    a, b = pair(tmp_path, records_b=trained_apart(_records_of_passes(2), from_step=3))
    _write_facts(a, _facts([1, 5], [4, 4], length, built))
    _write_facts(b, _facts([1, 3, 5, 7], [2, 2, 2, 2], length, built))
    return a, b


@pytest.mark.parametrize("length", [4, None], ids=["length recorded", "length from the sampler and batch"])
def test_an_iterator_dropped_with_batches_left_is_the_cause_not_the_epochs(tmp_path, length):
    """fixmatch r2: the first finding named the epochs apart and asked for set_epoch counted alike, '{side} starts
    at another'. The records say more: lightning's iterator gave 2 of the 4 batches its loader holds before a new one
    was made before step 3, raw's gave all 4; both started at epoch 0."""
    _, d = run_diagnosis(*_pair_cut_after(tmp_path, length))
    assert (d["kind"], d["step"]) == ("data_order.restarted", 3), (d["kind"], d["explanation"])
    said = d["explanation"]
    assert said.startswith("At step 3 rank 0 consumed other samples: before step 3 lightning made a new iterator"), said
    assert "had given 2 of the 4 batches its loader holds" in said, said
    assert "it gave 4 of its 4 batches before a new one was made before step 5" in said, said
    assert "raw records epoch 0 and lightning epoch 1, both having started at epoch 0" in said, said
    assert "limit_train_batches" in said and "`break`" in said, said  # the records cannot tell them apart
    # every call up to the step (the sampler unnamed in these records), none after it
    assert "raw: set_epoch(0) before step 1; lightning: set_epoch(0) before step 1, set_epoch(1) before step 3" in said
    assert d["evidence"]["restarted"] == {
        "side": "lightning",
        **{"dataset": "Shards", "made": 1, "batches": 2, "length": 4, "anew": 3},
    }
    advice = d["advice"]
    assert advice.startswith("Take the same number of batches from each iterator before a new one is made"), advice
    assert "starts at another" not in advice and "set_epoch" not in advice, advice


def test_iterators_restarted_at_the_same_steps_on_both_sides_are_not_where_they_part(tmp_path):
    """Both loops end their epoch after 2 of 4 batches: a pass cut short on both is no difference; the samples part
    for another reason (here lightning's sampler one epoch ahead from the start) and the epochs say so."""
    a, b = pair(
        tmp_path,
        records_a=_records_of_passes(2),
        records_b=trained_apart(_records_of_passes(2, first_epoch=1)),
    )
    _write_facts(a, _facts([1, 3, 5, 7], [2, 2, 2, 2], 4))
    _write_facts(b, _facts([1, 3, 5, 7], [2, 2, 2, 2], 4))
    _, d = run_diagnosis(a, b)
    assert d["kind"] != "data_order.restarted", d["explanation"]


def test_a_side_is_said_to_start_at_another_epoch_only_where_it_did(tmp_path):
    """data_order.epoch's fix said '{side} starts at another' whatever the first records said. Both starting at
    epoch 0 and parting later (lightning sets epoch 2 where raw sets 1, no iterators recorded), the fix says they
    start alike; lightning starting at epoch 1, it names the start."""
    later = make_records()
    for r, recs in later.items():  # the second epoch recorded as epoch 2, its order drawn from seed + 2
        order = list(range(DATASET))
        random.Random(42 + 2).shuffle(order)
        for rec in recs:
            if rec["epoch"] == 1:
                i = (rec["step"] - 1) % 4
                rec.update(epoch=2, indices=order[r::WORLD][i * BATCH : (i + 1) * BATCH])
    _, d = run_diagnosis(*pair(tmp_path / "later", records_b=trained_apart(later, from_step=5)))
    assert (d["kind"], d["step"]) == ("data_order.epoch", 5), (d["kind"], d["explanation"])
    assert "starts at another" not in d["advice"] and "both start at epoch 0" in d["advice"], d["advice"]
    _, d = run_diagnosis(*pair(tmp_path / "first", records_b=trained_apart(_records_of_passes(4, first_epoch=1))))
    assert d["kind"] == "data_order.epoch", (d["kind"], d["explanation"])
    assert "lightning starts at another (epoch 1 vs 0)" in d["advice"], d["advice"]


def test_every_set_epoch_call_up_to_the_step_is_listed_per_sampler(tmp_path):
    """fixmatch r2 listed the first four calls of each side, so lightning's two set_epoch(1) before step 5 were
    left out and its validation sampler's set_epoch(0) read as a training one. Where the hooks name the sampler a
    call acts on (`sampler_built`), the calls are listed per sampler, with what the iterators say of it."""
    _, d = run_diagnosis(*_pair_cut_after(tmp_path, 4, built=True))
    assert d["kind"] == "data_order.restarted", (d["kind"], d["explanation"])
    calls = d["evidence"]["set_epoch"]["lightning"]
    assert calls == (
        "on DistributedSampler #1 (32 samples, steps trained from its loader) set_epoch(0) before step 1, "
        "set_epoch(1) before step 3 and on DistributedSampler #2 (32 samples, shuffle off) set_epoch(0) before "
        "step 1, set_epoch(1) before step 3"
    ), calls


EPOCH_LOOP = REPO / "tests" / "hooks_programs" / "epoch_loop.py"


@pytest.mark.slow
def test_the_hooks_record_each_loaders_length_and_which_sampler_each_call_sets(tmp_path):
    """epoch_loop.py recorded twice, its iterator kept until it runs out, then cut after 4 of its 6 batches:
    the hooks record `length` (len(loader)) beside the batches each iterator gave and `sampler_built` on iterators
    and set_epoch calls, and the comparison names the pass cut short."""
    runs = {}
    for name, cut in (("kept", 0), ("cut", 4)):
        env = recording_env(tmp_path / name, name, child_env())
        check_ok(run_cmd([PYTHON, EPOCH_LOOP, "--epoch-batches", str(cut)], env=env))
        runs[name] = tmp_path / name
    facts = json.loads((runs["cut"] / "trace" / "rank0.hooks.json").read_text())
    iterators = facts["loader_iterators"]["items"]
    assert [(i["before_step"], i["batches"], i["length"]) for i in iterators] == [(1, 4, 6), (5, 4, 6)], iterators
    built = {s["order"]: s["shuffle"] for s in facts["samplers"]["items"]}
    assert {i["sampler_built"] for i in iterators} == {o for o, shuffle in built.items() if shuffle}
    assert {c["sampler_built"] for c in facts["set_epoch"]["items"]} == set(built)
    _, d = run_diagnosis(runs["kept"], runs["cut"])
    assert (d["kind"], d["step"]) == ("data_order.restarted", 5), (d["kind"], d["explanation"])
    assert "had given 4 of the 6 batches its loader holds" in d["explanation"], d["explanation"]
