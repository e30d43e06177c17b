# The DDP tutorial's demo_basic (pytorch/tutorials intermediate_source/ddp_tutorial.rst, BSD 3-Clause) run over
# an epoch loop that streams sample indices from MyIterableDataset (torch's IterableDataset docstring example,
# split by rank): streams.py has both. Changed for CPU: gloo, no device ids; a seed, which the tutorial does not
# set, so that a run repeats itself. The lines marked `# parity` are the ddp-parity instrumentation (docs/plugin.md).
#
#     torchrun --nproc_per_node=2 train.py --epochs 2 --size 64 --batch_size 4 --run_dir OUT/trace
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from streams import MyIterableDataset, ToyModel, features
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

from ddp_parity import TraceRecorder, destroy_process_group  # parity


def demo_basic(args):
    torch.manual_seed(0)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    print(f"Start running basic DDP example on rank {rank}.")
    recorder = TraceRecorder(args.run_dir, side="raw", config=vars(args) | {"run_dir": None})  # parity
    recorder.start()  # parity

    # create model and move it to GPU with id rank
    model = ToyModel()
    ddp_model = DDP(model)

    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.001)
    inputs, targets = features(args.size)
    loader = DataLoader(MyIterableDataset(0, args.size), batch_size=args.batch_size)

    step = 0  # parity
    for epoch in range(args.epochs):
        for idx in loader:
            optimizer.zero_grad()
            outputs = ddp_model(inputs[idx])
            loss = loss_fn(outputs, targets[idx])
            loss.backward()
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])  # parity
            optimizer.step()
            step += 1  # parity
            recorder.record(
                step, loss, idx, epoch=epoch, grad_norm=grad_norm, optimizer=optimizer, model=model
            )  # parity
    recorder.finish(model)  # parity
    del ddp_model  # teardown, not recording: the DDP wrapper dropped before destroy_process_group (docs/plugin.md)
    destroy_process_group()  # parity, as written: dist.destroy_process_group()
    print(f"Finished running basic DDP example on rank {rank}.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--run_dir", default="trace")  # parity
    demo_basic(parser.parse_args())
