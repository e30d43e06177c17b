"""An optimizer whose step() calls another optimizer's step() (issue 46, twelfth pass: llmc with
`--zero_stage 1`).

torch's ZeroRedundancyOptimizer steps its shard's optimizer inside its own step (a Lookahead or SWA wrapper, a
sharded optimizer of one's own do the same). The hooks took that inner step for a step of another optimizer, which
empties what the step gathered (as a GAN's generator step must): the outer step then recorded no loss, no batch,
no micro-batch count, no loss divisors, no clipping, no rng, on both sides, with a `recorder_unrecorded` "no
backward ran before the optimizer step" although two had. And the broadcasts ZeroRedundancyOptimizer makes after
its step were named the program's where the program called step() and the libraries' where Lightning did.

The rule now: the outermost optimizer.step() is the step, what it gathered stays with it, a step inside it is
counted by class only (`nested_optimizer_steps`); a collective torch.distributed.optim makes is attributed to it,
whoever called the optimizer."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import recorded_once
from torch.optim import optimizer as torch_optimizer

from ddp_parity import compare_traces
from ddp_parity.compare.collectives import made_by_program
from ddp_parity.hooks import optimizer as optimizer_hooks
from ddp_parity.hooks import rng, state
from ddp_parity.trace import read_records

GATHERED = ("loss", "batch_digest", "micro_batches", "loss_divisors", "clip_max_norm", "clip_params", "grad_sync")


class Wrapping(torch.optim.Optimizer):
    """A wrapper of one's own (Lookahead-like): its step() steps an inner SGD, then raises when told to."""

    def __init__(self, params, seen: list):
        params = list(params)
        super().__init__(params, {"lr": 0.1})
        self.inner = torch.optim.SGD(params, lr=0.1)
        self.seen, self.fail = seen, False

    def step(self, closure=None):
        self.inner.step()
        self.seen.append(len(state.current.roots))  # what the step gathered, after the inner step
        if self.fail:
            raise RuntimeError("the wrapper's step failed")


def test_a_step_inside_another_is_part_of_it_and_a_step_that_raised_leaves_none_open(tmp_path):
    """In one process, the hooks' own step hooks on a recording with no recorder: the wrapper's step is the step
    and the inner SGD's steps inside it neither count nor empty what the step gathered; after a wrapper step that
    raised (its post-hook never ran), another optimizer's step is that optimizer's, not one inside the wrapper's."""
    weight = torch.nn.Parameter(torch.ones(3))
    seen: list = []
    wrapping, other = Wrapping([weight], seen), torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    live = state.Recording(tmp_path, "guest")
    live.optimizer = wrapping  # the counted optimizer, as the first step would set it (no recorder started here)
    handles = [
        torch_optimizer.register_optimizer_step_pre_hook(optimizer_hooks._pre_step),
        torch_optimizer.register_optimizer_step_post_hook(optimizer_hooks._post_step),
    ]
    kept, state.current, armed = state.current, live, bool(rng._armed)
    try:
        weight.grad = torch.ones(3)
        live.roots = [torch.tensor(2.0)]  # a backward's loss, gathered for the step
        wrapping.step()
        assert seen == [1] and live.steps == 1
        assert live.facts["nested_optimizer_steps"] == {"SGD": 1} and "other_optimizers" not in live.facts
        wrapping.fail = True
        with pytest.raises(RuntimeError):
            wrapping.step()
        assert live.steps == 1  # a step that raised is not taken
        other.step()
        assert live.facts["other_optimizers"]["None"]["steps"] == 1  # not one inside the wrapper's failed step
        assert live.facts["nested_optimizer_steps"] == {"SGD": 2}
        wrapping.fail = False
        live.roots = [torch.tensor(3.0)]
        wrapping.step()
        assert seen == [1, 0, 1] and live.steps == 2 and live.facts["nested_optimizer_steps"] == {"SGD": 3}
        assert not live.unrecorded, live.unrecorded
    finally:
        state.current = kept
        for handle in handles:
            handle.remove()
        if not armed:
            rng.disarm()  # the post-hook armed the next step's digests: a forward hook of this process's torch


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """tests/hooks_programs/facts_ddp.py on 2 ranks, two micro-batches and clipping a step: plain SGD, and
    ZeroRedundancyOptimizer over SGD (which trains alike)."""
    args = ("--out", "{out}", "--accumulate")
    return {
        "plain": recorded_once(tmp_path_factory, "plain", "facts_ddp.py", *args)[0],
        "zero": recorded_once(tmp_path_factory, "zero", "facts_ddp.py", *args, "--zero")[0],
    }


@pytest.mark.slow
@pytest.mark.parametrize("rank", [0, 1])
def test_a_step_taken_by_an_optimizer_inside_another_keeps_what_the_step_gathered(pair, rank):
    plain, zero = read_records(pair["plain"], rank), read_records(pair["zero"], rank)
    assert [r["step"] for r in zero] == [1, 2, 3]  # the program's optimizer.step() calls, the inner ones not
    for ours, theirs in zip(zero, plain):
        assert {k: ours.get(k) for k in GATHERED} == {k: theirs.get(k) for k in GATHERED}
        # torch's generator as the step's first forward found it (numpy's and Python's: unseeded, each process's own)
        assert ours["rng"]["at"] == "forward" and ours["rng"]["torch"] == theirs["rng"]["torch"]
        assert ours["micro_batches"] == 2 and ours["loss_divisors"] == [[2.0], [2.0]] and ours["clip_max_norm"] == 0.5
    facts = json.loads((pair["zero"] / "trace" / f"rank{rank}.hooks.json").read_text())
    assert facts["nested_optimizer_steps"] == {"SGD": 3}
    assert not facts.get("other_optimizers") and not facts.get("unrecorded"), facts.get("unrecorded")


@pytest.mark.slow
def test_the_collectives_a_library_optimizer_makes_are_its_own_not_the_programs(pair):
    made = [c for record in read_records(pair["zero"], 0) for c in record.get("collectives", [])]
    broadcasts = [c for c in made if c["op"] == "broadcast"]
    assert broadcasts and {c["caller"] for c in broadcasts} == {"torch.distributed.optim.zero_redundancy_optimizer"}
    assert not any(made_by_program(c) for c in broadcasts)
    assert [c["caller"] for c in made if c["op"] == "all_reduce"] == ["__main__"] * 2  # the loss printed: the program's


@pytest.mark.slow
def test_equal_training_with_a_wrapping_optimizer_is_equivalent_and_nothing_is_said_unrecorded(pair):
    report = compare_traces(pair["plain"], pair["zero"])
    assert report["verdict"] == "equivalent", report["diagnosis"]["explanation"]
    kinds = [w["kind"] for w in report["warnings"]]
    assert "recorder_unrecorded" not in kinds, report["warnings"]
    assert report["collectives"]["first_difference"] is None
