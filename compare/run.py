"""Do a hand-written DDP loop and its Lightning twin train the same? Launch both, compare, report.

    python compare/run.py                                   # default config, 2 processes, bitwise
    python compare/run.py --set data.batch_size=16 --nproc 4
    python compare/run.py --traces RUN_DIR_A RUN_DIR_B      # compare two existing runs, launch nothing
    python compare/run.py --rtol 1e-6 --atol 0              # tolerances instead of bitwise

Exit codes: 0 equivalent, 1 not equivalent, 2 bad usage or config, 3 a run failed or timed out.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # runnable from a checkout as a script

from compare.comparator import Criterion, compare_runs  # noqa: E402
from compare.launch import Outcome, build_launch, run_launch  # noqa: E402
from compare.report import format_summary, plot_loss_curves, timing_summary, write_report  # noqa: E402
from ddp_parity.config import ConfigError, RunConfig, parse_raw_config  # noqa: E402
from ddp_parity.trace import TraceFormatError  # noqa: E402

EXIT_EQUIVALENT, EXIT_DIFFERENT, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


class UsageError(ValueError):
    """Bad command-line input; the message names the option."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="compare/run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="config file both sides read")
    p.add_argument("--nproc", type=int, default=None, help="processes per side (default: trainer.devices)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key on both sides, e.g. data.batch_size=16 (repeatable)")
    p.add_argument("--set-raw", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key on the raw side only (to see a difference being caught)")
    p.add_argument("--set-lightning", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key on the Lightning side only")
    p.add_argument("--out", default=None, help="output directory (default: runs/compare-<time>)")
    p.add_argument("--overwrite", action="store_true", help="reuse an output directory that holds results")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run (default: from the config)")
    p.add_argument("--rtol", type=float, default=0.0, help="relative tolerance (default 0: exact)")
    p.add_argument("--atol", type=float, default=0.0, help="absolute tolerance (default 0: exact)")
    p.add_argument("--keep-going", action="store_true",
                   help="after a run fails, still run the other side and compare what was recorded")
    p.add_argument("--lightning-launcher", choices=("lightning", "torchrun"), default="lightning",
                   help="Lightning's own launcher (re-runs the command per rank) or torchrun")
    p.add_argument("--traces", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare two existing run directories")
    args = p.parse_args(argv)
    if args.rtol < 0 or args.atol < 0:
        p.error("--rtol and --atol must be 0 or more")
    if args.nproc is not None and args.nproc < 1:
        p.error(f"--nproc must be positive, got {args.nproc}")
    if args.timeout is not None and args.timeout <= 0:
        p.error(f"--timeout must be positive, got {args.timeout}")
    return args


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

PEER_FAILURE = re.compile(r"connection closed by peer|connection reset|broken pipe|DistBackendError|"
                          r"NCCL communicator was aborted", re.IGNORECASE)


ERROR_LINE = re.compile(r"error:|\w+Error\b|exitcode\s*:", re.IGNORECASE)


def failure_report(outcome: Outcome) -> dict:
    """Which side and rank failed first, and the last lines of its error."""
    errors = outcome.errors
    root = next((e for e in errors if not PEER_FAILURE.search(e.get("message", "") + e.get("type", ""))),
                errors[0] if errors else None)
    if root is not None:
        lines = [f"{root['type']}: {root['message']}"] + root.get("traceback", "").strip().splitlines()[-6:]
        return {"side": outcome.side, "rank": root["rank"], "summary": outcome.describe(), "error_lines": lines}
    # no error file (the rank died before it knew its run directory, or was killed): the log
    rank = None
    match = re.search(r"Root Cause.*?rank\s*:\s*(\d+)", outcome.log_tail, re.DOTALL)
    if match:
        rank = int(match.group(1))
    said = [line for line in outcome.log_tail.splitlines()
            if ERROR_LINE.search(line) and not line.lstrip().startswith(("File ", "raise ", "torch.distributed.elastic"))]
    return {"side": outcome.side, "rank": rank, "summary": outcome.describe(),
            "error_lines": list(dict.fromkeys(said))[-6:] or outcome.log_tail.splitlines()[-12:]}


def build_report(comparison, out: Path | None, logs: dict) -> dict:
    report = comparison.to_dict()
    report["timing"] = timing_summary(comparison.timing)
    report["logs"] = logs
    if out is not None:
        report["plot"] = str(out / "loss_curves.png")
    return report


def finish(report: dict, comparison, out: Path) -> int:
    write_report(out, report)
    plot_loss_curves(out, comparison.curves)
    print(format_summary(report))
    print(f"report: {out / 'report.json'}  plot: {out / 'loss_curves.png'}")
    return EXIT_EQUIVALENT if report["verdict"] == "equivalent" else EXIT_DIFFERENT


def compare_existing(args) -> int:
    run_a, run_b = args.traces
    comparison = compare_runs(run_a, run_b, Criterion(args.rtol, args.atol))
    out = Path(args.out) if args.out else Path(run_a).parent
    report = build_report(comparison, out, {})
    return finish(report, comparison, out)


def launch_and_compare(args) -> int:
    both = to_flags(args.overrides, "--set")
    only = {"raw": to_flags(args.set_raw, "--set-raw"), "lightning": to_flags(args.set_lightning, "--set-lightning")}
    cfg = resolve_config(args, both)
    for side in only:
        resolve_config(args, both + only[side])
    nproc = args.nproc or (cfg.trainer.devices if cfg.trainer.devices != "auto" else 2)
    timeout = args.timeout or default_timeout(cfg, nproc)
    out = prepare_out(args)
    outcomes = []
    for side in ("raw", "lightning"):
        launch = build_launch(side, args.config, nproc, both + only[side], out, cfg.threads,
                              lightning_launcher=args.lightning_launcher)
        print(f"[{side}] {' '.join(launch.command[:6])} ... (log: {launch.log_path}, timeout {timeout:.0f} s)",
              flush=True)
        outcome = run_launch(launch, timeout)
        print(f"[{side}] {'done' if outcome.ok else 'FAILED'} in {outcome.seconds:.1f} s", flush=True)
        outcomes.append(outcome)
        if not outcome.ok and not args.keep_going:
            break
    logs = {o.side: str(out / f"{o.side}.log") for o in outcomes}
    failed = [o for o in outcomes if not o.ok]
    if failed and not args.keep_going:
        report = {"verdict": "failed", "criterion": Criterion(args.rtol, args.atol).describe(),
                  "first_divergence": None, "failure": failure_report(failed[0]), "logs": logs,
                  "runs": {"a": str(out / "raw"), "b": str(out / "lightning")}}
        write_report(out, report)
        print(format_summary(report))
        return EXIT_FAILED
    comparison = compare_runs(out / "raw", out / "lightning", Criterion(args.rtol, args.atol))
    report = build_report(comparison, out, logs)
    code = finish(report, comparison, out)
    return EXIT_FAILED if failed else code


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.traces:
            return compare_existing(args)
        return launch_and_compare(args)
    except (ConfigError, UsageError, TraceFormatError) as err:
        print(f"compare/run.py: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("compare/run.py: interrupted; every process it started has been stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
