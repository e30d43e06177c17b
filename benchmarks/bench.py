"""Benchmarks: what Lightning, the harness, recording and the comparator cost. Prints tables.

    python -m benchmarks.bench                 # everything (a few minutes on a 2-core machine)
    python -m benchmarks.bench --quick         # no large network, 1 pair, 100k-step traces, 256 MB checkpoints
    python -m benchmarks.bench --only record,comparator
    python -m benchmarks.bench --only launch --network large --nproc 1 --set trainer.accelerator=gpu   # on a GPU

Sections (every figure measured in this run; comparisons are ratios of figures measured here):
  launch      Lightning vs raw: median step time and samples/s of real runs (the same commands as
              compare/run.py, via ddp_parity.harness.launch), default network and a larger one
  harness     compare/run.py end to end vs the same two launches by hand, in pairs: the harness/by-hand ratio
  record      TraceRecorder.record per step vs the default network's step, in one process
  comparator  compare_runs on two synthetic 1,000,000-step x 4-rank traces, and on two synthetic
              >= 2 GB safetensors checkpoints: time and peak memory (in a child process)

Every trace here is written by ddp_parity.TraceRecorder (the one writer of the format) and every table
by ddp_parity.compare.report.render_table. This is a script, not a test: timings depend on the machine
and on what else runs on it (the load average is printed at the start and the end).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ddp_parity.compare.report import render_table
from ddp_parity.harness.launch import REPO, available_cores, build_launch, kill_tree, run_launch
from ddp_parity.lifeline import LIFELINE_ENV

DEFAULT_CONFIG = REPO / "configs" / "default.yaml"
LARGE = ["--model.hidden_dim", "2048", "--model.depth", "4", "--data.num_samples", "1920", "--trainer.max_epochs", "1"]
NETWORKS = {"default": [], "large": LARGE}  # "large": the 2048x4 network
WARMUP_STEPS = 5  # as compare_runs' step_time_summary
SECTIONS = ("launch", "harness", "record", "comparator")
HARNESS_TARGET = 1.10  # compare/run.py end to end within 10% of the two launches by hand
OVERLAP_TARGET = 0.65  # both sides at once: at most 65% of the two launches by hand, one after the other
OVERLAP_MIN_CORES = 8  # where both sides at once is measured (2 x 2 processes, and room for the rest)
MIN_FREE_DISK = 10 * 2**30


# ---------------------------------------------------------------------------------------------
# small helpers


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt_ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


def fmt_us(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:+.0f} us"


def fmt_mb(nbytes) -> str:
    return "-" if nbytes is None else f"{nbytes / 2**20:,.0f} MB"


def fmt_ratio(value, digits: int = 3) -> str:
    return "-" if value is None else f"x{value:.{digits}f}"


def table(rows: list[list[str]], header: list[str]) -> str:
    return render_table(header, rows)


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


def proc_status() -> dict:
    """This process's memory figures from /proc/self/status, in bytes."""
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                found[key] = int(rest.split()[0]) * 1024
    return found


def step_times(run_dir: Path, rank: int = 0) -> list[float]:
    from ddp_parity.trace import iter_records

    return [r["time_s"] for r in iter_records(run_dir, rank) if r.get("time_s") is not None]


def median_step(run_dir: Path) -> float | None:
    """Median step time after warm-up, of rank 0 (what compare_runs reports)."""
    times = step_times(run_dir)[WARMUP_STEPS:]
    return median(times)


# ---------------------------------------------------------------------------------------------
# 1. Lightning vs raw, real 2-process runs


def run_side(side: str, out: Path, overrides: list[str], nproc: int, threads: int, timeout: float):
    launch = build_launch(side, str(DEFAULT_CONFIG), nproc, overrides, out, threads)
    outcome = run_launch(launch, timeout)
    if not outcome.ok:
        raise RuntimeError(f"{outcome.describe()}; log {launch.log_path}:\n{outcome.log_tail[-2000:]}")
    return launch, outcome


