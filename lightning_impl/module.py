"""The Lightning twin: the shared network and data as a LightningModule and a LightningDataModule.

Read it beside raw/train.py (`diff -y raw/train.py lightning_impl/module.py`): the same sections in
the same order. Where the raw loop writes a thing by hand (DDP wrapping, the DistributedSampler,
set_epoch, zero_grad/backward/step, no_sync, clipping, autocast, checkpoints), Lightning does it;
where parity needs a setting, a one-line comment says so. docs/how-parity-works.md has the table.
"""

from __future__ import annotations

import math

import lightning as L
from torch.utils.data import DataLoader

from ddp_parity.config import DataConfig, FSDPConfig, ModelConfig
from ddp_parity.data import build_datasets
from ddp_parity.model import build_loss, build_net, build_optimizer, build_scheduler
from ddp_parity.sharding import is_sharded, shard
from ddp_parity.validation import ExactShardSampler, ValidationMetrics

# -----------------------------------------------------------------------------
# setup and teardown: Trainer(strategy="ddp") joins the process group and wraps the model in DDP
# (lightning_impl/cli.py); __main__.py frees the wrapper before destroying the group, as cleanup() does


# -----------------------------------------------------------------------------
# data


class ParityDataModule(L.LightningDataModule):
    """Takes the keys of `ddp_parity.config.DataConfig` (`data:` in the YAML)."""

    def __init__(self, **data_config):
        super().__init__()
        self.config = DataConfig(**data_config)
        self.train_set = self.val_set = None

    def setup(self, stage: str) -> None:
        self.train_set, self.val_set = build_datasets(self.config)

    def train_dataloader(self):
        # shuffle=True tells Lightning to inject DistributedSampler(shuffle=True, seed=PL_GLOBAL_SEED)
        # and call its set_epoch every epoch: the raw loop's sampler, seeded from seed_everything
        return ResumableDataLoader(
            self.train_set,
            batch_size=self.config.batch_size,
            shuffle=True,
            drop_last=self.config.drop_last,
            num_workers=self.config.num_workers,
            persistent_workers=self.config.persistent_workers,
            skip_batches=self._batches_done_in_epoch(),
            resume_epoch=self.trainer.fit_loop.epoch_progress.current.processed if self._resuming() else None,
        )

    def val_dataloader(self):
        if self.val_set is None:
            return []
        # a DistributedSampler subclass, so Lightning keeps it: no padded, double-counted samples
        val_sampler = ExactShardSampler(self.val_set, self.trainer.world_size, self.trainer.global_rank)
        return DataLoader(
            self.val_set,
            batch_size=self.config.batch_size,
            sampler=val_sampler,
            num_workers=self.config.num_workers,
            persistent_workers=self.config.persistent_workers,
        )

    def _resuming(self) -> bool:
        return self.trainer is not None and bool(self.trainer.ckpt_path)

    def _batches_done_in_epoch(self) -> int:
        """Batches of the current epoch a restored checkpoint had trained (0 at an epoch boundary)."""
        if not self._resuming():
            return 0
        done = self.trainer.fit_loop.epoch_loop.batch_progress.current.processed
        per_rank = math.ceil(len(self.train_set) / self.trainer.world_size)  # DistributedSampler pads
        per_epoch = (
            per_rank // self.config.batch_size
            if self.config.drop_last
            else math.ceil(per_rank / self.config.batch_size)
        )
        return done if 0 < done < per_epoch else 0


# -----------------------------------------------------------------------------
# checkpoints: ModelCheckpoint (lightning_impl/cli.py) saves on rank 0 behind a barrier; `--ckpt_path
# last` (or a torchrun restart) restores model, optimizer, scheduler, loops. The loader resumes mid-epoch:


