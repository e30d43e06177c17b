"""The one pass and the one rule for equality, on small hand-made run directories."""

from __future__ import annotations

import json
import math
import struct

import pytest
import torch
from test_comparator import LOSSES, PARAMS, make_run

from ddp_parity import compare_traces, trace_files
from ddp_parity.compare.walk import Criterion, identical
from ddp_parity.trace import TraceFormatError


def test_identical_means_bitwise():
    assert identical(1.5, 1.5) and identical(math.nan, math.nan) and identical([0.0, 1.0], [0.0, 1.0])
    assert not identical(0.0, -0.0) and not identical(1.0, math.nextafter(1.0, 2.0))
    assert Criterion(atol=1e-9).equal(0.0, -0.0)  # a tolerance, when given, admits it
    assert not Criterion().equal(0.0, -0.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, "1e-6"])
def test_a_tolerance_that_is_not_a_finite_non_negative_number_is_refused(bad):
    with pytest.raises(ValueError, match="rtol"):
        Criterion(rtol=bad)


def test_signed_zero_is_a_difference_named_as_such(tmp_path):
    zeros = {0: [0.0, 1.5, 1.25], 1: LOSSES[1]}
    negative = {0: [-0.0, 1.5, 1.25], 1: LOSSES[1]}
    report = compare_traces(make_run(tmp_path / "a", zeros, PARAMS), make_run(tmp_path / "b", negative, PARAMS))
    assert report["verdict"] == "different"
    first = report["first_divergence"]
    assert (first["quantity"], first["step"], first["rank"], first["note"]) == ("loss", 1, 0, "signed zero")


def test_bit_identical_nan_parameters_are_equal_and_nan_payloads_are_compared(tmp_path):
    nan = {"w": torch.tensor([1.0, math.nan, 3.0])}
    same = compare_traces(make_run(tmp_path / "a", LOSSES, nan), make_run(tmp_path / "b", LOSSES, nan))
    assert same["verdict"] == "equivalent" and same["params"]["equal"] == 1
    other_payload = torch.tensor([1.0, 0.0, 3.0])
    other_payload.view(torch.int32)[1] = struct.unpack("<i", struct.pack("<I", 0x7FC00001))[0]
    assert math.isnan(other_payload[1].item())
    differs = compare_traces(
        make_run(tmp_path / "c", LOSSES, nan), make_run(tmp_path / "d", LOSSES, {"w": other_payload})
    )
    assert differs["verdict"] == "different"
    assert differs["params"]["first_divergence"]["element"] == 1
    signed = compare_traces(
        make_run(tmp_path / "e", LOSSES, {"w": torch.tensor([0.0])}),
        make_run(tmp_path / "f", LOSSES, {"w": torch.tensor([-0.0])}),
    )
    assert signed["verdict"] == "different" and signed["params"]["first_divergence"]["note"] == "signed zero"


def test_the_report_is_strict_json_with_non_finite_numbers_as_strings(tmp_path):
    nan = {0: [math.inf, 1.5, 1.25], 1: LOSSES[1]}
    report = compare_traces(make_run(tmp_path / "a", nan, PARAMS), make_run(tmp_path / "b", LOSSES, PARAMS))
    text = json.dumps(report, allow_nan=False)  # raises on a bare NaN/Infinity
    assert json.loads(text)["first_divergence"]["a"] == "Infinity"
    kinds = {w["kind"] for w in report["warnings"]}
    assert kinds - {"config_unrecorded"} == {"non_finite"}  # make_run records config {}: that warning too


def test_an_equivalent_pair_reads_each_trace_once(tmp_path, monkeypatch):
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", LOSSES, {k: v.clone() for k, v in PARAMS.items()})
    opened = []
    real = trace_files.iter_records  # every trace is opened where a run's files are read (read_run)

    def counting(run, rank, *args, **kwargs):
        opened.append((str(run), rank))
        return real(run, rank, *args, **kwargs)

    monkeypatch.setattr(trace_files, "iter_records", counting)
    report = compare_traces(a, b)
    assert report["verdict"] == "equivalent" and report["diagnosis"]["category"] == "equivalent"
    assert sorted(opened) == sorted({(str(a), 0), (str(a), 1), (str(b), 0), (str(b), 1)})


@pytest.mark.parametrize(
    "meta, message",
    [
        ([1, 2], "expected a JSON object, got a list"),
        (
            {"format_version": 1, "side": "x", "world_size": 2, "config": "lr=1", "ranks": []},
            "`config`: must be an object",
        ),
        ({"format_version": 1, "side": "x", "world_size": 2, "config": {}, "ranks": 2}, "`ranks`: must be a list"),
        ({"format_version": 1, "side": "x", "world_size": 2, "config": {}, "ranks": ["r"]}, "`ranks[0]`: must be"),
        ({"format_version": 1, "side": 3, "world_size": 2, "config": {}, "ranks": []}, "`side`: must be a string"),
    ],
)
def test_a_malformed_meta_json_names_the_file_and_the_key(tmp_path, meta, message):
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", LOSSES, PARAMS)
    (b / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(TraceFormatError, match="meta.json") as err:
        compare_traces(a, b)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "key, value", [("loss", "low"), ("step", "3"), ("grad_norm", [1]), ("param_digest", 2.0), ("indices", 7)]
)
def test_a_step_record_of_the_wrong_type_names_the_file_and_the_key(tmp_path, key, value):
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", LOSSES, PARAMS)
    trace = b / "trace" / "rank1.jsonl"
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    records[1][key] = value
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(TraceFormatError, match=rf"malformed trace: .*rank1.jsonl, line 2, `{key}`:"):
        compare_traces(a, b)


def test_missing_metadata_is_never_equivalent(tmp_path):
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", LOSSES, PARAMS)
    for run in (a, b):
        (run / "meta.json").write_text(json.dumps({"format_version": 1}))
    report = compare_traces(a, b)
    assert report["verdict"] == "different"
    assert report["diagnosis"]["category"] == "metadata"
    assert "lacks side, world_size" in report["diagnosis"]["explanation"]


def test_the_command_line_refuses_a_malformed_trace_in_one_line(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", LOSSES, PARAMS)
    (b / "meta.json").write_text("[]")
    result = subprocess.run(
        [sys.executable, "compare/run.py", "--traces", str(a), str(b), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=120,
    )
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "meta.json" in result.stderr and "a list" in result.stderr
    assert not (tmp_path / "out" / "report.json").exists()


def test_labels_name_the_runs_by_side_or_directory(tmp_path):
    a = make_run(tmp_path / "mine", LOSSES, PARAMS)
    b = make_run(tmp_path / "theirs", LOSSES, PARAMS)
    report = compare_traces(a, b)
    assert report["labels"] == {"a": "mine", "b": "theirs"}  # sides (= directory names in make_run)
    assert set(report["diagnosis"]["evidence"]["sides"].values()) == {"mine", "theirs"}
    assert compare_traces(a, b, labels=("x", "y"))["labels"] == {"a": "x", "b": "y"}
