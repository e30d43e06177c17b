"""report.html: the comparison as one page a person opens in a browser.

One self-contained file beside report.json: no network, no external assets (the loss-curve plot is
inlined as base64), no JavaScript. Order: the verdict, the diagnosis in words, the summary table
(the terminal table's rows), the loss curves, the first differing steps of each rank side by side
with the differing digits marked, the layer when one was localised, the configuration differences,
warnings, further pairs, and links to both runs' logs and directories.

Every string that comes from a trace or a report (run names, config values, error messages, module
names: users' files) goes through `html.escape`; the page also carries a Content-Security-Policy
that allows no script at all, as a second fence.

    python -m ddp_parity.compare.html REPORT_DIR     # (re)render REPORT_DIR/report.html from report.json
"""

from __future__ import annotations

import base64
import html
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from ddp_parity.compare.findings import Finding, Report, as_dict, step_and_rank
from ddp_parity.compare.report import (  # noqa: F401  (HTML_FILE: public here too)
    HTML_FILE,
    PLOT_FILE,
    REPORT_FILE,
    fmt,
    noise_line,
    plot_noise_png,
    step_time_line,
    table_rows,
)
from ddp_parity.compare.walk import Criterion
from ddp_parity.trace_files import TraceFormatError, iter_records, trace_ranks, write_bytes_atomic

