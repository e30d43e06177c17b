"""Do a hand-written DDP loop and its Lightning twin train the same? Launch both, compare, report.

    python compare/run.py                                   # default config, 2 processes, bitwise
    python compare/run.py --set data.batch_size=16 --nproc 4
    python compare/run.py --traces RUN_DIR_A RUN_DIR_B      # compare two existing runs, launch nothing
    python compare/run.py --rtol 1e-6 --atol 0              # tolerances instead of bitwise

Exit codes: 0 equivalent, 1 not equivalent, 2 bad usage or config, 3 a run failed or timed out.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re
import shutil
import sys
import time
from pathlib import Path

from ddp_parity.compare.comparator import Criterion, compare_runs, compare_to_reference
from ddp_parity.compare.comparator import build_report as comparison_report
from ddp_parity.compare.diagnosis import diagnose_failure, format_diagnosis
from ddp_parity.compare.report import format_summary, labels_of, plot_loss_curves, write_report
from ddp_parity.config import ConfigError, RunConfig, parse_raw_config
from ddp_parity.harness.launch import REPO, Outcome, build_launch, run_launch, run_launches
from ddp_parity.trace import TraceFormatError, write_json_atomic

EXIT_EQUIVALENT, EXIT_DIFFERENT, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3
DEFAULT_CONFIG = REPO / "configs" / "default.yaml"


class UsageError(ValueError):
    """Bad command-line input; the message names the option."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="compare/run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="config file both sides read")
    p.add_argument("--nproc", type=int, default=None, help="processes per node (default: trainer.devices)")
    p.add_argument(
        "--nnodes",
        type=int,
        default=None,
        help="nodes, all on this machine (default: trainer.num_nodes); several go through torchrun",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key on both sides, e.g. data.batch_size=16 (repeatable)",
    )
    p.add_argument(
        "--set-raw",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key on the raw side only (to see a difference being caught)",
    )
    p.add_argument(
        "--set-lightning",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key on the Lightning side only",
    )
    p.add_argument("--out", default=None, help="output directory (default: runs/compare-<time>)")
    p.add_argument("--overwrite", action="store_true", help="reuse an output directory that holds results")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run (default: from the config)")
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=20.0,
        help="stop a side whose ranks all made no progress for this many seconds (0: off)",
    )
    p.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0: exact)")
    p.add_argument("--atol", type=float, default=0.0, help="absolute tolerance (default 0: exact)")
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="after a run fails, still run the other side and compare what was recorded",
    )
    p.add_argument(
        "--parallel",
        action="store_true",
        help="run both sides at once: faster, but the step times it reports are noisier",
    )
    p.add_argument(
        "--lightning-launcher",
        choices=("lightning", "torchrun"),
        default="lightning",
        help="Lightning's own launcher (re-runs the command per rank) or torchrun",
    )
    p.add_argument(
        "--reference",
        action="store_true",
        help="also train one plain process on the global batches DDP sees, and measure both runs against it",
    )
    p.add_argument(
        "--mistake",
        default=None,
        metavar="NAME",
        help="run the raw side with one classic DDP mistake and see the diagnosis (`--mistake list`)",
    )
    p.add_argument(
        "--fault",
        default=None,
        metavar="RANK:STEP",
        help="also run both sides with RANK killed after STEP (once) under torchrun --max-restarts=1, "
        "and compare each with its uninterrupted run",
    )
    p.add_argument(
        "--matrix",
        default=None,
        metavar="FILE",
        help="run every configuration of a YAML list (configs/matrix.yaml) and print one row each",
    )
    p.add_argument(
        "--strip-prefix",
        action="append",
        default=[],
        metavar="PREFIX",
        help="drop PREFIX from parameter names of both runs before pairing them (repeatable)",
    )
    p.add_argument(
        "--key-map",
        default=None,
        metavar="FILE",
        help='JSON object renaming parameters (after --strip-prefix) before pairing: {"name": "other name"}',
    )
    p.add_argument("--traces", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare two existing run directories")
    p.add_argument(
        "--ignore-config",
        action="append",
        default=[],
        metavar="KEY",
        help="leave a (run-control) config key out of the configuration comparison, e.g. snapshot_path (repeatable)",
    )
    args = p.parse_args(argv)
    if not (math.isfinite(args.rtol) and math.isfinite(args.atol)) or args.rtol < 0 or args.atol < 0:
        p.error("--rtol and --atol must be finite numbers, 0 or more")
    for name in ("nproc", "nnodes"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be positive, got {getattr(args, name)}")
    if args.timeout is not None and args.timeout <= 0:
        p.error(f"--timeout must be positive, got {args.timeout}")
    return args


def mistake_catalogue() -> dict:
    """The catalogue of raw/mistakes.py (loading it does not import the training script)."""
    spec = importlib.util.spec_from_file_location("raw_mistakes", REPO / "raw" / "mistakes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.MISTAKES


def print_mistakes() -> int:
    for mistake in mistake_catalogue().values():
        print(f"{mistake.name:34s} {mistake.summary} (expect: {mistake.expected})")
    return EXIT_EQUIVALENT


def to_flags(assignments: list[str], option: str) -> list[str]:
    """`data.batch_size=16` -> ["--data.batch_size", "16"]."""
    flags = []
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w.]*", key):
            raise UsageError(f"{option} {item!r}: expected KEY=VALUE with a dotted config key, e.g. data.batch_size=16")
        flags += [f"--{key}", value]
    return flags


def resolve_config(args, flags: list[str]) -> RunConfig:
    """Validate the config and overrides here, before anything is launched or written."""
    if not Path(args.config).is_file():
        raise ConfigError(f"--config {args.config}: no such file")
    return parse_raw_config(["--config", args.config, *flags])


def check_comparable(cfg: RunConfig) -> None:
    """Settings the two sides would silently run differently."""
    import torch

    on_cpu = cfg.trainer.accelerator == "cpu" or not torch.accelerator.is_available()
    if cfg.trainer.precision == "16-mixed" and on_cpu:
        raise ConfigError(
            "`trainer.precision` 16-mixed (fp16 with GradScaler) needs a CUDA device: on CPU Lightning "
            "runs bf16-mixed instead (with only a warning), so the two sides would not run the same "
            "thing; use bf16-mixed on CPU"
        )


def default_timeout(cfg: RunConfig, nproc: int) -> float:
    per_rank = math.ceil(cfg.data.num_samples / nproc)
    steps = cfg.trainer.max_epochs * math.ceil(per_rank / cfg.data.batch_size)
    return 120.0 + 0.5 * steps


def prepare_out(args) -> Path:
    out = Path(args.out) if args.out else Path("runs") / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
    if out.exists() and any(out.iterdir()):
        if not args.overwrite:
            raise UsageError(f"--out {out} already holds results; choose another directory or pass --overwrite")
        for side in ("raw", "lightning"):
            shutil.rmtree(out / side, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    return out


# ---------------------------------------------------------------------------------------------

PEER_FAILURE = re.compile(
    r"connection closed by peer|connection reset|broken pipe|DistBackendError|"
    r"NCCL communicator was aborted",
    re.IGNORECASE,
)


ERROR_LINE = re.compile(r"error:|\w+Error\b|exitcode\s*:", re.IGNORECASE)


def failure_report(outcome: Outcome) -> dict:
    """Which side and rank failed first, and the last lines of its error."""
    errors = outcome.errors
    root = next(
        (e for e in errors if not PEER_FAILURE.search(e.get("message", "") + e.get("type", ""))),
        errors[0] if errors else None,
    )
    if outcome.stall:
        return {
            "side": outcome.side,
            "rank": None,
            "summary": outcome.describe(),
            "stall": outcome.stall,
            "error_lines": [],
        }
    if root is not None:
        lines = [f"{root['type']}: {root['message']}"] + root.get("traceback", "").strip().splitlines()[-6:]
        return {"side": outcome.side, "rank": root["rank"], "summary": outcome.describe(), "error_lines": lines}
    # no error file (the rank died before it knew its run directory, or was killed): the log
    rank = None
    match = re.search(r"Root Cause.*?rank\s*:\s*(\d+)", outcome.log_tail, re.DOTALL)
    if match:
        rank = int(match.group(1))
    said = [
        line
        for line in outcome.log_tail.splitlines()
        if ERROR_LINE.search(line) and not line.lstrip().startswith(("File ", "raise ", "torch.distributed.elastic"))
    ]
    return {
        "side": outcome.side,
        "rank": rank,
        "summary": outcome.describe(),
        "error_lines": list(dict.fromkeys(said))[-6:] or outcome.log_tail.splitlines()[-12:],
    }


def build_report(comparison, out: Path | None, logs: dict, ignore_config=()) -> dict:
    report = comparison_report(comparison, ignore_config=ignore_config)  # figures, diagnosis, warnings, labels
    report["logs"] = logs
    if out is not None:
        report["plot"] = str(out / "loss_curves.png")
    return report


def finish(report: dict, comparison, out: Path) -> int:
    write_report(out, report)
    plot_loss_curves(out, comparison.curves, labels_of(report))
    print(format_summary(report))
    print(format_diagnosis(report["diagnosis"]))
    print(f"report: {out / 'report.json'}  plot: {out / 'loss_curves.png'}")
    return EXIT_EQUIVALENT if report["verdict"] == "equivalent" else EXIT_DIFFERENT


def build_key_map(args):
    """The parameter-name mapping from --strip-prefix and --key-map (None: the default pairing)."""
    if not args.strip_prefix and not args.key_map:
        return None
    renames = {}
    if args.key_map:
        try:
            renames = json.loads(Path(args.key_map).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise UsageError(f"--key-map {args.key_map}: {err}") from None
        if not isinstance(renames, dict) or not all(isinstance(v, str) for v in renames.values()):
            raise UsageError(f"--key-map {args.key_map}: expected a JSON object of name -> name")
    prefixes = tuple(args.strip_prefix) + ("module.",)

    def key_map(key: str) -> str:
        for prefix in prefixes:
            key = key.removeprefix(prefix)
        return renames.get(key, key)

    return key_map


def compare_existing(args) -> int:
    run_a, run_b = args.traces
    comparison = compare_runs(run_a, run_b, Criterion(args.rtol, args.atol), key_map=build_key_map(args))
    out = Path(args.out) if args.out else Path(run_a).parent
    report = build_report(comparison, out, {}, ignore_config=args.ignore_config)
    return finish(report, comparison, out)


def side_flags(args) -> tuple[list[str], dict[str, list[str]]]:
    both = to_flags(args.overrides, "--set") + (mistake_catalogue()[args.mistake].overrides if args.mistake else [])
    only = {"raw": to_flags(args.set_raw, "--set-raw"), "lightning": to_flags(args.set_lightning, "--set-lightning")}
    return both, only


def launch_and_compare(args) -> tuple[int, dict]:
    """Run both sides with the same config, compare; return the exit code and the report."""
    both, only = side_flags(args)
    cfg = resolve_config(args, both)
    for side in only:
        resolve_config(args, both + only[side])
    check_comparable(cfg)
    nproc = args.nproc or (cfg.trainer.devices if cfg.trainer.devices != "auto" else 2)
    nnodes = args.nnodes or cfg.trainer.num_nodes
    timeout = args.timeout or default_timeout(cfg, nproc * nnodes)
    out = prepare_out(args)
    sides = ("raw", "lightning", "reference") if args.reference else ("raw", "lightning")
    launches = [
        build_launch(
            side,
            args.config,
            nproc,
            both + only.get(side, only["raw"]),
            out,
            cfg.threads,
            lightning_launcher=args.lightning_launcher,
            nnodes=nnodes,
            mistake=args.mistake,
        )
        for side in sides
    ]
    if args.fault:
        launches += fault_launches(args, cfg, nproc, nnodes, both, only, out)
    for launch in launches:
        print(
            f"[{launch.side}] {' '.join(launch.command[:6])} ... (log: {launch.log_path}, timeout {timeout:.0f} s)",
            flush=True,
        )
    outcomes = run_sides(launches, timeout, args.parallel, args.keep_going, args.stall_timeout or None)
    logs = {o.side: str(out / f"{o.side}.log") for o in outcomes}
    failed = [o for o in outcomes if not o.ok]
    world = {"nproc": nproc, "nnodes": nnodes, "world_size": nproc * nnodes}
    if failed and not args.keep_going:
        report = {
            "verdict": "failed",
            "criterion": Criterion(args.rtol, args.atol).describe(),
            "first_divergence": None,
            "failure": failure_report(failed[0]),
            "logs": logs,
            **world,
            "seconds": sum(o.seconds for o in outcomes),
            "runs": {"a": str(out / "raw"), "b": str(out / "lightning")},
        }
        stall = {**failed[0].stall, "side": failed[0].side} if failed[0].stall else None
        report["diagnosis"] = diagnose_failure(out / "raw", out / "lightning", report, stall=stall)
        if stall:
            report["first_divergence"] = {
                "quantity": "stall",
                "step": report["diagnosis"]["step"],
                "rank": report["diagnosis"]["rank"],
                "side": failed[0].side,
            }
        write_report(out, report)
        print(format_summary(report))
        print(format_diagnosis(report["diagnosis"]))
        return EXIT_FAILED, report
    comparison = compare_runs(
        out / "raw", out / "lightning", Criterion(args.rtol, args.atol), key_map=build_key_map(args)
    )
    report = {
        **build_report(comparison, out, logs, ignore_config=args.ignore_config),
        **world,
        "seconds": sum(o.seconds for o in outcomes),
    }
    if args.reference:
        report["reference"] = reference_report(out, args)
    if args.fault:
        report["fault"] = fault_report(out, args)
    code = finish(report, comparison, out)
    if args.fault:
        print(format_fault(report["fault"]))
        if any(r["verdict"] != "equivalent" for r in report["fault"]["pairs"].values()):
            code = max(code, EXIT_DIFFERENT)
    if args.reference:
        print(format_reference(report["reference"]))
        if any(r["verdict"] != "equivalent" for r in report["reference"]["against"].values()):
            code = max(code, EXIT_DIFFERENT)
    return (EXIT_FAILED if failed else code), report


def fault_launches(args, cfg, nproc, nnodes, both, only, out) -> list:
    """Both sides again under torchrun --max-restarts=1, with one rank killed once at one step."""
    from ddp_parity.faults import FAULT_ENV, MARKER_ENV

    return [
        build_launch(
            side,
            args.config,
            nproc,
            both + only[side],
            out,
            cfg.threads,
            lightning_launcher="torchrun",
            nnodes=nnodes,
            max_restarts=1,
            name=f"{side}-fault",
            extra_env={FAULT_ENV: args.fault, MARKER_ENV: str(out / f"{side}-fault.marker")},
        )
        for side in ("raw", "lightning")
    ]


def fault_report(out: Path, args) -> dict:
    """Each crashed-and-restarted run against its uninterrupted twin, and the two against each other."""
    from ddp_parity.trace import read_meta

    criterion = Criterion(args.rtol, args.atol)
    pairs = {}
    for name, a, b in (
        ("raw vs raw-fault", "raw", "raw-fault"),
        ("lightning vs lightning-fault", "lightning", "lightning-fault"),
        ("raw-fault vs lightning-fault", "raw-fault", "lightning-fault"),
    ):
        result = compare_runs(out / a, out / b, criterion).to_dict()
        pairs[name] = {
            "verdict": result["verdict"],
            "first_divergence": result["first_divergence"],
            "losses": result["losses"],
            "params": {k: v for k, v in result["params"].items() if k != "tensors"},
        }
    resumed = {side: read_meta(out / f"{side}-fault").get("resumed_from") for side in ("raw", "lightning")}
    fired = {side: (out / f"{side}-fault.marker").exists() for side in ("raw", "lightning")}
    return {"fault": args.fault, "fired": fired, "resumed_from": resumed, "pairs": pairs}


def format_fault(fault: dict) -> str:
    lines = [f"fault {fault['fault']} (rank:step), each side restarted by torchrun --max-restarts=1:"]
    for side in ("raw", "lightning"):
        lines.append(
            f"  {side}: crashed: {'yes' if fault['fired'][side] else 'NO'}; resumed from "
            f"{fault['resumed_from'][side] or 'the start (no checkpoint yet)'}"
        )
    for name, pair in fault["pairs"].items():
        lines.append(
            f"  {name:30s} {pair['verdict']}; losses equal {pair['losses']['equal']}/"
            f"{pair['losses']['compared']}, params max abs {pair['params']['max_abs']:.3g}"
        )
    return "\n".join(lines)


# the tolerance of --reference unless --rtol/--atol say otherwise: float32 carries about 1.2e-7
# relative; measured on the default run, losses differ by at most 1 ulp (2.4e-7 abs, 1.2e-7 rel,
# world 4) and parameters by 3e-8 abs after 48 steps; world 2 is bitwise equal.
REFERENCE_CRITERION = Criterion(rtol=1e-6, atol=1e-6)


def reference_report(out: Path, args) -> dict:
    criterion = Criterion(args.rtol, args.atol) if (args.rtol or args.atol) else REFERENCE_CRITERION
    against = {}
    for side in ("raw", "lightning"):
        result = compare_to_reference(out / side, out / "reference", criterion).to_dict()
        against[side] = {
            key: result[key] for key in ("verdict", "first_divergence", "per_step", "validation", "problems")
        }
        against[side]["params"] = {k: v for k, v in result["params"].items() if k != "tensors"}
    return {"criterion": criterion.describe(), "run": str(out / "reference"), "against": against}


def format_reference(ref: dict) -> str:
    crit = ref["criterion"]
    lines = [f"reference (one process on the global batches; |a-b| <= {crit['atol']} + {crit['rtol']}*|b|):"]
    for side, r in ref["against"].items():
        loss, params = r["per_step"]["loss"], r["params"]
        lines.append(
            f"  {side:9s} vs reference: {r['verdict']}; samples equal {r['per_step']['samples']['equal']}/"
            f"{r['per_step']['samples']['compared']} steps; loss max abs {loss['max_abs']:.3g} "
            f"max rel {loss['max_rel']:.3g}; params max abs {params['max_abs']:.3g}; "
            f"validation max rel {r['validation']['max_rel']:.3g}"
        )
    return "\n".join(lines)


def run_sides(launches, timeout: float, parallel: bool, keep_going: bool, stall: float | None) -> list[Outcome]:
    """One side after the other (clean timings), or both at once (--parallel: faster, noisier timings)."""
    if parallel:
        outcomes = run_launches(launches, timeout, stall)
    else:
        outcomes = []
        for launch in launches:
            outcomes.append(run_launch(launch, timeout, stall))
            if not outcomes[-1].ok and not keep_going:
                break
    for outcome in outcomes:
        print(f"[{outcome.side}] {'done' if outcome.ok else 'FAILED'} in {outcome.seconds:.1f} s", flush=True)
    return outcomes


# ---------------------------------------------------------------------------------------------
# a matrix of configurations


def load_matrix(path: str) -> list[dict]:
    """A YAML list of entries: {name, set: {key: value}, nproc, nnodes, lightning_launcher}."""
    import yaml

    try:
        entries = yaml.safe_load(Path(path).read_text())
    except OSError as err:
        raise UsageError(f"--matrix {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise UsageError(f"--matrix {path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"--matrix {path}: expected a non-empty YAML list of entries")
    allowed = {"name", "set", "nproc", "nnodes", "lightning_launcher"}
    names = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise UsageError(f"--matrix {path}: entry {i} needs a `name`")
        unknown = set(entry) - allowed
        if unknown:
            raise UsageError(f"--matrix {path}: entry {entry['name']!r} has unknown key(s) {sorted(unknown)}")
        if entry["name"] in names or not re.fullmatch(r"[\w.-]+", entry["name"]):
            raise UsageError(f"--matrix {path}: entry name {entry['name']!r} is repeated or not a folder name")
        names.add(entry["name"])
    return entries


def matrix_args(args, entry: dict, out: Path) -> argparse.Namespace:
    sub = argparse.Namespace(**vars(args))
    settings = entry.get("set") or {}
    sub.overrides = list(args.overrides) + [
        f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in settings.items()
    ]
    sub.nproc = entry.get("nproc", args.nproc)
    sub.nnodes = entry.get("nnodes", args.nnodes)
    sub.lightning_launcher = entry.get("lightning_launcher", args.lightning_launcher)
    sub.out, sub.overwrite = str(out / entry["name"]), True
    return sub


def matrix_row(entry: dict, report: dict) -> dict:
    first = report.get("first_divergence")
    return {
        "name": entry["name"],
        "settings": entry.get("set") or {},
        "world_size": report.get("world_size"),
        "verdict": report["verdict"],
        "first_divergence": first if report["verdict"] != "failed" else report["failure"]["summary"],
        "loss_max_abs": (report.get("losses") or {}).get("max_abs"),
        "params_max_abs": (report.get("params") or {}).get("max_abs"),
        "seconds": report.get("seconds"),
    }


def format_matrix(rows: list[dict]) -> str:
    from ddp_parity.compare.report import describe_divergence, fmt

    header = ["setting", "world", "verdict", "first divergence", "loss max abs", "param max abs", "time s"]
    table = [header] + [
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
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def run_matrix(args) -> int:
    entries = load_matrix(args.matrix)
    out = prepare_out(args)
    subs = [matrix_args(args, entry, out) for entry in entries]
    for sub in subs:  # every entry's config is valid before anything is launched
        both, only = side_flags(sub)
        for side in only:
            resolve_config(sub, both + only[side])
    rows = []
    for entry, sub in zip(entries, subs):
        print(f"=== {entry['name']}", flush=True)
        code, report = launch_and_compare(sub)
        rows.append(matrix_row(entry, report))
        if code == EXIT_FAILED and not args.keep_going:
            print(f"stopping: {entry['name']} failed (--keep-going runs the rest)")
            break
    write_json_atomic(out / "matrix.json", {"matrix": str(args.matrix), "rows": rows})
    print(format_matrix(rows))
    print(f"matrix report: {out / 'matrix.json'}")
    verdicts = {r["verdict"] for r in rows}
    if "failed" in verdicts or len(rows) < len(entries):
        return EXIT_FAILED
    return EXIT_EQUIVALENT if verdicts == {"equivalent"} else EXIT_DIFFERENT


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.mistake == "list":
            return print_mistakes()
        if args.mistake and args.mistake not in mistake_catalogue():
            raise UsageError(
                f"--mistake {args.mistake!r}: not in the catalogue ({', '.join(mistake_catalogue())}); "
                f"see --mistake list"
            )
        if args.fault:
            from ddp_parity.faults import parse_fault

            try:
                parse_fault(args.fault)
            except ValueError as err:
                raise UsageError(f"--fault: {err}") from None
        if args.traces:
            return compare_existing(args)
        if args.matrix:
            return run_matrix(args)
        return launch_and_compare(args)[0]
    except (ConfigError, UsageError, TraceFormatError) as err:
        print(f"compare/run.py: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("compare/run.py: interrupted; every process it started has been stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
