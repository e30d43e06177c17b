"""One process: a small network trained by SGD on batches of a DataLoader over a DistributedSampler of one
replica (no process group needed), with a second, evaluation loader whose sampler is set to each epoch too (as
Lightning sets every loader's). It knows nothing of any recorder. --epoch-batches says how its iterators end:

    0 (default)  the training iterator is kept across the loop's epochs and made anew only when it runs out, its
                 sampler's epoch counted by its own passes (FixMatch's train.py)
    K            each of the loop's epochs takes K batches from a new iterator, set_epoch(epoch) before it
                 (Lightning's fit loop with limit_train_batches=K): dropped with batches left where K < 6

--sampler-seed, --first-epoch (the epoch set_epoch is given first, a script counting from 1), --drop-last (the
training sampler's; one replica: it drops nothing), --batch-size and --seeds (how often torch.manual_seed(0) is
called, the same value each time, as Lightning seeds again) build the loop as a port might build it otherwise.

    python tests/hooks_programs/epoch_loop.py [--steps 8] [--epoch-batches K] [--sampler-seed 0] [--first-epoch 0]
        [--drop-last] [--batch-size 4] [--seeds 1]

It prints each step's loss.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--epoch-batches", type=int, default=0)
    p.add_argument("--sampler-seed", type=int, default=0)
    p.add_argument("--first-epoch", type=int, default=0)
    p.add_argument("--drop-last", action="store_true")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seeds", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(1)
    for _ in range(args.seeds):
        torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(24, 6, generator=g), torch.randint(0, 3, (24,), generator=g))
    sampler = DistributedSampler(
        data, num_replicas=1, rank=0, shuffle=True, seed=args.sampler_seed, drop_last=args.drop_last
    )
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)  # 6 batches a pass of 4
    evaluation = DistributedSampler(data, num_replicas=1, rank=0, shuffle=False)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = _batches(loader, sampler, evaluation, args.epoch_batches, args.steps, args.first_epoch)
    for step, (x, y) in enumerate(batches, 1):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.8f}", flush=True)


def _batches(loader, sampler, evaluation, epoch_batches: int, steps: int, first_epoch: int = 0):
    """`steps` batches: from iterators kept until they run out (epoch_batches 0), or epoch_batches from each; the
    samplers' epochs counted from `first_epoch`."""
    passes, taken = first_epoch, 0
    sampler.set_epoch(first_epoch)
    evaluation.set_epoch(first_epoch)
    batches = iter(loader)
    while taken < steps:
        if epoch_batches and taken and taken % epoch_batches == 0:  # the loop's epoch ends: a new iterator
            passes += 1
            evaluation.set_epoch(passes)
            sampler.set_epoch(passes)
            batches = iter(loader)
        try:
            batch = next(batches)
        except StopIteration:  # the pass ran out: the next, its sampler at its next epoch
            passes += 1
            sampler.set_epoch(passes)
            batches = iter(loader)
            batch = next(batches)
        taken += 1
        yield batch


if __name__ == "__main__":
    main()
