"""modded-nanogpt's train_gpt2.py (fdc6e0b7, 2024-10-30) ported to Lightning, written first as a Lightning
user would: the authors' GPT, Muon and DistributedDataLoader taken from the copied train_gpt2.py (its definitions
only, the part above "args = Hyperparameters()": importing the file would run its training), the same
Hyperparameters; three optimizers (Adam for the embedding, Adam for the head, Muon for the blocks) so manual
optimization, with accumulation as Lightning's docs show it (the loss divided by the steps, a step every N batches);
the trapezoidal get_lr through one LambdaLR an optimizer; bf16 autocast by the Trainer's precision; the val loss
every val_loss_every steps.

    python lightning_port.py   (run from the directory holding data/)
"""

import os

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

HERE = os.path.dirname(os.path.abspath(__file__))
_source = open(os.path.join(HERE, "train_gpt2.py")).read()
authors = {"__name__": "train_gpt2"}
exec(compile(_source.split("args = Hyperparameters()")[0], os.path.join(HERE, "train_gpt2.py"), "exec"), authors)
GPT, GPTConfig, Muon = authors["GPT"], authors["GPTConfig"], authors["Muon"]
DistributedDataLoader, Hyperparameters = authors["DistributedDataLoader"], authors["Hyperparameters"]

args = Hyperparameters()
WORLD = 2
B, T = args.device_batch_size, args.sequence_length
val_steps = args.val_tokens // (B * T * WORLD)
train_accumulation_steps = args.batch_size // (B * WORLD)


class Shards(IterableDataset):
    """The authors' DistributedDataLoader as a dataset: each rank reads its own offset of the token shards."""

    def __init__(self, pattern, steps=None):
        self.pattern, self.steps = pattern, steps

    def __iter__(self):
        rank = int(os.environ.get("LOCAL_RANK", 0))
        loader = DistributedDataLoader(self.pattern, B, T, rank, WORLD)
        n = 0
        if self.steps is None:
            # round 1: train_gpt2.py draws its first batch before train_loader.reset() and trains on it, then on the
            # first batch again (the reset loader's first): the first update's two micro-batches are the same
            first = loader.next_batch()
            loader.reset()
            yield first
        while self.steps is None or n < self.steps:
            yield loader.next_batch()
            n += 1


class LightningMuon(Muon):
    """Muon.step() takes no closure, which Lightning's optimizer step passes: run it, then the authors' step."""

    def step(self, closure=None):
        if closure is not None:
            closure()
        super().step()


def get_lr(it):
    assert it <= args.num_iterations
    if it < args.warmup_iters:
        return (it + 1) / args.warmup_iters
    elif it < args.num_iterations - args.warmdown_iters:
        return 1.0
    else:
        decay_ratio = (args.num_iterations - it) / args.warmdown_iters
        return decay_ratio


class SpeedrunGPT(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.model = GPT(GPTConfig(vocab_size=64, n_layer=2, n_head=4, n_embd=32))

    def setup(self, stage):
        # Muon splits its parameters between ranks by the RANK and WORLD_SIZE torchrun sets; Lightning's launcher
        # does not set RANK
        os.environ["RANK"] = str(self.global_rank)
        os.environ["WORLD_SIZE"] = str(self.trainer.world_size)

    def configure_optimizers(self):
        optimizer1 = torch.optim.Adam([self.model.transformer.wte.weight], lr=0.3, betas=(0.9, 0.95), fused=True)
        optimizer2 = torch.optim.Adam([self.model.lm_head.weight], lr=0.003, betas=(0.9, 0.95), fused=True)
        optimizer3 = LightningMuon(self.model.transformer.h.parameters(), lr=0.02, momentum=0.95)
        optimizers = [optimizer1, optimizer2, optimizer3]
        schedulers = [torch.optim.lr_scheduler.LambdaLR(opt, get_lr) for opt in optimizers]
        return optimizers, schedulers

    def training_step(self, batch, batch_idx):
        x, y = batch
        _, loss = self.model(x, y, return_logits=False)
        self.manual_backward(loss / train_accumulation_steps)
        if (batch_idx + 1) % train_accumulation_steps == 0:
            for opt, sched in zip(self.optimizers(), self.lr_schedulers()):
                opt.step()
                sched.step()
            for opt in self.optimizers():
                opt.zero_grad(set_to_none=True)
        self.log("train_loss", loss.detach(), prog_bar=True)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        _, loss = self.model(x, y, return_logits=False)
        self.log("val_loss", loss, sync_dist=True)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SpeedrunGPT()
    train = DataLoader(Shards(args.input_bin), batch_size=None)
    val = DataLoader(Shards(args.input_val_bin, val_steps), batch_size=None)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=WORLD,
        precision="bf16-mixed",
        # round 2: under manual optimization the Trainer's step counts every optimizer.step(): 3 a update
        max_steps=args.num_iterations * 3,
        val_check_interval=args.val_loss_every * train_accumulation_steps,
        check_val_every_n_epoch=None,
        limit_val_batches=val_steps,
    )
    trainer.fit(model, train, val)
