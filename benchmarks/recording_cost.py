"""What recording costs per step: each corpus program's raw loop (benchmarks/programs, torchrun, 2 ranks)
run plain (its `# parity` lines stripped), recorded with no line changed (`ddp-parity record --out RUN --
...`, the plain program), and instrumented (the program as it is in the corpus, its explicit
TraceRecorder); and one mid-size configuration (the nanoGPT program at 6 layers x 384, one process).
Prints a table, and how often the recording read a tensor's value on the host per step (a device sync
on an accelerator).

    python -m benchmarks.recording_cost                    # every program, 2 rounds (a few minutes)
    python -m benchmarks.recording_cost --rounds 5         # more rounds: steadier medians
    python -m benchmarks.recording_cost --only nanogpt --only mid-size

Each round runs the variants of a program one after the other, in a rotating order (the machine may be
loaded by others: a change of load hits the variants alike). A variant's time per step is the median over
rank 0's steps after the first WARMUP of them: from the program's own prints where it prints a time per
step (nanoGPT's `time X ms`, the ImageNet example's `Time X`), else from the interval between two
optimizer steps' ends (a step post-hook of the benchmark's probe, in every variant alike:
benchmarks/recording_probe). The figures are ratios to plain within a round, their median over rounds.

Device syncs are counted on the CPU in a separate run of each recorded variant (the counting itself
slows it): benchmarks/recording_probe/sitecustomize.py says what a counted read is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.programs.hooks import plain_args, strip_parity
from ddp_parity.harness.launch import free_port, torchrun_args

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
PROBE = HERE / "recording_probe"
NPROC = 2
WARMUP = 3  # first steps of each run left out: first calls, the first evaluation, the recorder's start
VARIANTS = ("plain", "recorded", "instrumented")
TIMEOUT_S = 600


@dataclass(frozen=True)
class Workload:
    """One command of the benchmark: a program's script and arguments ({out}: the variant's output folder)."""

    name: str
    folder: str
    script: str
    args: tuple[str, ...]
    prints: str | None = None  # the regex of the program's own time per step (one group, seconds or ms)
    prints_ms: bool = False
    nproc: int = NPROC  # 1: a single process (`python script`), else torchrun
    goal: float = 1.05
    prepare: bool = False  # nanoGPT's data files
    env: dict = field(default_factory=dict)


NANOGPT = (
    "--dataset=tiny_char",
    "--device=cpu",
    "--backend=gloo",
    "--dtype=float32",
    "--compile=False",
    "--eval_interval=1000",
    "--eval_iters=2",
    "--warmup_iters=2",
    "--learning_rate=1e-3",
    "--min_lr=1e-4",
    "--out_dir={out}",
)

WORKLOADS = {
    w.name: w
    for w in [
        Workload(
            "nanogpt",
            "nanogpt",
            "train.py",
            (*NANOGPT, "--n_layer=2", "--n_head=2", "--n_embd=32", "--block_size=16", "--batch_size=4",
             "--gradient_accumulation_steps=4", "--max_iters=40", "--lr_decay_iters=40"),
            prints=r"^iter \d+: loss \S+, time ([\d.]+)ms",
            prints_ms=True,
            prepare=True,
        ),
        Workload("ddp_tutorial", "ddp_tutorial", "multigpu_torchrun.py",
                 ("2", "1", "--batch_size=32", "--run_dir={out}/trace")),
        Workload("hf_accelerate", "hf_accelerate", "nlp_example.py",
                 ("--num_epochs=1", "--batch_size=32", "--train_size=1024", "--validation_size=32",
                  "--run_dir={out}/trace")),
        Workload("iterable", "iterable", "train.py",
                 ("--epochs=2", "--size=256", "--batch_size=4", "--run_dir={out}/trace")),
        Workload("imagenet", "imagenet", "main.py",
                 ("--epochs=1", "-b", "16", "--seed=0", "--print-freq=1", "--train-size=512", "--val-size=16",
                  "--run-dir={out}/trace"),
                 prints=r"Time\s+([\d.]+) \("),
        Workload(
            "mid-size",
            "nanogpt",
            "train.py",
            (*NANOGPT, "--n_layer=6", "--n_head=6", "--n_embd=384", "--block_size=64", "--batch_size=4",
             "--gradient_accumulation_steps=1", "--max_iters=16", "--lr_decay_iters=16", "--dropout=0.0"),
            prints=r"^iter \d+: loss \S+, time ([\d.]+)ms",
            prints_ms=True,
            nproc=1,
            goal=1.02,
            prepare=True,
        ),
    ]
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the plain program: the corpus's `# parity` lines taken out


def plain_folder(workload: Workload, work: Path) -> Path:
    """A copy of the program's folder with its script stripped: the corpus's own `strip_parity` (the lines
    marked `# parity` out, a line the instrumentation changed back as its authors wrote it)."""
    folder = work / "plain" / workload.folder
    if not folder.exists():
        shutil.copytree(PROGRAMS / workload.folder, folder, ignore=shutil.ignore_patterns("__pycache__"))
        script = folder / workload.script
        script.write_text(strip_parity(script.read_text()))
    return folder


# ---------------------------------------------------------------------------------------------
# running


def command(workload: Workload, variant: str, folder: Path, out: Path, run_dir: Path) -> list[str]:
    args = list(workload.args) if variant == "instrumented" else plain_args(list(workload.args), out)
    script = [str(folder / workload.script)] + [a.replace("{out}", str(out)) for a in args]
    if workload.nproc == 1:
        program = [sys.executable, *script]
    else:
        program = torchrun_args(workload.nproc, free_port()) + script
    if variant == "recorded":
        return [sys.executable, "-m", "ddp_parity.harness.cli", "record", "--out", str(run_dir), "--", *program]
    return program


def environment(workload: Workload, probe_out: Path, count_syncs: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1", **workload.env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROBE), env.get("PYTHONPATH")) if p)
    env["DDP_PARITY_PROBE_OUT"] = str(probe_out)
    if count_syncs:
        env["DDP_PARITY_COUNT_SYNCS"] = "1"
    if workload.nproc == 1:
        env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    return env


@dataclass
class Run:
    printed: list[float]  # rank 0's times per step from the program's prints (seconds), past WARMUP
    intervals: list[float]  # rank 0's intervals between optimizer steps' ends (seconds), past WARMUP
    cpu: list[float]  # rank 0's CPU time (every thread of the process) between optimizer steps' ends, past WARMUP
    steps: int
    reads: dict | None  # the probe's counted reads (count_syncs), rank 0


# gloo's abort at exit of a process that ends with its process group and a DDP wrapper alive (docs/plugin.md)
TEARDOWN_ABORT = "terminate called without an active exception"


def run_variant(workload: Workload, variant: str, work: Path, tag: str, count_syncs: bool = False) -> Run:
    folder = plain_folder(workload, work) if variant != "instrumented" else PROGRAMS / workload.folder
    base = work / f"{workload.name}.{variant}.{tag}"
    out, probe_out, run_dir = base / "out", base / "probe", base / "record"
    probe_out.mkdir(parents=True)
    out.mkdir()
    cwd = base
    if workload.prepare:
        from benchmarks.programs.nanogpt.prepare import prepare

        prepare(str(cwd))
    cmd = command(workload, variant, folder, out, run_dir)
    proc = subprocess.run(
        cmd, cwd=cwd, env=environment(workload, probe_out, count_syncs), capture_output=True, text=True,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    (base / "log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0 and TEARDOWN_ABORT not in proc.stderr:
        raise RuntimeError(f"{workload.name} ({variant}) exited {proc.returncode}; log: {base / 'log'}")
    if proc.returncode != 0:  # the programs as written abort at exit now and then, plain or recorded alike
        print(
            f"note: {workload.name} ({variant}): a rank aborted at exit, after its steps (gloo's teardown with the "
            f"DDP wrapper alive, docs/plugin.md); its steps are timed as they ran; log: {base / 'log'}"
        )
    return read_run(workload, proc.stdout, probe_out)


def read_run(workload: Workload, stdout: str, probe_out: Path) -> Run:
    printed = []
    if workload.prints:
        pattern = re.compile(workload.prints, re.MULTILINE)
        printed = [float(v) / (1000 if workload.prints_ms else 1) for v in pattern.findall(stdout)]
    probes = [json.loads(p.read_text()) for p in probe_out.glob("probe.rank*.json")]
    rank0 = next((p for p in probes if p["rank"] == 0), None)
    if rank0 is None:
        raise RuntimeError(f"{workload.name}: no optimizer step seen on rank 0 ({probe_out})")
    ends = rank0["step_ends"]
    intervals = [b - a for a, b in zip(ends, ends[1:])]
    cpu = [b - a for a, b in zip(rank0["step_cpu"], rank0["step_cpu"][1:])]
    return Run(printed[WARMUP:], intervals[WARMUP:], cpu[WARMUP:], len(ends), rank0["reads"])


# ---------------------------------------------------------------------------------------------
# the figures


def per_step(run: Run) -> float:
    values = run.printed or run.intervals
    return statistics.median(values)


def measure(workload: Workload, rounds: int, work: Path, variants=VARIANTS) -> dict:
    """{variant: [time per step of each round]} and the ratios to plain, round by round."""
    times: dict[str, list[float]] = {v: [] for v in variants}
    cpu_times: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(rounds):
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for variant in order:
            run = run_variant(workload, variant, work, f"r{r}")
            times[variant].append(per_step(run))
            cpu_times[variant].append(statistics.median(run.cpu))
    ratios = {v: statistics.median(t / p for t, p in zip(times[v], times["plain"])) for v in variants}
    cpu_ratios = {v: statistics.median(t / p for t, p in zip(cpu_times[v], cpu_times["plain"])) for v in variants}
    spread = {
        v: (min(t / p for t, p in zip(times[v], times["plain"])), max(t / p for t, p in zip(times[v], times["plain"])))
        for v in variants
    }
    return {"times": times, "ratios": ratios, "cpu": cpu_times, "cpu_ratios": cpu_ratios, "spread": spread}


def count_syncs(workload: Workload, variant: str, work: Path) -> dict:
    """Host reads by the recording's code per step, outside flush() and within it (one run, counted)."""
    run = run_variant(workload, variant, work, "count", count_syncs=True)
    reads = run.reads or {"in_flush": {}, "start_or_end": {}, "elsewhere": {}}
    steps = max(run.steps, 1)
    return {
        "steps": run.steps,
        "elsewhere": sum(reads["elsewhere"].values()) / steps,
        "elsewhere_by_call": reads["elsewhere"],
        "in_flush": sum(reads["in_flush"].values()) / steps,
        "start_or_end": sum(reads["start_or_end"].values()),
    }


