"""The class ViT-pytorch's round 4 found (benchmarks/programs/vitft/SCORE.md): a step whose micro-batches span an
epoch's end, read as a difference of the samplers' epochs. The authors' loop accumulated by `(i + 1) % n` over each
epoch's batches with no step nor zero_grad at the epoch's end, so an epoch's left-over micro-batch joined the next
epoch's first step (recorded in the epoch where it ends); Lightning's automatic accumulation steps at every epoch's
last batch. The records' epochs parted (1 vs 0) at that step while both samplers were at epoch 0, and the tool said
"the sides draw from other epochs of their samplers' order", fix "call sampler.set_epoch(epoch) on both sides".
Now the micro-batches a step accumulated are compared before the epochs, a sampler-epoch difference is read from the
hooks' iterators (or the set_epoch calls), never from a record's `epoch` alone, and the carried left-over against a
step at the epoch's end is named, with its fix on either side. Hand-made traces of the tests' own, never the corpus
program."""

from __future__ import annotations

import json
import random

import pytest
from test_diagnosis import WORLD, make_meta, pair, run_diagnosis, trained_apart

MICRO = 4  # samples a micro-batch
PER_EPOCH = 5  # micro-batches a rank and epoch: one left over under an accumulation of 2
ACCUMULATE = 2
DATASET = MICRO * PER_EPOCH * WORLD
SAMPLER = {"class": "DistributedSampler", "drop_last": False, "num_replicas": WORLD, "seed": 42, "shuffle": True}


def _shard(epoch: int, rank: int) -> list[int]:
    order = list(range(DATASET))
    random.Random(42 + epoch).shuffle(order)
    return order[rank::WORLD]