# the per-step fields shown side by side, in causal order (what a step consumed, computed, applied)
STEP_FIELDS = ("indices", "indices_digest", "batch_digest", "loss", "grad_norm", "lr", "param_digest")
CAUSAL_ORDER = ("samples", "loss", "grad_norm", "lr", "param_digest")  # the summary table's row order
STEPS_AROUND = 2  # steps shown before and after each rank's first difference
MAX_RANKS_SHOWN = 8
SUMMARY_HEADER = ["quantity", "compared", "equal", "max abs diff", "max rel diff", "first divergence"]

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
.verdict { font-size: 1.4em; font-weight: bold; padding: 0.5em 0.8em; border-radius: 6px; }
.equivalent { background: #e3f5e1; color: #1b5e20; } .different { background: #fde8e8; color: #8e1c1c; }
.failed { background: #fff3cd; color: #7a4f01; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } tr.diff td { background: #fff6f6; }
td.num, .mono, pre { font-family: ui-monospace, monospace; }
mark { background: #ffb3b3; color: #600; } .note { color: #666; font-size: 0.9em; }
dt { font-weight: bold; margin-top: 0.4em; } dd { margin-left: 1.5em; }
.fix { background: #eef4ff; border-left: 4px solid #3b6fd8; padding: 0.5em 0.8em; }
img { max-width: 100%; border: 1px solid #ddd; }
pre { background: #f7f7f7; padding: 0.6em; overflow-x: auto; white-space: pre-wrap; }
"""
# no script, no fetch: only inline styles and data: images
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def esc(value) -> str:
    """Every string that reaches the page goes through here (or through `mark_difference`)."""
    return html.escape("-" if value is None else str(value), quote=True)


# ---------------------------------------------------------------------------------------------
# the entry points


def write_html(out_dir: str | os.PathLike, report: Report) -> Path:
    """Write `out_dir/report.html` for `report` and return its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / HTML_FILE
    # a path that is not UTF-8 (a folder named in another encoding) is shown escaped, never a failure
    write_bytes_atomic(path, render_html(report, out_dir).encode("utf-8", errors="backslashreplace"))
    return path


def write_html_beside(report_path: str | os.PathLike) -> Path:
    """report.html next to an existing report.json (what the CLI below does); returns the page's path."""
    report_path = Path(report_path)
    return write_html(report_path.parent, Report.from_json(json.loads(report_path.read_text())))


def render_html(report: Report, out_dir: str | os.PathLike | None = None) -> str:
    """The whole page as a string. Missing optional parts leave their section out."""
    out_dir = Path(out_dir) if out_dir is not None else Path(".")
    sides = {"a": report.labels[0], "b": report.labels[1]}
    parts = [
        verdict_section(report, sides),
        diagnosis_section(report.diagnosis),
        failure_section(report.failure),
        summary_section(report),
        plot_section(report, out_dir),
        noise_section(report.noise),
        first_steps_section(report, sides),
        module_section(report),
        config_section(report.diagnosis, sides),
        warnings_section(report.warnings),
        pairs_section(report.sections.get("pairs")),
        extra_sections(report),
        links_section(report, out_dir, sides),
    ]
    title = f"ddp-parity: {report.verdict_word} ({sides['a']} vs {sides['b']})"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(p for p in parts if p)
        + "\n</body>\n</html>\n"
    )


# ---------------------------------------------------------------------------------------------
# sections


def verdict_section(report: Report, sides: dict) -> str:
    verdict = report.verdict
    css = {"equivalent_within_noise": "equivalent"}.get(verdict, verdict)
    css = css if css in ("equivalent", "different", "failed") else "failed"
    detail = report.criterion_text(bitwise="exact (bitwise)")
    if report.steps_compared:
        detail += f"; {report.steps_compared} rank-steps compared"
    return (
        f"<h1>ddp-parity: {esc(sides['a'])} vs {esc(sides['b'])}</h1>\n"
        f'<p id="verdict" class="verdict {css}">verdict: {esc(report.verdict_word)} '
        f'<span class="note">({esc(detail)})</span></p>'
    )


def module_line(module: dict) -> str:
    """`forward of net.0 (Linear) at step 1 rank 0: inputs equal, output differs`."""
    text = f"{module.get('phase', '?')} of {module.get('name', '?')}"
    if module.get("type"):
        text += f" ({module['type']})"
    text += step_and_rank(module)
    if module.get("input_equal") is not None:
        text += ": inputs equal" if module["input_equal"] else ": inputs already differ"
    if module.get("what"):
        text += f", {module['what']} differs"
    return text


def diagnosis_section(diagnosis: Finding | None) -> str:
    if diagnosis is None:
        return ""
    out = ["<h2>Diagnosis</h2>", f'<p id="diagnosis-line"><b>diagnosis: {esc(diagnosis.line)}</b></p>']
    if diagnosis.module:
        out.append(f'<p id="diagnosis-layer">layer: <span class="mono">{esc(module_line(diagnosis.module))}</span></p>')
    if diagnosis.explanation:
        out.append(f'<p id="diagnosis-explanation">{esc(diagnosis.explanation)}</p>')
    if diagnosis.advice and diagnosis.category != "equivalent":
        out.append(f'<p id="diagnosis-fix" class="fix"><b>fix:</b> {esc(diagnosis.advice)}</p>')
    if diagnosis.evidence:
        shown = {k: v for k, v in diagnosis.evidence.items() if k not in ("sides", "values", "differences", "verdict")}
        if shown:
            rows = [[key, show_value(value)] for key, value in flatten(shown)]
            out.append("<details open><summary>evidence</summary>" + html_table(["fact", "value"], rows, "evidence"))
            out.append("</details>")
    return "\n".join(out)


def failure_section(failure) -> str:
    if not isinstance(failure, dict):
        return ""
    out = ["<h2>Failure</h2>", f"<p>{esc(failure.get('summary'))}</p>"]
    if failure.get("side") is not None:
        out.append(f"<p>failing side: {esc(failure.get('side'))}, rank {esc(failure.get('rank'))}</p>")
    lines = failure.get("error_lines") or []
    if lines:
        out.append("<pre>" + esc("\n".join(str(line) for line in lines)) + "</pre>")
    return "\n".join(out)


def summary_section(report: Report) -> str:
    """The terminal table's rows, per-step quantities in causal order (report.json sorts its keys)."""
    try:
        rows = table_rows(report, order=CAUSAL_ORDER)
    except (KeyError, TypeError, AttributeError):
        return ""  # a failed run has no per-step figures
    out = ["<h2>Summary</h2>", html_table(SUMMARY_HEADER, rows, table_id="summary")]
    for problem in report.figures.get("problems") or []:
        out.append(f'<p class="note">! {esc(problem)}</p>')
    if step_times := step_time_line(report):
        out.append(f'<p class="note">{esc(step_times)}</p>')
    return "\n".join(out)


def plot_section(report: Report, out_dir: Path) -> str:
    png = plot_bytes(report, out_dir)
    if png is None:
        return '<h2>Loss curves</h2>\n<p class="note">no loss-curve plot found</p>'
    data = base64.b64encode(png).decode("ascii")
    return (
        "<h2>Loss curves</h2>\n"
        f'<img id="loss-curves" alt="per-step training loss of both runs and |difference| per step" '
        f'src="data:image/png;base64,{data}">'
    )


def noise_section(noise) -> str:
    """--tolerance noise: the pair's distance against the controls' envelope, per quantity group."""
    if not isinstance(noise, dict) or not noise.get("curves"):
        return ""
    data = base64.b64encode(plot_noise_png(noise)).decode("ascii")
    controls = ", ".join(esc(Path(c).name) for c in noise.get("controls") or [])
    return (
        "<h2>Against measured noise</h2>\n"
        f'<p id="noise-line">{esc(noise_line(noise).strip())}</p>\n'
        f'<p class="note">controls: {controls}; factor {noise.get("factor")}</p>\n'
        f'<img id="noise-plot" alt="per-step relative distance of the pair, the controls\' envelope and the bound" '
        f'src="data:image/png;base64,{data}">'
    )


def plot_bytes(report: Report, out_dir: Path) -> bytes | None:
    """The plot the report names (or loss_curves.png beside it); re-rendered from the traces if gone."""
    for candidate in (report.sections.get("plot"), out_dir / PLOT_FILE):
        if candidate and Path(str(candidate)).is_file():
            return Path(str(candidate)).read_bytes()
    runs = report.runs
    if not runs.get("a") or not runs.get("b") or report.failed:
        return None
    try:
        from ddp_parity.compare.report import plot_loss_curves

        curves = {key: mean_losses(runs[key]) for key in ("a", "b")}
        with tempfile.TemporaryDirectory() as tmp:
            return plot_loss_curves(Path(tmp), curves).read_bytes()
    except (TraceFormatError, OSError, ValueError):
        return None


def mean_losses(run_dir) -> dict[int, float]:
    totals: dict[int, list[float]] = {}
    for rank in trace_ranks(run_dir):
        for record in iter_records(run_dir, rank):
            totals.setdefault(record["step"], []).append(record["loss"])
    return {step: sum(v) / len(v) for step, v in sorted(totals.items())}


# ---------------------------------------------------------------------------------------------
# the first differing steps, per rank


def first_steps_section(report: Report, sides: dict) -> str:
    """Per rank, a few steps around its first per-step difference, both values side by side."""
    if report.verdict != "different":
        return ""
    per_step = as_dict(report.figures.get("per_step"))
    if per_step and all((s or {}).get("first_divergence") is None for s in per_step.values()):
        return (
            '<h2>First differing steps</h2>\n<p class="note">every per-step value is equal; the difference '
            "is in validation or the final parameters (see the summary)</p>"
        )
    runs = report.runs
    equal = Criterion.from_description(report.criterion).equal  # the comparator's own rule
    try:
        windows = list(first_difference_windows(runs["a"], runs["b"], equal))
    except (KeyError, TypeError, TraceFormatError, OSError) as err:
        return f'<h2>First differing steps</h2>\n<p class="note">traces not readable: {esc(err)}</p>'
    out = ["<h2>First differing steps</h2>"]
    if not windows:
        out.append('<p class="note">no per-step difference found in the traces</p>')
    for rank, rows in windows[:MAX_RANKS_SHOWN]:
        out.append(f"<h3>rank {esc(rank)}</h3>")
        out.append(step_table(rows, sides, rank))
    if len(windows) > MAX_RANKS_SHOWN:
        out.append(f'<p class="note">{len(windows) - MAX_RANKS_SHOWN} more ranks differ (not shown)</p>')
    return "\n".join(out)


def first_difference_windows(run_a, run_b, equal) -> Iterator[tuple[int, list]]:
    """(rank, [(step, field, a, b, equal), ...]) for each rank whose step records differ: the steps
    from STEPS_AROUND before its first difference to STEPS_AROUND after. Stops reading a rank there.
    `equal(a, b)`: the comparator's rule (Criterion.equal)."""
    for rank in sorted(set(trace_ranks(run_a)) & set(trace_ranks(run_b))):
        before: list = []
        rows, after = None, 0
        for rec_a, rec_b in zip(iter_records(run_a, rank), iter_records(run_b, rank)):
            fields = [f for f in STEP_FIELDS if f in rec_a or f in rec_b]
            step_rows = [
                (rec_a.get("step"), f, rec_a.get(f), rec_b.get(f), equal(rec_a.get(f), rec_b.get(f))) for f in fields
            ]
            if rows is None:
                if all(row[4] for row in step_rows) and rec_a.get("step") == rec_b.get("step"):
                    before = (before + [step_rows])[-STEPS_AROUND:]
                    continue
                rows = [row for block in before for row in block] + step_rows
            else:
                rows += step_rows
                after += 1
                if after >= STEPS_AROUND:
                    break
        if rows is not None:
            yield rank, rows


def step_table(rows: list, sides: dict, rank) -> str:
    header = ["step", "quantity", esc(sides["a"]), esc(sides["b"])]
    body = []
    for step, field, a, b, equal in rows:
        cells = [esc(show_value(a)), esc(show_value(b))] if equal else list(mark_values(a, b))
        css = "" if equal else ' class="diff"'
        body.append(
            f"<tr{css}><td>{esc(step)}</td><td>{esc(field)}</td>"
            f'<td class="num">{cells[0]}</td><td class="num">{cells[1]}</td></tr>'
        )
    head = "".join(f"<th>{h}</th>" for h in header)  # already escaped
    return f'<table class="steps" id="steps-rank{esc(rank)}"><tr>{head}</tr>\n' + "\n".join(body) + "</table>"


def show_value(value) -> str:
    """Full precision: repr of a float is the shortest text that reads back as the same number, so
    two different values never print alike. Long lists show their first entries."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        shown = ", ".join(show_value(v) for v in value[:6])
        return f"[{shown}{', ...' if len(value) > 6 else ''}]"
    return str(value)


def mark_values(a, b) -> tuple[str, str]:
    """Two differing values as escaped HTML with their differing digits marked; lists element by element."""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and len(a) <= 6:
        pairs = [mark_difference(show_value(x), show_value(y)) for x, y in zip(a, b)]
        return "[" + ", ".join(p[0] for p in pairs) + "]", "[" + ", ".join(p[1] for p in pairs) + "]"
    return mark_difference(show_value(a), show_value(b))


def mark_difference(a: str, b: str) -> tuple[str, str]:
    """Both texts escaped, with what follows their common prefix wrapped in <mark>."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return (
        esc(a[:n]) + (f"<mark>{esc(a[n:])}</mark>" if a[n:] else ""),
        esc(b[:n]) + (f"<mark>{esc(b[n:])}</mark>" if b[n:] else ""),
    )


# ---------------------------------------------------------------------------------------------
# layer, configuration, warnings, pairs


def module_section(report: Report) -> str:
    module = report.diagnosis.module if report.diagnosis else None
    modules = report.sections.get("modules")
    if not isinstance(module, dict) and not modules:
        return ""
    out = ["<h2>Layer</h2>"]
    if isinstance(module, dict):
        out.append('<p class="note">the first module whose inputs are equal and whose outputs differ</p>')
        out.append(html_table(["key", "value"], [[k, show_value(v)] for k, v in module.items()], table_id="module"))
    if modules:
        out.append("<h3>per-module comparison</h3>")
        out.append(generic_table(modules, table_id="modules"))
    return "\n".join(out)


def config_section(diagnosis: Finding | None, sides: dict) -> str:
    evidence = diagnosis.evidence if diagnosis else {}
    values = as_dict(evidence.get("values"))
    rows = [
        [key, show_value(pair[0]), show_value(pair[1])]
        for key, pair in values.items()
        if isinstance(pair, (list, tuple)) and len(pair) == 2
    ]
    seed = evidence.get("seed_everything")
    if isinstance(seed, dict):
        rows.append(["seed_everything", show_value(seed.get(sides["a"])), show_value(seed.get(sides["b"]))])
    if not rows:
        lines = evidence.get("differences") or []
        if not lines:
            return ""
        return "<h2>Configuration differences</h2>\n<ul>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>"
    return "<h2>Configuration differences</h2>\n" + html_table(["key", sides["a"], sides["b"]], rows, table_id="config")


def warnings_section(warnings) -> str:
    if not warnings:
        return ""
    items = []
    for warning in warnings if isinstance(warnings, list) else [warnings]:
        if isinstance(warning, dict):
            items.append(f"<li><b>{esc(warning.get('kind', 'warning'))}</b>: {esc(warning.get('message'))}</li>")
        else:
            items.append(f"<li>{esc(warning)}</li>")
    return '<h2>Warnings</h2>\n<ul id="warnings">' + "".join(items) + "</ul>"


def pairs_section(pairs) -> str:
    if not pairs or not isinstance(pairs, list):
        return ""
    rows = []
    for pair in pairs:
        if not isinstance(pair, dict):
            continue
        diagnosis = Finding.from_json(pair.get("diagnosis"))
        rows.append(
            [
                pair.get("a"),
                pair.get("b"),
                pair.get("verdict"),
                diagnosis.line if diagnosis else "-",
                diagnosis.headline if diagnosis else "",
            ]
        )
    return "<h2>Pairs</h2>\n" + html_table(["a", "b", "verdict", "diagnosis", "why"], rows, table_id="pairs")


def extra_sections(report: Report) -> str:
    """Results of --reference and --fault, as their JSON (escaped): rarely read, never lost."""
    out = []
    for key in ("reference", "fault"):
        if report.sections.get(key):
            text = json.dumps(report.sections[key], indent=1, sort_keys=True, default=str)
            out.append(
                f"<h2>{esc(key)}</h2>\n<details><summary>{esc(key)} results</summary><pre>{esc(text)}</pre></details>"
            )
    return "\n".join(out)


def links_section(report: Report, out_dir: Path, sides: dict) -> str:
    items = []
    for key in ("a", "b"):
        if report.runs.get(key):
            items.append(f"<li>{esc(sides[key])} run directory: {link(report.runs[key], out_dir)}</li>")
    for side, path in as_dict(report.sections.get("logs")).items():
        items.append(f"<li>{esc(side)} log: {link(path, out_dir)}</li>")
    items.append(f"<li>machine-readable: {link(out_dir / REPORT_FILE, out_dir)}</li>")
    return '<h2>Runs and logs</h2>\n<ul id="links">' + "".join(items) + "</ul>"


def link(path, out_dir: Path) -> str:
    """A relative link when the target sits near the report (the folder can move), else absolute."""
    target = Path(str(path))
    try:
        href = os.path.relpath(target.resolve(), out_dir.resolve())
    except ValueError:
        href = str(target.resolve())
    return f'<a href="{esc(quote(href))}"><span class="mono">{esc(path)}</span></a>'


# ---------------------------------------------------------------------------------------------
# generic rendering (every cell escaped)


def html_table(header: list, rows: list, table_id: str | None = None) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "\n".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><tr>{head}</tr>\n{body}</table>"


def generic_table(value, table_id: str | None = None) -> str:
    """A list of dicts as a table of their keys; anything else as a definition list."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys = list(dict.fromkeys(k for row in value for k in row))
        return html_table(keys, [[show_value(row.get(k)) for k in keys] for row in value], table_id)
    if isinstance(value, dict):
        return definition_list(value)
    return f"<pre>{esc(json.dumps(value, indent=1, default=str))}</pre>"


def flatten(values: dict, prefix: str = "") -> Iterator[tuple[str, object]]:
    """Nested dicts as (dotted key, value) pairs; lists stay whole."""
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def definition_list(values: dict, depth: int = 0) -> str:
    items = []
    for key, value in values.items():
        if isinstance(value, dict) and value and depth < 2:
            inner = definition_list(value, depth + 1)
        elif isinstance(value, (dict, list)):
            inner = f'<span class="mono">{esc(json.dumps(value, default=str)[:2000])}</span>'
        else:
            inner = f'<span class="mono">{esc(show_value(value))}</span>'
        items.append(f"<dt>{esc(key)}</dt><dd>{inner}</dd>")
    return "<dl>" + "".join(items) + "</dl>"


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """`python -m ddp_parity.compare.html REPORT_DIR`: (re)render REPORT_DIR/report.html."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("usage: python -m ddp_parity.compare.html REPORT_DIR  (a folder holding report.json)", file=sys.stderr)
        return 2
    report_path = Path(args[0]) / REPORT_FILE
    try:
        report = json.loads(report_path.read_text())
    except OSError as err:
        print(
            f"ddp_parity.compare.html: error: REPORT_DIR {args[0]}: no readable {REPORT_FILE} ({err.strerror})",
            file=sys.stderr,
        )
        return 2
    except json.JSONDecodeError as err:
        print(
            f"ddp_parity.compare.html: error: {report_path}: not valid JSON ({err.msg} at line {err.lineno})",
            file=sys.stderr,
        )
        return 2
    if not isinstance(report, dict):
        print(f"ddp_parity.compare.html: error: {report_path}: expected a JSON object", file=sys.stderr)
        return 2
    try:
        Criterion.from_description(report.get("criterion"))
    except (TypeError, ValueError) as err:
        print(f"ddp_parity.compare.html: error: {report_path}: `criterion`: {err}", file=sys.stderr)
        return 2
    print(write_html(report_path.parent, Report.from_json(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
