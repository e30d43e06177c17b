"""Run corpus cases and score their diagnoses: detection, first step exact, category, module, fix
words, false positives on the clean pairs, and the confusion matrix of categories."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

from benchmarks.bugs.cases import Case
from benchmarks.bugs.loops import fit_trainer, train_loop, watch_every_step
from ddp_parity import compare_traces, destroy_process_group
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.story import story_problems
from ddp_parity.harness.launch import free_port
from ddp_parity.hooks import recording_env

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    case: Case
    diagnosis: dict
    story: list[str]
    seconds: float

    @property
    def category(self) -> str:
        return self.diagnosis["category"]

    @property
    def detected(self) -> bool:
        return self.category != "equivalent"

    @property
    def step_exact(self) -> bool:
        return self.diagnosis.get("step") == self.case.step

    @property
    def category_right(self) -> bool:
        return self.category == self.case.category

    @property
    def module_right(self) -> bool | None:
        """None where no module is involved."""
        if self.case.module is None:
            return None
        name = (self.diagnosis.get("module") or {}).get("name") or ""
        return name == self.case.module or name.startswith(self.case.module + ".")

    @property
    def fix_named(self) -> bool:
        return self.case.fix in (self.diagnosis.get("advice") or "")

    @property
    def right(self) -> bool:
        if self.case.clean:
            return not self.detected and not self.story
        checks = (self.detected, self.step_exact, self.category_right, self.fix_named, self.module_right is not False)
        return all(checks) and not self.story


def run_case(case: Case, workdir: Path) -> Outcome:
    """Train both sides of one case in this process (a DDP case: in its own rank processes), diagnose."""
    if case.world > 1:
        return run_ddp_cases([case], workdir)[0]
    watch_every_step()
    started = time.perf_counter()
    a, b = workdir / "a", workdir / "b"
    if case.b_trainer:
        train_loop(a, "raw", case.a)
        fit_trainer(b, "lightning", case.b, **case.trainer)
    else:
        train_sides([(a, "reference", case.a), (b, "changed", case.b)])
    return diagnose_case(case, workdir, started)


def train_sides(sides: list[tuple[Path, str, object]]) -> None:
    """Loop sides (run directory, side, setup): in this process where the loop records itself; where the hooks
    record it, each in a process of its own under `ddp-parity record`'s environment (the hooks patch torch for the
    whole process they run in), those processes run side by side (one CPU thread each)."""
    hooked = []
    for run_dir, side, s in sides:
        if s.recorded_by == "hooks":
            hooked.append((side, start_hooked(run_dir, side, s)))
        else:
            train_loop(run_dir, side, s)
    for side, process in hooked:
        try:
            _, err = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"{side} (recorded by the hooks) exited {process.returncode}:\n{err[-4000:]}")


def start_hooked(run_dir: Path, side: str, s) -> subprocess.Popen:
    """The loop of `s` started in a process of its own, recorded into `run_dir` by the hooks."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    setup = run_dir.parent / f"{side}.setup.pickle"
    setup.write_bytes(pickle.dumps(s))
    env = recording_env(run_dir, side, {**os.environ, "OMP_NUM_THREADS": "1"})
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(REPO)])
    code = (
        "import pickle, sys; from pathlib import Path; from benchmarks.bugs.loops import train_loop; "
        "train_loop(Path(sys.argv[1]), sys.argv[2], pickle.loads(Path(sys.argv[3]).read_bytes()))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(run_dir), side, str(setup)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_ddp_cases(cases: list[Case], root: Path) -> list[Outcome]:
    """DDP cases of one world size, all in one set of rank processes (the ranks import torch once)."""
    watch_every_step()
    started = time.perf_counter()
    workdirs = [root / f"ddp{i:02d}" for i in range(len(cases))]
    world = cases[0].world
    assert all(c.world == world for c in cases), "one world size per set of ranks"
    mp.spawn(_rank, args=(cases, world, free_port(), [str(w) for w in workdirs]), nprocs=world, join=True)
    return [diagnose_case(case, workdir, started) for case, workdir in zip(cases, workdirs)]


def _rank(rank: int, cases: list[Case], world: int, port: int, workdirs: list[str]) -> None:
    """One gloo rank on 127.0.0.1: every case's side a, then its side b."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for case, workdir in zip(cases, workdirs):
            train_loop(Path(workdir) / "a", "reference", case.a)
            train_loop(Path(workdir) / "b", "changed", case.b)
    finally:
        destroy_process_group()


def diagnose_case(case: Case, workdir: Path, started: float) -> Outcome:
    a, b = workdir / "a", workdir / "b"
    report = compare_traces(a, b)
    story = story_problems(Finding.from_json(report["diagnosis"]), a, b, report["first_divergence"])
    return Outcome(case, report["diagnosis"], story, time.perf_counter() - started)


def run_cases(cases, workdir: Path | None = None) -> list[Outcome]:
    with tempfile.TemporaryDirectory(prefix="ddp-parity-bugs-") as tmp:
        root = Path(workdir or tmp)
        ddp = [c for c in cases if c.world > 1]
        done = {c.name: o for c, o in zip(ddp, run_ddp_cases(ddp, root) if ddp else [])}
        return [done.get(c.name) or run_case(c, root / f"case{i:02d}") for i, c in enumerate(cases)]


def scores(outcomes: list[Outcome]) -> dict:
    bugs = [o for o in outcomes if not o.case.clean]
    clean = [o for o in outcomes if o.case.clean]
    with_module = [o for o in bugs if o.module_right is not None]
    return {
        "bugs": len(bugs),
        "clean pairs": len(clean),
        "detected": sum(o.detected for o in bugs),
        "first step exact": sum(o.step_exact for o in bugs),
        "category right": sum(o.category_right for o in bugs),
        "module right": (sum(bool(o.module_right) for o in with_module), len(with_module)),
        "advice names the fix": sum(o.fix_named for o in bugs),
        "false positives": sum(o.detected for o in clean),
        "inconsistent stories": sum(bool(o.story) for o in outcomes),
    }


def confusion(outcomes: list[Outcome]) -> Counter:
    return Counter((o.case.category, o.category) for o in outcomes)
