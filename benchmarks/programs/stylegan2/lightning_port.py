"""stylegan2-pytorch's train.py as a LightningModule: the generator, the discriminator and the EMA generator in one
module, manual optimization (two Adam optimizers stepped alternately, lazy R1 and path-length regularization as extra
steps), the same arguments; run as `python lightning_port.py ARGS` (Lightning's own launcher, 2 CPU processes, DDP).

The model, losses and data set are train.py's and model.py's, imported."""

from __future__ import annotations

import argparse
import os

import lightning as L
import torch
from dataset import MultiResolutionDataset
from model import Discriminator, Generator
from standins import transforms, utils
from torch import optim
from torch.utils import data
from train import (
    accumulate,
    d_logistic_loss,
    d_r1_loss,
    g_nonsaturating_loss,
    g_path_regularize,
    mixing_noise,
    requires_grad,
)


class ReplayingDistributedSampler(data.distributed.DistributedSampler):
    def set_epoch(self, epoch):
        pass


class StyleGAN2(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.automatic_optimization = False
        self.mean_path_length = 0
        self.accum = 0.5 ** (32 / (10 * 1000))
        self.iteration = args.start_iter

    def configure_model(self):
        # built here, after Lightning's DDP setup re-seeds every rank, as raw builds them after its seed
        if hasattr(self, "generator"):
            return
        args = self.args
        self.generator = Generator(args.size, args.latent, args.n_mlp, channel_multiplier=args.channel_multiplier)
        self.discriminator = Discriminator(args.size, channel_multiplier=args.channel_multiplier)
        self.g_ema = Generator(args.size, args.latent, args.n_mlp, channel_multiplier=args.channel_multiplier)
        self.g_ema.eval()
        accumulate(self.g_ema, self.generator, 0)

        self.sample_z = torch.randn(args.n_sample, args.latent)

    def configure_optimizers(self):
        args = self.args
        g_reg_ratio = args.g_reg_every / (args.g_reg_every + 1)
        d_reg_ratio = args.d_reg_every / (args.d_reg_every + 1)
        g_optim = optim.Adam(
            self.generator.parameters(), lr=args.lr * g_reg_ratio, betas=(0**g_reg_ratio, 0.99**g_reg_ratio)
        )
        d_optim = optim.Adam(
            self.discriminator.parameters(), lr=args.lr * d_reg_ratio, betas=(0**d_reg_ratio, 0.99**d_reg_ratio)
        )
        return [g_optim, d_optim]

    def train_dataloader(self):
        transform = transforms.Compose(
            [
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5), inplace=True),
            ]
        )
        dataset = MultiResolutionDataset(self.args.path, transform, self.args.size)
        # raw's sample_data loops over one DistributedSampler and never calls set_epoch: every pass replays the
        # first epoch's order. Lightning calls set_epoch each epoch; this sampler keeps epoch 0 as raw's does.
        sampler = ReplayingDistributedSampler(dataset, shuffle=True)
        return data.DataLoader(dataset, batch_size=self.args.batch, sampler=sampler, drop_last=True)

    def training_step(self, real_img, batch_idx):
        args = self.args
        g_optim, d_optim = self.optimizers()
        i = self.iteration

        # discriminator
        requires_grad(self.generator, False)
        requires_grad(self.discriminator, True)

        noise = mixing_noise(args.batch, args.latent, args.mixing, self.device)
        fake_img, _ = self.generator(noise)
        fake_pred = self.discriminator(fake_img)
        real_pred = self.discriminator(real_img)
        d_loss = d_logistic_loss(real_pred, fake_pred)

        d_optim.zero_grad()
        self.manual_backward(d_loss)
        d_optim.step()

        self.log_dict(
            {"d": d_loss, "real_score": real_pred.mean(), "fake_score": fake_pred.mean()},
            prog_bar=True,
            sync_dist=True,
        )

        if i % args.d_reg_every == 0:
            real_img.requires_grad = True
            real_pred = self.discriminator(real_img)
            r1_loss = d_r1_loss(real_pred, real_img)

            d_optim.zero_grad()
            self.manual_backward(args.r1 / 2 * r1_loss * args.d_reg_every + 0 * real_pred[0])
            d_optim.step()
            self.log("r1", r1_loss, sync_dist=True)

        # generator
        requires_grad(self.generator, True)
        requires_grad(self.discriminator, False)

        noise = mixing_noise(args.batch, args.latent, args.mixing, self.device)
        fake_img, _ = self.generator(noise)
        fake_pred = self.discriminator(fake_img)
        g_loss = g_nonsaturating_loss(fake_pred)

        g_optim.zero_grad()
        self.manual_backward(g_loss)
        g_optim.step()
        self.log("g", g_loss, prog_bar=True, sync_dist=True)

        if i % args.g_reg_every == 0:
            path_batch_size = max(1, args.batch // args.path_batch_shrink)
            noise = mixing_noise(path_batch_size, args.latent, args.mixing, self.device)
            fake_img, latents = self.generator(noise, return_latents=True)

            path_loss, self.mean_path_length, path_lengths = g_path_regularize(fake_img, latents, self.mean_path_length)

            g_optim.zero_grad()
            weighted_path_loss = args.path_regularize * args.g_reg_every * path_loss
            if args.path_batch_shrink:
                weighted_path_loss += 0 * fake_img[0, 0, 0, 0]
            self.manual_backward(weighted_path_loss)
            g_optim.step()
            self.log_dict({"path": path_loss, "path_length": path_lengths.mean()}, sync_dist=True)

        accumulate(self.g_ema, self.generator, self.accum)

        if self.global_rank == 0:
            if i % 100 == 0:
                with torch.no_grad():
                    self.g_ema.eval()
                    sample, _ = self.g_ema([self.sample_z.to(self.device)])
                    utils.save_image(
                        sample,
                        f"{args.work_dir}/sample/{str(i).zfill(6)}.png",
                        nrow=int(args.n_sample**0.5),
                        normalize=True,
                        range=(-1, 1),
                    )

            if i % 10000 == 0:
                torch.save(
                    {
                        "g": self.generator.state_dict(),
                        "d": self.discriminator.state_dict(),
                        "g_ema": self.g_ema.state_dict(),
                        "g_optim": g_optim.optimizer.state_dict(),
                        "d_optim": d_optim.optimizer.state_dict(),
                        "args": args,
                        "ada_aug_p": 0.0,
                    },
                    f"{args.work_dir}/checkpoint/{str(i).zfill(6)}.pt",
                )

        self.iteration += 1
        if self.iteration >= args.iter:
            self.trainer.should_stop = True


def main():
    parser = argparse.ArgumentParser(description="StyleGAN2 trainer (Lightning)")
    parser.add_argument("path", type=str, help="path to the lmdb dataset")
    parser.add_argument("--iter", type=int, default=800000, help="total training iterations")
    parser.add_argument("--batch", type=int, default=16, help="batch sizes for each gpus")
    parser.add_argument("--n_sample", type=int, default=64)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--r1", type=float, default=10)
    parser.add_argument("--path_regularize", type=float, default=2)
    parser.add_argument("--path_batch_shrink", type=int, default=2)
    parser.add_argument("--d_reg_every", type=int, default=16)
    parser.add_argument("--g_reg_every", type=int, default=4)
    parser.add_argument("--mixing", type=float, default=0.9)
    parser.add_argument("--lr", type=float, default=0.002)
    parser.add_argument("--channel_multiplier", type=int, default=2)
    parser.add_argument("--work_dir", type=str, default=".")
    args = parser.parse_args()

    args.latent = 16
    args.n_mlp = 2
    args.start_iter = 0

    L.seed_everything(0)
    os.makedirs(f"{args.work_dir}/sample", exist_ok=True)
    os.makedirs(f"{args.work_dir}/checkpoint", exist_ok=True)

    model = StyleGAN2(args)
    trainer = L.Trainer(
        strategy="ddp_find_unused_parameters_true",  # what the error said: G, D and g_ema in one wrapper
        accelerator="cpu",
        devices=2,
        max_epochs=-1,
        logger=False,
        enable_checkpointing=False,
        use_distributed_sampler=False,  # the sampler of train_dataloader, as raw builds it
        default_root_dir=args.work_dir,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
