"""Run corpus cases and score their diagnoses: detection, first step exact, category, module, fix
words, false positives on the clean pairs, and the confusion matrix of categories."""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bugs.cases import Case
from benchmarks.bugs.loops import fit_trainer, train_loop, watch_every_step
from ddp_parity import compare_traces
from ddp_parity.compare.story import story_problems


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
    watch_every_step()
    started = time.perf_counter()
    a, b = workdir / "a", workdir / "b"
    train_loop(a, "raw" if case.b_trainer else "reference", case.a)
    if case.b_trainer:
        fit_trainer(b, "lightning", case.b, **case.trainer)
    else:
        train_loop(b, "changed", case.b)
    report = compare_traces(a, b)
    story = story_problems(report["diagnosis"], a, b, report["first_divergence"])
    return Outcome(case, report["diagnosis"], story, time.perf_counter() - started)


def run_cases(cases, workdir: Path | None = None) -> list[Outcome]:
    with tempfile.TemporaryDirectory(prefix="ddp-parity-bugs-") as tmp:
        root = Path(workdir or tmp)
        return [run_case(case, root / f"case{i:02d}") for i, case in enumerate(cases)]


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
