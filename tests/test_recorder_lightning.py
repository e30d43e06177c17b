"""TraceCallback on a small model of our own (not the project's network): the gradient norm before
clipping, the lr each step used, the optimizer's param groups, and error files keyed by the global
rank under Lightning's own launcher (which sets no RANK).

This file is also a script: `python tests/test_recorder_lightning.py RUN_DIR` fits a 2-process DDP
Trainer through Lightning's own launcher in which rank 1 raises after step 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from ddp_parity import TraceCallback


class Clipped(L.LightningModule):
    """A linear regression with large gradients, clipped hard, and a per-step schedule."""

    def __init__(self, fail_rank: int | None = None):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.fail_rank = fail_rank
        self.norms_seen: list[torch.Tensor] = []

    def training_step(self, batch, batch_idx):
        if self.fail_rank == self.global_rank and self.global_step == 1:
            raise RuntimeError("injected failure on rank 1")
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y) * 100

    def on_before_optimizer_step(self, optimizer):
        # the module's hook runs after the callbacks' and before Lightning clips
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
        self.norms_seen.append(torch.nn.utils.get_total_norm(grads))

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.5)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)


def quiet_trainer(callback: TraceCallback, **trainer_args) -> L.Trainer:
    """One epoch on the CPU with the callback, nothing else written or printed."""
    options = dict(accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False)
    options.update(enable_progress_bar=False, enable_model_summary=False, **trainer_args)
    return L.Trainer(callbacks=[callback], **options)


def fit(run_dir: Path, **trainer_args) -> Clipped:
    torch.manual_seed(0)
    model = Clipped(fail_rank=trainer_args.pop("fail_rank", None))
    trainer = quiet_trainer(
        TraceCallback(str(run_dir), side="mine"), gradient_clip_val=0.01, default_root_dir=run_dir, **trainer_args
    )
    trainer.fit(model, loader())
    return model


def test_callback_norm_before_clipping_lr_used_and_param_groups(tmp_path):
    from ddp_parity.trace import read_meta, read_records

    model = fit(tmp_path / "run", devices=1)
    records = read_records(tmp_path / "run", 0)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert [r["grad_norm"] for r in records] == [n.item() for n in model.norms_seen]  # what the step saw
    assert all(r["grad_norm"] > 0.01 for r in records)  # before clipping at 0.01
    assert [r["lr"] for r in records] == [0.1, 0.05, 0.025, 0.0125]  # the lr each step used
    assert all(len(r["batch_digest"]) == 64 and r["attempt"] == 0 for r in records)
    facts = read_meta(tmp_path / "run")["optimizer"]
    assert facts["class"] == "SGD" and facts["param_groups"][0]["params"] == ["layer.weight", "layer.bias"]
    group = facts["param_groups"][0]
    # as the first step used them (issue 36: read after the per-step scheduler had stepped, lr was 0.05), and
    # without the scheduler's bookkeeping (initial_lr is no hyperparameter)
    assert group["momentum"] == 0.5 and group["lr"] == 0.1 and "initial_lr" not in group


@pytest.mark.slow
class Validated(Clipped):
    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y), batch_size=len(x))


def test_a_validation_before_the_first_step_from_a_trainer_and_nothing_after_fit(tmp_path):
    """TraceCallback(record_sanity_check=True) with num_sanity_val_steps=-1 records the whole
    validation Lightning runs before training as step 0; trainer.validate() after fit is no part of
    the trace and does not break the user's program."""
    from ddp_parity.trace import read_validation

    torch.manual_seed(0)
    model = Validated()
    x, y = loader().dataset.tensors
    with torch.no_grad():
        before = torch.nn.functional.mse_loss(model.layer(x), y).item()  # one batch of 32: the whole set
    callback = TraceCallback(str(tmp_path / "run"), record_sanity_check=True)
    trainer = quiet_trainer(callback, devices=1, num_sanity_val_steps=-1)
    val = DataLoader(TensorDataset(x, y), batch_size=32)
    trainer.fit(model, loader(), val)
    trainer.validate(model, val, verbose=False)
    lines = read_validation(tmp_path / "run")
    assert [(v["epoch"], v["step"]) for v in lines] == [(0, 0), (0, 4)]
    assert lines[0]["val_loss"] == before  # the initial weights' figure, not the trained ones'
    assert lines[1]["val_loss"] != before


