"""timm's train.py as a Lightning program: the same command line (train.py's own parser), the model, data sets,
loaders, mixup, loss, optimizer, scheduler and EMA built by the same timm calls, trained by a LightningModule under
Trainer(strategy="ddp", accelerator="cpu", devices=2) and Lightning's own launcher."""

import os

import lightning as L
import torch.nn as nn
from lightning.pytorch.callbacks import ModelCheckpoint
from timm import utils
from timm.data import Mixup, create_dataset, create_loader, resolve_data_config
from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
from timm.models import create_model
from timm.optim import create_optimizer_v2, optimizer_kwargs
from timm.scheduler import create_scheduler_v2, scheduler_kwargs
from train import _parse_args


class TimmModule(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.model = None  # built in setup(), after the seed (round 2)
        object.__setattr__(self, "model_ema", None)
        self.ema_step = 0
        self.mixup_fn = None
        if args.mixup > 0 or args.cutmix > 0.0:
            self.mixup_fn = Mixup(
                mixup_alpha=args.mixup,
                cutmix_alpha=args.cutmix,
                cutmix_minmax=args.cutmix_minmax,
                prob=args.mixup_prob,
                switch_prob=args.mixup_switch_prob,
                mode=args.mixup_mode,
                label_smoothing=args.smoothing,
                num_classes=args.num_classes,
            )
            self.train_loss_fn = SoftTargetCrossEntropy()
        elif args.smoothing:
            self.train_loss_fn = LabelSmoothingCrossEntropy(smoothing=args.smoothing)
        else:
            self.train_loss_fn = nn.CrossEntropyLoss()
        self.validate_loss_fn = nn.CrossEntropyLoss()

    def setup(self, stage):
        # round 2: each rank seeded seed + rank (timm's random_seed) once the rank is known, after Lightning's own
        # re-seed, and the model (and its EMA copy) built after that seed, as train.py does
        args = self.args
        utils.random_seed(args.seed, self.global_rank)
        self.model = create_model(
            args.model,
            num_classes=args.num_classes,
            drop_rate=args.drop,
            drop_path_rate=args.drop_path,
            drop_block_rate=args.drop_block,
            global_pool=args.gp,
            bn_momentum=args.bn_momentum,
            bn_eps=args.bn_eps,
            **args.model_kwargs,
        )
        self.data_config = resolve_data_config(vars(args), model=self.model)
        # round 4: the EMA kept apart from the LightningModule (train.py's is no submodule of the DDP model): not
        # registered, so it is neither in the module's state nor broadcast by DDP, and each rank keeps its own copy
        ema = utils.ModelEmaV3(self.model, decay=args.model_ema_decay) if args.model_ema else None
        object.__setattr__(self, "model_ema", ema)

    def forward(self, x):
        return self.model(x)

    def train_dataloader(self):
        args = self.args
        dataset = create_dataset(
            args.dataset, root=args.data_dir, split=args.train_split, is_training=True, batch_size=args.batch_size
        )
        return create_loader(
            dataset,
            input_size=self.data_config["input_size"],
            batch_size=args.batch_size,
            is_training=True,
            scale=args.scale,
            ratio=args.ratio,
            hflip=args.hflip,
            vflip=args.vflip,
            color_jitter=args.color_jitter,
            interpolation=args.train_interpolation,
            mean=self.data_config["mean"],
            std=self.data_config["std"],
            num_workers=args.workers,
            use_prefetcher=False,
        )

    def val_dataloader(self):
        args = self.args
        dataset = create_dataset(
            args.dataset, root=args.data_dir, split=args.val_split, is_training=False, batch_size=args.batch_size
        )
        return create_loader(
            dataset,
            input_size=self.data_config["input_size"],
            batch_size=args.validation_batch_size or args.batch_size,
            is_training=False,
            interpolation=self.data_config["interpolation"],
            mean=self.data_config["mean"],
            std=self.data_config["std"],
            num_workers=args.workers,
            crop_pct=self.data_config["crop_pct"],
            use_prefetcher=False,
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        if self.mixup_fn is not None:
            x, y = self.mixup_fn(x, y)
        loss = self.train_loss_fn(self.model(x), y)
        # round 3: Lightning divides every micro-batch's loss by accumulate_grad_batches; train.py divides the epoch's
        # last, shorter accumulation by its own length (len(loader) % accum micro-batches)
        accum = self.trainer.accumulate_grad_batches
        last_accum = self.trainer.num_training_batches % accum
        if last_accum and batch_idx >= self.trainer.num_training_batches - last_accum:
            loss = loss * accum / last_accum
        self.log("train_loss", loss, prog_bar=True, sync_dist=True)
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        # round 5 (its warnings): the EMA updated once after each optimizer step, as train.py does, not after every
        # micro-batch (on_train_batch_end runs for each one under accumulate_grad_batches)
        if self.model_ema is not None and self.global_step != self.ema_step:
            self.ema_step = self.global_step
            self.model_ema.update(self.model, step=self.global_step)

    def on_save_checkpoint(self, checkpoint):
        # round 5 (its warnings): the EMA saved beside the weights, under train.py's key
        if self.model_ema is not None:
            checkpoint["state_dict_ema"] = self.model_ema.module.state_dict()

    def on_validation_epoch_start(self):
        # round 4: the BatchNorm statistics averaged over the ranks before the validation, as train.py does (Lightning
        # validates before on_train_epoch_end, and its validation forward through DDP broadcasts rank 0's buffers)
        if self.trainer.sanity_checking:
            return
        if self.args.dist_bn in ("broadcast", "reduce") and self.trainer.world_size > 1:
            utils.distribute_bn(self.model, self.trainer.world_size, self.args.dist_bn == "reduce")
            if self.model_ema is not None:
                utils.distribute_bn(self.model_ema, self.trainer.world_size, self.args.dist_bn == "reduce")

    def validation_step(self, batch, batch_idx):
        x, y = batch
        output = self.model(x)
        loss = self.validate_loss_fn(output, y)
        acc1, acc5 = utils.accuracy(output, y, topk=(1, min(5, self.args.num_classes)))
        self.log_dict({"val_loss": loss, "top1": acc1, "top5": acc5}, sync_dist=True)
        if self.model_ema is not None:
            ema_output = self.model_ema.module(x)
            ema_loss = self.validate_loss_fn(ema_output, y)
            ema_acc1, ema_acc5 = utils.accuracy(ema_output, y, topk=(1, min(5, self.args.num_classes)))
            self.log_dict({"ema_val_loss": ema_loss, "ema_top1": ema_acc1, "ema_top5": ema_acc5}, sync_dist=True)

    def configure_optimizers(self):
        args = self.args
        optimizer = create_optimizer_v2(self.model, **optimizer_kwargs(cfg=args), **args.opt_kwargs)
        updates_per_epoch = self.trainer.estimated_stepping_batches // args.epochs
        scheduler, _ = create_scheduler_v2(optimizer, **scheduler_kwargs(args), updates_per_epoch=updates_per_epoch)
        interval = "step" if args.sched_on_updates else "epoch"
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": interval}}

    def lr_scheduler_step(self, scheduler, metric):
        if self.args.sched_on_updates:
            scheduler.step_update(num_updates=self.global_step)
        else:
            scheduler.step(epoch=self.current_epoch)


def main():
    utils.setup_default_logging()
    args, _ = _parse_args()
    L.seed_everything(args.seed, workers=True)
    module = TimmModule(args)
    output_dir = os.path.join(args.output or "./output/train", args.experiment or "lightning")
    trainer = L.Trainer(
        strategy="ddp",  # round 4: not DDPStrategy(find_unused_parameters=True) (round 1): the EMA is no submodule
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        accumulate_grad_batches=args.grad_accum_steps,
        gradient_clip_val=args.clip_grad,
        gradient_clip_algorithm=args.clip_mode,
        default_root_dir=output_dir,
        callbacks=[ModelCheckpoint(dirpath=output_dir, monitor="ema_top1", mode="max", save_last=True)],
        log_every_n_steps=args.log_interval,
        enable_progress_bar=False,
        num_sanity_val_steps=0,  # round 5 (its warnings): train.py validates nothing before training
    )
    trainer.fit(module)


if __name__ == "__main__":
    main()
