"""The diagnosis on small hand-made run directories: no training, no processes.

Each test builds a pair of runs (meta.json, trace/rank*.jsonl, a tiny final.safetensors) shaped like
the real raw/Lightning pair, breaks one thing, and checks the category, the step and the rank.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from ddp_parity import compare_traces
from ddp_parity.compare.comparator import compare_runs
from ddp_parity.compare.diagnosis import CATEGORIES, diagnose_failure, format_diagnosis
from ddp_parity.compare.findings import Finding

# report.json's diagnosis: the original keys, extended (never changed) by kind, candidates and unchecked
DIAGNOSIS_KEYS = (
    *("category", "step", "rank", "evidence", "explanation", "advice", "module", "setup_differs"),
    *("kind", "candidates", "unchecked"),
)

WORLD, EPOCHS, STEPS_PER_EPOCH, DATASET = 2, 2, 4, 64
BATCH = DATASET // WORLD // STEPS_PER_EPOCH
INIT = "9bc3c4d7" * 8

BASE_CONFIG = {
    "checkpoint": {"every_n_epochs": 1, "every_n_train_steps": None, "keep_last": 2},
    "ckpt_path": None,
    "data": {"batch_size": BATCH, "data_seed": 0, "drop_last": False, "num_samples": DATASET},
    "model": {"lr": 0.001, "optimizer": "adam", "hidden_dim": 8},
    "run_dir": "/somewhere/raw",
    "seed_everything": 42,
    "threads": 1,
    "trainer": {
        "accelerator": "cpu",
        "accumulate_grad_batches": 1,
        "devices": 2,
        "max_epochs": EPOCHS,
        "precision": "32-true",
        "enable_progress_bar": False,
        "logger": False,
    },
}
# what LightningCLI adds to its resolved config: keys the raw side does not have, or spells differently
LIGHTNING_EXTRAS = {
    "config": ["/work/main/configs/default.yaml"],
    "optimizer": None,
    "lr_scheduler": None,
    "run_dir": "/somewhere/lightning",
    "weights_only": None,
    "trainer": {
        "devices": "2",
        "callbacks": None,
        "default_root_dir": "/somewhere/lightning",
        "enable_checkpointing": None,
        "max_steps": -1,
        "use_distributed_sampler": True,
        "enable_progress_bar": True,
        "logger": True,
    },
}
PARAMS = {"net.0.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3), "net.0.bias": torch.ones(2)}


def _merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def make_meta(side: str, seed: int = 42, init=INIT, threads=1, config: dict | None = None) -> dict:
    cfg = _merge(BASE_CONFIG, LIGHTNING_EXTRAS) if side == "lightning" else copy.deepcopy(BASE_CONFIG)
    cfg = _merge(cfg, config or {})
    inits = init if isinstance(init, list) else [init] * WORLD
    threads = threads if isinstance(threads, list) else [threads] * WORLD
    return {
        "format_version": 1,
        "side": side,
        "world_size": WORLD,
        "backend": "gloo",
        "device": "cpu",
        "versions": {"python": "3.11.7", "torch": "2.13.0+cpu", "lightning": "2.6.6"},
        "config": cfg,
        "finished": True,
        "ranks": [
            {
                "rank": r,
                "host": "vm",
                "pid": 100 + r,
                "threads": threads[r],
                "omp_num_threads": str(threads[r]),
                "init_params_sha256": inits[r],
                "sampler": {
                    "class": "DistributedSampler",
                    "drop_last": False,
                    "num_replicas": WORLD,
                    "rank": r,
                    "seed": seed,
                    "shuffle": True,
                },
            }
            for r in range(WORLD)
        ],
    }


def make_records(seed: int = 42, set_epoch: bool = True, epochs: int = EPOCHS) -> dict[int, list[dict]]:
    """Per rank, one record per step: a DistributedSampler-like shard of a seed+epoch permutation."""
    out: dict[int, list[dict]] = {r: [] for r in range(WORLD)}
    step = 0
    for epoch in range(epochs):
        order = list(range(DATASET))
        random.Random(seed + (epoch if set_epoch else 0)).shuffle(order)
        shards = {r: order[r::WORLD] for r in range(WORLD)}
        for i in range(STEPS_PER_EPOCH):
            step += 1
            for r in range(WORLD):
                out[r].append(
                    {
                        "step": step,
                        "epoch": epoch,
                        "loss": 2.5 - 0.01 * step - 0.001 * r,
                        "lr": 0.001,
                        "grad_norm": 0.5 + 0.001 * step,
                        "time_s": 0.01,
                        "indices": shards[r][i * BATCH : (i + 1) * BATCH],
                        "param_digest": [-4.5 + 0.01 * step, 0.62 + 0.001 * step],
                    }
                )
    return out


def trained_apart(records: dict[int, list[dict]], from_step: int = 1) -> dict[int, list[dict]]:
    """The parameters after each step from `from_step` on one ulp apart, on every rank: what a training
    difference (not only a measured one) leaves in the digest. A hand-made loss, gradient-norm or lr
    difference with the digest left equal is a difference in what was measured alone (issue 46)."""
    for recs in records.values():
        for rec in recs:
            if rec["step"] >= from_step:
                rec["param_digest"] = [math.nextafter(rec["param_digest"][0], math.inf), *rec["param_digest"][1:]]
    return records


def write_run(path: Path, meta: dict, records: dict[int, list[dict]], params=PARAMS) -> Path:
    (path / "trace").mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps(meta))
    for rank, recs in records.items():
        (path / "trace" / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    save_file({k: v.clone() for k, v in params.items()}, str(path / "final.safetensors"))
    return path


def pair(tmp_path: Path, meta_b: dict | None = None, records_b=None, meta_a: dict | None = None, records_a=None):
    a = write_run(tmp_path / "raw", meta_a or make_meta("raw"), records_a or make_records())
    b = write_run(tmp_path / "lightning", meta_b or make_meta("lightning"), records_b or make_records())
    return a, b


def run_diagnosis(a, b, stall=None, rtol=0.0, **options):
    report = compare_traces(a, b, rtol=rtol, **options) if stall is None else compare_runs(a, b).to_dict()
    d = report["diagnosis"] if stall is None else diagnose_failure(a, b, report["criterion"], stall).to_json()
    assert d["category"] in CATEGORIES
    assert set(d) == set(DIAGNOSIS_KEYS)
    json.dumps(d, allow_nan=False)  # the evidence goes into report.json as it is
    assert d["explanation"] and d["advice"]
    return report, d


# ---------------------------------------------------------------------------------------------


def test_identical_pair_is_equivalent_despite_lightning_cli_extras(tmp_path):
    # the Lightning side's config has extra keys, `devices: "2"`, its own run_dir and progress bar
    report, d = run_diagnosis(*pair(tmp_path))
    assert report["verdict"] == "equivalent"
    assert (d["category"], d["step"], d["rank"]) == ("equivalent", None, None)
    assert d["evidence"]["steps_compared"] == EPOCHS * STEPS_PER_EPOCH
    assert format_diagnosis(Finding.from_json(d)).startswith("diagnosis: equivalent: ")


def test_thread_count_on_one_rank_is_a_config_difference(tmp_path):
    a, b = pair(tmp_path, meta_b=make_meta("lightning", threads=[1, 2]))
    report, d = run_diagnosis(a, b)  # the traces are identical: threads are caught from meta.json alone
    # equal numbers: an equivalent verdict with the thread difference as a warning, never a silent pass
    assert report["verdict"] == "equivalent" and d["category"] == "equivalent"
    assert "ranks[1].threads: 1 vs 2" in report["warnings"][0]["message"]
    d = d["setup_differs"]
    assert (d["category"], d["step"], d["rank"]) == ("config", None, 1)
    assert "ranks[1].threads: 1 vs 2" in d["evidence"]["differences"]
    assert "OMP_NUM_THREADS" in d["advice"] and "set_num_threads" in d["advice"]


def test_config_comes_before_samples_in_causal_order(tmp_path):
    records_b = make_records()
    records_b[1][2]["indices"] = list(reversed(records_b[1][2]["indices"]))  # samples differ at step 3
    a, b = pair(tmp_path, meta_b=make_meta("lightning", config={"model": {"lr": 0.002}}), records_b=records_b)
    report, d = run_diagnosis(a, b)
    assert report["first_divergence"]["quantity"] == "samples"
    assert (d["category"], d["step"], d["rank"]) == ("config", None, None)
    assert d["evidence"]["differences"] == ["config.model.lr: 0.001 vs 0.002"]


def test_different_initial_weights(tmp_path):
    records_b = make_records()
    for recs in records_b.values():
        for rec in recs:
            rec["loss"] += 0.25  # the first loss already differs
    a, b = pair(tmp_path, meta_b=make_meta("lightning", init=["ff" * 32, "ee" * 32]), records_b=records_b)
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"], d["rank"]) == ("init", None, 0)
    assert d["evidence"]["init_params_sha256"]["lightning"] == {"0": "ff" * 32, "1": "ee" * 32} or d["evidence"][
        "init_params_sha256"
    ]["lightning"] == {0: "ff" * 32, 1: "ee" * 32}
    assert "broadcast" in d["explanation"]


def test_ranks_of_one_side_built_different_weights(tmp_path):
    # rank 1 of the Lightning side built other weights; rank 0 matches: DDP's broadcast makes that harmless
    # (a note beside the equivalent verdict, never a cause with a fix: every step of every rank was equal after it)
    a, b = pair(tmp_path, meta_b=make_meta("lightning", init=[INIT, "ee" * 32]))
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["setup_differs"]) == ("equivalent", None), d
    assert "DDP broadcasts them at construction: harmless by itself" in d["evidence"]["init_note"]
    # ... and when the runs then diverge later for another reason, that reason is named
    records_b = make_records()
    records_b[0][1]["grad_norm"] *= 2
    records_b[1][1]["grad_norm"] *= 2
    trained_apart(records_b, 2)
    a, b = pair(tmp_path / "later", meta_b=make_meta("lightning", init=[INIT, "ee" * 32]), records_b=records_b)
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"], d["rank"]) == ("gradients", 2, 0)
    assert "init_note" in d["evidence"]


def test_missing_set_epoch_repeats_the_first_epoch(tmp_path):
    a, b = pair(tmp_path, records_a=make_records(set_epoch=False))  # raw forgot sampler.set_epoch
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"], d["rank"]) == ("set_epoch", STEPS_PER_EPOCH + 1, 0)
    assert d["evidence"]["repeating_side"] == "raw"
    assert "set_epoch(epoch)" in d["advice"]
    assert format_diagnosis(Finding.from_json(d)).startswith(
        f"diagnosis: set_epoch at step {STEPS_PER_EPOCH + 1} rank 0: "
    )


def as_batch_digests(records: dict[int, list[dict]]) -> dict[int, list[dict]]:
    """The same steps recorded as a loop that has no indices records them: a digest of each batch."""
    return {
        r: [{**{k: v for k, v in rec.items() if k != "indices"}, "batch_digest": str(rec["indices"])} for rec in recs]
        for r, recs in records.items()
    }


def test_missing_set_epoch_names_what_was_recorded(tmp_path):
    """The replayed epoch is said in the terms both sides recorded: indices, or batch digests (never 'indices'
    where only digests exist)."""
    a, b = pair(tmp_path, records_a=make_records(set_epoch=False))
    _, d = run_diagnosis(a, b)
    assert "exactly the indices" in d["explanation"]
    a, b = pair(
        tmp_path / "digests",
        records_a=as_batch_digests(make_records(set_epoch=False)),
        records_b=as_batch_digests(make_records()),
    )
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"]) == ("set_epoch", STEPS_PER_EPOCH + 1)
    assert "exactly the batches (by their recorded digests)" in d["explanation"]
    assert "indices" not in d["explanation"]


def test_sampler_seed_differs(tmp_path):
    a, b = pair(tmp_path, meta_a=make_meta("raw", seed=43), records_a=make_records(seed=43))
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"], d["rank"]) == ("sampler_seed", 1, 0)
    assert "seed_everything: true" in d["explanation"]
    assert "seed_everything" in d["advice"]


def test_a_sampler_seeded_per_rank_on_one_side_is_the_side_to_change(tmp_path):
    """A port whose per-rank seed_everything(seed + rank) seeds the DistributedSampler Lightning injects (mae, dit):
    raw's ranks shuffle with one seed, the port's with one each. The advice is for the port, keeping its per-rank
    global seed; never to pin seed_everything in a config the run does not have, nor to change raw."""
    meta_b = make_meta("lightning")
    meta_b["ranks"][1]["sampler"]["seed"] = 43
    records_b = make_records()
    records_b[1] = make_records(seed=43)[1]
    _, d = run_diagnosis(*pair(tmp_path, meta_b=meta_b, records_b=records_b))
    assert (d["category"], d["step"], d["rank"]) == ("sampler_seed", 1, 1), (d["kind"], d["explanation"])
    assert d["evidence"]["sampler_seed_per_rank"] == "lightning", d["evidence"]
    assert "On lightning each rank's DistributedSampler has a seed of its own" in d["explanation"], d["explanation"]
    assert d["advice"].startswith("On lightning, give every rank's DistributedSampler the same seed (42"), d["advice"]
    assert "Pin seed_everything" not in d["advice"] and "raw loop's DistributedSampler" not in d["advice"]


def test_unpinned_global_seed_is_named_as_the_sampler_seed(tmp_path):
    # LightningCLI's `seed_everything: true` resolved to a random seed: config, weights and sampler all differ
    meta_b = make_meta("lightning", seed=1234, init="ab" * 32, config={"seed_everything": 1234})
    a, b = pair(tmp_path, meta_b=meta_b, records_b=make_records(seed=1234))
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"], d["rank"]) == ("sampler_seed", 1, 0)
    assert d["evidence"]["seed_everything"] == {"raw": 42, "lightning": 1234}
    assert "initial weights" in d["explanation"]


def test_other_data_order(tmp_path):
    records_b = make_records()
    records_b[1][2]["indices"] = records_b[1][2]["indices"][1:] + records_b[1][2]["indices"][:1]
    _, d = run_diagnosis(*pair(tmp_path, records_b=records_b))
    assert (d["category"], d["step"], d["rank"]) == ("data_order", 3, 1)


def test_loss_differs_with_the_same_samples(tmp_path):
    records_b = make_records()
    records_b[1][1]["loss"] = float(
        torch.nextafter(
            torch.tensor(records_b[1][1]["loss"], dtype=torch.float64), torch.tensor(9.0, dtype=torch.float64)
        )
    )
    a, b = pair(tmp_path, records_b=trained_apart(records_b, 2))
    _, d = run_diagnosis(a, b)
    # threads and flags are recorded equal and nothing else was recorded: no single cause, no threads fix
    assert (d["category"], d["step"], d["rank"]) == ("undetermined", 2, 1)
    assert "Pin threads" not in d["advice"] and "this step's samples" in d["explanation"]
    assert {u["evidence"] for u in d["unchecked"]} == {"batch", "watch", "optimizer"}, d["unchecked"]
    # the report's tolerance applies: one ulp passes rtol=1e-6
    _, d = run_diagnosis(a, b, rtol=1e-6)
    assert d["category"] == "equivalent"


def test_grad_norm_differs_with_the_same_loss(tmp_path):
    records_b = make_records()
    for r in range(WORLD):  # a factor of 2 from the first step: the world size, the one recorded count it equals
        for rec in records_b[r]:  # (a factor from a later step alone, the steps before equal, is no count's)
            rec["grad_norm"] /= 2
    _, d = run_diagnosis(*pair(tmp_path, records_b=trained_apart(records_b, 1)))
    assert (d["category"], d["step"], d["rank"]) == ("gradients", 1, 0)
    assert "factor of about 2" in d["explanation"] and "2 is the world_size" in d["explanation"]
    # the fix for that count alone, both ways of averaging (DDP's, or an all_reduce by hand), no accumulation
    assert "divide the sum by the world size" in d["advice"] and "accumulate_grad_batches" not in d["advice"]


def test_learning_rate_differs(tmp_path):
    records_b = make_records()
    for r in range(WORLD):
        for rec in records_b[r][2:]:
            rec["lr"] = 0.0005  # stepped per step instead of per epoch
    _, d = run_diagnosis(*pair(tmp_path, records_b=trained_apart(records_b, 3)))
    assert (d["category"], d["step"], d["rank"]) == ("optimizer", 3, 0)
    assert d["evidence"]["lr"] == {"raw": 0.001, "lightning": 0.0005}


def float32_ulp_up(value: float, ulps: int = 1) -> float:
    """`value` as float32, `ulps` float32 steps up: another order of one float32 sum."""
    x = torch.tensor(value, dtype=torch.float32)
    for _ in range(ulps):
        x = torch.nextafter(x, torch.tensor(math.inf))
    return x.item()


def norms_a_rounding_apart(records: dict[int, list[dict]]) -> dict[int, list[dict]]:
    """Every recorded gradient norm as float32, one ulp up: the same squares summed in another order."""
    for recs in records.values():
        for rec in recs:
            rec["grad_norm"] = float32_ulp_up(rec["grad_norm"])
    return records


def float32_norms(records: dict[int, list[dict]]) -> dict[int, list[dict]]:
    for recs in records.values():
        for rec in recs:
            rec["grad_norm"] = float32_ulp_up(rec["grad_norm"], 0)
    return records


def test_a_norm_an_ulp_apart_that_parts_the_parameters_steps_later_is_the_finding_with_the_order_first(tmp_path):
    """A norm summed in another order is an ulp apart from step 1; the clip coefficient rounds alike at steps
    1 and 2 (the parameters stay equal) and apart at step 3. The norm apart there is the training's cause,
    never 'the same factor as where the parameters stayed equal: measured' (CI's CPU, ATen's scalar kernels:
    the order's one-ulp ratio was kept as a recording factor and step 3 became a generic optimizer finding)."""
    records_a = float32_norms(make_records())
    records_b = trained_apart(norms_a_rounding_apart(make_records()), 3)
    _, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b))
    # these traces hold no param groups, so the order is the first candidate, not yet proved
    assert (d["category"], d["step"], d["rank"], d["evidence"]["ulps"]) == ("undetermined", 3, 0, 1), d
    assert d["candidates"][0]["cause"] == "reduction_order", d["candidates"]
    assert (d["evidence"]["measured_before"]["quantity"], d["evidence"]["measured_before"]["step"]) == ("grad_norm", 1)


