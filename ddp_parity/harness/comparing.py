"""Every call the harness makes into the comparison and diagnosis lives here, and nowhere else."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

from ddp_parity.compare.comparator import Criterion, compare_runs, compare_to_reference
from ddp_parity.compare.diagnosis import REPLAYED_CATEGORIES, diagnose_failure, format_diagnosis
from ddp_parity.compare.findings import Report
from ddp_parity.compare.html import HTML_FILE, write_html
from ddp_parity.compare.modules import format_module_finding
from ddp_parity.compare.noise import Controls
from ddp_parity.compare.pipeline import build_report, verdict_under_noise
from ddp_parity.compare.report import PLOT_FILE, REPORT_FILE, format_summary, plot_loss_curves, write_report
from ddp_parity.compare.update_replay import replay_sentence
from ddp_parity.harness.exits import EXIT_DIFFERENT, EXIT_EQUIVALENT, UsageError
from ddp_parity.harness.failure import failure_report
from ddp_parity.harness.launch import Outcome
from ddp_parity.trace_files import TraceFormatError, read_meta

# the tolerance of --reference unless --rtol/--atol say otherwise: float32 carries about 1.2e-7
# relative; measured on the default run, losses differ by at most 1 ulp (2.4e-7 abs, 1.2e-7 rel,
# world 4) and parameters by 3e-8 abs after 48 steps; world 2 is bitwise equal.
REFERENCE_TOLERANCE = (1e-6, 1e-6)


def describe_criterion(rtol: float, atol: float):
    return Criterion(rtol, atol).describe()


def build_key_map(strip_prefix: list[str], key_map_file: str | None):
    """The parameter-name mapping from --strip-prefix and --key-map (None: the default pairing).
    Reads the file now, so that a bad one is refused before anything is launched."""
    if not strip_prefix and not key_map_file:
        return None
    renames = {}
    if key_map_file:
        try:
            renames = json.loads(Path(key_map_file).read_text())
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(
                f"--key-map {key_map_file}: cannot read it ({getattr(err, 'strerror', None) or err})"
            ) from None
        except json.JSONDecodeError as err:
            raise UsageError(f"--key-map {key_map_file}: not valid JSON ({err.msg} at line {err.lineno})") from None
        if not isinstance(renames, dict) or not all(isinstance(v, str) for v in renames.values()):
            raise UsageError(f'--key-map {key_map_file}: expected a JSON object of name -> name, e.g. {{"a.w": "b.w"}}')
    prefixes = tuple(strip_prefix) + ("module.",)

    def key_map(key: str) -> str:
        for prefix in prefixes:
            key = key.removeprefix(prefix)
        return renames.get(key, key)

    return key_map


def compare_pair(
    run_a: Path,
    run_b: Path,
    labels,
    rtol: float,
    atol: float,
    key_map=None,
    ignore_config=(),
    noise: Controls | None = None,
) -> Report:
    """The full comparison of two runs with its diagnosis and warnings, the loss curves with it.
    `labels` None: the runs are named by their own side names (or folders). `noise`: (the controls'
    measured once: compare.noise.Controls) to judge the pair against."""
    comparison = compare_runs(run_a, run_b, Criterion(rtol, atol), key_map=key_map)
    judgement = noise.judge(run_a, run_b) if noise is not None else None
    return build_report(comparison, ignore_config=ignore_config, labels=labels, noise=judgement)


def pair_entry(a: str, b: str, report: Report) -> dict:
    """One pair of report.json's `pairs`: who, the verdict, the per-quantity figures and the diagnosis."""
    figures = report.figures
    return {
        "a": a,
        "b": b,
        "verdict": report.verdict,
        "first_divergence": report.first_divergence,
        "per_step": figures.get("per_step"),
        "losses": figures.get("losses"),
        "validation": figures.get("validation"),
        "params": {k: v for k, v in (figures.get("params") or {}).items() if k != "tensors"},
        "timing": report.timing,
        "diagnosis": report.diagnosis.to_json() if report.diagnosis else None,
        "runs": report.runs,
    }


