"""A hand-written DDP loop that knows nothing of any recorder, with a feature-caching pass inside each step (as
open_clip's --accum-freq): every micro-batch's outputs computed first without gradients, in training mode, then each
micro-batch re-run with gradients against the cached others, one backward each, one optimizer step. It validates
under eval() and torch.no_grad() on a DataLoader of its own after steps 2 and 4. Rank 0 saves its final weights.

    torchrun --nproc_per_node=2 tests/hooks_programs/caching_loop.py --save W.pt [--eval-ranks 0|all]

--eval-ranks 0 validates on rank 0 only (as a loop whose evaluate() returns early elsewhere), `all` on every rank.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

STEPS, MICRO, BATCH, FEATURES, VALIDATE_AFTER = 4, 2, 4, 6, (2, 4)


def data(rows: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, FEATURES, generator=generator)
    return TensorDataset(x, x.sum(dim=1, keepdim=True).cos())


def train_step(ddp_model: DDP, optimizer, micro_batches: list) -> None:
    with torch.no_grad():  # the caching pass: every micro-batch's outputs, training mode, no gradients
        cached = [ddp_model(x) for x, _ in micro_batches]
    optimizer.zero_grad(set_to_none=True)
    for i, (x, y) in enumerate(micro_batches):
        others = torch.cat([c for j, c in enumerate(cached) if j != i]).mean()
        loss = torch.nn.functional.mse_loss(ddp_model(x) + 0.1 * others, y)
        loss.backward()
    optimizer.step()


@torch.no_grad()
def validate(ddp_model: DDP, loader: DataLoader) -> None:
    ddp_model.eval()
    for x, _ in loader:
        ddp_model(x)
    ddp_model.train()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--save", required=True)
    p.add_argument("--eval-ranks", choices=("0", "all"), default="all")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train = data(STEPS * MICRO * BATCH * dist.get_world_size() // 2, seed=1)
    loader = DataLoader(train, batch_size=BATCH, sampler=DistributedSampler(train, shuffle=True, seed=0))
    val_loader = DataLoader(data(8, seed=2), batch_size=4)
    validates = args.eval_ranks == "all" or rank == 0
    step = 0
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        batches = iter(loader)
        while (micro_batches := [b for _, b in zip(range(MICRO), batches)]) and len(micro_batches) == MICRO:
            train_step(ddp_model, optimizer, micro_batches)
            step += 1
            if step in VALIDATE_AFTER and validates:
                validate(ddp_model, val_loader)
    if rank == 0:
        torch.save(model.state_dict(), args.save)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