def bench_launch(
    tmp: Path, name: str, overrides: list[str], repeats: int, nproc: int, threads: int, batch_size: int, timeout: float
) -> dict:
    """`repeats` pairs of runs, alternating which side goes first; per run the median step time of
    rank 0 after warm-up; the figure is the median over runs."""
    per_side = {"raw": [], "lightning": []}
    walls = {"raw": [], "lightning": []}
    for i in range(repeats):
        order = ("raw", "lightning") if i % 2 == 0 else ("lightning", "raw")
        out = tmp / f"{name}-{i}"
        for side in order:
            launch, outcome = run_side(side, out, overrides, nproc, threads, timeout)
            per_side[side].append(median_step(launch.run_dir))
            walls[side].append(outcome.seconds)
            print(
                f"  {name} run {i + 1}/{repeats} {side:9s}: median step {fmt_ms(per_side[side][-1])}, "
                f"wall {outcome.seconds:.1f} s",
                flush=True,
            )
    raw, lit = median(per_side["raw"]), median(per_side["lightning"])
    if raw is None or lit is None:
        raise RuntimeError(f"{name}: too few steps for a median after {WARMUP_STEPS} warm-up steps; train longer")
    return {
        "name": name,
        "raw": raw,
        "lightning": lit,
        "raw_runs": per_side["raw"],
        "lightning_runs": per_side["lightning"],
        "walls": walls,
        "overhead": lit - raw,
        "ratio": lit / raw,
        "raw_sps": batch_size * nproc / raw,
        "lightning_sps": batch_size * nproc / lit,
    }


def print_launch(results: list[dict]) -> None:
    rows = []
    for r in results:
        spread = lambda xs: f"{min(xs) * 1e3:.2f}-{max(xs) * 1e3:.2f}"  # noqa: E731
        rows.append(
            [
                r["name"],
                fmt_ms(r["raw"]),
                fmt_ms(r["lightning"]),
                fmt_us(r["overhead"]),
                fmt_ratio(r["ratio"]),
                f"{r['raw_sps']:,.0f}",
                f"{r['lightning_sps']:,.0f}",
                f"{spread(r['raw_runs'])} / {spread(r['lightning_runs'])} ms",
            ]
        )
    print(
        table(
            rows,
            [
                "network",
                "raw step",
                "lightning step",
                "overhead/step",
                "lightning/raw",
                "raw samples/s",
                "lightning samples/s",
                "per-run medians raw / lightning",
            ],
        )
    )


# ---------------------------------------------------------------------------------------------
# 2. compare/run.py end to end vs the two launches by hand


