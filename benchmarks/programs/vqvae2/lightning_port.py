"""train_vqvae.py (rosinality/vq-vae-2-pytorch, MIT) as a LightningModule, run by Lightning's own launcher:
`python lightning_port.py ARGS`, the same arguments as train_vqvae.py. The model (VQVAE, its EMA codebooks
all-reduced in forward), the CycleScheduler and the data set are the authors' code, imported; Lightning does the DDP
wrapping, the sampler and the loop."""

from __future__ import annotations

import argparse

import lightning as L
import torch
from scheduler import CycleScheduler
from standins import datasets, transforms, utils
from torch import nn, optim
from torch.utils.data import DataLoader, DistributedSampler
from vqvae import VQVAE


class NoSetEpochSampler(DistributedSampler):
    """train_vqvae.py never calls set_epoch on its DistributedSampler (distributed.data_sampler): every epoch
    replays the first epoch's order. Lightning calls set_epoch each epoch; here it does nothing."""

    def set_epoch(self, epoch):
        pass


class VQVAEModule(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.model = VQVAE(channel=16, n_res_channel=8, embed_dim=8, n_embed=32)
        self.criterion = nn.MSELoss()
        self.latent_loss_weight = 0.25
        self.sample_size = 25
        self.scheduler = None

    def train_dataloader(self):
        transform = transforms.Compose(
            [
                transforms.Resize(self.args.size),
                transforms.CenterCrop(self.args.size),
                transforms.ToTensor(),
                transforms.Normalize([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
            ]
        )
        dataset = datasets.ImageFolder(self.args.path, transform=transform)
        sampler = NoSetEpochSampler(dataset, shuffle=True)
        return DataLoader(dataset, batch_size=8 // self.args.n_gpu, sampler=sampler, num_workers=2)

    def configure_optimizers(self):
        optimizer = optim.Adam(self.model.parameters(), lr=self.args.lr)
        if self.args.sched == "cycle":
            # stepped by hand before each optimizer step, as train_vqvae.py does (Lightning's interval="step" steps
            # a scheduler after optimizer.step(): each step's rate one step late)
            self.scheduler = CycleScheduler(
                optimizer,
                self.args.lr,
                n_iter=self.trainer.estimated_stepping_batches,
                momentum=None,
                warmup_proportion=0.05,
            )
        return optimizer

    def on_before_optimizer_step(self, optimizer):
        if self.scheduler is not None:
            self.scheduler.step()

    def training_step(self, batch, batch_idx):
        img, label = batch
        out, latent_loss = self.model(img)
        recon_loss = self.criterion(out, img)
        latent_loss = latent_loss.mean()
        loss = recon_loss + self.latent_loss_weight * latent_loss
        self.log("mse", recon_loss, prog_bar=True, sync_dist=True)
        self.log("latent", latent_loss, prog_bar=True)
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.global_rank == 0 and batch_idx % 100 == 0:
            img, _ = batch
            self.model.eval()
            sample = img[: self.sample_size]
            with torch.no_grad():
                out, _ = self.model(sample)
            utils.save_image(
                torch.cat([sample, out], 0),
                f"{self.trainer.default_root_dir}/{str(self.current_epoch + 1).zfill(5)}_{str(batch_idx).zfill(5)}.png",
                nrow=self.sample_size,
                normalize=True,
                range=(-1, 1),
            )
            self.model.train()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n_gpu", type=int, default=1)
    parser.add_argument("--dist_url", default="env://")  # Lightning's launcher sets up the process group itself
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--epoch", type=int, default=560)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--sched", type=str)
    parser.add_argument("path", type=str)
    args = parser.parse_args()
    print(args)

    L.seed_everything(0)  # train_vqvae.py seeds torch with 0
    module = VQVAEModule(args)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=args.n_gpu,
        strategy="ddp",
        max_epochs=args.epoch,
        default_root_dir="lightning_out",
        use_distributed_sampler=False,  # the port's own sampler, never set_epoch'd, as train_vqvae.py's
    )
    trainer.fit(module)


if __name__ == "__main__":
    main()
