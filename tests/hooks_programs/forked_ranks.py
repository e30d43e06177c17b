"""Two ranks started by fork, as pycls's and many launchers' `multiprocessing.Process` start them: the parent
never trains, each child sets up its own process group (env://, gloo), trains a few steps under DDP over a
DataLoader with a forked worker over two epochs, and returns without destroying its group. multiprocessing then
ends the child by `os._exit`: no atexit handler runs. It knows nothing of any recorder.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=PORT python tests/hooks_programs/forked_ranks.py [--steps N] [--workers K]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

WORLD = 2


def train(rank: int, steps: int, workers: int) -> None:
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(8 * steps, 4), torch.randn(8 * steps, 1))
    loader = DataLoader(data, batch_size=4, sampler=DistributedSampler(data, shuffle=False), num_workers=workers)
    for epoch in range(2):  # epoch 1's worker is forked from a rank whose recording has started
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    dist.barrier()  # the program's last collective; the group is never destroyed, as pycls's


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per epoch")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    fork = multiprocessing.get_context("fork")
    ranks = [fork.Process(target=train, args=(rank, args.steps, args.workers)) for rank in range(WORLD)]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join()
    return max(abs(process.exitcode) for process in ranks)


if __name__ == "__main__":
    sys.exit(main())
