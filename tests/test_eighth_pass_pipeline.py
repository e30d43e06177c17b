"""The class vqvae2's slip 2 found (benchmarks/programs/vqvae2/SCORE.md): a batch apart at equal sample indices was
always put on random draws from DataLoader workers seeded differently, and the fix said to seed the workers, where
nothing in the pipeline drew (a Normalize left out of one side's transforms) and the generator and worker-seed
difference it cited was as present in an equal pair. A side whose sampler replays the same indices under other
worker seeds shows whether its pipeline draws: the same tensors again, it draws nothing those seeds feed; other
tensors, it draws. Random draws are blamed only where a draw is shown; where nothing shows either, both are named
with what tells them apart."""

from __future__ import annotations

import hashlib
import json

from test_diagnosis import EPOCHS, STEPS_PER_EPOCH, WORLD, make_meta, make_records, run_diagnosis, write_run


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _with_batches(records: dict, transform: str, draws: bool = False) -> dict:
    """Each batch's digest made of its indices by `transform`; with `draws`, of the epoch's draws too (a random
    augmentation under workers seeded anew each epoch)."""
    for recs in records.values():
        for rec in recs:
            rec["batch_digest"] = _digest(transform, rec["indices"], rec["epoch"] if draws else None)
    return records


def _loader_iterators(side: str) -> dict:
    """One training iterator an epoch, with 2 workers whose base seed each draws from torch's global generator in
    another state (as the hooks record it): each epoch's workers are seeded apart."""
    items = [
        {
            "before_step": epoch * STEPS_PER_EPOCH + 1,
            "dataset": "Folder",
            "global_draw": True,
            "num_workers": 2,
            "order": epoch,
            "rng_before": f"{side}{epoch}".ljust(16, "0"),
            "trained": True,
        }
        for epoch in range(EPOCHS)
    ]
    return {"loader_iterators": {"count": len(items), "items": items}}


def _pair(tmp_path, records_a: dict, records_b: dict):
    runs = []
    for side, records in (("raw", records_a), ("lightning", records_b)):
        run = write_run(tmp_path / side, make_meta(side), records)
        for rank in range(WORLD):
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(_loader_iterators(side)))
        runs.append(run)
    return runs


def test_a_deterministic_transform_apart_is_never_put_on_worker_seeding(tmp_path):
    """vqvae2 slip 2: each side's sampler replays its first epoch's order, and each side makes the same tensors of
    the same indices in both epochs under other worker seeds: neither pipeline draws. The sides' transforms differ
    (a normalisation left out on one)."""
    a = _with_batches(make_records(set_epoch=False), "normalised")
    b = _with_batches(make_records(set_epoch=False), "in [0, 1]")
    _, d = run_diagnosis(*_pair(tmp_path, a, b))
    assert (d["category"], d["step"]) == ("data_pipeline", 1), d
    assert "deterministic step of the data pipeline differs" in d["explanation"], d["explanation"]
    assert "steps 1 and 5" in d["explanation"], d["explanation"]
    assert "worker_init_fn" not in d["advice"] and "Seed" not in d["advice"], d["advice"]
    assert "transforms" in d["advice"], d["advice"]
    shown = d["evidence"]["pipeline_draws"]
    assert {side: (s["draws"], s["made_again"]) for side, s in shown.items()} == {
        "raw": (False, STEPS_PER_EPOCH),
        "lightning": (False, STEPS_PER_EPOCH),
    }


def test_a_pipeline_shown_to_draw_is_put_on_worker_seeding(tmp_path):
    """The control: the same indices made into other tensors in the next epoch on a side: its pipeline draws, and
    workers seeded otherwise are a cause the records allow."""
    a = _with_batches(make_records(set_epoch=False), "augmented", draws=True)
    b = _with_batches(make_records(set_epoch=False), "augmented otherwise", draws=True)
    _, d = run_diagnosis(*_pair(tmp_path, a, b))
    assert (d["category"], d["step"]) == ("data_pipeline", 1), d
    assert "its pipeline draws" in d["explanation"], d["explanation"]
    assert "worker_init_fn" in d["advice"] and "workers=True" in d["advice"], d["advice"]


