"""DeiT's slip (its first pass): numpy seeded alike on every rank where the loop seeds it seed + rank. Its Mixup lambda
draws from numpy between the batch and the model; torch's generator is equal. The tool headlined `data_pipeline`
(workers, transforms), listing the numpy digests apart as "not the cause", and its "seeds recorded" were torch's
only. The hooks now record numpy's and Python's seeds (`numpy_seeds`, `random_seeds`), and a batch or model input
apart at equal indices with torch's generator equal and numpy's apart is `rng.other_generator`, naming numpy's seeds.
The loop (tests/hooks_programs/numpy_loop.py) draws from numpy in its dataset or in its step; recorded by the hooks
with no line changed, one process in a process group of one.
"""

from __future__ import annotations

import pytest
from conftest import PYTHON, REPO, check_ok, child_env, run_cmd

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env
from ddp_parity.trace_files import read_hook_facts

PROGRAM = REPO / "tests" / "hooks_programs" / "numpy_loop.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("numpy-loop")
    out = {}
    for where in ("dataset", "step"):
        for seed in (0, 1):
            name = f"{where}-{seed}"
            env = recording_env(tmp / name, name, child_env())
            cmd = [PYTHON, PROGRAM, tmp / f"{name}.store", "--where", where, "--numpy-seed", str(seed)]
            out[name] = check_ok(run_cmd(cmd, env=env)).stdout
    return {name: tmp / name for name in out} | {"stdout": out}


@pytest.mark.slow
def test_numpy_seeds_are_recorded_beside_torchs(runs):
    facts = read_hook_facts(runs["step-1"], 0)
    assert [i["seed"] for i in facts["seeds"]["items"]] == [0]
    assert [i["seed"] for i in facts["numpy_seeds"]["items"]] == [1]


@pytest.mark.parametrize("where", ["dataset", "step"])
@pytest.mark.slow
def test_numpy_seeded_otherwise_is_named_where_torch_is_equal(runs, where):
    """In the dataset the batch itself parts (equal indices); in the step the batch is equal and the model's first
    input is not (the module watch). Either way the finding names numpy, its seeds and torch's equal state."""
    assert runs["stdout"][f"{where}-0"] != runs["stdout"][f"{where}-1"]  # the program's own loss parts
    report = compare_traces(runs[f"{where}-0"], runs[f"{where}-1"])
    d = report["diagnosis"]
    assert (d["kind"], d["step"]) == ("rng.other_generator", 1), (d["kind"], d["explanation"])
    assert "torch's generator equal, numpy apart" in d["explanation"], d["explanation"]
    assert f"numpy's {where}-0 [0]; {where}-1 [1]" in d["explanation"], d["explanation"]
    assert d["advice"].startswith("Seed numpy's global generator the same way on both sides, rank by rank"), d
    assert "random generators' state differs" not in d["explanation"]  # said once, in the finding's own words
