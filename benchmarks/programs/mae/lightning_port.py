"""facebookresearch/mae's pre-training (main_pretrain.py, engine_pretrain.py) ported to Lightning, written as a
Lightning user would: the same arguments (main_pretrain's parser), data (its transforms, ImageFolder), model
(models_mae) and optimizer (AdamW, betas 0.9/0.95, over timm's add_weight_decay groups, the lr from --blr x the
effective batch / 256); the half-cycle cosine with warmup as a per-step LambdaLR; the seed per rank as main_pretrain
sets it; Lightning's DDP strategy, launcher, sampler, accumulation (accumulate_grad_batches = --accum_iter), the loss
logged with sync_dist, and a ModelCheckpoint every 20 epochs and at the end (as first written: the rounds' changes
are marked "round N"). No line records anything: `ddp-parity record` does.

    python lightning_port.py --model mae_vit_tiny_patch8 --input_size 32 ... (as main_pretrain.py)
"""

import math
import os
from contextlib import contextmanager

import lightning as L
import models_mae
import torch
from lightning.pytorch.strategies import DDPStrategy
from main_pretrain import get_args_parser
from standins import datasets, optim_factory, transforms


class DDPSyncEveryMicroBatch(DDPStrategy):
    """round 3: main_pretrain accumulates without no_sync (DDP averages the gradients of every micro-batch); Lightning
    blocks the sync on all but the last micro-batch of a step, which sums the same numbers in another order"""

    @contextmanager
    def block_backward_sync(self):
        yield None


class SaveEveryTwentiethEpoch(L.Callback):
    """round 4 (not from the tool's words, which said EQUIVALENT): main_pretrain saves after epoch 0, every 20th and
    the last (epoch % 20 == 0 or epoch + 1 == epochs); ModelCheckpoint(every_n_epochs=20) saved after epochs 19,
    39, ... and last.ckpt at the end, so the port wrote no checkpoint after epoch 0"""

    def __init__(self, args):
        self.args = args

    def on_train_epoch_end(self, trainer, pl_module):
        epoch = trainer.current_epoch
        if self.args.output_dir and (epoch % 20 == 0 or epoch + 1 == self.args.epochs):
            trainer.save_checkpoint(os.path.join(self.args.output_dir, f"checkpoint-{epoch}.ckpt"))


class LitMAE(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args

    def configure_model(self):
        # round 2: built after Lightning's DDP setup re-seeds every rank, so that the crops, flips and masks of step 1
        # are drawn after the model's initialisation, as in main_pretrain (seed, model, then the loop)
        if hasattr(self, "model"):
            return
        self.model = models_mae.__dict__[self.args.model](norm_pix_loss=self.args.norm_pix_loss)

    def training_step(self, batch, batch_idx):
        samples, _ = batch
        loss, _, _ = self.model(samples, mask_ratio=self.args.mask_ratio)
        self.log("train_loss", loss, prog_bar=True, sync_dist=True)
        self.log("lr", self.optimizers().param_groups[0]["lr"])
        return loss

    def configure_optimizers(self):
        args = self.args
        # following timm: set wd as 0 for bias and norm layers
        param_groups = optim_factory.add_weight_decay(self.model, args.weight_decay)
        optimizer = torch.optim.AdamW(param_groups, lr=args.lr, betas=(0.9, 0.95))
        steps_per_epoch = self.trainer.estimated_stepping_batches / self.trainer.max_epochs

        def lr_lambda(step):  # lr_sched.adjust_learning_rate as a factor of args.lr, per optimizer step
            epoch = step / steps_per_epoch
            if epoch < args.warmup_epochs:
                return epoch / args.warmup_epochs
            cosine = 0.5 * (1.0 + math.cos(math.pi * (epoch - args.warmup_epochs) / (args.epochs - args.warmup_epochs)))
            return (args.min_lr + (args.lr - args.min_lr) * cosine) / args.lr

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def main():
    args = get_args_parser().parse_args()
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
    trainer = L.Trainer(
        strategy=DDPSyncEveryMicroBatch(),  # round 3: was "ddp"
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        accumulate_grad_batches=args.accum_iter,
        default_root_dir=args.log_dir,
        enable_progress_bar=False,
        use_distributed_sampler=False,  # round 1: the sampler below
        enable_checkpointing=False,  # round 4: main_pretrain's checkpoints by SaveEveryTwentiethEpoch
        callbacks=[SaveEveryTwentiethEpoch(args)],
    )
    # main_pretrain's seed: one per rank
    L.seed_everything(args.seed + trainer.global_rank)

    eff_batch_size = args.batch_size * args.accum_iter * trainer.world_size
    if args.lr is None:  # only base_lr is specified
        args.lr = args.blr * eff_batch_size / 256

    # simple augmentation
    transform_train = transforms.Compose(
        [
            transforms.RandomResizedCrop(args.input_size, scale=(0.2, 1.0), interpolation=3),  # 3 is bicubic
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        ]
    )
    dataset_train = datasets.ImageFolder(os.path.join(args.data_path, "train"), transform=transform_train)
    # round 1: main_pretrain's own DistributedSampler (seed 0, its default, on every rank); Lightning seeded the one it
    # injects from the global seed, which is per rank here (rank 1's shuffled with seed 1)
    sampler_train = torch.utils.data.DistributedSampler(
        dataset_train, num_replicas=trainer.world_size, rank=trainer.global_rank, shuffle=True
    )
    loader = torch.utils.data.DataLoader(
        dataset_train,
        sampler=sampler_train,
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        pin_memory=args.pin_mem,
        drop_last=True,
    )
    trainer.fit(LitMAE(args), loader)


if __name__ == "__main__":
    main()
