"""Two runs compared end to end: the comparison (comparator.py), its diagnosis (diagnosis.py) and
the report assembled from them, in the one place it is assembled. The renderers (report.py's terminal
text and files, html.py) read what this builds; nothing below imports this."""

from __future__ import annotations

from collections.abc import Callable

from ddp_parity.compare.comparator import Comparison, Criterion, compare_runs, run_labels
from ddp_parity.compare.diagnosis import diagnose_comparison, find_warnings
from ddp_parity.compare.report import strict_json, timing_summary


def compare_traces(
    run_a,
    run_b,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    key_map: Callable[[str], str] | None = None,
    ignore_config=(),
    labels=None,
) -> dict:
    """The complete report of two run directories (what report.json holds), nothing written.
    Raises TraceFormatError for a run that cannot be read, ValueError for a bad tolerance."""
    comparison = compare_runs(run_a, run_b, Criterion(rtol, atol), key_map=key_map)
    return build_report(comparison, ignore_config=ignore_config, labels=labels)


class Report(dict):
    """report.json's content; `.curves` (step -> mean loss per side, for the plot) rides along
    without being written."""

    curves: dict = {}


def build_report(comparison: Comparison, *, ignore_config=(), labels=None, stall=None, extra=None) -> Report:
    """The one place the report is assembled: figures, labels, timing, diagnosis, warnings."""
    names = run_labels(comparison, labels)
    report = comparison.to_dict()
    report.update(extra or {})
    report["labels"] = {"a": names[0], "b": names[1]}
    report["timing"] = timing_summary(comparison.timing, names)
    report["diagnosis"] = diagnose_comparison(comparison, names, ignore_config=ignore_config, stall=stall)
    report["warnings"] = find_warnings(comparison, names)
    setup = report["diagnosis"].get("setup_differs")
    if setup is not None:
        report["warnings"].append(
            {
                "kind": "setup_differs",
                "message": f"{setup['explanation']} The numbers were bitwise equal on this run; the difference "
                f"can still change a larger model or another machine. Fix: {setup['advice']}",
            }
        )
    out = Report(strict_json(report))
    out.curves = comparison.curves
    return out
