"""What a person and a CI read: the terminal table, report.json and the loss-curve plot, each
rendered from a `findings.Report`."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

from ddp_parity.compare.findings import Report, evaluations_not_compared
from ddp_parity.trace_files import write_bytes_atomic

REPORT_FILE = "report.json"
PLOT_FILE = "loss_curves.png"
HTML_FILE = "report.html"


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "0" if value == 0 else f"{value:.{digits}g}"
    return str(value)


def fmt_value(value) -> str:
    """Diverging values in full: 9 significant digits tell any two float32 numbers apart; index
    lists by their first few entries."""
    if isinstance(value, list):
        shown = [v for v in value[:4] if v != "..."]
        return "[" + ", ".join(map(str, shown)) + (", ...]" if len(value) > len(shown) else "]")
    return fmt(value, 9)


def describe_divergence(first: dict | None) -> str:
    if not first:
        return "-"
    if "step" in first:
        where = (
            f"step {first['step']} rank {first.get('rank')}"
            if first.get("rank") is not None
            else f"step {first['step']}"
        )
        if "metric" in first:
            where = f"epoch {first.get('epoch')} {first['metric']}"
        if isinstance(first.get("group"), int):  # an lr of another param group than the first (its own rate)
            where += f" param group {first['group']}"
        return f"{where}: {fmt_value(first.get('a'))} vs {fmt_value(first.get('b'))}"
    if "tensor" in first:
        return f"{first['tensor']}[{first['element']}]: {fmt_value(first['a'])} vs {fmt_value(first['b'])}"
    return first.get("message", str(first))


def table_rows(report: Report, order=()) -> list[list[str]]:
    """The summary table's rows: the per-step quantities (those in `order` first), validation, the
    final parameters. Raises KeyError or TypeError where the report has no figures (a failed run)."""
    per_step = report.figures["per_step"]
    rows = []
    for name in [k for k in order if k in per_step] + [k for k in per_step if k not in order]:
        label = "samples/step" if name == "samples" else "params/step" if name == "param_digest" else f"{name}/step"
        rows.append([label, per_step[name]])
    rows.append(["validation", report.figures["validation"]])
    if report.sections.get("evaluations"):  # the hooks' evaluations, by their outputs' digests
        rows.append(["evaluations", report.sections["evaluations"]])
    rows.append(["final params", report.figures["params"]])
    out = []
    for label, s in rows:
        out.append(
            [
                label,
                fmt(s["compared"]),
                fmt(s["equal"]),
                "-" if label.startswith(("samples", "batch", "evaluations")) else fmt(s["max_abs"]),
                "-" if label.startswith(("samples", "batch", "evaluations")) else fmt(s["max_rel"]),
                describe_divergence(s["first_divergence"]) if s["compared"] else _nothing_compared(label, report),
            ]
        )
    return out


def _nothing_compared(label: str, report: Report) -> str:
    if label == "validation" and report.sections.get("evaluations"):
        return "no figure recorded (the hooks' evaluations: the next row)"
    if label == "evaluations":
        return f"nothing compared ({evaluations_not_compared(report.sections['evaluations'], report.labels)})"
    return "nothing compared (none recorded)"


def render_table(header: list[str], rows: list[list[str]]) -> str:
    """The one plain-text table renderer: left-aligned columns, a dashed rule under the header."""
    rows = [header] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def format_table(report: Report) -> str:
    header = ["quantity", "compared", "equal", "max abs diff", "max rel diff", "first divergence"]
    return render_table(header, table_rows(report))


def format_summary(report: Report) -> str:
    """The terminal summary: verdict line, table, first divergence, timing, paths."""
    lines = []
    if report.failed:
        failure = report.failure
        lines.append(f"verdict: FAILED: {failure['summary']}")
        if failure.get("rank") is not None:
            lines.append(f"  failing side: {failure['side']}, rank {failure['rank']}")
        lines += ["  " + line for line in failure.get("error_lines", [])]
        lines.append(f"  logs: {', '.join(report.sections.get('logs', {}).values())}")
        return "\n".join(lines)
    lines.append(
        f"verdict: {report.verdict_word} ({report.criterion_text()}; {report.steps_compared} rank-steps compared)"
    )
    if report.noise:
        lines.append(noise_line(report.noise))
    for warning in report.warnings:
        lines.append(f"  WARNING {warning['kind']}: {warning['message']}")
    lines.append(format_table(report))
    for problem in report.figures.get("problems", []):
        lines.append(f"! {problem}")
    first = report.first_divergence
    if first:
        lines.append(f"first divergence: {first.get('quantity')} at {describe_divergence(first)}")
    if step_times := step_time_line(report):
        lines.append(step_times)
    lines.append(f"runs: {report.runs['a']}  {report.runs['b']}")
    return "\n".join(lines)


def noise_line(noise: dict) -> str:
    """Where the pair leaves the controls' envelope, or how close it came; what no control measured."""
    departure, worst = noise["departure"], noise["worst"]
    unjudged = noise.get("unjudged") or []
    aside = f"; not judged, no control recorded them: {', '.join(unjudged)}" if unjudged else ""
    for setup in noise.get("control_setups") or []:
        if setup.get("reproduces") is False:  # its envelope may swallow a bug: said with the figure
            aside += (
                f"; WARNING control {Path(setup['path']).name} is {setup['first_step_distance']:.3g} from its side at "
                f"the first step, the closest two runs {setup['spread']:.3g}: it does not reproduce its side"
            )
    if departure:
        return (
            f"  noise: leaves the envelope at step {departure['step']}: {departure['quantity']} "
            f"{departure['distance']:.3g} apart, {departure['ratio']:.3g}x the bound ({departure['bound']:.3g}){aside}"
        )
    if worst.get("quantity") is None:
        return f"  noise: the pair is bitwise equal{aside}"
    return (
        f"  noise: within the envelope at every step (closest: {worst['quantity']} at step {worst['step']}, "
        f"{worst['ratio']:.2g} of its bound){aside}"
    )