def children_cpu() -> float:
    """CPU seconds (user + system) of every descendant this process has waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def launch_by_hand(side: str, out: Path, overrides: list[str], nproc: int, threads: int, timeout: float) -> float:
    """One side's command as a person would type it (the command compare/run.py builds), run plainly:
    no watcher, no heartbeat reading, no lifeline (DDP_PARITY_DIE_WITH_PARENT is the harness's own).
    Wall seconds from outside, Python's startup included."""
    launch = build_launch(side, str(DEFAULT_CONFIG), nproc, overrides, out, threads)
    env = {key: value for key, value in launch.env.items() if key != LIFELINE_ENV}
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(launch.log_path, "w") as log:
        proc = subprocess.Popen(
            launch.command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait(timeout=timeout)
        finally:
            kill_tree(proc.pid)
    if code != 0:
        raise RuntimeError(f"{side} by hand exited {code}; log {launch.log_path}")
    return time.monotonic() - started


def both_by_hand(out: Path, overrides: list[str], nproc: int, threads: int) -> tuple[float, float]:
    """raw, then lightning, as the harness runs them one after the other: (wall s, CPU s of all processes)."""
    cpu = children_cpu()
    wall = sum(launch_by_hand(side, out, overrides, nproc, threads, 900) for side in ("raw", "lightning"))
    return wall, children_cpu() - cpu


def harness_end_to_end(out: Path, overrides: list[str], nproc: int, timeout: float, at_once: str) -> tuple:
    """`python compare/run.py` timed from outside (at_once: "--sequential" or "--parallel"): wall s,
    the two launches as it timed them (report.json), CPU s of it and every process it waited for."""
    sets = [f"--set={key.removeprefix('--')}={value}" for key, value in zip(overrides[::2], overrides[1::2])]
    command = [sys.executable, str(REPO / "compare" / "run.py"), "--out", str(out), "--nproc", str(nproc), *sets]
    cpu = children_cpu()
    started = time.monotonic()
    proc = subprocess.run(
        [*command, "--stall-timeout", "300", at_once],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )
    total = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"compare/run.py exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    try:
        inside = float(json.loads((out / "report.json").read_text())["seconds"])
    except (OSError, KeyError, ValueError):
        inside = sum(float(x) for x in re.findall(r"^\[(?:raw|lightning)\] done in ([\d.]+) s", proc.stdout, re.M))
    return total, inside, children_cpu() - cpu


def bench_harness(tmp: Path, pairs: int, overrides: list[str], nproc: int, threads: int, at_once: str) -> dict:
    """`pairs` pairs, each: compare/run.py end to end (`at_once`: --sequential or --parallel), and the
    same two launches by hand one after the other, in alternating order so drift on the machine hits
    both alike. The figure is the median of the per-pair ratios (both halves of a ratio ran minutes
    apart at most), with their min and max."""
    rows = []
    for i in range(pairs):
        order = ("harness", "by hand") if i % 2 == 0 else ("by hand", "harness")
        for what in order:
            if what == "harness":
                total, inside, cpu = harness_end_to_end(tmp / f"harness-{i}", overrides, nproc, 900, at_once)
            else:
                by_hand, by_hand_cpu = both_by_hand(tmp / f"by-hand-{i}", overrides, nproc, threads)
        rows.append({"total": total, "inside": inside, "cpu": cpu, "by_hand": by_hand, "by_hand_cpu": by_hand_cpu})
        print(
            f"  pair {i + 1}/{pairs}: compare/run.py {at_once} {total:.1f} s (its launches {inside:.1f} s, "
            f"CPU {cpu:.1f} s), by hand {by_hand:.1f} s (CPU {by_hand_cpu:.1f} s), ratio x{total / by_hand:.3f}",
            flush=True,
        )
    ratios = [r["total"] / r["by_hand"] for r in rows]
    figures = {key: median([r[key] for r in rows]) for key in rows[0]}
    return {**figures, "ratio": median(ratios), "ratios": ratios, "pairs": pairs, "at_once": at_once}


def time_traces_only(tmp: Path, last: Path) -> tuple[float, bool]:
    """The harness's comparison step alone, on runs it made: --traces reads, compares, reports."""
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "compare" / "run.py"),
            "--traces",
            str(last / "raw"),
            str(last / "lightning"),
            "--out",
            str(tmp / "harness-traces"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return time.monotonic() - started, proc.returncode == 0


def print_harness(h: dict, traces_only: tuple[float, bool]) -> None:
    total = h["total"]
    rows = [
        ["compare/run.py end to end", f"{total:.2f} s", "100%", f"{h['cpu']:.1f} s"],
        ["  its two launches (as it times them)", f"{h['inside']:.2f} s", f"{h['inside'] / total:.1%}", "-"],
        [
            "  its own cost (the rest)",
            f"{total - h['inside']:.2f} s",
            f"{(total - h['inside']) / total:.1%}",
            f"{h['cpu'] - h['by_hand_cpu']:+.1f} s over by hand",
        ],
        [
            "the same two launches by hand",
            f"{h['by_hand']:.2f} s",
            f"{h['by_hand'] / total:.1%}",
            f"{h['by_hand_cpu']:.1f} s",
        ],
        [
            "compare/run.py --traces (start, read, compare, report, plot)",
            f"{traces_only[0]:.2f} s" + ("" if traces_only[1] else " (FAILED)"),
            f"{traces_only[0] / total:.1%}",
            "-",
        ],
    ]
    print(table(rows, ["what (medians over the pairs)", "wall", "of end to end", "CPU, all processes"]))
    spread = ", ".join(f"x{r:.3f}" for r in h["ratios"])
    target = HARNESS_TARGET if h["at_once"] == "--sequential" else OVERLAP_TARGET
    print(
        f"harness/by-hand ratio ({h['at_once']}): x{h['ratio']:.3f} median of {h['pairs']} pair(s), "
        f"min x{min(h['ratios']):.3f}, max x{max(h['ratios']):.3f} ({spread}); target <= x{target:.2f}"
    )


# ---------------------------------------------------------------------------------------------
# 3. recording on vs off, in one process


def bench_record(
    tmp: Path, steps: int, repeats: int, threads: int, device: str = "cpu", flags: list[str] | None = None
) -> dict:
    """A network's training step in one process (the default one unless `flags` say otherwise), the raw
    loop's code path, with and without what the trace adds (the gradient norm and TraceRecorder.record,
    flushes included), on `device`."""
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    from ddp_parity.config import parse_raw_config
    from ddp_parity.data import build_datasets
    from ddp_parity.model import build_loss, build_net, build_optimizer
    from ddp_parity.trace import TraceRecorder

    torch.set_num_threads(threads)
    cfg = parse_raw_config(["--config", str(DEFAULT_CONFIG), *(flags or [])])
    device = torch.device(device)
    train_set, _ = build_datasets(cfg.data)
    sampler = DistributedSampler(train_set, num_replicas=1, rank=0, shuffle=True, seed=cfg.seed_everything)
    loader = DataLoader(train_set, batch_size=cfg.data.batch_size, sampler=sampler)
    torch.manual_seed(cfg.seed_everything)
    net = build_net(cfg.model).to(device)
    optimizer = build_optimizer(net.parameters(), cfg.model)
    loss_fn = build_loss()

    try:  # what raw/train.py records per step beside the loss: the gradient norm and, where the
        from ddp_parity.trace import param_digest  # trace format has it, a parameter digest
    except ImportError:
        param_digest = None

    def loop(recorder) -> dict:
        """Per step: wall seconds, CPU seconds of this process, CPU seconds computing what the trace
        records (grad norm, parameter digest) and CPU seconds inside record(). CPU time, not wall:
        other processes on a shared machine inflate wall time, not CPU time; the loop runs on one
        thread (1 intra-op thread, DataLoader without workers)."""
        step, epoch, in_inputs, in_record = 0, 0, 0.0, 0.0
        wall, cpu = time.perf_counter(), time.process_time()
        while step < steps:
            sampler.set_epoch(epoch)
            for batch in loader:
                loss = loss_fn(net(batch.x.to(device)), batch.y.to(device))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if recorder is not None:
                    t0 = time.thread_time()
                    grad_norm = torch.nn.utils.get_total_norm([p.grad for p in net.parameters() if p.grad is not None])
                    in_inputs += time.thread_time() - t0
                lr = optimizer.param_groups[0]["lr"]
                optimizer.step()
                step += 1
                if recorder is not None:
                    t0 = time.thread_time()
                    extra = {"param_digest": param_digest(net)} if param_digest is not None else {}
                    t1 = time.thread_time()
                    recorder.record(step, loss, batch.index, epoch=epoch, lr=lr, grad_norm=grad_norm, **extra)
                    t2 = time.thread_time()
                    in_inputs += t1 - t0
                    in_record += t2 - t1
                if step == steps:
                    break
            epoch += 1
        if recorder is not None:
            t0 = time.thread_time()
            recorder.flush()
            in_record += time.thread_time() - t0
        if device.type != "cpu":
            torch.accelerator.synchronize()  # the wall time covers the work queued on the device
        return {
            "wall": (time.perf_counter() - wall) / steps,
            "cpu": (time.process_time() - cpu) / steps,
            "inputs": in_inputs / steps,
            "record": in_record / steps,
        }

    loop(None)  # warm-up
    off, on = [], []
    for i in range(repeats):  # interleaved, so drift on the machine hits both alike
        off.append(loop(None))
        recorder = TraceRecorder(tmp / f"record-{i}", side="bench", config={})
        recorder.start()
        on.append(loop(recorder))
        recorder.close()
        print(
            f"  repeat {i + 1}/{repeats}: off {fmt_ms(off[-1]['cpu'])} CPU ({fmt_ms(off[-1]['wall'])} wall)/step, "
            f"on {fmt_ms(on[-1]['cpu'])} CPU ({fmt_ms(on[-1]['wall'])} wall)/step, "
            f"record() {on[-1]['record'] * 1e6:.1f} us CPU/step",
            flush=True,
        )
    pick = lambda runs, key: median([r[key] for r in runs])  # noqa: E731
    return {
        "off": pick(off, "cpu"),
        "on": pick(on, "cpu"),
        "off_wall": pick(off, "wall"),
        "on_wall": pick(on, "wall"),
        "inputs": pick(on, "inputs"),
        "record": pick(on, "record"),
        "steps": steps,
        "repeats": repeats,
        "digest": param_digest is not None,
    }


def print_record(r: dict) -> None:
    off = r["off"]
    inputs = "grad norm + param digest" if r["digest"] else "grad norm"
    rows = [
        ["step, recording off", fmt_ms(off), fmt_ms(r["off_wall"]), "-"],
        [
            f"step, recording on ({inputs} + record)",
            fmt_ms(r["on"]),
            fmt_ms(r["on_wall"]),
            f"{(r['on'] - off) / off:+.2%}",
        ],
        [
            "  difference per step",
            fmt_us(r["on"] - off),
            fmt_us(r["on_wall"] - r["off_wall"]),
            f"{(r['on'] - off) / off:+.2%}",
        ],
        [f"  computing what is recorded ({inputs})", f"{r['inputs'] * 1e6:.1f} us", "-", f"{r['inputs'] / off:.2%}"],
        [
            "  inside TraceRecorder.record (flushes included)",
            f"{r['record'] * 1e6:.1f} us",
            "-",
            f"{r['record'] / off:.2%}",
        ],
    ]
    print(table(rows, ["what (1 process, 1 thread)", "CPU/step", "wall/step", "of the step off (CPU)"]))
    print(
        f"  ({r['steps']} steps per loop, median of {r['repeats']} interleaved repeats of the mean step; "
        f"the raw loop computes the {inputs} for the trace only)"
    )


# ---------------------------------------------------------------------------------------------
# 4a. comparator on two synthetic traces


def write_trace_run(run_dir: Path, steps: int, ranks: int, indices_per_step: int, batch_size: int = 32) -> None:
    """A run directory with `steps` records per rank, written by TraceRecorder (the one writer of the
    format). A recorder takes its rank from the process group; with none here, each rank other than 0
    is recorded as rank 0 in a scratch folder and its file moved into place."""
    import numpy as np
    import torch

    from ddp_parity.trace import TRACE_DIR, TraceRecorder

    losses = [float(np.float32(2.3 * math.exp(-i / 400) + 0.01 * (i % 7))) for i in range(1009)]
    norms = [float(np.float32(0.5 + 0.001 * i)) for i in range(997)]
    steps_per_epoch = 1000
    for rank in range(ranks - 1, -1, -1):  # rank 0 last: it writes meta.json and the final parameters
        folder = run_dir if rank == 0 else run_dir / f".scratch-rank{rank}"
        recorder = TraceRecorder(
            folder, side="synthetic", config={}, extra_meta={"world_size": ranks}, flush_every=10_000
        )
        recorder.start()
        for step in range(1, steps + 1):
            first = (step * batch_size * ranks + rank * batch_size) % 1_000_000
            recorder.record(
                step,
                losses[(step + rank) % 1009],
                range(first, first + indices_per_step),
                epoch=step // steps_per_epoch,
                lr=0.001,
                grad_norm=norms[step % 997],
            )
        if rank == 0:
            model = torch.nn.Module()
            model.w = torch.nn.Parameter(torch.arange(16, dtype=torch.float32))
            recorder.finish(model)
        else:
            recorder.close()
            (run_dir / TRACE_DIR).mkdir(parents=True, exist_ok=True)
            os.replace(folder / TRACE_DIR / "rank0.jsonl", run_dir / TRACE_DIR / f"rank{rank}.jsonl")
            shutil.rmtree(folder)


def child_compare(run_a: str, run_b: str, profile: int = 0) -> None:
    """In a child process: compare two runs, report time and memory as one JSON line."""
    peaks = {"RssAnon": 0, "RssFile": 0}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            status = proc_status()
            for key in peaks:
                peaks[key] = max(peaks[key], status.get(key, 0))
            stop.wait(0.005)

    from ddp_parity.compare.comparator import Criterion, compare_runs

    gc.collect()
    baseline = proc_status()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        result = prof.runcall(compare_runs, run_a, run_b, Criterion())
        stats = pstats.Stats(prof, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(profile)
    else:
        result = compare_runs(run_a, run_b, Criterion())
    seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    end = proc_status()
    steps = sum(result.steps.get("steps_a", {}).values()) if result.steps else 0
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rank_steps": steps,
                "equivalent": result.equivalent,
                "first_divergence": result.first_divergence,
                "params_compared": result.params.compared,
                "baseline_rss": baseline["VmRSS"],
                "peak_rss": end["VmHWM"],
                "peak_anon": peaks["RssAnon"],
                "peak_file": peaks["RssFile"],
                "baseline_anon": baseline["RssAnon"],
                "baseline_file": baseline["RssFile"],
            }
        )
    )


