"""A user's own model for the module-watch tests: a tiny Transformer (embedding, BatchNorm, one
attention block with dropout, a classification head) trained by a hand-written DDP loop and by a
plain Lightning Trainer, through the public plugin only (`TraceRecorder` + `watch`, `TraceCallback`).

    torchrun --nproc_per_node=2 tests/watch_twins.py raw --run_dir RUN [mistake flags]
    torchrun --nproc_per_node=2 tests/watch_twins.py raw --run_dir RUN1 [flags] --next --run_dir RUN2 [flags]
    python tests/watch_twins.py lightning --run_dir RUN                # Lightning's own launcher

`--next` trains one more run in the same processes, one after the other (each seeded, built, wrapped
and recorded afresh, one process group for all): a process's start-up costs more than these runs.
`--watch-steps` sets the module watch's steps for that run (DDP_PARITY_WATCH_STEP, as the harness does),
else the job's own DDP_PARITY_WATCH_STEP holds.

Mistake flags (each makes one module differ on the raw side):
    --no-reseed              skip the re-seed after building the model (Lightning re-seeds there)
    --reseed-each-epoch      re-seed at every epoch start (the dropout stream restarts in epoch 2)
    --bn-momentum M          the BatchNorm's momentum
    --head-bf16              the head under bf16 autocast
    --scale-inputs-rank R    rank R's inputs scaled by 2 in the data pipeline (same indices)
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from ddp_parity.watch import WATCH_STEP_ENV

TOKENS, FEATURES, DIM, CLASSES = 4, 8, 16, 4


class Tokens(Dataset):
    """Random token sequences from a generator of its own; labels from a fixed rule."""

    def __init__(self, num_samples: int, scale: float = 1.0):
        g = torch.Generator().manual_seed(7)
        self.x = torch.randn(num_samples, TOKENS, FEATURES, generator=g)
        self.y = (self.x.sum((1, 2)) > 0).long() + 2 * (self.x[:, 0, 0] > 0).long()
        self.scale = scale

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i] * self.scale, "y": self.y[i], "index": torch.tensor(i)}


class Block(nn.Module):
    def __init__(self, dropout: float):
        super().__init__()
        self.attn = nn.MultiheadAttention(DIM, 2, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 32), nn.GELU(), nn.Linear(32, DIM))

    def forward(self, x):
        h = self.norm(x + self.dropout(self.attn(x, x, x, need_weights=False)[0]))
        return h + self.mlp(h)


class TinyTransformer(nn.Module):
    def __init__(self, dropout: float = 0.25, bn_momentum: float = 0.1, head_bf16: bool = False):
        super().__init__()
        self.embed = nn.Linear(FEATURES, DIM)
        self.bn = nn.BatchNorm1d(DIM, momentum=bn_momentum)
        self.block = Block(dropout)
        self.head = nn.Linear(DIM, CLASSES)
        self.head_bf16 = head_bf16

    def forward(self, x):
        h = self.embed(x)
        h = self.bn(h.transpose(1, 2)).transpose(1, 2)
        h = self.block(h)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.head_bf16):
            logits = self.head(h.mean(1))
        return logits.float()


def parse(argv):
    p = argparse.ArgumentParser()
    p.add_argument("side", choices=("raw", "lightning"))
    p.add_argument("--run_dir", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--num_samples", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--no-reseed", action="store_true")
    p.add_argument("--reseed-each-epoch", action="store_true")
    p.add_argument("--bn-momentum", type=float, default=0.1)
    p.add_argument("--head-bf16", action="store_true")
    p.add_argument("--scale-inputs-rank", type=int, default=None)
    p.add_argument("--watch-steps", default=None)
    return p.parse_args(argv)


def seed_all(seed: int) -> None:
    """What lightning.seed_everything does."""
    os.environ["PL_GLOBAL_SEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_model(args) -> TinyTransformer:
    return TinyTransformer(bn_momentum=args.bn_momentum, head_bf16=args.head_bf16)


def train_raw(args) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddp_parity import TraceRecorder
    from ddp_parity.trace import param_digest

    seed_all(args.seed)
    rank, world = dist.get_rank(), dist.get_world_size()
    recorder = TraceRecorder(args.run_dir, side="raw", config={"seed": args.seed})
    recorder.start()
    model = build_model(args)
    if not args.no_reseed:
        seed_all(args.seed)  # as Lightning's DDP strategy does (reset_seed) after the model is built
    ddp_model = DDP(model)
    recorder.watch(ddp_model)  # the module watch: one line (the DDP wrapper or the plain model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    scale = 2.0 if args.scale_inputs_rank == rank else 1.0
    data = Tokens(args.num_samples, scale)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)
    step = 0
    for epoch in range(args.epochs):
        if args.reseed_each_epoch:
            seed_all(args.seed)
        sampler.set_epoch(epoch)
        for batch in loader:
            loss = loss_fn(ddp_model(batch["x"]), batch["y"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
            optimizer.step()
            step += 1
            recorder.record(
                step, loss, batch["index"], epoch=epoch, lr=1e-2, grad_norm=grad_norm, param_digest=param_digest(model)
            )
    recorder.finish(model)
    del ddp_model
    gc.collect()


def train_lightning(args) -> None:
    import lightning as L

    from ddp_parity import TraceCallback

    class LitTiny(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = build_model(args)
            self.loss_fn = nn.CrossEntropyLoss()

        def training_step(self, batch, batch_idx):
            return self.loss_fn(self.net(batch["x"]), batch["y"])

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

    L.seed_everything(args.seed, verbose=False)
    model = LitTiny()
    loader = DataLoader(Tokens(args.num_samples), batch_size=args.batch_size, shuffle=True)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        callbacks=[TraceCallback(args.run_dir, config={"seed": args.seed})],
        logger=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
    )
    trainer.fit(model, loader)
    if dist.is_initialized():
        del trainer
        gc.collect()
        dist.destroy_process_group()


def main(argv=None) -> int:
    argv = argv if argv is not None else sys.argv[1:]
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if argv[0] != "raw":
        train_lightning(parse(argv))
        return 0
    dist.init_process_group("gloo")
    inherited = os.environ.get(WATCH_STEP_ENV)  # the harness's replay sets it for the whole job
    for run in runs_of(argv[1:]):
        args = parse(["raw", *run])
        os.environ.pop(WATCH_STEP_ENV, None)
        if (steps := args.watch_steps or inherited) is not None:
            os.environ[WATCH_STEP_ENV] = steps
        train_raw(args)
    dist.destroy_process_group()
    return 0


def runs_of(argv: list[str]) -> list[list[str]]:
    """The raw side's runs: its arguments split at each `--next`."""
    runs = [[]]
    for arg in argv:
        runs.append([]) if arg == "--next" else runs[-1].append(arg)
    return runs


if __name__ == "__main__":
    sys.exit(main())
