"""The class var's round 3 found (benchmarks/programs/var/SCORE.md): an iterator re-made at the loop's epoch over a
sampler that keeps its own order (an infinite batch sampler given as batch_sampler=, no set_epoch), read as
"another epoch of a DistributedSampler". The authors' loop took len(loader) batches per epoch from one iterator kept
across its epochs; Lightning's fit loop made a new iterator at its epoch, and the sampler handed the new iterator
the order it held, so Lightning's second epoch replayed its first. The tool said `data_order.epoch`, "call its
set_epoch(epoch) yourself" and "the side at epoch 1 draws another epoch's permutation", for a sampler without
set_epoch whose order had restarted. Now a new iterator after a whole pass on one side, against one going past its
loader's length on the other, is `data_order.remade`: the order is said to restart where the new iterator repeats
its side's own samples, and no finding advises set_epoch for a sampler the hooks recorded without one
(`has_set_epoch`). Hand-made traces and a loop of the tests' own (tests/hooks_programs/infinite_loop.py), never the
corpus program."""

from __future__ import annotations

import json
import random

import pytest
from conftest import PYTHON, REPO, check_ok, child_env, run_cmd
from test_diagnosis import BATCH, DATASET, WORLD, pair, run_diagnosis, trained_apart

from ddp_parity.hooks import recording_env

PASS = DATASET // WORLD // BATCH  # the batches one pass of each rank's shard holds: len(loader), 4
STEPS = 2 * PASS


def _order(seed: int) -> list[int]:
    order = list(range(DATASET))
    random.Random(seed).shuffle(order)
    return order


def _records(orders: list[int], epochs: list[int]) -> dict:
    """One record per step on every rank: pass p (of PASS steps) takes its batches from the permutation seeded
    `orders[p]`, sharded by rank, and records `epochs[p]`."""
    out: dict = {r: [] for r in range(WORLD)}
    for step in range(1, STEPS + 1):
        p, i = (step - 1) // PASS, (step - 1) % PASS
        shard_of = _order(orders[p])
        for r in range(WORLD):
            shard = shard_of[r::WORLD]
            rec = {"step": step, "epoch": epochs[p], "loss": 2.5 - 0.01 * step - 0.001 * r, "lr": 0.001}
            rec.update(grad_norm=0.5 + 0.001 * step, time_s=0.01, indices=shard[i * BATCH : (i + 1) * BATCH])
            rec["param_digest"] = [-4.5 + 0.01 * step, 0.62 + 0.001 * step]
            out[r].append(rec)
    return out


def _facts(passes: list[tuple[int, int]], has_set_epoch: bool | None) -> dict:
    """The hooks' facts of a loop over a batch sampler of its own that made a training iterator before each step
    of `passes` ((before_step, batches) each), no set_epoch called; `has_set_epoch` recorded or not (records of an
    older recorder)."""
    sampler = {"class": "LoopingBatchSampler", "batch_sampler": True, "epoch": None, "num_samples": PASS}
    if has_set_epoch is not None:
        sampler["has_set_epoch"] = has_set_epoch
    items = []
    for order, (start, n) in enumerate(passes, 10):
        item = {"before_step": start, "order": order, "dataset": "Shards", "batches": n, "length": PASS}
        item.update(sampler=dict(sampler), num_workers=0, global_draw=True, indices_sha256="", trained=True)
        items.append(item)
    return {"loader_iterators": {"count": len(items), "items": items}}


def _write_facts(run, facts: dict) -> None:
    for rank in range(WORLD):
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))


def _kept_against_remade(tmp_path, lightning_orders: list[int], has_set_epoch: bool | None):
    """raw takes both epochs from one iterator (made before step 1, 8 batches of a loader of 4: its sampler goes on
    to the next order); lightning makes a new one at its epoch (before steps 1 and 5, 4 batches each)."""
    a, b = pair(
        tmp_path,
        records_a=_records([42, 43], [0, 0]),
        records_b=trained_apart(_records(lightning_orders, [0, 1]), from_step=PASS + 1),
    )
    _write_facts(a, _facts([(1, STEPS)], has_set_epoch))
    _write_facts(b, _facts([(1, PASS), (PASS + 1, PASS)], has_set_epoch))
    return a, b


