"""The class open_clip's slip 2 found on the tenth pass (issue 46): a gradient norm the hooks measured themselves,
apart by an ulp only because the two optimizers hold the parameters in another param-group partition, taken as the
first divergence.

`ddp-parity record`'s hooks record, where the program calls no clip_grad_norm_, their own 2-norm of the gradients the
optimizer saw, summed over its param groups in order. One side with two groups (no weight decay for the biases) and
the other with one sum the same gradients in another order: a norm an ulp apart at step 1, with every parameter's
gradient norm equal. The diagnosis called that the first divergence (`reduction_order`, "clip over the optimizer's
order" in a program that clips nowhere), and dismissed the weight decay it had recorded apart, the true cause, as
acting "after" it. Now such a norm is a measurement: the walk passes over it, the training's first divergence is the
parameters after that step (the layers' sketches, where the digest of the first and last tensors stays equal), and
the recorded optimizer setting is named, with its fix. A norm that clip_grad_norm_ measured (a clip recorded) is the
training's own, and stays a divergence.

The norms are computed here by the hooks' own function over the same gradients in both orders, and the gradients
picked where the two sums part (never one CPU's rounding written down).
"""

from __future__ import annotations

import math

import torch
from test_diagnosis import make_meta, make_records, run_diagnosis, write_run

from ddp_parity.compare.comparator import Criterion, compare_runs
from ddp_parity.sharding import total_grad_norm_parts

# an embedding, a two-layer head and a projection: the digest sums the first and last tensors, both decayed alike
SHAPES = {
    "embed.weight": (6, 4),
    "net.0.weight": (4, 4),
    "net.0.bias": (4,),
    "net.2.weight": (4, 4),
    "net.2.bias": (4,),
    "proj.weight": (3, 4),
}
NAMES = list(SHAPES)
EXEMPT = [n for n in NAMES if n.endswith("bias")]  # no weight decay on raw
FIELDS = ["norm", "grad_norm", "sketch0", "sketch1", "sketch2", "sketch3"]
ADAMW = {"betas": [0.9, 0.999], "eps": 1e-8, "amsgrad": False, "maximize": False, "foreach": None, "lr": 0.001}
PREFIX = "model."  # the LightningModule holds the network as an attribute


def _orders_part() -> tuple[list[torch.Tensor], float, float]:
    """Gradients whose 2-norm, summed as the hooks sum it, parts in the last bit between raw's order (the decayed
    group, then the exempt one) and the model's order (lightning's one group): (the gradients, raw's, lightning's)."""
    raw_order = [n for n in NAMES if n not in EXEMPT] + EXEMPT
    for seed in range(500):
        gen = torch.Generator().manual_seed(seed)
        grads = {n: torch.randn(shape, generator=gen) * (1 + 3 * i) for i, (n, shape) in enumerate(SHAPES.items())}
        by_model = total_grad_norm_parts([grads[n] for n in NAMES])[0].item()
        by_groups = total_grad_norm_parts([grads[n] for n in raw_order])[0].item()
        if by_model != by_groups:
            return [grads[n] for n in NAMES], by_groups, by_model
    raise AssertionError("no gradients in 500 seeds whose norm parts between the two orders")


def _optimizer(groups: list[tuple[list[str], float]], prefix: str = "") -> dict:
    return {
        "class": "AdamW",
        "named": True,
        "param_groups": [{**ADAMW, "weight_decay": wd, "params": [prefix + n for n in names]} for names, wd in groups],
    }


def _hooks_meta(side: str, groups: list[tuple[list[str], float]], prefix: str) -> dict:
    meta = make_meta(side)
    meta["recorded_by"], meta["config"] = "hooks", {}
    meta["optimizer"] = _optimizer(groups, prefix)
    meta["optimizer_built"] = [{**_optimizer(groups, prefix), "stepped": True}]
    meta["layers"] = {"names": [prefix + n for n in NAMES], "fields": FIELDS}
    meta["param_digest_names"] = [prefix + NAMES[0], prefix + NAMES[-1]]
    return meta


