"""ViT-pytorch's train.py (jeonsworld/ViT-pytorch, MIT) as a LightningModule, run by Lightning's own launcher:
`python lightning_port.py ARGS`, the same arguments as train.py. The ViT, its configs, the schedules and the data
loaders, valid() and save_model() are the authors' own code, imported; Lightning does the DDP wrapping and the loop
over the epochs (first written with Lightning's sampler, accumulation, clipping, validation loop and ModelCheckpoint;
the rounds in SCORE.md changed each where train.py does otherwise)."""

from __future__ import annotations

import argparse
import copy
from contextlib import contextmanager

import lightning as L
import numpy as np
import torch
from lightning.pytorch.strategies import DDPStrategy
from models.modeling import CONFIGS, VisionTransformer
from standins import SummaryWriter
from torch.utils.data import DataLoader, DistributedSampler
from train import save_model, valid
from utils.data_utils import get_loader
from utils.scheduler import WarmupCosineSchedule, WarmupLinearSchedule


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--dataset", choices=["cifar10", "cifar100"], default="cifar10")
    parser.add_argument("--model_type", default="ViT-B_16", choices=sorted(CONFIGS))
    parser.add_argument("--pretrained_dir", type=str, default="checkpoint/ViT-B_16.npz")
    parser.add_argument("--output_dir", default="output", type=str)
    parser.add_argument("--img_size", default=224, type=int)
    parser.add_argument("--train_batch_size", default=512, type=int)
    parser.add_argument("--eval_batch_size", default=64, type=int)
    parser.add_argument("--eval_every", default=100, type=int)
    parser.add_argument("--learning_rate", default=3e-2, type=float)
    parser.add_argument("--weight_decay", default=0, type=float)
    parser.add_argument("--num_steps", default=10000, type=int)
    parser.add_argument("--decay_type", choices=["cosine", "linear"], default="cosine")
    parser.add_argument("--warmup_steps", default=500, type=int)
    parser.add_argument("--max_grad_norm", default=1.0, type=float)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    args = parser.parse_args()
    args.local_rank = -1  # get_loader builds plain loaders; Lightning puts in the DistributedSampler
    args.device = torch.device("cpu")
    return args


class ViTFineTune(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        config = CONFIGS[args.model_type]
        num_classes = 10 if args.dataset == "cifar10" else 100
        self.model = VisionTransformer(config, args.img_size, zero_head=True, num_classes=num_classes)
        if args.pretrained_dir:
            self.model.load_from(np.load(args.pretrained_dir))
        # round 4: train.py accumulates by (step + 1) % n over each epoch's batches and never zeroes the gradients at
        # an epoch's end: a micro-batch left over (5 a rank and epoch, n = 2) joins the next epoch's first step.
        # Lightning's accumulation steps at every epoch's last batch. train.py's own loop, by manual optimization
        self.automatic_optimization = False
        self.global_step_raw, self.best_acc, self.writer = 0, 0, SummaryWriter()

    def training_step(self, batch, batch_idx):
        args = self.args
        x, y = batch
        loss = self.model(x, y)
        if args.gradient_accumulation_steps > 1:
            loss = loss / args.gradient_accumulation_steps
        self.manual_backward(loss)
        if (batch_idx + 1) % args.gradient_accumulation_steps == 0:
            optimizer, scheduler = self.optimizers(), self.lr_schedulers()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.max_grad_norm)
            scheduler.step()  # before optimizer.step(), as train.py
            optimizer.step()
            optimizer.zero_grad()
            # round 6: train.py validates on rank 0 only, every eval_every steps, over the test set in order (its own
            # valid(), imported), and saves the weights of the best accuracy there (its save_model); Lightning's
            # validation loop ran on both ranks, rank 1's loader drawing its base seed from rank 1's generator
            self.global_step_raw += 1
            if self.global_step_raw % args.eval_every == 0 and self.global_rank == 0:
                args.local_rank = self.global_rank
                test_loader = self.trainer.datamodule.test_loader
                accuracy = valid(args, self.model, self.writer, test_loader, self.global_step_raw)
                if self.best_acc < accuracy:
                    save_model(args, self.model)
                    self.best_acc = accuracy
                self.model.train()
        self.log("train/loss", loss * args.gradient_accumulation_steps, prog_bar=True)

    def configure_optimizers(self):
        args = self.args
        optimizer = torch.optim.SGD(
            self.model.parameters(), lr=args.learning_rate, momentum=0.9, weight_decay=args.weight_decay
        )
        if args.decay_type == "cosine":
            scheduler = WarmupCosineSchedule(optimizer, warmup_steps=args.warmup_steps, t_total=args.num_steps)
        else:
            scheduler = WarmupLinearSchedule(optimizer, warmup_steps=args.warmup_steps, t_total=args.num_steps)
        # round 2: train.py calls scheduler.step() BEFORE optimizer.step(), so optimizer step k runs at the rate of
        # schedule step k (0.015 at step 1 with 2 warmup steps), where Lightning's step after it gives step k - 1's
        # (round 2 stepped it once here; since round 4 training_step steps it, before optimizer.step())
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class FirstEpochSampler(DistributedSampler):
    """round 5: train.py never calls set_epoch, so every epoch replays epoch 0's order; Lightning calls set_epoch on
    the training loader's sampler at each epoch. This one keeps epoch 0."""

    def set_epoch(self, epoch):
        pass


class CifarData(L.LightningDataModule):
    def __init__(self, args):
        super().__init__()
        self.args = copy.copy(args)
        # train.py: the batch size given is the one per optimizer step; each micro-batch is a part of it
        self.args.train_batch_size = args.train_batch_size // args.gradient_accumulation_steps
        self.train_loader = self.test_loader = None

    def setup(self, stage):
        train_loader, self.test_loader = get_loader(self.args)
        # round 1: train.py's distributed branch of get_loader samples by DistributedSampler(trainset), its default
        # seed 0; the sampler Lightning injects is seeded from seed_everything's seed. One of its own, as train.py's
        # (Lightning leaves a DistributedSampler it is given as it is)
        trainset = train_loader.dataset
        self.train_loader = DataLoader(
            trainset,
            sampler=FirstEpochSampler(trainset),  # round 5: was DistributedSampler(trainset)
            batch_size=self.args.train_batch_size,
            num_workers=4,
            pin_memory=True,
        )

    def train_dataloader(self):
        return self.train_loader


class SyncEveryMicroBatch(DDPStrategy):
    """round 3: train.py backwards every micro-batch through DDP without no_sync (each micro-batch's gradients averaged
    over the ranks, then added); Lightning's accumulation skips the sync but on the last micro-batch (no_sync)."""

    @contextmanager
    def block_backward_sync(self):
        yield None


def main():
    args = get_args()
    L.seed_everything(args.seed)
    model = ViTFineTune(args)
    trainer = L.Trainer(
        strategy=SyncEveryMicroBatch(),  # round 3: was "ddp"
        accelerator="cpu",
        devices=2,
        max_steps=args.num_steps,
        # round 4: accumulation and clipping by hand in training_step (manual optimization)
        # round 6: no Lightning validation loop nor ModelCheckpoint: train.py's valid() and save_model() on rank 0
        enable_checkpointing=False,
        default_root_dir=args.output_dir,
    )
    trainer.fit(model, datamodule=CifarData(args))


if __name__ == "__main__":
    main()
