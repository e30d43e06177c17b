"""The model recorded as one of its submodules, when the program never calls the model itself (issue 46, eleventh
pass: ppo's round 3).

A loop that uses its model only through the model's own methods (an RL agent's `get_value`,
`get_action_and_value`, which call its `network`, `actor` and `critic`) and wraps nothing in DDP never calls the
model: the modules it calls are its parts. The hooks took the part owning the most of the optimizer's parameters for
the model, so its final state held the network alone, under names without the model's path (`0.weight`), and the
comparison with a port recording the whole model (`agent.network.0.weight`, `agent.actor.weight`) said DIFFERENT,
"one side registered tensors the other does not hold", though every tensor both held was equal.

The rule now: the model the hooks record is the smallest module owning every parameter the optimizers update (found
once, at the first step, only where no module called or given DDP owns them); and where one side's final state is
the other's under one module path and the tensors the other holds alone are those its optimizer trains outside the
recorded module (named by shape in `optimizer_built`), the final states are paired under that path and the part
left out is said to be unrecorded on that side, not trained on one side only."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import PYTHON, REPO, check_ok, child_env, run_cmd
from safetensors import safe_open
from test_comparator import LOSSES, make_run
from torch import nn

from ddp_parity import compare_traces
from ddp_parity.compare.comparator import compare_runs
from ddp_parity.hooks import recording_env
from ddp_parity.hooks.modules import model_of
from ddp_parity.trace import META_FILE


class Agent(nn.Module):
    """An actor-critic used through its methods only (cleanrl's PPO Agent): no forward."""

    def __init__(self) -> None:
        super().__init__()
        self.network = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
        self.actor = nn.Linear(8, 3)
        self.critic = nn.Linear(8, 1)


def test_the_model_is_the_module_owning_every_trained_parameter_where_the_loop_calls_only_its_parts():
    agent = Agent()
    holder = nn.ModuleDict({"agent": agent})  # a container holding it alone: bigger by one module, not the model
    optimizer = torch.optim.Adam(agent.parameters())
    called = [agent.network, agent.critic, agent.actor]  # what the loop's calls at the top reach
    assert model_of(optimizer, called) is agent
    heads = torch.optim.Adam([*agent.actor.parameters(), *agent.critic.parameters()])
    assert model_of(heads, called) is agent  # the smallest owning both heads, though the network is called
    assert model_of(optimizer, [holder]) is holder  # a module the loop calls that owns them all stays the model


PART = {"0.weight": torch.arange(48, dtype=torch.float32).reshape(8, 6), "0.bias": torch.ones(8)}
HEADS = {"agent.actor.weight": torch.full((3, 8), 0.5), "agent.actor.bias": torch.zeros(3)}


def _with_meta(run, **facts):
    meta = json.loads((run / META_FILE).read_text())
    (run / META_FILE).write_text(json.dumps({**meta, **facts}))
    return run


def _optimizer(names):
    return {"class": "Adam", "named": True, "param_groups": [{"params": names, "lr": 0.1}]}


def _pair(tmp_path, part_names):
    """raw recorded the network alone (its optimizer's other parameters named by place and shape), the port the
    whole agent: the network's tensors equal under `agent.network.`, the heads on the port only."""
    raw = make_run(tmp_path / "raw", LOSSES, PART)
    _with_meta(raw, optimizer=_optimizer(part_names), optimizer_built=[_optimizer(part_names)])
    whole = {**{f"agent.network.{k}": v.clone() for k, v in PART.items()}, **HEADS}
    port = make_run(tmp_path / "lightning", LOSSES, whole)
    _with_meta(port, optimizer=_optimizer(sorted(whole)), optimizer_built=[_optimizer(sorted(whole))])
    return raw, port


def test_a_final_state_of_a_part_of_the_model_is_paired_under_its_path_and_the_rest_said_unrecorded(tmp_path):
    raw, port = _pair(tmp_path, ["0.weight", "0.bias", "group0.param2[3, 8]", "group0.param3[3]"])
    result = compare_runs(raw, port)
    assert result.equivalent and not result.problems, result.problems
    assert result.to_dict()["params"]["compared"] == 2
    notes = [n["message"] for n in result.notes if n["kind"] == "one_side_only"]
    assert len(notes) == 1, notes
    said = notes[0]
    assert said.startswith("raw recorded a part of the model its optimizer trains"), said
    assert "under `agent.network.`" in said and "agent.actor.weight [3, 8]" in said and "agent.actor.bias [3]" in said
    assert "unrecorded on raw, not compared" in said and "registered" not in said, said


def test_tensors_held_alone_that_the_other_sides_optimizer_does_not_train_stay_a_difference(tmp_path):
    """raw's optimizer trains the network alone: the port's heads are trained on one side only, a real difference,
    though the network pairs under its path."""
    raw, port = _pair(tmp_path, ["0.weight", "0.bias"])
    result = compare_runs(raw, port)
    assert not result.equivalent
    assert any("trained on one side only" in p for p in result.problems), result.problems
    assert result.to_dict()["params"]["compared"] == 2  # the network's tensors still paired under agent.network.


PROGRAM = REPO / "tests" / "hooks_programs" / "agent_loop.py"


@pytest.mark.slow
def test_a_loop_using_its_agent_through_its_methods_records_the_whole_agent(tmp_path):
    """The same loop recorded as it is and with one no-grad call of the whole agent before its first step (the
    recording-only line ppo needed): both record every tensor the optimizer trains, and the pair is EQUIVALENT."""
    runs = {}
    for name, args in (("raw", ()), ("called_once", ("--called-once",))):
        env = recording_env(tmp_path / name, name, child_env())
        check_ok(run_cmd([PYTHON, PROGRAM, *args], env=env))
        runs[name] = tmp_path / name
    with safe_open(str(runs["raw"] / "final.safetensors"), "pt") as final:
        held = set(final.keys())
    assert {"network.0.weight", "actor.weight", "critic.weight"} <= held, held
    report = compare_traces(runs["raw"], runs["called_once"])
    assert report["verdict"] == "equivalent", report["diagnosis"]["explanation"]
    assert report["params"]["compared"] == len(held)