def _rows(grads: list[torch.Tensor], step: int, moved: set[str]) -> list[list[float]]:
    """Each tensor's layer row after `step`: its gradient norm as the hooks take it (equal on both sides at step 1),
    its norm and projections nudged for the tensors `moved` (the update differs there)."""
    norms = total_grad_norm_parts(grads)[1]
    rows = []
    for i, (name, norm) in enumerate(zip(NAMES, norms)):
        base = [1.0 + i + 0.01 * step, norm.item(), 0.1 * i, 0.2 * i, -0.3 * i, 0.4 + step]
        rows.append([math.nextafter(v, math.inf) if name in moved and k != 1 else v for k, v in enumerate(base)])
    return rows


def _records(grads, norm_at_1: float, groups: list[float], moved: set[str], clip: float | None) -> dict:
    """Four steps: step 1 the same loss, gradients and digest (the weight decay moved the biases only: the layers'
    sketches), then loss, norm and digest apart wherever `moved` holds anything."""
    records = make_records()
    for recs in records.values():
        del recs[4:]
        for rec in recs:
            step, apart = rec["step"], bool(moved) and rec["step"] > 1
            rec["grad_norm"] = norm_at_1 if step == 1 else 20.0 + step + (1e-3 if apart else 0.0)
            rec["loss"] += 1e-4 if apart else 0.0
            rec["param_digest"] = [d + (1e-6 if apart else 0.0) for d in rec["param_digest"]]
            rec["layers"] = _rows(grads, step, moved)
            rec["param_groups"] = [{**ADAMW, "weight_decay": wd} for wd in groups]
            if clip is not None:  # clip_grad_norm_ measured it, at max_norm `clip`
                rec.update(clip_max_norm=clip, clip_norm_type=2.0, clip_params=len(NAMES), clip_order="param_groups")
    return records


def _params(nudge: float) -> dict:
    return {n: torch.full(shape, 0.5 + nudge) for n, shape in SHAPES.items()}


def _pair(tmp_path, *, raw_decay_exempt: float = 0.0, clip: float | None = None, moved: set[str] | None = None):
    """raw: AdamW over two groups (weights 0.1, biases `raw_decay_exempt`); lightning: one group over the model's
    parameters, weight decay 0.1 on all. The gradients are the same; the norms are the hooks' sums in each order.
    `moved`: the tensors lightning's step 1 left otherwise (by default the biases, where the decay differs)."""
    grads, by_groups, by_model = _orders_part()
    weights = [n for n in NAMES if n not in EXEMPT]
    if moved is None:
        moved = set(EXEMPT) if raw_decay_exempt != 0.1 else set()
    meta_a = _hooks_meta("raw", [(weights, 0.1), (EXEMPT, raw_decay_exempt)], "")
    meta_b = _hooks_meta("lightning", [(NAMES, 0.1)], PREFIX)
    records_a = _records(grads, by_groups, [0.1, raw_decay_exempt], set(), clip)
    records_b = _records(grads, by_model, [0.1], moved, clip)
    a = write_run(tmp_path / "raw", meta_a, records_a, params=_params(0.0))
    final_b = {PREFIX + n: t for n, t in _params(1e-3 if moved else 0.0).items()}
    b = write_run(tmp_path / "lightning", meta_b, records_b, params=final_b)
    return a, b, (by_groups, by_model)


def test_a_norm_the_hooks_summed_in_another_group_order_gives_way_to_the_weight_decay_it_hid(tmp_path):
    a, b, (by_groups, by_model) = _pair(tmp_path)
    report, d = run_diagnosis(a, b)
    assert report["verdict"] == "different"
    assert report["first_divergence"]["quantity"] == "grad_norm"  # the figures still show where the numbers part
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    words = d["explanation"]
    assert "weight_decay: 0.0 vs 0.1 from step 1 for net.0.bias, net.2.bias" in words, words
    assert "raw built it with 2 param group(s), lightning with 1." in words, words
    assert "the same weight_decay" in d["advice"] and "net.0.bias" in d["advice"], d["advice"]
    assert "clip" not in d["advice"], d["advice"]  # neither side clips: no clipping to advise
    assert "not the cause" not in words, words  # the decay is never dismissed as acting after the norm
    # the norm said for what it is, at the same step, never "earlier" nor with the parameters called equal after it
    assert "differs only as measured" in words, words
    assert "neither side clips" in words and "every parameter's gradient norm is equal" in words, words
    assert "At the same step" in words and "The parameters after that step differ (the layers' sketches" in words
    assert "Earlier" not in words and "are equal on both sides: it did not change the training" not in words, words
    assert d["evidence"]["measured_before"]["relation"]["kind"] == "hooks_order"