def test_an_lr_apart_where_a_rounding_apart_norm_is_apart_too_is_the_finding(tmp_path):
    """The same norms an ulp apart at every step, and at step 3 an lr halved as the parameters part: the lr moved
    the update far more than an ulp of the norm could, so the finding is the lr's, not the order's."""
    records_a = float32_norms(make_records())
    records_b = trained_apart(norms_a_rounding_apart(make_records()), 3)
    for r in range(WORLD):
        for rec in records_b[r][2:]:
            rec["lr"] = 0.0005
    _, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b))
    assert (d["category"], d["step"], d["rank"]) == ("optimizer", 3, 0), d
    assert d["evidence"]["lr"] == {"raw": 0.001, "lightning": 0.0005}


def test_a_seed_per_rank_both_sides_use_alike_is_no_setup_difference(tmp_path):
    """Each side's ranks build different weights (a seed per rank, as DiT and ConvNeXt seed) and rank r's equal
    rank r's of the other side: nothing differs between the sides, so no warning and no fix ('Seed identically,
    seed_everything pinned to an integer' asked to change a deliberate choice both sides make), only the fact."""
    per_rank = ["a" * 64, "b" * 64]
    a, b = pair(tmp_path, meta_a=make_meta("raw", init=per_rank), meta_b=make_meta("lightning", init=per_rank))
    report, d = run_diagnosis(a, b)
    assert (report["verdict"], d["category"], d["setup_differs"]) == ("equivalent", "equivalent", None), d
    assert not [w for w in report["warnings"] if w["kind"] == "setup_differs"], report["warnings"]
    assert "each rank's matches the same rank's on the other side" in d["evidence"]["init_note"]
    # the control: rank 1 built otherwise on one side only is said as a fact (DDP broadcasts rank 0's weights), with
    # no fix, beside the equal training (detr's equal pair had "Seed identically" as its diagnosis)
    a, b = pair(
        tmp_path / "one", meta_a=make_meta("raw", init=per_rank), meta_b=make_meta("lightning", init=per_rank[0])
    )
    report, d = run_diagnosis(a, b)
    assert (report["verdict"], d["category"], d["setup_differs"]) == ("equivalent", "equivalent", None), d
    assert "on rank(s) other than 0" in d["evidence"]["init_note"], d["evidence"]


