"""The small CNN of model.py trained by a hand-written DDP loop, instrumented for parity.

    torchrun --nproc_per_node=2 --master_addr=127.0.0.1 --master_port=29517 \
        examples/byo_model/train_raw.py --run_dir runs/byo-raw

The plugin takes the lines marked `# parity`. Every other line is the training loop itself, written
so that it consumes the global torch RNG (dropout) exactly as Lightning's Trainer does: see the
comments marked "as Lightning".
"""

from __future__ import annotations

import gc
import sys

import torch
import torch.distributed as dist
from model import (
    build_datasets,
    build_model,
    build_optimizer,
    parse_args,
    pin_threads,
    seed_everything,
    validation_metrics,
    validation_sums,
)
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from ddp_parity.trace import TraceRecorder, param_digest  # parity


def main(argv=None) -> int:
    cfg = parse_args(argv, prog="train_raw.py")
    pin_threads(cfg.threads)
    torch.use_deterministic_algorithms(True)  # as Trainer(deterministic=True)
    seed_everything(cfg.seed)  # as Lightning: random, numpy, torch, PL_GLOBAL_SEED
    dist.init_process_group("gloo")  # torchrun's env:// (RANK, WORLD_SIZE, MASTER_ADDR/PORT)
    rank, world = dist.get_rank(), dist.get_world_size()
    recorder = TraceRecorder(cfg.run_dir, side="raw", config=cfg.to_dict())  # parity
    recorder.start()  # parity

    model = build_model(cfg)  # weight init draws from the global torch RNG
    seed_everything(cfg.seed)  # as Lightning: DDPStrategy.setup_distributed() calls reset_seed()
    ddp_model = DDP(model)  # broadcasts rank 0's parameters and buffers
    optimizer = build_optimizer(model.parameters(), cfg)
    loss_fn = torch.nn.CrossEntropyLoss()

    train_set, val_set = build_datasets(cfg)
    # as Lightning injects for shuffle=True: DistributedSampler(shuffle=True, seed=PL_GLOBAL_SEED)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed)
    loader = DataLoader(train_set, batch_size=cfg.batch_size, sampler=sampler)
    # as Lightning injects for a validation loader: DistributedSampler(shuffle=False)
    val_loader = DataLoader(
        val_set,
        batch_size=cfg.batch_size,
        sampler=DistributedSampler(val_set, num_replicas=world, rank=rank, shuffle=False),
    )

    step = 0
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        model.train()
        # iter(loader) draws one int64 from the global torch RNG (the DataLoader's _base_seed);
        # Lightning creates exactly one train iterator per epoch too, at the same point
        for batch in loader:
            logits = ddp_model(batch.x)  # dropout draws from the global torch RNG
            loss = loss_fn(logits, batch.y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # DDP all-reduces (averages) the gradients
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            step += 1
            recorder.record(
                step,
                loss,
                batch.index,
                epoch=epoch,
                lr=lr,
                grad_norm=grad_norm,  # parity
                param_digest=param_digest(model),
            )  # parity: TraceCallback records it too
        metrics = validate(ddp_model, val_loader)
        recorder.record_validation(epoch, step, metrics)  # parity
        if rank == 0:
            print(
                f"epoch {epoch} step {step} loss {recorder.last_loss():.4f} "
                f"val_loss {metrics['val_loss']:.4f} val_acc {metrics['val_acc']:.4f}",
                flush=True,
            )

    recorder.finish(model)  # parity
    # drop DDP's reducer before the process group (a gloo thread can otherwise hang the exit)
    del ddp_model
    gc.collect()
    dist.destroy_process_group()
    return 0


@torch.no_grad()
def validate(ddp_model: DDP, loader: DataLoader) -> dict:
    """Through the DDP wrapper, as Lightning's validation_step is: the first forward after training
    broadcasts rank 0's BatchNorm buffers to every rank (each rank's running stats drifted apart
    with its own batches), and that is what the evaluation, and the final replicas, use."""
    ddp_model.eval()
    sums = torch.zeros(3, dtype=torch.float64)
    for batch in loader:  # creating this iterator draws from the global RNG too, as in Lightning
        sums += validation_sums(ddp_model, batch.x, batch.y)
    dist.all_reduce(sums)
    ddp_model.train()
    return validation_metrics(sums)


if __name__ == "__main__":
    sys.exit(main())
