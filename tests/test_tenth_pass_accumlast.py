"""The class timm's round 3 found (benchmarks/programs/timm/SCORE.md, 'Tool bugs found' row 1): a factor between the
sides' loss and gradient norm put on "the micro-batches per step and the world_size (each fits: the numbers cannot
tell which count slipped)" without reading which steps carry it. train.py divides an epoch's lone last micro-batch
(a shorter accumulation) by its own length (1), Lightning every micro-batch by accumulate_grad_batches (2): the
factor 2 is at the steps whose micro_batches is 1 and nowhere else, and the world size, the same at the steps that
agree, cannot be it. Now the steps that carry a factor are read before any count is named: a count the same at steps
that agree is ruled out, and a factor carried exactly by the steps of a shorter accumulation names that accumulation,
its steps and both divisions, with the fix on either side. Hand-made traces of the tests' own, never the corpus
program."""

from __future__ import annotations

import pytest
from test_diagnosis import WORLD, make_meta, pair, run_diagnosis, trained_apart

from ddp_parity.compare import relations

MICRO = 4  # samples a micro-batch
ACCUMULATE = 2  # the configured accumulation: each epoch is 2 micro-batches, then the left-over one alone
EPOCHS = 3
CONFIG = {"data": {"batch_size": MICRO}}


def _records(short_divided_by_own_length: bool, micro_every_step: int | None = None) -> dict:
    """Per rank, 3 epochs of 3 micro-batches: a step of 2, then the epoch's last micro-batch alone (steps 2, 4, 6:
    micro_batches 1). Each micro-batch's loss divided by ACCUMULATE, or the short one by its own length (1): there
    the recorded loss and the gradient norm are 2 × (dyadic values: the factor is exact). `micro_every_step`: every
    step records that many micro-batches instead (no shorter accumulation), the factor kept at the same steps."""
    records: dict = {r: [] for r in range(WORLD)}
    step = 0
    for epoch in range(EPOCHS):
        for micro in (ACCUMULATE, 1):
            step += 1
            times = 2 if micro == 1 and short_divided_by_own_length else 1
            for r in range(WORLD):
                rec = {"step": step, "epoch": epoch, "lr": 0.001, "time_s": 0.01}
                rec["loss"] = (1.25 - 0.0625 * step - 0.015625 * r) * times
                rec["grad_norm"] = (0.5 + 0.0625 * step) * times
                rec["micro_batches"] = micro_every_step or micro
                start = (epoch * 3 + (0 if micro == ACCUMULATE else ACCUMULATE)) * MICRO * WORLD + r * MICRO * micro
                rec["indices"] = list(range(start, start + MICRO * micro))
                rec["param_digest"] = [-4.5 + 0.0625 * step, 0.625 + 0.0625 * step]
                records[r].append(rec)
    return records


def _hooked_pair(tmp_path, raw: dict, port: dict):
    meta_a, meta_b = make_meta("raw", config=CONFIG), make_meta("lightning", config=CONFIG)
    for meta in (meta_a, meta_b):
        meta["config"] = {"data": {"batch_size": MICRO}}  # the hooks' traces: no accumulation count configured
        meta["recorded_by"] = "hooks"
    return pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=raw, records_b=port)


def _apart_after(records: dict, step: int) -> dict:
    """Every figure after `step` moved (the training parted at `step`): no factor to read there."""
    for recs in records.values():
        for rec in recs:
            if rec["step"] > step:
                rec["loss"] += 0.001
                rec["grad_norm"] += 0.001
    return trained_apart(records, step)


SHORT_WORDS = "the steps that carry it are those of a shorter accumulation"


def _assert_short_accumulation(d: dict, steps: str, one: bool = False) -> None:
    said, advice = d["explanation"], d["advice"]
    assert SHORT_WORDS in said, said
    assert (f"at step {steps} and equal at step 1 " if one else f"at steps {steps} and equal at steps 1, 3, 5") in said
    assert "micro_batches 1 on both sides, where the steps that agree have 2" in said, said
    assert "lightning divides that accumulation's loss by the configured count (2)" in said, said
    assert "raw by its own length (1)" in said, said
    assert "cannot tell which count slipped" not in said and "each fits" not in said, said
    # the world size is the same at the steps that agree: named as ruled out, never as a candidate
    assert "the world_size, 2, is the same at the steps that agree, so it did not slip" in said, said
    assert "averaged over the world size" not in said and "world size" not in advice, advice
    assert advice.startswith("On lightning, divide the loss of a shorter accumulation"), advice
    assert "by its own length (1)" in advice and "accumulate_grad_batches" in advice, advice
    assert "or, on raw, divide it by the configured count (2)" in advice, advice