@pytest.mark.parametrize("has_set_epoch", [False, None], ids=["recorded without set_epoch", "unrecorded"])
def test_an_iterator_remade_at_the_loops_epoch_that_replays_its_order_is_the_cause(tmp_path, has_set_epoch):
    """var r3: the first finding named the epochs apart, "another epoch's permutation", and asked for set_epoch on a
    sampler without one. The records say more: lightning's new iterator after a whole pass, raw's going on past its
    loader's length, lightning's samples at steps 5-8 its own at steps 1-4."""
    _, d = run_diagnosis(*_kept_against_remade(tmp_path, [42, 42], has_set_epoch))
    assert (d["kind"], d["step"]) == ("data_order.remade", 5), (d["kind"], d["explanation"])
    said = d["explanation"]
    assert said.startswith("At step 5 rank 0 consumed other samples: before step 5 lightning made a new iterator"), said
    assert "having given the 4 batches its loader holds, while raw kept the iterator it made before step 1" in said
    assert "it gave 8 batches, past the 4 its loader holds (len(loader))" in said, said
    assert "lightning's samples at steps 5-8 are its own at steps 1-4: the order restarted" in said, said
    assert "another epoch's permutation" not in said and "call its set_epoch" not in said, said
    assert "raw records epoch 0 and lightning epoch 1, both having started at epoch 0" in said, said
    assert "The set_epoch calls recorded up to step 5: raw: none; lightning: none." in said, said
    assert "drew one number from lightning's global generator" in said, said
    if has_set_epoch is False:
        assert "LoopingBatchSampler has no set_epoch (the hooks' record of it)" in said, said
    else:
        assert "Whether LoopingBatchSampler has a set_epoch is unrecorded" in said, said
    assert d["evidence"]["remade"] == {
        "side": "lightning",
        **{"dataset": "Shards", "made": 1, "batches": PASS, "length": PASS, "anew": PASS + 1, "global_draw": True},
    }
    assert d["evidence"]["kept"] == {"side": "raw", "made": 1, "batches": STEPS, "length": PASS, "anew": None}
    assert d["evidence"]["replayed"] == {"side": "lightning", "steps": [5, 6, 7, 8], "as_at": [1, 2, 3, 4]}
    advice = d["advice"]
    assert advice.startswith("Take each epoch's batches the same way on both sides: on lightning, keep one iterator")
    assert "set_epoch" not in advice, advice


def test_a_remade_iterator_with_an_order_of_its_own_is_not_said_to_restart(tmp_path):
    """The same loops, lightning's sampler drawing another order for its new iterator: the iterators still part the
    sides, but nothing replayed, so nothing is said to restart."""
    _, d = run_diagnosis(*_kept_against_remade(tmp_path, [42, 44], False))
    assert (d["kind"], d["step"]) == ("data_order.remade", 5), (d["kind"], d["explanation"])
    said = d["explanation"]
    assert "the order restarted" not in said and "replayed" not in d["evidence"], said
    assert "lightning's samples at step 5 are not its own at step 1: its new iterator drew an order of its own" in said


