"""raw/train.py end to end: real torchrun, gloo on CPU."""

from __future__ import annotations

import math

import pytest
from conftest import (
    DEFAULT_CONFIG,
    PYTHON,
    assert_params_equal,
    assert_traces_equal,
    check_ok,
    describe,
    final_params,
    run_cmd,
    run_raw,
    steps,
)

from ddp_parity.trace import FINAL_PARAMS_FILE, META_FILE, read_meta, read_records, read_validation, trace_ranks

NUM_SAMPLES = 2000  # configs/default.yaml
BATCH = 32
WORLD = 2
STEPS_PER_EPOCH = math.ceil(NUM_SAMPLES / WORLD / BATCH)  # 1000 samples per rank: 31 full batches + 8
EPOCHS = 3  # configs/default.yaml


@pytest.mark.slow
def test_torchrun_two_processes_end_to_end(raw_default_run):
    run_dir = raw_default_run
    epochs = EPOCHS

    meta = read_meta(run_dir)
    assert meta["side"] == "raw"
    assert meta["world_size"] == 2
    assert meta["backend"] == "gloo"
    assert meta["finished"] is True
    assert meta["replicas_identical"] is True
    assert [r["rank"] for r in meta["ranks"]] == [0, 1]
    assert len({r["pid"] for r in meta["ranks"]}) == 2  # two real processes
    assert (run_dir / FINAL_PARAMS_FILE).is_file()
    assert set(final_params(run_dir)) == {"net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"}
    assert trace_ranks(run_dir) == [0, 1]
    for rank in (0, 1):
        assert (run_dir / "trace" / f"rank{rank}.jsonl").is_file()

    records = {rank: read_records(run_dir, rank) for rank in (0, 1)}
    for rank in (0, 1):
        assert [r["step"] for r in records[rank]] == list(range(1, epochs * STEPS_PER_EPOCH + 1))
        assert [r["epoch"] for r in records[rank]] == [e for e in range(epochs) for _ in range(STEPS_PER_EPOCH)]

    # training works: the mean loss of the last epoch is below that of the first (both ranks)
    def mean_loss(epoch: int) -> float:
        values = [r["loss"] for rank in (0, 1) for r in records[rank] if r["epoch"] == epoch]
        return sum(values) / len(values)

    assert mean_loss(epochs - 1) < mean_loss(0)

    # the data split: disjoint shards within each step, every sample exactly once per epoch
    for r0, r1 in zip(records[0], records[1]):
        assert r0["step"] == r1["step"]
        assert not set(r0["indices"]) & set(r1["indices"]), f"step {r0['step']}: ranks share samples"
    orders = []
    for epoch in range(epochs):
        seen = [i for rank in (0, 1) for r in records[rank] if r["epoch"] == epoch for i in r["indices"]]
        assert sorted(seen) == list(range(NUM_SAMPLES)), f"epoch {epoch}: not every sample exactly once"
        orders.append([i for r in records[0] if r["epoch"] == epoch for i in r["indices"]])
    assert orders[0] != orders[1], "every epoch repeats the same order (sampler.set_epoch not called?)"

    # validation: every one of the 301 samples counted once per epoch, logged by rank 0
    validation = read_validation(run_dir)
    assert [(v["epoch"], v["step"]) for v in validation] == [(e, (e + 1) * STEPS_PER_EPOCH) for e in range(epochs)]
    assert all(v["val_count"] == 301 for v in validation)


@pytest.mark.slow
def test_plain_process_equals_torchrun_one_process(tmp_path):
    overrides = ("--data.num_samples", "256", "--trainer.max_epochs", "2")
    plain, torchrun1 = tmp_path / "plain", tmp_path / "torchrun1"
    check_ok(run_raw(tmp_path, None, *overrides, run_dir=plain))
    check_ok(run_raw(tmp_path, 1, *overrides, run_dir=torchrun1))

    # the two really ran differently: no process group vs a one-process gloo group
    assert read_meta(plain)["backend"] is None and read_meta(plain)["world_size"] == 1
    assert read_meta(torchrun1)["backend"] == "gloo" and read_meta(torchrun1)["world_size"] == 1
    assert trace_ranks(plain) == trace_ranks(torchrun1) == [0]
    assert steps(plain) == list(range(1, 2 * 8 + 1))  # 256 / 32 = 8 steps per epoch

    assert_traces_equal(plain, torchrun1, ranks=(0,))
    assert read_validation(plain) == read_validation(torchrun1)
    assert_params_equal(final_params(plain), final_params(torchrun1))


