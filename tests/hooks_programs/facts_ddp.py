"""Two ranks (torchrun): a small network trained on each rank's own batches, the loss averaged over the ranks
by an all_reduce for printing, a checkpoint saved at the end. It knows nothing of any recorder. Each flag
changes one fact:

    --hand-sum          no DDP: the gradients summed by hand (all_reduce SUM, never divided by the world)
    --save-every-rank   every rank saves the checkpoint (rank 0 only by default)
    --grad-times K      every .grad multiplied by K after backward, before the step (no collective: DDP averaged)
    --accumulate        two micro-batches a step (each loss halved, DDP's sync on the second only), then the
                        gradients clipped to a norm of 0.5
    --zero              the optimizer is torch's ZeroRedundancyOptimizer over SGD (it steps its shard's SGD inside
                        its own step, then broadcasts the parameters): trains as SGD does

    torchrun --nproc_per_node=2 tests/hooks_programs/facts_ddp.py --out DIR
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--hand-sum", action="store_true")
    p.add_argument("--save-every-rank", action="store_true")
    p.add_argument("--grad-times", type=float, default=1.0)
    p.add_argument("--accumulate", action="store_true")
    p.add_argument("--zero", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    model = net if args.hand_sum else DistributedDataParallel(net)
    if args.zero:
        optimizer = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.SGD, lr=0.1)
    else:
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1 + rank)
    for step in range(1, 4):
        for micro in range(2 if args.accumulate else 1):
            x, y = torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)
            last = micro == 1 or not args.accumulate
            with contextlib.nullcontext() if last or args.hand_sum else model.no_sync():
                loss = nn.functional.cross_entropy(model(x), y)
                if micro == 0:
                    optimizer.zero_grad()
                (loss / 2 if args.accumulate else loss).backward()
        if args.accumulate:
            nn.utils.clip_grad_norm_(net.parameters(), 0.5)
        if args.hand_sum:
            for param in net.parameters():
                dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
        if args.grad_times != 1.0:
            for param in net.parameters():
                param.grad.mul_(args.grad_times)
        optimizer.step()
        shown = loss.detach().clone()
        dist.all_reduce(shown, op=dist.ReduceOp.SUM)
        if rank == 0:
            print(f"step {step} loss {shown.item() / world:.8f}", flush=True)
    if rank == 0 or args.save_every_rank:
        torch.save({"model": net.state_dict(), "step": 3}, os.path.join(args.out, f"ckpt{rank}.pt"))
    del model  # DDP's reducer goes before the group, never joined at interpreter exit (gloo then aborts)
    gc.collect()
    dist.barrier()  # no rank leaves while its peer still talks: gloo aborts one that does (SIGABRT)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
