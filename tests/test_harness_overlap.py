"""The harness's own cost and both sides at once: what runs before the launches, when the sides
overlap, and that overlapping them changes no verdict, report or trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import SMALL_HARNESS_RUN, run_harness
from safetensors.torch import load_file

from ddp_parity.harness import cli
from ddp_parity.harness.launch import build_launch
from ddp_parity.harness.modes import default

REPO = Path(__file__).resolve().parents[1]
CONFIG = str(REPO / "configs" / "default.yaml")
# what two runs of the same config legitimately differ in: wall times and where their files are
RUN_SPECIFIC_KEYS = {"seconds", "timing", "logs", "runs", "plot", "time_s"}


def plan_for(*argv: str):
    args = cli.parse_args(["--out", "/nonexistent", *argv])
    return args, default.prepare(args)


def launches_for(args, plan, tmp_path: Path):
    return default.build_launches(args, plan, tmp_path)


# ---------------------------------------------------------------------------------------------
# when the sides run at once (no processes)


def test_a_launch_counts_its_ranks_on_every_node(tmp_path):
    assert build_launch("raw", CONFIG, 2, [], tmp_path, 1, nnodes=2).processes == 4
    assert build_launch("lightning", CONFIG, 3, [], tmp_path, 1).processes == 3
    assert build_launch("reference", CONFIG, 4, [], tmp_path, 1).processes == 1  # one process emulating 4 ranks


def test_cores_needed_counts_every_rank_thread_and_dataloader_worker(tmp_path):
    args, plan = plan_for("--set", "threads=2", "--set", "data.num_workers=1")
    assert default.cores_needed(launches_for(args, plan, tmp_path), plan) == 2 * 2 * (2 + 1)
    args, plan = plan_for("--reference")
    assert default.cores_needed(launches_for(args, plan, tmp_path), plan) == 2 * 2 + 1


@pytest.mark.parametrize(
    ("cores", "flags", "at_once"),
    [
        (2, [], False),  # 2 sides x 2 ranks x 1 thread do not fit 2 cores: one after the other
        (3, [], False),
        (4, [], True),  # they fit exactly
        (8, [], True),
        (2, ["--parallel"], True),
        (8, ["--sequential"], False),
    ],
)
def test_the_sides_run_at_once_only_where_every_thread_has_a_core(tmp_path, monkeypatch, cores, flags, at_once):
    monkeypatch.setattr(default, "available_cores", lambda: cores)
    args, plan = plan_for(*flags)
    assert default.launch_at_once(args, launches_for(args, plan, tmp_path), plan) is at_once


def test_parallel_and_sequential_together_are_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.parse_args(["--parallel", "--sequential"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# what the way to the launches imports


@pytest.mark.slow
def test_validating_and_building_the_launches_imports_neither_torch_nor_matplotlib(tmp_path):
    """torch and matplotlib cost the harness seconds: they are imported while the sides train."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from ddp_parity.harness import cli\n"
        "from ddp_parity.harness.modes import default\n"
        f"args = cli.parse_args(['--out', {str(tmp_path)!r}])\n"
        "default.build_launches(args, default.prepare(args), Path(args.out))\n"
        "print(sorted(m for m in ('torch', 'matplotlib', 'numpy', 'lightning') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# at once or one after the other: the same verdict, report and traces, bit for bit


def without_run_specifics(value):
    if isinstance(value, dict):
        return {k: without_run_specifics(v) for k, v in value.items() if k not in RUN_SPECIFIC_KEYS}
    if isinstance(value, list):
        return [without_run_specifics(v) for v in value]
    return value


def records(path: Path) -> list[dict]:
    return [without_run_specifics(json.loads(line)) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory, harness_run_at_once):
    """The small config run by the harness one side after the other, and (shared) both at once."""
    one_by_one = tmp_path_factory.mktemp("one_by_one") / "out"
    result = run_harness("--out", str(one_by_one), "--sequential", *SMALL_HARNESS_RUN)
    assert result.returncode == 0, result.stdout + result.stderr
    return one_by_one, harness_run_at_once[0]


@pytest.mark.slow
def test_both_sides_at_once_give_the_same_report_as_one_after_the_other(both_ways):
    one_by_one, at_once = (json.loads((out / "report.json").read_text()) for out in both_ways)
    assert one_by_one["verdict"] == at_once["verdict"] == "equivalent"
    assert one_by_one["losses"]["compared"] == 2 * 2  # 2 ranks x 2 steps
    assert without_run_specifics(one_by_one) == without_run_specifics(at_once)


@pytest.mark.slow
@pytest.mark.parametrize("side", ["raw", "lightning"])
def test_both_sides_at_once_record_the_same_traces_bit_for_bit(both_ways, side):
    one_by_one, at_once = (out / side for out in both_ways)
    ranks = sorted(p.name for p in (one_by_one / "trace").glob("rank*.jsonl"))
    assert ranks == sorted(p.name for p in (at_once / "trace").glob("rank*.jsonl")) and ranks
    for name in ranks:  # steps, losses, gradient norms, indices, digests; modules' digests
        assert records(one_by_one / "trace" / name) == records(at_once / "trace" / name), name
    assert (one_by_one / "validation.jsonl").read_bytes() == (at_once / "validation.jsonl").read_bytes()
    final_a, final_b = load_file(one_by_one / "final.safetensors"), load_file(at_once / "final.safetensors")
    assert final_a.keys() == final_b.keys()
    assert all(torch.equal(final_a[key], final_b[key]) for key in final_a)


def test_run_specific_keys_are_only_times_and_paths():
    """What the comparison above leaves out could hide no result: it is wall time or a path."""
    report = {"seconds": 1.0, "verdict": "equivalent", "pairs": [{"runs": {"a": "/x"}, "losses": {"max_abs": 0.0}}]}
    assert without_run_specifics(report) == {"verdict": "equivalent", "pairs": [{"losses": {"max_abs": 0.0}}]}
