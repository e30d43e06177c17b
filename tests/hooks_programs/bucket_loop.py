"""A loop whose DataLoader takes its batches from a batch sampler of its own, a DistributedSampler subclass as vits'
bucket sampler is: its __iter__ is a plain function that draws the epoch's order (a generator seeded by the epoch)
and returns an iterator over the batches, so the order is drawn as the DataLoader's iterator is made; its length
needs the batch size it sets after DistributedSampler.__init__. Epochs are counted from 1, as vits counts them. It
knows nothing of any recorder. One process in a process group of one (a file store: no port); the model is given
to DDP. --set-epoch says where the loop sets the sampler's epoch:

    before   set_epoch(epoch) before the epoch's iterator is made (the authors' loop)
    after    the iterator made first, then set_epoch(epoch) (Lightning's order: its fit loop makes an epoch's
             iterator before on_train_epoch_start)
    never    no set_epoch (Lightning sets a DataLoader's sampler's epoch, never a batch sampler's)

    python tests/hooks_programs/bucket_loop.py STORE_FILE --set-epoch {before,after,never}
"""

from __future__ import annotations

import argparse
import gc

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Buckets(DistributedSampler):
    """Batches of `batch_size` from a permutation drawn by a generator seeded with the epoch."""

    def __init__(self, dataset, batch_size: int):
        super().__init__(dataset, num_replicas=1, rank=0, shuffle=True)
        self.batch_size = batch_size

    def __iter__(self):
        g = torch.Generator().manual_seed(self.epoch)
        order = torch.randperm(len(self.dataset), generator=g).tolist()
        self.batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.dataset) // self.batch_size


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("store")
    p.add_argument("--set-epoch", choices=("before", "after", "never"), required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=0, world_size=1)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(16, 6, generator=g), torch.randint(0, 3, (16,), generator=g))
    sampler = Buckets(data, batch_size=4)
    loader = DataLoader(data, batch_sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in (1, 2):
        if args.set_epoch == "before":
            sampler.set_epoch(epoch)
        batches = iter(loader)
        if args.set_epoch == "after":
            sampler.set_epoch(epoch)
        for x, y in batches:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.8f}", flush=True)
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
