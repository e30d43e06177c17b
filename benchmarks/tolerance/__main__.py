"""Rules side by side: which tolerance tells rounding from a bug, on the same pairs of 320-step runs.

    python -m benchmarks.tolerance                 # every pair; prints the table (docs/tolerance.md)
    python -m benchmarks.tolerance --keep DIR      # keep the runs in DIR

Correct pairs differ only in how they round (threads, ATen's kernel set, MKL's path, bf16 autocast, a
snapshot resumed under another arithmetic); buggy pairs carry one subtle slip, the buggy side also
under ATen's scalar kernels. Each rule is judged on every pair: a correct pair called different is a
false alarm, a buggy pair called equivalent a miss, and for a caught bug the step it was caught
against the step the bug first acts. The loop is benchmarks/tolerance/loop.py, recorded through the
public plugin API; `--tolerance noise` gets three controls of the base side (ATen DEFAULT, and the
initial weights one ulp off with two seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ddp_parity import compare_traces
from ddp_parity.compare.noise import last_records, relative
from ddp_parity.trace import read_meta

ATEN = {"ATEN_CPU_CAPABILITY": "default"}
MKL = {"MKL_CBWR": "COMPATIBLE"}
EPS32 = 2.0**-23
RTOL = 1e-5  # the fixed rule, and Megatron-LM's golden-value rule on losses
TTRACE_K, TTRACE_C = 8.0, 2.0  # TTrace's bound k * C^(L+1-l) * eps (constants chosen here; see docs/tolerance.md)


@dataclass
class Run:
    name: str
    flags: list[str] = field(default_factory=list)
    env: dict = field(default_factory=dict)
    resume_env: dict | None = None  # set: stop at step 160, resume in a new process with this environment


@dataclass
class Pair:
    name: str
    base: str  # the run it is compared with (and whose controls judge it under noise)
    run: Run
    acts_at: int | None = None  # a bug: the step it first changes what is computed


def controls(family: str, flags: list[str]) -> list[Run]:
    return [
        Run(f"{family}-control-aten", flags, ATEN),
        Run(f"{family}-control-ulp-a", [*flags, "--init-ulps-seed", "1"]),
        Run(f"{family}-control-ulp-b", [*flags, "--init-ulps-seed", "2"]),
    ]


def first_batch_holding(sample: int) -> int:
    """The step whose batch holds `sample` in the first epoch (the loop's seeded order)."""
    from benchmarks.tolerance.loop import BATCH, SAMPLES

    order = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(0))
    return int((order == sample).nonzero()) // BATCH + 1


def pairs(clip_acts_at) -> list[Pair]:
    bf16 = ["--bf16"]
    correct = [
        Pair("threads 1 vs 2", "fp32", Run("threads2", ["--threads", "2"])),
        Pair("ATen DEFAULT on one side", "fp32", Run("aten", [], ATEN)),
        Pair("MKL_CBWR=COMPATIBLE on one side", "fp32", Run("mkl", [], MKL)),
        Pair("threads 2 and ATen DEFAULT", "fp32", Run("threads2-aten", ["--threads", "2"], ATEN)),
        Pair("threads 2 and MKL compatible", "fp32", Run("threads2-mkl", ["--threads", "2"], MKL)),
        Pair("resumed at step 160 under ATen DEFAULT", "fp32", Run("resume-aten", [], {}, ATEN)),
        Pair("bf16 autocast, ATen DEFAULT on one side", "bf16", Run("bf16-aten", bf16, ATEN)),
        Pair("bf16 autocast, threads 1 vs 2", "bf16", Run("bf16-threads2", [*bf16, "--threads", "2"])),
    ]
    sample = 1234
    bugs = [
        Pair("lr 1% off", "fp32", Run("lr", ["--lr-factor", "1.01"], ATEN), 1),
        Pair("weight decay 1e-4 on one side", "fp32", Run("wd", ["--weight-decay", "1e-4"], ATEN), 1),
        Pair("label smoothing 0.01 on one side", "fp32", Run("smoothing", ["--label-smoothing", "0.01"], ATEN), 1),
        Pair("bias group's momentum 0.95", "fp32", Run("momentum", ["--bias-momentum", "0.95"], ATEN), 2),
        Pair("loss divided by a world of 4 twice", "fp32", Run("scale", ["--loss-scale", "0.25"], ATEN), 1),
        Pair("dropout p 0.11 vs 0.1", "fp32", Run("dropout", ["--dropout", "0.11"], ATEN), 1),
        Pair(
            f"1 sample in {4096} dropped (sample {sample})",
            "fp32",
            Run("drop", ["--drop-sample", str(sample)], ATEN),
            first_batch_holding(sample),
        ),
        Pair("gradient clipped at norm 1.0 on one side", "fp32", Run("clip", ["--clip", "1.0"], ATEN), clip_acts_at),
    ]
    return correct + bugs


def train(run: Run, root: Path) -> Path:
    out = root / run.name
    if (out / "meta.json").is_file() and (out / "final.safetensors").is_file():
        return out
    command = [sys.executable, "-m", "benchmarks.tolerance.loop", str(out), *run.flags]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **run.env}
    if run.resume_env is None:
        subprocess.run(command, env=env, check=True, capture_output=True)
    else:
        subprocess.run([*command, "--stop-at", "160"], env=env, check=True, capture_output=True)
        subprocess.run([*command, "--resume"], env={**env, **run.resume_env}, check=True, capture_output=True)
    return out


# ---------------------------------------------------------------------------------------------
# the rules: each returns the step it calls the pair different at, or None (equivalent)


