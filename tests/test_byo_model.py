"""The "bring your own model" example (examples/byo_model/): a CNN with dropout and batch norm,
trained by a hand-written DDP loop and by a plain Lightning Trainer, 2 processes each on CPU, must
give bitwise-identical traces — and dropout must really be on while they do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import module_from_file

from ddp_parity.compare.comparator import Criterion, compare_runs
from ddp_parity.harness.launch import free_port, kill_tree, torchrun_args
from ddp_parity.trace import read_records

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "byo_model"
TIMEOUT_S = 120
EPOCHS = 2  # 2 x 24 steps per rank: two train iterators, two validations, a partial last batch each epoch


def load_example_model():
    return module_from_file("byo_example_model", EXAMPLE / "model.py")


def child_env(port: int) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCHELASTIC_", "DDP_PARITY_", "PL_"))
        and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK")
    }
    env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    return env


def run(cmd: list[str], port: int) -> None:
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=child_env(port),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, _ = proc.communicate()
        pytest.fail(f"timed out after {TIMEOUT_S} s: {' '.join(cmd)}\n{out[-4000:]}")
    finally:
        kill_tree(proc.pid)
    assert proc.returncode == 0, f"{' '.join(cmd)}\nexit code {proc.returncode}\n{out[-6000:]}"


@pytest.fixture(scope="module")
def byo_runs(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("byo")
    raw, lightning = base / "raw", base / "lightning"
    port = free_port()
    run([*torchrun_args(2, port), str(EXAMPLE / "train_raw.py"), "--run_dir", str(raw), "--epochs", str(EPOCHS)], port)
    port = free_port()  # Lightning's own launcher: it re-runs the script once per extra rank
    run(
        [
            sys.executable,
            str(EXAMPLE / "train_lightning.py"),
            "--run_dir",
            str(lightning),
            "--devices",
            "2",
            "--epochs",
            str(EPOCHS),
        ],
        port,
    )
    return raw, lightning


def test_raw_and_lightning_are_bitwise_equal(byo_runs):
    raw, lightning = byo_runs
    result = compare_runs(raw, lightning, Criterion())  # exact: rtol = atol = 0
    assert result.criterion.exact
    assert result.equivalent, json.dumps(result.to_dict(), indent=1, default=str)[:6000]
    loss = result.quantities["loss"]
    assert loss.compared == 2 * EPOCHS * 24 == loss.equal and loss.max_abs == 0.0
    assert result.quantities["samples"].compared == loss.compared == result.quantities["samples"].equal
    assert result.validation.compared == EPOCHS * 3 == result.validation.equal
    assert result.params.compared > 0 and result.params.compared == result.params.equal
    # BatchNorm buffers are in the final state too, and every replica ended identical on both sides
    assert any("running_mean" in row["name"] for row in result.param_tensors)
    for rank in (0, 1):  # the per-step parameter digest (not part of compare_runs' verdict) agrees too
        assert [r["param_digest"] for r in read_records(raw, rank)] == [
            r["param_digest"] for r in read_records(lightning, rank)
        ]
    for run_dir in byo_runs:
        meta = json.loads((run_dir / "meta.json").read_text())
        assert meta["replicas_identical"] is True and meta["world_size"] == 2
        assert [r["threads"] for r in meta["ranks"]] == [1, 1]


def first_step_loss(m, cfg, indices: list[int], dropout_on: bool) -> float:
    """Replay step 1 of rank 0 in this process: seed, build, re-seed (Lightning's reset_seed), one
    draw for the train iterator's base seed, then the training-mode forward — with or without dropout."""
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    try:
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        model = m.build_model(cfg)
        torch.manual_seed(cfg.seed)
        torch.empty((), dtype=torch.int64).random_()
        if not dropout_on:
            for module in model.modules():
                if isinstance(module, (torch.nn.Dropout, torch.nn.Dropout2d)):
                    module.p = 0.0
        model.train()
        train_set, _ = m.build_datasets(cfg)
        batch = torch.tensor(indices)
        with torch.no_grad():
            return torch.nn.functional.cross_entropy(model(train_set.x[batch]), train_set.y[batch]).item()
    finally:
        torch.set_num_threads(threads)
        torch.set_rng_state(rng)


def test_dropout_was_active(byo_runs):
    """Fails if dropout were off (p=0, eval mode, a model without it): the recorded first loss is
    the replayed loss *with* dropout masks, bitwise, and not the loss without them."""
    m = load_example_model()
    cfg = m.Config(run_dir="-", epochs=EPOCHS)
    assert cfg.dropout > 0
    for run_dir in byo_runs:
        first = read_records(run_dir, 0)[0]
        assert first["step"] == 1 and len(first["indices"]) == cfg.batch_size
        with_dropout = first_step_loss(m, cfg, first["indices"], dropout_on=True)
        without = first_step_loss(m, cfg, first["indices"], dropout_on=False)
        assert with_dropout != without
        assert first["loss"] == with_dropout, (run_dir.name, first["loss"], with_dropout, without)
        assert first["loss"] != without
