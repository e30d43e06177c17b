"""nanoGPT's train.py ported to Lightning, written first as a Lightning user would: the same GPT (model.py),
the same config keys (configurator.py), random windows from the same .bin files through an IterableDataset,
the cosine schedule as a per-step LambdaLR, accumulation and clipping by the Trainer.

    python lightning_port.py --out_dir=OUT --dataset=tiny_char ...   (run from the directory holding data/)
"""

import math
import os

import lightning as L
import numpy as np
import torch
from model import GPT, GPTConfig
from torch.utils.data import DataLoader, IterableDataset

from ddp_parity import TraceCallback  # parity

# the same defaults and overrides as train.py
out_dir = "out"
eval_interval = 2000
log_interval = 1
eval_iters = 200
eval_only = False
dataset = "openwebtext"
gradient_accumulation_steps = 5 * 8
batch_size = 12
block_size = 1024
n_layer = 12
n_head = 12
n_embd = 768
dropout = 0.0
bias = False
learning_rate = 6e-4
max_iters = 600000
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0
decay_lr = True
warmup_iters = 2000
lr_decay_iters = 600000
min_lr = 6e-5
backend = "nccl"  # the Trainer picks gloo on CPU
device = "cuda"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
compile = True
devices = 2
config_keys = [k for k, v in globals().items() if not k.startswith("_") and isinstance(v, (int, float, bool, str))]
exec(open(os.path.join(os.path.dirname(__file__), "configurator.py")).read())
config = {k: globals()[k] for k in config_keys}


class RandomWindows(IterableDataset):
    """Endless batches of random windows of block_size tokens, drawn as get_batch draws them (round 2,
    docs/programs.md: one torch.randint per batch from the global generator, as train.py draws)."""

    def __init__(self, path: str, block_size: int, batch_size: int):
        self.path, self.block_size, self.batch_size = path, block_size, batch_size
        self.after_first = None  # round 4: what runs between the first batch and the second (an evaluation)

    def __iter__(self):
        first = True
        while True:
            yield draw_windows(self.path, self.block_size, self.batch_size)
            if first and self.after_first is not None:
                self.after_first()
            first = False


def draw_windows(path: str, block_size: int, batch_size: int):
    data = np.memmap(path, dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i : i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix])
    return x, y


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


class LitGPT(L.LightningModule):
    def __init__(self, model_args: dict):
        super().__init__()
        self.save_hyperparameters()
        self.model_args = model_args

    def configure_model(self):
        # rounds 1-2 (docs/programs.md): each rank seeds 1337 + rank, then builds the model, then draws its
        # batches from the same generator, in train.py's order
        torch.manual_seed(1337 + self.global_rank)
        self.model = GPT(GPTConfig(**self.model_args))

    def training_step(self, batch, batch_idx):
        X, Y = batch
        _, loss = self.model(X, Y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        X, Y = batch
        _, loss = self.model(X, Y)
        self.log("val_loss", loss, sync_dist=True)

    def on_train_start(self):
        # round 4 (docs/programs.md): train.py's rank 0 evaluates at iteration 0, after drawing its first
        # training batch and before its second, with batches drawn from the training's generator
        if self.global_rank == 0:
            self.windows.after_first = self.evaluate_at_iteration_0

    @torch.no_grad()
    def evaluate_at_iteration_0(self):
        out = {}
        self.model.eval()
        for split in ("train", "val"):
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = draw_windows(os.path.join("data", dataset, f"{split}.bin"), block_size, batch_size)
                _, loss = self.model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        self.model.train()
        self.trace.record_validation(self.trainer, {"train_loss": out["train"], "val_loss": out["val"]})  # parity

    def configure_optimizers(self):
        optimizer = self.model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), "cpu")
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: get_lr(it) / learning_rate)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def main():
    L.seed_everything(1337)
    # the torch flags train.py sets (recorded by the hooks at the first step: TF32 differed, round 1 of the hooks)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    data_dir = os.path.join("data", dataset)
    model_args = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, bias=bias, dropout=dropout)
    model_args["vocab_size"] = 65 if os.path.exists(os.path.join(data_dir, "meta.pkl")) else 50304
    model = LitGPT(model_args)
    # round 3 (docs/programs.md): the loader's base seed drawn from a generator of its own, not the global one
    windows = RandomWindows(os.path.join(data_dir, "train.bin"), block_size, batch_size)
    train = DataLoader(windows, batch_size=None, generator=torch.Generator())
    # parity, as written: model.windows = windows
    model.windows, model.trace = windows, TraceCallback(os.path.join(out_dir, "trace"), config=config)  # parity
    val = DataLoader(RandomWindows(os.path.join(data_dir, "val.bin"), block_size, batch_size), batch_size=None)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator=device if device == "cpu" else "gpu",
        devices=devices,
        max_steps=max_iters + 1,  # round 6 (docs/programs.md): train.py runs iterations 0 to max_iters
        accumulate_grad_batches=gradient_accumulation_steps // devices,
        gradient_clip_val=grad_clip,
        val_check_interval=eval_interval * gradient_accumulation_steps // devices,
        limit_val_batches=eval_iters,
        num_sanity_val_steps=0,
        callbacks=[model.trace],  # parity
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, train, val)


if __name__ == "__main__":
    main()