@pytest.mark.slow
def test_epoch_boundary_resume_equals_uninterrupted_run(raw_default_run, tmp_path):
    uninterrupted = raw_default_run  # 3 epochs in one go
    resumed = tmp_path / "resumed"
    check_ok(run_raw(tmp_path, 2, "--trainer.max_epochs", "1", run_dir=resumed))
    assert steps(resumed, 0) == list(range(1, STEPS_PER_EPOCH + 1))
    assert (resumed / "checkpoints" / f"step-{STEPS_PER_EPOCH:08d}.pt").is_file()
    after_first = final_params(resumed)

    second = check_ok(run_raw(tmp_path, 2, "--resume", run_dir=resumed))  # the default 3 epochs
    meta = read_meta(resumed)
    assert meta["resumed_from"] and meta["resumed_from"].endswith(f"step-{STEPS_PER_EPOCH:08d}.pt"), describe(second)
    assert meta["finished"] is True and meta["replicas_identical"] is True

    n = EPOCHS * STEPS_PER_EPOCH
    for rank in (0, 1):
        assert steps(resumed, rank) == list(range(1, n + 1)), f"rank {rank}: steps not 1..{n} once each"
    assert_traces_equal(uninterrupted, resumed, ranks=(0, 1))
    assert read_validation(resumed) == read_validation(uninterrupted)
    final = final_params(resumed)
    assert_params_equal(final, final_params(uninterrupted))
    assert any(not after_first[k].equal(final[k]) for k in final), "the resumed run trained nothing"


def test_resume_without_checkpoint_exits_2(tmp_path):
    run_dir = tmp_path / "r"
    result = run_raw(tmp_path, None, "--resume", run_dir=run_dir)
    assert result.returncode == 2, describe(result)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"stderr is not one line:\n{result.stderr}"
    assert lines[0].startswith("raw/train.py: error:") and "checkpoint" in lines[0], lines[0]
    assert not (run_dir / META_FILE).exists()


def test_new_run_into_an_existing_run_dir_is_refused(tmp_path):
    run_dir = tmp_path / "r"
    overrides = ("--data.num_samples", "256", "--trainer.max_epochs", "1")
    check_ok(run_raw(tmp_path, None, *overrides, run_dir=run_dir))
    kept = {
        name: (run_dir / name).read_bytes()
        for name in (META_FILE, FINAL_PARAMS_FILE, "trace/rank0.jsonl", "validation.jsonl")
    }
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir())

    for again in (overrides, ("--data.num_samples", "256", "--trainer.max_epochs", "2", "--model.lr", "0.01")):
        result = run_raw(tmp_path, None, *again, run_dir=run_dir)
        assert result.returncode == 2, describe(result)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, f"stderr is not one line:\n{result.stderr}"
        assert str(run_dir) in lines[0] and "already holds a run" in lines[0], lines[0]
        for name, content in kept.items():
            assert (run_dir / name).read_bytes() == content, f"{name} was changed"
        assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == checkpoints


def test_reference_refuses_devices_auto_and_torchrun_in_one_line(tmp_path):
    """raw/reference.py emulates trainer.devices x num_nodes ranks in one plain process."""
    run_dir = tmp_path / "r"
    base = [PYTHON, "raw/reference.py", "--config", str(DEFAULT_CONFIG), "--run_dir", str(run_dir)]
    for extra, env, needle in (
        (["--trainer.devices", "auto"], None, "trainer.devices"),
        ([], {"RANK": "0"}, "not torchrun"),
    ):
        result = run_cmd(base + extra, env=env, timeout=120)
        assert result.returncode == 2, describe(result)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "error" in lines[0] and needle in lines[0], result.stderr
        assert not run_dir.exists()
