"""The small CNN of model.py as a LightningModule, trained by a plain Trainer with the trace callback.

    python examples/byo_model/train_lightning.py --run_dir runs/byo-lightning --devices 2    # Lightning's launcher
    torchrun --nproc_per_node=2 --master_addr=127.0.0.1 --master_port=29518 \
        examples/byo_model/train_lightning.py --run_dir runs/byo-lightning --devices 2      # or torchrun

The plugin takes the lines marked `# parity`.
"""

from __future__ import annotations

import gc
import sys

import lightning as L
import torch
import torch.distributed as dist
from model import (
    Config,
    build_datasets,
    build_model,
    build_optimizer,
    parse_args,
    pin_threads,
    validation_metrics,
    validation_sums,
)
from torch.utils.data import DataLoader

from ddp_parity import TraceCallback  # parity


class LitCNN(L.LightningModule):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.net = build_model(cfg)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self._val_sums = torch.zeros(3, dtype=torch.float64)
        self.last_validation: dict | None = None

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        return self.loss_fn(self.net(batch.x), batch.y)

    def on_validation_epoch_start(self):
        self._val_sums = torch.zeros(3, dtype=torch.float64)

    def validation_step(self, batch, batch_idx):
        self._val_sums += validation_sums(self.net, batch.x, batch.y)

    def on_validation_epoch_end(self):
        if dist.is_initialized():
            dist.all_reduce(self._val_sums)
        # TraceCallback records `last_validation` as it is; what self.log keeps is rounded to float32
        self.last_validation = validation_metrics(self._val_sums)  # parity
        self.log_dict({k: float(v) for k, v in self.last_validation.items()}, sync_dist=True)

    def configure_optimizers(self):
        return build_optimizer(self.parameters(), self.cfg)


def main(argv=None) -> int:
    cfg = parse_args(argv, prog="train_lightning.py")
    pin_threads(cfg.threads)  # exported before the Trainer exists: its launcher would set cpu_count // devices
    L.seed_everything(cfg.seed, verbose=False)
    model = LitCNN(cfg)
    train_set, val_set = build_datasets(cfg)
    # shuffle=True: Lightning injects DistributedSampler(shuffle=True, seed=PL_GLOBAL_SEED) and calls set_epoch
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=cfg.batch_size)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=cfg.devices,
        max_epochs=cfg.epochs,
        callbacks=[TraceCallback(cfg.run_dir, config=cfg.to_dict())],  # parity
        logger=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
    )
    trainer.fit(model, train_loader, val_loader)
    if trainer.global_rank == 0:
        v = model.last_validation
        print(f"done: step {trainer.global_step} val_loss {v['val_loss']:.4f} val_acc {v['val_acc']:.4f}", flush=True)
    if dist.is_initialized():
        # Lightning keeps the process group after fit; left to interpreter exit, gloo's threads can
        # abort the process ("terminate called without an active exception", seen under torchrun)
        gc.collect()  # the DDP wrapper Lightning dropped in teardown, and its reducer
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