def step_time_line(report: Report) -> str | None:
    """The two runs' median step times under their labels (`timing_summary` keys them so), or None."""
    timing = report.timing or {}
    if timing.get("overhead_us") is None:
        return None
    a, b = report.labels
    if timing.get(f"{a}_median_ms") is None or timing.get(f"{b}_median_ms") is None:
        return None  # a report whose labels were edited after its timing was keyed
    return (
        f"median step time: {a} {timing[f'{a}_median_ms']:.3f} ms, {b} {timing[f'{b}_median_ms']:.3f} ms "
        f"({b} overhead {timing['overhead_us']:+.0f} us/step, x{timing['ratio']:.2f}; information only)"
    )


def timing_summary(timing: dict, names=("raw", "lightning")) -> dict:
    """Median step times keyed by the runs' labels (`raw_median_ms`, `lightning_median_ms` for the twins)."""
    a, b = timing.get("a", {}).get("median_s"), timing.get("b", {}).get("median_s")
    if a is None or b is None:
        return {f"{names[0]}_median_ms": None, f"{names[1]}_median_ms": None, "overhead_us": None, "ratio": None}
    return {
        f"{names[0]}_median_ms": a * 1e3,
        f"{names[1]}_median_ms": b * 1e3,
        "overhead_us": (b - a) * 1e6,
        "ratio": b / a if a else None,
        "warmup_steps_excluded": 5,
    }


def strict_json(value):
    """Strict JSON: non-finite floats become the strings "NaN", "Infinity", "-Infinity"; tuples lists."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def write_report(out: Path, report: Report) -> Path:
    """report.json, strict JSON (no bare NaN/Infinity: compare_traces encodes them as strings),
    written to a temporary file and renamed so a crash never leaves half a report."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT_FILE
    text = json.dumps(strict_json(report.to_json()), indent=2, sort_keys=True, allow_nan=False, default=str) + "\n"
    write_bytes_atomic(path, text.encode())  # ASCII: json.dumps escapes every other character
    return path


