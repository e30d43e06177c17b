"""DeiT's training (main.py, engine.py) as a LightningModule: `python lightning_port.py ARGS` with main.py's own
arguments, Lightning's DDP launcher on 2 CPU processes. The model, data, sampler, Mixup, losses, optimizer,
scheduler and EMA are deit's own (and its timm stand-ins), imported."""

from __future__ import annotations

import argparse
from pathlib import Path

import lightning as L
import models  # noqa: F401 - registers deit's models with create_model
import torch
from datasets import build_dataset
from lightning.pytorch.callbacks import ModelCheckpoint
from losses import DistillationLoss
from main import get_args_parser
from samplers import RASampler
from standins import (
    LabelSmoothingCrossEntropy,
    Mixup,
    ModelEma,
    SoftTargetCrossEntropy,
    accuracy,
    create_model,
    create_optimizer,
    create_scheduler,
    get_state_dict,
)


class DeiT(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.dataset_train, args.nb_classes = build_dataset(is_train=True, args=args)
        self.dataset_val, _ = build_dataset(is_train=False, args=args)
        self.model = None  # built in configure_model, after the per-rank seed of setup()
        self.model_ema = None

        self.mixup_fn = None
        mixup_active = args.mixup > 0 or args.cutmix > 0.0 or args.cutmix_minmax is not None
        if mixup_active:
            self.mixup_fn = Mixup(
                mixup_alpha=args.mixup,
                cutmix_alpha=args.cutmix,
                cutmix_minmax=args.cutmix_minmax,
                prob=args.mixup_prob,
                switch_prob=args.mixup_switch_prob,
                mode=args.mixup_mode,
                label_smoothing=args.smoothing,
                num_classes=args.nb_classes,
            )
        if mixup_active:
            criterion = SoftTargetCrossEntropy()  # smoothing is handled with mixup label transform
        elif args.smoothing:
            criterion = LabelSmoothingCrossEntropy(smoothing=args.smoothing)
        else:
            criterion = torch.nn.CrossEntropyLoss()
        self.criterion = DistillationLoss(criterion, None, "none", args.distillation_alpha, args.distillation_tau)

    def setup(self, stage):
        # main.py seeds each rank with seed + rank (torch and numpy) before it builds the model
        L.seed_everything(self.args.seed + self.global_rank)

    def configure_model(self):
        if self.model is not None:
            return
        args = self.args
        self.model = create_model(
            args.model,
            pretrained=False,
            num_classes=args.nb_classes,
            drop_rate=args.drop,
            drop_path_rate=args.drop_path,
            drop_block_rate=None,
            img_size=args.input_size,
        )
        # ModelEma is not an nn.Module: kept outside the LightningModule's children, as deit keeps it beside DDP
        self.model_ema = ModelEma(self.model, decay=args.model_ema_decay) if args.model_ema else None

    def forward(self, x):
        return self.model(x)

    def train_dataloader(self):
        args = self.args
        if args.repeated_aug:
            sampler = RASampler(
                self.dataset_train, num_replicas=self.trainer.world_size, rank=self.trainer.global_rank, shuffle=True
            )
        else:
            sampler = torch.utils.data.DistributedSampler(
                self.dataset_train, num_replicas=self.trainer.world_size, rank=self.trainer.global_rank, shuffle=True
            )
        return torch.utils.data.DataLoader(
            self.dataset_train,
            sampler=sampler,
            batch_size=args.batch_size,
            num_workers=args.num_workers,
            pin_memory=args.pin_mem,
            drop_last=True,
        )

    def val_dataloader(self):
        args = self.args
        return torch.utils.data.DataLoader(
            self.dataset_val,
            sampler=torch.utils.data.SequentialSampler(self.dataset_val),
            batch_size=int(1.5 * args.batch_size),
            num_workers=args.num_workers,
            pin_memory=args.pin_mem,
            drop_last=False,
        )

    def training_step(self, batch, batch_idx):
        samples, targets = batch
        if self.mixup_fn is not None:
            samples, targets = self.mixup_fn(samples, targets)
        outputs = self.model(samples)
        loss = self.criterion(samples, outputs, targets)
        self.log("loss", loss, prog_bar=True)
        self.log("lr", self.optimizers().param_groups[0]["lr"], prog_bar=True)
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.model_ema is not None:
            self.model_ema.update(self.model)

    def validation_step(self, batch, batch_idx):
        images, target = batch
        output = self.model(images)
        loss = torch.nn.functional.cross_entropy(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        metrics = {"val_loss": loss, "acc1": acc1, "acc5": acc5}
        self.log_dict(metrics, sync_dist=True, batch_size=images.shape[0])

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        # deit's NativeScaler clips over model.parameters(), in the model's order (Lightning: the param groups')
        if gradient_clip_val:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), gradient_clip_val)

    def configure_optimizers(self):
        args = self.args
        if not args.unscale_lr:
            args.lr = args.lr * args.batch_size * self.trainer.world_size / 512.0
        optimizer = create_optimizer(args, self.model)
        lr_scheduler, _ = create_scheduler(args, optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": lr_scheduler, "interval": "epoch"}}

    def lr_scheduler_step(self, scheduler, metric):
        scheduler.step(epoch=self.current_epoch)  # timm's schedulers take the epoch

    def on_save_checkpoint(self, checkpoint):
        if self.model_ema is not None:
            checkpoint["model_ema"] = get_state_dict(self.model_ema)


def main(args):
    model = DeiT(args)
    callbacks = []
    if args.output_dir:
        callbacks.append(ModelCheckpoint(dirpath=args.output_dir, filename="checkpoint"))
        callbacks.append(
            ModelCheckpoint(dirpath=args.output_dir, filename="best_checkpoint", monitor="acc1", mode="max")
        )
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        gradient_clip_val=args.clip_grad,
        use_distributed_sampler=False,  # RASampler splits the data by rank itself
        callbacks=callbacks,
        default_root_dir=args.output_dir or None,
        enable_checkpointing=bool(args.output_dir),
    )
    trainer.fit(model)


if __name__ == "__main__":
    parser = argparse.ArgumentParser("DeiT training (Lightning)", parents=[get_args_parser()])
    args = parser.parse_args()
    if args.output_dir:
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    main(args)
