"""Per-layer sketches (ddp_parity/sketch.py): what they estimate, that the directions depend on sizes
only (the twins' names differ by a prefix), and what the recorder writes."""

from __future__ import annotations

import json
import math

import pytest
import torch

from ddp_parity import TraceRecorder, sketch
from ddp_parity.sharding import total_grad_norm_parts
from ddp_parity.sketch import FIELDS, LayerSketch, relative_distance
from ddp_parity.trace import read_meta, read_records


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(300, 200), torch.nn.Tanh(), torch.nn.Linear(200, 10))


def test_the_sketch_distance_estimates_each_layers_relative_distance():
    a = mlp()
    b = mlp()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for scale, p in zip([1e-6, 1e-6, 1e-3, 0.0], b.parameters()):  # each layer moved by its own amount
            p.add_(torch.randn(p.shape, generator=generator) * scale * p.abs().mean())
    sketch = LayerSketch(list(a.named_parameters()))
    estimated = relative_distance(sketch(list(a.parameters())).tolist(), sketch(list(b.parameters())).tolist())
    true = [((pb - pa).norm() / pa.norm()).item() for pa, pb in zip(a.parameters(), b.parameters())]
    assert estimated[3] == true[3] == 0.0
    for est, exact in zip(estimated[:3], true[:3]):
        assert exact / 3 < est < exact * 3, (estimated, true)  # 4 directions: a factor, not a digit


def test_the_directions_depend_on_sizes_not_names():
    plain, wrapped = mlp(), torch.nn.ModuleDict({"net": mlp()})
    a = LayerSketch(list(plain.named_parameters()))(list(plain.parameters()))
    b = LayerSketch(list(wrapped.named_parameters()))(list(wrapped.parameters()))
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)  # no gradients yet: NaN on both


def test_the_recorder_writes_norms_gradient_norms_and_sketches(tmp_path):
    net = mlp()
    net[2].bias.requires_grad_(False)  # no gradient: NaN, said as such
    optimizer = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
    recorder = TraceRecorder(tmp_path, side="mine", config={})
    recorder.start()
    for step in (1, 2):
        optimizer.zero_grad()
        loss = net(torch.ones(4, 300)).square().mean()
        loss.backward()
        optimizer.step()
        recorder.record(step, loss, [0, 1, 2, 3], model=net)
    recorder.finish(net)
    layers = read_meta(tmp_path)["layers"]
    assert layers["names"] == ["0.weight", "0.bias", "2.weight", "2.bias"] and layers["fields"] == list(FIELDS)
    rows = [record["layers"] for record in read_records(tmp_path, 0)]
    assert len(rows) == 2 and all(len(row) == 4 and all(len(r) == len(FIELDS) for r in row) for row in rows)
    assert rows[1][0][0] == pytest.approx(net[0].weight.norm().item(), rel=1e-6)
    assert rows[1][0][1] == pytest.approx(net[0].weight.grad.norm().item(), rel=1e-6)
    grad = net[0].weight.grad
    assert rows[1][0][FIELDS.index("grad_maxabs")] == grad.abs().max().item()
    # the 1-norm as clip_grad_norm_(norm_type=1) measures a tensor (vector_norm's own float32 sum, which can
    # part from grad.abs().sum() in the fifth digit): the relation rests on equal kernels, not on exact sums
    assert rows[1][0][FIELDS.index("grad_l1")] == pytest.approx(
        torch.nn.utils.get_total_norm([grad], 1).item(), rel=1e-6
    )
    assert math.isnan(rows[1][3][1]) and not math.isnan(rows[1][3][0])
    assert math.isnan(rows[1][3][FIELDS.index("grad_l1")])  # no gradient: its 1-norm is unrecorded, not 0
    update = relative_distance(rows[0], rows[1])  # one step's update, per layer, from two records
    assert update[0] > 0 and update[3] == 0.0  # the frozen bias never moved
    assert json.loads(json.dumps(rows)) is not None


def trained_mlp() -> torch.nn.Module:
    """An MLP after one backward: a gradient of zeros (its largest |g| is +0.0) and a parameter without one."""
    net = mlp()
    net.append(torch.nn.Linear(10, 3))
    net(torch.ones(4, 300)).square().mean().backward()
    net[3].weight.grad.zero_()
    net[3].bias.grad = None
    return net


def test_without_tails_the_rows_are_the_first_fields_of_the_rows_with_them():
    net = trained_mlp()
    named = list(net.named_parameters())
    full, short = LayerSketch(named), LayerSketch(named, tails=False)
    assert short.facts()["fields"] == list(FIELDS[: FIELDS.index("grad_maxabs")])
    with_tails, without = full([p for _, p in named]), short([p for _, p in named])
    assert without.shape == (6, 6) and torch.equal(with_tails[:, :6].nan_to_num(7.0), without.nan_to_num(7.0))


def test_a_large_model_measured_a_tensor_at_a_time_gives_the_rows_of_one_call_for_all(monkeypatch):
    """One thread: on a CPU the foreach kernels run linalg.vector_norm per tensor, so the two ways give the
    same bits (with several threads a norm's partial sums may be split otherwise)."""
    net = trained_mlp()
    named, params = list(net.named_parameters()), list(net.parameters())
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        small = LayerSketch(named)
        monkeypatch.setattr(sketch, "FLAT_LIMIT", 0)  # every model counts as large now
        large = LayerSketch(named)
        assert small._flat_index is not None and large._flat_index is None
        a, b = small(params), large(params)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)), (a, b)
    maxabs = FIELDS.index("grad_maxabs")
    assert a[4, maxabs].item() == 0.0 and math.copysign(1.0, a[4, maxabs].item()) == 1.0  # +0.0 both ways
    assert a[4, FIELDS.index("grad_norm")].item() == 0.0 and math.isnan(a[5, FIELDS.index("grad_norm")].item())


def test_a_gradient_norm_measured_before_is_reused_only_while_the_gradient_is_unchanged(monkeypatch):
    """The hooks measure the gradients' norms for the optimizer's step and hand them to the sketch after
    it: a gradient changed in place since (its version) or replaced is measured again."""
    monkeypatch.setattr(sketch, "FLAT_LIMIT", 0)  # the tensor-at-a-time path, where measures are reused
    net = trained_mlp()
    named, params = list(net.named_parameters()), list(net.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    total, norms = total_grad_norm_parts(grads)
    assert torch.equal(total, torch.nn.utils.get_total_norm(grads))  # the optimizer's figure, bit for bit
    known = {id(g): (g, g._version, norm) for g, norm in zip(grads, norms)}
    layer_sketch = LayerSketch(named, tails=False)
    column = FIELDS.index("grad_norm")
    assert torch.equal(layer_sketch(params, known)[:4, column], layer_sketch(params)[:4, column])
    with torch.no_grad():
        net[0].weight.grad.mul_(2.0)  # changed in place after the norms were taken
    net[0].bias.grad = net[0].bias.grad * 3.0  # replaced
    rows = layer_sketch(params, known)
    assert rows[0, column].item() == pytest.approx(2 * norms[0].item(), rel=1e-6)
    assert rows[1, column].item() == pytest.approx(3 * norms[1].item(), rel=1e-6)
    assert rows[2, column].item() == norms[2].item()  # unchanged: the norm measured before
