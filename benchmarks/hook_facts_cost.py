"""What the facts of ddp_parity/hooks/rng.py and collectives.py cost per step, in one process on the CPU:

- the generators' digests at a step's start (torch's CPU generator, numpy's, Python's `random`), timed
  alone over many calls;
- a tiny training loop (a 6-16-3 network, batches of 8) recorded by the hooks, with the digests taken and
  with them switched off, alternating rounds: the difference per step;
- one collective's note (an all_reduce of a loss in a world of one).

    python -m benchmarks.hook_facts_cost [--steps 400] [--rounds 5]

Prints medians in microseconds.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time

import numpy.random  # noqa: F401 - the digests read numpy's generator where the program imported it
import torch
import torch.distributed as dist

from ddp_parity.hooks import lifecycle, rng, state


def digest_us(calls: int = 20000) -> float:
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            rng.digests("forward")
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return min(runs)


def tiny():
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Dropout(0.5), torch.nn.Linear(16, 3))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def loop_us(model, optimizer, steps: int) -> float:
    """Median time per step of the tiny loop (the hooks recording it), after 20 warm-up steps."""
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    times = []
    for _ in range(steps + 20):
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[20:]) * 1e6


def collective_us(calls: int = 2000) -> tuple[float, float]:
    """(plain, noted): one all_reduce of a scalar in a world of one, without and with the hook's note."""
    t = torch.ones(())
    out = []
    for live in (None, state.current):
        state.current, saved = live, state.current
        t0 = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(t)
            if live is not None:
                live.new_step()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        state.current = saved
    return out[0], out[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    random.seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000))
        lifecycle.install_hooks(os.path.join(tmp, "run"), "bench")
        dist.init_process_group("gloo", rank=0, world_size=1)
        print(f"generators' digests alone: {digest_us():.1f} us a call")
        take = rng._take  # what reads the generators: the hooks that call it run in both arms
        with_rng, without = [], []
        model, optimizer = tiny()  # one optimizer: the one whose steps the hooks record
        for _ in range(args.rounds):
            rng._take = take
            with_rng.append(loop_us(model, optimizer, args.steps))
            rng._take = lambda at: None
            without.append(loop_us(model, optimizer, args.steps))
        rng._take = take
        assert state.current.steps == 2 * args.rounds * (args.steps + 20) and state.current.recorder is not None
        a, b = statistics.median(with_rng), statistics.median(without)
        print(f"tiny loop, recorded: {a:.1f} us a step with the digests, {b:.1f} without: +{a - b:.1f} us")
        plain, noted = collective_us()
        print(f"an all_reduce of a scalar (world of one): {plain:.1f} us plain, {noted:.1f} us noted")
        lifecycle.finish()
        dist.destroy_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
