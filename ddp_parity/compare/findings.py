"""The report's types, in the one place they are defined: a `Finding` (the diagnosis: what differs,
where, why, the fix and the evidence) and the `Report` it sits in (verdict, figures, labels, timing,
warnings, and what the launches left). `pipeline.build_report` and `harness.comparing`'s
`failed_report`/`unreadable_report` construct a Report; every output renders one: the terminal text
(report.py, diagnosis.format_diagnosis), report.json (`to_json`, the keys docs/trace-format.md
documents), report.html, the pytest failure message and the matrix table.

`from_json` reads report.json back, tolerantly: a page can be re-rendered from a report written by
an older version or edited by hand (a part of the wrong type is left out, never a crash). Nothing
here imports the comparison: the types sit below it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path

from ddp_parity.trace_files import TraceFormatError, read_meta

# the verdicts that pass: bitwise (or within --rtol/--atol), and within the noise the controls measured
EQUIVALENT = ("equivalent", "equivalent_within_noise")


def step_and_rank(found: dict | Finding) -> str:
    """` at step 5 rank 1` for a divergence, finding or module finding: the parts it has, or ''."""
    step, rank = (found.get("step"), found.get("rank")) if isinstance(found, dict) else (found.step, found.rank)
    return (f" at step {step}" if step is not None else "") + (f" rank {rank}" if rank is not None else "")


def first_sentence(text: str) -> str:
    """The headline of an explanation: up to its first full stop followed by a space."""
    head, sep, _ = text.partition(". ")
    return head + "." if sep else text


def criterion_in_words(criterion, *, bitwise: str = "exact") -> str:
    """A report's `criterion` ("exact" or {rtol, atol}) as the rule it is."""
    if criterion == "exact" or criterion is None:
        return bitwise
    if isinstance(criterion, dict):
        return f"|a-b| <= {criterion.get('atol')} + {criterion.get('rtol')}*|b|"
    return str(criterion)


def as_dict(value) -> dict:
    """A report part that should be a dict, or {} (a hand-edited report may be odd)."""
    return value if isinstance(value, dict) else {}


def evaluations_not_compared(summary: dict, names) -> str:
    """Why the hooks' evaluations (the report's `evaluations` section) were compared nowhere, from what each side
    recorded: the table's row and the EQUIVALENT line say it alike."""
    recorded, unseen = (_two_counts(summary.get(key)) for key in ("recorded", "unseen"))
    kept = [r - u for r, u in zip(recorded, unseen)]
    if not any(recorded):
        return "none recorded"
    parts = [f"{n} on {names[i]} left out, their outputs unmoved by the weights" for i, n in enumerate(unseen) if n]
    paired = sum(_count_of(summary.get(key)) for key in ("unlike", "split"))
    if all(kept) and paired:  # paired at points both share, none comparable: said as such, never "no point shared"
        parts.append(
            f"{paired} pair(s) at points both sides share, none comparable ({kept[0]} on {names[0]}, {kept[1]} on "
            f"{names[1]})"
        )
    elif all(kept):
        parts.append(f"none at a point both sides share ({kept[0]} on {names[0]}, {kept[1]} on {names[1]})")
    elif any(kept):
        side = 0 if kept[0] else 1
        parts.append(f"{kept[side]} on {names[side]}, none on {names[1 - side]} to pair them with")
    return "; ".join(parts)


def _count_of(value) -> int:
    """The `count` of a report section's entry ({count, ...}), or 0."""
    count = value.get("count") if isinstance(value, dict) else None
    return count if isinstance(count, int) else 0


def _two_counts(value) -> list[int]:
    """[a, b] counts of a report's section, or [0, 0] (an older or hand-edited report has none)."""
    ok = isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)
    return value if ok else [0, 0]


@dataclass
class Finding:
    """One diagnosis. `category` is one of diagnosis.CATEGORIES, `kind` the category or a finer
    cause within it (`config.threads`); `explanation` is the facts and the why, `advice` the fix;
    `module` the module localisation, `candidates` the ranked causes of an undetermined finding,
    `unchecked` the evidence a side did not record, `setup_differs` a setup finding beside an
    equivalent verdict."""

    category: str
    kind: str
    step: int | None = None
    rank: int | None = None
    explanation: str = ""
    advice: str = ""
    evidence: dict = field(default_factory=dict)
    module: dict | None = None
    candidates: list[dict] = field(default_factory=list)
    unchecked: list[dict] = field(default_factory=list)
    setup_differs: Finding | None = None

    @property
    def headline(self) -> str:
        return first_sentence(self.explanation)

    @property
    def line(self) -> str:
        """`category at step N rank R`: what and where in a few words."""
        return f"{self.category}{step_and_rank(self)}"

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["setup_differs"] = self.setup_differs.to_json() if self.setup_differs else None
        return out

    @classmethod
    def from_json(cls, value) -> Finding | None:
        if not isinstance(value, dict):
            return None
        return cls(
            category=str(value.get("category", "unknown")),
            kind=str(value.get("kind") or value.get("category", "unknown")),
            step=value.get("step"),
            rank=value.get("rank"),
            explanation=str(value.get("explanation") or ""),
            advice=str(value.get("advice") or ""),
            evidence=as_dict(value.get("evidence")),
            module=value.get("module") if isinstance(value.get("module"), dict) else None,
            candidates=[c for c in value.get("candidates") or [] if isinstance(c, dict)],
            unchecked=[u for u in value.get("unchecked") or [] if isinstance(u, dict)],
            setup_differs=cls.from_json(value.get("setup_differs")),
        )