def load_pyplot():
    """matplotlib's pyplot on the file-only Agg backend. Imported when first needed (about a second:
    the harness imports it in the background while the sides train, see harness/preload.py)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# a log axis spans at most this many decades above its floor: matplotlib overflows on a range of
# hundreds of decades (a bound of 1e250) and cannot place inf at all
LOG_DECADES = 30


def on_log_axis(values: list[float], floor: float) -> list[float]:
    """Values as a log axis can draw them: zeros on the floor, infinities and NaNs (a distance to a
    NaN) and anything past LOG_DECADES above the floor at that ceiling."""
    ceiling = floor * 10.0**LOG_DECADES
    return [min(v, ceiling) if v > 0 and not math.isnan(v) else (ceiling if math.isnan(v) else floor) for v in values]


def log_floor(values) -> float:
    """A tenth of the smallest positive finite value (1e-12 where there is none)."""
    positive = [v for v in values if 0 < v < math.inf]
    return min(positive) / 10 if positive else 1e-12


def plot_noise_png(noise: dict) -> bytes:
    """report.json's `noise` drawn: per quantity group, the pair's distance, the controls' envelope
    and the bound (factor x the larger of the envelope and the propagated distance) on a log scale,
    the step where the pair leaves it marked. Exact zeros sit on a floor line below the smallest value."""
    plt = load_pyplot()
    curves = noise["curves"]
    fig, axes = plt.subplots(len(curves), 1, figsize=(8, 2.2 * len(curves) + 0.6), sharex=True, squeeze=False)
    departure = noise.get("departure") or {}
    for ax, (group, curve) in zip(axes[:, 0], curves.items()):
        floor = log_floor(v for key in ("pair", "envelope", "bound") for v in curve[key])
        for key, style in (("pair", "-"), ("envelope", "--"), ("bound", ":")):
            ax.plot(curve["steps"], on_log_axis(curve[key], floor), style, label=key, linewidth=1.2)
        ax.set_yscale("log")
        ax.set_ylabel(group if group in ("loss", "grad_norm") else f"{group} (worst layer)", fontsize=9)
        if departure.get("step") is not None:
            ax.axvline(departure["step"], color="red", linewidth=0.8)
    axes[0, 0].legend(fontsize=8, loc="lower right")
    title = "relative distance per step: the pair against the controls' noise"
    if departure:
        title += f" (leaves it at step {departure['step']})"
    axes[0, 0].set_title(title, fontsize=10)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return buffer.getvalue()


def plot_loss_curves(out: Path, curves: dict, labels=("raw", "lightning")) -> Path:
    """Both loss curves overlaid; below, |a - b| per step on a log scale. Exact zeros cannot sit on
    a log axis, so they are drawn on a marked floor line and the panel says they are exactly zero."""
    plt = load_pyplot()
    steps_a, steps_b = curves.get("a", {}), curves.get("b", {})
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    top.plot(list(steps_a), list(steps_a.values()), label=labels[0], linewidth=2.5, alpha=0.6)
    top.plot(list(steps_b), list(steps_b.values()), label=labels[1], linewidth=1.0, linestyle="--")
    top.set_ylabel("loss (mean over ranks)")
    top.legend()
    top.set_title("per-step training loss")
    common = [s for s in steps_a if s in steps_b]
    diffs = [abs(steps_a[s] - steps_b[s]) for s in common]
    nonzero = [d for d in diffs if d > 0]
    floor = log_floor(nonzero)
    bottom.set_yscale("log")
    if common:
        bottom.plot(common, on_log_axis(diffs, floor), marker=".", linestyle="none", markersize=3)
    bottom.axhline(floor, color="gray", linewidth=0.8, linestyle=":")
    if not nonzero:
        bottom.set_ylim(floor / 10, floor * 1e3)
        bottom.set_yticks([floor], ["0 (exact)"])
        bottom.minorticks_off()
        bottom.text(
            0.5,
            0.6,
            f"all {len(common)} steps: difference exactly 0 (bitwise identical)",
            transform=bottom.transAxes,
            ha="center",
            fontsize=11,
        )
    else:
        bottom.text(
            0.01,
            0.9,
            f"{len(diffs) - len(nonzero)} of {len(diffs)} steps exactly 0 (drawn on the dotted floor)",
            transform=bottom.transAxes,
            fontsize=8,
        )
    bottom.set_ylabel(f"|{labels[0]} - {labels[1]}|")
    bottom.set_xlabel("optimizer step")
    fig.tight_layout()
    path = out / PLOT_FILE
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())
    return path
