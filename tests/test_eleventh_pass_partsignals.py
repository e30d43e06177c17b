"""The class of failure the eleventh first pass found on ppo and muon (issue 46: programs nobody tuned the tool to):
where the cause stays undetermined, or a first finding names one thing, the other differences recorded at the step
the runs part went unsaid. ppo's KL early stop indented into the minibatch loop: step 3 is another update epoch of
the same rollout on the port and a new rollout on raw, and the tool listed dropout, module mode, loss and kernel while
the records held, at step 3, the lr apart (annealed per rollout), the torch generator moved on raw only, and 11
optimizer steps against 10. muon: autocast entered on raw only, and the schedulers never stepped on the port (lr 0.3
vs 0.15, 3 scheduler.step() calls vs 0), said nowhere beside a data finding at that step. ppo's round 1: two ranks
parting at the same step for two recorded reasons, one reported.

Now every fact recorded apart at the parting step is named: inside an undetermined finding, "also different at this
step" beside any other; the lr apart at the step the loss parts leads (optimizer.lr_at_parting) over "undetermined";
and a rank that parts at the same step for another recorded reason is named with its own cause. Hand-made traces, no
process."""

from __future__ import annotations

import json

from test_diagnosis import make_records, pair, run_diagnosis

from ddp_parity.compare.diagnosis import format_diagnosis
from ddp_parity.compare.findings import Finding

PARTS_AT = 3  # the step the runs part at


def _rng(moves_at: int | None):
    """torch's generator digest at each step's start: one value, moved from `moves_at` on (None: never moves)."""
    return lambda step: {"at": "forward", "torch": "m" * 16 if moves_at is not None and step >= moves_at else "0" * 16}


def _another_phase(records: dict, *, lr: float | None, extra_step: bool) -> dict:
    """From PARTS_AT on this side trains on something else (its loss and parameters part), its generator does not move
    where the other side's does, its rate is `lr` (None: unchanged), and with `extra_step` it steps once more."""
    for recs in records.values():
        for rec in recs:
            if rec["step"] >= PARTS_AT:
                rec["loss"] += 0.25
                rec["param_digest"] = [rec["param_digest"][0] + 0.125, rec["param_digest"][1]]
                rec["lr"] = lr if lr is not None else rec["lr"]
        if extra_step:
            recs.append({**recs[-1], "step": recs[-1]["step"] + 1})
    return records


def _with_rng(records: dict, moves_at: int | None) -> dict:
    digest = _rng(moves_at)
    for recs in records.values():
        for rec in recs:
            rec["rng"] = digest(rec["step"])
    return records


def _diagnose(tmp_path, records_a, records_b):
    report, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b))
    assert report["verdict"] == "different"
    return d


def _apart(d: dict) -> dict:
    return {f["what"]: (f["a"], f["b"]) for f in d["evidence"]["also_different"]["facts"]}


def test_an_lr_apart_at_the_step_the_loss_parts_leads_over_undetermined_with_the_other_facts_there(tmp_path):
    records_a = _with_rng(make_records(), moves_at=PARTS_AT)  # raw draws a new rollout at step 3
    records_b = _with_rng(_another_phase(make_records(), lr=0.0015, extra_step=True), moves_at=None)
    d = _diagnose(tmp_path, records_a, records_b)
    assert (d["kind"], d["step"], d["rank"]) == ("optimizer.lr_at_parting", PARTS_AT, 0)
    assert d["evidence"]["lr"] == {"raw": 0.001, "lightning": 0.0015}
    assert "the learning rate recorded for that very step differs too (0.001 vs 0.0015)" in d["explanation"]
    assert "lightning's rate changed from 0.001 at step 2, raw's did not" in d["explanation"]
    assert "the step's sample indices are recorded equal" in d["explanation"]  # never said to differ
    assert _apart(d) == {"rng_moved": (True, False), "optimizer_steps": (8, 9)}
    assert "torch's generator moved since step 2's start on raw only" in d["explanation"]
    assert "(8 on raw vs 9 on lightning: lightning steps 1 more)" in d["explanation"]
    assert "Find what moves lightning's rate at step 3" in d["advice"]
    # the rate acts after the loss: it is never called the loss's cause
    assert "acts on the update after the loss is computed" in d["explanation"]


