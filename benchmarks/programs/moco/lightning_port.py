"""MoCo's main_moco.py ported to Lightning, written as a Lightning user would: the same MoCo module (moco/builder.py:
query and key encoders, the queue, shuffle-BN), the same dataset and two-crop augmentation, SGD with momentum and
weight decay, the per-epoch schedule as a Lightning lr scheduler (cosine with --cos, else the milestones), a
checkpoint each epoch; Lightning's DDP strategy, sampler and launcher. No line records anything: `ddp-parity
record` does.

    python lightning_port.py data --seed 0 --workers 0 -b 16 --epochs 4 --mlp --aug-plus --cos --moco-k 64
"""

import math
import os

import lightning as L
import moco.builder
import moco.loader
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from main_moco import accuracy, parser
from standins import datasets, models, transforms
from torch import nn


class LitMoCo(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.criterion = nn.CrossEntropyLoss()

    def configure_model(self):
        # round 1: built after Lightning re-seeds the ranks in its DDP setup, so that the augmentations draw from the
        # global generator after the model's initialisation, as in main_worker (seed, model, then the loader)
        args = self.args
        self.model = moco.builder.MoCo(
            models.__dict__[args.arch], args.moco_dim, args.moco_k, args.moco_m, args.moco_t, args.mlp
        )

    def training_step(self, batch, batch_idx):
        images, _ = batch
        output, target = self.model(im_q=images[0], im_k=images[1])
        loss = self.criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        self.log_dict({"loss": loss, "acc1": acc1[0], "acc5": acc5[0]})
        return loss

    def configure_optimizers(self):
        args = self.args
        optimizer = torch.optim.SGD(self.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
        if args.cos:
            # round 3: main_moco's closed form (adjust_learning_rate: lr * 0.5 * (1 + cos(pi * epoch / epochs))), where
            # CosineAnnealingLR's recursive form parts from it by one ulp at epoch 2 of 4
            scheduler = torch.optim.lr_scheduler.LambdaLR(
                optimizer, lambda epoch: 0.5 * (1.0 + math.cos(math.pi * epoch / args.epochs))
            )
        else:
            scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=args.schedule, gamma=0.1)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}


def augmentation(args):
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    if args.aug_plus:  # MoCo v2's
        return [
            transforms.RandomResizedCrop(224, scale=(0.2, 1.0)),
            transforms.RandomApply([transforms.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
            transforms.RandomGrayscale(p=0.2),
            transforms.RandomApply([moco.loader.GaussianBlur([0.1, 2.0])], p=0.5),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ]
    return [  # MoCo v1's
        transforms.RandomResizedCrop(224, scale=(0.2, 1.0)),
        transforms.RandomGrayscale(p=0.2),
        transforms.ColorJitter(0.4, 0.4, 0.4, 0.4),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        normalize,
    ]


def main():
    args = parser.parse_args()
    L.seed_everything(args.seed)
    world_size = 2
    train_dataset = datasets.ImageFolder(
        os.path.join(args.data, "train"), moco.loader.TwoCropsTransform(transforms.Compose(augmentation(args)))
    )
    train_loader = torch.utils.data.DataLoader(
        train_dataset,
        batch_size=args.batch_size // world_size,
        shuffle=True,
        num_workers=args.workers,
        drop_last=True,
    )
    model = LitMoCo(args)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=world_size,
        max_epochs=args.epochs,
        callbacks=[ModelCheckpoint(every_n_epochs=1, save_top_k=-1)],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, train_loader)


if __name__ == "__main__":
    main()
