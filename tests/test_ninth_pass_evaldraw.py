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

import functools
import json

from test_diagnosis import make_meta, make_records, pair, run_diagnosis

from ddp_parity.hooks import data as data_hooks

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
    """A rank's hook facts: a training iterator per pass and a loader beside it; with `evaluates`, the evaluation's
    iterator before step 3, which moves the global generator the next training iterator draws its workers' base seed
    from."""
    # a second loader feeding the steps beside the one the backward takes (an unlabeled set's: its batches span
    # steps, none trained from) is no evaluation
    beside = {**_iterator(2, 1, "s0b", False), "dataset": "Unlabeled", "last_batch_before_step": STEPS_PER_PASS}
    items = [_iterator(1, 1, "s0", True), beside]
    if evaluates:
        items.append(_iterator(3, EVALUATED_BEFORE, "s1", False))
    items.append(_iterator(4, STEPS_PER_PASS + 1, "s2" if evaluates else "s1", True))
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


def _crops_facts(base_seeds: tuple, worker_init_fn) -> dict:
    """A rank's hook facts: one training iterator a pass, each drawing its workers' base seed from the global
    generator in the states `base_seeds`, its workers set up as recorded."""
    items = [
        {**_iterator(order, before, state, True), "worker_init_fn": worker_init_fn, "persistent_workers": False}
        for order, (before, state) in enumerate(zip((1, STEPS_PER_PASS + 1), base_seeds), start=1)
    ]
    return {"seeds": SEEDS, "loader_iterators": {"items": items}}


def _crops_records(base_seeds: tuple, moved: bool) -> dict:
    """Every pass replays the first's order (no set_epoch); each batch is made by workers seeded from its
    iterator's base seed (the digest names it: a random crop). With `moved`, rank 1's generator moved after step 2
    (an evaluation drawing from it without a DataLoader), so its second pass drew another base seed."""
    records = make_records(set_epoch=False)
    for rank, recs in records.items():
        for rec in recs:
            drawn = base_seeds[rec["step"] > STEPS_PER_PASS] if rank == RANK else ("s0", "s1")[rec["step"] > 4]
            rec["batch_digest"] = f"crop-{drawn}-{rec['indices']}"
            off = moved and rank == RANK and rec["step"] >= EVALUATED_BEFORE
            rec["rng"] = {"at": "forward", "torch": f"{'e' if off else '0'}{rec['step']:015x}"}
            if moved and rank == RANK and rec["step"] > STEPS_PER_PASS:
                rec["loss"] += 0.125
                rec["param_digest"] = [rec["param_digest"][0] + 0.125, *rec["param_digest"][1:]]
    return records


def _base_seed_moved_by_an_evaluation(tmp_path, worker_init_fn_b):
    """raw's rank 1 drew its second pass's base seed at s1, lightning's at s9 (an evaluation on lightning's rank 1
    drew from the generator without a DataLoader: no iterator more to count); lightning's workers with
    `worker_init_fn_b`."""
    a, b = pair(tmp_path, records_a=_crops_records(("s0", "s1"), False), records_b=_crops_records(("s0", "s9"), True))
    _write(a, {r: _crops_facts(("s0", "s1"), None) for r in (0, 1)}, {0: [EVALUATED_BEFORE - 1]})
    lightning = {0: _crops_facts(("s0", "s1"), worker_init_fn_b), 1: _crops_facts(("s0", "s9"), worker_init_fn_b)}
    _write(b, lightning, {0: [EVALUATED_BEFORE - 1], 1: [EVALUATED_BEFORE - 1]})
    return run_diagnosis(a, b)[1]


def test_workers_set_up_alike_with_a_base_seed_from_another_state_are_not_told_to_seed_alike(tmp_path):
    """The same class where no extra iterator was recorded (the evaluation drew from the generator itself): the
    batch parts at the same indices and both pipelines draw, the workers' settings are recorded alike, and their
    base seed came from the global generator in another state. The tool advised seeding the workers alike (a
    worker_init_fn, generator=, persistent_workers), which both sides did; it names the moved base seed, the ranks
    each side evaluated on, and offers worker seeding only where a setting is recorded apart."""
    d = _base_seed_moved_by_an_evaluation(tmp_path / "alike", None)
    assert (d["kind"], d["step"], d["rank"]) == ("data_pipeline", 5, RANK), (d["kind"], d["explanation"])
    said = d["explanation"]
    assert "are set up alike on both sides (global_draw true, num_workers 2, worker_init_fn null, " in said, said
    assert "Their base seed came from torch's global generator at s1 on raw and s9 on lightning" in said, said
    assert "on rank(s) 1 only lightning evaluates" in said, said
    assert "Seeding the workers otherwise would not change it" in said, said
    assert "seeded alike ([42] on both sides, as the hooks recorded), something drew from it otherwise" in said, said
    assert d["advice"].startswith("Draw from the global generator as often before this DataLoader's iterator"), d
    assert "worker_init_fn" not in d["advice"], d["advice"]
    # a worker_init_fn recorded on one side only: both named, the workers' seeding offered besides
    d = _base_seed_moved_by_an_evaluation(tmp_path / "apart", "lightning.fabric.utilities.seed.pl_worker_init_function")
    assert d["kind"] == "data_pipeline", (d["kind"], d["explanation"])
    assert "seeded otherwise: worker_init_fn null on raw, " in d["explanation"], d["explanation"]
    assert "Then seed the workers alike too: the same worker_init_fn" in d["advice"], d["advice"]


def test_a_worker_init_fn_is_noted_by_its_function_a_partial_by_the_one_it_binds():
    """What the hooks note of a DataLoader's worker_init_fn (the one setting besides the base seed that seeds the
    workers): Lightning's pl_worker_init_function comes bound to the rank by functools.partial."""
    assert data_hooks._callable_name(None) is None
    assert data_hooks._callable_name(_seed_worker) == f"{__name__}._seed_worker"
    assert data_hooks._callable_name(functools.partial(_seed_worker, rank=1)) == f"{__name__}._seed_worker"


def _seed_worker(worker_id: int, rank: int = 0) -> None:
    """A worker_init_fn of the tests' own."""
