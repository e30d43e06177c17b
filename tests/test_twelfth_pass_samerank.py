"""The twelfth pass, class `samerank`: a rank fed another rank's data, read as rounding.

llm.c's port took its loader's rank from os.environ["RANK"], which Lightning's launcher does not set: both Lightning
ranks read rank 0's shard. The tool said `reduction_order` ("the gradient norm differs by 6 ulps ... summed in another
order") while the parameters parted 35x beyond rounding after step 1 and the module watch showed Lightning's rank 1
fed raw rank 0's input. The rule now:

1. where a rank of one side is fed exactly what another rank was fed (its own side's, fed apart on the other side, or
   the other side's), while the other side's same rank was fed other data, the diagnosis names it, with and without
   batch digests, whatever quantity parts first (compare/causes/fed.py, data_order.fed_alike);
2. a reading of rounding is never given there, nor another rank's cause read from the averaged gradients.

The pair is tests/hooks_programs/eval_loop.py under torchrun (2 ranks, gloo), recorded by the hooks: --shards reads
each rank's batches from its rows of one table, --data-rank0 makes both ranks read rank 0's rows. The recordings
without batch digests (and with the loss unrecorded, as llm.c's ZeroRedundancyOptimizer left it) are copies of the
same records with those fields taken out, as such a recording writes them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO, _torchrun_prefix, check_ok, child_env, run_cmd

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env

PROGRAM = REPO / "tests" / "hooks_programs" / "eval_loop.py"
OWN, SHARED = "own_shards", "rank0_shards"


def _record(tmp: Path, name: str, *args: str) -> Path:
    run_dir = tmp / name
    env = recording_env(run_dir, name, child_env())
    check_ok(run_cmd([*_torchrun_prefix(2), PROGRAM, "--save", tmp / f"{name}.pt", "--shards", *args], env=env))
    return run_dir


def _without(runs: tuple[Path, Path], dest: Path, *, nan_loss: bool = False) -> tuple[Path, Path]:
    """Copies of the two runs whose step records hold no batch digest (and, with nan_loss, NaN as the loss: what the
    hooks write where they could not take it)."""
    out = []
    for run in runs:
        copy = dest / run.name
        shutil.copytree(run, copy)
        for path in (copy / "trace").glob("rank*.jsonl"):
            if path.name.count(".") != 1:  # rank0.jsonl only: the module and evaluation traces stay as they are
                continue
            records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            for record in records:
                record.pop("batch_digest", None)
                if nan_loss:
                    record["loss"] = float("nan")
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
        out.append(copy)
    return out[0], out[1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("samerank")
    recorded = (_record(tmp, OWN), _record(tmp, SHARED, "--data-rank0"))
    return {
        "digests": recorded,
        "no_digests": _without(recorded, tmp_path_factory.mktemp("no-digests")),
        "no_digests_no_loss": _without(recorded, tmp_path_factory.mktemp("no-loss"), nan_loss=True),
    }


def _never_rounding_nor_another_ranks_cause(d: dict) -> None:
    assert d["category"] != "reduction_order" and "summed in another order" not in d["explanation"], d
    assert "another recorded reason" not in d["explanation"] and "On rank 0 (" not in d["advice"], d


@pytest.mark.slow
def test_ranks_fed_the_same_batches_are_named_from_their_batch_digests(runs):
    report = compare_traces(*runs["digests"])
    d = report["diagnosis"]
    assert report["verdict"] == "different" and d["category"] == "data_order", (d["kind"], d["explanation"])
    assert d["evidence"]["shared_by_ranks"] == {"side": SHARED, "ranks": [0, 1]}, d["evidence"]
    assert d["advice"].startswith(f"On {SHARED}: give each rank its own data"), d["advice"]
    assert "environment variable the launcher may not set" in d["advice"], d["advice"]
    _never_rounding_nor_another_ranks_cause(d)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["no_digests", "no_digests_no_loss"])
def test_ranks_fed_the_same_inputs_are_named_from_the_module_watch_without_batch_digests(runs, variant):
    """No batch digest (nor, in the second, a loss): the first record apart is the loss on rank 1 or the gradient norm
    on rank 0; the module watch's input to the model shows the shared side's rank 1 fed what rank 0 was fed."""
    report = compare_traces(*runs[variant])
    d = report["diagnosis"]
    assert report["verdict"] == "different", d["explanation"]
    assert (d["kind"], d["step"], d["rank"]) == ("data_order.fed_alike", 1, 1), (d["kind"], d["explanation"])
    fed = d["evidence"]["fed_alike"]
    assert fed["side"] == SHARED and fed["rank"] == 1 and fed["by"] == ["model_input"], fed
    assert {"side": SHARED, "rank": 0} in fed["same_as"] and {"side": OWN, "rank": 0} in fed["same_as"], fed
    assert d["evidence"]["shared_by_ranks"] == {"side": SHARED, "ranks": [0, 1]}, d["evidence"]
    assert d["advice"].startswith(f"On {SHARED}: give each rank its own data"), d["advice"]
    _never_rounding_nor_another_ranks_cause(d)
