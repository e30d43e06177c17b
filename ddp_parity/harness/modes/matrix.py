"""--matrix FILE: run every configuration of a YAML list (configs/matrix.yaml), one row each."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ddp_parity.compare.findings import Report
from ddp_parity.compare.report import describe_divergence, fmt, render_table
from ddp_parity.harness.exits import EXIT_DIFFERENT, EXIT_EQUIVALENT, EXIT_FAILED, UsageError
from ddp_parity.harness.modes import default
from ddp_parity.harness.outdir import OutDir, default_out
from ddp_parity.harness.validate import parse_sides
from ddp_parity.trace_files import write_json_atomic

ENTRY_KEYS = {"name", "set", "nproc", "nnodes", "lightning_launcher", "sides", "fault"}
LAUNCHERS = ("lightning", "torchrun")


def load_matrix(path: str) -> list[dict]:
    """A YAML list of entries {name, set: {key: value}, nproc, nnodes, lightning_launcher, sides, fault}, each
    checked for its types and values."""
    import yaml

    try:
        entries = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise UsageError(f"--matrix {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise UsageError(f"--matrix {path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"--matrix {path}: expected a non-empty YAML list of entries")
    names = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise UsageError(f"--matrix {path}: entry {i} needs a `name`")
        check_entry(path, entry)
        if entry["name"] in names or not re.fullmatch(r"[\w.-]+", entry["name"]):
            raise UsageError(f"--matrix {path}: entry name {entry['name']!r} is repeated or not a folder name")
        names.add(entry["name"])
    return entries


def check_entry(path: str, entry: dict) -> None:
    where = f"--matrix {path}: entry {entry['name']!r}"
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise UsageError(f"{where} has unknown key(s) {sorted(unknown)} (allowed: {', '.join(sorted(ENTRY_KEYS))})")
    for key in ("nproc", "nnodes"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise UsageError(f"{where}: `{key}` must be a positive whole number, got {value!r}")
    settings = entry.get("set")
    if settings is not None:
        if not isinstance(settings, dict) or not all(isinstance(k, str) for k in settings):
            raise UsageError(
                f"{where}: `set` must be a mapping of config keys to values, e.g. set: {{data.batch_size: 16}}"
            )
        for key, value in settings.items():
            if isinstance(value, (dict, list)):
                raise UsageError(f"{where}: `set` {key} must be a single value, got {value!r}")
    if entry.get("sides") is not None:
        parse_sides(str(entry["sides"]))  # a UsageError naming the side
    launcher = entry.get("lightning_launcher")
    if launcher is not None and launcher not in LAUNCHERS:
        raise UsageError(f"{where}: `lightning_launcher` must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")


def matrix_args(args, entry: dict, out: Path) -> argparse.Namespace:
    sub = argparse.Namespace(**vars(args))
    settings = entry.get("set") or {}
    sub.overrides = list(args.overrides) + [
        f"{k}={str(v).lower() if isinstance(v, bool) else 'null' if v is None else v}" for k, v in settings.items()
    ]
    sub.nproc = entry.get("nproc", args.nproc)
    sub.nnodes = entry.get("nnodes", args.nnodes)
    sub.lightning_launcher = entry.get("lightning_launcher", args.lightning_launcher)
    sub.sides = parse_sides(str(entry["sides"])) if entry.get("sides") else args.sides
    sub.fault = entry.get("fault", args.fault)  # checked with the entry's world and steps, as --fault is
    sub.out, sub.overwrite = str(out / entry["name"]), True
    return sub


def matrix_row(entry: dict, report: Report) -> dict:
    return {
        "name": entry["name"],
        "settings": entry.get("set") or {},
        "world_size": report.sections.get("world_size"),
        "verdict": row_verdict(report),
        "first_divergence": report.failure["summary"] if report.failed else report.first_divergence,
        "loss_max_abs": (report.figures.get("losses") or {}).get("max_abs"),
        "params_max_abs": (report.figures.get("params") or {}).get("max_abs"),
        "seconds": report.sections.get("seconds"),
    }


def row_verdict(report: Report) -> str:
    """The comparison's verdict; an entry with a `fault` is equivalent only if the fault fired on
    every side and every crashed-and-resumed run ended equal to its uninterrupted twin."""
    crash = report.sections.get("fault")
    if report.verdict == "equivalent" and crash is not None:
        from ddp_parity.harness.modes import fault  # imports the comparison (torch): after the runs only

        if not fault.fault_fired_everywhere(crash):
            return "failed"
        if not fault.fault_passed(crash):
            return "different"
    return report.verdict


def format_matrix(rows: list[dict]) -> str:
    header = ["setting", "world", "verdict", "first divergence", "loss max abs", "param max abs", "time s"]
    return render_table(
        header,
        [
            [
                r["name"],
                fmt(r["world_size"]),
                r["verdict"],
                r["first_divergence"]
                if isinstance(r["first_divergence"], str)
                else describe_divergence(r["first_divergence"]),
                fmt(r["loss_max_abs"]),
                fmt(r["params_max_abs"]),
                f"{r['seconds']:.1f}",
            ]
            for r in rows
        ],
    )


def run_matrix(args) -> int:
    entries = load_matrix(args.matrix)
    root = Path(args.out) if args.out else default_out("matrix")
    # every entry is valid (config, world size, fault) before anything is launched or written
    plans = [default.prepare(matrix_args(args, entry, root)) for entry in entries]
    out_dir = OutDir(root, args.overwrite)
    with out_dir as out:
        rows = []
        for entry, plan in zip(entries, plans):
            print(f"=== {entry['name']}", flush=True)
            code, report = default.launch_and_compare(matrix_args(args, entry, out), plan)
            rows.append(matrix_row(entry, report))
            if code == EXIT_FAILED and not args.keep_going:
                print(f"stopping: {entry['name']} failed (--keep-going runs the rest)")
                break
        write_json_atomic(out / "matrix.json", {"matrix": str(args.matrix), "rows": rows})
        out_dir.commit()
    print(format_matrix(rows))
    print(f"matrix report: {out / 'matrix.json'}")
    verdicts = {r["verdict"] for r in rows}
    if "failed" in verdicts or len(rows) < len(entries):
        return EXIT_FAILED
    return EXIT_EQUIVALENT if verdicts == {"equivalent"} else EXIT_DIFFERENT
