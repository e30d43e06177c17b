"""The arithmetic a run computed under is recorded (meta.json `ranks[r].arithmetic`) and, when two runs
differ in it, the diagnosis names it first: a slip made here on a model of our own, through the public
plugin API, one side under another ATen kernel set or MKL path than the other.

Whether the two arithmetics round this model apart is a fact of the machine (a CPU without AVX2 runs
the scalar kernels anyway): the test reads it from the recorded bits and asserts what the tool must
say in either case."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_parity import compare_traces
from ddp_parity.trace import read_meta, read_records

pytestmark = [pytest.mark.slow, pytest.mark.float_sensitive]

# one process, the public recorder; shapes whose matmuls round apart under another kernel set here
TRAIN = """
import sys, torch
from ddp_parity import TraceRecorder
torch.manual_seed(0)
torch.set_num_threads(1)
net = torch.nn.Sequential(torch.nn.Linear(1031, 257), torch.nn.Tanh(), torch.nn.Linear(257, 10))
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
x, y = torch.randn(64, 1031), torch.randint(0, 10, (64,))
recorder = TraceRecorder(sys.argv[1], side=sys.argv[2], config={"model": "mlp-1031-257"})
recorder.start()
for step in range(1, 7):
    loss = torch.nn.functional.cross_entropy(net(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    recorder.record(step, loss, list(range(64)), epoch=0, lr=0.05)
recorder.finish(net)
"""
ARITHMETIC_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR")


def train(run_dir: Path, side: str, **variables: str) -> Path:
    env = {k: v for k, v in os.environ.items() if k not in ARITHMETIC_VARIABLES} | variables
    result = subprocess.run(
        [sys.executable, "-c", TRAIN, str(run_dir), side], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """train() once per (side, variables) in this module: the tests share "mine" and the ATen run."""
    root, runs = tmp_path_factory.mktemp("arithmetic"), {}

    def get(side: str, **variables: str) -> Path:
        key = (side, *sorted(variables.items()))
        if key not in runs:
            runs[key] = train(root / f"{side}-{len(runs)}", side, **variables)
        return runs[key]

    return get


def losses(run_dir: Path) -> list:
    return [record["loss"] for record in read_records(run_dir, 0)]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("ATEN_CPU_CAPABILITY", "default", "ATEN_CPU_CAPABILITY=default"),
        ("MKL_CBWR", "COMPATIBLE", "MKL_CBWR=COMPATIBLE"),
    ],
)
def test_another_arithmetic_on_one_side_is_named_first(trained, variable, value, said):
    mine = trained("mine")
    other = trained("other", **{variable: value})
    facts = read_meta(other)["ranks"][0]["arithmetic"]
    assert facts[variable] == value and read_meta(mine)["ranks"][0]["arithmetic"][variable] is None
    assert {"cpu", "aten_cpu_capability", "blas"} <= set(facts)
    report = compare_traces(mine, other)
    if losses(mine) != losses(other) or report["verdict"] != "equivalent":
        diagnosis = report["diagnosis"]
        assert report["verdict"] == "different"
        assert (diagnosis["category"], diagnosis["kind"]) == ("config", "config.arithmetic"), diagnosis
        assert diagnosis["explanation"].startswith("The runs computed under different arithmetic: mine ran with ")
        assert said in diagnosis["explanation"].split(", other with ", 1)[1].split(".", 1)[0], diagnosis
        assert any(f"arithmetic.{variable}" in line for line in diagnosis["evidence"]["differences"])
    else:  # the two kernel sets rounded this model alike here: equivalent, the difference still said
        assert any(f"arithmetic.{variable}" in w["message"] for w in report["warnings"]), report["warnings"]


def test_the_arithmetic_facts_are_in_meta_json(trained):
    """ATen's scalar kernels asked for by name: DEFAULT on any CPU, whatever this process runs."""
    facts = read_meta(trained("other", ATEN_CPU_CAPABILITY="default"))["ranks"][0]["arithmetic"]
    assert facts["aten_cpu_capability"] == "DEFAULT" and facts["ATEN_CPU_CAPABILITY"] == "default"
    assert facts["MKL_CBWR"] is None  # unset in the run's environment: said as null
    assert json.loads(json.dumps(facts)) == facts  # plain JSON values