class ResumableDataLoader(DataLoader):
    """A DataLoader whose next iteration starts `skip_batches` batches in, once: a fit resumed from a
    mid-epoch checkpoint then trains exactly the batches that were left, as the raw loop's
    resume_iterator does, instead of Lightning's default of re-feeding the epoch from its first batch.
    (Lightning re-creates the loader to inject its DistributedSampler; `skip_batches` is an init
    argument, so it survives.)"""

    def __init__(self, *args, skip_batches: int = 0, resume_epoch: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.skip_batches = skip_batches
        self.resume_epoch = resume_epoch

    def __iter__(self):
        if self.resume_epoch is not None and hasattr(self.sampler, "set_epoch"):
            # Lightning 2.6 creates a resumed fit's first iterator before it calls set_epoch
            # (Lightning #21938); the skip below, and workers' prefetch, would draw epoch 0's order
            self.sampler.set_epoch(self.resume_epoch)
            self.resume_epoch = None
        batches = super().__iter__()  # draws its seed from torch's RNG first, as the raw loop's does
        skip, self.skip_batches = self.skip_batches, 0
        for _ in range(skip):
            next(batches)
        return batches


# -----------------------------------------------------------------------------
# training


class ParityModule(L.LightningModule):
    """Takes the keys of `ddp_parity.config.ModelConfig` (`model:` in the YAML), typed and validated there."""

    def __init__(self, **model_config):
        super().__init__()
        self.config = ModelConfig(**model_config)
        self.save_hyperparameters()
        # model: built after seed_everything, as the raw loop builds it; Lightning wraps it in DDP and
        # re-seeds (reset_seed) when the strategy sets up, as the raw loop re-seeds after building
        self.net = build_net(self.config)
        self.loss_fn = build_loss()
        self.val_metrics = ValidationMetrics(self.config.num_classes)
        self.last_validation: dict | None = None
        # trainer.strategy fsdp: the `fsdp:` plan, set by the CLI (not a model hyperparameter)
        self.sharding_plan: FSDPConfig | None = None

    def configure_model(self):
        # ModelParallelStrategy calls this before configure_optimizers: the raw loop's parallelize(),
        # fully_shard per block then the root, over the strategy's data-parallel mesh. Once only
        # (a second fit or a validate calls it again on the sharded module).
        if self.sharding_plan is not None and not is_sharded(self.net):
            shard(self.net, self.sharding_plan, mesh=self.device_mesh["data_parallel"])

    def on_train_batch_start(self, batch, batch_idx):
        # Lightning's ModelParallelStrategy has no no_sync for FSDP2 (its Fabric twin has): without
        # this every micro-batch would reduce-scatter. The raw loop's gradient_sync(), same condition.
        if is_sharded(self.net):
            k = self.trainer.accumulate_grad_batches
            self.net.set_requires_gradient_sync(
                (batch_idx + 1) % k == 0 or batch_idx + 1 == self.trainer.num_training_batches
            )

    def configure_optimizers(self):
        # optimizer, scheduler; precision (autocast, GradScaler) is the Trainer's precision plugin
        optimizer = build_optimizer(self.parameters(), self.config)
        scheduler = build_scheduler(optimizer, self.config)
        if scheduler is None:
            return optimizer
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": self.config.lr_schedule_interval},
        }

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        # the loop's batch_loss. Lightning divides by accumulate_grad_batches, skips the all-reduce
        # (no_sync) on all but the last micro-batch, zeroes grads (set_to_none) on the first micro-batch
        # of each step, unscales, clips (gradient_clip_val), steps and steps the scheduler (interval)
        # exactly where the raw loop does
        return self.loss_fn(self.net(batch.x), batch.y)

    # -------------------------------------------------------------------------
    # validation

    def validation_step(self, batch, batch_idx):
        self.val_metrics.update(self.net(batch.x), batch.y)

    def on_validation_epoch_end(self):
        self.last_validation = self.val_metrics.compute()  # torchmetrics syncs across ranks
        self.val_metrics.reset()
        # the figures are already global; sync_dist (a mean of equal values) just keeps Lightning
        # from warning, at one collective per epoch. The trace reads last_validation, not the log.
        self.log_dict({k: float(v) for k, v in self.last_validation.items()}, prog_bar=True, sync_dist=True)
        self.print(
            f"epoch {self.current_epoch} val_loss {self.last_validation['val_loss']:.4f} "
            f"val_acc {self.last_validation['val_acc']:.4f} ({self.last_validation['val_count']} samples)"
        )


# -----------------------------------------------------------------------------
# main: lightning_impl/cli.py (LightningCLI) and lightning_impl/__main__.py
