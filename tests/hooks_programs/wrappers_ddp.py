"""Two ranks (torchrun): an encoder and a predictor trained by one optimizer, and a frozen target encoder that
follows the encoder by EMA after each step, as self-supervised programs build them (I-JEPA, BYOL). It knows
nothing of any recorder. By default the three are parts of one module, given to DDP once (as a LightningModule
holds them); with --wrappers each is given to DDP on its own, three wrappers in one process, the same weights and
the same training bit for bit.

    torchrun --nproc_per_node=2 tests/hooks_programs/wrappers_ddp.py [--wrappers] [--lr LR]
"""

from __future__ import annotations

import argparse
import copy
import gc

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Jepa(nn.Module):
    """The three networks as one module holds them: their names are the ones the loop's variables have."""

    def __init__(self, encoder: nn.Module, predictor: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.predictor = predictor
        self.target_encoder = copy.deepcopy(encoder).requires_grad_(False)

    def forward(self, x):
        return self.predictor(self.encoder(x))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--wrappers", action="store_true", help="each network given to DDP on its own")
    p.add_argument("--lr", type=float, default=0.1)
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(6, 8), nn.Tanh())
    predictor = nn.Linear(8, 8)
    if args.wrappers:
        target_encoder = copy.deepcopy(encoder)
        encoder = DistributedDataParallel(encoder)
        predictor = DistributedDataParallel(predictor)
        target_encoder = DistributedDataParallel(target_encoder)  # wrapped, then frozen (DDP wants a gradient)
        target_encoder.requires_grad_(False)
        step_encoder, step_predictor, target = encoder, predictor, target_encoder.module
        online = encoder.module
    else:
        jepa = DistributedDataParallel(Jepa(encoder, predictor))
        step_encoder, step_predictor, target = None, None, jepa.module.target_encoder
        online = jepa.module.encoder
    trained = [*online.parameters(), *(predictor.module if args.wrappers else predictor).parameters()]
    optimizer = torch.optim.SGD(trained, lr=args.lr)
    g = torch.Generator().manual_seed(1 + rank)
    for step in range(1, 5):
        x = torch.randn(8, 6, generator=g)
        with torch.no_grad():
            goal = target(x)
        if args.wrappers:
            guess = step_predictor(step_encoder(x))
        else:
            guess = jepa(x)
        loss = nn.functional.smooth_l1_loss(guess, goal)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():  # the target follows the encoder
            for t, o in zip(target.parameters(), online.parameters(), strict=True):
                t.mul_(0.9).add_(o, alpha=0.1)
        if rank == 0:
            print(f"step {step} loss {loss.item():.8f}", flush=True)
    del step_encoder, step_predictor, encoder, predictor
    if args.wrappers:
        del target_encoder
    else:
        del jepa
    gc.collect()  # DDP's reducers go before the group, never joined at interpreter exit (gloo then aborts)
    dist.barrier()  # no rank leaves while its peer still talks: gloo aborts one that does (SIGABRT)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
