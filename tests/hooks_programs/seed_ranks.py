"""Two ranks (torchrun): each rank shuffles its own share of a dataset from the global generator (a DataLoader
with shuffle=True, as a port's injected sampler would not), so the seed each rank sets decides its samples. It
knows nothing of any recorder. Each flag changes one fact:

    --seed N            the seed every rank sets (default 42)
    --seed-by-rank      each rank seeds seed + rank (so its augmentations and shuffle differ from its peers')
    --rank1-seed N      rank 1 alone seeds N
    --reseed            every rank seeds again after the model's build (as Lightning's DDP setup does)
    --accumulate K      K micro-batches per optimizer step (no_sync on all but the last), each one's loss divided by K
    --undivided         each micro-batch's loss summed into the step undivided (not divided by K)
    --first-accumulate N
                        the first optimizer step after N micro-batches (a loop whose first step follows its first
                        micro-batch), the later ones after K
    --batch B           samples per micro-batch (default 4)
    --sampler-seed N    a DistributedSampler(shuffle=True, seed=N) instead of each rank shuffling its share
    --build-before-seed the network built before the seed, each rank's generator then in a state of its own (a
                        draw of the rank's own before it, as a launcher's): the ranks build other weights

    torchrun --nproc_per_node=2 tests/hooks_programs/seed_ranks.py [flags]
"""

from __future__ import annotations

import argparse
import contextlib

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, Subset, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--seed-by-rank", action="store_true")
    p.add_argument("--rank1-seed", type=int, default=None)
    p.add_argument("--reseed", action="store_true")
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--undivided", action="store_true")
    p.add_argument("--first-accumulate", type=int, default=None)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--sampler-seed", type=int, default=None)
    p.add_argument("--build-before-seed", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    seed = args.seed + rank if args.seed_by_rank else args.seed
    if rank == 1 and args.rank1_seed is not None:
        seed = args.rank1_seed
    if args.build_before_seed:
        torch.rand(rank)  # a draw of the rank's own: each rank's generator in another state before the build
        net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    torch.manual_seed(seed)
    if not args.build_before_seed:
        net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    dist.broadcast(net[0].weight.data, 0)  # the same initial weights on every rank, as DDP's constructor does
    model = DistributedDataParallel(net)
    if args.reseed:
        torch.manual_seed(seed)  # after the build: the shuffle draws from the seed, not after the weights
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(64, 6, generator=g), torch.randint(0, 3, (64,), generator=g))
    if args.sampler_seed is None:
        share = Subset(data, list(range(rank, len(data), world)))
        loader = iter(DataLoader(share, batch_size=args.batch, shuffle=True))
    else:
        sampler = DistributedSampler(data, shuffle=True, seed=args.sampler_seed)
        loader = iter(DataLoader(data, batch_size=args.batch, sampler=sampler))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(1, 4):
        optimizer.zero_grad()
        micros = args.first_accumulate if step == 1 and args.first_accumulate else args.accumulate
        for micro in range(micros):
            x, y = next(loader)
            last = micro == micros - 1
            with contextlib.nullcontext() if last else model.no_sync():
                loss = nn.functional.cross_entropy(model(x), y) / (1 if args.undivided else args.accumulate)
                loss.backward()
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.8f}", flush=True)
    del model  # DDP's reducer gone before its group: gloo aborts a process exiting with both alive
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
