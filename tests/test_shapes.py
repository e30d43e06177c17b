"""Issue 46 classes d and e: every count a factor equals is named, and the mechanism comes from the shape
of the evidence (one parameter or all, the order the indices follow, how two lr series relate), on pairs
trained by the tests' own loop (tests/loops_of_our_own.py) and on hand-made series."""

from __future__ import annotations

from loops_of_our_own import Loop, pair
from test_diagnosis import make_meta, make_records, run_diagnosis, trained_apart
from test_diagnosis import pair as hand_made_pair

from ddp_parity import compare_traces
from ddp_parity.compare import relations

CONFIG = {"data": {"batch_size": 4}, "accumulate_grad_batches": 3}


def test_a_factor_of_3_at_an_accumulation_of_3_is_named():
    base = Loop(accumulate=3, config=CONFIG)
    # the loss not divided by the accumulation: the recorded loss and the gradients are 3 × the other side's
    steps = list(range(1, 5))
    relation = relations.factor_relation(
        "loss",
        ("a", "b"),
        steps,
        [3.0, 6.0, 9.0, 12.0],
        [1.0, 2.0, 3.0, 4.0],
        {"accumulate_grad_batches": 3, "micro-batches per step": 3, "world_size": 2, "batch_size": 4},
    )
    assert relation.counts == ("accumulate_grad_batches=3", "micro-batches per step=3"), relation
    assert base.accumulate == 3


def test_an_unscaled_accumulation_of_3_names_the_count_end_to_end(tmp_path):
    base = Loop(accumulate=3, config=CONFIG)
    d = compare_traces(*pair(tmp_path, base, base.changed(divide_loss=False)))["diagnosis"]
    assert d["kind"] == "loss.factor", d["explanation"]
    assert "3 is the accumulate_grad_batches" in d["explanation"], d["explanation"]


def test_a_factor_two_counts_fit_names_both_with_their_mechanisms(tmp_path):
    """World size 2 and accumulation 2: the numbers cannot tell which slipped, so both are named."""
    records_a = make_records()
    for recs in records_a.values():
        for rec in recs:
            rec["loss"] *= 2
            rec["grad_norm"] *= 2
    config = {"trainer": {"accumulate_grad_batches": 2}}
    a, b = hand_made_pair(
        tmp_path,
        meta_a=make_meta("raw", config=config),
        meta_b=make_meta("lightning", config=config),
        records_a=trained_apart(records_a),
    )
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "loss.factor"
    assert set(d["evidence"]["relation"]["counts"]) == {"accumulate_grad_batches=2", "world_size=2"}
    assert "accumulation count" in d["explanation"] and "world size" in d["explanation"], d["explanation"]
    assert "Whichever count slipped" in d["advice"]


def test_a_factor_on_rank_0_only_is_never_said_at_every_step(tmp_path):
    records_a = make_records()
    for rec in records_a[0]:
        rec["loss"] *= 2
        rec["grad_norm"] *= 2
    config = {"trainer": {"accumulate_grad_batches": 2}}
    a, b = hand_made_pair(
        tmp_path,
        meta_a=make_meta("raw", config=config),
        meta_b=make_meta("lightning", config=config),
        records_a=trained_apart(records_a),
    )
    _, d = run_diagnosis(a, b)
    said = d["evidence"]["relation"]["sentence"]
    assert "on rank 0 only" in said and "at every step (" not in said, said


def test_one_parameter_apart_at_step_1_is_never_another_rng_state(tmp_path):
    base = Loop(watch=True)
    d = compare_traces(*pair(tmp_path, base, base.changed(reinit=("2.bias",))))["diagnosis"]
    assert d["kind"] == "init.parameter", d["explanation"]
    assert "2.bias" in d["explanation"] and "RNG state:" not in d["explanation"]
    # every parameter apart (another seed) is still the RNG state
    d = compare_traces(*pair(tmp_path / "seed", base, base.changed(init_seed=1)))["diagnosis"]
    assert d["kind"] == "init", d["explanation"]


def test_indices_in_index_order_are_not_shuffled_never_other_samples(tmp_path):
    for shape, words in (("identity", "the identity order"), ("stride", "a stride of 2")):
        d = compare_traces(*pair(tmp_path / shape, Loop(), Loop(indices=shape)))["diagnosis"]
        assert d["kind"] == "data_order.not_shuffled", d["explanation"]
        assert words in d["explanation"] and "shuffle=True" in d["advice"]
        assert "DistributedSampler(dataset, num_replicas" not in d["advice"]


def test_another_decay_per_step_is_not_called_per_epoch_without_evidence(tmp_path):
    a, b = Loop(schedule="exp"), Loop(schedule="exp", gamma=0.995**2)
    d = compare_traces(*pair(tmp_path, a, b))["diagnosis"]
    assert d["kind"] == "optimizer.lr", d["explanation"]
    assert "per epoch" not in d["explanation"] + d["advice"] and "decays" in d["explanation"], d["explanation"]


def test_a_one_ulp_rate_is_never_blamed_on_where_the_scheduler_steps(tmp_path):
    """LambdaLR computes base_lr × gamma**k, ExponentialLR multiplies step by step: one ulp apart."""
    report = compare_traces(*pair(tmp_path, Loop(schedule="exp"), Loop(schedule="lambda")))
    d = report["diagnosis"]
    if report["per_step"]["lr"]["equal"] == report["per_step"]["lr"]["compared"]:
        return  # the two expressions round alike here: nothing to tell apart
    assert "one ulp" in d["explanation"], d["explanation"]
    assert "after optimizer.step()" not in d["advice"] and "interval" not in d["advice"], d["advice"]


def test_a_factor_equal_to_the_recorded_micro_batches_and_the_world_size_names_both(tmp_path):
    """Recorded by the hooks, no config: each step ran 2 backwards on both sides (`micro_batches`) and the
    world size is 2. A loss 2 × the other's fits both counts: both are named, never the world size alone."""
    records_a, records_b = make_records(), make_records()
    for records in (records_a, records_b):
        for recs in records.values():
            for rec in recs:
                rec["micro_batches"] = 2
    for recs in records_a.values():
        for rec in recs:
            rec["loss"] *= 2
            rec["grad_norm"] *= 2
    a, b = hand_made_pair(tmp_path, records_a=trained_apart(records_a), records_b=records_b)
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "loss.factor", d["explanation"]
    assert set(d["evidence"]["relation"]["counts"]) == {"micro-batches per step=2", "world_size=2"}, d["evidence"]
    assert "accumulation count" in d["explanation"] and "world size" in d["explanation"], d["explanation"]
    assert "Whichever count slipped" in d["advice"], d["advice"]
