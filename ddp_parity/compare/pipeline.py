"""Two runs compared end to end: the comparison (comparator.py), its diagnosis (diagnosis.py) and
the report assembled from them, in the one place it is assembled. The renderers (report.py's terminal
text and files, html.py) read what this builds; nothing below imports this."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ddp_parity.compare.causes.hooked import collectives_section
from ddp_parity.compare.comparator import Comparison, Criterion, compare_runs, run_labels
from ddp_parity.compare.copies import copy_differences
from ddp_parity.compare.diagnosis import diagnose_comparison, diagnosis_under_noise, find_warnings
from ddp_parity.compare.evaluations import (
    evaluation_differences,
    evaluation_sampler_warnings,
    evaluation_summary,
    unseen_warnings,
)
from ddp_parity.compare.findings import FIGURE_KEYS, Report
from ddp_parity.compare.given_controls import checked_controls
from ddp_parity.compare.noise import FACTOR
from ddp_parity.compare.report import strict_json, timing_summary
from ddp_parity.compare.walk import EXACT_UNDER_NOISE
from ddp_parity.trace_files import VALIDATION_FILE


def compare_traces(
    run_a,
    run_b,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    key_map: Callable[[str], str] | None = None,
    ignore_config=(),
    labels=None,
    controls=(),
    noise_factor: float = FACTOR,
) -> dict:
    """The complete report of two run directories (what report.json holds), nothing written.
    `controls`: runs of run_a's side again under a change of rounding alone, to judge the pair
    against the noise they measure (compare/noise.py). Raises TraceFormatError for a run that
    cannot be read, ValueError for a bad tolerance or a control that cannot measure run_a's noise
    (one of the pair, a repeat, another setup or world, short of run_a's steps, far from it at the
    first step: compare/given_controls.py)."""
    return strict_json(
        compare_to_report(
            run_a, run_b, Criterion(rtol, atol), key_map, ignore_config, labels, controls, noise_factor
        ).to_json()
    )


def compare_to_report(
    run_a, run_b, criterion: Criterion, key_map=None, ignore_config=(), labels=None, controls=(), noise_factor=FACTOR
) -> Report:
    """compare_traces's Report (the renderers' input), the loss curves with it."""
    comparison = compare_runs(run_a, run_b, criterion, key_map=key_map)
    noise = None
    if controls:  # each checked before it is used, as on the command line: a ControlError (a ValueError)
        noise = checked_controls(run_a, run_b, list(controls), noise_factor, ignore_config).judge(run_a, run_b)
    return build_report(comparison, ignore_config=ignore_config, labels=labels, noise=noise)


def build_report(comparison: Comparison, *, ignore_config=(), labels=None, noise=None) -> Report:
    """The one place a comparison's report is assembled: figures, labels, timing, diagnosis, warnings;
    with a noise judgement (compare/noise.py), the verdict and diagnosis it gives."""
    names = run_labels(comparison, labels)
    figures = strict_json(comparison.to_dict())
    report = Report(
        verdict=figures["verdict"],
        criterion=figures["criterion"],
        labels=names,
        runs=figures["runs"],
        first_divergence=figures["first_divergence"],
        diagnosis=diagnose_comparison(comparison, names, ignore_config=ignore_config),
        warnings=find_warnings(comparison, names),
        timing=timing_summary(comparison.timing, names),
        figures={key: figures[key] for key in FIGURE_KEYS},
        curves=comparison.curves,
    )
    report.warnings += nothing_compared_warnings(comparison)
    report.warnings += comparison.notes  # what the comparison left out (one side's tensors, narrowed digests)
    if any(isinstance(m, dict) and m.get("recorded_by") == "hooks" for m in comparison.metas.values()):
        collectives = collectives_section(comparison.run_a, comparison.run_b, names)
        if collectives is not None:
            report.sections["collectives"] = collectives
        evaluated = evaluation_summary(comparison.run_a, comparison.run_b)
        if evaluated is not None:
            report.sections["evaluations"] = evaluated
        report.warnings += unseen_warnings(comparison.run_a, comparison.run_b, names)
        report.warnings += evaluation_sampler_warnings(comparison.run_a, comparison.run_b, names)
    if report.verdict == "equivalent":  # the training equal: an evaluation that differs is the program's doing
        report.warnings += evaluation_differences(comparison.run_a, comparison.run_b, names)
        report.warnings += copy_differences(comparison.run_a, comparison.run_b, names)
    if noise is not None:
        judge_against_noise(report, comparison, noise, names, ignore_config)
    if report.verdict == "equivalent" and comparison.measured_differ:
        report.warnings.append(
            {
                "kind": "measured_differs",
                "message": f"{report.diagnosis.headline} The training is the same; what differs is measured "
                f"({', '.join(comparison.measured_differ)}): see the diagnosis's notes. Fix: {report.diagnosis.advice}",
            }
        )
    setup = report.diagnosis.setup_differs
    if setup is not None:
        report.warnings.append(
            {
                "kind": "setup_differs",
                "message": f"{setup.explanation} The numbers were {closeness(report)} on this run; the "
                f"difference can still change a larger model or another machine. Fix: {setup.advice}",
            }
        )
    return report


# a kind of item the verdict reads, and what having none of it means (a verdict never rests on zero items
# of a kind unsaid: with no step at all the comparator says so as a problem, and it is never equivalent).
# Validation is optional to record: where neither run recorded any, the summary's table says so; where
# either did and not one figure pairs (other steps, other metric names), it is warned of.
NOTHING_COMPARED = {
    "steps": "no optimizer step was compared (neither run recorded one on any rank): the verdict rests on no "
    "training step; record each optimizer step (TraceRecorder.record) or check that the runs trained",
    "final_params": "no final tensor was compared (no parameter name pairs the two final.safetensors, or one "
    "is missing): the final parameters are unchecked; --strip-prefix / --key-map pair renamed ones",
    "validation": "no validation figure was compared (validation.jsonl holds records, but no metric pairs by "
    "step and name with the other run's): the validation is unchecked",
}


def nothing_compared_warnings(comparison: Comparison) -> list[dict]:
    """A warning for each kind of item of which not one was compared: steps, final tensors, and
    validation figures where a run recorded some."""
    counts = {
        "steps": sum(stats.compared for stats in comparison.quantities.values()),
        "final_params": comparison.params.compared,
    }
    if any(recorded_validation(run) for run in (comparison.run_a, comparison.run_b)):
        counts["validation"] = comparison.validation.compared
    return [
        {"kind": "nothing_compared", "items": kind, "message": NOTHING_COMPARED[kind]}
        for kind, count in counts.items()
        if count == 0
    ]


def recorded_validation(run) -> bool:
    """The run's validation.jsonl holds a record (its size; it was read whole by the comparison)."""
    try:
        return (Path(run) / VALIDATION_FILE).stat().st_size > 0
    except OSError:
        return False


