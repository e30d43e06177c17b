"""The Lightning twin: both launchers, bitwise parity with raw/train.py, the printed config, the trace
callback on somebody else's model, resume from last.ckpt, and mid-epoch resume with DataLoader workers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml
from conftest import (
    DEFAULT_CONFIG,
    PYTHON,
    assert_params_equal,
    assert_traces_equal,
    check_ok,
    describe,
    final_params,
    lightning_in_process,
    run_cmd,
    run_harness,
    run_lightning,
    steps,
    strip_prefix,
)

from ddp_parity.trace import (
    FINAL_PARAMS_FILE,
    FORMAT_VERSION,
    META_FILE,
    batch_fingerprint,
    read_meta,
    read_records,
    read_validation,
    trace_ranks,
)

STEPS_PER_EPOCH = math.ceil(2000 / 2 / 32)  # the default config on two processes
EPOCHS = 3  # the default config's trainer.max_epochs


def assert_two_process_run(run_dir, side: str) -> dict:
    meta = read_meta(run_dir)
    assert meta["side"] == side
    assert meta["world_size"] == 2 and meta["backend"] == "gloo"
    assert meta["finished"] is True and meta["replicas_identical"] is True
    assert len({r["pid"] for r in meta["ranks"]}) == 2
    assert trace_ranks(run_dir) == [0, 1]
    return meta


@pytest.fixture(scope="module")
def printed_config_under_torchrun(tmp_path_factory) -> tuple[str, Path]:
    """`fit --print_config` of the default config, and one run of that printed file under torchrun
    (2 processes): one run shows both that the printed config trains what the file says and that
    torchrun launches the same training as Lightning's own launcher. (the printed text, the run)"""
    tmp_path = tmp_path_factory.mktemp("printed")
    printed = check_ok(run_cmd([PYTHON, "-m", "lightning_impl", "fit", "--config", DEFAULT_CONFIG, "--print_config"]))
    printed_path = tmp_path / "printed.yaml"
    printed_path.write_text(printed.stdout)
    run_dir = tmp_path / "torchrun"
    check_ok(run_lightning(tmp_path, config=printed_path, run_dir=run_dir, launcher="torchrun", nproc=2))
    return printed.stdout, run_dir


@pytest.mark.slow
def test_lightning_launcher_equals_torchrun(lightning_default_run, printed_config_under_torchrun):
    via_torchrun = printed_config_under_torchrun[1]
    assert_two_process_run(lightning_default_run, "lightning")
    assert_two_process_run(via_torchrun, "lightning")
    for rank in (0, 1):
        assert steps(lightning_default_run, rank) == list(range(1, EPOCHS * STEPS_PER_EPOCH + 1))
    assert_traces_equal(lightning_default_run, via_torchrun, ranks=(0, 1))
    assert read_validation(lightning_default_run) == read_validation(via_torchrun)
    assert_params_equal(final_params(lightning_default_run), final_params(via_torchrun))


@pytest.mark.slow
def test_bitwise_parity_with_raw(raw_default_run, lightning_default_run):
    assert_two_process_run(raw_default_run, "raw")
    assert_two_process_run(lightning_default_run, "lightning")
    # per step, on every rank: loss, indices, grad_norm, lr (and step, epoch) exactly equal
    assert_traces_equal(raw_default_run, lightning_default_run, ranks=(0, 1))
    for rank in (0, 1):
        assert all("indices" in r and "grad_norm" in r for r in read_records(lightning_default_run, rank))
        # the per-layer sketches too: the same directions whatever the names (`net.` on Lightning's side)
        layers = [[r["layers"] for r in read_records(run, rank)] for run in (raw_default_run, lightning_default_run)]
        assert layers[0] == layers[1] and layers[0]
    raw_validation, lightning_validation = read_validation(raw_default_run), read_validation(lightning_default_run)
    assert len(raw_validation) == EPOCHS
    assert lightning_validation == raw_validation
    raw_params = final_params(raw_default_run)
    lightning_params = strip_prefix(final_params(lightning_default_run), "net.")  # ParityModule.net is the Net
    assert_params_equal(lightning_params, raw_params)


@pytest.mark.slow
def test_print_config_round_trip(lightning_default_run, printed_config_under_torchrun):
    printed, run_dir = printed_config_under_torchrun
    # every value of the original file comes back unchanged
    printed_values = yaml.safe_load(printed)
    for section, values in yaml.safe_load(DEFAULT_CONFIG.read_text()).items():
        if isinstance(values, dict):
            for key, value in values.items():
                assert printed_values[section][key] == value, f"{section}.{key}"
        else:
            assert printed_values[section] == values, section
    # and the printed file trains the same run (under torchrun: see the test above)
    assert_two_process_run(run_dir, "lightning")
    assert_traces_equal(lightning_default_run, run_dir, ranks=(0, 1))
    assert_params_equal(final_params(run_dir), final_params(lightning_default_run))


