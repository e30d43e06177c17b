"""The class hrnet's first pass found (benchmarks/programs/hrnet/SCORE.md, issue 46's eleventh pass): a difference in
what was recorded only, a loss reduced over the ranks in place before it was recorded, taken as the first divergence.
A loop that logs its loss with `dist.reduce(loss, dst=0)` (or all_reduce) on the loss tensor itself, before backward,
records on the destination rank the sum over the ranks; a collective is no autograd op, so the gradients are the
rank's own. The tool took that recorded loss for where the training parts: it blamed the random generators (a
re-seed) on an equal pair, and dismissed a recorded difference of the optimizer (one param group's lr × 10) as
unable to explain "the loss at step 1". And the per-step lr compared group 0's rate only.

The rules now: a loss on a rank that is the sum (or mean) over the ranks of the other side's losses at that step,
where that side made a reduction of one number of its own at that step, is named as that relation (`recording`,
`reduced_in_place`), never a generator cause; such a loss never stands as the training's first divergence (the
step's next quantity apart does); a generator is never blamed for a difference proved to be in the recording; and
the per-step lr covers every param group, naming the group.

Hand-made traces shaped as the hooks of `ddp-parity record` write them (no processes, no training)."""

from __future__ import annotations

import json

import numpy as np
from test_diagnosis import make_meta, make_records, pair, run_diagnosis, trained_apart

from ddp_parity.compare.comparator import compare_runs
from ddp_parity.compare.relations import over_ranks

OWN_REDUCE = {"op": "reduce", "caller": "core.function", "reduce_op": "SUM", "dtype": "float32", "shape": []}
LOGGED = {
    "op": "all_reduce",
    "caller": "lightning.fabric.utilities.distributed",
    "reduce_op": "SUM",
    "dtype": "float32",
}


def groups(lrs: list[float]) -> list[dict]:
    return [{"lr": lr, "momentum": 0.9, "weight_decay": 0.0005} for lr in lrs]


def hooked(records: dict, rng: str, lrs: list[float], reduce_on: int | None) -> dict:
    """Records as the hooks write them: equal batch digests, the generators' digests at the first forward, two
    param groups; where `reduce_on` is a rank, the loop reduces its loss tensor to that rank in place before it is
    recorded (the rank's recorded loss: the sum over the ranks), with its own scalar reduce at every step."""
    for rank, recs in records.items():
        for rec in recs:
            rec["batch_digest"] = f"{rank}{rec['step']:03d}" * 16
            rec["rng"] = {"at": "forward", "torch": rng * 16}
            rec["param_groups"] = groups(lrs)
            rec["lr"] = lrs[0]
            rec["collectives"] = [dict(OWN_REDUCE)] if reduce_on is not None else [dict(LOGGED, shape=[])]
            rec["collectives_count"] = 1
    if reduce_on is not None:
        for i, rec in enumerate(records[reduce_on]):
            rec["loss"] = float(sum(np.float32(r[i]["loss"]) for r in records.values()))
    return records


def reseeded(run, times: int) -> None:
    """The seeds the hooks saw before step 1: the same value `times` times, something drawn between (a model built
    between two seeds: Lightning's re-seed), on every rank."""
    for rank in (0, 1):
        items = [{"before_step": 1, "order": i, "seed": 304, "drawn_since_last_seed": i > 0} for i in range(times)]
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps({"seeds": {"count": times, "items": items}}))


def reduced_pair(tmp_path, lrs_b=(0.01, 0.1), apart_from=None):
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    records_a = hooked(make_records(), "aa", [0.01, 0.1], reduce_on=0)
    records_b = hooked(make_records(), "bb", list(lrs_b), reduce_on=None)
    if apart_from is not None:
        records_b = trained_apart(records_b, apart_from)
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=records_a, records_b=records_b)
    reseeded(a, 1)
    reseeded(b, 2)
    return a, b


def test_sum_and_mean_over_ranks_are_told_from_other_values():
    assert over_ranks(2.4935598373413086, [1.255262017250061, 1.2382978200912476]) == "sum"
    assert over_ranks(1.5, [1.0, 2.0]) == "mean"
    assert over_ranks(1.0, [1.0, 2.0]) is None  # the rank's own value: no relation
    assert over_ranks(2.5, [1.0, None]) is None  # a rank unrecorded: nothing proved


def test_a_loss_reduced_in_place_on_an_equal_pair_is_recording_not_seeds(tmp_path):
    report, d = run_diagnosis(*reduced_pair(tmp_path))
    assert report["verdict"] == "equivalent"
    assert d["kind"] == "recording.measured", d["explanation"]
    assert d["evidence"]["relation"]["kind"] == "reduced_in_place"
    assert "raw's loss on rank 0 is the sum over the 2 ranks of lightning's losses" in d["explanation"].lower()
    assert "reduced over the ranks in place" in d["explanation"]
    warned = " ".join(w["message"] for w in report["warnings"] if w["kind"] == "measured_differs")
    assert warned and "Seed" not in warned and "seed" not in d["advice"].lower()
    assert "reduce a copy" in d["advice"]


def test_a_group_lr_apart_behind_a_reduced_loss_is_the_training_divergence(tmp_path):
    # lightning's second param group at the base lr (raw's × 10): the parameters part after step 1, where raw's
    # rank-0 loss is also the reduced sum
    a, b = reduced_pair(tmp_path, lrs_b=(0.01, 0.01), apart_from=1)
    report, d = run_diagnosis(a, b)
    assert d["category"] != "rng" and "Seed" not in d["advice"], d["explanation"]
    assert d["kind"] == "optimizer.lr_group", d["explanation"]
    assert "param group 1" in d["explanation"] and "raw's is 10 × lightning's" in d["explanation"]
    assert "only as recorded" in d["explanation"]  # the reduced loss said beside, never the cause
    lr = report["per_step"]["lr"]  # every group's rate compared: group 1 apart at every step
    assert lr["equal"] == 0 and lr["first_divergence"]["group"] == 1
    walk = compare_runs(a, b).walk
    assert walk.reduced_in_place["step"] == 1 and walk.reduced_in_place["how"] == "sum"
    assert (walk.first_trained["quantity"], walk.first_trained["step"]) == ("lr", 1)
    assert walk.first_trained["group"] == 1 and (walk.first_trained["a"], walk.first_trained["b"]) == (0.1, 0.01)


def test_a_loss_k_times_the_others_where_every_rank_has_the_same_is_no_reduction_in_place():
    """muon's slip 3 (the eleventh pass): at step 1 every rank's loss is ln(vocab) (a zero-initialised head), and raw
    records the sum of its 2 micro-batches' losses: 2 × lightning's, which is also the sum over the 2 ranks. Equal
    values over the ranks cannot tell a reduction in place from a count (the micro-batches, the world size): the
    factor relation names every count it equals, so no reduction in place is claimed."""
    assert over_ranks(8.317765235900879, [4.1588826179504395, 4.1588826179504395]) is None
    assert over_ranks(4.1588826179504395, [4.1588826179504395, 4.1588826179504395]) is None
    assert over_ranks(2.4935598373413086, [1.255262017250061, 1.2382978200912476]) == "sum"