# the comparator's figures: report.json's keys of the per-quantity comparison
FIGURE_KEYS = ("per_step", "losses", "validation", "params", "steps", "problems")


@dataclass
class Report:
    """What one comparison (or a launch that did not get to one) says. `figures`: the comparator's
    per-quantity figures (FIGURE_KEYS); `sections`: what a mode adds (logs, commands, seconds, plot,
    pairs, replay, reference, fault, ...), written as they are; `curves` (step -> mean loss per side,
    for the plot) is not written."""

    verdict: str
    criterion: str | dict = "exact"
    labels: tuple[str, str] = ("a", "b")
    runs: dict = field(default_factory=dict)
    first_divergence: dict | None = None
    diagnosis: Finding | None = None
    warnings: list[dict] = field(default_factory=list)
    timing: dict | None = None
    noise: dict | None = None
    failure: dict | None = None
    figures: dict = field(default_factory=dict)
    sections: dict = field(default_factory=dict)
    curves: dict = field(default_factory=dict, repr=False)

    @property
    def passes(self) -> bool:
        return self.verdict in EQUIVALENT

    @property
    def failed(self) -> bool:
        return self.verdict == "failed"

    @property
    def verdict_word(self) -> str:
        return self.verdict.replace("_", " ").upper()

    @property
    def steps_compared(self) -> int:
        """Rank-steps compared (run A's)."""
        steps = as_dict(self.figures.get("steps"))
        return sum(v for v in as_dict(steps.get("steps_a")).values() if isinstance(v, int))

    def criterion_text(self, *, bitwise: str = "exact") -> str:
        """The rule the verdict was reached by, in words."""
        if self.noise:
            controls = len(self.noise.get("controls") or [])
            return f"against measured noise, {controls} controls x {self.noise.get('factor', 0):g}"
        return criterion_in_words(self.criterion, bitwise=bitwise)

    def to_json(self) -> dict:
        """report.json's content (docs/report.md)."""
        out = {
            **self.figures,
            **self.sections,
            "verdict": self.verdict,
            "criterion": self.criterion,
            "labels": {"a": self.labels[0], "b": self.labels[1]},
            "runs": self.runs,
            "first_divergence": self.first_divergence,
            "diagnosis": self.diagnosis.to_json() if self.diagnosis else None,
            "warnings": self.warnings,
        }
        for key in ("timing", "noise", "failure"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, value: dict) -> Report:
        """A report read back from report.json (tolerant: see the module's docstring)."""
        own = {"verdict", "criterion", "labels", "runs", "first_divergence", "diagnosis", "warnings"}
        own |= {"timing", "noise", "failure"}
        diagnosis = Finding.from_json(value.get("diagnosis"))
        runs = as_dict(value.get("runs"))
        return cls(
            verdict=str(value.get("verdict", "unknown")),
            criterion=value.get("criterion", "exact"),
            labels=labels_from_json(value, diagnosis, runs),
            runs=runs,
            first_divergence=value.get("first_divergence") if isinstance(value.get("first_divergence"), dict) else None,
            diagnosis=diagnosis,
            warnings=value.get("warnings") if isinstance(value.get("warnings"), list) else [],
            timing=value.get("timing") if isinstance(value.get("timing"), dict) else None,
            noise=value.get("noise") if isinstance(value.get("noise"), dict) else None,
            failure=value.get("failure") if isinstance(value.get("failure"), dict) else None,
            figures={k: value[k] for k in FIGURE_KEYS if k in value},
            sections={k: v for k, v in value.items() if k not in own and k not in FIGURE_KEYS},
        )


def labels_from_json(value: dict, diagnosis: Finding | None, runs: dict) -> tuple[str, str]:
    """The runs' labels of a report read back: its `labels`, else the diagnosis's sides, else each
    run's meta side, else `run A` and `run B`; two equal labels are told apart."""
    given = as_dict(value.get("labels"))
    known = as_dict(diagnosis.evidence.get("sides")) if diagnosis else {}
    names = []
    for key, fallback in (("a", "run A"), ("b", "run B")):
        name = given.get(key) or known.get(key)
        if not name and runs.get(key):
            try:
                name = read_meta(Path(str(runs[key]))).get("side")
            except (TraceFormatError, OSError, TypeError):
                name = None
        names.append(str(name or fallback))
    if names[0] == names[1]:
        return f"{names[0]} (A)", f"{names[1]} (B)"
    return names[0], names[1]
