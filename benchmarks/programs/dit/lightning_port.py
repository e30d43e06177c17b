"""facebookresearch/DiT's train.py ported to Lightning, written as a Lightning user would: the same arguments (its
parser), data (its transforms, center_crop_arr), model (models.DiT_models), diffusion (create_diffusion) and VAE; a
seed per rank as train.py sets it (global_seed * world_size + rank); AdamW at lr 1e-4 without weight decay; the EMA
kept beside the model (requires_grad False), initialised from the model when training starts and updated after every
step by train.py's update_ema; the loss logged with sync_dist; Lightning's DDP strategy, sampler, launcher and a
ModelCheckpoint every --ckpt-every steps. No line records anything: `ddp-parity record` does.

    python lightning_port.py --data-path data --model DiT-T/2 --image-size 32 ... (as train.py)
"""

import argparse
from copy import deepcopy

import lightning as L
import torch
from diffusion import create_diffusion
from lightning.pytorch.callbacks import ModelCheckpoint
from models import DiT_models
from standins import AutoencoderKL, ImageFolder, transforms
from train import center_crop_arr, requires_grad, update_ema


class LitDiT(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args

    def configure_model(self):
        # round 2: built after Lightning's DDP setup re-seeds every rank, so that the flips, latent samples, timesteps
        # and noise of step 1 are drawn after the model's initialisation, as in train.py (seed, model, then the loop)
        if hasattr(self, "model"):
            return
        args = self.args
        latent_size = args.image_size // 8
        self.model = DiT_models[args.model](input_size=latent_size, num_classes=args.num_classes)
        self.ema = deepcopy(self.model)  # an EMA of the model for use after training
        requires_grad(self.ema, False)
        self.diffusion = create_diffusion(timestep_respacing="")  # default: 1000 steps, linear noise schedule
        self.vae = AutoencoderKL.from_pretrained(f"stabilityai/sd-vae-ft-{args.vae}")
        self.vae.requires_grad_(False)  # frozen: only encodes

    def on_train_start(self):
        update_ema(self.ema, self.model, decay=0)  # the EMA starts from the synced weights
        self.ema.eval()

    def training_step(self, batch, batch_idx):
        x, y = batch
        with torch.no_grad():
            # Map input images to latent space + normalize latents:
            x = self.vae.encode(x).latent_dist.sample().mul_(0.18215)
        t = torch.randint(0, self.diffusion.num_timesteps, (x.shape[0],), device=self.device)
        loss_dict = self.diffusion.training_losses(self.model, x, t, dict(y=y))
        loss = loss_dict["loss"].mean()
        self.log("train_loss", loss, prog_bar=True, sync_dist=True)
        return loss

    def optimizer_step(self, *args, **kwargs):
        super().optimizer_step(*args, **kwargs)
        # round 3 (not from the tool's words, which said EQUIVALENT): the EMA updated right after the step, as in
        # train.py; in on_train_batch_end it came after ModelCheckpoint's save, so every checkpoint held the EMA one
        # update behind train.py's (the training and the final EMA were equal)
        update_ema(self.ema, self.model)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0)


def get_args():
    # train.py's parser (it is built under `if __name__ == "__main__"`, so it cannot be imported)
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-path", type=str, required=True)
    parser.add_argument("--results-dir", type=str, default="results")
    parser.add_argument("--model", type=str, choices=list(DiT_models.keys()), default="DiT-XL/2")
    parser.add_argument("--image-size", type=int, choices=[32, 256, 512], default=256)
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=1400)
    parser.add_argument("--global-batch-size", type=int, default=256)
    parser.add_argument("--global-seed", type=int, default=0)
    parser.add_argument("--vae", type=str, choices=["ema", "mse"], default="ema")
    parser.add_argument("--num-workers", type=int, default=4)
    parser.add_argument("--log-every", type=int, default=100)
    parser.add_argument("--ckpt-every", type=int, default=50_000)
    return parser.parse_args()


def main():
    args = get_args()
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        log_every_n_steps=args.log_every,
        default_root_dir=args.results_dir,
        use_distributed_sampler=False,  # round 1: the sampler below
        callbacks=[
            ModelCheckpoint(
                dirpath=f"{args.results_dir}/checkpoints", every_n_train_steps=args.ckpt_every, save_top_k=-1
            )
        ],
    )
    # train.py's seed: one per rank
    L.seed_everything(args.global_seed * trainer.world_size + trainer.global_rank)

    transform = transforms.Compose(
        [
            transforms.Lambda(lambda pil_image: center_crop_arr(pil_image, args.image_size)),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5], inplace=True),
        ]
    )
    dataset = ImageFolder(args.data_path, transform=transform)
    # round 1: train.py's own DistributedSampler, seeded with --global-seed on every rank; Lightning seeded the one it
    # injects from the global seed, which is per rank here (rank 1's shuffled with seed 1)
    sampler = torch.utils.data.DistributedSampler(
        dataset, num_replicas=trainer.world_size, rank=trainer.global_rank, shuffle=True, seed=args.global_seed
    )
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=int(args.global_batch_size // trainer.world_size),
        shuffle=False,
        sampler=sampler,
        num_workers=args.num_workers,
        pin_memory=True,
        drop_last=True,
    )
    trainer.fit(LitDiT(args), loader)


if __name__ == "__main__":
    main()
