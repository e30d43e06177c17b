"""--sides: any two or three twins, every pair compared; report.json's top-level keys describe the
first pair, `pairs` all of them, and the verdict is equivalent only if every pair is."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import pytest

from ddp_parity.harness.comparing import compare_and_report

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_pair(harness_run_at_once):
    """lightning first, raw second (conftest's small run): the order of --sides is the order of the report."""
    return harness_run_at_once


def test_the_order_of_sides_is_the_order_of_the_report(small_pair):
    out, result = small_pair
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "equivalent" and "pairs" not in report
    assert report["runs"]["a"].endswith("lightning") and report["runs"]["b"].endswith("raw")
    assert "[lightning]" in result.stdout and "[raw]" in result.stdout  # launch lines and progress lines


def compare_three(tmp_path, runs):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        report = compare_and_report(tmp_path, runs, 0.0, 0.0)
    return report.to_json(), printed.getvalue()


def test_three_sides_give_pairs_and_one_verdict(small_pair, tmp_path):
    out, _ = small_pair
    third = tmp_path / "third"
    shutil.copytree(out / "raw", third)
    report, printed = compare_three(tmp_path, {"raw": out / "raw", "lightning": out / "lightning", "fabric": third})
    assert [(p["a"], p["b"]) for p in report["pairs"]] == [
        ("raw", "lightning"),
        ("raw", "fabric"),
        ("lightning", "fabric"),
    ]
    assert report["verdict"] == "equivalent" and all(p["verdict"] == "equivalent" for p in report["pairs"])
    assert all(p["diagnosis"]["category"] == "equivalent" for p in report["pairs"])
    assert printed.count("pair ") == 3 and json.loads((tmp_path / "report.json").read_text())["sides"] == [
        "raw",
        "lightning",
        "fabric",
    ]

    # one parameter digest edited in the third run (what it trained, not what it measured: an edited loss
    # alone is a recording note): two pairs differ, the verdict follows, the table shown is theirs
    trace = third / "trace" / "rank1.jsonl"
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    records[1]["param_digest"][0] += 1e-3
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    report, printed = compare_three(tmp_path, {"raw": out / "raw", "lightning": out / "lightning", "fabric": third})
    verdicts = {(p["a"], p["b"]): p["verdict"] for p in report["pairs"]}
    assert verdicts == {
        ("raw", "lightning"): "equivalent",
        ("raw", "fabric"): "different",
        ("lightning", "fabric"): "different",
    }
    assert report["verdict"] == "different"
    assert "pair raw vs fabric: DIFFERENT" in printed and "--- raw vs fabric ---" in printed
    first = next(p for p in report["pairs"] if p["verdict"] == "different")["first_divergence"]
    assert (first["quantity"], first["step"], first["rank"]) == ("param_digest", 2, 1)