def test_parameters_after_the_step_differ(tmp_path):
    # not compared by the comparator step by step; the diagnosis reads param_digest
    records_b = make_records()
    records_b[1][3]["param_digest"][1] += 1e-9
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    groups = {"class": "Adam", "param_groups": [{"params": list(PARAMS), "lr": 0.001}]}
    meta_a["optimizer"] = meta_b["optimizer"] = groups
    _, d = run_diagnosis(*pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_b=records_b))
    assert (d["category"], d["step"], d["rank"]) == ("optimizer", 4, 1)
    assert "param_digest" in d["evidence"]
    # a side that did not record its optimizer: the param groups could not be compared, and that is said
    del meta_a["optimizer"]
    _, d = run_diagnosis(*pair(tmp_path / "no_optimizer", meta_a=meta_a, meta_b=meta_b, records_b=records_b))
    assert (d["category"], d["step"]) == ("undetermined", 4), d
    assert [c["cause"] for c in d["candidates"]][0] == "param_groups"
    assert d["unchecked"][0]["sides"] == ["raw"] and "optimizer=optimizer" in d["unchecked"][0]["record"]


def test_uneven_step_counts(tmp_path):
    records_b = make_records()
    records_b[1] = records_b[1][:-1]  # rank 1 of the Lightning side ran one batch less
    _, d = run_diagnosis(*pair(tmp_path, records_b=records_b))
    last = EPOCHS * STEPS_PER_EPOCH
    assert (d["category"], d["step"], d["rank"]) == ("step_count", last, 1)
    assert d["evidence"]["steps"]["lightning"] in ({0: last, 1: last - 1}, {"0": last, "1": last - 1})
    assert "rank 1 7" in d["explanation"]


