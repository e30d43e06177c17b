"""A Lightning port of KAIR's main_train_psnr.py for the plain model (DnCNN, L1 loss, Adam, MultiStepLR), written from
the program and Lightning's documentation: the same option file, the same network, data set, loss and regularizers
reused by import, run by Lightning's own launcher (`python lightning_port.py --opt OPT --dist True`)."""

import argparse
import os

import lightning as L
import torch
import torch.nn as nn
from data.select_dataset import define_Dataset
from lightning.pytorch.callbacks import ModelCheckpoint
from models.select_network import define_G
from torch.optim import Adam, lr_scheduler
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from utils import utils_option as option
from utils.utils_regularizers import regularizer_clip, regularizer_orth


class PlainModel(L.LightningModule):
    """KAIR's ModelPlain as a LightningModule: netG trained, netE its exponential moving average."""

    def __init__(self, opt):
        super().__init__()
        self.opt = opt
        self.opt_train = opt["train"]
        self.netG = None  # built in configure_model, after Lightning's DDP setup re-seeds
        self.G_lossfn = nn.L1Loss()
        self.G_lossfn_weight = self.opt_train["G_lossfn_weight"]

    def configure_model(self):
        if self.netG is not None:
            return
        self.netG = define_G(self.opt)
        if self.opt_train["E_decay"] > 0:
            # as ModelPlain: a second define_G (its own initial draws), then netG's weights copied in (update_E(0))
            self.netE = define_G(self.opt).eval()
            self.netE.requires_grad_(False)  # updated by hand, never by the optimizer
            self.update_E(0)

    def train_dataloader(self):
        # the program's own sampler (use_distributed_sampler=False): seeded, drop_last, set_epoch(epoch + seed);
        # built here, once the process group exists
        dataset_opt = self.opt["datasets"]["train"]
        train_set = define_Dataset(dataset_opt)
        train_sampler = DistributedSampler(
            train_set, shuffle=dataset_opt["dataloader_shuffle"], drop_last=True, seed=self.opt["train"]["manual_seed"]
        )
        return DataLoader(
            train_set,
            batch_size=dataset_opt["dataloader_batch_size"] // self.opt["num_gpu"],
            shuffle=False,
            sampler=train_sampler,
            num_workers=dataset_opt["dataloader_num_workers"] // self.opt["num_gpu"],
            drop_last=True,
            pin_memory=True,
        )

    def on_train_epoch_start(self):
        # KAIR's loop: train_sampler.set_epoch(epoch + seed), on a sampler already seeded with seed
        self.trainer.train_dataloader.sampler.set_epoch(self.current_epoch + self.opt["train"]["manual_seed"])

    def training_step(self, batch, batch_idx):
        E = self.netG(batch["L"])
        G_loss = self.G_lossfn_weight * self.G_lossfn(E, batch["H"])
        self.log("G_loss", G_loss, prog_bar=True)
        return G_loss

    def configure_optimizers(self):
        optimizer = Adam(
            [p for p in self.netG.parameters() if p.requires_grad],
            lr=self.opt_train["G_optimizer_lr"],
            betas=self.opt_train["G_optimizer_betas"],
            weight_decay=self.opt_train["G_optimizer_wd"],
        )
        # stepped by hand in on_train_batch_start, before the optimizer step, as KAIR's update_learning_rate: not
        # handed to Lightning, which would step it after the optimizer
        self.G_scheduler = lr_scheduler.MultiStepLR(
            optimizer, self.opt_train["G_scheduler_milestones"], self.opt_train["G_scheduler_gamma"]
        )
        return optimizer

    def on_train_batch_start(self, batch, batch_idx):
        # KAIR: current_step += 1; model.update_learning_rate(current_step) -> scheduler.step(current_step)
        self.G_scheduler.step(self.global_step + 1)

    def optimizer_step(self, *args, **kwargs):
        super().optimizer_step(*args, **kwargs)
        # right after optimizer.step(), before any callback's on_train_batch_end (ModelCheckpoint saves there): the
        # regularizers and the EMA as ModelPlain.optimize_parameters runs them. global_step counts this step only
        # once the hook returns, so KAIR's current_step is global_step + 1 here
        current_step = self.global_step + 1
        orthstep = self.opt_train["G_regularizer_orthstep"] or 0
        save_every = self.opt_train["checkpoint_save"]
        if orthstep > 0 and current_step % orthstep == 0 and current_step % save_every != 0:
            self.netG.apply(regularizer_orth)
        clipstep = self.opt_train["G_regularizer_clipstep"] or 0
        if clipstep > 0 and current_step % clipstep == 0 and current_step % save_every != 0:
            self.netG.apply(regularizer_clip)
        if self.opt_train["E_decay"] > 0:
            self.update_E(self.opt_train["E_decay"])

    @torch.no_grad()
    def update_E(self, decay):
        netE_params = dict(self.netE.named_parameters())
        for k, v in self.netG.named_parameters():
            netE_params[k].mul_(decay).add_(v, alpha=1 - decay)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--opt", type=str, default="options/train_dncnn.json", help="Path to option JSON file.")
    parser.add_argument("--launcher", default="pytorch", help="job launcher")
    parser.add_argument("--local_rank", type=int, default=0)
    parser.add_argument("--dist", default=False)
    args = parser.parse_args()

    opt = option.parse(args.opt, is_train=True)
    opt["dist"] = args.dist
    opt = option.dict_to_nonedict(opt)

    seed = opt["train"]["manual_seed"]
    L.seed_everything(seed)

    model = PlainModel(opt)
    clipgrad = opt["train"]["G_optimizer_clipgrad"] or None
    checkpoint = ModelCheckpoint(
        dirpath=os.path.join("lightning", opt["path"]["models"]),  # beside the raw run's folder, not in it
        every_n_train_steps=opt["train"]["checkpoint_save"],
        save_top_k=-1,
    )
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_steps=opt["train"]["max_iter"],
        gradient_clip_val=clipgrad,
        gradient_clip_algorithm="norm",
        callbacks=[checkpoint],
        log_every_n_steps=opt["train"]["checkpoint_print"],
        default_root_dir="lightning",
        use_distributed_sampler=False,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
