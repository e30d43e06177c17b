"""One process: a small network trained by SGD on a DataLoader whose batch sampler is the program's own, an
infinite one with no set_epoch: it keeps its order in itself, hands it to each new iterator from its start and
draws the next only when an iterator runs past the last batch (VAR's and MAE's infinite batch samplers). It knows
nothing of any recorder. --per-epoch says how the loop takes each epoch's len(loader) batches:

    (default)    from one iterator kept across the loop's epochs (the authors' loops over an infinite sampler)
    --per-epoch  from a new iterator at each epoch (`for batch in loader`, as Lightning's fit loop does)

    python tests/hooks_programs/infinite_loop.py [--epochs 2] [--per-epoch]

It prints each step's loss.
"""

from __future__ import annotations

import argparse
import itertools

import torch
from torch import nn
from torch.utils.data import DataLoader, Sampler, TensorDataset


class InfiniteBatchSampler(Sampler):
    """Batches of a permutation seeded by its own counter, without end; no set_epoch."""

    def __init__(self, size: int, batch_size: int):
        self.size, self.batch_size, self.drawn = size, batch_size, 0
        self.order = self._draw()

    def _draw(self) -> list[int]:
        self.drawn += 1
        return torch.randperm(self.size, generator=torch.Generator().manual_seed(self.drawn)).tolist()

    def __iter__(self):
        while True:
            for i in range(0, self.size, self.batch_size):
                yield self.order[i : i + self.batch_size]
            self.order = self._draw()  # only an iterator that runs past the last batch draws the next order

    def __len__(self) -> int:
        return self.size // self.batch_size


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--per-epoch", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(12, 6, generator=g), torch.randint(0, 3, (12,), generator=g))
    loader = DataLoader(data, batch_sampler=InfiniteBatchSampler(len(data), 4))  # 3 batches an epoch
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    kept = None if args.per_epoch else iter(loader)
    step = 0
    for _ in range(args.epochs):
        batches = iter(loader) if args.per_epoch else kept
        for x, y in itertools.islice(batches, len(loader)):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            print(f"step {step} loss {loss.item():.8f}", flush=True)


if __name__ == "__main__":
    main()