def test_stall_names_the_waiting_rank(tmp_path):
    a, b = pair(tmp_path)
    _, d = run_diagnosis(a, b, stall={"side": "raw", "ranks": {0: 31, 1: 32}, "seconds": 20.5})
    assert (d["category"], d["step"], d["rank"]) == ("stall", 33, 1)
    assert "rank 1 finished step 32" in d["explanation"] and "uneven" in d["explanation"]
    assert "diagnosis: stall at step 33 rank 1" in format_diagnosis(Finding.from_json(d))


def test_the_walk_stops_at_the_first_divergence(tmp_path):
    records_b = make_records()
    records_b[0][0]["loss"] += 1.0  # step 1
    a, b = pair(tmp_path, records_b=trained_apart(records_b))
    report = compare_runs(a, b).to_dict()
    with open(b / "trace" / "rank0.jsonl", "a") as f:
        f.write('{"step": 99, "loss": 1.0, "ind')  # a cut-off line far after it: never read
    d = diagnose_failure(a, b, report["criterion"]).to_json()
    assert (d["category"], d["step"], d["rank"]) == ("undetermined", 1, 0)


def test_a_run_that_left_no_trace(tmp_path):
    # the Lightning side failed before it wrote anything; the harness has no comparison report
    a = write_run(tmp_path / "raw", make_meta("raw"), make_records())
    d = diagnose_failure(a, tmp_path / "lightning").to_json()
    assert (d["category"], d["step"], d["rank"]) == ("step_count", 1, 0)
    assert "lightning" in d["evidence"]["unreadable_meta"]
    assert d["evidence"]["steps"]["lightning"] in ({}, {0: 0, 1: 0})


