"""The class VAR's slips found on the ninth pass (issue 46), on hand-made traces of the tests' own:

(a) param-group keys the optimizer never reads compared as if it applied them. A program may keep keys of its own in
its param groups (VAR's `lr_sc`, `wd_sc`: scales its loop reads to set each group's lr and weight_decay by hand before
every step); torch's optimizers read only the keys of their `defaults`. One group on one side against two on the other
was said as "The optimizer applies each group's lr_sc to its parameters", fix "the same lr_sc", while the per-step
groups held what the optimizer did apply apart: weight_decay 0.0 against 0.05 for the exempt parameters. The words
now lead with the per-step settings the optimizer reads, per parameter, and list the program's own keys as the likely
reason, never as what the optimizer applies.

(b) an lr schedule restarted at each epoch read as a constant lead of N steps. A schedule counted from the iteration
within the epoch (batch_idx) repeats, from the second epoch on, its own first epoch's rates: with an epoch of 3 steps
that is also "the other side's rate 3 steps later", and the finding said "raw is 3 step(s) ahead (steps 1..6)" over
steps whose rates were equal. The restart is now tested before a constant shift, with the epoch's length from the
recorded epoch or from the trained loader's length (`loader_iterators`) where every step records the same epoch (an
iterator kept across the loop's epochs); and a lead is never said where the two series are equal at steps whose
rates change (a schedule k steps ahead would differ there).
"""

from __future__ import annotations

import json

import pytest
from test_diagnosis import make_meta, make_records, pair, run_diagnosis, trained_apart

# ---------------------------------------------------------------------------------------------
# (a) the program's own param-group keys

ADAMW = {"betas": [0.9, 0.95], "eps": 1e-8, "amsgrad": False, "maximize": False, "foreach": None}


def _built(groups: list[dict]) -> list[dict]:
    """meta.optimizer_built as the hooks write it: AdamW as constructed (weight_decay 0: the loop sets it each step)."""
    return [
        {
            "class": "AdamW",
            "named": True,
            "stepped": True,
            "param_groups": [{**ADAMW, "lr": 0.001, "weight_decay": 0, **g} for g in groups],
        }
    ]


def _groups_each_step(records: dict, groups: list[dict]) -> dict:
    """Each step's param groups as the hooks record them (every key but the params), the lr as recorded."""
    for recs in records.values():
        for rec in recs:
            rec["param_groups"] = [{**ADAMW, "lr": rec["lr"], **g} for g in groups]
    return records


def _one_group_against_a_split(tmp_path, step_groups_b: list[dict]):
    """raw: the bias exempt from weight decay by a group of its own, its `wd_sc` 0 (the program's own key, which the
    loop turns into weight_decay each step); lightning: one group over both, the loop's keys absent."""
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    meta_a["optimizer_built"] = _built(
        [
            {"params": ["net.0.bias"], "wd_sc": 0.0, "lr_sc": 1.0},
            {"params": ["net.0.weight"], "wd_sc": 1.0, "lr_sc": 1.0},
        ]
    )
    meta_b["optimizer_built"] = _built([{"params": ["net.0.weight", "net.0.bias"]}])
    records_a = _groups_each_step(
        make_records(),
        [{"wd_sc": 0.0, "lr_sc": 1.0, "weight_decay": 0.0}, {"wd_sc": 1.0, "lr_sc": 1.0, "weight_decay": 0.05}],
    )
    records_b = _groups_each_step(make_records(), step_groups_b)
    return pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=trained_apart(records_a, 1), records_b=records_b)


def test_the_weight_decay_each_step_applied_leads_and_the_programs_own_keys_are_the_likely_reason(tmp_path):
    _, d = run_diagnosis(*_one_group_against_a_split(tmp_path, [{"weight_decay": 0.05}]))
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    words = d["explanation"]
    assert words.startswith("The settings AdamW reads differ as each step ran"), words
    assert "weight_decay: 0.0 vs 0.05 from step 1 for net.0.bias" in words, words
    assert "wd_sc: 0.0 vs null for net.0.bias" in words, words  # the likely reason, said as the program's own
    assert "keys of the program's own, which AdamW never reads" in words, words
    assert "applies each group's lr_sc" not in words and "applies each group's wd_sc" not in words, words
    assert "the same weight_decay" in d["advice"] and "lr_sc" not in d["advice"], d["advice"]
    assert "net.0.bias" in d["advice"], d["advice"]


