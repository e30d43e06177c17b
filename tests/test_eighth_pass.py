"""Issue 46's eighth first pass (fixmatch, vqvae2, pycls on the frozen 7aa8dca): each class it found, on a model and
loop of the tests' own.

1. Ranks started by fork end by `os._exit`, where no atexit handler runs: their recording still ends (the final
   parameters, the hooks facts), with DataLoader workers forked from a rank after its recording started.
"""

from __future__ import annotations

import json

import pytest
from conftest import REPO, check_ok, child_env, run_cmd

from ddp_parity.harness.launch import free_port
from ddp_parity.hooks import recording_env
from ddp_parity.trace import FINAL_PARAMS_FILE, META_FILE, TRACE_DIR

FORKED = REPO / "tests" / "hooks_programs" / "forked_ranks.py"


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
