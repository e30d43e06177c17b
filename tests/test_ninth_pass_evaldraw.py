"""The class of failure vitft's round 6 found (issue 46, the ninth first pass; docs/programs.md): an extra DataLoader
iteration on one rank, an evaluation one side runs on a rank where the other does not, blamed on the DataLoader
workers' seeding settings. The evaluation's loader (no generator= of its own) drew its workers' base seed from that
rank's global generator, so the next training iterator drew its workers' base seed from another state and the
workers cropped otherwise: the batch parts at the same sample indices. The port's training sampler was a
DistributedSampler subclass (another class name, the same samples), which kept rng.loader_draws silent, and the tool
said data_pipeline and advised seeding the workers alike, which both sides already did. The extra draw is named
first now, with the ranks each side evaluated on, wherever the step's sample indices are recorded equal; hand-made
traces, no process."""

from __future__ import annotations

import json

from test_diagnosis import make_meta, make_records, pair, run_diagnosis

SEEDS = {"items": [{"before_step": 1, "order": 0, "seed": 42}]}
STEPS_PER_PASS = 4  # make_records' steps per epoch: a training iterator begins before steps 1 and 5
EVALUATED_BEFORE = 3  # the evaluation runs after step 2, before step 3
RANK = 1  # the rank one side evaluates on and the other does not


def _iterator(order: int, before_step: int, state: str, trained: bool) -> dict:
    return {
        "before_step": before_step,
        "dataset": "Crops" if trained else "TestSet",
        "global_draw": True,
        "num_workers": 2,
        "order": order,
        "rng_before": state,
        "trained": trained,
    }


def _facts(evaluates: bool) -> dict:
    """A rank's hook facts: a training iterator per pass; with `evaluates`, the evaluation's iterator before step 3,
    which moves the global generator the next training iterator draws its workers' base seed from."""
    items = [_iterator(1, 1, "s0", True)]
    if evaluates:
        items.append(_iterator(2, EVALUATED_BEFORE, "s1", False))
    items.append(_iterator(3, STEPS_PER_PASS + 1, "s2" if evaluates else "s1", True))
    return {"seeds": SEEDS, "loader_iterators": {"items": items}}


def _records(evaluates_on: tuple) -> dict:
    """make_records' steps with a batch digest of their indices and torch's generator digest at each step's start;
    on the ranks in `evaluates_on` the generator moves after step 2 (the evaluation's draw) and the batch of step
    5 on (the next pass's workers seeded from it) is made otherwise, the parameters apart from step 5 on."""
    records = make_records()
    for rank, recs in records.items():
        for rec in recs:
            moved = rank in evaluates_on and rec["step"] >= EVALUATED_BEFORE
            rec["rng"] = {"at": "forward", "torch": f"{'e' if moved else '0'}{rec['step']:015x}"}
            made_otherwise = rank in evaluates_on and rec["step"] > STEPS_PER_PASS
            rec["batch_digest"] = f"{'crop-b' if made_otherwise else 'crop'}-{rec['indices']}"
            if made_otherwise:
                rec["loss"] += 0.125
                rec["param_digest"] = [rec["param_digest"][0] + 0.125, *rec["param_digest"][1:]]
    return records


def _write(run, facts_by_rank: dict, evaluations_by_rank: dict) -> None:
    for rank, facts in facts_by_rank.items():
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))
    for rank, steps in evaluations_by_rank.items():
        lines = [{"step": s, "micro_batch": 0, "epoch": 0, "forwards": 1, "output_digest": "d"} for s in steps]
        (run / "trace" / f"rank{rank}.evaluations.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _evaluated_on_rank_1_by_one_side(tmp_path, sampler_class: str):
    """raw evaluates on rank 0 only, lightning on both ranks; lightning's training sampler has `sampler_class`."""
    meta_b = make_meta("lightning")
    for rank in meta_b["ranks"]:
        rank["sampler"]["class"] = sampler_class
    a, b = pair(tmp_path, meta_b=meta_b, records_a=_records(()), records_b=_records((RANK,)))
    _write(a, {0: _facts(True), 1: _facts(False)}, {0: [EVALUATED_BEFORE - 1]})
    _write(b, {0: _facts(True), 1: _facts(True)}, {0: [EVALUATED_BEFORE - 1], 1: [EVALUATED_BEFORE - 1]})
    return run_diagnosis(a, b)[1]


def test_an_extra_evaluation_draw_is_named_first_where_a_sampler_of_another_class_took_the_same_samples(tmp_path):
    """vitft's round 6: the port's DistributedSampler subclass (set_epoch a no-op) took the same samples, and the
    sampler's other class kept the extra draw unnamed; the tool said data_pipeline and advised seeding the workers
    alike (the same worker_init_fn, generator= and persistent_workers), which nothing recorded set apart."""
    d = _evaluated_on_rank_1_by_one_side(tmp_path, "FirstEpochSampler")
    assert (d["kind"], d["step"], d["rank"]) == ("rng.loader_draws", 5, RANK), (d["kind"], d["explanation"])
    assert "lightning's rank 1 iterated TestSet before step 3 for an evaluation" in d["explanation"], d
    assert "evaluate at the same steps and on the same ranks on both sides" in d["advice"], d["advice"]
    assert "generator=" in d["advice"], d["advice"]
    assert "worker_init_fn" not in d["advice"], d["advice"]


def test_the_ranks_each_side_evaluated_on_and_the_next_iterators_draw_are_said(tmp_path):
    """The records that tell an evaluation on one rank apart: the hooks' evaluations per rank (raw on rank 0, the
    port on both) and the state the next training iterator drew its workers' base seed from, on each side."""
    for sampler_class in ("DistributedSampler", "FirstEpochSampler"):
        d = _evaluated_on_rank_1_by_one_side(tmp_path / sampler_class, sampler_class)
        assert (d["kind"], d["step"], d["rank"]) == ("rng.loader_draws", 5, RANK), (d["kind"], d["explanation"])
        said = d["explanation"]
        assert "rank(s) 0 drew as often on both sides" in said, said
        where = "raw evaluated on rank(s) 0 and lightning on rank(s) 0, 1 (the hooks' evaluations)"
        assert f"{where}; on rank(s) 1 only lightning evaluates" in said, said
        assert "drew its workers' base seed from torch's generator at s1 on raw and s2 on lightning" in said, said
        assert d["evidence"]["evaluated_ranks"] == {"raw": [0], "lightning": [0, 1]}, d["evidence"]
