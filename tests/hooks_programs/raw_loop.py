"""A hand-written DDP loop that knows nothing of any recorder: examples/byo_model's CNN, AdamW, a
per-step StepLR and clipping over the optimizer's parameters, written to train bitwise as
lightning_loop.py does. It prints its losses and saves its final weights (--save).

    torchrun --nproc_per_node=2 tests/hooks_programs/raw_loop.py --save W.pt [--slip scheduler_first|clip|eval]
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "byo_model"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from model import Config, build_datasets, build_model, build_optimizer, pin_threads, seed_everything  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

CLIP, STEP_SIZE, GAMMA = 0.5, 3, 0.5
SMALL = dict(run_dir="", epochs=2, num_samples=256, val_samples=64)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--save", required=True)
    p.add_argument("--slip", choices=["scheduler_first", "clip", "eval"])
    args = p.parse_args()
    cfg = Config(**SMALL)
    pin_threads(cfg.threads)
    torch.use_deterministic_algorithms(True)
    seed_everything(cfg.seed)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_model(cfg)
    seed_everything(cfg.seed)  # as Lightning's DDPStrategy.setup_distributed() resets the seed
    ddp_model = DDP(model)
    optimizer = build_optimizer(model.parameters(), cfg)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=STEP_SIZE, gamma=GAMMA)
    clip_params = [q for group in optimizer.param_groups for q in group["params"]]  # as Lightning clips
    loss_fn = torch.nn.CrossEntropyLoss()
    train_set, val_set = build_datasets(cfg)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed)
    loader = DataLoader(train_set, batch_size=cfg.batch_size, sampler=sampler)
    val_loader = DataLoader(
        val_set,
        batch_size=cfg.batch_size,
        sampler=DistributedSampler(val_set, num_replicas=world, rank=rank, shuffle=False),
    )
    step = 0
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        model.train(args.slip != "eval")  # the slip: trained in eval mode (BatchNorm's running stats, no dropout)
        for batch in loader:
            torch.rand(1)  # a draw before the network, as a diffusion loss draws its noise: the same on both sides
            loss = loss_fn(ddp_model(batch.x), batch.y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(clip_params, CLIP * 2 if args.slip == "clip" else CLIP)
            if args.slip == "scheduler_first":
                scheduler.step()
            optimizer.step()
            if args.slip != "scheduler_first":
                scheduler.step()
            step += 1
            if rank == 0:
                print(f"step {step} loss {loss.item():.8f}", flush=True)
        val = validate(ddp_model, val_loader)
        if rank == 0:
            print(f"epoch {epoch} val_loss {val:.8f}", flush=True)
    if rank == 0:
        torch.save(model.state_dict(), args.save)
    del ddp_model
    gc.collect()
    dist.barrier()  # no rank leaves while its peer still talks: gloo aborts one that does (SIGABRT)
    dist.destroy_process_group()
    return 0


@torch.no_grad()
def validate(ddp_model, loader) -> float:
    ddp_model.eval()
    sums = torch.zeros(2, dtype=torch.float64)
    for batch in loader:
        logits = ddp_model(batch.x)
        sums += torch.stack(
            [
                torch.nn.functional.cross_entropy(logits, batch.y, reduction="sum").double(),
                torch.tensor(float(len(batch.y)), dtype=torch.float64),
            ]
        )
    dist.all_reduce(sums)
    ddp_model.train()
    return (sums[0] / sums[1]).item()


if __name__ == "__main__":
    sys.exit(main())
