"""python -m benchmarks.bugs [--only WORDS] [--keep DIR]: run the corpus and print its table."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from benchmarks.bugs.cases import CASES
from benchmarks.bugs.run import confusion, run_cases, scores
from benchmarks.programs.__main__ import check_keep
from ddp_parity.compare.report import render_table
from ddp_parity.harness.exits import UsageError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bugs", description=__doc__)
    p.add_argument("--only", default=None, help="run the cases whose name contains this text")
    p.add_argument("--keep", type=Path, default=None, help="keep the run directories under DIR")
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    cases = [c for c in CASES if args.only is None or args.only in c.name]
    if not cases:  # an empty table would read as a corpus that passed
        p.error(f"--only {args.only}: no case's name contains it; the cases: {', '.join(c.name for c in CASES)}")
    if args.keep is not None:  # the case folders are made fresh: a run left there would be written over
        args.keep = Path(os.path.abspath(os.path.expanduser(args.keep)))
        folders = [f"{kind}{i:02d}" for kind in ("case", "ddp") for i in range(len(cases))]
        try:
            check_keep(args.keep, folders)
        except UsageError as err:
            p.error(str(err))
    outcomes = run_cases(cases, args.keep)
    rows = []
    for o in outcomes:
        module = (o.diagnosis.get("module") or {}).get("name") or "-"
        verdict = "right" if o.right else "WRONG"
        rows.append(
            [o.case.name, o.case.pair, o.case.category, o.category, str(o.diagnosis.get("step")), module, verdict]
        )
    print(render_table(["case", "pair", "expected", "diagnosed", "step", "module", ""], rows))
    for o in outcomes:
        if not o.right:
            print(f"\n{o.case.name}: {o.diagnosis['explanation']}\n  advice: {o.diagnosis['advice']}")
            if o.story:
                print(f"  story: {o.story}")
    s = scores(outcomes)
    n = s["bugs"]
    module_right, module_cases = s["module right"]
    print(f"\n{time.strftime('%Y-%m-%d')}, torch {torch.__version__}, {len(outcomes)} cases")
    for label in ("detected", "first step exact", "category right", "advice names the fix"):
        print(f"{label}: {s[label]}/{n} ({100 * s[label] / max(n, 1):.0f}%)")
    print(f"module right: {module_right}/{module_cases} ({100 * module_right / max(module_cases, 1):.0f}%)")
    print(f"false positives on clean pairs: {s['false positives']}/{s['clean pairs']}")
    print(f"inconsistent stories: {s['inconsistent stories']}")
    print("\nconfusion (expected -> diagnosed: count)")
    for (expected, got), count in sorted(confusion(outcomes).items()):
        print(f"  {expected} -> {got}: {count}")
    return 0 if all(o.right for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
