"""The module watch in one process: exact digests, which steps, what a step records, the moment the
parameter gradients are read, and that watching leaves training bitwise unchanged."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from ddp_parity import TraceRecorder
from ddp_parity.watch import (
    DEFAULT_STEPS,
    WATCH_STEP_ENV,
    Digester,
    ModuleWatch,
    _Digests,
    parse_watch_steps,
    read_module_trace,
    resolve_steps,
)


def small_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 12), nn.ReLU(inplace=True), nn.Dropout(0.3), nn.BatchNorm1d(12), nn.Linear(12, 3))


def train(model: nn.Module, steps: int, recorder: TraceRecorder | None = None, clip: float | None = None):
    torch.manual_seed(1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.randn(steps, 8, 6, generator=torch.Generator().manual_seed(2))
    for step, x in enumerate(data, 1):
        loss = model(x).square().mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if recorder is not None:
            recorder.record(step, loss.detach(), torch.arange(8))
    return model


# -- digests --------------------------------------------------------------------------------


def test_digest_is_exact_and_position_sensitive():
    d = Digester()
    x = torch.randn(1000)
    assert torch.equal(d(x), d(x.clone()))
    flipped = x.clone()
    flipped.view(torch.int32)[17] ^= 1  # one bit of one element
    assert not torch.equal(d(x), d(flipped))
    swapped = x.clone()
    swapped[[3, 4]] = swapped[[4, 3]]
    assert not torch.equal(d(x), d(swapped))  # an xor or a sum of the values would tie here
    assert torch.equal(d(torch.zeros(3, dtype=torch.bfloat16)), d(torch.zeros(3, dtype=torch.bfloat16)))
    assert d(torch.tensor([True, False])).dtype == torch.uint64


def test_digest_of_an_empty_tensor_is_a_value():
    # a batch's labels of shape [batch, 0] (a model with no classes to condition on) went through the watch
    d = Digester()
    for empty in (torch.zeros(4, 0), torch.zeros(0, dtype=torch.int64), torch.zeros(2, 0, dtype=torch.bool)):
        assert d(empty).dtype == torch.uint64 and d(empty).shape == ()
    digests = _Digests([torch.zeros(4, 0), torch.ones(3)], d)
    assert "(4, 0)" in digests.shapes and len(digests.scalars) == 2


# -- which steps ----------------------------------------------------------------------------


def test_steps_default_argument_and_environment(monkeypatch):
    monkeypatch.delenv(WATCH_STEP_ENV, raising=False)
    assert resolve_steps() == frozenset(DEFAULT_STEPS)
    assert resolve_steps([4, 9]) == frozenset({4, 9})
    assert resolve_steps("all") == "all"
    monkeypatch.setenv(WATCH_STEP_ENV, "7")
    assert resolve_steps([4, 9]) == frozenset({7})  # the replay overrides the code
    assert parse_watch_steps("3,5") == frozenset({3, 5})
    assert parse_watch_steps("none") == frozenset()
    for bad in ("0", "x", "-2"):
        with pytest.raises(ValueError, match=WATCH_STEP_ENV):
            parse_watch_steps(bad)


# -- what a step records --------------------------------------------------------------------


def test_recorder_writes_the_watched_steps(tmp_path, monkeypatch):
    monkeypatch.delenv(WATCH_STEP_ENV, raising=False)
    model = small_net()
    recorder = TraceRecorder(tmp_path, side="t")
    recorder.start()
    watch = recorder.watch(model, steps=[2, 3])
    train(model, 5, recorder)
    assert not watch._handles  # nothing left to watch after step 3: hooks removed
    recorder.close()
    steps = read_module_trace(tmp_path, 0)
    assert sorted(steps) == [2, 3]
    record = steps[2]
    forward = [c["name"] for c in record["calls"] if c["phase"] == "forward"]
    assert forward == ["0", "1", "2", "3", "4", ""]  # completion order: the container last
    backward = [c["name"] for c in record["calls"] if c["phase"] == "backward"]
    # the head and the network share their output tensor: its gradient reaches the head's hook first
    assert backward == ["4", "", "3", "2", "1", "0"]
    calls = {(c["phase"], c["name"]): c for c in record["calls"]}
    assert calls[("forward", "2")]["random"] is True and "buffers" in calls[("forward", "3")]
    assert calls[("forward", "1")]["input"] == calls[("forward", "0")]["output"]  # digested before the in-place ReLU
    assert set(record["param_grads"]) == {n for n, _ in model.named_parameters()}
    assert record["params_after"] != steps[3]["params_after"]
    line = json.loads((tmp_path / "trace" / "rank0.modules.jsonl").read_text().splitlines()[0])
    assert set(line) == {"step", "calls", "params_before", "param_grads", "params_after"}


def test_param_grads_are_read_before_clipping(tmp_path, monkeypatch):
    monkeypatch.delenv(WATCH_STEP_ENV, raising=False)
    seen = {}

    class Spy(ModuleWatch):
        def _read_param_grads(self):
            seen["grads"] = [p.grad.clone() for p in self.model.parameters()]
            super()._read_param_grads()

    model = small_net()
    watch = Spy(model, steps=[1])
    torch.manual_seed(1)
    loss = model(torch.randn(8, 6)).square().mean()
    loss.backward()
    unclipped = [p.grad.clone() for p in model.parameters()]
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
    assert all(torch.equal(a, b) for a, b in zip(seen["grads"], unclipped))
    assert not all(torch.equal(a, p.grad) for a, p in zip(unclipped, model.parameters()))
    watch.end_step(1)
    watch.flush(tmp_path, 0)
    d = Digester()
    from ddp_parity.watch import _hex, _shape_key

    expected = _hex(_shape_key([unclipped[0]]), [int(d(unclipped[0]).view(torch.int64))])
    assert read_module_trace(tmp_path, 0)[1]["param_grads"]["0.weight"] == expected


def test_eval_forward_without_grad_is_not_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv(WATCH_STEP_ENV, "1")
    model = small_net()
    watch = ModuleWatch(model)
    model.eval()
    with torch.no_grad():
        model(torch.randn(4, 6))  # a validation pass between steps
    model.train()
    watch.end_step(1)
    assert watch._done == []


@pytest.mark.parametrize("clip", [None, 0.05])
def test_watching_every_step_leaves_training_bitwise_unchanged(tmp_path, monkeypatch, clip):
    monkeypatch.delenv(WATCH_STEP_ENV, raising=False)
    plain = train(small_net(), 6, clip=clip)
    model = small_net()
    recorder = TraceRecorder(tmp_path, side="t")
    recorder.start()
    recorder.watch(model, steps="all")
    watched = train(model, 6, recorder, clip=clip)
    recorder.close()
    assert len(read_module_trace(tmp_path, 0)) == 6
    for (name, a), b in zip(plain.state_dict().items(), watched.state_dict().values()):
        assert torch.equal(a, b), name


def test_only_parallel_wrappers_are_unwrapped(monkeypatch):
    monkeypatch.delenv(WATCH_STEP_ENV, raising=False)

    class Holder(nn.Module):  # a user's model with a submodule that happens to be called `module`
        def __init__(self):
            super().__init__()
            self.module = nn.Linear(2, 2)
            self.head = nn.Linear(2, 1)

        def forward(self, x):
            return self.head(self.module(x))

    holder = Holder()
    assert ModuleWatch(holder).model is holder
    assert ModuleWatch(nn.DataParallel(holder)).model is holder


def test_a_parameter_changed_inside_a_wrappers_forward_is_read_as_its_module_uses_it(tmp_path, monkeypatch):
    """swav normalises its prototypes in place before the model's forward: a hand-written loop before calling DDP,
    a LightningModule inside training_step, which DDP's forward wraps. Watching the wrapper (as the hooks watch
    DDP's module), the step's first forward is the wrapper's on one side and the model's own on the other; the
    parameter is read where its module first uses it, so both sides read the normalised weights."""
    monkeypatch.setenv(WATCH_STEP_ENV, "1")

    class Step(nn.Module):  # Lightning's wrapper: its forward runs the step, the model inside it
        def __init__(self, model, normalise_inside: bool):
            super().__init__()
            self.model, self.normalise_inside = model, normalise_inside

        def forward(self, x):
            if self.normalise_inside:
                normalise(self.model[0].weight)
            return self.model(x)

    def normalise(weight):
        with torch.no_grad():
            weight.copy_(nn.functional.normalize(weight.data.clone(), dim=1))

    digests = []
    for inside in (False, True):
        torch.manual_seed(0)
        wrapper = Step(small_net(), inside)
        watch = ModuleWatch(wrapper)
        if not inside:
            normalise(wrapper.model[0].weight)  # the hand-written loop, before the call
        wrapper(torch.randn(4, 6)).sum().backward()
        watch.end_step(1)
        watch.flush(tmp_path / str(inside), 0)
        digests.append(read_module_trace(tmp_path / str(inside), 0)[1]["params_before"])
    assert digests[0] == digests[1]


class _Refuses(nn.Module):
    """A layer whose input the watch cannot take (a tensor subclass that raises when reshaped)."""

    def forward(self, x):
        return x


class _Unreadable(torch.Tensor):
    def reshape(self, *args, **kwargs):
        raise RuntimeError("no reshape here")


def test_a_watch_that_fails_stops_and_says_so_while_training_goes_on(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), _Refuses())
    recorder = TraceRecorder(tmp_path, side="t")
    recorder.start()
    watch = recorder.watch(model, steps="all")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in (1, 2):
        x = torch.randn(2, 4).as_subclass(_Unreadable) if step == 2 else torch.randn(2, 4)
        loss = model(x).pow(2).sum()  # the program's forward goes on although the watch raised inside it
        opt.zero_grad()
        loss.backward()
        opt.step()
        recorder.record(step, loss.detach(), torch.arange(2))
    recorder.finish(model)
    assert watch.failure is not None and "step 2" in watch.failure and "no reshape here" in watch.failure
    assert not watch.active
    unrecorded = json.loads((tmp_path / "meta.json").read_text())["unrecorded"]
    assert any(u["what"] == "module watch" and "no reshape here" in u["why"] for u in unrecorded)
    assert list(read_module_trace(tmp_path, 0)) == [1]  # the step it saw whole, never a part of step 2
