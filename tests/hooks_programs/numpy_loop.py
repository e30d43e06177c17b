"""A loop whose data draws from numpy's global generator, as DeiT's Mixup/CutMix lambda or an augmentation written
with numpy does: in the dataset's __getitem__ (--where dataset: the batch itself differs) or in the step, between
the batch and the model (--where step: a Mixup of the batch with a lambda drawn per step). torch is seeded 0 and
numpy --numpy-seed (a program seeds numpy per rank, seed + rank, where its port may seed it alike). It knows nothing
of any recorder. One process in a process group of one (a file store: no port); the model is given to DDP.

    python tests/hooks_programs/numpy_loop.py STORE_FILE --where {dataset,step} [--numpy-seed N]
"""

from __future__ import annotations

import argparse
import gc

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset


class Noisy(Dataset):
    """Fixed samples; with `numpy_noise`, each gets noise drawn from numpy's global generator as it is read."""

    def __init__(self, numpy_noise: bool):
        g = torch.Generator().manual_seed(1)
        self.x, self.y = torch.randn(32, 6, generator=g), torch.randint(0, 3, (32,), generator=g)
        self.numpy_noise = numpy_noise

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        x = self.x[i]
        if self.numpy_noise:
            x = x + torch.from_numpy(np.random.normal(0.0, 0.1, 6).astype(np.float32))
        return x, self.y[i]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("store")
    p.add_argument("--where", choices=("dataset", "step"), required=True)
    p.add_argument("--numpy-seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{args.store}", rank=0, world_size=1)
    torch.manual_seed(0)
    np.random.seed(args.numpy_seed)
    model = DDP(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Noisy(args.where == "dataset"), batch_size=8, shuffle=True)
    for x, y in loader:
        if args.where == "step":  # a Mixup with the batch reversed, its lambda from numpy
            lam = float(np.random.beta(0.8, 0.8))
            x = lam * x + (1 - lam) * x.flip(0)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"loss {loss.item().hex()}", flush=True)
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
