"""report.html without a browser: every trace string escaped, missing optional keys tolerated, the
first differing digits marked, the plot inlined, the CLI. Runs are hand-made through TraceRecorder
(one process, no launch): the page reads them exactly as it reads a real run's.

`make_report_dir` is shared with test_html_browser.py."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import pytest
import torch

from ddp_parity import TraceRecorder
from ddp_parity.compare.comparator import Criterion, compare_runs
from ddp_parity.compare.diagnosis import diagnose_failure
from ddp_parity.compare.findings import Report
from ddp_parity.compare.html import first_difference_windows, main, mark_difference, render_html, write_html
from ddp_parity.compare.report import plot_loss_curves, timing_summary, write_report

STEPS = 6
DIVERGES_AT = 3  # the first step whose loss differs in a divergent pair
# what a user's file might hold: each must reach the page as text, never as markup
SCRIPT = "<script>document.title='PWNED';window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=2">'


def make_run(run_dir: Path, side: str, config: dict, loss_offset: float = 0.0, weight: float = 1.0) -> Path:
    """One rank's run through the public recorder: STEPS steps; from DIVERGES_AT on the loss is shifted
    by `loss_offset` (a few ulps: a numerics-style divergence)."""
    recorder = TraceRecorder(run_dir, side=side, config=config)
    recorder.start()
    for step in range(1, STEPS + 1):
        loss = torch.tensor(2.5 / step, dtype=torch.float32)
        if step >= DIVERGES_AT:
            loss = loss + loss_offset
        recorder.record(
            step,
            loss,
            [step * 4 + k for k in range(4)],
            epoch=0,
            lr=0.001,
            grad_norm=torch.tensor(0.5 + step / 100),
            param_digest=torch.tensor(
                [step + (loss_offset if step >= DIVERGES_AT else 0.0), -1.0], dtype=torch.float64
            ),
        )
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.fill_(weight)
        model.bias.fill_(0.25)
    recorder.finish(model)
    return run_dir


def make_report_dir(tmp: Path, divergent: bool, hostile: bool = False) -> tuple[Path, dict]:
    """Two runs, compared and diagnosed as the harness does, report.json + plot written; report.html not yet.
    `hostile`: config values, a side name, a module name and a warning carry markup."""
    config = {"seed_everything": 42, "model": {"hidden_dim": 8}}
    config_b = copy.deepcopy(config)
    side_b = "lightning"
    if hostile:
        config["run_name"], config_b["run_name"] = SCRIPT, IMG
        side_b = f"lightning</title>{SCRIPT}"
    run_a = make_run(tmp / "raw", "raw", config)
    run_b = make_run(
        tmp / "lightning", side_b, config_b, loss_offset=1e-6 if divergent else 0.0, weight=1.5 if divergent else 1.0
    )
    out = tmp / "report"
    comparison = compare_runs(run_a, run_b, Criterion())
    report = comparison.to_dict()
    report["timing"] = timing_summary(comparison.timing)
    report["logs"] = {"raw": str(tmp / "raw.log"), "lightning": str(tmp / "lightning.log")}
    report["plot"] = str(out / "loss_curves.png")
    report["diagnosis"] = diagnose_failure(run_a, run_b, report["criterion"]).to_json()
    if hostile:
        report["diagnosis"]["module"] = {
            "name": SCRIPT,
            "type": IMG,
            "phase": "forward",
            "step": 1,
            "rank": 0,
            "what": "output",
            "input_equal": True,
        }
        report["warnings"] = [{"kind": "<b>kind</b>", "message": SCRIPT}]
    write_report(out, Report.from_json(report))
    plot_loss_curves(out, comparison.curves)
    for side in ("raw", "lightning"):
        (tmp / f"{side}.log").write_text(f"{side} log\n")
    return out, json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module")
def divergent(tmp_path_factory):
    return make_report_dir(tmp_path_factory.mktemp("divergent"), divergent=True)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return make_report_dir(tmp_path_factory.mktemp("hostile"), divergent=True, hostile=True)


def test_every_string_from_users_files_is_escaped(hostile):
    out, report = hostile
    page = render_html(Report.from_json(report), out)
    assert "<script" not in page.lower(), "a <script> from a trace reached the page as markup"
    assert "<img src=x" not in page and "onerror=" not in page.replace("onerror=&quot;", "")
    assert "&lt;script&gt;document.title=&#x27;PWNED&#x27;" in page  # shown as text instead
    assert "&lt;img src=x onerror=&quot;window.__pwned=2&quot;&gt;" in page
    assert "&lt;b&gt;kind&lt;/b&gt;" in page
    assert page.count("<title>") == 1 and "lightning&lt;/title&gt;" in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_a_divergent_report_shows_verdict_diagnosis_and_the_differing_digits(divergent):
    out, report = divergent
    page = render_html(Report.from_json(report), out)
    assert re.search(r'id="verdict"[^>]*>verdict: DIFFERENT', page)
    # the loss alone was recorded: no single cause can be named, and the page says so
    assert report["diagnosis"]["category"] == "undetermined"
    assert f"diagnosis: undetermined at step {DIVERGES_AT} rank 0" in page
    assert "data:image/png;base64," in page
    # both values of the first differing loss, side by side, the tail after the common digits marked
    loss_a, loss_b = (
        report["per_step"]["loss"]["first_divergence"]["a"],
        report["per_step"]["loss"]["first_divergence"]["b"],
    )
    marked_a, marked_b = mark_difference(repr(loss_a), repr(loss_b))
    assert marked_a in page and marked_b in page and "<mark>" in marked_a
    # the window starts STEPS_AROUND steps before the first difference
    assert "<tr><td>1</td><td>loss</td>" in page and f'<tr class="diff"><td>{DIVERGES_AT}</td><td>loss</td>' in page


@pytest.mark.parametrize(
    "criterion, a, b",
    [
        (Criterion(), {"grad_norm": 0.0}, {"grad_norm": -0.0}),  # a signed zero differs bitwise
        (Criterion(rtol=1e-6), {"lr": math.nan}, {"lr": math.nan, "loss": 9.0}),  # NaN on both sides is equal
    ],
)
def test_the_page_marks_a_step_differing_exactly_where_the_comparator_does(tmp_path, criterion, a, b):
    from test_diagnosis import make_records, pair

    records_a, records_b = make_records(), make_records()
    records_a[0][1].update(a)
    records_b[0][1].update(b)
    run_a, run_b = pair(tmp_path, records_a=records_a, records_b=records_b)
    first = compare_runs(run_a, run_b, criterion).walk.earliest
    rows = dict(first_difference_windows(run_a, run_b, criterion.equal))[0]
    assert [(step, field) for step, field, _, _, equal in rows if not equal] == [(2, first["quantity"])]


def test_mark_difference_marks_what_follows_the_common_prefix():
    assert mark_difference("2.31456971", "2.31456947") == ("2.314569<mark>71</mark>", "2.314569<mark>47</mark>")
    assert mark_difference("1.0", "1.0") == ("1.0", "1.0")
    assert mark_difference("<a", "<b") == ("&lt;<mark>a</mark>", "&lt;<mark>b</mark>")


@pytest.mark.parametrize(
    "report",
    [
        {},
        {"verdict": "failed", "failure": {"summary": "raw: rank 1 exited 1", "side": "raw", "rank": 1}},
        {"verdict": "failed", "failure": {}, "logs": {"raw": "/nonexistent/raw.log"}, "runs": {"a": "/x", "b": "/y"}},
        {"verdict": "different", "runs": {"a": "/nonexistent/a", "b": "/nonexistent/b"}, "per_step": {}},
        {"verdict": "equivalent", "diagnosis": {"category": "equivalent", "module": None}, "warnings": [], "pairs": []},
        {"verdict": "different", "diagnosis": {"evidence": "not a dict"}, "warnings": ["plain"], "pairs": [{"a": 1}]},
    ],
)
def test_missing_optional_keys_leave_their_section_out(report, tmp_path):
    page = render_html(Report.from_json(report), tmp_path)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "verdict:" in page


def test_warnings_pairs_and_module_are_shown_when_present(divergent, tmp_path):
    out, report = divergent
    report = copy.deepcopy(report)
    report["diagnosis"]["module"] = {
        "name": "encoder.layers.0.dropout",
        "type": "Dropout",
        "phase": "forward",
        "step": 1,
        "rank": 0,
        "what": "output",
        "input_equal": True,
    }
    report["modules"] = [
        {"name": "encoder.layers.0.dropout", "phase": "forward", "input": "equal", "output": "differs"}
    ]
    report["warnings"] = [{"kind": "replicas", "message": "replicas differ on lightning"}]
    report["pairs"] = [{"a": "raw", "b": "fabric", "verdict": "equivalent", "diagnosis": {"category": "equivalent"}}]
    page = render_html(Report.from_json(report), out)
    assert "forward of encoder.layers.0.dropout (Dropout) at step 1 rank 0: inputs equal, output differs" in page
    assert 'id="modules"' in page and "replicas differ on lightning" in page and 'id="pairs"' in page


def test_the_plot_is_re_rendered_from_the_traces_when_its_file_is_gone(divergent, tmp_path):
    out, report = divergent
    page = render_html(Report.from_json({**report, "plot": str(tmp_path / "gone.png")}), tmp_path)
    assert "data:image/png;base64," in page


def test_cli_renders_from_report_json_and_refuses_a_folder_without_one(divergent, tmp_path, capsys):
    out, report = divergent
    assert main([str(out)]) == 0
    assert (out / "report.html").is_file() and str(out / "report.html") in capsys.readouterr().out
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "REPORT_DIR" in err[0] and "report.json" in err[0]
    assert not (tmp_path / "report.html").exists()


def test_cli_refuses_a_criterion_no_comparison_could_have_used_in_one_line(divergent, tmp_path, capsys):
    out, report = divergent
    (tmp_path / "report.json").write_text(json.dumps({**report, "criterion": {"rtol": -1e-3, "atol": 0}}))
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "`criterion`" in err[0] and "rtol" in err[0], err
    assert not (tmp_path / "report.html").exists()


def test_write_html_writes_beside_report_json(divergent):
    out, report = divergent
    path = write_html(out, Report.from_json(report))
    assert path == out / "report.html" and "verdict: DIFFERENT" in path.read_text()
