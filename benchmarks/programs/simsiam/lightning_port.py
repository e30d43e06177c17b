"""simsiam's main_simsiam.py ported to Lightning, written as a Lightning user would: the same SimSiam module (the
builder over the same encoder), SGD over the same two param groups (--fix-pred-lr), the per-epoch cosine lr as a
LambdaLR stepped every epoch, the same dataset and two-crop transform; Lightning's DDP strategy, sampler, launcher
and checkpointing. SyncBatchNorm through a LayerSync plugin (Trainer(sync_batchnorm=True) converts to torch's
SyncBatchNorm, which refuses CPU tensors), applying the same stand-in as main_simsiam.py. No line records
anything: `ddp-parity record` does.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python lightning_port.py data -a resnet50 --seed 0 --fix-pred-lr \\
        --epochs 2 -b 16 -j 0 --dim 64 --pred-dim 16
"""

import math
import os

import lightning as L
import simsiam.builder
import simsiam.loader
import torch
from lightning.pytorch.plugins import LayerSync
from main_simsiam import parser
from standins import SyncBatchNorm, datasets, models, transforms
from torch import nn

WORLD_SIZE = 2


class CPUSyncBatchNorm(LayerSync):
    def apply(self, model):
        return SyncBatchNorm.convert_sync_batchnorm(model)

    def revert(self, model):
        return model


class LitSimSiam(L.LightningModule):
    def __init__(self, arch, dim, pred_dim, lr, batch_size, momentum, weight_decay, epochs, fix_pred_lr):
        super().__init__()
        self.save_hyperparameters()
        self.criterion = nn.CosineSimilarity(dim=1)
        self.init_lr = lr * batch_size / 256  # the lr of the global batch

    def configure_model(self):
        # round 1: built after Lightning re-seeds the ranks in its DDP setup, so that the augmentations draw from
        # the global generator after the model's initialisation, as in main_worker (seed, model, then the loader)
        hp = self.hparams
        self.model = simsiam.builder.SimSiam(models.__dict__[hp.arch], hp.dim, hp.pred_dim)

    def training_step(self, batch, batch_idx):
        images, _ = batch
        p1, p2, z1, z2 = self.model(x1=images[0], x2=images[1])
        loss = -(self.criterion(p1, z2).mean() + self.criterion(p2, z1).mean()) * 0.5
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        hp = self.hparams
        if hp.fix_pred_lr:
            params = [
                {"params": self.model.encoder.parameters(), "fix_lr": False},
                {"params": self.model.predictor.parameters(), "fix_lr": True},
            ]
        else:
            params = self.model.parameters()
        optimizer = torch.optim.SGD(params, self.init_lr, momentum=hp.momentum, weight_decay=hp.weight_decay)

        def cosine(epoch):
            return 0.5 * (1.0 + math.cos(math.pi * epoch / hp.epochs))

        lambdas = [cosine, lambda epoch: 1.0] if hp.fix_pred_lr else cosine
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambdas)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}


def train_dataloader(args):
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    augmentation = [
        transforms.RandomResizedCrop(224, scale=(0.2, 1.0)),
        transforms.RandomApply([transforms.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
        transforms.RandomGrayscale(p=0.2),
        transforms.RandomApply([simsiam.loader.GaussianBlur([0.1, 2.0])], p=0.5),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        normalize,
    ]
    dataset = datasets.ImageFolder(
        os.path.join(args.data, "train"), simsiam.loader.TwoCropsTransform(transforms.Compose(augmentation))
    )
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=args.batch_size // WORLD_SIZE,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=True,
        drop_last=True,
    )


def main():
    args = parser.parse_args()
    L.seed_everything(args.seed)
    model = LitSimSiam(
        args.arch,
        args.dim,
        args.pred_dim,
        args.lr,
        args.batch_size,
        args.momentum,
        args.weight_decay,
        args.epochs,
        args.fix_pred_lr,
    )
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=WORLD_SIZE,
        max_epochs=args.epochs,
        plugins=[CPUSyncBatchNorm()],
    )
    trainer.fit(model, train_dataloader(args))


if __name__ == "__main__":
    main()
