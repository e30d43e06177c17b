"""gpt2_ft.py (microsoft/LoRA examples/NLG) as a LightningModule: the same arguments, the same GPT-2 with LoRA
layers, data set, AdamW and linear warmup/decay schedule (imported from the program's own files), trained by
`Trainer(strategy="ddp", accelerator="cpu", devices=2)` and Lightning's own launcher:

    python lightning_port.py --train_data ... (the arguments of gpt2_ft.py)
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import lightning as L
import loralib as lora
import torch
from data_utils import FT_Dataset
from gpt2_ft import parser
from lightning.pytorch.strategies import DDPStrategy
from model import GPT2Config, GPT2LMModel
from optimizer import create_adam_optimizer_from_args, create_optimizer_scheduler
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

CARDS = {  # gpt2_ft.py's --model_card
    "gpt2.tiny": dict(vocab_size_or_config_json_file=64, n_positions=16, n_ctx=16, n_embd=32, n_layer=2, n_head=2),
    "gpt2.sm": dict(n_embd=768, n_layer=12, n_head=12),
    "gpt2.md": dict(n_embd=1024, n_layer=24, n_head=16),
    "gpt2.lg": dict(n_embd=1280, n_layer=36, n_head=20),
}


class SyncEveryMicroBatch(DDPStrategy):
    """gpt2_ft.py accumulates with DDP reducing every backward (no no_sync); Lightning's accumulate_grad_batches
    blocks the sync on all but the last micro-batch of a step."""

    @contextmanager
    def block_backward_sync(self):
        yield None


class EpochFromOneSampler(DistributedSampler):
    """gpt2_ft.py counts its epochs from 1 (itertools.count(start=1)) and calls set_epoch(epoch); Lightning calls
    set_epoch(current_epoch), from 0."""

    def set_epoch(self, epoch):
        super().set_epoch(epoch + 1)


class EpochZeroSampler(DistributedSampler):
    """gpt2_ft.py never calls set_epoch on its validation sampler: every evaluation reads the order of epoch 0."""

    def set_epoch(self, epoch):
        pass


class LoRAGPT2(L.LightningModule):
    def __init__(self, args, train_data, valid_data):
        super().__init__()
        self.args = args
        self.train_data, self.valid_data = train_data, valid_data

    def configure_model(self):
        # built here, after the Trainer's reset_seed(): the global stream is then where gpt2_ft.py's is, its model
        # built right after torch.manual_seed(random_seed)
        if hasattr(self, "model"):
            return
        args = self.args
        config = GPT2Config(
            **CARDS[args.model_card],
            lora_attn_dim=args.lora_dim,
            lora_attn_alpha=args.lora_alpha,
            lora_dropout=args.lora_dropout,
        )
        self.model = GPT2LMModel(config)
        if args.init_checkpoint is not None:
            self.model.load_weight(torch.load(args.init_checkpoint))
        if args.lora_dim > 0:
            lora.mark_only_lora_as_trainable(self.model)

    def training_step(self, batch, batch_idx):
        _, loss = self.model(
            batch["input"], lm_labels=batch["target"], lm_mask=batch["mask"], label_smooth=self.args.label_smooth
        )
        loss = loss.mean()
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        _, loss = self.model(batch["input"], lm_labels=batch["target"], lm_mask=batch["mask"])
        self.log("valid_loss", loss.mean(), sync_dist=True)

    def train_dataloader(self):  # gpt2_ft.py's loaders, its samplers (seed=random_seed)
        sampler = EpochFromOneSampler(self.train_data, seed=self.args.random_seed)
        return DataLoader(self.train_data, batch_size=self.args.train_batch_size, sampler=sampler, drop_last=True)

    def val_dataloader(self):
        sampler = EpochZeroSampler(self.valid_data, seed=self.args.random_seed)
        return DataLoader(self.valid_data, batch_size=self.args.valid_batch_size, sampler=sampler, drop_last=False)

    def configure_optimizers(self):
        optimizer = create_adam_optimizer_from_args(self.model, self.args)
        # gpt2_ft.py steps its schedule after every micro-batch (optimizer_step: outside `if is_update`), over
        # max_step micro-batches: stepped by hand in on_train_batch_end, not by Lightning at each optimizer step
        self.schedule = create_optimizer_scheduler(optimizer, self.args)
        return optimizer

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.schedule is not None:
            self.schedule.step()


def ddp_keys(state_dict):
    """gpt2_ft.py saves the state_dict of its DDP wrapper: every key under `module.`, which model.load_weight
    (gpt2_beam.py) maps back; a key without it would be dropped there by load_state_dict(strict=False)."""
    return {"module." + k: v for k, v in state_dict.items()}


class LoRACheckpoints(L.Callback):
    """gpt2_ft.py's checkpoints, named by its train_step (micro-batches, across epochs): the LoRA weights every
    --save_interval micro-batches, the whole model at the end of every epoch (train_validate's last save)."""

    def __init__(self, args):
        self.args = args
        self.train_step = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.train_step += 1
        if self.train_step % self.args.save_interval == 0 and trainer.is_global_zero:
            path = os.path.join(self.args.work_dir, f"model.{self.train_step}.pt")
            torch.save({"model_state_dict": ddp_keys(lora.lora_state_dict(pl_module.model))}, path)

    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.is_global_zero:
            path = os.path.join(self.args.work_dir, f"model.{self.train_step}.pt")
            torch.save({"model_state_dict": ddp_keys(pl_module.model.state_dict())}, path)


def main():
    args = parser.parse_args()
    L.seed_everything(args.random_seed)
    os.makedirs(args.work_dir, exist_ok=True)

    train_data = FT_Dataset(args.train_data, args.train_batch_size, args.seq_len, joint_lm=args.obj == "jlm")
    valid_data = FT_Dataset(args.valid_data, args.valid_batch_size, args.seq_len)

    trainer = L.Trainer(
        strategy=SyncEveryMicroBatch(),
        accelerator="cpu",
        devices=2,
        max_epochs=args.max_epoch,
        accumulate_grad_batches=args.grad_acc,
        gradient_clip_val=args.clip if args.clip > 0 else None,
        val_check_interval=args.eval_interval,
        check_val_every_n_epoch=None,  # gpt2_ft.py evaluates every eval_interval micro-batches counted across epochs
        num_sanity_val_steps=0,  # gpt2_ft.py does not evaluate before training
        log_every_n_steps=args.log_interval,
        default_root_dir=args.work_dir,
        enable_checkpointing=False,
        use_distributed_sampler=False,  # the samplers are gpt2_ft.py's own (train_dataloader, val_dataloader)
        callbacks=[LoRACheckpoints(args)],
    )
    if args.max_step is None:  # as gpt2_ft.py: the schedule's length
        args.max_step = (args.max_epoch * train_data.num_batches + trainer.world_size - 1) // trainer.world_size
    trainer.fit(LoRAGPT2(args, train_data, valid_data))


if __name__ == "__main__":
    main()