def run_child_compare(run_a: Path, run_b: Path, timeout: float = 1800) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench", "--child-compare", str(run_a), str(run_b)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"comparator child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_traces(tmp: Path, step_counts: list[int], ranks: int, indices_per_step: int) -> list[dict]:
    results = []
    for steps in step_counts:
        a, b = tmp / f"trace-{steps}-a", tmp / f"trace-{steps}-b"
        started = time.monotonic()
        write_trace_run(a, steps, ranks, indices_per_step)
        shutil.copytree(a, b)
        size = sum(p.stat().st_size for p in (a / "trace").iterdir())
        print(
            f"  wrote 2 x {steps:,} steps x {ranks} ranks ({fmt_mb(size)} per run) in "
            f"{time.monotonic() - started:.1f} s",
            flush=True,
        )
        r = run_child_compare(a, b)
        r.update({"steps": steps, "ranks": ranks, "bytes": size})
        results.append(r)
        print(f"  compared in {r['seconds']:.1f} s, peak RSS {fmt_mb(r['peak_rss'])}", flush=True)
        shutil.rmtree(a)
        shutil.rmtree(b)
    return results


def print_traces(results: list[dict], indices_per_step: int) -> None:
    rows = []
    for r in results:
        rows.append(
            [
                f"{r['steps']:,} x {r['ranks']}",
                fmt_mb(r["bytes"]),
                f"{r['seconds']:.1f} s",
                f"{r['rank_steps'] / r['seconds']:,.0f}",
                f"{r['rank_steps'] / r['seconds'] / r['ranks']:,.0f}",
                fmt_mb(r["peak_rss"]),
                fmt_mb(r["peak_rss"] - r["baseline_rss"]),
                "equivalent" if r["equivalent"] else "DIFFERENT",
            ]
        )
    print(
        table(
            rows,
            [
                "steps x ranks",
                "trace/run",
                "compare_runs",
                "rank-steps/s",
                "steps/s (all ranks)",
                "peak RSS",
                "over baseline",
                "verdict",
            ],
        )
    )
    print(
        f"  (each record: step, epoch, loss, lr, grad_norm, time_s and {indices_per_step} indices; "
        f"the two runs identical, so every value is compared)"
    )
    if len(results) >= 2:
        a, b = results[0], results[-1]
        per_step = (b["peak_rss"] - a["peak_rss"]) / (b["steps"] - a["steps"])
        print(f"  peak RSS grows {per_step:,.0f} bytes per step between {a['steps']:,} and {b['steps']:,} steps")


