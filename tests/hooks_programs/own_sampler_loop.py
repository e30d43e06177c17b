"""One process: a small network trained by SGD on a DataLoader whose sampler is of the program's own (a Sampler
subclass, no DistributedSampler: a permutation of the data set enlarged by a ratio, drawn from a generator seeded by
the epoch alone, as BasicSR's EnlargedSampler), set to each epoch by the loop; beside it an evaluation loader over a
DistributedSampler subclass whose set_epoch calls its base's. It knows nothing of any recorder.

    python tests/hooks_programs/own_sampler_loop.py [--steps 6] [--ratio 2]

It prints each step's loss.
"""

from __future__ import annotations

import argparse
import math

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset


class EnlargedOrder(Sampler):
    """The data set `ratio` times over, in a permutation seeded by the epoch (no global generator drawn from)."""

    def __init__(self, dataset, ratio: int = 1):
        self.dataset = dataset
        self.ratio = ratio
        self.epoch = 0
        self.total_size = math.ceil(len(dataset) * ratio)

    def __iter__(self):
        g = torch.Generator().manual_seed(self.epoch)
        return iter([i % len(self.dataset) for i in torch.randperm(self.total_size, generator=g).tolist()])

    def __len__(self) -> int:
        return self.total_size

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


class EvaluationShard(DistributedSampler):
    """A DistributedSampler subclass with a set_epoch of its own that calls its base's: one call, not two."""

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--ratio", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(8, 6, generator=torch.Generator().manual_seed(1)), torch.arange(8) % 3)
    sampler = EnlargedOrder(data, args.ratio)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    evaluation = EvaluationShard(data, num_replicas=1, rank=0, shuffle=False)
    evaluation_loader = DataLoader(data, batch_size=8, sampler=evaluation)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step, epoch = 0, 0
    while step < args.steps:
        sampler.set_epoch(epoch)
        evaluation.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            print(f"step {step} loss {loss.item():.8f}", flush=True)
            if step == args.steps:
                break
        with torch.no_grad():
            for x, _ in evaluation_loader:
                model(x)
        epoch += 1


if __name__ == "__main__":
    main()