def test_the_programs_own_keys_apart_while_every_setting_the_optimizer_reads_is_alike_are_no_cause(tmp_path):
    """The same split of the program's own keys, the port setting weight_decay 0.0 for the bias as raw does (here
    with one group: the settings the optimizer applies are alike at every step): nothing the optimizer read differs,
    so no param_groups finding and no warning says it applies lr_sc or wd_sc."""
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    meta_a["optimizer_built"] = _built([{"params": ["net.0.weight", "net.0.bias"], "lr_sc": 1.0, "wd_sc": 1.0}])
    meta_b["optimizer_built"] = _built([{"params": ["net.0.weight", "net.0.bias"]}])
    records_a = _groups_each_step(make_records(), [{"lr_sc": 1.0, "wd_sc": 1.0, "weight_decay": 0.05}])
    records_b = _groups_each_step(make_records(), [{"weight_decay": 0.05}])
    report, d = run_diagnosis(*pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=records_a, records_b=records_b))
    assert d["category"] == "equivalent", (d["kind"], d["explanation"])
    said = json.dumps(report)
    assert "applies each group's lr_sc" not in said and "applies each group's wd_sc" not in said, said


# ---------------------------------------------------------------------------------------------
# (b) an lr schedule that starts again at each epoch

RAW_LR = [0.1, 0.2, 0.3, 0.25, 0.2, 0.15]  # a warmup of 3 steps, then a decay over the whole training
RESTARTED_LR = [0.1, 0.2, 0.3, 0.1, 0.2, 0.3]  # the same schedule counted from the iteration within the epoch


def _six_steps(lrs: list[float], epochs: list[int]) -> dict:
    records = make_records()
    for recs in records.values():
        del recs[len(lrs) :]
        for rec, lr, epoch in zip(recs, lrs, epochs):
            rec["lr"], rec["epoch"] = lr, epoch
    return records


def _trained_loader(run, length: int) -> None:
    """rank*.hooks.json holding one trained DataLoader iterator of `length` batches, made before step 1 and iterated
    across the loop's epochs (an infinite batch sampler: every step records epoch 0)."""
    item = {"before_step": 1, "batches": 6, "length": length, "dataset": "Boxes", "trained": True, "order": 1}
    for rank in (0, 1):
        facts = {"loader_iterators": {"count": 1, "items": [item]}}
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))


@pytest.mark.parametrize("epoch_from", ["records", "loader"])
def test_a_schedule_restarted_at_each_epoch_is_named_before_a_lead_of_an_epochs_steps(tmp_path, epoch_from):
    epochs = [0, 0, 0, 1, 1, 1] if epoch_from == "records" else [0] * 6
    records_a = trained_apart(_six_steps(RAW_LR, epochs), 4)
    records_b = _six_steps(RESTARTED_LR, epochs)
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    if epoch_from == "loader":
        meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=records_a, records_b=records_b)
    if epoch_from == "loader":
        _trained_loader(a, 3)
        _trained_loader(b, 3)
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("optimizer.lr_restart", 4), (d["kind"], d["explanation"])
    words = d["explanation"]
    assert "lightning's schedule starts again at each epoch" in words, words
    assert "step(s) ahead" not in words, words
    assert "the iteration within the epoch (batch_idx)" in d["advice"], d["advice"]
    if epoch_from == "loader":
        assert "3 step(s) is the trained loader's length (loader_iterators.length" in words, words


def test_a_lead_is_never_said_over_steps_whose_changing_rates_are_equal(tmp_path):
    """The same rates with no epoch boundary recorded (one epoch, no hooks facts): the restart cannot be named, and
    "3 steps ahead" is refuted by steps 1-3, equal on both sides while the rate changes at each."""
    records_a = trained_apart(_six_steps(RAW_LR, [0] * 6), 4)
    records_b = _six_steps(RESTARTED_LR, [0] * 6)
    _, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b))
    assert d["kind"] not in ("optimizer.lr_shift", "optimizer.lr_ahead", "recording"), (d["kind"], d["explanation"])
    assert "step(s) ahead" not in d["explanation"], d["explanation"]
    assert d["step"] == 4, (d["kind"], d["step"], d["explanation"])
