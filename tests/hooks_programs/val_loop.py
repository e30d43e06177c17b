"""One process, no process group: a model trained for two epochs from a DataLoader over a shuffled sampler, and
evaluated (eval mode, no_grad) after each epoch on its share of a validation set: a DataLoader over a
DistributedSampler(shuffle=True) given its replica and rank, as a rank of a DDP program validates. It knows nothing
of any recorder. With --val-set-epoch, the validation sampler's set_epoch(epoch) is called each epoch, as Lightning
calls it on every DistributedSampler it iterates; without it, never (the validation order of epoch 0 every time).
With --val-no-shuffle the validation sampler is built with shuffle=False (the same validation order every epoch,
as a sampler Lightning injects for a DataLoader(shuffle=False) is). It prints each evaluation's loss bit for bit.

    python tests/hooks_programs/val_loop.py [--val-set-epoch] [--val-no-shuffle]
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--val-set-epoch", action="store_true", help="call set_epoch on the validation sampler too")
    p.add_argument("--val-no-shuffle", action="store_true", help="build the validation sampler with shuffle=False")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(1)
    train_set = TensorDataset(torch.randn(32, 6, generator=data), torch.randint(0, 3, (32,), generator=data))
    val_set = TensorDataset(torch.randn(64, 6, generator=data), torch.randint(0, 3, (64,), generator=data))
    train_sampler = DistributedSampler(train_set, num_replicas=1, rank=0, shuffle=True, seed=0)
    val_sampler = DistributedSampler(val_set, num_replicas=2, rank=0, shuffle=not args.val_no_shuffle, seed=0)
    train_loader = DataLoader(train_set, batch_size=8, sampler=train_sampler)
    val_loader = DataLoader(val_set, batch_size=5, sampler=val_sampler)
    for epoch in range(2):
        train_sampler.set_epoch(epoch)
        if args.val_set_epoch:
            val_sampler.set_epoch(epoch)
        model.train()
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            # a figure each batch, as a metric over the loader's batches is taken: another order gives other sums
            losses = [nn.functional.cross_entropy(model(x), y).item() for x, y in val_loader]
            figure = sum(loss * (i + 1) for i, loss in enumerate(losses))
        print(f"epoch {epoch} validation {figure.hex()}", flush=True)


if __name__ == "__main__":
    main()
