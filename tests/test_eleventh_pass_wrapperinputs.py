"""Issue 46's eleventh pass, the class found on hrnet's port (round 2): the module watch compared the top-level
inputs of wrappers of another kind and named "something changes the batch before the model". One side's watched
module computed the loss inside it (HRNet's FullModel(model, criterion), forward(inputs, labels)), the other's was a
wrapper taking the images alone (a LightningModule): their inputs differ by what each wrapper is, while the batches,
the network both hold (`model`, the same class and parameter names) and every gradient were equal. The true slip, an
lr set by hand after optimizer.step() (one step late), never got to speak.

The rules: (1) module calls are compared between modules of the same kind, never a wrapper against a wrapper of
another class (two leaves of another class, BatchNorm2d against SyncBatchNorm, stay paired); (2) where the module
watch at the parting step finds every shared call and every gradient equal, a loss (or gradient norm) apart there
did not change the training, and the checks go on to the step's next quantity apart (the lr).

On a pair of the tests' own, recorded in process through TraceRecorder: a two-layer network and a cross-entropy,
wrapped with the loss (forward(inputs, labels) returns the loss) on one side, and in a wrapper that returns the
network's output on the other (the loop calls the loss itself); the logged loss of the wrapping side changed after
backward, as a loss reduced in place over the ranks for logging is; a poly lr set after the step from that step's
count on that side (one step late), before it on the other."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ddp_parity import TraceRecorder, compare_traces
from ddp_parity.compare.modules import localise

STEPS, LR = 5, 0.1


def network() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


class FullModel(nn.Module):
    """The network and its loss in one module, as HRNet's train.py wraps them for DDP."""

    def __init__(self):
        super().__init__()
        self.model, self.loss = network(), nn.CrossEntropyLoss()

    def forward(self, inputs, labels):
        return self.loss(self.model(inputs), labels)


class Port(nn.Module):
    """The same network and loss held by another class whose forward takes the images alone (a LightningModule's)."""

    def __init__(self):
        super().__init__()
        self.model, self.loss = network(), nn.CrossEntropyLoss()

    def forward(self, inputs):
        return self.model(inputs)


def poly(done: int) -> float:
    return LR * (1 - done / STEPS) ** 0.9


def train(run_dir: Path, side: str, *, wrapped_with_loss: bool, lr_after_step: bool) -> Path:
    torch.set_num_threads(1)
    module = FullModel() if wrapped_with_loss else Port()
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    x = torch.randn(64, 6, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 3, (64,), generator=torch.Generator().manual_seed(2))
    recorder = TraceRecorder(run_dir, side=side, config={"data": {"batch_size": 4}})
    recorder.start()
    recorder.watch(module, steps="all")
    for step in range(1, STEPS + 1):
        indices = torch.arange(4 * (step - 1), 4 * step)
        if not lr_after_step:
            optimizer.param_groups[0]["lr"] = poly(step - 1)
        inputs, labels = x[indices], y[indices]
        loss = module(inputs, labels) if wrapped_with_loss else module.loss(module(inputs), labels)
        loss.backward()
        logged = loss.detach()
        if wrapped_with_loss:  # another figure added after backward, as a loss reduced in place over ranks is
            logged = logged + logged**2
        lr = optimizer.param_groups[0]["lr"]
        optimizer.step()
        if lr_after_step:  # HRNet's adjust_learning_rate after the step, from this step's count: one step late
            optimizer.param_groups[0]["lr"] = poly(step - 1)
        # no scheduler.step() anywhere, recorded as the hooks record it: the lr is set by hand on both sides
        facts = {"scheduler_steps_before": 0}
        recorder.record(step, logged, indices, lr=lr, optimizer=optimizer, model=module, batch=inputs, **facts)
        optimizer.zero_grad()
    recorder.finish(module)
    return run_dir


def pair(tmp_path: Path, *, lr_after_step: bool) -> tuple[Path, Path]:
    a = train(tmp_path / "a", "fullmodel", wrapped_with_loss=True, lr_after_step=lr_after_step)
    b = train(tmp_path / "b", "port", wrapped_with_loss=False, lr_after_step=False)
    return a, b


def test_wrappers_of_another_kind_are_not_compared_and_the_late_lr_is_named(tmp_path):
    run_a, run_b = pair(tmp_path, lr_after_step=True)
    found = localise(run_a, run_b, 2)
    assert found is not None and found["reading_kind"] == "optimizer", found  # not the wrappers' inputs
    assert found["grads_compared"] == 4, found
    report = compare_traces(run_a, run_b)
    d = report["diagnosis"]
    text = d["explanation"]
    assert d["category"] != "data_pipeline" and "changes the batch" not in text, text
    assert (d["kind"], d["step"]) == ("optimizer.lr_shift", 2), (d["kind"], text)
    assert "port's lr at each step is fullmodel's 1 step(s) later" in text, text
    assert "Neither side recorded a scheduler.step(): the lr is set otherwise (by hand)" in text, text
    assert d["evidence"]["watched_equal"]["quantity"] == "loss", d["evidence"]
    assert "neither the batch nor the model's input is the cause" in text, text


def test_the_same_pair_with_the_lr_set_before_the_step_trains_alike(tmp_path):
    """Only the logged loss differs: the training is the same, and nothing names the wrappers' inputs."""
    report = compare_traces(*pair(tmp_path, lr_after_step=False))
    assert report["verdict"] == "equivalent", report["diagnosis"]["explanation"]
    assert "changes the batch" not in report["diagnosis"]["explanation"]


def test_leaves_of_another_class_stay_paired():
    """BatchNorm2d against SyncBatchNorm at the same place: a leaf each, compared (their class is the reading)."""
    from ddp_parity.compare.modules import first_difference

    def record(norm_type: str, output: str) -> dict:
        calls = [
            {"name": "net.norm", "type": norm_type, "phase": "forward", "input": "i", "output": output},
            {"name": "net", "type": "Net", "phase": "forward", "input": "x", "output": output},
        ]
        return {"step": 1, "calls": calls, "params_after": {"net.norm.weight": "p"}}

    found = first_difference(record("BatchNorm2d", "o1"), record("SyncBatchNorm", "o2"))
    assert found is not None and found["name"] == "net.norm" and found["what"] == "state", found