def test_a_batch_apart_with_no_batch_made_again_names_both_and_how_to_tell_them_apart(tmp_path):
    """No index made again (the samplers set_epoch'd each epoch): the records cannot tell a random augmentation under
    other worker seeds from a deterministic transform apart. Both are named, and the comparison that separates them."""
    a = _with_batches(make_records(), "normalised")
    b = _with_batches(make_records(), "in [0, 1]")
    _, d = run_diagnosis(*_pair(tmp_path, a, b))
    assert (d["category"], d["step"]) == ("data_pipeline", 1), d
    assert "cannot tell which of two" in d["explanation"], d["explanation"]
    assert "random augmentation" in d["explanation"] and "deterministic step" in d["explanation"], d["explanation"]
    assert "pipeline_draws" not in d["evidence"], d["evidence"]
    assert d["advice"].startswith("Tell them apart"), d["advice"]
    assert "generator=" in d["advice"] and "workers=True" in d["advice"], d["advice"]


def test_workers_seeded_alike_across_epochs_show_nothing(tmp_path):
    """A batch made again by iterators that found the generator in the same state (the workers seeded alike) shows
    nothing of a draw: it is no evidence either way."""
    a = _with_batches(make_records(set_epoch=False), "normalised")
    b = _with_batches(make_records(set_epoch=False), "in [0, 1]")
    runs = _pair(tmp_path, a, b)
    for run in runs:
        for rank in range(WORLD):
            path = run / "trace" / f"rank{rank}.hooks.json"
            facts = json.loads(path.read_text())
            for item in facts["loader_iterators"]["items"]:
                item["rng_before"] = "same".ljust(16, "0")
            path.write_text(json.dumps(facts))
    _, d = run_diagnosis(*runs)
    assert "cannot tell which of two" in d["explanation"], d["explanation"]


def test_one_side_shown_to_draw_nothing_names_a_random_transform_of_the_other_beside_a_deterministic_one(tmp_path):
    """One side shows its pipeline draws nothing, the other shows nothing: seeding the workers alike cannot be the
    fix; a deterministic step apart, or a random transform on the silent side only, can."""
    a = _with_batches(make_records(set_epoch=False), "normalised")
    b = _with_batches(make_records(set_epoch=False), "in [0, 1]")
    runs = _pair(tmp_path, a, b)
    for rank in range(WORLD):
        path = runs[1] / "trace" / f"rank{rank}.hooks.json"
        facts = json.loads(path.read_text())
        for item in facts["loader_iterators"]["items"]:
            item["global_draw"] = False  # a generator= of its own: its state is not recorded
        path.write_text(json.dumps(facts))
    _, d = run_diagnosis(*runs)
    assert "or lightning, whose records show no batch made again" in d["explanation"], d["explanation"]
    assert list(d["evidence"]["pipeline_draws"]) == ["raw"], d["evidence"]
    assert "worker_init_fn" not in d["advice"], d["advice"]


def test_one_side_shown_to_draw_and_the_other_shown_not_to_is_a_random_transform_on_one_side(tmp_path):
    """A random augmentation on one side only: that side's batches made again are other tensors, the other's the
    same. Seeding the workers alike cannot make them equal; the transform is named on the side that draws."""
    a = _with_batches(make_records(set_epoch=False), "plain")
    b = _with_batches(make_records(set_epoch=False), "augmented", draws=True)
    _, d = run_diagnosis(*_pair(tmp_path, a, b))
    assert "a random transform applied on lightning only" in d["explanation"], d["explanation"]
    assert d["advice"].startswith("Make the same tensors"), d["advice"]
    assert {s: v["draws"] for s, v in d["evidence"]["pipeline_draws"].items()} == {"raw": False, "lightning": True}
