"""python -m benchmarks.programs [--only NAME] [--keep DIR]: run each program's raw loop and Lightning port,
compare them, print the verdict per program. Exit 0 when every pair is EQUIVALENT."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from benchmarks.programs.corpus import PROGRAMS
from benchmarks.programs.run import run_pair
from ddp_parity.harness.exits import UsageError
from ddp_parity.harness.outdir import check_out


def check_keep(keep: Path, names: list[str]) -> None:
    """--keep DIR: outside the checkout's sources (or under runs/), a folder (or one that can be made), writable,
    without a folder of a program to run (a snapshot left there would be resumed). DIR is made here."""
    check_out(keep, overwrite=True, option="--keep")  # overwrite: DIR may hold other programs' runs; checked below
    taken = [str(keep / n) for n in names if (keep / n).exists()]
    if taken:
        raise UsageError(f"--keep {keep}: {', '.join(taken)} already exist(s); give a new DIR (nothing is overwritten)")
    try:
        keep.mkdir(parents=True, exist_ok=True)
        probe = keep / f".probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise UsageError(f"--keep {keep}: cannot write there ({err.strerror or err})") from None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.programs", description=__doc__)
    p.add_argument(
        "--only",
        default=None,
        help="run the program of this name (names: %(choices)s)".replace("%(choices)s", ", ".join(PROGRAMS)),
    )
    p.add_argument("--keep", type=Path, default=None, help="keep the runs under DIR (default: a temporary folder)")
    args = p.parse_args(argv)
    if args.only is not None and args.only not in PROGRAMS:
        print(f"--only: no program named {args.only!r}; the programs are {', '.join(PROGRAMS)}", file=sys.stderr)
        return 2
    names = [args.only] if args.only else list(PROGRAMS)
    if args.keep is not None:
        args.keep = Path(os.path.abspath(os.path.expanduser(args.keep)))  # the programs run in folders of their own
        try:
            check_keep(args.keep, names)
        except UsageError as err:
            print(f"{p.prog}: error: {err}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="ddp-parity-programs-") as tmp:
        root = args.keep or Path(tmp)
        results = []
        for name in names:
            result = run_pair(PROGRAMS[name], root / name)
            results.append(result)
            print(f"{name}: {result.verdict} ({result.seconds:.0f}s)", flush=True)
            if result.failed:
                print(f"  {result.failed}")
            elif result.rc != 0:
                print(f"  diagnosis: {result.diagnosis.get('explanation', '')}")
                print(f"  fix: {result.diagnosis.get('advice', '')}")
    return 0 if all(r.rc == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
