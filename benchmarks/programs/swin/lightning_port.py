"""Swin-Transformer's training (main.py) as a LightningModule: `python lightning_port.py ARGS` with main.py's own
arguments (--cfg, --data-path, --batch-size, --accumulation-steps, --disable_amp, --output), Lightning's DDP launcher on
2 CPU processes. The config, data sets, model, Mixup, loss, optimizer and scheduler are Swin's own (and its timm
stand-ins), imported."""

from __future__ import annotations

import contextlib
import os

import lightning as L
import torch
from data.build import build_dataset
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from lr_scheduler import build_scheduler
from main import parse_option
from models import build_model
from optimizer import build_optimizer
from standins import LabelSmoothingCrossEntropy, Mixup, SoftTargetCrossEntropy, accuracy

DEVICES = 2


class SwinModule(L.LightningModule):
    def __init__(self, config, dataset_train, dataset_val):
        super().__init__()
        self.config = config
        self.dataset_train = dataset_train
        self.dataset_val = dataset_val
        self.model = None  # built in configure_model, after the per-rank seed of setup()

        self.mixup_fn = None
        mixup_active = config.AUG.MIXUP > 0 or config.AUG.CUTMIX > 0.0 or config.AUG.CUTMIX_MINMAX is not None
        if mixup_active:
            self.mixup_fn = Mixup(
                mixup_alpha=config.AUG.MIXUP,
                cutmix_alpha=config.AUG.CUTMIX,
                cutmix_minmax=config.AUG.CUTMIX_MINMAX,
                prob=config.AUG.MIXUP_PROB,
                switch_prob=config.AUG.MIXUP_SWITCH_PROB,
                mode=config.AUG.MIXUP_MODE,
                label_smoothing=config.MODEL.LABEL_SMOOTHING,
                num_classes=config.MODEL.NUM_CLASSES,
            )
        if config.AUG.MIXUP > 0.0:
            self.criterion = SoftTargetCrossEntropy()  # smoothing is handled with mixup label transform
        elif config.MODEL.LABEL_SMOOTHING > 0.0:
            self.criterion = LabelSmoothingCrossEntropy(smoothing=config.MODEL.LABEL_SMOOTHING)
        else:
            self.criterion = torch.nn.CrossEntropyLoss()

    def setup(self, stage):
        # main.py seeds each rank with SEED + rank (torch, numpy, random) before it builds the data and the model
        L.seed_everything(self.config.SEED + self.global_rank)

    def configure_model(self):
        if self.model is None:
            self.model = build_model(self.config)

    def forward(self, x):
        return self.model(x)

    def train_dataloader(self):
        config = self.config
        # data/build.py's samplers, with the seed DistributedSampler defaults to (0) on every rank: the one Lightning
        # injects takes PL_GLOBAL_SEED, which the per-rank seed of setup() makes each rank's own
        sampler = torch.utils.data.DistributedSampler(
            self.dataset_train, num_replicas=self.trainer.world_size, rank=self.global_rank, shuffle=True
        )
        return torch.utils.data.DataLoader(
            self.dataset_train,
            sampler=sampler,
            batch_size=config.DATA.BATCH_SIZE,
            num_workers=config.DATA.NUM_WORKERS,
            pin_memory=config.DATA.PIN_MEMORY,
            drop_last=True,
        )

    def val_dataloader(self):
        config = self.config
        sampler = torch.utils.data.DistributedSampler(
            self.dataset_val, num_replicas=self.trainer.world_size, rank=self.global_rank, shuffle=config.TEST.SHUFFLE
        )
        return torch.utils.data.DataLoader(
            self.dataset_val,
            sampler=sampler,
            shuffle=False,
            batch_size=config.DATA.BATCH_SIZE,
            num_workers=config.DATA.NUM_WORKERS,
            pin_memory=config.DATA.PIN_MEMORY,
            drop_last=False,
        )

    def training_step(self, batch, batch_idx):
        samples, targets = batch
        if self.mixup_fn is not None:
            samples, targets = self.mixup_fn(samples, targets)
        outputs = self.model(samples)
        loss = self.criterion(outputs, targets)  # Lightning divides by accumulate_grad_batches itself
        self.log("loss", loss, prog_bar=True)
        self.log("lr", self.optimizers().param_groups[0]["lr"], prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        images, target = batch
        output = self.model(images)
        loss = torch.nn.functional.cross_entropy(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        self.log_dict({"val_loss": loss, "acc1": acc1, "acc5": acc5}, sync_dist=True, batch_size=images.shape[0])

    def configure_optimizers(self):
        optimizer = build_optimizer(self.config, self.model)
        # main.py: build_scheduler(config, optimizer, len(data_loader_train) // ACCUMULATION_STEPS)
        n_iter_per_epoch = self.trainer.estimated_stepping_batches // self.config.TRAIN.EPOCHS
        lr_scheduler = build_scheduler(self.config, optimizer, n_iter_per_epoch)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": lr_scheduler, "interval": "step"}}

    def lr_scheduler_step(self, scheduler, metric):
        # main.py: step_update((epoch * num_steps + idx) // ACCUMULATION_STEPS) after the update, the index of the
        # update just made (0 after the first): one less than global_step here
        scheduler.step_update(self.global_step - 1)


class SyncEveryBackward(DDPStrategy):
    """main.py's DDP all-reduces at every backward (no no_sync under accumulation): so here too."""

    def block_backward_sync(self):
        return contextlib.nullcontext()


def parse():
    """main.py's parse_option; config.py reads LOCAL_RANK, which only Lightning's children have (left set, it tells
    Lightning that the processes were started outside it, and it starts none)."""
    if "LOCAL_RANK" in os.environ:
        return parse_option()
    os.environ["LOCAL_RANK"] = "0"
    try:
        return parse_option()
    finally:
        del os.environ["LOCAL_RANK"]


def main():
    args, config = parse()

    # linear scale the learning rate according to total batch size (main.py's __main__)
    linear_scaled_lr = config.TRAIN.BASE_LR * config.DATA.BATCH_SIZE * DEVICES / 512.0
    linear_scaled_warmup_lr = config.TRAIN.WARMUP_LR * config.DATA.BATCH_SIZE * DEVICES / 512.0
    linear_scaled_min_lr = config.TRAIN.MIN_LR * config.DATA.BATCH_SIZE * DEVICES / 512.0
    if config.TRAIN.ACCUMULATION_STEPS > 1:
        linear_scaled_lr = linear_scaled_lr * config.TRAIN.ACCUMULATION_STEPS
        linear_scaled_warmup_lr = linear_scaled_warmup_lr * config.TRAIN.ACCUMULATION_STEPS
        linear_scaled_min_lr = linear_scaled_min_lr * config.TRAIN.ACCUMULATION_STEPS
    config.defrost()
    config.TRAIN.BASE_LR = linear_scaled_lr
    config.TRAIN.WARMUP_LR = linear_scaled_warmup_lr
    config.TRAIN.MIN_LR = linear_scaled_min_lr
    config.freeze()

    config.defrost()
    dataset_train, config.MODEL.NUM_CLASSES = build_dataset(is_train=True, config=config)
    config.freeze()
    dataset_val, _ = build_dataset(is_train=False, config=config)

    model = SwinModule(config, dataset_train, dataset_val)
    checkpoint = ModelCheckpoint(
        dirpath=config.OUTPUT, filename="ckpt_epoch_{epoch}", save_top_k=-1, every_n_epochs=config.SAVE_FREQ
    )
    trainer = L.Trainer(
        strategy=SyncEveryBackward(),
        accelerator="cpu",
        devices=DEVICES,
        max_epochs=config.TRAIN.EPOCHS,
        accumulate_grad_batches=config.TRAIN.ACCUMULATION_STEPS,
        gradient_clip_val=config.TRAIN.CLIP_GRAD,
        use_distributed_sampler=False,  # the samplers of data/build.py, built in the dataloader hooks
        callbacks=[checkpoint],
        default_root_dir=config.OUTPUT,
        log_every_n_steps=config.PRINT_FREQ,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