def test_ranks_of_both_sides_ran_uneven_numbers_of_steps(tmp_path):
    records = make_records()
    records[1] = records[1][:-1]  # rank 1 ran one batch less, on both sides alike
    a, b = pair(tmp_path, records_a=copy.deepcopy(records), records_b=copy.deepcopy(records))
    _, d = run_diagnosis(a, b)
    last = EPOCHS * STEPS_PER_EPOCH
    assert (d["category"], d["step"], d["rank"]) == ("step_count", last, 0)  # rank 0 has the extra step
    assert "the ranks themselves disagree" in d["explanation"]


def test_a_side_without_a_sampler_record_is_never_said_to_agree(tmp_path):
    """Issue 36: a raw loop that recorded no sampler was told "the recorded samplers say where: they agree",
    with DistributedSampler advice, where no sampler existed (nanoGPT draws windows with torch.randint)."""
    meta_a = make_meta("raw")
    for facts in meta_a["ranks"]:
        facts.pop("sampler")
    records_a = make_records()
    records_a[1][0]["indices"] = list(reversed(records_a[1][0]["indices"]))
    a, b = pair(tmp_path, meta_a=meta_a, records_a=records_a)
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"], d["rank"]) == ("data_order.unrecorded", 1, 1)
    assert "agree" not in d["explanation"] and "raw recorded no sampler" in d["explanation"]
    assert not d["advice"].startswith("Build the same DistributedSampler")
    assert d["evidence"]["sampler_unrecorded"] == ["raw"]


