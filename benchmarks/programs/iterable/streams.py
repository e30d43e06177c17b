# Sources (BSD 3-Clause License, Copyright (c) PyTorch contributors; see ../ddp_tutorial/LICENSE.pytorch-examples):
# - MyIterableDataset: the example in torch.utils.data.IterableDataset's docstring (pytorch/pytorch,
#   torch/utils/data/dataset.py), its worker split kept as written, extended by the rank split the docs ask a
#   distributed user to add (the range is split over world_size * num_workers shards).
# - ToyModel: pytorch/tutorials, intermediate_source/ddp_tutorial.rst (demo_basic).
import math

import torch
import torch.distributed as dist
from torch import nn


class MyIterableDataset(torch.utils.data.IterableDataset):
    def __init__(self, start, end):
        super(MyIterableDataset).__init__()
        assert end > start, "this example code only works with end >= start"
        self.start = start
        self.end = end

    def __iter__(self):
        rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        worker_info = torch.utils.data.get_worker_info()
        workers, worker_id = (1, 0) if worker_info is None else (worker_info.num_workers, worker_info.id)
        # split workload over every rank's every worker
        per_shard = int(math.ceil((self.end - self.start) / float(world * workers)))
        iter_start = self.start + (rank * workers + worker_id) * per_shard
        iter_end = min(iter_start + per_shard, self.end)
        return iter(range(iter_start, iter_end))


class ToyModel(nn.Module):
    def __init__(self):
        super(ToyModel, self).__init__()  # noqa: UP008 (as written)
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def features(n: int):
    """The samples the indices stand for: fixed inputs and targets from their own generator."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, 10, generator=g), torch.randn(n, 5, generator=g)
