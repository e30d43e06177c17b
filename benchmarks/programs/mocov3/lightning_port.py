"""main_moco.py (MoCo v3 pre-training, the ResNet path) as a LightningModule, launched by Lightning itself:
``python lightning_port.py DATA [main_moco.py's arguments]``. The model, its loss, the augmentations, LARS and the
lr/momentum schedules are main_moco.py's and moco/'s, imported; Lightning replaces mp.spawn, DDP, the
DistributedSampler and its set_epoch, the loop and the checkpoint."""

from functools import partial

import lightning as L
import moco.builder
import moco.loader
import moco.optimizer
import torch
from main_moco import adjust_learning_rate, adjust_moco_momentum, parser
from standins import datasets, transforms
from standins import models as torchvision_models


class LARS(moco.optimizer.LARS):
    """moco's LARS, its step taking the closure Lightning passes."""

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        super().step()
        return loss


def build_dataset(args):
    normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    augmentation1 = [
        transforms.RandomResizedCrop(16, scale=(args.crop_min, 1.0)),
        transforms.RandomApply([transforms.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8),
        transforms.RandomGrayscale(p=0.2),
        transforms.RandomApply([moco.loader.GaussianBlur([0.1, 2.0])], p=1.0),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        normalize,
    ]
    augmentation2 = [
        transforms.RandomResizedCrop(16, scale=(args.crop_min, 1.0)),
        transforms.RandomApply([transforms.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8),
        transforms.RandomGrayscale(p=0.2),
        transforms.RandomApply([moco.loader.GaussianBlur([0.1, 2.0])], p=0.1),
        transforms.RandomApply([moco.loader.Solarize()], p=0.2),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        normalize,
    ]
    return datasets.ImageFolder(
        args.data + "/train",
        moco.loader.TwoCropsTransform(transforms.Compose(augmentation1), transforms.Compose(augmentation2)),
    )


class MoCoV3(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.model = None

    def configure_model(self):
        # built here, after Lightning's DDP setup re-seeds every rank, so that the augmentations draw after the
        # initial weights' draws from the same seed, as on main_moco.py's ranks
        if self.model is not None:
            return
        args = self.args
        self.model = moco.builder.MoCo_ResNet(
            partial(torchvision_models.__dict__[args.arch], zero_init_residual=True),
            args.moco_dim,
            args.moco_mlp_dim,
            args.moco_t,
        )

    def train_dataloader(self):
        # main_moco.py's -b is the batch of all processes together
        batch_size = self.args.batch_size // self.trainer.world_size
        return torch.utils.data.DataLoader(
            build_dataset(self.args),
            batch_size=batch_size,
            shuffle=True,
            num_workers=self.args.workers,
            pin_memory=True,
            drop_last=True,
        )

    def configure_optimizers(self):
        if self.args.optimizer == "lars":
            return LARS(
                self.model.parameters(), self.args.lr, weight_decay=self.args.weight_decay, momentum=self.args.momentum
            )
        return torch.optim.AdamW(self.model.parameters(), self.args.lr, weight_decay=self.args.weight_decay)

    def on_train_batch_start(self, batch, batch_idx):
        # adjust learning rate per iteration, as main_moco.py's train() does
        epoch = self.current_epoch + batch_idx / self.trainer.num_training_batches
        lr = adjust_learning_rate(self.trainer.optimizers[0], epoch, self.args)
        self.log("lr", lr)

    def training_step(self, batch, batch_idx):
        images, _ = batch
        moco_m = self.args.moco_m
        if self.args.moco_m_cos:
            moco_m = adjust_moco_momentum(self.current_epoch + batch_idx / self.trainer.num_training_batches, self.args)
        loss = self.model(images[0], images[1], moco_m)
        self.log("loss", loss, prog_bar=True)
        return loss


def main():
    args = parser.parse_args()
    if args.seed is not None:
        L.seed_everything(args.seed)
    # infer learning rate from the global batch size, as main_moco.py does
    args.lr = args.lr * args.batch_size / 256
    model = MoCoV3(args)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        log_every_n_steps=args.print_freq,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