def test_two_ranks_of_one_side_consuming_the_same_samples_is_its_own_finding(tmp_path):
    """Issue 36: a rank that drew the other rank's windows (the data seed not offset by rank) was reported as
    "other samples", not as two ranks training on the same data."""
    records_b = make_records()
    for r1, r0 in zip(records_b[1], records_b[0]):
        r1["indices"] = list(r0["indices"])  # lightning's rank 1 consumes rank 0's samples
    a, b = pair(tmp_path, records_b=records_b)
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"], d["rank"]) == ("data_order.shared", 1, 1)
    assert d["evidence"]["shared_by_ranks"] == {"side": "lightning", "ranks": [0, 1]}
    assert "ranks 0 and 1" in d["explanation"] and d["advice"].startswith("On lightning: give each rank its own data")
    assert "DistributedSampler(dataset, num_replicas=world_size, rank=rank)" in d["advice"]  # a sampler was recorded
    meta_b = make_meta("lightning")
    for facts in meta_b["ranks"]:
        facts["sampler"] = {"class": "_InfiniteConstantSampler", "num_samples": None}  # an IterableDataset's loader
    a, b = pair(tmp_path / "iterable", meta_b=meta_b, records_b=records_b)
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "data_order.shared" and "IterableDataset" in d["advice"]
    assert "DistributedSampler" not in d["advice"]


def test_samples_one_step_ahead_are_named_as_a_shift(tmp_path):
    """Issue 37: a side that drew one batch before its first counted step (a batch taken to look at
    shapes) consumes at every step what the other consumes a step later: named with its relation,
    the side ahead and k, not as 'other samples'."""
    records_a = make_records()
    for rank, recs in records_a.items():
        epoch0 = [r for r in recs if r["epoch"] == 0]
        shifted = [r["indices"] for r in epoch0[1:]] + [[DATASET + rank]]  # the next batch, then one unseen
        for record, indices in zip(epoch0, shifted):
            record["indices"] = list(indices)
    a, b = pair(tmp_path, records_a=records_a)
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"], d["rank"]) == ("data_order.ahead", 1, 0), d["explanation"]
    relation = d["evidence"]["relation"]
    assert (relation["kind"], relation["quantity"], relation["side"], relation["value"]) == (
        "shift",
        "samples",
        "raw",
        1,
    )
    assert "raw's samples at each step are lightning's 1 step(s) later" in d["explanation"]
    assert d["advice"].startswith("On raw: draw no batch from the training data outside the steps")
    # the same records without the shift: another order, not a shift
    records_a = make_records(seed=7)
    a, b = pair(tmp_path / "other", records_a=records_a)
    _, d = run_diagnosis(a, b)
    assert d["kind"] != "data_order.ahead"


def test_another_accumulation_boundary_is_named_from_the_recorded_micro_batches(tmp_path):
    """Issue 36 (the HF example's round 3): raw's `step % n == 0` steps after the first micro-batch alone,
    the Trainer after two; the step-1 batches differ and the tool said 'other samples'. With micro_batches
    recorded on both sides (TraceCallback records it) the boundary is named."""
    records_a, records_b = make_records(), make_records()
    for records, first in ((records_a, 1), (records_b, 2)):
        for recs in records.values():
            for record in recs:
                record["micro_batches"] = first if record["step"] == 1 else 2
    for recs in records_a.values():
        recs[0]["indices"] = recs[0]["indices"][: BATCH // 2]  # one micro-batch of the two
    a, b = pair(tmp_path, records_a=records_a, records_b=records_b)
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("data_order.accumulation", 1), d["explanation"]
    assert d["evidence"]["micro_batches"] == {"raw": 1, "lightning": 2}
    assert "raw stepped its optimizer after 1 micro-batch(es) and lightning after 2" in d["explanation"]
    assert "(step + 1) % n == 0" in d["advice"] and "DistributedSampler" not in d["advice"]


def test_tensors_in_one_final_state_only_are_named_not_blamed_on_sharding(tmp_path):
    """Issue 36 (the IterableDataset example's round 2): the port registered its feature table as two
    buffers; every step matched and the tool spoke of DistributedSampler padding and max_steps. The final
    states' names are what differs, and that is what it says."""
    a = write_run(tmp_path / "raw", make_meta("raw"), make_records())
    extra = {**PARAMS, "inputs": torch.zeros(4), "targets": torch.ones(4)}
    b = write_run(tmp_path / "lightning", make_meta("lightning"), make_records(), params=extra)
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "step_count.state_names", d["explanation"]
    assert d["evidence"]["only_in"] == {"raw": [], "lightning": ["inputs", "targets"]}
    assert "['inputs', 'targets'] on lightning only" in d["explanation"]
    assert "DistributedSampler" not in d["advice"] + d["explanation"]
    assert "register_buffer" in d["explanation"] + d["advice"] or "plain attribute" in d["advice"]


def test_parameters_apart_after_a_first_step_without_gradients_name_the_initial_weights(tmp_path):
    """Issue 36 (the DDP tutorial's round 1): the port built the model before the dataset, so both the data
    and the initial weights came out of the global RNG differently; every gradient was zero (a loss over one
    class) and the parameters differed at step 1. The tool spoke of the samples alone."""
    records_a, records_b = make_records(), make_records(seed=7)
    for records, shift in ((records_a, 0.0), (records_b, 0.25)):
        for recs in records.values():
            for record in recs:
                record["grad_norm"] = 0.0
                record["param_digest"] = [-4.5 + shift, 0.625]
    unrecorded = {"meta_a": make_meta("raw", init=None), "meta_b": make_meta("lightning", init=None)}
    _, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b, **unrecorded))
    assert d["kind"].startswith("data_order") and d["step"] == 1, d["explanation"]
    assert d["evidence"]["initial_weights_differ"] is True
    assert "so the initial weights differ" in d["explanation"]
    # issue 46: where both sides recorded equal init digests, the initial weights are said equal, never apart
    _, d = run_diagnosis(*pair(tmp_path / "digests", records_a=records_a, records_b=records_b))
    assert "initial_weights_differ" not in d["evidence"] and d["evidence"]["moved_without_gradients"] is True
    assert "the initial weights are equal" in d["explanation"], d["explanation"]
    # with gradients, other samples alone move the parameters apart: nothing is said of the initial weights
    _, d = run_diagnosis(*pair(tmp_path / "moved", records_b=make_records(seed=7)))
    assert "initial_weights_differ" not in d["evidence"]


