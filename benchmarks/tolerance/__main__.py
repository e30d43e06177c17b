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
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch

from benchmarks.tolerance.loop import BATCH, SAMPLES
from ddp_parity import compare_traces
from ddp_parity.compare.comparator import Criterion, compare_runs, compare_to_reference
from ddp_parity.compare.noise import FACTOR, Controls, last_records, relative
from ddp_parity.harness.comparing import compare_against_reference
from ddp_parity.harness.modes.mistake import catalogue
from ddp_parity.trace import read_meta

REPO = Path(__file__).resolve().parents[2]
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
    cause: str | None = None  # a bug: the category a right diagnosis names


def controls(family: str, flags: list[str]) -> list[Run]:
    return [
        Run(f"{family}-control-aten", flags, ATEN),
        Run(f"{family}-control-ulp-a", [*flags, "--init-ulps-seed", "1"]),
        Run(f"{family}-control-ulp-b", [*flags, "--init-ulps-seed", "2"]),
    ]


def first_batch_holding(sample: int, epoch: int = 0) -> int:
    """The step whose batch holds `sample` in that epoch (the loop's seeded order)."""
    order = torch.randperm(SAMPLES, generator=torch.Generator().manual_seed(epoch))
    return epoch * (SAMPLES // BATCH) + int((order == sample).nonzero()) // BATCH + 1


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
        Pair("lr 1% off", "fp32", Run("lr", ["--lr-factor", "1.01"], ATEN), 1, "param_groups"),
        Pair("weight decay 1e-4 on one side", "fp32", Run("wd", ["--weight-decay", "1e-4"], ATEN), 1, "param_groups"),
        Pair("label smoothing 0.01", "fp32", Run("smoothing", ["--label-smoothing", "0.01"], ATEN), 1, "loss"),
        Pair(
            "bias group's momentum 0.95", "fp32", Run("momentum", ["--bias-momentum", "0.95"], ATEN), 2, "param_groups"
        ),
        Pair(
            "class 0 weighs 1.1 in the loss", "fp32", Run("class-weight", ["--class-0-weight", "1.1"], ATEN), 1, "loss"
        ),
        Pair("loss / world 4 twice", "fp32", Run("scale", ["--loss-scale", "0.25"], ATEN), 1, "gradients"),
        Pair("dropout p 0.11 vs 0.1", "fp32", Run("dropout", ["--dropout", "0.11"], ATEN), 1, "module_state"),
        Pair(
            f"1 sample in {4096} dropped (sample {sample})",
            "fp32",
            Run("drop", ["--drop-sample", str(sample)], ATEN),
            first_batch_holding(sample),
            "data_pipeline",
        ),
        Pair(
            "gradient clipped at norm 1.0 on one side",
            "fp32",
            Run("clip", ["--clip", "1.0"], ATEN),
            clip_acts_at,
            "gradients",
        ),
    ]
    # slips that start late, when the runs' rounding has long drifted apart
    late = 6 * (SAMPLES // BATCH) + 1
    late_drop = first_batch_holding(sample, epoch=6)
    bugs += [
        Pair(
            "label smoothing 0.01 from step 161",
            "fp32",
            Run("smoothing-161", ["--label-smoothing", "0.01", "--slip-from", "161"], ATEN),
            161,
            "loss",
        ),
        Pair(
            "weight decay 1e-4 from step 241",
            "fp32",
            Run("wd-241", ["--weight-decay", "1e-4", "--slip-from", "241"], ATEN),
            241,
            "optimizer",
        ),
        Pair(
            f"sample {sample} dropped from epoch 6",
            "fp32",
            Run("drop-epoch6", ["--drop-sample", str(sample), "--slip-from", str(late)], ATEN),
            late_drop,
            "data_pipeline",
        ),
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


def rule_exact(a: Path, b: Path, _controls, merged: bool) -> int | None:
    return _criterion_rule(a, b, Criterion(), merged)


def rule_rtol(a: Path, b: Path, _controls, merged: bool) -> int | None:
    return _criterion_rule(a, b, Criterion(RTOL, 0.0), merged)


def _criterion_rule(a: Path, b: Path, criterion: Criterion, merged: bool) -> int | None:
    comparison = compare_to_reference(a, b, criterion) if merged else compare_runs(a, b, criterion)
    return None if comparison.equivalent else (comparison.first_divergence or {}).get("step")


def rule_megatron(a: Path, b: Path, _controls, merged: bool) -> int | None:
    """Golden values: losses within rtol 1e-5, up to max(1, steps/100) failing steps allowed."""
    losses_a, losses_b = _per_step(a, "loss", merged), _per_step(b, "loss")
    allowed = max(1, len(losses_a) // 100)
    failing = 0
    for step in sorted(losses_a):
        if abs(losses_a[step] - losses_b[step]) > RTOL * abs(losses_a[step]):
            failing += 1
            if failing > allowed:
                return step
    return None


def rule_ttrace(a: Path, b: Path, _controls, merged: bool) -> int | None:
    """TTrace's bound on gradients, per layer: relative error <= k * C^(L+1-l) * eps (l counts the
    Linear layers from the input, L of them). The trace holds each layer's gradient norm, whose
    relative difference is a lower bound of the gradient's relative error."""
    names = (read_meta(a).get("layers") or {}).get("names") or []
    index = {n: next(int(part) for part in n.split(".") if part.isdigit()) for n in names}  # net.0.weight: 0
    linear = sorted(set(index.values()))
    depth = {n: linear.index(index[n]) + 1 for n in names}
    records_a, records_b = last_records(a, merged), last_records(b)
    for step in sorted(set(records_a) & set(records_b)):
        rows_a, rows_b = records_a[step][0].get("layers"), records_b[step][0].get("layers")
        if not rows_a or not rows_b:
            return None  # no per-layer gradient norms (an FSDP2 run records none): nothing to bound
        for name, row_a, row_b in zip(names, rows_a, rows_b):
            bound = TTRACE_K * TTRACE_C ** (len(linear) + 1 - depth[name]) * EPS32
            if relative(row_a[1], row_b[1]) > bound:
                return step
    return None


def rule_noise(a: Path, b: Path, controls, merged: bool) -> int | None:
    """The harness's own path: every pair against the noise the controls measured from run a. The step
    it names: the diagnosis's (the first exact difference or the departure, whichever came first),
    else where the pair leaves the envelope (a setup finding), else the first exact difference."""
    entry = compare_against_reference(a, b, 0.0, 0.0, Controls.measured(a, controls, FACTOR)) if merged else None
    if entry is None:
        entry = compare_traces(a, b, controls=controls)
    if entry["verdict"] in ("equivalent", "equivalent_within_noise"):
        return None
    departure = entry["noise"]["departure"]
    steps = [(entry.get("diagnosis") or {}).get("step"), departure and departure["step"]]
    steps.append((entry.get("first_divergence") or {}).get("step"))
    return next(step for step in steps if step is not None)


def _per_step(run: Path, key: str, merged: bool = False) -> dict[int, float]:
    return {step: ranks[0][key] for step, ranks in last_records(run, merged).items()}


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


# ---------------------------------------------------------------------------------------------
# the twins through the harness: world-4 pairs and the --mistake catalogue, under --tolerance noise

# mistakes that change only how sums round (thread count; FSDP2's gradient sync on every micro-batch
# sums the micro-batches in another order, and reduce-scatters once per micro-batch)
ROUNDING_ONLY = ("thread-mismatch", "fsdp-sync-every-micro-batch")
WORLD_4 = ["--nproc", "4", "--set", "trainer.max_epochs=19"]  # 16 steps per epoch: 304 steps
SMALL = ["--set", "data.num_samples=256", "--set", "trainer.max_epochs=2"]  # the mistakes' test runs


def harness(root: Path, name: str, *flags: str) -> tuple[Path, int]:
    """`compare/run.py FLAGS --tolerance noise` into root/name (kept: a second call reads it)."""
    out = root / name
    code_file = out.with_suffix(".exit")
    if not code_file.is_file():
        command = [sys.executable, str(REPO / "compare" / "run.py"), *flags, "--tolerance", "noise"]
        result = subprocess.run([*command, "--quiet", "--out", str(out), "--overwrite"], capture_output=True)
        code_file.write_text(str(result.returncode))
    return out, int(code_file.read_text())


def controls_in(out: Path) -> list[Path]:
    return [Path(c) for c in json.loads((out / "report.json").read_text())["noise"]["controls"]]


def world_4_pairs(root: Path) -> list[tuple]:
    """(pair, run a, run b, controls, merged): the twins at a world of 4, where sums part."""
    fsdp, _ = harness(root, "ddp-vs-fsdp2-world4", "--sides", "raw:ddp,raw:fsdp", *WORLD_4)
    reference, _ = harness(root, "reference-world4", "--reference", *WORLD_4)
    return [
        (
            Pair("world 4: DDP vs FSDP2 (raw twins)", "", Run("")),
            fsdp / "raw-ddp",
            fsdp / "raw-fsdp",
            controls_in(fsdp),
            False,
        ),
        (
            Pair("world 4: DDP vs one process (--reference)", "", Run("")),
            reference / "raw",
            reference / "reference",
            controls_in(reference),
            True,
        ),
    ]


def mistakes_under_noise(root: Path) -> list[dict]:
    """Every --mistake under --tolerance noise: exit code, verdict and diagnosis against what the
    catalogue expects (those in ROUNDING_ONLY change only how sums round: equivalent, the slip beside)."""
    rows = []
    for mistake in catalogue().values():
        extra = ["--fault", "1:6", "--stall-timeout", "60"] if mistake.needs_fault else ["--stall-timeout", "8"]
        out, code = harness(root, f"mistake-{mistake.name}", "--mistake", mistake.name, *SMALL, *extra)
        report = json.loads((out / "report.json").read_text())
        diagnosis = report["diagnosis"]
        if mistake.needs_fault:  # named on the restarted run's pair
            diagnosis = report["fault"]["pairs"]["raw vs raw-fault"].get("diagnosis") or {}
        setup = (diagnosis.get("setup_differs") or {}).get("category")
        if mistake.name in ROUNDING_ONLY:  # equivalent within noise, the slip said beside the verdict
            expected = f"noise ({mistake.expected} beside)"
            right = code == 0 and report["verdict"] in ("equivalent", "equivalent_within_noise")
            right = right and setup == mistake.expected
        else:
            expected = mistake.expected
            right = code != 0 and diagnosis.get("category") == expected
            right = right or (expected == "config" and setup == "config")  # a setup slip that changed no bit
        rows.append(
            {
                "mistake": mistake.name,
                "expected": expected,
                "exit": code,
                "verdict": report["verdict"],
                "diagnosis": diagnosis.get("category") if setup is None else f"{diagnosis.get('category')} ({setup})",
                "step": diagnosis.get("step"),
                "right": right,
            }
        )
    return rows


def noise_diagnoses(cases) -> list[dict]:
    """Each bug's diagnosis under --tolerance noise: category (candidates), step, against the cause."""
    rows = []
    for pair, a, b, controls, _ in cases:
        if pair.acts_at is None:
            continue
        d = compare_traces(a, b, controls=controls)["diagnosis"]
        candidates = [c["cause"] for c in d.get("candidates") or []]
        rows.append(
            {
                "bug": pair.name,
                "acts at": pair.acts_at,
                "cause": pair.cause,
                "diagnosis": d["category"] + (f" ({', '.join(candidates)})" if candidates else ""),
                "step": d["step"],
                "right": d["category"] == pair.cause,
            }
        )
    return rows


def format_rows(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in column) for column in zip(header, *rows)]
    lines = [" | ".join(h.ljust(w) for h, w in zip(header, widths)), "-|-".join("-" * w for w in widths)]
    return "\n".join(lines + [" | ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows])


def format_dicts(rows: list[dict]) -> str:
    keys = list(rows[0])
    return format_rows(keys, [[str(r[k]) if k != "right" else "yes" if r[k] else "NO" for k in keys] for r in rows])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", default=None, help="folder for the runs (reused when it holds them)")
    p.add_argument("--jobs", type=int, default=2, help="runs of the own loop trained at once")
    p.add_argument("--loop-only", action="store_true", help="only the own loop's pairs (about 4 minutes)")
    args = p.parse_args(argv)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tolerance-"))
    root.mkdir(parents=True, exist_ok=True)
    families = {"fp32": [], "bf16": ["--bf16"]}
    bases = {name: Run(name, flags) for name, flags in families.items()}
    control_runs = {name: controls(name, flags) for name, flags in families.items()}
    with ThreadPoolExecutor(args.jobs) as pool:
        paths = dict(zip(bases, pool.map(lambda r: train(r, root), bases.values())))
        control_paths = {f: list(pool.map(lambda r: train(r, root), runs)) for f, runs in control_runs.items()}
        all_pairs = pairs(clip_step(paths["fp32"]))
        pair_paths = list(pool.map(lambda pair: train(pair.run, root), all_pairs))
    cases = [(pair, paths[pair.base], b, control_paths[pair.base], False) for pair, b in zip(all_pairs, pair_paths)]
    if not args.loop_only:
        correct = sum(1 for pair in all_pairs if pair.acts_at is None)
        cases = cases[:correct] + world_4_pairs(root) + cases[correct:]
    results = [(pair, {rule: fn(a, b, ctl, merged) for rule, fn in RULES.items()}) for pair, a, b, ctl, merged in cases]
    print(format_table(results))
    print(format_scores(results))
    summary = {"pairs": [{"pair": p.name, "acts_at": p.acts_at, "caught_at": s} for p, s in results]}
    summary["diagnoses"] = noise_diagnoses(cases)
    print()
    print(format_dicts(summary["diagnoses"]))
    if not args.loop_only:
        summary["mistakes"] = mistakes_under_noise(root)
        print()
        print(format_dicts(summary["mistakes"]))
    (root / "tolerance.json").write_text(json.dumps(summary, indent=1))
    print(f"runs: {root}")
    return 0


def outcome(pair: Pair, step: int | None) -> str:
    """A correct pair: ok, or a false alarm. A bug: caught (within one step of where it acts), late,
    missed, or early: flagged before it acts, so the flag came from rounding, not from the bug (a false
    alarm, and the bug itself missed)."""
    if pair.acts_at is None:
        return "ok" if step is None else "false alarm"
    if step is None:
        return "missed"
    if step < pair.acts_at - 1:
        return "early"
    return "caught" if step <= pair.acts_at + 1 else "late"


def cell(pair: Pair, step: int | None) -> str:
    return {
        "ok": "ok",
        "false alarm": f"FALSE ALARM (step {step})",
        "missed": "MISSED",
        "early": f"EARLY (step {step}): rounding",
        "caught": f"step {step}",
        "late": f"step {step} (late)",
    }[outcome(pair, step)]


def format_table(results) -> str:
    rows = [[p.name, str(p.acts_at or "-"), *(cell(p, s[r]) for r in RULES)] for p, s in results]
    return format_rows(["pair", "acts at", *RULES], rows)


def format_scores(results) -> str:
    lines = []
    bugs = sum(1 for p, _ in results if p.acts_at is not None)
    for rule in RULES:
        seen = [outcome(p, s[rule]) for p, s in results]
        alarms, early = seen.count("false alarm"), seen.count("early")
        lines.append(
            f"{rule:24s} false alarms {alarms + early}/{len(results)}  missed {seen.count('missed') + early}/{bugs}"
            f"  caught within 1 step {seen.count('caught')}/{bugs}  late {seen.count('late')}/{bugs}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