def rule_exact(a: Path, b: Path, _controls) -> int | None:
    report = compare_traces(a, b)
    return None if report["verdict"] == "equivalent" else _step(report)


def rule_rtol(a: Path, b: Path, _controls) -> int | None:
    report = compare_traces(a, b, rtol=RTOL)
    return None if report["verdict"] == "equivalent" else _step(report)


def rule_megatron(a: Path, b: Path, _controls) -> int | None:
    """Golden values: losses within rtol 1e-5, up to max(1, steps/100) failing steps allowed."""
    losses_a, losses_b = _per_step(a, "loss"), _per_step(b, "loss")
    allowed = max(1, len(losses_a) // 100)
    failing = 0
    for step in sorted(losses_a):
        if abs(losses_a[step] - losses_b[step]) > RTOL * abs(losses_a[step]):
            failing += 1
            if failing > allowed:
                return step
    return None


def rule_ttrace(a: Path, b: Path, _controls) -> int | None:
    """TTrace's bound on gradients, per layer: relative error <= k * C^(L+1-l) * eps (l counts the
    Linear layers from the input, L of them). The trace holds each layer's gradient norm, whose
    relative difference is a lower bound of the gradient's relative error."""
    names = read_meta(a)["layers"]["names"]
    linear = sorted({int(n.split(".")[0]) for n in names})
    depth = {n: linear.index(int(n.split(".")[0])) + 1 for n in names}
    records_a, records_b = last_records(a), last_records(b)
    for step in sorted(set(records_a) & set(records_b)):
        rows_a, rows_b = records_a[step][0]["layers"], records_b[step][0]["layers"]
        for name, row_a, row_b in zip(names, rows_a, rows_b):
            bound = TTRACE_K * TTRACE_C ** (len(linear) + 1 - depth[name]) * EPS32
            if relative(row_a[1], row_b[1]) > bound:
                return step
    return None


def rule_noise(a: Path, b: Path, controls) -> int | None:
    report = compare_traces(a, b, controls=controls)
    if report["verdict"] in ("equivalent", "equivalent_within_noise"):
        return None
    departure = (report.get("noise") or {}).get("departure")
    exact = report.get("first_divergence") or {}
    if report["diagnosis"]["category"] == "noise" and departure:
        return departure["step"]
    return exact.get("step") if departure is None else min(departure["step"], exact.get("step") or math.inf)


def _step(report: dict) -> int | None:
    return (report.get("first_divergence") or {}).get("step")


def _per_step(run: Path, key: str) -> dict[int, float]:
    return {step: ranks[0][key] for step, ranks in last_records(run).items()}


RULES = {
    "exact": rule_exact,
    f"rtol {RTOL:g}": rule_rtol,
    "Megatron golden values": rule_megatron,
    "TTrace bound": rule_ttrace,
    "--tolerance noise": rule_noise,
}


def clip_step(base: Path, threshold: float = 1.0) -> int | None:
    """The first step whose gradient norm exceeds the threshold: where clipping first acts."""
    norms = _per_step(base, "grad_norm")
    return next((s for s in sorted(norms) if norms[s] > threshold), None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", default=None, help="folder for the runs (reused when it holds them)")
    p.add_argument("--jobs", type=int, default=2, help="runs trained at once")
    args = p.parse_args(argv)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tolerance-"))
    families = {"fp32": [], "bf16": ["--bf16"]}
    bases = {name: Run(name, flags) for name, flags in families.items()}
    control_runs = {name: controls(name, flags) for name, flags in families.items()}
    with ThreadPoolExecutor(args.jobs) as pool:
        paths = dict(zip(bases, pool.map(lambda r: train(r, root), bases.values())))
        control_paths = {f: list(pool.map(lambda r: train(r, root), runs)) for f, runs in control_runs.items()}
        all_pairs = pairs(clip_step(paths["fp32"]))
        pair_paths = list(pool.map(lambda pair: train(pair.run, root), all_pairs))
    results = []
    for pair, path in zip(all_pairs, pair_paths):
        base = paths[pair.base]
        steps = {rule: fn(base, path, control_paths[pair.base]) for rule, fn in RULES.items()}
        results.append((pair, steps))
    print(format_table(results))
    print(format_scores(results))
    (root / "tolerance.json").write_text(
        json.dumps([{"pair": p.name, "acts_at": p.acts_at, "caught_at": s} for p, s in results], indent=1)
    )
    print(f"runs: {root}")
    return 0


def cell(pair: Pair, step: int | None) -> str:
    if pair.acts_at is None:
        return "ok" if step is None else f"FALSE ALARM (step {step})"
    if step is None:
        return "MISSED"
    return f"step {step}" + ("" if abs(step - pair.acts_at) <= 1 else " (late)" if step > pair.acts_at else " (early)")


def format_table(results) -> str:
    header = ["pair", "acts at", *RULES]
    rows = [[p.name, str(p.acts_at or "-"), *(cell(p, s[r]) for r in RULES)] for p, s in results]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines.append("-|-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def format_scores(results) -> str:
    lines = []
    for rule in RULES:
        alarms = sum(1 for p, s in results if p.acts_at is None and s[rule] is not None)
        correct = sum(1 for p, _ in results if p.acts_at is None)
        misses = sum(1 for p, s in results if p.acts_at is not None and s[rule] is None)
        caught = [(p, s[rule]) for p, s in results if p.acts_at is not None and s[rule] is not None]
        on_time = sum(1 for p, step in caught if abs(step - p.acts_at) <= 1)
        bugs = len(results) - correct
        lines.append(
            f"{rule:24s} false alarms {alarms}/{correct}  misses {misses}/{bugs}  caught within 1 step {on_time}/{bugs}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
