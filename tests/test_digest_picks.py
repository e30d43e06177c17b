"""The per-step parameter digest sums the first and last parameter, and the first and last that take a gradient
where those are others: a model whose first and last tensors are frozen (LoRA's embeddings and head) was digested
on them alone, so two trainings apart from step 1 read "params/step equal" and parted a step late."""

from __future__ import annotations

import json

import torch
from torch import nn

from ddp_parity import TraceRecorder, compare_traces
from ddp_parity.fingerprints import param_digest, param_digest_names


def lora_like() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(10, 6), nn.Linear(6, 6), nn.Linear(6, 6), nn.Linear(6, 10))
    for frozen in (model[0], model[3]):
        frozen.requires_grad_(False)
    return model


def record_run(run_dir, middle_lr: float) -> None:
    model = lora_like()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    optimizer.param_groups[0]["lr"] = middle_lr
    recorder = TraceRecorder(run_dir, side="t")
    recorder.start()
    data = torch.Generator().manual_seed(1)
    for step in range(1, 4):
        tokens = torch.randint(0, 10, (4,), generator=data)
        loss = nn.functional.cross_entropy(model(tokens), tokens)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        recorder.record(step, loss.detach(), torch.arange(4), model=model, lr=0.1)  # the lr as a user may pass it
    recorder.finish(model)


def test_the_first_and_last_trained_parameters_are_digested_beside_the_first_and_last(tmp_path):
    model = lora_like()
    assert param_digest_names(model) == ["0.weight", "3.bias", "1.weight", "2.bias"]
    assert param_digest(model).shape == (4,)
    model[0].requires_grad_(True)  # unfrozen later: what the recorded names mean does not change
    assert param_digest_names(model) == ["0.weight", "3.bias", "1.weight", "2.bias"]
    plain = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    assert param_digest_names(plain) == ["0.weight", "1.bias"]  # as before: the first and last train
    assert param_digest_names(nn.Linear(2, 2, bias=False)) == ["weight", "weight"]


def test_a_training_apart_only_in_its_trained_middle_parts_at_step_1(tmp_path):
    record_run(tmp_path / "a", 0.1)
    record_run(tmp_path / "b", 0.2)
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert meta["param_digest_names"] == ["0.weight", "3.bias", "1.weight", "2.bias"]
    report = compare_traces(tmp_path / "a", tmp_path / "b")
    assert report["verdict"] == "different"
    first = report["first_divergence"]
    assert (first["step"], first["quantity"]) == (1, "param_digest"), first
    assert first["a"][:2] == first["b"][:2] and first["a"][2:] != first["b"][2:]  # the frozen ones are equal