# ---------------------------------------------------------------------------------------------
# 4b. comparator on two synthetic >= 2 GB safetensors checkpoints


def checkpoint_layout(total_mb: int, largest_mb: int) -> list[tuple[str, list[int]]]:
    """Tensor names and shapes (float32) summing to at least `total_mb`, the largest `largest_mb`:
    a weight [rows, 4096] and a bias [4096] per layer."""
    sizes = [largest_mb] + [max(largest_mb * k // 8, 1) for k in (7, 6, 5)]
    while sum(sizes) < total_mb:
        sizes.append(min(max(largest_mb // 2, 1), total_mb - sum(sizes)))
    layout = []
    for i, mb in enumerate(sizes):
        layout.append((f"layers.{i}.weight", [mb * 2**20 // 4 // 4096, 4096]))
        layout.append((f"layers.{i}.bias", [4096]))
    return layout


def write_safetensors_streaming(
    path: Path, layout: list[tuple[str, list[int]]], seed: int, chunk_elements: int = 1 << 22
) -> int:
    """The safetensors format written by hand: 8-byte little-endian header length, the JSON header
    (dtype, shape, data_offsets), then each tensor's bytes, generated and written a chunk at a time."""
    import torch

    header, offset = {}, 0
    for name, shape in layout:
        nbytes = math.prod(shape) * 4
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header["__metadata__"] = {"format": "pt", "written_by": "benchmarks.bench"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned
    g = torch.Generator().manual_seed(seed)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for _name, shape in layout:
            left = math.prod(shape)
            while left:
                n = min(left, chunk_elements)
                f.write(torch.randn(n, generator=g).numpy().tobytes())
                left -= n
    return path.stat().st_size


def bench_checkpoints(tmp: Path, total_mb: int, largest_mb: int) -> dict:
    """Two run directories whose final.safetensors are >= total_mb each, identical but for one
    element of the largest tensor; compare_runs in a child, its time and peak memory."""
    from ddp_parity.trace import TraceRecorder

    layout = checkpoint_layout(total_mb, largest_mb)
    a, b = tmp / "ckpt-a", tmp / "ckpt-b"
    started = time.monotonic()
    for run in (a, b):  # meta.json and a one-step trace from the recorder; the checkpoint streamed below
        recorder = TraceRecorder(run, side="synthetic", config={})
        recorder.start()
        recorder.record(1, 1.0, [0])
        recorder.close()
    size = write_safetensors_streaming(a / "final.safetensors", layout, seed=0)
    shutil.copyfile(a / "final.safetensors", b / "final.safetensors")
    # flip the last element of the largest tensor in b: one chunk takes the slow (diff) path
    with open(b / "final.safetensors", "r+b") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        end = header[layout[0][0]]["data_offsets"][1]
        f.seek(8 + header_len + end - 4)
        f.write(struct.pack("<f", 12345.0))
    print(
        f"  wrote 2 x {fmt_mb(size)} ({len(layout)} tensors, largest {largest_mb} MB) in "
        f"{time.monotonic() - started:.1f} s",
        flush=True,
    )
    r = run_child_compare(a, b)
    r.update({"bytes": size, "largest": largest_mb * 2**20, "tensors": len(layout)})
    shutil.rmtree(a)
    shutil.rmtree(b)
    return r


def print_checkpoints(r: dict) -> None:
    growth = r["peak_rss"] - r["baseline_rss"]
    anon = r["peak_anon"] - r["baseline_anon"]
    rows = [
        ["checkpoint size (each side)", fmt_mb(r["bytes"]), "-"],
        ["largest tensor", fmt_mb(r["largest"]), "-"],
        [
            "compare_runs time",
            f"{r['seconds']:.1f} s",
            f"{2 * r['bytes'] / r['seconds'] / 2**20:,.0f} MB/s read (both files)",
        ],
        [
            "peak RSS (VmHWM)",
            fmt_mb(r["peak_rss"]),
            f"{r['peak_rss'] / r['largest']:.2f} x largest, {r['peak_rss'] / r['bytes']:.2f} x file",
        ],
        [
            "  over the baseline after imports",
            fmt_mb(growth),
            f"{growth / r['largest']:.2f} x largest, {growth / r['bytes']:.2f} x file",
        ],
        ["  anonymous memory, peak over baseline", fmt_mb(anon), f"{anon / r['largest']:.2f} x largest"],
        ["  file-backed (mmap) pages, peak", fmt_mb(r["peak_file"]), f"{r['peak_file'] / r['bytes']:.2f} x file"],
    ]
    print(table(rows, ["what", "value", "relative"]))
    first = r.get("first_divergence") or {}
    print(
        f"  verdict {'equivalent' if r['equivalent'] else 'different'} as planted "
        f"(first divergence: {first.get('tensor')}[{first.get('element')}]); {r['params_compared']} tensors compared"
    )


# ---------------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="skip the slow parts: default network only, 1 pair, 100k-step traces, 256 MB checkpoints",
    )
    p.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections: {','.join(SECTIONS)}")
    p.add_argument(
        "--repeats", type=int, default=None, help="run pairs per network and harness pairs (default 5, --quick 1)"
    )
    p.add_argument(
        "--network",
        choices=("default", "large", "both"),
        default=None,
        help="networks of the launch section (default: both; --quick: default); large = 2048x4",
    )
    p.add_argument("--nproc", type=int, default=2, help="processes per launch (default 2)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every launch, e.g. trainer.accelerator=gpu (repeatable)",
    )
    p.add_argument("--device", default="cpu", help="device of the recording section (cpu, cuda)")
    p.add_argument("--trace-steps", type=int, default=None, help="synthetic trace length (default 1,000,000)")
    p.add_argument("--trace-indices", type=int, default=4, help="indices per synthetic step record (default 4)")
    p.add_argument("--ckpt-mb", type=int, default=None, help="synthetic checkpoint size per side (default 2100 MB)")
    p.add_argument("--record-steps", type=int, default=3000, help="steps per loop in the recording benchmark")
    p.add_argument("--tmp", default=None, help="where to write (default: a new folder under /tmp)")
    p.add_argument("--child-compare", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--profile", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.only) - set(SECTIONS)
    if unknown:
        p.error(f"--only: unknown sections {sorted(unknown)}; choose from {','.join(SECTIONS)}")
    for item in args.overrides:
        if "=" not in item or not item.partition("=")[0]:
            p.error(f"--set {item!r}: expected KEY=VALUE, e.g. trainer.accelerator=gpu")
    if args.nproc < 1:
        p.error(f"--nproc must be positive, got {args.nproc}")
    args.flags = [x for item in args.overrides for x in ("--" + item.partition("=")[0], item.partition("=")[2])]
    args.network = args.network or ("default" if args.quick else "both")
    args.repeats = args.repeats or (1 if args.quick else 5)
    args.trace_steps = args.trace_steps or (100_000 if args.quick else 1_000_000)
    args.ckpt_mb = args.ckpt_mb or (256 if args.quick else 2100)
    return args


# ---------------------------------------------------------------------------------------------
# the sections: one function each, run in SECTIONS order (a new section: a function and an entry)


def section_launch(args, tmp: Path, cfg) -> None:
    section(
        f"1. Lightning vs raw: real runs, {args.nproc} process(es) x {cfg.threads} thread; median step time of "
        f"rank 0 after {WARMUP_STEPS} warm-up steps, median over {args.repeats} run pair(s)"
    )
    names = ["default", "large"] if args.network == "both" else [args.network]
    results = [
        bench_launch(
            tmp, name, args.flags + NETWORKS[name], args.repeats, args.nproc, cfg.threads, cfg.data.batch_size, 900
        )
        for name in names
    ]
    print_launch(results)
    print(f"  default: configs/default.yaml (32-64-10, 2000 samples, 3 epochs); large: {' '.join(LARGE)}")
    if args.overrides:
        print(f"  overrides: {' '.join(args.overrides)}")


def section_harness(args, tmp: Path, cfg) -> None:
    section(
        f"2. compare/run.py end to end vs the same two launches by hand, one after the other (default network), "
        f"{args.repeats} pair(s)"
    )
    sequential = bench_harness(tmp / "sequential", args.repeats, args.flags, args.nproc, cfg.threads, "--sequential")
    print_harness(sequential, time_traces_only(tmp, tmp / "sequential" / f"harness-{args.repeats - 1}"))
    cores = available_cores()
    section("2b. compare/run.py with both sides at once vs the same two launches by hand, one after the other")
    if cores < OVERLAP_MIN_CORES:
        print(
            f"  not measured: {cores} cores here, both sides at once is measured on >= {OVERLAP_MIN_CORES} "
            "(2b is the figure of the harness's default where the cores allow both sides at once)"
        )
        return
    overlapped = bench_harness(tmp / "at-once", args.repeats, args.flags, args.nproc, cfg.threads, "--parallel")
    print_harness(overlapped, time_traces_only(tmp, tmp / "at-once" / f"harness-{args.repeats - 1}"))


def section_record(args, tmp: Path, cfg) -> None:
    section(f"3. recording on vs off: TraceRecorder.record in the raw loop's step, one process, {args.device}")
    network = "large" if args.network == "large" else "default"
    print(f"  network: {network}")
    print_record(
        bench_record(tmp, args.record_steps, 5 if not args.quick else 3, cfg.threads, args.device, NETWORKS[network])
    )


def section_comparator(args, tmp: Path, cfg) -> None:
    free = shutil.disk_usage(tmp).free
    need_gb = (2 * args.ckpt_mb / 1024) + 2 * args.trace_steps * 4 * 170 / 2**30
    section(f"4a. comparator on two synthetic traces ({args.trace_steps:,} steps x 4 ranks), in a child process")
    if free < MIN_FREE_DISK:
        print(f"  skipped: {free / 2**30:.1f} GB free under {tmp}, this needs 10 GB (about {need_gb:.1f} GB used)")
        return
    counts = sorted({max(args.trace_steps // 10, 1), args.trace_steps})
    print_traces(bench_traces(tmp, counts, 4, args.trace_indices), args.trace_indices)
    section(f"4b. comparator on two synthetic safetensors checkpoints of {args.ckpt_mb} MB, in a child process")
    largest = 256 if args.ckpt_mb >= 1024 else max(args.ckpt_mb // 4, 1)
    print_checkpoints(bench_checkpoints(tmp, args.ckpt_mb, largest))


SECTION_RUNNERS = {
    "launch": section_launch,
    "harness": section_harness,
    "record": section_record,
    "comparator": section_comparator,
}


def machine_line() -> str:
    import torch

    try:
        import lightning

        lv = lightning.__version__
    except ImportError:
        lv = "-"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{time.strftime('%Y-%m-%d %H:%M')}  {platform.node()}  {os.cpu_count()} cores  "
        f"python {platform.python_version()}  torch {torch.__version__}  lightning {lv}  load average {load}"
    )


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.child_compare:
        child_compare(*args.child_compare, profile=args.profile)
        return 0
    print("$ python -m benchmarks.bench " + " ".join(sys.argv[1:] if argv is None else argv))
    print(machine_line())
    tmp = Path(args.tmp) if args.tmp else Path(tempfile.mkdtemp(prefix="ddp-parity-bench-", dir="/tmp"))
    tmp.mkdir(parents=True, exist_ok=True)
    from ddp_parity.config import parse_raw_config

    cfg = parse_raw_config(["--config", str(DEFAULT_CONFIG), *args.flags])
    started = time.monotonic()
    try:
        for name in SECTIONS:
            if name in args.only:
                SECTION_RUNNERS[name](args, tmp, cfg)
    finally:
        if not args.tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"\ntotal {time.monotonic() - started:.0f} s; load average at the end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