def test_trace_callback_on_a_foreign_model(tmp_path):
    """The callback on a model that is not ours: plain (x, y) tuple batches, no indices."""
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    from ddp_parity import TraceCallback

    class Tiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 3)
            self.step_losses: list[float] = []
            self.batches: list[tuple] = []

        def training_step(self, batch, batch_idx):
            assert isinstance(batch, tuple) and len(batch) == 2
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.layer(x), y)
            self.step_losses.append(loss.item())
            self.batches.append(tuple(t.clone() for t in batch))
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    generator = torch.Generator().manual_seed(0)
    dataset = TensorDataset(torch.randn(40, 4, generator=generator), torch.randint(0, 3, (40,), generator=generator))
    loader = DataLoader(dataset, batch_size=8, collate_fn=lambda items: tuple(torch.stack(t) for t in zip(*items)))
    torch.manual_seed(0)
    model = Tiny()
    run_dir = tmp_path / "foreign"
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[TraceCallback(str(run_dir))],
    )
    trainer.fit(model, loader)

    records = read_records(run_dir, 0)
    assert trace_ranks(run_dir) == [0]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]  # one record per optimizer step
    assert [r["loss"] for r in records] == model.step_losses  # the loss training_step returned, exactly
    assert all(r["lr"] == 0.1 and isinstance(r["grad_norm"], float) and r["grad_norm"] > 0 for r in records)
    assert all("indices" not in r for r in records)
    digests = [r["batch_digest"] for r in records]
    assert all(isinstance(d, str) and d for d in digests)
    assert digests == [batch_fingerprint(b) for b in model.batches]  # a digest of what each step saw
    assert len(set(digests)) == len(digests)

    meta = read_meta(run_dir)
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["world_size"] == 1 and meta["finished"] is True
    assert (run_dir / META_FILE).is_file()
    saved = final_params(run_dir)
    state = model.state_dict()
    assert sorted(saved) == sorted(state) == ["layer.bias", "layer.weight"]
    assert_params_equal(saved, {k: v.detach().cpu() for k, v in state.items()})


@pytest.mark.slow
def test_resume_from_last_ckpt_equals_uninterrupted_run(lightning_default_run, tmp_path):
    run_dir = tmp_path / "resumed"
    check_ok(run_lightning(tmp_path, "--trainer.max_epochs", "1", run_dir=run_dir))
    assert (run_dir / "checkpoints" / "last.ckpt").is_file()
    assert steps(run_dir, 0) == list(range(1, STEPS_PER_EPOCH + 1))
    after_first = final_params(run_dir)

    second = check_ok(run_lightning(tmp_path, "--ckpt_path", "last", run_dir=run_dir))  # the default 3 epochs
    meta = assert_two_process_run(run_dir, "lightning")
    assert meta["resumed_from"] and str(meta["resumed_from"]).endswith("last.ckpt"), describe(second)
    n = EPOCHS * STEPS_PER_EPOCH
    for rank in (0, 1):
        assert steps(run_dir, rank) == list(range(1, n + 1)), f"rank {rank}: steps not 1..{n} once each"
    assert_traces_equal(lightning_default_run, run_dir, ranks=(0, 1))
    assert read_validation(run_dir) == read_validation(lightning_default_run)
    final = final_params(run_dir)
    assert_params_equal(final, final_params(lightning_default_run))
    assert any(not after_first[k].equal(final[k]) for k in final), "the resumed run trained nothing"
    assert (run_dir / FINAL_PARAMS_FILE).is_file()


@pytest.mark.slow
def test_mid_epoch_resume_with_two_workers_is_bitwise_on_both_sides(tmp_path):
    """Two DataLoader workers per rank; rank 1 is killed after step 11 (epoch 1 of 2, 8 steps each) and
    torchrun restarts each side from the checkpoint of step 9, mid-epoch. Each side ends bitwise where its
    uninterrupted run ends, and the two faulted runs agree. Lightning needs ResumableDataLoader to set the
    sampler's epoch before its first iterator (Lightning #21938: otherwise epoch 0's order, from step 10)."""
    out = tmp_path / "out"
    overrides = ("data.num_samples=512", "trainer.max_epochs=2", "checkpoint.every_n_train_steps=3")
    sets = [arg for kv in (*overrides, "data.num_workers=2") for arg in ("--set", kv)]
    proc = run_harness(
        "--fault", "1:11", "--out", str(out), "--parallel", "--timeout", "450", "--stall-timeout", "300", *sets,
        timeout=1000,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    fault = json.loads((out / "report.json").read_text())["fault"]
    assert fault["fired"] == {"raw": True, "lightning": True}
    assert fault["resumed_from"]["raw"].endswith("step-00000009.pt")
    assert fault["resumed_from"]["lightning"].endswith("last.ckpt")
    for name, pair in fault["pairs"].items():
        assert pair["verdict"] == "equivalent", (name, pair)
        assert pair["losses"]["equal"] == pair["losses"]["compared"] == 2 * 16 and pair["params"]["max_abs"] == 0.0
    for run in ("raw", "lightning", "raw-fault", "lightning-fault"):
        assert read_meta(out / run)["config"]["data"]["num_workers"] == 2, run


@pytest.mark.parametrize(
    "flags, said",
    [
        (
            ["--trainer.devices", "3", "--data.num_samples", "2"],
            "`data.num_samples` (2) must be at least the world size",
        ),
        (["--ckpt_path", "{tmp}/missing.ckpt"], "--ckpt_path {tmp}/missing.ckpt: no such file"),
        (["--ckpt_path", "{tmp}/damaged.ckpt"], "not a readable checkpoint"),
        (["--ckpt_path", "{tmp}"], "is a directory"),
    ],
)
def test_lightning_entry_point_refuses_bad_input_in_one_line_writing_nothing(tmp_path, flags, said):
    (tmp_path / "damaged.ckpt").write_bytes(b"PK\x03\x04 cut off")
    run_dir = tmp_path / "run"
    flags = [f.format(tmp=tmp_path) for f in flags]
    # in this process: each is refused before a Trainer exists (a process of its own: tests/test_faults.py)
    code, _, stderr = lightning_in_process("fit", "--config", DEFAULT_CONFIG, *flags, "--run_dir", run_dir)
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert code == 2, stderr
    assert len(errors) == 1 and said.format(tmp=tmp_path) in errors[0], stderr
    assert "Traceback" not in stderr and not run_dir.exists()