def compare_and_report(
    out: Path,
    runs: dict[str, Path],
    rtol: float,
    atol: float,
    key_map=None,
    extra=None,
    ignore_config=(),
    named_by_runs: bool = False,
    noise: Controls | None = None,
) -> Report:
    """Compare every pair of sides (in the order given), write report.json and the plot of the first
    pair (the top-level keys), add `pairs` when there are more than two sides, print the summary.
    Returns the report; its `verdict` is equivalent only if every pair is. `named_by_runs`: label the
    runs by what they recorded (--traces), not by the keys of `runs`. `noise`: the measured controls
    (`compare.noise.Controls`) under --tolerance noise."""
    names = list(runs)
    reports = {}
    for a, b in itertools.combinations(names, 2):
        labels = None if named_by_runs else (a, b)
        reports[(a, b)] = compare_pair(runs[a], runs[b], labels, rtol, atol, key_map, ignore_config, noise)
    first = (names[0], names[1])
    report = replace(reports[first], sections={**reports[first].sections, **(extra or {})})
    report.sections["plot"] = str(out / PLOT_FILE)
    if len(names) > 2:
        report.sections["pairs"] = [pair_entry(a, b, r) for (a, b), r in reports.items()]
        report.sections["sides"] = names
        differing = [f"{a} vs {b}" for (a, b), r in reports.items() if not r.passes]
        report.sections["differing_pairs"] = differing  # the top-level figures are the first pair's
        if differing:
            report.verdict = "different"
    # every file written before the verdict is printed: a verdict is never followed by a failure to
    # write (a full disk fails the command with no verdict said, exit 4)
    write_report(out, report)
    plot_loss_curves(out, report.curves, labels=report.labels)
    write_html(out, report)  # after the plot, which it inlines
    print_comparison(report, reports)
    print(f"report: {out / REPORT_FILE}  {out / HTML_FILE}  plot: {out / PLOT_FILE}")
    return report


def print_comparison(report: Report, reports: dict[tuple[str, str], Report]) -> None:
    """Two sides: the table and the diagnosis. More: one line per pair, then the full table of the
    first pair that differs (or of the first pair when all agree)."""
    if len(reports) == 1:
        print(format_summary(report))
        print(format_diagnosis(report.diagnosis))
        return
    for (a, b), r in reports.items():
        first = r.first_divergence
        where = f"; first divergence: {first.get('quantity')} at step {first.get('step')}" if first else ""
        print(f"pair {a} vs {b}: {r.verdict.upper()}{where}")
    shown = next((pair for pair, r in reports.items() if not r.passes), next(iter(reports)))
    print(f"--- {shown[0]} vs {shown[1]} ---")
    print(format_summary(reports[shown]))
    print(format_diagnosis(reports[shown].diagnosis))


def add_replay(out: Path, report: Report, replay: dict) -> None:
    """The replay's finding joins the report (written again) and the summary."""
    report.sections["replay"] = replay
    if replay.get("module"):
        report.diagnosis.module = replay["module"]
    if replay.get("update") and report.diagnosis.category in REPLAYED_CATEGORIES:  # the update's proof
        report.diagnosis.evidence["replay"] = replay["update"]
        report.diagnosis.explanation += " " + replay_sentence(replay["update"], tuple(report.labels))
    try:
        write_report(out, report)
        write_html(out, report)
    except OSError as err:  # the verdict is out: a failure to add to the files is said, never an exit
        print(f"warning: the replay's finding is not in the report files ({err.filename}: {err.strerror})")
    if replay.get("failed"):
        print(f"replay of step {replay['step']} failed: {'; '.join(replay['failed'])}")
    else:
        print(f"  {format_module_finding(replay.get('module'))} (replayed step {replay['step']})")


def exit_code(report: Report) -> int:
    return EXIT_EQUIVALENT if report.passes else EXIT_DIFFERENT


def failed_report(
    failed: Outcome, outcomes: list[Outcome], runs: dict[str, Path], criterion, labels=None, **extra
) -> Report:
    """The report of a launch that crashed, hung or timed out, whoever launched it (the harness,
    assert_parity): the root failure, and the diagnosis of what the first two runs recorded; a stall
    is the first divergence, at the step and rank the diagnosis names. `extra`: logs, commands, world."""
    a, b = list(runs.values())[:2]
    if finished_before_failing(failed, runs):
        return teardown_crash_report(failed, outcomes, runs, criterion, labels, **extra)
    stall = {**failed.stall, "side": failed.side} if failed.stall else None
    found = diagnose_failure(a, b, criterion, stall=stall, labels=labels)
    sides = found.evidence.get("sides") or {}
    return Report(
        "failed",
        criterion,
        labels=(sides.get("a", "a"), sides.get("b", "b")),
        runs={"a": str(a), "b": str(b)},
        first_divergence={"quantity": "stall", "step": found.step, "rank": found.rank, "side": failed.side}
        if stall
        else None,
        diagnosis=found,
        failure=failure_report(failed),
        sections={"seconds": sum(o.seconds for o in outcomes), **extra},
    )


