"""Peak memory per rank, DDP against FSDP2: the raw loop on a network large enough for sharding to show.

    python -m benchmarks.fsdp_memory                       # world 2, 3 hidden layers of 4096 (~34M parameters)
    python -m benchmarks.fsdp_memory --nproc 4 --hidden 2048

Each strategy runs `raw/train.py` under torchrun for a few steps (no validation, no checkpoint); every
rank reports its peak resident set size (getrusage ru_maxrss) when training has ended, before the
recorder's final gather, and again at exit. The parameters, gradients and Adam's two moments take
4 x 4 bytes per parameter under DDP (plus DDP's gradient buckets); FSDP2 keeps 1/world of each, plus
one block gathered whole at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ddp_parity import sharding, trace

REPO = Path(__file__).resolve().parents[1]
WORKER = "--worker"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def timed(module, name: str, seconds: dict) -> None:
    """Replace module.name by a wrapper that adds its wall time to seconds[name] (the recorder's
    full-tensor gathers: the gradient norm and the per-step parameter digest)."""
    function = getattr(module, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started

    setattr(module, name, wrapper)


def worker(report_dir: str, argv: list[str]) -> int:
    """One rank: raw/train.py's main, with the peak taken when training ends (before finish) and the
    time spent in the recorder's gathers."""
    seconds: dict = {}
    timed(sharding, "total_grad_norm", seconds)  # before raw/train.py imports the name
    timed(trace, "param_digest", seconds)
    train = runpy.run_path(str(REPO / "raw" / "train.py"), run_name="raw_train")
    recorder_class = train["TraceRecorder"]
    finish = recorder_class.finish
    peaks = {}

    def finish_noting_the_peak(self, model, **extra):
        peaks["training_mb"] = peak_rss_mb()
        peaks["train_s"] = extra["train_seconds"]
        return finish(self, model, **extra)

    recorder_class.finish = finish_noting_the_peak
    code = train["main"](argv)
    rank = os.environ.get("RANK", "0")
    peaks["at_exit_mb"] = peak_rss_mb()
    peaks["gather_s"] = seconds
    Path(report_dir, f"rank{rank}.json").write_text(json.dumps(peaks))
    return code


def run_strategy(strategy: str, args, folder: Path) -> list[dict]:
    reports = folder / f"{strategy}-peaks"
    reports.mkdir()
    train_args = [
        "--config", str(REPO / "configs" / "default.yaml"), "--run_dir", str(folder / strategy),
        "--trainer.strategy", strategy, "--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false",
        "--data.num_samples", str(args.nproc * 32 * args.steps), "--data.val_samples", "0",
        "--checkpoint.every_n_epochs", "null", "--model.hidden_dim", str(args.hidden),
        "--model.depth", str(args.depth), "--model.optimizer", "adam",
    ]  # fmt: skip
    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.nproc}"]
    torchrun += ["--master_addr=127.0.0.1", f"--master_port={args.port}"]
    command = [*torchrun, "-m", "benchmarks.fsdp_memory", WORKER, str(reports), *train_args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(command, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    return [json.loads((reports / f"rank{r}.json").read_text()) for r in range(args.nproc)]


def main(argv: list[str]) -> int:
    if argv[:1] == [WORKER]:
        return worker(argv[1], argv[2:])
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fsdp_memory", description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--port", type=int, default=29655)
    args = parser.parse_args(argv)
    params = 32 * args.hidden + args.hidden + (args.depth - 1) * (args.hidden**2 + args.hidden) + args.hidden * 10 + 10
    print(f"network: {args.depth} hidden layers of {args.hidden}, {params / 1e6:.1f}M parameters "
          f"({params * 4 / 2**20:.0f} MiB in fp32); world {args.nproc}, {args.steps} steps, Adam")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for strategy in ("ddp", "fsdp"):
            peaks = run_strategy(strategy, args, Path(tmp))
            for rank, peak in enumerate(peaks):
                print(f"{strategy:5s} rank {rank}: peak RSS {peak['training_mb']:7.0f} MiB when training ends, "
                      f"{peak['at_exit_mb']:7.0f} MiB at exit (after the recorder's final gather)")  # fmt: skip
                gathers = ", ".join(f"{k} {v:.3f} s" for k, v in sorted(peak["gather_s"].items()))
                print(f"{'':5s} rank {rank}: training {peak['train_s']:.2f} s, of which the recorder's {gathers}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
