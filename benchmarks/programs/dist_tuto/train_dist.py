# Source: pytorch/tutorials, intermediate_source/dist_tuto.rst, "Writing Distributed Applications with PyTorch"
# (BSD 3-Clause License, Copyright (c) 2017-2022, Pytorch contributors; see LICENSE.pytorch-tutorials): the
# "Distributed Training" section's program, as written: a partitioned dataset, a Net, synchronous SGD with the
# gradients averaged by hand (all_reduce, then a division by the world size), launched by init_process with
# torch.multiprocessing. Net is the one its linked script (seba-1511/dist_tuto.pth train_dist.py) trains: the
# MNIST Net of pytorch/examples mnist/main.py of that time.
# Changed, each line marked `# changed:`: MNIST (a download) is stood in for by synthetic 1x28x28 images of the
# same shape; the float batch size `128 / float(size)` made an int (today's DataLoader refuses a float); the
# port read from MASTER_PORT when it is set (the fixed 29500 collides on a shared machine); epochs and the
# number of images are arguments (the tiny config). No line records anything: `ddp-parity record` does.
#
#     python train_dist.py --epochs 2 --size 512
"""run.py:"""

#!/usr/bin/env python  # noqa: E265 (as written)
import argparse  # changed: the tiny config's arguments
import os
import sys
from math import ceil
from random import Random

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

parser = argparse.ArgumentParser()  # changed: the tiny config's arguments
parser.add_argument("--epochs", default=10, type=int)  # changed
parser.add_argument("--size", default=60000, type=int)  # changed: how many synthetic images


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()  # noqa: UP008 (as written)
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x)  # noqa (as written: the implicit dim)


""" Dataset partitioning helper """


class Partition(object):  # noqa: UP004 (as written)
    def __init__(self, data, index):
        self.data = data
        self.index = index

    def __len__(self):
        return len(self.index)

    def __getitem__(self, index):
        data_idx = self.index[index]
        return self.data[data_idx]


class DataPartitioner(object):  # noqa: UP004 (as written)
    def __init__(self, data, sizes=[0.7, 0.2, 0.1], seed=1234):  # noqa: B006 (as written)
        self.data = data
        self.partitions = []
        rng = Random()
        rng.seed(seed)
        data_len = len(data)
        indexes = [x for x in range(0, data_len)]  # noqa: C416 (as written)
        rng.shuffle(indexes)

        for frac in sizes:
            part_len = int(frac * data_len)
            self.partitions.append(indexes[0:part_len])
            indexes = indexes[part_len:]

    def use(self, partition):
        return Partition(self.data, self.partitions[partition])


def synthetic_mnist(n):  # changed: stands in for datasets.MNIST('./data', train=True, download=True, ...)
    g = torch.Generator().manual_seed(0)
    images = ((torch.rand(n, 1, 28, 28, generator=g) - 0.1307) / 0.3081).unbind(0)
    labels = torch.randint(0, 10, (n,), generator=g).tolist()
    return list(zip(images, labels))


""" Partitioning MNIST """


def partition_dataset(n):  # changed: n, the number of synthetic images
    dataset = synthetic_mnist(n)  # changed: for datasets.MNIST(...) and its transforms
    size = dist.get_world_size()
    bsz = int(128 / float(size))  # changed: int(...), a DataLoader takes no float batch size
    partition_sizes = [1.0 / size for _ in range(size)]
    partition = DataPartitioner(dataset, partition_sizes)
    partition = partition.use(dist.get_rank())
    train_set = torch.utils.data.DataLoader(partition, batch_size=bsz, shuffle=True)
    return train_set, bsz


""" Gradient averaging. """


def average_gradients(model):
    size = float(dist.get_world_size())
    for param in model.parameters():
        dist.all_reduce(param.grad.data, op=dist.ReduceOp.SUM)
        param.grad.data /= size


""" Distributed Synchronous SGD Example """


def run(rank, size, args):  # changed: args, the tiny config
    torch.manual_seed(1234)
    train_set, bsz = partition_dataset(args.size)  # changed: args.size
    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.5)

    num_batches = ceil(len(train_set.dataset) / float(bsz))
    for epoch in range(args.epochs):  # changed: args.epochs for 10
        epoch_loss = 0.0
        for data, target in train_set:
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            epoch_loss += loss.item()
            loss.backward()
            average_gradients(model)
            optimizer.step()
        print("Rank ", dist.get_rank(), ", epoch ", epoch, ": ", epoch_loss / num_batches)


def init_process(rank, size, fn, args, backend="gloo"):  # changed: args passed on to fn
    """Initialize the distributed environment."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", "29500")  # changed: MASTER_PORT when set
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size, args)  # changed: args


if __name__ == "__main__":
    args = parser.parse_args()  # changed: the tiny config
    world_size = 2
    processes = []
    if "google.colab" in sys.modules:
        print("Running in Google Colab")
        mp.get_context("spawn")
    else:
        mp.set_start_method("spawn")
    for rank in range(world_size):
        p = mp.Process(target=init_process, args=(rank, world_size, run, args))  # changed: args
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
