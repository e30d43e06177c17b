"""DETR's training (main.py, engine.py) as a LightningModule, trained by Lightning's Trainer with strategy="ddp" and
Lightning's own launcher: `python lightning_port.py ARGS` with main.py's arguments. The model, the criterion (Hungarian
matcher, auxiliary losses), the data set, its transforms and the collate_fn are the program's, imported."""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import lightning as L
import numpy as np
import torch
import util.misc as utils
from datasets import build_dataset
from lightning.pytorch.callbacks import ModelCheckpoint
from main import get_args_parser
from models import build_model
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler


class LitDETR(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.model, self.criterion, self.postprocessors = build_model(args)

    def forward(self, samples):
        return self.model(samples)

    def _losses(self, batch):
        samples, targets = batch
        outputs = self.model(samples)
        loss_dict = self.criterion(outputs, targets)
        weight_dict = self.criterion.weight_dict
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
        # reduce losses over all processes for logging purposes, as engine.py does
        loss_dict_reduced = utils.reduce_dict(loss_dict)
        scaled = {k: v * weight_dict[k] for k, v in loss_dict_reduced.items() if k in weight_dict}
        return losses, sum(scaled.values()), loss_dict_reduced

    def training_step(self, batch, batch_idx):
        losses, loss_value, reduced = self._losses(batch)
        self.log("loss", loss_value, prog_bar=True)
        self.log("class_error", reduced["class_error"])
        return losses

    def validation_step(self, batch, batch_idx):
        _, loss_value, reduced = self._losses(batch)
        self.log("val_loss", loss_value, sync_dist=True)
        self.log("val_class_error", reduced["class_error"], sync_dist=True)

    def configure_optimizers(self):
        args = self.args
        param_dicts = [
            {"params": [p for n, p in self.model.named_parameters() if "backbone" not in n and p.requires_grad]},
            {
                "params": [p for n, p in self.model.named_parameters() if "backbone" in n and p.requires_grad],
                "lr": args.lr_backbone,
            },
        ]
        optimizer = torch.optim.AdamW(param_dicts, lr=args.lr, weight_decay=args.weight_decay)
        lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": lr_scheduler, "interval": "epoch"}}

    def train_dataloader(self):
        dataset_train = build_dataset(image_set="train", args=self.args)
        # main.py's own samplers (DistributedSampler's seed 0, not the PL_GLOBAL_SEED Lightning would seed one with)
        sampler_train = DistributedSampler(dataset_train)
        batch_sampler_train = BatchSampler(sampler_train, self.args.batch_size, drop_last=True)
        return DataLoader(
            dataset_train,
            batch_sampler=batch_sampler_train,
            collate_fn=utils.collate_fn,
            num_workers=self.args.num_workers,
        )

    def val_dataloader(self):
        dataset_val = build_dataset(image_set="val", args=self.args)
        return DataLoader(
            dataset_val,
            self.args.batch_size,
            sampler=DistributedSampler(dataset_val, shuffle=False),
            drop_last=False,
            collate_fn=utils.collate_fn,
            num_workers=self.args.num_workers,
        )


def main(args):
    checkpoint = ModelCheckpoint(dirpath=args.output_dir or None, filename="checkpoint", save_last=True)
    trainer = L.Trainer(
        strategy="ddp",
        use_distributed_sampler=False,  # the samplers are main.py's
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        gradient_clip_val=args.clip_max_norm if args.clip_max_norm > 0 else None,
        gradient_clip_algorithm="norm",
        callbacks=[checkpoint],
        default_root_dir=args.output_dir or None,
    )
    # main.py's seeding: seed + rank on each rank, before the model is built (seed_everything would seed every rank
    # alike, and Lightning re-seeds from PL_GLOBAL_SEED after the model is built)
    seed = args.seed + trainer.global_rank
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    model = LitDETR(args)
    trainer.fit(model)


if __name__ == "__main__":
    parser = argparse.ArgumentParser("DETR training with Lightning", parents=[get_args_parser()])
    args = parser.parse_args()
    if args.output_dir:
        Path(args.output_dir).mkdir(parents=True, exist_ok=True)
    main(args)
