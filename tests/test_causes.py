"""The causes users hit (issues 14 and 20), each on hand-made traces shaped like the trace-format
additions (batch_digest, meta.optimizer, buffers_sha256, torch_flags, attempts, errors/): the
category, where, the evidence, and an advice line that names the fix."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from test_diagnosis import (
    EPOCHS,
    STEPS_PER_EPOCH,
    WORLD,
    make_meta,
    make_records,
    pair,
    run_diagnosis,
    trained_apart,
)

from ddp_parity.compare.diagnosis import format_diagnosis
from ddp_parity.compare.findings import Finding, Report
from ddp_parity.compare.html import render_html
from ddp_parity.compare.report import format_summary


def with_digests(records, changed_from=None):
    """Every record gets a batch_digest; from `changed_from` (step) on rank 1, another one."""
    out = copy.deepcopy(records)
    for r, recs in out.items():
        for rec in recs:
            other = changed_from is not None and r == 1 and rec["step"] >= changed_from
            rec["batch_digest"] = ("ff" if other else "ab") + f"{rec['step']:062x}"
    return out


def optimizer(decay_bias: float) -> dict:
    return {
        "class": "AdamW",
        "param_groups": [
            {"params": ["net.0.weight", "net.2.weight"], "lr": 0.001, "weight_decay": 0.01, "betas": [0.9, 0.999]},
            {"params": ["net.0.bias", "net.2.bias"], "lr": 0.001, "weight_decay": decay_bias, "betas": [0.9, 0.999]},
        ],
    }


def test_same_indices_other_batch_contents_is_the_data_pipeline(tmp_path):
    records = make_records()
    a, b = pair(tmp_path, records_a=with_digests(records), records_b=with_digests(records, changed_from=3))
    report, d = run_diagnosis(a, b)
    assert report["per_step"]["batch"]["equal"] == report["per_step"]["batch"]["compared"] - (
        EPOCHS * STEPS_PER_EPOCH - 2
    )
    assert (d["category"], d["step"], d["rank"]) == ("data_pipeline", 3, 1)
    assert "worker_init_fn" in d["advice"] and "same sample indices" in d["explanation"]


def test_a_loss_that_differs_at_step_one_with_dropout_ranks_the_random_stream_first(tmp_path):
    """Without a module watch or batch digests the random stream cannot be told from the batch contents
    or the loss function: the diagnosis ranks them, dropout first, and says what would separate them."""
    records_b = make_records()
    records_b[0][0]["loss"] += 0.125
    trained_apart(records_b)
    meta = {"model": {"dropout": 0.1}}
    a, b = pair(
        tmp_path,
        meta_a=make_meta("raw", config=meta),
        meta_b=make_meta("lightning", config=meta),
        records_b=records_b,
    )
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["kind"], d["step"], d["rank"]) == ("undetermined", "undetermined.unrecorded", 1, 0)
    causes = [c["cause"] for c in d["candidates"]]
    assert causes[:2] == ["rng", "data_pipeline"] and {"loss", "module_state"} <= set(causes), causes
    assert {u["evidence"] for u in d["unchecked"]} == {"batch", "watch"}, d["unchecked"]
    assert "dropout mask" in d["explanation"] and "Not checked: the batch contents" in d["explanation"]
    assert "recorder.watch(model)" in d["advice"] and "batch=batch" in d["advice"]
    assert "Re-seed" not in d["advice"]  # no single cause's fix


def test_param_groups_differ_before_any_step(tmp_path):
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["optimizer"], meta_b["optimizer"] = optimizer(0.01), optimizer(0.0)
    for rank_facts in meta_a["ranks"]:  # the optimizer only: no config difference hides it
        rank_facts.pop("omp_num_threads")
    records_b = make_records()
    records_b[0][0]["param_digest"][0] += 1e-3
    _, d = run_diagnosis(*pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_b=records_b))
    assert (d["category"], d["step"]) == ("param_groups", None)
    assert "weight_decay: 0.01 vs 0.0 for net.0.bias, net.2.bias" in d["explanation"]
    assert "net.0.bias, net.2.bias" in d["advice"] and "weight_decay" in d["advice"]


def nudge(value: float, ulps: int) -> float:
    return float(np.float32(value).view(np.int32).__add__(ulps).view(np.float32))


def test_a_grad_norm_a_few_ulps_apart_from_step_one_is_the_reduction_order(tmp_path):
    records_b = make_records()
    for r in range(WORLD):
        for rec in records_b[r]:
            rec["grad_norm"] = nudge(rec["grad_norm"], 1)
    trained_apart(records_b)  # clipping at another norm moves the parameters
    records_a = make_records()
    for r in range(WORLD):
        for rec in records_a[r]:
            rec["grad_norm"] = float(np.float32(rec["grad_norm"]))
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["optimizer"] = meta_b["optimizer"] = optimizer(0.0)  # equal param groups: the order is what is left
    _, d = run_diagnosis(*pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=records_a, records_b=records_b))
    assert (d["category"], d["step"], d["rank"]) == ("reduction_order", 1, 0)
    assert d["evidence"]["ulps"] == 1
    assert "summed in another order" in d["explanation"] and "param-group order" in d["explanation"]
    assert "optimizer.param_groups" in d["advice"]
    # without the param groups on one side the order cannot be told from a gradient computed otherwise
    _, d = run_diagnosis(*pair(tmp_path / "no_optimizer", records_a=records_a, records_b=records_b))
    assert (d["category"], d["step"]) == ("undetermined", 1), d
    assert [c["cause"] for c in d["candidates"]][0] == "reduction_order"


def test_ranks_of_one_side_with_different_buffers_name_the_buffer_and_the_unwrapped_validation(tmp_path):
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    for r, facts in enumerate(meta_a["ranks"]):
        facts["buffers_sha256"] = {"net.1.running_mean": f"{r}" * 64, "net.1.running_var": "c" * 64}
    for facts in meta_b["ranks"]:
        facts["buffers_sha256"] = {"net.1.running_mean": "0" * 64, "net.1.running_var": "c" * 64}
    meta_a["replicas_identical"], meta_b["replicas_identical"] = False, True
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b)
    (b / "validation.jsonl").write_text('{"epoch": 0, "step": 4, "val_loss": 2.5}\n')
    (a / "validation.jsonl").write_text('{"epoch": 0, "step": 4, "val_loss": 2.4}\n')
    _, d = run_diagnosis(a, b)
    assert d["category"] == "buffers"
    assert "net.1.running_mean" in d["explanation"] and "outside the DDP" in d["explanation"]
    assert "validate through the DDP-wrapped model" in d["advice"]


def test_step_numbers_offset_by_one_is_recording(tmp_path):
    records_b = make_records()
    for recs in records_b.values():
        for rec in recs:
            rec["step"] -= 1  # counted from 0
    _, d = run_diagnosis(*pair(tmp_path, records_b=records_b))
    assert d["category"] == "recording" and d["evidence"]["step_offset"] == 1
    assert "optimizer steps done" in d["advice"]


def test_a_grad_norm_clamped_at_the_clip_value_is_recording(tmp_path):
    config = {"trainer": {"gradient_clip_val": 0.503}}
    records_b = make_records()
    for recs in records_b.values():
        for rec in recs:
            rec["grad_norm"] = min(rec["grad_norm"], 0.503)  # read after clipping
    a, b = pair(
        tmp_path,
        meta_a=make_meta("raw", config=config),
        meta_b=make_meta("lightning", config=config),
        records_b=records_b,
    )
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"]) == ("recording", 4)
    assert d["evidence"]["clamped_side"] == "lightning" and "before clipping" in d["advice"]


def test_a_learning_rate_one_step_ahead_is_recording(tmp_path):
    records_a, records_b = make_records(), make_records()
    schedule = [0.001 * 0.9**i for i in range(EPOCHS * STEPS_PER_EPOCH + 1)]
    for r in range(WORLD):
        for i, (ra, rb) in enumerate(zip(records_a[r], records_b[r])):
            ra["lr"], rb["lr"] = schedule[i], schedule[i + 1]  # b reads after scheduler.step()
    _, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b))
    assert (d["category"], d["step"]) == ("recording", 1)
    assert d["evidence"]["ahead"] == "lightning" and "before scheduler.step()" in d["advice"]


def test_validation_equal_after_float32_rounding_is_recording(tmp_path):
    a, b = pair(tmp_path)
    exact = 2.3025850929940455
    (a / "validation.jsonl").write_text(json.dumps({"epoch": 0, "step": 4, "val_loss": exact}) + "\n")
    (b / "validation.jsonl").write_text(
        json.dumps({"epoch": 0, "step": 4, "val_loss": float(np.float32(exact))}) + "\n"
    )
    _, d = run_diagnosis(a, b)
    assert d["category"] == "recording" and "float32" in d["explanation"] and "self.log" in d["advice"]


def test_a_crashed_run_names_side_rank_step_and_message_first(tmp_path):
    meta_b = make_meta("lightning")
    meta_b["finished"] = False
    records_b = {r: recs[:3] for r, recs in make_records().items()}
    a, b = pair(tmp_path, meta_b=meta_b, records_b=records_b)
    (b / "errors").mkdir()
    (b / "errors" / "rank1.json").write_text(
        json.dumps({"rank": 1, "type": "RuntimeError", "message": "injected failure", "step": 3, "time": 10.0})
    )
    (b / "errors" / "rank0.json").write_text(
        json.dumps({"rank": 0, "type": "DistBackendError", "message": "Connection closed", "step": 3, "time": 11.0})
    )
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"], d["rank"]) == ("crash", 3, 1)
    assert format_diagnosis(Finding.from_json(d)).startswith(
        "diagnosis: crash at step 3 rank 1: lightning crashed: rank 1 raised"
    )
    assert "injected failure" in d["advice"]


def resumed_meta(side: str, at: int) -> dict:
    meta = make_meta(side)
    meta["resumed_from_step"] = at
    meta["attempts"] = [{"attempt": 0, "start_step": 0, "time": 1.0}, {"attempt": 1, "start_step": at, "time": 2.0}]
    return meta


def test_a_resume_that_replays_an_epoch_names_the_epoch(tmp_path):
    # the classic snapshot bug: it stores the epoch just finished and restarts at that index
    good = make_records()
    replayed = copy.deepcopy(good)
    for r in range(WORLD):
        first_epoch = good[r][:STEPS_PER_EPOCH]
        replayed[r] = first_epoch + [
            {**rec, "step": rec["step"] + STEPS_PER_EPOCH, "loss": rec["loss"] - 0.05} for rec in first_epoch
        ]
    a, b = pair(tmp_path, meta_b=resumed_meta("lightning", STEPS_PER_EPOCH), records_b=replayed)
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"], d["rank"]) == ("resume", STEPS_PER_EPOCH + 1, 0)
    assert "trains epoch 0 again" in d["explanation"]
    assert "epochs *done*" in d["advice"]


def test_a_resume_that_loses_the_optimizer_state_names_the_step(tmp_path):
    records_b = make_records()
    for r in range(WORLD):
        for rec in records_b[r][STEPS_PER_EPOCH:]:
            rec["param_digest"] = [v + 1e-4 for v in rec["param_digest"]]
    a, b = pair(tmp_path, meta_b=resumed_meta("lightning", STEPS_PER_EPOCH), records_b=records_b)
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"]) == ("resume", STEPS_PER_EPOCH + 1)
    assert "optimizer state was not restored" in d["explanation"] and "optimizer.state_dict()" in d["advice"]


def test_a_resume_that_loses_the_scheduler_state(tmp_path):
    records_b = make_records()
    for r in range(WORLD):
        for rec in records_b[r][STEPS_PER_EPOCH:]:
            rec["lr"] = 0.01
    a, b = pair(tmp_path, meta_b=resumed_meta("lightning", STEPS_PER_EPOCH), records_b=records_b)
    _, d = run_diagnosis(a, b)
    assert d["category"] == "resume" and "scheduler.state_dict()" in d["advice"]


@pytest.mark.parametrize(
    "group, key, a, b",
    [
        ("torch_flags", "float32_matmul_precision", "highest", "high"),
        ("torch_flags", "deterministic_algorithms", True, False),
        ("env", "MKL_NUM_THREADS", "1", "4"),
        ("world", "world_size", 2, 4),
    ],
)
def test_per_rank_global_state_differences_are_named_with_both_values(tmp_path, group, key, a, b):
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    for facts in meta_a["ranks"]:
        facts[group] = {key: a}
    for facts in meta_b["ranks"]:
        facts[group] = {key: b}
    report, d = run_diagnosis(*pair(tmp_path, meta_a=meta_a, meta_b=meta_b))
    # the traces are bitwise equal: an equivalent verdict, the difference named as a setup warning
    assert report["verdict"] == "equivalent" and d["category"] == "equivalent"
    assert [w["kind"] for w in report["warnings"]] == ["setup_differs"]
    d = d["setup_differs"]
    assert d["category"] == "config"
    shown = json.dumps(a) if not isinstance(a, str) else repr(a)
    assert f"ranks[*].{group}.{key}: {shown}" in d["explanation"] and f"{group}.{key}" in d["advice"]


def test_launcher_variables_are_not_a_difference(tmp_path):
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    for facts in meta_a["ranks"]:
        facts["env"] = {"TORCHELASTIC_RUN_ID": "x", "MASTER_ADDR": "127.0.0.1"}
    for facts in meta_b["ranks"]:
        facts["env"] = {"TORCHELASTIC_RUN_ID": "y", "MASTER_ADDR": "localhost"}
    _, d = run_diagnosis(*pair(tmp_path, meta_a=meta_a, meta_b=meta_b))
    assert d["category"] == "equivalent"


def test_ignore_config_leaves_run_control_keys_out(tmp_path):
    meta_a = make_meta("raw", config={"snapshot_path": "/a/snap.pt", "crash_after": 2})
    meta_b = make_meta("lightning", config={"snapshot_path": "/b/snap.pt", "crash_after": None})
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b)
    report, d = run_diagnosis(a, b)
    assert d["setup_differs"]["category"] == "config" and "snapshot_path" in d["setup_differs"]["advice"]
    report, d = run_diagnosis(a, b, ignore_config=("snapshot_path", "config.crash_after"))
    assert d["category"] == "equivalent" and d["setup_differs"] is None and report["warnings"] == []


def test_a_run_that_learned_nothing_is_equivalent_with_a_warning(tmp_path):
    records = make_records()
    for recs in records.values():
        for rec in recs:
            rec["loss"], rec["grad_norm"] = -0.0, 0.0
    a, b = pair(tmp_path, records_a=copy.deepcopy(records), records_b=copy.deepcopy(records))
    report, d = run_diagnosis(a, b)
    assert report["verdict"] == "equivalent" and d["category"] == "equivalent"
    kinds = [(w["kind"], w["message"].split(":")[0]) for w in report["warnings"]]
    assert kinds == [("no_learning", "raw"), ("no_learning", "lightning")]
    summary = format_summary(Report.from_json(report)).splitlines()
    assert summary[0].startswith("verdict: EQUIVALENT") and summary[1].startswith("  WARNING no_learning: raw")


def test_labels_reach_the_timing_line(tmp_path):
    a, b = pair(tmp_path)
    report, _ = run_diagnosis(a, b, labels=("mine", "yours"))
    assert report["timing"]["mine_median_ms"] > 0
    assert "median step time: mine " in format_summary(Report.from_json(report))
    page = render_html(Report.from_json(report), tmp_path)
    assert f"median step time: mine {report['timing']['mine_median_ms']:.3f} ms, yours" in page  # not "raw –"


def test_a_resume_that_skips_ahead_says_so(tmp_path):
    good = make_records()
    skipped = copy.deepcopy(good)
    for r in range(WORLD):  # resumed after step 2, but went on with epoch 1's batches
        skipped[r] = good[r][:2] + [{**rec, "step": i + 3} for i, rec in enumerate(good[r][STEPS_PER_EPOCH:])]
    a, b = pair(tmp_path, meta_b=resumed_meta("lightning", 2), records_b=skipped)
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"]) == ("resume", 3)
    assert "skips ahead" in d["explanation"] and d["evidence"]["matches_step"] == STEPS_PER_EPOCH + 1