def verdict_under_noise(verdict: str, comparison: Comparison, noise: dict) -> str:
    """equivalent_within_noise where the exact comparison found only float differences (the samples,
    batches, learning rates and structure equal) and every one stayed within the measured noise."""
    if verdict != "different" or not noise["within_noise"]:
        return verdict
    exact_only = comparison.all_problems or any(
        not comparison.quantities[q].all_equal for q in EXACT_UNDER_NOISE if q in comparison.quantities
    )
    return verdict if exact_only else "equivalent_within_noise"


def judge_against_noise(report: Report, comparison: Comparison, noise: dict, names, ignore_config=()) -> None:
    """The verdict (verdict_under_noise) and the diagnosis under the noise judgement. Beyond the noise
    the cause is the earlier of two events: the first difference in what no rounding moves (samples,
    batch contents, learning rate, structure: diagnosed on a walk without the float quantities) and
    the step the pair leaves the envelope (diagnosed without the thread and arithmetic facts, a
    rounding finding then giving way to the departure read in causal order)."""
    noise["control_labels"] = [Path(control).name for control in noise.get("controls") or []]
    report.noise = strict_json(noise)
    exact = report.verdict
    report.verdict = verdict_under_noise(exact, comparison, noise)
    if exact != "different":
        return
    step = (report.first_divergence or {}).get("step")
    runs = (comparison.run_a, comparison.run_b)
    if report.verdict == "equivalent_within_noise":
        setup = report.diagnosis
        report.diagnosis = diagnosis_under_noise(setup, noise, names, True, step, setup=setup, runs=runs)
        return
    view = compare_runs(comparison.run_a, comparison.run_b, Criterion(), exact_only=True)
    hard, departure = view.first_divergence, noise["departure"]
    hard_first = hard is not None and (departure is None or (hard.get("step") or 0) <= departure["step"])
    found = diagnose_comparison(
        view if hard_first else comparison, names, ignore_config=ignore_config, rounding_is_noise=True
    )
    report.diagnosis = diagnosis_under_noise(found, noise, names, False, step, hard=hard_first, runs=runs)


def closeness(report: Report) -> str:
    return "equal within the measured noise" if report.verdict == "equivalent_within_noise" else "bitwise equal"