def test_an_undetermined_finding_names_what_was_recorded_apart_at_its_step(tmp_path):
    records_a = _with_rng(make_records(), moves_at=PARTS_AT)
    records_b = _with_rng(_another_phase(make_records(), lr=None, extra_step=True), moves_at=None)
    d = _diagnose(tmp_path, records_a, records_b)
    assert (d["category"], d["step"], d["rank"]) == ("undetermined", PARTS_AT, 0)
    assert _apart(d) == {"rng_moved": (True, False), "optimizer_steps": (8, 9)}
    # in the finding's facts, before the candidates (which none of these is among)
    named = d["explanation"].index("Also different at step 3 rank 0: torch's generator moved")
    assert named < d["explanation"].index("The recorded evidence does not single out one cause")
    shown = format_diagnosis(Finding.from_json(d))
    assert "also different at step 3 rank 0: torch's generator moved since step 2's start on raw only" in shown


def _hooks(run, facts_by_rank: dict) -> None:
    for rank, facts in facts_by_rank.items():
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))


def test_beside_another_finding_the_autocast_the_lr_and_the_scheduler_calls_apart_there_are_also_named(tmp_path):
    records_a, records_b = make_records(), make_records()
    for side, recs_by in (("a", records_a), ("b", records_b)):
        for recs in recs_by.values():
            for rec in recs:
                rec["scheduler_steps_before"] = 0 if side == "b" or rec["step"] == 1 else 1
                rec["lr"] = 0.001 if side == "b" or rec["step"] == 1 else 0.002
    for rec in records_b[0]:  # the samples part at step 2 on rank 0: the finding is the data's
        if rec["step"] >= 2:
            rec["indices"] = list(reversed(rec["indices"]))
    a, b = pair(tmp_path, records_a=records_a, records_b=records_b)
    autocast = {"items": [{"before_step": 1, "device_type": "cpu", "dtype": "torch.bfloat16", "enabled": True}]}
    _hooks(a, {0: {"steps": 8, "autocast": autocast}, 1: {"steps": 8, "autocast": autocast}})
    _hooks(b, {0: {"steps": 8}, 1: {"steps": 8}})
    report, d = run_diagnosis(a, b)
    assert (d["category"], d["step"], d["rank"]) == ("data_order", 2, 0)
    assert _apart(d) == {
        "lr": (0.002, 0.001),
        "scheduler_steps": (1, 0),
        "autocast": (["cpu torch.bfloat16"], []),
    }
    assert (
        "Also different at step 2 rank 0: the lr (0.002 on raw vs 0.001 on lightning: raw's is 2 × lightning's); "
        "the scheduler.step() calls since the step before (1 on raw vs 0 on lightning); the autocast entered by "
        "this step (cpu torch.bfloat16 on raw vs none on lightning" in d["explanation"]
    )


def test_autocast_is_never_called_absent_on_a_side_the_hooks_did_not_record(tmp_path):
    a, b = pair(tmp_path, records_b=_another_phase(make_records(), lr=None, extra_step=False))
    autocast = {"items": [{"before_step": 1, "device_type": "cpu", "dtype": "torch.bfloat16", "enabled": True}]}
    _hooks(a, {0: {"steps": 8, "autocast": autocast}})  # lightning: an explicit recorder, no hooks facts
    report, d = run_diagnosis(a, b)
    assert "autocast" not in {f["what"] for f in (d["evidence"].get("also_different") or {}).get("facts", [])}


def test_two_ranks_parting_at_one_step_for_two_recorded_reasons_are_both_named(tmp_path):
    records_a, records_b = make_records(), make_records()
    for side, recs_by in (("a", records_a), ("b", records_b)):
        for rec in recs_by[1]:  # rank 1: the parameters part at step 2, its param group's weight decay apart
            rec["param_groups"] = [{"lr": rec["lr"], "weight_decay": 0.01 if side == "b" else 0.0}]
            if side == "b" and rec["step"] >= 2:
                rec["param_digest"] = [rec["param_digest"][0] + 0.125, rec["param_digest"][1]]
    for rec in records_b[0]:  # rank 0: the samples part at step 2
        if rec["step"] >= 2:
            rec["indices"] = list(reversed(rec["indices"]))
            rec["param_digest"] = [rec["param_digest"][0] + 0.125, rec["param_digest"][1]]
    d = _diagnose(tmp_path, records_a, records_b)
    assert (d["category"], d["step"], d["rank"]) == ("data_order", 2, 0)
    (other,) = d["evidence"]["ranks_apart"]
    assert (other["rank"], other["kind"]) == (1, "optimizer.hyperparameters")
    assert "Rank 1 parts at the same step for another recorded reason (optimizer.hyperparameters)" in d["explanation"]
    assert "On rank 1 (optimizer.hyperparameters): Give param group 0 the same weight_decay" in d["advice"]
    shown = format_diagnosis(Finding.from_json(d))
    assert "rank 1 parts at that step too, for another reason (optimizer.hyperparameters)" in shown