def render(rows: list[list[str]], header: list[str]) -> str:
    from ddp_parity.compare.report import render_table

    return render_table(header, rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.recording_cost", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=1, help="rounds of every variant per program (default 1)")
    p.add_argument("--only", action="append", choices=list(WORKLOADS), help="this program only (repeatable)")
    p.add_argument("--no-syncs", action="store_true", help="skip the runs that count host reads")
    p.add_argument("--keep", type=Path, default=None, help="keep the runs (logs, traces) under this new folder")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    names = args.only or list(WORKLOADS)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.rounds} round(s); {os.cpu_count()} CPU(s)", flush=True)
    rows, sync_rows, met = [], [], True
    with tempfile.TemporaryDirectory(prefix="ddp-parity-recording-cost-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in names:
            workload = WORKLOADS[name]
            variants = VARIANTS if _instrumented(workload) else VARIANTS[:2]
            m = measure(workload, args.rounds, work, variants)
            plain_ms = statistics.median(m["times"]["plain"]) * 1e3
            for variant in variants[1:]:
                ratio = m["ratios"][variant]
                low, high = m["spread"][variant]
                ok = ratio <= workload.goal
                if variant == "recorded":
                    met &= ok
                rows.append([
                    name, f"{plain_ms:.2f} ms", variant, f"{ratio:.3f}x", f"{low:.3f}-{high:.3f}",
                    f"{m['cpu_ratios'][variant]:.3f}x", f"<= {workload.goal:.2f}x" + ("" if ok else " MISSED"),
                    "prints" if _printed(workload) else "step ends",
                ])  # fmt: skip
            print(f"{name}: done (load average {os.getloadavg()[0]:.1f})", flush=True)
            if not args.no_syncs:
                for variant in variants[1:]:
                    c = count_syncs(workload, variant, work)
                    shown = ", ".join(f"{k} {v}" for k, v in sorted(c["elsewhere_by_call"].items())) or "none"
                    sync_rows.append([name, variant, str(c["steps"]), f"{c['elsewhere']:.2f}", shown,
                                      f"{c['in_flush']:.2f}", str(c["start_or_end"])])  # fmt: skip
    print(render(rows, ["program", "plain step", "variant", "per step vs plain", "rounds' range",
                        "CPU per step vs plain", "goal", "timed by"]))  # fmt: skip
    if sync_rows:
        print("host reads by the recording per step (rank 0; on an accelerator a device sync each, except")
        print("where the code reads only host values: docs/benchmarks.md):")
        print(render(sync_rows, ["program", "variant", "steps", "per step", "which (whole run)", "in flush() per step",
                                 "at start and end"]))  # fmt: skip
    print(f"load average now {os.getloadavg()[0]:.1f}")
    return 0 if met else 1


def _instrumented(workload: Workload) -> bool:
    return "# parity" in (PROGRAMS / workload.folder / workload.script).read_text()


def _printed(workload: Workload) -> bool:
    return workload.prints is not None


if __name__ == "__main__":
    raise SystemExit(main())