def test_gradients_accumulated_across_a_validation_and_zeroed_on_one_side_are_named(tmp_path):
    """Issue 36 (the HF example's round 4): the loop's step 3 accumulates the last micro-batch of epoch 0 and
    the first of epoch 1, with its evaluation in between; Lightning zeroes the gradients before validating.
    Same samples, same loss, another gradient norm: the tool listed candidates, then (with a module watch
    over the validation's calls) blamed the batch contents, whose digests were equal."""
    records_a, records_b = make_records(), make_records()
    for records in (records_a, records_b):
        for recs in records.values():
            for record in recs:
                record["micro_batches"] = 2
    for recs in records_b.values():
        for record in recs[4:]:  # lightning from step 5 on, after the validation at step 4
            record["grad_norm"] = record["grad_norm"] / 4
    trained_apart(records_b, 5)
    meta_b = make_meta("lightning")
    meta_b.update(precision="32-true", resumed_from=None)  # what TraceCallback writes
    a, b = pair(tmp_path, meta_b=meta_b, records_a=records_a, records_b=records_b)
    for run in (a, b):
        (run / "validation.jsonl").write_text(json.dumps({"epoch": 0, "step": 4, "val_loss": 1.5}) + "\n")
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("gradients.across_validation", 5), d["explanation"]
    assert "raw and lightning validated at step 4" in d["explanation"]
    assert d["advice"].startswith("Treat the gradients across a validation alike: on lightning, keep them")
    # no validation between the micro-batches: not this cause
    for run in (a, b):
        (run / "validation.jsonl").write_text(json.dumps({"epoch": 0, "step": 8, "val_loss": 1.5}) + "\n")
    _, d = run_diagnosis(a, b)
    assert d["kind"] != "gradients.across_validation"


def test_an_evaluation_between_two_steps_spans_no_micro_batch_and_the_recorded_sync_pattern_is_named(tmp_path):
    """ConvNeXt's port (first pass, round 2): Lightning's sanity check ran before any micro-batch, the hooks'
    record said so (`micro_batch` 0), and the per-micro-batch sync differed ([no sync, no sync] against [no sync,
    sync]); the finding was still 'gradients kept across a validation'. An evaluation right after a step spans no
    micro-batch of the next: what the records hold about the sync is the finding."""
    records_a, records_b = make_records(), make_records()
    for records, flags in ((records_a, [False, False]), (records_b, [False, True])):
        for recs in records.values():
            for record in recs:
                record["micro_batches"], record["grad_sync"] = 2, flags
    for recs in records_a.values():
        for record in recs[4:]:  # raw from step 5 on: each rank stepped on its own gradients
            record["grad_norm"] = record["grad_norm"] / 4
    trained_apart(records_a, 5)
    meta_b = make_meta("lightning")
    meta_b.update(precision="32-true", resumed_from=None)  # what TraceCallback writes
    a, b = pair(tmp_path, meta_b=meta_b, records_a=records_a, records_b=records_b)
    for rank in range(WORLD):  # the hooks saw lightning evaluate right after step 4, before step 5's first backward
        evaluation = {"step": 4, "micro_batch": 0, "epoch": 0, "forwards": 1, "output_digest": "0" * 64}
        evaluation.update(module="Net", training=False, grad_enabled=False, inference_mode=False, grads_held=True)
        (b / "trace" / f"rank{rank}.evaluations.jsonl").write_text(json.dumps(evaluation) + "\n")
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("gradients.sync_pattern", 5), d["explanation"]
    assert d["evidence"]["sync_shape"] == "unsynced" and d["advice"].startswith("On raw, let the last"), d


