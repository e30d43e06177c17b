"""BasicSR's SRModel training (train.py -opt ... with an MSRResNet) ported to Lightning: the same option file, the
authors' data set, network, loss, scheduler and PSNR metric imported from the copied package; the loop, DDP and the
launch are Lightning's (Trainer(strategy="ddp", accelerator="cpu", devices=2))."""

from __future__ import annotations

import argparse
import os
from copy import deepcopy

import lightning as L
import torch
from basicsr.archs import build_network
from basicsr.data import build_dataset
from basicsr.data.data_sampler import EnlargedSampler
from basicsr.losses import build_loss
from basicsr.metrics import calculate_metric
from basicsr.models import lr_scheduler
from basicsr.utils import tensor2img
from basicsr.utils.options import _postprocess_yml_value, yaml_load
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader


def parse(argv=None):
    """train.py's command line (-opt, --force_yml; --launcher is Lightning's business here) and the option file."""
    parser = argparse.ArgumentParser()
    parser.add_argument("-opt", type=str, required=True)
    parser.add_argument("--launcher", default="none")
    parser.add_argument("--auto_resume", action="store_true")
    parser.add_argument("--force_yml", nargs="+", default=None)
    args = parser.parse_args(argv)
    opt = yaml_load(args.opt)
    for entry in args.force_yml or []:
        keys, value = entry.split("=")
        node = opt
        keys = keys.strip().split(":")
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = _postprocess_yml_value(value.strip())
    for phase, dataset in opt["datasets"].items():
        dataset["phase"] = phase.split("_")[0]
        dataset["scale"] = opt["scale"]
    root = opt["path"].get("experiments_root") or "experiments"
    opt["path"]["experiments_root"] = os.path.join(root, opt["name"])
    return opt


class SRModule(L.LightningModule):
    def __init__(self, opt):
        super().__init__()
        self.opt = opt
        self.train_opt = opt["train"]
        self.net_g = build_network(opt["network_g"])
        self.ema_decay = self.train_opt.get("ema_decay", 0)
        if self.ema_decay > 0:
            self.net_g_ema = deepcopy(self.net_g)
            self.net_g_ema.eval()
            for p in self.net_g_ema.parameters():
                p.requires_grad_(False)
        self.cri_pix = build_loss(self.train_opt["pixel_opt"])
        self.warmup_iter = self.train_opt.get("warmup_iter", -1)

    def setup(self, stage):
        # BasicSR seeds each rank with seed + rank (set_random_seed in parse_options): the crops differ by rank
        L.seed_everything(self.opt["manual_seed"] + self.global_rank)

    def training_step(self, batch, batch_idx):
        output = self.net_g(batch["lq"])
        l_pix = self.cri_pix(output, batch["gt"])
        self.log("l_pix", l_pix, prog_bar=True, sync_dist=True)
        return l_pix

    def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):
        # linear warm-up (Lightning's documented recipe), over BasicSR's iterations current_iter < warmup_iter
        # (current_iter counts from 1: the last warm-up step is warmup_iter - 1, then the scheduler's lr)
        if self.trainer.global_step + 1 < self.warmup_iter:
            lr_scale = float(self.trainer.global_step + 1) / self.warmup_iter
            for pg in optimizer.param_groups:
                pg["lr"] = lr_scale * self.train_opt["optim_g"]["lr"]
        optimizer.step(closure=optimizer_closure)
        # the EMA right after the step, as SRModel.optimize_parameters: in on_train_batch_end it ran after
        # ModelCheckpoint's own on_train_batch_end, which saved it one update behind
        if self.ema_decay > 0:
            with torch.no_grad():
                ema = dict(self.net_g_ema.named_parameters())
                for k, v in self.net_g.named_parameters():
                    ema[k].mul_(self.ema_decay).add_(v, alpha=1 - self.ema_decay)

    def validation_step(self, batch, batch_idx):
        net = self.net_g_ema if self.ema_decay > 0 else self.net_g
        output = net(batch["lq"])
        psnr = 0.0
        for name, metric_opt in self.opt["val"]["metrics"].items():
            data = {"img": tensor2img([output.detach().cpu()]), "img2": tensor2img([batch["gt"].detach().cpu()])}
            psnr = calculate_metric(data, metric_opt)
            self.log(f"val_{name}", float(psnr), sync_dist=True)

    def configure_optimizers(self):
        optim_opt = dict(self.train_opt["optim_g"])
        optim_opt.pop("type")
        optimizer = torch.optim.Adam(self.net_g.parameters(), **optim_opt)
        sched_opt = dict(self.train_opt["scheduler"])
        sched_opt.pop("type")
        scheduler = lr_scheduler.CosineAnnealingRestartLR(optimizer, **sched_opt)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class SRData(L.LightningDataModule):
    def __init__(self, opt):
        super().__init__()
        self.opt = opt

    def train_dataloader(self):
        dataset_opt = self.opt["datasets"]["train"]
        train_set = build_dataset(dataset_opt)
        # the program's own sampler (the data set enlarged by dataset_enlarge_ratio); Lightning calls its set_epoch
        sampler = EnlargedSampler(
            train_set, self.trainer.world_size, self.trainer.global_rank, dataset_opt.get("dataset_enlarge_ratio", 1)
        )
        return DataLoader(
            train_set,
            batch_size=dataset_opt["batch_size_per_gpu"],
            shuffle=False,
            sampler=sampler,
            num_workers=dataset_opt["num_worker_per_gpu"],
            drop_last=True,
        )

    def val_dataloader(self):
        val_set = build_dataset(self.opt["datasets"]["val"])
        return DataLoader(val_set, batch_size=1, shuffle=False, num_workers=0)


def main():
    opt = parse()
    L.seed_everything(opt["manual_seed"])
    model = SRModule(opt)
    data = SRData(opt)
    checkpoint = ModelCheckpoint(
        dirpath=os.path.join(opt["path"]["experiments_root"], "models"),
        every_n_train_steps=opt["logger"]["save_checkpoint_freq"],
        save_top_k=-1,
        save_last=True,
    )
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_steps=opt["train"]["total_iter"],
        val_check_interval=opt["val"]["val_freq"],
        check_val_every_n_epoch=None,
        log_every_n_steps=opt["logger"]["print_freq"],
        callbacks=[checkpoint],
        default_root_dir=opt["path"]["experiments_root"],
        enable_progress_bar=False,
        logger=False,
        use_distributed_sampler=False,
    )
    trainer.fit(model, datamodule=data)


if __name__ == "__main__":
    main()
