"""llm.c's train_gpt2.py (f1e2ace) ported to Lightning, written first as a Lightning user would: the authors' GPT,
GPTConfig, DistributedDataLoader and configure_optimizers (AdamW in two weight-decay groups, ZeroRedundancyOptimizer
at --zero_stage 1) imported from the copied train_gpt2.py; the same command line; the loader as an IterableDataset
(each rank at its own offset, from the Trainer's rank); accumulation, clipping and the step budget by the Trainer;
get_lr (warmup, cosine decay) through a LambdaLR stepped every optimizer step; the val loss every val_loss_every steps.

    python lightning_port.py --input_bin ... (run from the directory holding data/)
"""

import argparse
import math
import os
import sys

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_gpt2 import GPT, DistributedDataLoader, GPTConfig  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--input_bin", type=str, default="dev/data/tinyshakespeare/tiny_shakespeare_val.bin")
parser.add_argument("--input_val_bin", type=str, default="")
parser.add_argument("--output_dir", type=str, default="")
parser.add_argument("--model", type=str, default="gpt2")
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--sequence_length", type=int, default=64)
parser.add_argument("--total_batch_size", type=int, default=256)
parser.add_argument("--num_iterations", type=int, default=10)
parser.add_argument("--inference_only", type=int, default=0)
parser.add_argument("--learning_rate", type=float, default=1e-4)
parser.add_argument("--warmup_iters", type=int, default=0)
parser.add_argument("--learning_rate_decay_frac", type=float, default=1.0)
parser.add_argument("--weight_decay", type=float, default=0.0)
parser.add_argument("--grad_clip", type=float, default=1.0)
parser.add_argument("--val_loss_every", type=int, default=0)
parser.add_argument("--val_max_steps", type=int, default=20)
parser.add_argument("--sample_every", type=int, default=0)
parser.add_argument("--overfit_single_batch", type=int, default=1)
parser.add_argument("--tensorcores", type=int, default=0)
parser.add_argument("--device", type=str, default="")
parser.add_argument("--compile", type=int, default=0)
parser.add_argument("--flash", type=int, default=0)
parser.add_argument("--dtype", type=str, default="float32")
parser.add_argument("--zero_stage", type=int, default=0)
parser.add_argument("--write_tensors", type=int, default=1)
args = parser.parse_args()

WORLD = 2
B, T = args.batch_size, args.sequence_length
grad_accum_steps = args.total_batch_size // (B * T * WORLD)
MODELS = {"d2": GPTConfig(block_size=64, vocab_size=256, n_layer=2, n_head=2, n_embd=32)}


def get_lr(it):
    min_lr = args.learning_rate * args.learning_rate_decay_frac
    if it < args.warmup_iters:
        return args.learning_rate * (it + 1) / args.warmup_iters
    if it > args.num_iterations:
        return min_lr
    decay_ratio = (it - args.warmup_iters) / (args.num_iterations - args.warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (args.learning_rate - min_lr)


class Shards(IterableDataset):
    """The authors' DistributedDataLoader as a dataset: a fresh loader (reset) at every pass, `steps` batches or
    without end."""

    def __init__(self, pattern, rank, world, steps=None):
        self.pattern, self.rank, self.world, self.steps = pattern, rank, world, steps

    def __iter__(self):
        loader = DistributedDataLoader(self.pattern, B, T, self.rank, self.world)
        n = 0
        while self.steps is None or n < self.steps:
            yield loader.next_batch()
            n += 1


class LitGPT(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = GPT(MODELS[args.model])

    def train_dataloader(self):
        return DataLoader(Shards(args.input_bin, self.global_rank, self.trainer.world_size), batch_size=None)

    def val_dataloader(self):
        shards = Shards(args.input_val_bin, self.global_rank, self.trainer.world_size, args.val_max_steps)
        return DataLoader(shards, batch_size=None)

    def configure_optimizers(self):
        optimizer = self.model.configure_optimizers(
            weight_decay=args.weight_decay,
            learning_rate=args.learning_rate,
            betas=(0.9, 0.95),
            device_type="cpu",
            zero_stage=args.zero_stage,
        )
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: get_lr(it) / args.learning_rate)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        # round 1: train_gpt2.py clips over model.parameters() (the network's order); Lightning's own clipping takes the
        # optimizer's param groups (decayed, then not decayed), and the norm summed in that order rounds otherwise
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), gradient_clip_val)

    def training_step(self, batch, batch_idx):
        x, y = batch
        _, loss = self.model(x, y, return_logits=False)
        self.log("train_loss", loss, prog_bar=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        _, loss = self.model(x, y, return_logits=False)
        self.log("val_loss", loss, sync_dist=True)


if __name__ == "__main__":
    L.seed_everything(42)
    model = LitGPT()
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=WORLD,
        precision="32-true",
        max_steps=args.num_iterations,
        accumulate_grad_batches=grad_accum_steps,
        gradient_clip_val=args.grad_clip,
        val_check_interval=args.val_loss_every * grad_accum_steps,
        check_val_every_n_epoch=None,
        limit_val_batches=args.val_max_steps,
        default_root_dir=args.output_dir or None,
    )
    trainer.fit(model)