class EvaluatesItself(L.LightningModule):
    """Evaluates at its first training batch, before any optimizer step, outside the validation loop."""

    def __init__(self, trace: TraceCallback):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.trace = trace

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def on_train_batch_start(self, batch, batch_idx):
        if self.global_step == 0 and batch_idx == 0:
            x, y = batch
            with torch.no_grad():
                loss = torch.nn.functional.mse_loss(self.layer(x), y)
            self.trace.record_validation(self.trainer, {"val_loss": loss})


def test_a_validation_the_module_runs_itself_is_recorded_through_the_callback(tmp_path):
    """Issue 36: the nanoGPT port reached into TraceCallback.recorder to record its evaluation at iteration 0."""
    from ddp_parity.trace import read_validation

    torch.manual_seed(0)
    trace = TraceCallback(str(tmp_path / "run"))
    module = EvaluatesItself(trace)
    x, y = next(iter(loader()))
    with torch.no_grad():
        expected = torch.nn.functional.mse_loss(module.layer(x), y).item()
    quiet_trainer(trace, devices=1).fit(module, loader())
    assert read_validation(tmp_path / "run") == [{"epoch": 0, "step": 0, "val_loss": expected}]


class SkipsABatch(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return None if batch_idx == 1 else {"loss": torch.nn.functional.mse_loss(self.layer(x), y)}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_a_training_step_that_returns_none_does_not_break_the_fit(tmp_path):
    """Lightning skips a batch whose training_step returns None; the callback read outputs["loss"]
    of the empty outputs and raised KeyError inside the user's fit."""
    from ddp_parity.trace import read_records

    torch.manual_seed(0)
    trainer = quiet_trainer(TraceCallback(str(tmp_path / "run")), devices=1)
    trainer.fit(SkipsABatch(), loader())
    steps = [r["step"] for r in read_records(tmp_path / "run", 0)]
    assert len(steps) == 3 and steps == sorted(set(steps)) and steps[-1] == trainer.global_step


def test_error_file_names_the_failing_rank_under_lightnings_launcher(tmp_path):
    from conftest import PYTHON, REPO, run_cmd

    from ddp_parity.harness.launch import free_port

    run_dir = tmp_path / "run"
    result = run_cmd(
        [PYTHON, __file__, str(run_dir)],
        env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())},
        log=tmp_path / "fit.log",
    )
    assert result.returncode != 0
    error = json.loads((run_dir / "errors" / "rank1.json").read_text())
    assert (error["rank"], error["message"], error["step"]) == (1, "injected failure on rank 1", 1), error
    other = run_dir / "errors" / "rank0.json"  # rank 0's follow-on error, if it had one, is its own
    assert not other.exists() or "injected" not in json.loads(other.read_text())["message"]
    assert REPO.is_dir()


if __name__ == "__main__":
    fit(Path(sys.argv[1]), devices=2, strategy="ddp", fail_rank=1)


class BuiltInConfigureModel(L.LightningModule):
    """Its layer is built in configure_model, after the callbacks' setup (nanoGPT's port seeds there)."""

    def configure_model(self):
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_initial_digest_of_a_model_built_in_configure_model(tmp_path):
    """Issue 36 (nanoGPT's port): setup ran before configure_model and recorded the digest of no
    parameters at all (sha256 of nothing) as the initial weights."""
    from ddp_parity.fingerprints import params_sha256

    torch.manual_seed(0)
    module = BuiltInConfigureModel()
    torch.manual_seed(0)
    expected = params_sha256(torch.nn.Linear(4, 1))
    torch.manual_seed(0)
    quiet_trainer(TraceCallback(str(tmp_path / "run")), devices=1, max_steps=1).fit(module, loader())
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["ranks"][0]["init_params_sha256"] == expected
