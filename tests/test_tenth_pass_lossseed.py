"""The tenth pass's class `lossseed` (issue 46, found on timm's slip 3, the same shape as BasicSR's slip 1): a loss
apart at step 1 at equal batches and equal weights was put on the seeds (`rng.seed`: "seed + rank on both"), though
the rank that parts had the same last seed on both sides (one side seeding every rank alike, then again with its
rank, the other seed + rank once: the seeds of an equivalent pair) and the other values stood on another rank.

Now the seeds are never named where the batches at the parting step are recorded equal (batch_digest) and the rank
that parts has the same last seed on both sides: the generator holds that seed's value alone after it, and the batch
drawn from it is the same, so no seed value parts that rank; what parts is computed from the batch (the loss, its
targets). On hand-made traces of the tests' own, never the corpus'."""

from __future__ import annotations

import json

from test_diagnosis import WORLD, make_meta, make_records, pair, run_diagnosis, trained_apart

STEPS = 6


def _records(loss_shift: float) -> dict:
    """STEPS steps per rank, each with the same batch digest and generator digests on both sides; the loss moved by
    `loss_shift` from step 1 on (another criterion computing from the same batch)."""
    records = make_records()
    for rank, recs in records.items():
        del recs[STEPS:]
        for rec in recs:
            rec["batch_digest"] = f"{rank:02x}{rec['step']:062x}"
            rec["rng"] = {"at": "forward", "torch": f"{rank:04x}{rec['step']:012x}", "numpy": f"{rec['step']:016x}"}
            rec["loss"] += loss_shift
    return records


def _seeded(run, seeds_of) -> None:
    """The hooks' seeds before step 1 on each rank, in order."""
    for rank in range(WORLD):
        items = [{"before_step": 1, "order": 2 * i, "seed": s} for i, s in enumerate(seeds_of(rank))]
        for later in items[1:]:
            later["drawn_since_last_seed"] = False  # Lightning seeding again: nothing drawn between
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps({"seeds": {"items": items}}))


def _loss_apart_pair(tmp_path, lightning_seeds):
    """raw: every rank seeded with its rank once; lightning: seeded by `lightning_seeds(rank)`. The batches and the
    generators' digests equal at every step on both ranks, the loss apart from step 1 on both."""
    a, b = pair(
        tmp_path,
        meta_a=make_meta("raw"),
        records_a=_records(0.0),
        meta_b=make_meta("lightning"),
        records_b=trained_apart(_records(0.004)),
    )
    _seeded(a, lambda rank: [rank])
    _seeded(b, lightning_seeds)
    return a, b


def test_a_loss_apart_at_equal_batches_under_the_same_last_seed_is_never_the_seed(tmp_path):
    """timm's slip 3: rank 0 parts in the loss at step 1 with the same batch; its seeds are 0 on both sides (three
    times on lightning), rank 1's last seed is 1 on both. The tool said rng.seed, "seed + rank on both": the seeds
    of the equivalent pair, advice already followed."""
    _, d = run_diagnosis(*_loss_apart_pair(tmp_path, lambda rank: [0, 0, rank]))
    assert (d["step"], d["rank"]) == (1, 0), (d["kind"], d["explanation"])
    assert not d["kind"].startswith("rng"), (d["kind"], d["explanation"])
    assert "seeded with other values" not in d["explanation"], d["explanation"]
    assert "seed" not in d["advice"].lower(), d["advice"]
    # unwatched: the loss among the candidates, with what tells them apart (the kept run's watch names it alone)
    assert "loss" in [c["cause"] for c in d["candidates"]], (d["kind"], d["candidates"])


def test_another_last_seed_on_the_rank_that_parts_is_still_the_seed(tmp_path):
    """The step-aside is only for a rank whose last seed is the same: rank 0 seeded last with 5 on lightning (0 on
    raw) may draw its dropout otherwise from the same batch, and stays rng.seed's."""
    _, d = run_diagnosis(*_loss_apart_pair(tmp_path, lambda rank: [0, 0, rank + 5]))
    assert (d["kind"], d["step"], d["rank"]) == ("rng.seed", 1, 0), (d["kind"], d["explanation"])


def test_the_same_last_seed_with_the_batch_apart_is_left_to_the_seed_causes(tmp_path):
    """Where the batch parts at step 1 the step-aside does not hold (the batch is drawn after the seeds): the seeds
    that differ on another rank are still said, as before."""
    a, b = _loss_apart_pair(tmp_path, lambda rank: [0, 0, rank])
    for rank in range(WORLD):
        path = b / "trace" / f"rank{rank}.jsonl"
        recs = [json.loads(line) for line in path.read_text().splitlines()]
        recs[0]["batch_digest"] = "f" * 64
        path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "rng.seed", (d["kind"], d["explanation"])
