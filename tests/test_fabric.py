"""The Fabric twin (lightning_impl/fabric.py): bitwise equal to raw/train.py on a representative subset
of the settings matrix, under both launchers, and after a mid-epoch crash resumed by torchrun.

Each run is made once (module fixtures) at the smallest size that proves the point: 512 samples,
two ranks of batch 32 (8 steps per epoch), 2 epochs, a validation set of 101 that 2 does not divide.
Settings that touch different keys share a run, so each launcher and each setting trains once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import (
    DEFAULT_CONFIG,
    PYTHON,
    REPO,
    TORCHRUN,
    assert_params_equal,
    assert_traces_equal,
    check_ok,
    final_params,
    free_port,
    main_in_process,
    module_from_file,
    run_cmd,
    run_raw,
    steps,
)

from ddp_parity.faults import FAULT_ENV, MARKER_ENV
from ddp_parity.trace import read_meta, read_validation

SMALL = ["--data.num_samples", "512", "--data.val_samples", "101", "--trainer.max_epochs", "2"]
# the crash test's cadence: a checkpoint every 3 steps and at epoch ends (steps 3, 6, 8, 9, 12, 15, 16)
CHECKPOINTS = ["--checkpoint.every_n_train_steps", "3", "--checkpoint.keep_last", "-1"]
SETTINGS = {
    # the loop's own settings at once: dropout draws from the global RNG (the re-seed after building
    # the model), accumulation with a leftover of 2 micro-batches per epoch (no_backward_sync),
    # clipping (fabric.clip_gradients), a per-step schedule
    "loop": [
        *SMALL,
        "--model.dropout",
        "0.3",
        "--trainer.accumulate_grad_batches",
        "3",
        "--trainer.gradient_clip_val",
        "0.1",
        "--model.lr_schedule",
        "step",
        "--model.lr_schedule_interval",
        "step",
        "--model.lr_step_size",
        "3",
    ],
    # precision and data: bf16 autocast through Fabric's precision plugin, 515 samples (the sampler pads
    # the short rank, the loader drops the tail: still 8 steps per epoch), a per-epoch cosine schedule;
    # with the crash test's checkpoint cadence (it changes no number), so the crash test resumes this
    # run. The plain fp32 row needs no run of its own: "loop" trains in fp32, and checkpoints change no
    # number.
    "bf16-uneven": [
        *SMALL,
        "--data.num_samples",
        "515",
        "--data.drop_last",
        "true",
        "--trainer.precision",
        "bf16-mixed",
        "--model.lr_schedule",
        "cosine",
        "--model.lr_step_size",
        "2",
        *CHECKPOINTS,
    ],
}
# the setting Fabric runs under its own launcher (the other under torchrun), and the crash test resumes
OWN_LAUNCHER = "bf16-uneven"
PARITY_KEYS = ("step", "epoch", "loss", "lr", "grad_norm", "indices", "param_digest")


def fabric_cmd(run_dir: Path, overrides: list[str], launcher: str, max_restarts: int = 0) -> list[str]:
    args = ["-m", "lightning_impl.fabric", "--config", str(DEFAULT_CONFIG), "--run_dir", str(run_dir)]
    args += ["--trainer.devices", "2", "--trainer.enable_progress_bar", "false", *overrides]
    if launcher == "fabric":
        return [PYTHON, *args]
    return [
        TORCHRUN,
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        f"--max-restarts={max_restarts}",
        *args,
    ]


def run_fabric(tmp_path: Path, name: str, overrides: list[str], launcher: str, fault: str | None = None) -> Path:
    """Two ranks of `python -m lightning_impl.fabric` under Fabric's launcher or torchrun; with a
    fault (RANK:STEP), torchrun restarts the workers once."""
    run_dir = tmp_path / name
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    if fault:
        env.update({FAULT_ENV: fault, MARKER_ENV: str(tmp_path / f"{name}.fired")})
    cmd = fabric_cmd(run_dir, overrides, launcher, max_restarts=1 if fault else 0)
    check_ok(run_cmd(cmd, env=env, log=tmp_path / f"{name}.log"))
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """{setting: (raw run, fabric run)}: raw under torchrun; Fabric under its own launcher for one
    setting and under torchrun for the other, so both launchers are held to the raw loop."""
    made = {}
    for name, overrides in SETTINGS.items():
        folder = tmp_path_factory.mktemp(name)
        raw = folder / "raw"
        check_ok(run_raw(folder, 2, *overrides, run_dir=raw))
        launcher = "fabric" if name == OWN_LAUNCHER else "torchrun"
        made[name] = raw, run_fabric(folder, "fabric", overrides, launcher)
    return made


def assert_runs_bitwise_equal(a: Path, b: Path) -> None:
    assert_traces_equal(a, b, ranks=(0, 1), keys=PARITY_KEYS)
    assert read_validation(a) == read_validation(b) and read_validation(a)
    assert_params_equal(final_params(a), final_params(b))


@pytest.mark.slow
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_fabric_is_bitwise_equal_to_raw(runs, setting):
    raw, fabric = runs[setting]
    meta = read_meta(fabric)
    assert meta["side"] == "fabric" and meta["world_size"] == 2 and meta["replicas_identical"] is True
    assert {r["sampler"]["class"] for r in meta["ranks"]} == {"DistributedSampler"}  # Fabric's injected one
    assert [r["sampler"]["seed"] for r in meta["ranks"]] == [42, 42]
    assert_runs_bitwise_equal(raw, fabric)


@pytest.mark.slow
def test_mid_epoch_crash_resumes_bitwise_under_torchrun(runs, tmp_path):
    """Rank 1 is killed after step 11 (epoch 1, 3 batches in); torchrun restarts both ranks, which
    resume from the checkpoint of step 9 (1 batch into epoch 1) and end where the uninterrupted run
    ends. Epoch 1 is the case Fabric needs help with: its loader counts epochs from 0 in a new process.
    Resumed under torchrun, compared with the run Fabric's own launcher made uninterrupted."""
    crashed = run_fabric(tmp_path, "crashed", SETTINGS[OWN_LAUNCHER], "torchrun", fault="1:11")
    assert (tmp_path / "crashed.fired").exists(), "the fault never fired"
    assert Path(read_meta(crashed)["resumed_from"]).name == "step-00000009.pt"
    assert steps(crashed, 1) == list(range(1, 17))
    uninterrupted = runs[OWN_LAUNCHER][1]
    assert_runs_bitwise_equal(uninterrupted, crashed)
    assert sorted(p.name for p in (crashed / "checkpoints").glob("step-*.pt")) == sorted(
        p.name for p in (uninterrupted / "checkpoints").glob("step-*.pt")
    )


@pytest.mark.slow
def test_bad_input_gets_the_raw_loops_one_line_error_before_anything_is_written(tmp_path):
    from lightning_impl import fabric  # here, not at the top: collecting the fast tier imports no Lightning

    run_dir = tmp_path / "never"
    bad = ["--config", str(DEFAULT_CONFIG), "--run_dir", str(run_dir), "--model.dropout", "1.5"]
    # both mains refuse it in the config parser, before any seed, thread count or process group is set
    fabric_code, _, fabric_err = main_in_process(fabric.main, *bad)
    raw_code, _, raw_err = main_in_process(module_from_file("raw_train", REPO / "raw" / "train.py").main, *bad)
    assert fabric_code == raw_code == 2
    (line,) = fabric_err.strip().splitlines()
    assert line.startswith("python -m lightning_impl.fabric: error: ") and "model.dropout" in line
    assert line.split(": error: ", 1)[1] == raw_err.strip().split(": error: ", 1)[1]
    assert not run_dir.exists()
