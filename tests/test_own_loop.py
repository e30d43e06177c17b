"""Slips made on a loop of our own (a small regressor, AdamW, a step schedule, clipping) through the
public plugin API, one process: each pair is compared with `ddp_parity.compare_traces`, and the
diagnosis must name the slip's category with an advice line that names the fix."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from ddp_parity import TraceRecorder, compare_traces
from ddp_parity.trace import param_digest

STEPS, BATCH, CLIP = 12, 8, 0.05


class Regressor(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(), nn.Dropout(dropout), nn.Linear(16, 1))

    def forward(self, x):
        return self.body(x).squeeze(-1)


def train(run_dir, side: str, slip: str | None = None, dropout: float = 0.0) -> None:
    torch.manual_seed(7)
    x, y = torch.randn(STEPS * BATCH, 6), torch.randn(STEPS * BATCH)
    model = Regressor(dropout)
    if slip == "extra_draw":
        torch.rand(1)  # one draw between the model build and training, on this side only
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    recorder = TraceRecorder(run_dir, side=side, config={"dropout": dropout, "clip": CLIP})
    recorder.start()
    recorder.watch(model)
    for i in range(STEPS):
        indices = list(range(i * BATCH, (i + 1) * BATCH))
        loss = nn.functional.mse_loss(model(x[indices]), y[indices])
        optimizer.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        if slip == "norm_after_clip":
            norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        if slip == "lr_after_scheduler":
            lr = optimizer.param_groups[0]["lr"]
        step = i if slip == "step_from_zero" else i + 1
        recorder.record(
            step, loss, indices, epoch=0, lr=lr, grad_norm=norm, batch=x[indices], param_digest=param_digest(model)
        )
    with torch.no_grad():
        errors = (model(x[:32]) - y[:32]) ** 2
        val = sum(errors.tolist()) / len(errors)  # a float64 mean, as a metric accumulated in Python
    if slip == "logged_validation":
        val = float(np.float32(val))  # what self.log keeps
    recorder.record_validation(0, STEPS, {"val_loss": val})
    recorder.finish(model)


@pytest.mark.parametrize(
    "slip, category, fix",
    [
        (None, "equivalent", "Nothing to fix"),
        ("lr_after_scheduler", "recording", "before scheduler.step()"),
        ("norm_after_clip", "recording", "before clipping"),
        ("step_from_zero", "recording", "optimizer steps done"),
        ("logged_validation", "recording", "self.log"),
    ],
)
def test_a_slip_in_our_own_loop_is_named(tmp_path, slip, category, fix):
    train(tmp_path / "reference", "reference")
    train(tmp_path / "mine", "mine", slip)
    report = compare_traces(tmp_path / "reference", tmp_path / "mine")
    d = report["diagnosis"]
    assert d["category"] == category, d
    assert fix in d["advice"]
    assert report["labels"] == {"a": "reference", "b": "mine"}


def test_an_extra_random_draw_after_the_model_build_is_the_random_stream(tmp_path):
    train(tmp_path / "reference", "reference", dropout=0.2)
    train(tmp_path / "mine", "mine", "extra_draw", dropout=0.2)
    d = compare_traces(tmp_path / "reference", tmp_path / "mine")["diagnosis"]
    assert (d["category"], d["step"]) == ("rng", 1), d
    assert d["module"]["name"] == "body.3" and d["module"]["type"] == "Dropout", d["module"]
    assert "Re-seed right after building the model" in d["advice"]
