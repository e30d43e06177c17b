"""Issue 46's eighth first pass (fixmatch, vqvae2, pycls on the frozen 7aa8dca): each class it found, on a model and
loop of the tests' own.

1. Ranks started by fork end by `os._exit`, where no atexit handler runs: their recording still ends (the final
   parameters, the hooks facts), with DataLoader workers forked from a rank after its recording started.
2. A step fed by two DataLoaders (a labeled loader beside an unlabeled one): the loader the backward's batch came
   from is not the only one compared; another loader's sampler built otherwise is named, never "the sampler agrees".
"""

from __future__ import annotations

import json

import pytest
from conftest import REPO, check_ok, child_env, run_cmd

from ddp_parity import compare_traces
from ddp_parity.harness.launch import free_port
from ddp_parity.hooks import recording_env
from ddp_parity.trace import FINAL_PARAMS_FILE, META_FILE, TRACE_DIR

FORKED = REPO / "tests" / "hooks_programs" / "forked_ranks.py"
TWO_LOADERS = REPO / "tests" / "hooks_programs" / "two_loaders.py"


@pytest.mark.slow
def test_ranks_started_by_fork_end_their_recording(tmp_path):
    """1. pycls r2/r3: each forked rank's end-of-run record was lost (no final parameters, no hooks facts), and the
    comparison then asked whether the run had finished."""
    env = child_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
    check_ok(run_cmd(["python", FORKED, "--steps", "3", "--workers", "1"], env=recording_env(tmp_path, "forked", env)))
    trace = tmp_path / TRACE_DIR
    meta = json.loads((tmp_path / META_FILE).read_text())
    assert meta["finished"], meta.get("unrecorded")
    assert (tmp_path / FINAL_PARAMS_FILE).is_file()
    for rank in (0, 1):
        facts = json.loads((trace / f"rank{rank}.hooks.json").read_text())
        assert facts["steps"] == 6, facts["steps"]


def _recorded(tmp_path, name: str, program, *args: str):
    env = child_env({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
    check_ok(run_cmd(["python", program, *args], env=recording_env(tmp_path / name, name, env)))
    return tmp_path / name


@pytest.mark.slow
def test_a_second_loader_seeded_otherwise_is_named(tmp_path):
    """2. fixmatch's probe: the labeled loader's DistributedSampler seeded 1 against 0 was "the indices are the same,
    so the sampler agrees" (data_pipeline), the unlabeled loader's indices (the backward's) being equal."""
    a = _recorded(tmp_path, "a", TWO_LOADERS)
    b = _recorded(tmp_path, "b", TWO_LOADERS, "--labeled-seed", "1")
    d = compare_traces(a, b)["diagnosis"]
    assert (d["kind"], d["step"]) == ("sampler_seed", 1), (d["kind"], d["explanation"])
    said = d["explanation"]
    assert "Labeled's DataLoader" in said and "seed 0 on a, 1 on b" in said, said
    assert "the sampler agrees" not in said, said
    assert "Labeled's DistributedSampler the same seed" in d["advice"], d["advice"]
