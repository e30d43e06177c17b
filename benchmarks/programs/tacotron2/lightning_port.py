"""NVIDIA/tacotron2's train.py as a Lightning user first writes it: the authors' model, data set, collate and loss
reused by import, a LightningModule and Trainer(strategy="ddp") on Lightning's own launcher. Reads train.py's
arguments (-o, -l, --hparams); not part of the authors' code."""

import argparse
import os

import lightning as L
import torch
from data_utils import TextMelCollate, TextMelLoader
from hparams import create_hparams
from lightning.pytorch.strategies import DDPStrategy
from logger import Tacotron2Logger
from loss_function import Tacotron2Loss
from model import Tacotron2
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


class NoSetEpochSampler(DistributedSampler):
    """round 5 (the tool: set_epoch, raw replays its first epoch): train.py never calls set_epoch, so every epoch
    draws epoch 0's permutation; Lightning calls set_epoch on the loader's sampler each epoch: a no-op here."""

    def set_epoch(self, epoch):
        pass


class Tacotron2Module(L.LightningModule):
    def __init__(self, hp, output_directory, log_directory):
        super().__init__()
        self.hp = hp
        self.output_directory = output_directory
        self.log_directory = log_directory
        self.model = Tacotron2(hp)
        self.criterion = Tacotron2Loss()

    def training_step(self, batch, batch_idx):
        x, y = self.model.parse_batch(batch)
        y_pred = self.model(x)
        loss = self.criterion(y_pred, y)
        self.log("train_loss", loss, sync_dist=True, prog_bar=True)
        return loss

    def on_train_start(self):
        # round 4: train.py's logger on rank 0 (its validation logging draws from Python's random there)
        self.logger_ = None
        if self.global_rank == 0:
            os.makedirs(self.output_directory, exist_ok=True)
            self.logger_ = Tacotron2Logger(os.path.join(self.output_directory, self.log_directory))

    def on_train_batch_end(self, outputs, batch, batch_idx):
        # round 4 (the tool: rng, raw iterated a validation loader before step 2): train.py validates after
        # iteration 0, iters_per_checkpoint, ... and checkpoints on rank 0 right after; val_check_interval cannot
        # say "after the first step", so its own validate() runs here, as train.py calls it
        iteration = self.global_step - 1
        if iteration % self.hp.iters_per_checkpoint == 0:
            self.validate(iteration)
            self.trainer.save_checkpoint(os.path.join(self.output_directory, f"checkpoint_{iteration}"))

    def validate(self, iteration):
        """train.py's validate(), on this module's model (train.py is the raw side's alone: not imported)."""
        data = self.trainer.datamodule
        self.model.eval()
        with torch.no_grad():
            val_loader = DataLoader(
                data.valset,
                sampler=DistributedSampler(data.valset),
                num_workers=1,
                shuffle=False,
                batch_size=self.hp.batch_size,
                pin_memory=False,
                collate_fn=data.collate_fn,
            )
            val_loss = 0.0
            for batch in val_loader:
                x, y = self.model.parse_batch(batch)
                y_pred = self.model(x)
                loss = self.criterion(y_pred, y)
                reduced = loss.data.clone()
                torch.distributed.all_reduce(reduced)
                val_loss += (reduced / self.trainer.world_size).item()
            val_loss = val_loss / len(val_loader)
        self.model.train()
        if self.global_rank == 0:
            print(f"Validation loss {iteration}: {val_loss:9f}  ")
            self.logger_.log_validation(val_loss, self.model, y, y_pred, iteration)

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.hp.learning_rate, weight_decay=self.hp.weight_decay)


class TextMelData(L.LightningDataModule):
    def __init__(self, hp):
        super().__init__()
        self.hp = hp
        self.collate_fn = TextMelCollate(hp.n_frames_per_step)

    def setup(self, stage=None):
        self.trainset = TextMelLoader(self.hp.training_files, self.hp)
        self.valset = TextMelLoader(self.hp.validation_files, self.hp)

    def train_dataloader(self):
        return DataLoader(
            self.trainset,
            sampler=NoSetEpochSampler(self.trainset),  # round 1: the sampler train.py builds (seed 0); round 5
            num_workers=1,
            shuffle=False,
            batch_size=self.hp.batch_size,
            pin_memory=False,
            drop_last=True,
            collate_fn=self.collate_fn,
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-o", "--output_directory", type=str, help="directory to save checkpoints")
    parser.add_argument("-l", "--log_directory", type=str, help="directory to save logs")
    parser.add_argument("--hparams", type=str, required=False, help="comma separated name=value pairs")
    args = parser.parse_args()
    hp = create_hparams(args.hparams)

    # round 3 (the tool: undetermined, rng first): seed_everything sets PL_GLOBAL_SEED, and DDPStrategy's
    # setup_distributed re-seeds from it (reset_seed) after the model is built here; train.py seeds once
    torch.manual_seed(hp.seed)
    module = Tacotron2Module(hp, args.output_directory, args.log_directory)
    data = TextMelData(hp)
    trainer = L.Trainer(
        # round 6 (the tool: EQUIVALENT, warning evaluation_differs on rank 1 after step 5): DDP broadcasts rank 0's
        # BatchNorm buffers before every forward; train.py's apply_gradient_allreduce never syncs buffers, so each
        # rank keeps its own running statistics (meta.json's per-rank buffers_sha256 differ on rank 1)
        strategy=DDPStrategy(broadcast_buffers=False),
        accelerator="cpu",
        devices=2,
        max_epochs=hp.epochs,
        gradient_clip_val=hp.grad_clip_thresh,
        enable_checkpointing=False,  # round 4: checkpoint_{iteration} after each validation, as train.py
        num_sanity_val_steps=0,  # round 2: the sanity check's validation drew from the global generator
        use_distributed_sampler=False,  # round 1: the samplers above, not Lightning's (seeded from PL_GLOBAL_SEED)
        default_root_dir=args.output_directory,
    )
    trainer.fit(module, datamodule=data)


if __name__ == "__main__":
    main()
