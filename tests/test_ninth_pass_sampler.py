"""The ninth pass's class `sampler` (issue 46, found on BasicSR, docs/programs.md): a sampler of the program's own
(a `torch.utils.data.Sampler` subclass that is no DistributedSampler, with a generator of its own seeded by the epoch
and a `set_epoch`) was not recorded as built nor its set_epoch calls, and a sample-order difference at step 1 was put
on the seeds (`rng.seed`: "seed + rank on both") on a rank whose last seed was the same on both sides.

Now the hooks note any sampler a DataLoader is built with (its class, length and plain attributes) and any sampler's
set_epoch; and where the samples part on a rank whose last seed is the same on both sides while the recorded samplers
differ, the finding names the samplers side by side (their epochs' lengths in steps from the records), never the
seed; where torch's generator was apart at step 1 as well, both are named, with how to tell them apart.
On hand-made traces and a loop of the tests' own (tests/hooks_programs/own_sampler_loop.py), never the corpus'."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import PYTHON, REPO, check_ok, child_env, run_cmd
from test_diagnosis import WORLD, make_meta, make_records, pair, run_diagnosis, trained_apart

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env

DATASET, BATCH, STEPS = 8, 2, 10


def _enlarged_indices(ratio: int, epoch: int, rank: int) -> list[int]:
    """A sampler of the program's own: the data set `ratio` times over, permuted by a generator seeded by the epoch,
    sharded by rank (as BasicSR's EnlargedSampler)."""
    total = DATASET * ratio
    order = torch.randperm(total, generator=torch.Generator().manual_seed(epoch)).tolist()
    return [i % DATASET for i in order][rank:total:WORLD]


def _records(ratio: int, torch_state: str) -> dict:
    """STEPS steps per rank, each epoch the sampler's shard in batches of BATCH: ratio × 2 steps an epoch."""
    records = make_records(epochs=3)
    per_epoch = DATASET * ratio // WORLD // BATCH
    for rank, recs in records.items():
        for rec in recs[:STEPS]:
            epoch, at = divmod(rec["step"] - 1, per_epoch)
            rec["epoch"] = epoch
            rec["indices"] = _enlarged_indices(ratio, epoch, rank)[at * BATCH : (at + 1) * BATCH]
            rec["rng"] = {"at": "forward", "torch": f"{torch_state}{rec['step']:012x}"}
        del recs[STEPS:]
    return records


def _meta(side: str, ratio: int) -> dict:
    meta = make_meta(side)
    for r, facts in enumerate(meta["ranks"]):
        size = DATASET * ratio
        facts["sampler"] = {"class": "EnlargedSampler", "num_replicas": WORLD, "num_samples": size // WORLD}
        facts["sampler"] |= {"rank": r, "total_size": size}
    return meta


def _seeded(run, seeds_of) -> None:
    for rank in range(WORLD):
        items = [{"before_step": 1, "order": 2 * i, "seed": s} for i, s in enumerate(seeds_of(rank))]
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps({"seeds": {"items": items}}))


def _enlarged_pair(tmp_path, lightning_state: str):
    """raw: the sampler over the data set twice, each rank seeded with its rank once; lightning: the same sampler
    without the ratio, every rank seeded alike twice, then with its rank (its last seed raw's)."""
    a, b = pair(
        tmp_path,
        meta_a=_meta("raw", 2),
        records_a=_records(2, "0000"),
        meta_b=_meta("lightning", 1),
        records_b=trained_apart(_records(1, lightning_state)),
    )
    _seeded(a, lambda rank: [rank])
    _seeded(b, lambda rank: [0, 0, rank])
    return a, b


def test_other_samplers_under_the_same_last_seed_are_named_never_the_seed(tmp_path):
    """BasicSR's slip 1: the port's EnlargedSampler without the enlarge ratio; the tool said rng.seed, "seed + rank
    on both", though rank 0's seed is 0 on both sides and its indices part at step 1 all the same."""
    _, d = run_diagnosis(*_enlarged_pair(tmp_path, "0000"))
    assert (d["kind"], d["step"], d["rank"]) == ("data_order", 1, 0), (d["kind"], d["explanation"])
    assert "ranks[0].sampler.num_samples: 8 vs 4" in d["explanation"], d["explanation"]
    assert "ranks[0].sampler.total_size: 16 vs 8" in d["explanation"], d["explanation"]
    said = "epoch 1 begins at step 5 on raw and at step 3 on lightning (4 and 2 steps an epoch)"
    assert said in d["explanation"], d["explanation"]
    assert d["evidence"]["next_epoch_begins"] == {"raw": 5, "lightning": 3}, d["evidence"]
    assert "seed" not in d["advice"].lower() and "EnlargedSampler" in d["advice"], d["advice"]
    assert "DistributedSampler(" not in d["advice"], d["advice"]  # no DistributedSampler for a sampler of its own
    assert "global generator was in another state" not in d["explanation"]  # recorded equal at step 1: not named


def test_a_generator_apart_beside_other_samplers_is_named_with_how_to_tell_them_apart(tmp_path):
    """BasicSR's round 1: torch's generator was in another state at step 1 on rank 0 too (the port's re-seed and
    sanity check), under the same last seed: the records cannot say whether the program's own sampler draws from it,
    so both are named, and how to tell them apart."""
    _, d = run_diagnosis(*_enlarged_pair(tmp_path, "ffff"))
    assert (d["kind"], d["step"], d["rank"]) == ("data_order", 1, 0), (d["kind"], d["explanation"])
    assert "ranks[0].sampler.num_samples: 8 vs 4" in d["explanation"], d["explanation"]
    said = "the records do not say whether the EnlargedSampler (both sides') draws from it"
    assert said in d["explanation"] and "build the same sampler alike on both sides" in d["explanation"]


def test_another_seed_on_the_rank_that_parts_is_still_the_seed(tmp_path):
    """The step-aside is only for a rank whose last seed is the same: rank 0 seeded otherwise stays rng.seed's."""
    a, b = _enlarged_pair(tmp_path, "ffff")
    _seeded(b, lambda rank: [0, 0, rank + 5])
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "rng.seed", (d["kind"], d["explanation"])


PROGRAM = REPO / "tests" / "hooks_programs" / "own_sampler_loop.py"


@pytest.mark.slow
def test_a_sampler_of_the_programs_own_is_recorded_with_its_set_epoch_calls(tmp_path):
    """own_sampler_loop.py recorded with the enlarge ratio 2 and 1: each side's sampler of its own is in `samplers`
    (class, length, plain attributes) and in meta.json, its set_epoch calls noted (a subclass's calling its base's
    once), and the comparison names the samplers, not the seed."""
    runs = {}
    for ratio in (2, 1):
        runs[ratio] = tmp_path / f"ratio{ratio}"
        env = recording_env(runs[ratio], f"ratio{ratio}", child_env())
        check_ok(run_cmd([PYTHON, PROGRAM, "--steps", "6", "--ratio", str(ratio)], env=env))
    facts = json.loads((runs[2] / "trace" / "rank0.hooks.json").read_text())
    built = {s["class"]: s for s in facts["samplers"]["items"]}
    own = built["EnlargedOrder"]
    assert (own["num_samples"], own["ratio"], own["total_size"]) == (16, 2, 16), own
    calls = [(c["sampler"], c["epoch"], c.get("sampler_built")) for c in facts["set_epoch"]["items"]]
    assert calls[:2] == [("EnlargedOrder", 0, own["order"]), ("EvaluationShard", 0, built["EvaluationShard"]["order"])]
    assert len(calls) == 2 * math.ceil(6 / 4), calls  # one per call: the subclass's and its base's are one
    meta = json.loads((runs[2] / "meta.json").read_text())
    assert meta["ranks"][0]["sampler"] | {"ratio": 2} == meta["ranks"][0]["sampler"], meta["ranks"][0]
    d = compare_traces(runs[2], runs[1])["diagnosis"]
    assert d["kind"] == "data_order" and "ranks[0].sampler.ratio: 2 vs 1" in d["explanation"], d["explanation"]
    assert "seed" not in d["advice"].lower(), d["advice"]


def test_a_set_epoch_of_the_programs_own_is_called_as_the_program_calls_it():
    """The hooks wrap the set_epoch of any sampler class a DataLoader is given: a program's own that names its
    argument otherwise, called by keyword, must run as written (the wrapper once took `epoch` by name and raised a
    TypeError inside the program's training)."""
    from ddp_parity.hooks import data

    class OwnSampler:
        def __init__(self):
            self.ep = None

        def set_epoch(self, ep):
            self.ep = ep

    data._watch_set_epoch(OwnSampler)
    sampler = OwnSampler()
    sampler.set_epoch(ep=3)
    assert sampler.ep == 3
    sampler.set_epoch(4)
    assert sampler.ep == 4
