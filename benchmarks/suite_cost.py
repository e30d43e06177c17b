"""Where the test suite's CPU time goes: every test once (or the pytest arguments given), with each
Python process the suite starts logging a line when it starts and one when it exits with its CPU
time. Prints the wall and CPU time of the whole run, the processes by kind, and the tests that cost
the most.

    python -m benchmarks.suite_cost                         # the README's test command, counted
    python -m benchmarks.suite_cost -- -m slow tests/test_raw.py

The log comes from a `sitecustomize.py` put first on PYTHONPATH, so the launches of the suite log
themselves whatever starts them (torchrun, Lightning's launcher, the harness). A process killed by a
signal or ended by `os._exit` writes no exit line: it is counted as started, its CPU time is missing
from the sum (the last line compares the sum with what the kernel counted for the whole run). A
process is put to the test that was running when it started (PYTEST_CURRENT_TEST, inherited), and a
fixture's processes to the first test that used it. On a machine the suite keeps busy, wall time is
CPU time over the cores: docs/testing.md reads these figures that way.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_TEST_COMMAND = ["-q", "-n", "auto", "--dist", "loadfile", "-p", "no:cacheprovider"]

SITECUSTOMIZE = """\
import atexit, json, os, sys
_LOG = os.environ.get("DDP_PARITY_PROCESS_LOG")
if _LOG:
    def _log(event):
        t = os.times()
        line = {"event": event, "pid": os.getpid(), "argv": sys.argv[:3],
                "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "cpu": t.user + t.system}
        with open(_LOG, "a") as f:
            f.write(json.dumps(line) + "\\n")
    _log("start")
    atexit.register(_log, "exit")
"""

# what a process is, read off the argv it had at start-up (`-m` and `-c` are still there then)
KINDS = (
    ("torchrun agent", lambda a: "torchrun" in a[0] or (a[0] == "-m" and a[1:2] and a[1].startswith("--n"))),
    ("harness", lambda a: "compare/run.py" in a[0]),
    ("raw worker", lambda a: any(k in a[0] for k in ("raw/", "watch_twins", "train_raw"))),
    ("own loop or test script", lambda a: "/tests/" in a[0] or "pytest-of" in a[0]),
    ("Lightning process", lambda a: (a[0] == "-m" and a[1:2] in (["fit"], ["--config"])) or "lightning" in a[0]),
    ("DataLoader or spawn worker", lambda a: "multiprocessing" in " ".join(a)),
)


def kind_of(argv: list[str]) -> str:
    return next((name for name, matches in KINDS if argv and matches(argv)), "pytest workers and the rest")


def run_suite(pytest_args: list[str], log: Path) -> tuple[float, float, int]:
    """Run pytest with every process logging; (wall seconds, CPU seconds the kernel counted, exit code)."""
    with tempfile.TemporaryDirectory() as site:
        Path(site, "sitecustomize.py").write_text(SITECUSTOMIZE)
        env = {**os.environ, "DDP_PARITY_PROCESS_LOG": str(log)}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH")) if p)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        code = subprocess.call([sys.executable, "-m", "pytest", *pytest_args], cwd=REPO, env=env)
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, code


def read_log(log: Path) -> list[dict]:
    """One row per process: its kind, test, and CPU time (None where it wrote no exit line)."""
    starts, exits = {}, {}
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        (starts if entry["event"] == "start" else exits)[entry["pid"]] = entry
    return [
        {
            "kind": kind_of(entry["argv"]),
            "test": entry["test"].rsplit(" ", 1)[0] or "(none)",
            "cpu": exits[pid]["cpu"] if pid in exits else None,
        }
        for pid, entry in starts.items()
    ]


def print_tables(processes: list[dict], wall: float, cpu: float, top: int) -> None:
    logged = sum(p["cpu"] for p in processes if p["cpu"] is not None)
    print(f"wall {wall / 60:.1f} min, CPU {cpu:.0f} s ({cpu / wall:.2f} cores busy on average)\n")
    by_kind = collections.defaultdict(list)
    for p in processes:
        by_kind[p["kind"]].append(p["cpu"])
    print(f"{'process':30s} {'started':>8s} {'exited':>7s} {'CPU-s each':>11s} {'CPU-s':>7s}")
    for kind, cpus in sorted(by_kind.items(), key=lambda item: -sum(c for c in item[1] if c is not None)):
        done = [c for c in cpus if c is not None]
        each = f"{sum(done) / len(done):.2f}" if done else "-"
        print(f"{kind:30s} {len(cpus):8d} {len(done):7d} {each:>11s} {sum(done):7.0f}")
    print(f"{'logged':30s} {len(processes):8d} {'':7s} {'':11s} {logged:7.0f} of the {cpu:.0f} CPU-s counted\n")
    by_test = collections.defaultdict(list)
    for p in processes:
        by_test[p["test"]].append(p["cpu"] or 0.0)
    print(f"{'CPU-s':>7s} {'processes':>9s}  test (with the fixtures it was first to use)")
    for test, cpus in sorted(by_test.items(), key=lambda item: -sum(item[1]))[:top]:
        print(f"{sum(cpus):7.1f} {len(cpus):9d}  {test}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=15, help="how many of the costliest tests to list")
    parser.add_argument("pytest_args", nargs="*", help="pytest's arguments (default: the README's test command's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp, "processes.jsonl")
        wall, cpu, code = run_suite(args.pytest_args or README_TEST_COMMAND, log)
        print_tables(read_log(log), wall, cpu, args.top)
    if code != 0:
        sys.exit(f"pytest exited with {code}: the figures above are of a failed run")


if __name__ == "__main__":
    main()