def test_the_walk_reads_the_parameters_after_the_step_as_the_trainings_first_divergence(tmp_path):
    a, b, _ = _pair(tmp_path)
    walk = compare_runs(a, b, Criterion()).walk
    assert walk.norm_orders_apart
    assert (walk.first["quantity"], walk.first["step"]) == ("grad_norm", 1)
    trained = walk.first_trained
    assert (trained["quantity"], trained["step"], trained.get("layers_apart")) == ("param_digest", 1, True)


def test_a_norm_a_binding_clip_measured_stays_the_trainings(tmp_path):
    """With a clip recorded on both sides that binds (every norm above max_norm) the norm is clip_grad_norm_'s and
    scales the update, so an ulp apart there is a training difference, read as it was before (the order the clip
    summed in)."""
    a, b, (by_groups, by_model) = _pair(tmp_path, clip=0.5)
    assert min(by_groups, by_model) > 0.5  # what the test rests on: the clip binds on both sides
    walk = compare_runs(a, b, Criterion()).walk
    assert (walk.first_trained["quantity"], walk.first_trained["step"]) == ("grad_norm", 1)
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "reduction_order", (d["kind"], d["explanation"])
    assert "differs only as measured" not in d["explanation"], d["explanation"]


def test_groups_alike_in_settings_summed_in_another_order_train_the_same(tmp_path):
    """The same weight decay in both groups: the parameters never part, the norm an ulp apart at step 1 is only
    measured, and the verdict is the training's."""
    a, b, _ = _pair(tmp_path, raw_decay_exempt=0.1)
    report, d = run_diagnosis(a, b)
    assert report["verdict"] == "equivalent", (d["kind"], d["explanation"])
    assert d["kind"] == "recording.measured", (d["kind"], d["explanation"])
    assert d["evidence"]["relation"]["kind"] == "hooks_order", d["explanation"]
    assert "after clipping" not in d["explanation"], d["explanation"]  # neither side clips
    assert d["advice"].startswith("Nothing to change in either program"), d["advice"]


def test_parameters_apart_under_an_equal_digest_are_said_from_the_sketches(tmp_path):
    """The same settings in both partitions, yet a middle layer left otherwise by step 1 (no recorded setting
    explains it): the update is named, said from the layers' sketches, never as a digest apart that is equal."""
    a, b, _ = _pair(tmp_path, raw_decay_exempt=0.1, moved={"net.2.weight"})
    _, d = run_diagnosis(a, b)
    assert (d["category"], d["step"]) == ("optimizer", 1), (d["kind"], d["explanation"])
    words = d["explanation"]
    assert "a layer's sketch after it differs (the param_digest of the first and last tensors" in words, words
    assert "At the same step, the gradient norm at step 1 rank 0 differs only as measured" in words, words


def test_a_clip_that_binds_on_neither_side_reaches_no_update_and_the_weight_decay_leads(tmp_path):
    """swin's slip 1 (the tenth pass): both sides clip at max_norm 5 over their parameters in other orders, the norms
    (0.6) far below it, so each clip multiplies the gradients by exactly 1: the norm an ulp apart reached no update,
    and the weight decay recorded apart is the cause, never the clip's summation order."""
    a, b, (by_groups, by_model) = _pair(tmp_path, clip=1e4)
    assert max(by_groups, by_model, 20.0 + 4) < 1e4  # what the test rests on: no clip binds at any step
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    words = d["explanation"]
    assert "both sides clip (max_norm 10000 vs 10000), and neither clip binds there" in words, words
    assert "neither side clips" not in words, words
    assert d["evidence"]["measured_before"]["relation"]["kind"] == "clip_order"


def test_an_equal_pair_whose_clips_bind_nowhere_is_equivalent_with_a_note_on_the_clips(tmp_path):
    a, b, _ = _pair(tmp_path, raw_decay_exempt=0.1, clip=1e4)
    report, d = run_diagnosis(a, b)
    assert report["verdict"] == "equivalent", (d["kind"], d["explanation"])
    assert d["evidence"]["relation"]["kind"] == "clip_order", d["explanation"]
    assert d["advice"].startswith("Nothing to change for this note while neither clip binds"), d["advice"]
