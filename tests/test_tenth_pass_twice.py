"""A constant loss factor equal to several counts, placed where the port's framework tells which division is its
own (issue 46, tenth pass: swin's slip 2).

A loop divides each micro-batch's loss by its accumulation count before backward; its Lightning port divides what
training_step returns the same way, and Lightning's automatic optimization (accumulate_grad_batches = k) divides it
again. With k equal to the micro-batches per step and to the world size, the losses alone fit three slips (the loop
undivided, the port divided twice, the port divided by the world size). The hooks record each backward root's
divisions by a constant (`loss_divisors`) and the Lightning Trainer's accumulate_grad_batches (`lightning_loop`);
where the smaller side's roots are the other's divided once more by that k, the diagnosis leads with the one slip the
records prove, and keeps the world size only as what the port's own division may be meant for."""

from __future__ import annotations

import json

import torch
from test_diagnosis import WORLD, make_meta, make_records, pair, run_diagnosis, trained_apart

from ddp_parity.hooks.gradients import root_divisors
from ddp_parity.hooks.modules import lightning_loop_facts

K = 2  # the accumulation count, the micro-batches per step and the world size: one number, as in swin's config
assert WORLD == K


def _hooks_run(tmp_path, loop_divides: bool):
    """A loop and its Lightning port as the hooks record them (no config of the program's own): 2 micro-batches a
    step on 2 ranks; the port returns the loss divided as the loop divides it, and Lightning divides it again."""
    raw, lightning = make_records(), make_records()
    loop_roots = [[float(K)]] * K if loop_divides else [[]] * K
    for rank in range(WORLD):
        for ra, rb in zip(raw[rank], lightning[rank]):
            ra["loss"] *= K  # the loop's loss is K x the port's at every step, its gradients too
            ra["grad_norm"] *= K
            ra["micro_batches"] = rb["micro_batches"] = K
            ra["loss_divisors"] = loop_roots
            rb["loss_divisors"] = [[float(K), *roots] for roots in loop_roots]  # Lightning's own division, outermost
    trained_apart(raw)
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["config"] = meta_b["config"] = {}
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=raw, records_b=lightning)
    loop = {"before_step": 1, "order": 1, "accumulate_grad_batches": K, "automatic_optimization": True}
    for rank in range(WORLD):
        (b / "trace" / f"rank{rank}.hooks.json").write_text(
            json.dumps({"lightning_loop": {"count": 1, "items": [loop]}})
        )
    return a, b


def _without_divisions(run):
    for rank in range(WORLD):
        path = run / "trace" / f"rank{rank}.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text(
            "".join(json.dumps({k: v for k, v in r.items() if k != "loss_divisors"}) + "\n" for r in records)
        )


def test_a_port_dividing_as_the_loop_does_under_lightnings_accumulation_is_divided_twice(tmp_path):
    _, d = run_diagnosis(*_hooks_run(tmp_path, loop_divides=True))
    assert (d["kind"], d["step"]) == ("loss.factor", 1), d["explanation"]
    said = d["explanation"]
    assert said.startswith("raw's loss is 2.000 × lightning's at every step"), said
    assert "lightning divides its loss twice, the port's division and Lightning's own" in said, said
    assert "raw ÷2, lightning ÷2 ÷2" in said, said
    # the loop's roots carry the division: "raw sums undivided" is excluded, and no longer said
    assert "without dividing by the accumulation count" not in said and "(each fits" not in said, said
    # the world size equals the port's division: kept as what it may be meant for, with what tells them apart
    assert "2 is also the world_size" in said and "a run where the two counts differ" in said, said
    assert d["advice"].startswith("On lightning, return each micro-batch's loss from training_step without"), d
    assert "Or:" not in d["advice"], d["advice"]


def test_a_loop_whose_roots_carry_no_division_sums_its_micro_batches_undivided(tmp_path):
    _, d = run_diagnosis(*_hooks_run(tmp_path, loop_divides=False))
    assert (d["kind"], d["step"]) == ("loss.factor", 1), d["explanation"]
    said = d["explanation"]
    assert "raw sums its 2 micro-batch losses without dividing by the accumulation count" in said, said
    assert "twice" not in said and "world size" not in said and "world_size" not in said, said
    assert d["advice"].startswith("On raw, divide each micro-batch's loss"), d["advice"]


def test_without_the_roots_divisions_the_candidates_stay_with_what_tells_them_apart(tmp_path):
    a, b = _hooks_run(tmp_path, loop_divides=True)
    for run in (a, b):  # recorded before the hooks took the roots' divisions (swin's kept slip 2)
        _without_divisions(run)
    _, d = run_diagnosis(a, b)
    said = d["explanation"]
    assert "(each fits" in said and "twice" in said and "world size" in said, said
    assert "These records lack what tells the accumulation's candidates apart" in said and "loss_divisors" in said, said


def test_an_explicit_trace_is_promised_no_divisions(tmp_path):
    """A program that records itself is never recorded by the hooks (they stand down): no sentence sends it there."""
    a, b = _hooks_run(tmp_path, loop_divides=True)
    for run in (a, b):
        meta = json.loads((run / "meta.json").read_text())
        meta.pop("recorded_by")
        (run / "meta.json").write_text(json.dumps(meta))
        _without_divisions(run)
    _, d = run_diagnosis(a, b)
    assert "(each fits" in d["explanation"] and "loss_divisors" not in d["explanation"], d["explanation"]


def test_the_hooks_read_a_roots_divisions_by_a_constant_outermost_first():
    w = torch.ones(3, requires_grad=True)
    loss = (w * w).sum()
    assert root_divisors(loss) == []
    assert root_divisors(loss / 2) == [2.0]
    assert root_divisors((loss / 2) / 4) == [4.0, 2.0]
    assert root_divisors(loss * 0.5) == [2.0]
    assert root_divisors(loss / torch.tensor(2.0)) == [2.0]
    assert root_divisors(loss * w.sum()) == []  # a factor that takes a gradient is part of the loss


def test_the_hooks_read_lightnings_accumulation_through_its_wrappers():
    class Trainer:
        accumulate_grad_batches = 4

    class Port(torch.nn.Module):  # a LightningModule as the hooks see it, Lightning not imported
        automatic_optimization = True

        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 2)
            self._trainer = Trainer()

    class Wrapper(torch.nn.Module):  # Lightning's wrapper inside DDP
        def __init__(self, inner):
            super().__init__()
            self._forward_module = inner

    facts = lightning_loop_facts([Wrapper(Port())])
    assert facts == {"accumulate_grad_batches": 4, "automatic_optimization": True}
    assert lightning_loop_facts([torch.nn.Linear(2, 2)]) is None
