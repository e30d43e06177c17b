"""NVIDIA/tacotron2's train.py as a Lightning user first writes it: the authors' model, data set, collate and loss
reused by import, a LightningModule and Trainer(strategy="ddp") on Lightning's own launcher. Reads train.py's
arguments (-o, -l, --hparams); not part of the authors' code."""

import argparse

import lightning as L
import torch
from data_utils import TextMelCollate, TextMelLoader
from hparams import create_hparams
from lightning.pytorch.callbacks import ModelCheckpoint
from loss_function import Tacotron2Loss
from model import Tacotron2
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


class Tacotron2Module(L.LightningModule):
    def __init__(self, hp):
        super().__init__()
        self.hp = hp
        self.model = Tacotron2(hp)
        self.criterion = Tacotron2Loss()

    def training_step(self, batch, batch_idx):
        x, y = self.model.parse_batch(batch)
        y_pred = self.model(x)
        loss = self.criterion(y_pred, y)
        self.log("train_loss", loss, sync_dist=True, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = self.model.parse_batch(batch)
        y_pred = self.model(x)
        loss = self.criterion(y_pred, y)
        self.log("val_loss", loss, sync_dist=True)

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
            sampler=DistributedSampler(self.trainset),  # round 1: the sampler train.py builds (seed 0)
            num_workers=1,
            shuffle=False,
            batch_size=self.hp.batch_size,
            pin_memory=False,
            drop_last=True,
            collate_fn=self.collate_fn,
        )

    def val_dataloader(self):
        return DataLoader(
            self.valset,
            sampler=DistributedSampler(self.valset),  # round 1: as train.py's validate() builds it
            num_workers=1,
            shuffle=False,
            batch_size=self.hp.batch_size,
            pin_memory=False,
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
    module = Tacotron2Module(hp)
    data = TextMelData(hp)
    checkpoint = ModelCheckpoint(
        dirpath=args.output_directory, every_n_train_steps=hp.iters_per_checkpoint, save_top_k=-1
    )
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=hp.epochs,
        gradient_clip_val=hp.grad_clip_thresh,
        val_check_interval=hp.iters_per_checkpoint,
        check_val_every_n_epoch=None,
        callbacks=[checkpoint],
        num_sanity_val_steps=0,  # round 2: the sanity check's validation drew from the global generator
        use_distributed_sampler=False,  # round 1: the samplers above, not Lightning's (seeded from PL_GLOBAL_SEED)
        default_root_dir=args.output_directory,
    )
    trainer.fit(module, datamodule=data)


if __name__ == "__main__":
    main()
