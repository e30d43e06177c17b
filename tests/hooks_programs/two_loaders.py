"""One rank (gloo, a group of one) whose every step reads two DataLoaders, as a semi-supervised loop does: a batch
of a labeled set and a batch of an unlabeled one, each loader with its own DistributedSampler, made into one
forward. The backward's batch is the unlabeled loader's (read last); the labeled loader's batches feed the same
steps. It knows nothing of any recorder.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=PORT python tests/hooks_programs/two_loaders.py [--labeled-seed N]
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

STEPS = 4


class Labeled(TensorDataset):
    pass


class Unlabeled(TensorDataset):
    pass


def loader(dataset, seed: int) -> DataLoader:
    return DataLoader(dataset, batch_size=2, sampler=DistributedSampler(dataset, num_replicas=1, rank=0, seed=seed))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--labeled-seed", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("gloo", rank=0, world_size=1)
    torch.manual_seed(0)
    labeled = loader(Labeled(torch.randn(2 * STEPS, 3), torch.randn(2 * STEPS, 1)), args.labeled_seed)
    unlabeled = loader(Unlabeled(torch.randn(2 * STEPS, 3)), 0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    labeled_iter, unlabeled_iter = iter(labeled), iter(unlabeled)
    for _ in range(STEPS):
        x, y = next(labeled_iter)
        (u,) = next(unlabeled_iter)  # read last: the batch the backward takes
        out = model(torch.cat([x, u]))
        loss = nn.functional.mse_loss(out[: len(x)], y) + out[len(x) :].pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