def finished_before_failing(failed: Outcome, runs: dict[str, Path]) -> bool:
    """The failed side had finished: meta.json says `finished: true`, written by rank 0 after every
    rank's last collective (finish), so every rank trained to the end before one failed."""
    run = runs.get(failed.side)
    if run is None or failed.stall or failed.timed_out:
        return False
    try:
        return read_meta(run).get("finished") is True
    except (TraceFormatError, OSError):
        return False


def teardown_crash_report(
    failed: Outcome, outcomes: list[Outcome], runs: dict[str, Path], criterion, labels=None, **extra
) -> Report:
    """A side that finished, then exited abnormally (an abort in teardown): a failure of the process,
    never diagnosed as a difference between the runs (the sides differ in what the user asked to
    compare, and a setup check would name it as the cause)."""
    failure = failure_report(failed)
    failure["after_finish"] = True
    failure["summary"] += (
        " after the run finished (meta.json finished: true): the process failed in its teardown, "
        "not a difference between the runs; compare them with --traces"
    )
    names = list(runs)[:2]
    return Report(
        "failed",
        criterion,
        labels=tuple(labels) if labels else (names[0], names[-1]),
        runs={"a": str(runs[names[0]]), "b": str(runs[names[-1]])},
        failure=failure,
        sections={"seconds": sum(o.seconds for o in outcomes), **extra},
    )


def unreadable_report(
    err: Exception, outcomes: list[Outcome], runs: dict[str, Path], criterion, hint: str, **extra
) -> Report:
    """The report of commands that all exited 0 where a trace cannot be read: the run it names."""
    side = next((side for side, run in runs.items() if str(run) in str(err)), next(iter(runs)))
    failure = {
        "side": side,
        "rank": None,
        "summary": f"{side}: exit code 0, but its trace cannot be read",
        "error_lines": [f"{err}", hint],
    }
    names = list(runs)[:2]
    return Report(
        "failed",
        criterion,
        labels=(names[0], names[-1]),
        runs={side: str(run) for side, run in runs.items()},
        failure=failure,
        sections={"seconds": sum(o.seconds for o in outcomes), **extra},
    )


def write_failure(out: Path, report: Report) -> Report:
    """A failed launch's report written (report.json, report.html) and printed."""
    write_report(out, report)
    write_html(out, report)
    print(format_summary(report))
    if report.diagnosis is not None:
        print(format_diagnosis(report.diagnosis))
    return report


def compare_brief(run_a: Path, run_b: Path, rtol: float, atol: float, noise: Controls | None = None) -> dict:
    """Verdict, first divergence, losses and parameter figures of two runs (the fault mode's pairs);
    under --tolerance noise the verdict against the controls' noise (`compare.noise.Controls`)."""
    comparison = compare_runs(run_a, run_b, Criterion(rtol, atol))
    result = comparison.to_dict()
    brief = {
        "verdict": result["verdict"],
        "first_divergence": result["first_divergence"],
        "losses": result["losses"],
        "params": {k: v for k, v in result["params"].items() if k != "tensors"},
    }
    if noise is not None:
        brief["noise"] = noise.judge(run_a, run_b)
        brief["noise"].pop("curves")
        brief["verdict"] = verdict_under_noise(brief["verdict"], comparison, brief["noise"])
    return brief


def compare_against_reference(
    run: Path, reference: Path, rtol: float, atol: float, noise: Controls | None = None
) -> dict:
    """One side against the single-process reference run, within the reference tolerance, or under
    --tolerance noise bitwise and then against the noise the controls measured (`compare.noise.Controls`)."""
    comparison = compare_to_reference(run, reference, Criterion(rtol, atol))
    result = comparison.to_dict()
    entry = {key: result[key] for key in ("verdict", "first_divergence", "per_step", "validation", "problems")}
    entry["params"] = {k: v for k, v in result["params"].items() if k != "tensors"}
    if noise is not None:
        entry["noise"] = noise.judge(run, reference, merge_a=True)
        entry["noise"].pop("curves")  # the pairs' plots are the report's; a reference entry stays a summary
        entry["verdict"] = verdict_under_noise(entry["verdict"], comparison, entry["noise"])
    return entry