def _accumulated(carry: bool, set_epoch: bool, steps: int = 5) -> tuple[dict, dict]:
    """(records per rank, the hooks' facts) of a loop that accumulates ACCUMULATE micro-batches by `(i + 1) % n` over
    each pass's batches: `carry`, no step at a pass's end (the left-over joins the next pass's first step); else a step
    at every pass's last batch too (Lightning's accumulate_grad_batches). `set_epoch`: set_epoch(pass) before each pass
    (else never: every pass at sampler epoch 0). The step's record carries the pass it ends in as its epoch."""
    records: dict = {r: [] for r in range(WORLD)}
    iterators, calls, order = [], [], 10
    pending: dict = {r: [] for r in range(WORLD)}
    micro, step, epoch = 0, 0, 0
    while step < steps:
        sampler_epoch = epoch if set_epoch else 0
        made = step + 1
        if set_epoch:
            calls.append({"before_step": made, "epoch": epoch, "order": order, "sampler": "DistributedSampler"})
            calls[-1]["sampler_built"] = 1
        item = {"before_step": made, "order": order + 1, "dataset": "Shards", "trained": True, "length": PER_EPOCH}
        item.update(sampler={**SAMPLER, "epoch": sampler_epoch, "num_samples": DATASET // WORLD}, sampler_built=1)
        item.update(num_workers=0, global_draw=True, indices_sha256=f"{sampler_epoch:064d}")
        iterators.append(item)
        order += 2
        given = 0
        for i in range(PER_EPOCH):
            given += 1
            for r in range(WORLD):
                pending[r].append(_shard(sampler_epoch, r)[i * MICRO : (i + 1) * MICRO])
            micro += 1
            item.update(batches=given, last_batch_before_step=step + 1)
            if (i + 1) % ACCUMULATE == 0 or (not carry and i + 1 == PER_EPOCH):
                step += 1
                for r in range(WORLD):
                    rec = {"step": step, "epoch": epoch, "loss": 2.5 - 0.01 * step - 0.001 * r, "lr": 0.001}
                    rec.update(grad_norm=0.5 + 0.001 * step, time_s=0.01, micro_batches=len(pending[r]))
                    rec.update(indices=[x for mb in pending[r] for x in mb])
                    rec["param_digest"] = [-4.5 + 0.01 * step, 0.62 + 0.001 * step]
                    records[r].append(rec)
                    pending[r] = []
                if step == steps:
                    break
        epoch += 1
    facts = {"loader_iterators": {"count": len(iterators), "items": iterators}}
    facts["samplers"] = {"count": 1, "items": [{**SAMPLER, "num_samples": DATASET // WORLD, "order": 1}]}
    facts["set_epoch"] = {"count": len(calls), "items": calls}
    return records, facts


def _hooked_pair(tmp_path, set_epoch_raw: bool):
    """raw carries its epoch's left-over into the next epoch's first step, lightning steps at the epoch's end and
    sets its sampler's epoch each pass; raw sets it each pass too, or never (ViT-pytorch's train.py)."""
    raw, raw_facts = _accumulated(carry=True, set_epoch=set_epoch_raw)
    port, port_facts = _accumulated(carry=False, set_epoch=True)
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=raw, records_b=trained_apart(port, 3))
    for run, facts in ((a, raw_facts), (b, port_facts)):
        for rank in range(WORLD):
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))
    return a, b


@pytest.mark.parametrize("set_epoch_raw", [False, True], ids=["raw never sets the epoch", "both set it each pass"])
def test_a_left_over_micro_batch_carried_over_is_named_not_the_samplers_epochs(tmp_path, set_epoch_raw):
    """vitft r4: raw's step 3 is epoch 0's 5th micro-batch and epoch 1's 1st and 2nd (micro_batches 3, epoch 1),
    lightning's epoch 0's 5th alone (micro_batches 1, epoch 0, its indices the first of raw's). Before:
    data_order.epoch, "the sides draw from other epochs of their samplers' order", fix set_epoch on both sides."""
    _, d = run_diagnosis(*_hooked_pair(tmp_path, set_epoch_raw))
    assert (d["kind"], d["step"]) == ("data_order.accumulation", 3), (d["kind"], d["explanation"])
    said, advice = d["explanation"], d["advice"]
    assert "raw records step 3 in epoch 1 and lightning in epoch 0 (each loop's own epoch count)" in said, said
    assert "At step 3 raw stepped its optimizer after 3 micro-batch(es) and lightning after 1" in said, said
    assert "raw's step 3 took the last batch of its pass over Shards made before step 1 (all 5 of its batches" in said
    assert "lightning's step 3 ended with the last of the 5 batches of its pass made before step 1" in said, said
    assert "lightning's 4 samples at step 3 are the first 4 of raw's 12" in said, said
    assert "other epochs of their samplers' order" not in said, said
    assert d["evidence"]["micro_batches"] == {"raw": 3, "lightning": 1}
    # both ways to match, neither a set_epoch (which changes no boundary)
    assert "manual optimization" in advice and "each epoch's last batch" in advice, advice
    assert "set_epoch" not in advice, advice
    if set_epoch_raw:  # the step's last pass began at sampler epoch 1 on raw: the samplers are never said alike
        assert "the samplers' epochs are not apart" not in said, said
        assert "drew its order with its sampler at epoch 1 on raw and 0 on lightning" in said, said
    else:  # both passes at sampler epoch 0: the epochs apart are the loops'
        assert "drew its order with its sampler at epoch 0 on both sides" in said, said
        assert "the samplers' epochs are not apart" in said and "raw: none" in said, said
        assert "calling set_epoch alike changes no boundary" in said, said


def test_loop_epochs_apart_with_the_samplers_epochs_recorded_alike_are_no_set_epoch_difference(tmp_path):
    """The rule beside it: lightning counts its loop's epochs from 1, both sides' passes draw at sampler epoch 0 (the
    hooks' iterators), and lightning's samples are another permutation. A record's epoch is the loop's: no
    data_order.epoch, no set_epoch advice; the epochs are said as the loops' beside the samplers'."""
    raw, facts = _accumulated(carry=False, set_epoch=False, steps=4)
    port = json.loads(json.dumps(raw))
    for recs in port.values():
        for rec in recs:
            rec["epoch"] += 1
            rec["indices"] = sorted(rec["indices"])
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=raw, records_b=trained_apart(port))
    for run in (a, b):
        for rank in range(WORLD):
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))
    _, d = run_diagnosis(a, b)
    assert d["kind"] != "data_order.epoch" and d["category"] == "data_order", (d["kind"], d["explanation"])
    said = d["explanation"]
    assert "raw records step 1 in epoch 0 and lightning in epoch 1 (each loop's own epoch count)" in said, said
    assert "the samplers' epochs are not apart" in said, said
    assert "set_epoch" not in d["advice"] and "so are their epochs" in d["advice"], d["advice"]
