"""What the module watch costs: a training loop (one process, the config's thread count) run with no
recorder, with the recorder and the watch off, with the watch on its default steps, and with the
watch on every step, on the tutorial network and on the 2048x4 network. Prints a table.

    python -m benchmarks.watch_cost                       # both networks, 96 steps (the default config's run)
    python -m benchmarks.watch_cost --steps 40 --rounds 2 # shorter

Every figure is a ratio of times measured in this run: the variants of one network run in
interleaved rounds (the machine may be loaded by others), and each variant's figure is the median
over rounds of its total loop time. "overhead" is against the loop without any recorder;
"watched step" is the extra time of one watched step, against the plain step time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

from ddp_parity import TraceRecorder
from ddp_parity.compare.report import render_table
from ddp_parity.model import Net
from ddp_parity.trace import param_digest
from ddp_parity.watch import DEFAULT_STEPS, WATCH_STEP_ENV

NETWORKS = {"tutorial (32-64-10)": dict(hidden_dim=64, depth=1), "2048x4": dict(hidden_dim=2048, depth=4)}
VARIANTS = ("no recorder", "watch off", "watch default", "watch every step")
BATCH, INPUT_DIM, CLASSES = 32, 32, 10


class Loop:
    """One variant's model, optimizer and recorder, stepped one optimizer step at a time."""

    def __init__(self, net_kwargs: dict, variant: str, run_dir: str):
        torch.manual_seed(0)
        self.model = Net(INPUT_DIM, num_classes=CLASSES, **net_kwargs)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        g = torch.Generator().manual_seed(1)
        self.data = [(torch.randn(BATCH, INPUT_DIM, generator=g), torch.randint(CLASSES, (BATCH,), generator=g))
                     for _ in range(8)]  # fmt: skip
        self.recorder = None
        if variant != "no recorder":
            self.recorder = TraceRecorder(run_dir, side="bench")
            self.recorder.start()
        if variant == "watch default":
            self.recorder.watch(self.model)
        elif variant == "watch every step":
            self.recorder.watch(self.model, steps="all")

    def step(self, step: int) -> float:
        t0 = time.perf_counter()
        x, y = self.data[step % len(self.data)]
        loss = self.loss_fn(self.model(x), y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in self.model.parameters()])
        self.optimizer.step()
        if self.recorder is not None:
            self.recorder.record(step, loss.detach(), torch.arange(BATCH), grad_norm=grad_norm,
                                 param_digest=param_digest(self.model))  # fmt: skip
        return time.perf_counter() - t0

    def close(self) -> float:
        t0 = time.perf_counter()
        if self.recorder is not None:
            self.recorder.close()  # the flush resolves the watched steps' digests: counted
        return time.perf_counter() - t0


def measure(net_kwargs: dict, steps: int, rounds: int) -> dict:
    """The variants step in lockstep (one step of each, in a rotating order, then the next step), so
    that a load change on the machine hits them alike; each figure is a median of paired step-time
    differences, robust to the outliers a loaded machine throws in."""
    times = {v: [] for v in VARIANTS}
    closes = {v: [] for v in VARIANTS}
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            loops = {v: Loop(net_kwargs, v, os.path.join(tmp, str(i))) for i, v in enumerate(VARIANTS)}
            for step in range(1, steps + 1):
                shift = (step + r) % len(VARIANTS)
                for v in VARIANTS[shift:] + VARIANTS[:shift]:
                    times[v].append((step, loops[v].step(step)))
            for v in VARIANTS:
                closes[v].append(loops[v].close())
    warm = max(DEFAULT_STEPS) + 2  # past the default watched steps and the first steps' warm-up

    def paired(a: str, b: str) -> float:
        return statistics.median(ta - tb for (s, ta), (_, tb) in zip(times[a], times[b]) if s > warm)

    base = statistics.median(t for s, t in times["no recorder"] if s > warm)
    recorder = paired("watch off", "no recorder")
    watched = paired("watch every step", "watch off")  # one watched step's extra time
    hooks_left = paired("watch default", "watch off")  # after the default steps (hooks removed)
    flush = {v: statistics.median(closes[v]) - statistics.median(closes["watch off"]) for v in VARIANTS}
    run = steps * base
    return {
        "step_s": base,
        "watched_step": watched / base,
        "per_step": {"watch off": recorder / base, "watch default": (recorder + hooks_left) / base,
                     "watch every step": (recorder + watched) / base},
        "run": {
            "watch off": recorder * steps / run,
            "watch default": (recorder * steps + hooks_left * (steps - len(DEFAULT_STEPS))
                              + watched * len(DEFAULT_STEPS) + flush["watch default"]) / run,
            "watch every step": ((recorder + watched) * steps + flush["watch every step"]) / run,
        },
    }  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.watch_cost", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=96, help="optimizer steps per loop (default: the default config's run)")
    p.add_argument("--rounds", type=int, default=1, help="runs of the lockstep loop per network")
    p.add_argument("--threads", type=int, default=1, help="torch threads (the config's `threads`)")
    args = p.parse_args(argv)
    if args.steps < max(DEFAULT_STEPS) + 10 or args.rounds < 1 or args.threads < 1:
        p.error(f"--steps must be at least {max(DEFAULT_STEPS) + 10}; --rounds and --threads at least 1")
    os.environ.pop(WATCH_STEP_ENV, None)
    torch.set_num_threads(args.threads)
    print(
        f"load average {os.getloadavg()[0]:.1f}; {args.steps} steps x {args.rounds} round(s), {args.threads} thread(s)"
    )
    rows = []
    for label, kwargs in NETWORKS.items():
        m = measure(kwargs, args.steps, args.rounds)
        for variant in VARIANTS[1:]:
            rows.append(
                [
                    label,
                    f"{m['step_s'] * 1e3:.2f} ms",
                    variant,
                    f"{m['per_step'][variant] * 100:+.1f}%",
                    f"{m['run'][variant] * 100:+.1f}%",
                    f"{m['watched_step'] * 100:+.0f}%" if variant == "watch every step" else "",
                ]
            )
    header = [
        "network",
        "step (no recorder)",
        "recording",
        "per step (median)",
        f"run of {args.steps} steps",
        "one watched step",
    ]
    print(render_table(header, rows))
    print(
        f"default watched steps: {list(DEFAULT_STEPS)}; overhead against the loop without a recorder; "
        f"load average now {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