def test_a_sync_pattern_apart_before_a_loss_that_parts_in_its_last_bits_is_named(tmp_path):
    """The seventh first pass (SLIP's round 3): the loop synced both micro-batches of every step, Lightning's
    accumulation the last only. Step 1's lr was a warmup's 1e-6: its averaged gradients rounded otherwise, the
    norm the optimizer saw and the digested tensors came out equal, and the first recorded difference was step 2's
    loss, a few ulps apart. The tool said undetermined (an earlier update, param groups); the records held the
    sync patterns apart from step 1."""
    records_a, records_b = make_records(), make_records()
    for records, flags in ((records_a, [True, True]), (records_b, [False, True])):
        for recs in records.values():
            for record in recs:
                record["micro_batches"], record["grad_sync"] = 2, flags
    for recs in records_b.values():
        for record in recs[1:]:  # from step 2 on, the loss and what follows it part in their last bits
            record["loss"] = float(np.float32(record["loss"]).view(np.int32).__add__(2).view(np.float32))
    trained_apart(records_b, 2)
    _, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b))
    assert (d["kind"], d["step"]) == ("gradients.sync_pattern", 2), d["explanation"]
    assert d["evidence"]["sync_shape"] == "order", d["evidence"]
    assert "raw [sync, sync], lightning [no sync, sync]" in d["explanation"], d["explanation"]
    assert "(step 1's update came before this loss)" in d["explanation"], d["explanation"]
    # the loss far apart: no rounding of one sum in another order explains it
    for recs in records_b.values():
        for record in recs[1:]:
            record["loss"] *= 1.5
    _, d = run_diagnosis(*pair(tmp_path / "far", records_a=records_a, records_b=records_b))
    assert d["kind"] != "gradients.sync_pattern", d["explanation"]
    # the same patterns on both sides: not this cause
    for recs in records_b.values():
        for record in recs:
            record["grad_sync"] = [True, True]
    _, d = run_diagnosis(*pair(tmp_path / "alike", records_a=records_a, records_b=make_records()))
    assert d["kind"] != "gradients.sync_pattern", d["explanation"]


def test_an_iterable_datasets_loader_against_batches_drawn_by_hand_names_the_base_seed_draw(tmp_path):
    """Issue 36 (nanoGPT's port): the port's IterableDataset drew its windows from the global generator,
    seeded and drawn in train.py's order, and still started one draw later: iterating a DataLoader draws
    its workers' base seed from the global generator first. The tool said only 'drawn in the same order'."""
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    for facts in meta_a["ranks"]:
        facts.pop("sampler", None)  # a loop that draws its batches by hand records no sampler
    for facts in meta_b["ranks"]:
        facts["sampler"] = {"class": "_InfiniteConstantSampler", "num_samples": None}
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_b=make_records(seed=7))
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "data_order.unrecorded", d["explanation"]
    assert "lightning's loader reads an IterableDataset" in d["explanation"]
    assert "DataLoader(..., generator=torch.Generator())" in d["explanation"]
    meta_b["ranks"] = make_meta("lightning")["ranks"]  # a DistributedSampler's loader: not this mechanism
    a, b = pair(tmp_path / "sampler", meta_a=meta_a, meta_b=meta_b, records_b=make_records(seed=7))
    _, d = run_diagnosis(a, b)
    assert "base seed" not in d["explanation"]


def test_samples_apart_on_the_evaluating_rank_alone_name_the_evaluations_draws(tmp_path):
    """Issue 36 (nanoGPT's round 4): raw's rank 0 evaluates at iteration 0 with batches drawn from the
    training's generator; rank 1 matched at every step, rank 0 drew other windows from step 1 on. The tool
    said 'other samples' and repeated the previous round's base-seed advice."""
    records_a = make_records()
    for record in records_a[0]:
        record["indices"] = [i + DATASET for i in record["indices"]]  # rank 0's draws moved on raw
    a, b = pair(tmp_path, records_a=records_a)
    (a / "validation.jsonl").write_text(json.dumps({"epoch": 0, "step": 0, "val_loss": 4.25}) + "\n")
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"], d["rank"]) == ("data_order.evaluation", 1, 0), d["explanation"]
    assert d["evidence"]["validation_steps_one_side"] == {"side": "raw", "steps": [0]}
    assert d["evidence"]["ranks_equal_throughout"] == [1]
    assert "raw validated at step(s) 0, before step 1" in d["explanation"]
    (a / "validation.jsonl").unlink()  # no evaluation on one side: other samples, nothing said of one
    _, d = run_diagnosis(a, b)
    assert d["kind"] != "data_order.evaluation"


def test_one_more_step_at_the_end_with_every_shared_step_equal_is_named_as_another_stop(tmp_path):
    """Issue 36 (nanoGPT's round 6): train.py runs max_iters + 1 iterations, the port max_steps=max_iters;
    every step both ran matched and the tool explained the count by DistributedSampler padding."""
    records_a = make_records()
    records_b = {r: recs[:-1] for r, recs in make_records().items()}
    _, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b))
    assert d["kind"] == "step_count.stop", d["explanation"]
    assert d["evidence"]["stops_later"] == {"side": "raw", "extra_steps": 1}
    assert "DistributedSampler" not in d["advice"] and "max_steps" in d["advice"]