def test_a_factor_at_the_short_accumulations_only_names_them_where_the_training_parts_later(tmp_path):
    """timm r3's shape: the parameters stay equal after steps 2 and 4 (both sides clip), part after step 6; the loss
    and the gradient norm are 2 × at steps 2, 4, 6 (micro_batches 1), equal at 1, 3, 5 (micro_batches 2), on both
    ranks. Before: gradients.factor, "2 is the micro-batches per step and the world_size (each fits: the numbers
    cannot tell which count slipped)", fix "Divide the loss by the number of accumulated micro-batches ... and
    average the gradients over the ranks exactly once"."""
    raw, port = _records(True), trained_apart(_records(False), 6)
    _, d = run_diagnosis(*_hooked_pair(tmp_path, raw, port))
    assert (d["kind"], d["step"]) == ("gradients.factor", 6), (d["kind"], d["explanation"])
    _assert_short_accumulation(d, "2, 4, 6")
    relation = d["evidence"]["relation"]
    assert (relation["steps"], relation["accumulation"]) == ([2, 4, 6], [1, 2]), relation
    assert relation["excluded"] == ["world_size=2"], relation
    # the earlier measured-only loss factor is said the same way, and never "measured, not trained" at step 6
    before = d["evidence"]["measured_before"]["relation"]
    assert before["accumulation"] == [1, 2] and before["counts"] == [], before
    assert "measured, not trained" not in d["explanation"], d["explanation"]


def test_a_factor_at_the_first_short_accumulation_where_the_training_parts_there_names_it(tmp_path):
    """Without clipping the training parts at the first short step (2): the loss there is 2 ×, step 1 (2
    micro-batches) equal, nothing after it comparable. Before: loss.factor with "a count ... would scale every step's
    loss: raw weights a term of step 2's loss by 2", micro_batches unread."""
    raw, port = _records(True), _apart_after(_records(False), 2)
    _, d = run_diagnosis(*_hooked_pair(tmp_path, raw, port))
    assert (d["kind"], d["step"]) == ("loss.factor", 2), (d["kind"], d["explanation"])
    _assert_short_accumulation(d, "2", one=True)


def test_a_factor_at_some_steps_of_one_accumulation_rules_out_every_constant_count(tmp_path):
    """Rule 2 alone: the factor at steps 2, 4, 6 while every step accumulated 2 micro-batches. The world size, the
    micro-batches per step, the same at the steps that agree, are ruled out; no shorter accumulation is named."""
    raw, port = _records(True, micro_every_step=2), trained_apart(_records(False, micro_every_step=2), 6)
    _, d = run_diagnosis(*_hooked_pair(tmp_path, raw, port))
    said = d["explanation"]
    assert d["kind"] == "gradients.factor", (d["kind"], said)
    assert SHORT_WORDS not in said and "each fits" not in said, said
    assert "is the same at the steps that agree" in said, said
    relation = d["evidence"]["relation"]
    assert relation["counts"] == [] and set(relation["excluded"]) == {"micro-batches per step=2", "world_size=2"}
    assert "world size" not in d["advice"], d["advice"]


@pytest.mark.parametrize("short, configured", [(1, 2), (3, 4), (2, 3)])
def test_the_relation_reads_a_shorter_accumulation_from_the_steps_that_carry_the_factor(short, configured):
    """Pure: a = b × configured / short exactly at the steps whose micro-batches are `short` (a non-integer factor
    too: 4/3), equal at those with `configured`; the counts equal to the factor and constant are ruled out."""
    steps = [1, 2, 3, 4, 5, 6]
    micro = [configured, short] * 3
    b = [2.5 - 0.125 * i for i in range(6)]
    a = [x * configured / short if m == short else x for x, m in zip(b, micro)]
    k = configured / short
    counts = {"world_size": round(k)} if k == round(k) else {}
    r = relations.factor_relation("loss", ("raw", "lightning"), steps, a, b, counts, micro=micro)
    assert r is not None and (r.side, r.other, r.steps, r.accumulation) == (
        "raw",
        "lightning",
        (2, 4, 6),
        (short, configured),
    )
    assert r.counts == () and r.excluded == tuple(f"{n}={v}" for n, v in counts.items()), r