@pytest.mark.parametrize("has_set_epoch", [True, False, None], ids=["with", "without", "unrecorded"])
def test_set_epoch_is_advised_only_for_a_sampler_that_has_one(tmp_path, has_set_epoch):
    """Both loops make their iterators at the same steps (no pass parts them), lightning's records one epoch ahead
    from the start over a batch sampler of its own no set_epoch reached: data_order.epoch. Its note and its fix ask
    for set_epoch only where the hooks recorded the sampler has one, and say so where they did not record it."""
    a, b = pair(
        tmp_path,
        records_a=_records([42, 43], [0, 1]),
        records_b=trained_apart(_records([43, 44], [1, 2])),
    )
    for run in (a, b):
        _write_facts(run, _facts([(1, PASS), (PASS + 1, PASS)], has_set_epoch))
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("data_order.epoch", 1), (d["kind"], d["explanation"])
    said, advice = d["explanation"], d["advice"]
    if has_set_epoch is False:
        assert "call its set_epoch" not in said and "set_epoch(epoch)" not in advice, (said, advice)
        assert "this one has no set_epoch (the hooks' record of it)" in said, said
        assert "The sampler raw and lightning trained from (LoopingBatchSampler) has no set_epoch" in said, said
        assert advice.startswith("Begin the passes over the training loader at the same steps on both sides"), advice
        assert d["evidence"]["samplers_without_set_epoch"] == ["raw", "lightning"]
    elif has_set_epoch is None:
        assert "if it has a set_epoch (the records do not say), call it yourself" in said, said
    else:
        assert "call its set_epoch(epoch) yourself before each pass's iterator is made" in said, said
        assert "call sampler.set_epoch(epoch) on both sides" in advice, advice


@pytest.mark.parametrize("has_set_epoch", [True, False], ids=["with", "without"])
def test_a_replayed_epoch_asks_for_set_epoch_only_where_the_sampler_has_one(tmp_path, has_set_epoch):
    """Both loops make an iterator at each epoch; lightning's sampler gives its second the first's order again,
    raw's draws another: `set_epoch`. Its fix calls set_epoch only where lightning's sampler was not recorded without
    one."""
    a, b = pair(
        tmp_path,
        records_a=_records([42, 43], [0, 1]),
        records_b=trained_apart(_records([42, 42], [0, 1]), from_step=PASS + 1),
    )
    _write_facts(a, _facts([(1, PASS), (PASS + 1, PASS)], True))
    _write_facts(b, _facts([(1, PASS), (PASS + 1, PASS)], has_set_epoch))
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("set_epoch", 5), (d["kind"], d["explanation"])
    if has_set_epoch:
        assert d["advice"].startswith("On lightning: call sampler.set_epoch(epoch) at the start of every epoch")
        return
    assert "set_epoch(epoch)" not in d["advice"], d["advice"]
    assert d["advice"].startswith("On lightning: draw each epoch's order anew as the other side does"), d["advice"]
    assert "lightning's sampler (LoopingBatchSampler) has no set_epoch" in d["explanation"], d["explanation"]


INFINITE_LOOP = REPO / "tests" / "hooks_programs" / "infinite_loop.py"


@pytest.mark.slow
def test_the_hooks_record_whether_a_sampler_has_set_epoch_and_the_remade_iterator_is_named(tmp_path):
    """infinite_loop.py recorded twice: its one iterator kept across two epochs, then made anew at each epoch. The
    hooks record `has_set_epoch: false` for its batch sampler of its own, and the comparison names the iterator
    re-made at the loop's epoch, the order restarted, and advises no set_epoch."""
    runs = {}
    for name, flags in (("raw", []), ("lightning", ["--per-epoch"])):
        env = recording_env(tmp_path / name, name, child_env())
        check_ok(run_cmd([PYTHON, INFINITE_LOOP, *flags], env=env))
        runs[name] = tmp_path / name
    facts = json.loads((runs["lightning"] / "trace" / "rank0.hooks.json").read_text())
    iterators = facts["loader_iterators"]["items"]
    assert [(i["before_step"], i["batches"], i["length"]) for i in iterators] == [(1, 3, 3), (4, 3, 3)], iterators
    assert all(i["sampler"]["has_set_epoch"] is False and i["sampler"]["batch_sampler"] for i in iterators)
    _, d = run_diagnosis(runs["raw"], runs["lightning"])
    assert (d["kind"], d["step"]) == ("data_order.remade", 4), (d["kind"], d["explanation"])
    assert "lightning's samples at steps 4-6 are its own at steps 1-3: the order restarted" in d["explanation"]
    assert "InfiniteBatchSampler has no set_epoch" in d["explanation"], d["explanation"]
    assert "set_epoch" not in d["advice"], d["advice"]
