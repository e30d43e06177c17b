"""Real runs of a model of our own (tests/watch_twins.py: a tiny Transformer with BatchNorm and
dropout) through the public plugin: a hand-written DDP loop with `recorder.watch(ddp_model)` and a
plain Lightning Trainer with `TraceCallback`, 2 processes each on gloo. One module is made to differ
on the raw side; localise() must name it with its phase, step and rank. All runs of the module start
at once and are shared by the tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from conftest import child_env
from safetensors.torch import load_file

from ddp_parity.compare.comparator import compare_runs
from ddp_parity.compare.modules import format_module_finding, localise
from ddp_parity.harness.launch import Launch, free_port, run_launches, torchrun_args
from ddp_parity.harness.replay import replay_and_localise, step_to_replay
from ddp_parity.trace import FINAL_PARAMS_FILE, read_records
from ddp_parity.watch import WATCH_STEP_ENV, read_module_trace

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TWINS = str(REPO / "tests" / "watch_twins.py")
TIMEOUT_S = 900  # small runs at once on a shared machine
STEPS_PER_EPOCH = 4  # 64 samples, 2 ranks, batch 8

# trained one after the other by one torchrun job (watch_twins.py's --next): its processes start once
RAW_RUNS = {
    "raw_all": ["--watch-steps", "all"],
    "raw_none": ["--watch-steps", "none"],
    "no_reseed": ["--no-reseed"],
    "bn_momentum": ["--bn-momentum", "0.5"],
    "head_bf16": ["--head-bf16"],
    "scaled_inputs_rank1": ["--scale-inputs-rank", "1"],
}
REPLAYED = "reseed_each_epoch"  # a job of its own: the replay launches its command again


def child_env_without_watch(port: int) -> dict:
    """The default watched steps unless a run sets its own, whatever the caller's shell exports."""
    env = child_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    env.pop(WATCH_STEP_ENV, None)
    return env


def raw_launch(name: str, base: Path, runs: dict[str, list[str]]) -> Launch:
    port = free_port()
    command = [*torchrun_args(2, port), TWINS, "raw"]
    for run, flags in runs.items():
        command += [*(["--next"] if run != next(iter(runs)) else []), "--run_dir", str(base / run), *flags]
    return Launch(name, [command], child_env_without_watch(port), base / name, base / f"{name}.log")


def lightning_launch(base: Path) -> Launch:
    port = free_port()
    run_dir = base / "lightning"
    command = [sys.executable, TWINS, "lightning", "--run_dir", str(run_dir)]
    return Launch("lightning", [command], child_env_without_watch(port), run_dir, base / "lightning.log")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Launch]:
    base = tmp_path_factory.mktemp("watch")
    launches = {
        "lightning": lightning_launch(base),
        "raw": raw_launch("raw", base, RAW_RUNS),
        REPLAYED: raw_launch(REPLAYED, base, {REPLAYED: ["--reseed-each-epoch"]}),
    }
    outcomes = run_launches(list(launches.values()), TIMEOUT_S)
    failed = [f"{o.describe()}\n{o.log_tail[-3000:]}" for o in outcomes if not o.ok]
    assert not failed, "\n\n".join(failed)
    return launches


def run_dir(runs, name) -> Path:
    return runs["lightning"].run_dir.parent / name  # every run's directory is in the one folder


def test_twins_are_bitwise_equal_and_nothing_is_localised(runs):
    raw, lightning = run_dir(runs, "raw_all"), run_dir(runs, "lightning")
    assert compare_runs(raw, lightning).equivalent
    assert sorted(read_module_trace(lightning, 0)) == [1, 2]  # TraceCallback watches by itself
    assert sorted(read_module_trace(raw, 1)) == list(range(1, 2 * STEPS_PER_EPOCH + 1))
    calls = read_module_trace(lightning, 0)[1]["calls"]
    assert {"net.block.dropout", "loss_fn"} <= {c["name"] for c in calls}  # the LightningModule's names
    assert "block.dropout" in {c["name"] for c in read_module_trace(raw, 0)[1]["calls"]}  # DDP unwrapped
    assert localise(raw, lightning) is None


def test_watching_leaves_training_bitwise_unchanged(runs):
    watched, unwatched = run_dir(runs, "raw_all"), run_dir(runs, "raw_none")
    assert not (unwatched / "trace" / "rank0.modules.jsonl").exists()
    a, b = load_file(watched / FINAL_PARAMS_FILE), load_file(unwatched / FINAL_PARAMS_FILE)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    for rank in (0, 1):
        assert [r["loss"] for r in read_records(watched, rank)] == [r["loss"] for r in read_records(unwatched, rank)]


@pytest.mark.parametrize(
    "name, expected, reading",
    [
        ("no_reseed", ("block.dropout", "Dropout", "forward", "output", 1, 0, True), "random stream differs"),
        ("bn_momentum", ("bn", "BatchNorm1d", "forward", "state", 1, 0, True), "momentum=0.5"),
        ("head_bf16", ("head", "Linear", "forward", "state", 1, 0, True), "runs in another mode"),
        ("scaled_inputs_rank1", ("embed", "Linear", "forward", "input", 1, 1, False), "batch contents differ"),
    ],
)
def test_one_module_made_to_differ_is_named(runs, name, expected, reading):
    d = localise(run_dir(runs, name), run_dir(runs, "lightning"))
    assert d is not None
    assert (d["name"], d["type"], d["phase"], d["what"], d["step"], d["rank"], d["input_equal"]) == expected
    assert reading in d["reading"]
    flipped = localise(run_dir(runs, "lightning"), run_dir(runs, name))  # either side first
    assert (flipped["name"], flipped["step"], flipped["rank"]) == (d["name"], d["step"], d["rank"])


def test_summary_line_names_the_dropout(runs):
    line = format_module_finding(localise(run_dir(runs, "no_reseed"), run_dir(runs, "lightning")))
    assert line.startswith(
        "first difference: step 1 rank 0, forward of block.dropout (Dropout): inputs equal, outputs differ"
        " — the random stream differs at this layer"
    )


def test_divergence_after_the_watched_steps_is_found_by_the_replay(runs):
    raw, lightning = runs[REPLAYED], runs["lightning"]
    report = compare_runs(raw.run_dir, lightning.run_dir).to_dict()
    first = report["first_divergence"]
    assert (first["quantity"], first["step"]) == ("loss", STEPS_PER_EPOCH + 1)  # the second epoch's first step
    assert localise(raw.run_dir, lightning.run_dir) is None  # steps 1 and 2 were watched, and are equal
    step = step_to_replay(first, raw.run_dir, lightning.run_dir)
    assert step == STEPS_PER_EPOCH + 1
    replay = replay_and_localise(raw, lightning, step, TIMEOUT_S)
    assert replay["failed"] == []
    assert sorted(read_module_trace(replay["runs"]["a"], 0)) == [step]
    d = replay["module"]
    assert (d["name"], d["type"], d["phase"], d["what"], d["step"], d["rank"]) == (
        "block.dropout",
        "Dropout",
        "forward",
        "output",
        step,
        0,
    )
