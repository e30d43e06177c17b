"""A Lightning port of NVlabs/edm's train.py + training/training_loop.py: the same options (train.py's parser), the
same network, loss, data set and sampler (imported from the program), trained by a LightningModule under
`Trainer(strategy="ddp", accelerator="cpu", devices=2)`, launched as `python lightning_port.py ARGS` (Lightning's own
launcher). Snapshots as the loop writes them: network-snapshot-*.pkl (the EMA) and training-state-*.pt."""

from __future__ import annotations

import copy
import json
import os
import pickle

import dnnlib
import lightning as L
import numpy as np
import torch
from standins import drop_forward_hooks
from torch_utils import misc
from train import parse_args


def build_config(opts):
    """train.py's config dict, for the options this port supports."""
    c = dnnlib.EasyDict()
    c.dataset_kwargs = dnnlib.EasyDict(
        class_name="standins.SyntheticImageFolderDataset",
        path=opts.data,
        use_labels=opts.cond,
        xflip=opts.xflip,
        cache=opts.cache,
    )
    c.data_loader_kwargs = dnnlib.EasyDict(pin_memory=True, num_workers=opts.workers, prefetch_factor=2)
    c.network_kwargs = dnnlib.EasyDict()
    c.loss_kwargs = dnnlib.EasyDict()
    c.optimizer_kwargs = dnnlib.EasyDict(class_name="torch.optim.Adam", lr=opts.lr, betas=[0.9, 0.999], eps=1e-8)

    if opts.arch == "ddpmpp":
        c.network_kwargs.update(
            model_type="SongUNet", embedding_type="positional", encoder_type="standard", decoder_type="standard"
        )
        c.network_kwargs.update(
            channel_mult_noise=1, resample_filter=[1, 1], model_channels=128, channel_mult=[2, 2, 2]
        )
    elif opts.arch == "ncsnpp":
        c.network_kwargs.update(
            model_type="SongUNet", embedding_type="fourier", encoder_type="residual", decoder_type="standard"
        )
        c.network_kwargs.update(
            channel_mult_noise=2, resample_filter=[1, 3, 3, 1], model_channels=128, channel_mult=[2, 2, 2]
        )
    else:
        c.network_kwargs.update(model_type="DhariwalUNet", model_channels=192, channel_mult=[1, 2, 3, 4])

    precond = {"vp": "VP", "ve": "VE", "edm": "EDM"}[opts.precond]
    c.network_kwargs.class_name = f"training.networks.{precond}Precond"
    c.loss_kwargs.class_name = f"training.loss.{precond}Loss"

    if opts.cbase is not None:
        c.network_kwargs.model_channels = opts.cbase
    if opts.cres is not None:
        c.network_kwargs.channel_mult = opts.cres
    if opts.augment:
        raise SystemExit("this port does not support --augment; pass --augment=0")
    c.network_kwargs.update(dropout=opts.dropout, use_fp16=opts.fp16)

    c.total_kimg = opts.duration * 1000
    c.ema_halflife_kimg = int(opts.ema * 1000)
    c.ema_rampup_ratio = 0.05
    c.lr_rampup_kimg = opts.lr_rampup
    c.update(batch_size=opts.batch, batch_gpu=opts.batch_gpu)
    c.update(loss_scaling=opts.ls, cudnn_benchmark=opts.bench)
    c.update(kimg_per_tick=opts.tick, snapshot_ticks=opts.snap, state_dump_ticks=opts.dump)
    c.seed = opts.seed if opts.seed is not None else 0
    return c


class EDM(L.LightningModule):
    def __init__(self, c, world_size):
        super().__init__()
        self.c = c
        self.batch_gpu_total = c.batch_size // world_size
        self.batch_gpu = c.batch_gpu if c.batch_gpu is not None else self.batch_gpu_total
        self.batch_gpu = min(self.batch_gpu, self.batch_gpu_total)
        self.num_accumulation_rounds = self.batch_gpu_total // self.batch_gpu

        self.dataset_obj = dnnlib.util.construct_class_by_name(**c.dataset_kwargs)
        self.net = None  # built in setup(), right after the loop's per-rank seeding (round 6)
        self.loss_fn = dnnlib.util.construct_class_by_name(**c.loss_kwargs)
        self.cur_tick = 0
        self.tick_start_nimg = 0

    def setup(self, stage):
        # The loop's seeding, each rank its own seed (the tool, round 6: "Seed identically and build the model right
        # after seeding on both sides"); DDP broadcasts rank 0's weights.
        rank, world = self.trainer.global_rank, self.trainer.world_size
        np.random.seed((self.c.seed * world + rank) % (1 << 31))
        torch.manual_seed(np.random.randint(1 << 31))
        # The loop iterates its DataLoader before building the network: the iterator draws its base seed from the
        # global generator there (round 7: weights still differ with equal seeds; raw's hooks record the loader
        # iterated between the seed and the model). The same draw here.
        torch.empty((), dtype=torch.int64).random_()
        interface_kwargs = dict(
            img_resolution=self.dataset_obj.resolution,
            img_channels=self.dataset_obj.num_channels,
            label_dim=self.dataset_obj.label_dim,
        )
        self.net = dnnlib.util.construct_class_by_name(**self.c.network_kwargs, **interface_kwargs)
        self.net.train().requires_grad_(True)
        self.ema = copy.deepcopy(self.net).eval().requires_grad_(False)
        # The loop's module summary on rank 0, a forward in training mode (its dropout draws from the global
        # generator) before training (round 9: the random stream differs at step 1's start).
        if rank == 0:
            with torch.no_grad():
                res = self.net.img_resolution
                images = torch.zeros([self.batch_gpu, self.net.img_channels, res, res])
                sigma = torch.ones([self.batch_gpu])
                labels = torch.zeros([self.batch_gpu, self.net.label_dim])
                misc.print_module_summary(self.net, [images, sigma, labels], max_nesting=2)

    @property
    def cur_nimg(self):
        return self.global_step * self.c.batch_size

    def train_dataloader(self):
        sampler = misc.InfiniteSampler(
            dataset=self.dataset_obj,
            rank=self.trainer.global_rank,
            num_replicas=self.trainer.world_size,
            seed=self.c.seed,
        )
        return torch.utils.data.DataLoader(
            dataset=self.dataset_obj,
            sampler=sampler,
            batch_size=self.batch_gpu,
            # its own generator: the loop's one draw from the global generator for its iterator is made in setup()
            # (round 7); Lightning's iterator must not draw a second one (round 9)
            generator=torch.Generator().manual_seed(self.c.seed),
            **self.c.data_loader_kwargs,
        )

    def configure_optimizers(self):
        return dnnlib.util.construct_class_by_name(params=self.net.parameters(), **self.c.optimizer_kwargs)

    def on_after_batch_transfer(self, batch, dataloader_idx):
        # The [batch, 0] labels of an unconditional set given as None: ddp-parity's module watch raises on a tensor
        # with no elements among the inputs of the DDP-wrapped module (round 4). Done here, after the DataLoader, so
        # that the batch the loader yields is the loop's (round 8: a collate_fn doing this changed the batch digest).
        images, labels = batch
        return images, (labels if labels.numel() > 0 else None)

    def training_step(self, batch, batch_idx):
        images, labels = batch
        images = images.to(torch.float32) / 127.5 - 1
        loss = self.loss_fn(net=self.net, images=images, labels=labels, augment_pipe=None)
        self.log("loss", loss.mean(), prog_bar=True)
        # Lightning divides what training_step returns by accumulate_grad_batches before backward: the loop's
        # loss.sum() * loss_scaling / batch_gpu_total per micro-batch is this divided by the accumulation rounds
        # (round 10: loss and gradient norm exactly half the loop's at every step, on every rank)
        return loss.sum().mul(self.c.loss_scaling / self.batch_gpu)

    def on_before_optimizer_step(self, optimizer):
        for g in optimizer.param_groups:
            g["lr"] = self.c.optimizer_kwargs["lr"] * min(self.cur_nimg / max(self.c.lr_rampup_kimg * 1000, 1e-8), 1)
        for param in self.net.parameters():
            if param.grad is not None:
                torch.nan_to_num(param.grad, nan=0, posinf=1e5, neginf=-1e5, out=param.grad)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        # Once per optimizer step: Lightning calls this after every micro-batch (round 11, checked by hand: the pair
        # EQUIVALENT, yet the EMA snapshots differ, updated at every micro-batch and first snapshotted before step 1)
        if (batch_idx + 1) % self.num_accumulation_rounds != 0:
            return
        # Update EMA.
        cur_nimg = self.cur_nimg - self.c.batch_size  # the images seen before this step
        ema_halflife_nimg = self.c.ema_halflife_kimg * 1000
        if self.c.ema_rampup_ratio is not None:
            ema_halflife_nimg = min(ema_halflife_nimg, cur_nimg * self.c.ema_rampup_ratio)
        ema_beta = 0.5 ** (self.c.batch_size / max(ema_halflife_nimg, 1e-8))
        with torch.no_grad():
            for p_ema, p_net in zip(self.ema.parameters(), self.net.parameters()):
                p_ema.copy_(p_net.detach().lerp(p_ema, ema_beta))

        # Snapshots once per tick, as the loop's maintenance does.
        done = self.cur_nimg >= self.c.total_kimg * 1000
        if (not done) and (self.cur_tick != 0) and (self.cur_nimg < self.tick_start_nimg + self.c.kimg_per_tick * 1000):
            return
        run_dir = self.trainer.default_root_dir
        if (self.c.snapshot_ticks is not None) and (done or self.cur_tick % self.c.snapshot_ticks == 0):
            # the recording's hooks are unpicklable (round 2), and eval() on the copy gives it one more (round 5)
            ema = drop_forward_hooks(copy.deepcopy(self.ema).eval().requires_grad_(False).cpu())
            data = dict(ema=ema, loss_fn=self.loss_fn)
            data["dataset_kwargs"] = dict(self.c.dataset_kwargs)
            if self.trainer.is_global_zero:
                with open(os.path.join(run_dir, f"network-snapshot-{int(self.cur_nimg // 1000):06d}.pkl"), "wb") as f:
                    pickle.dump(data, f)
        if (
            (self.c.state_dump_ticks is not None)
            and (done or self.cur_tick % self.c.state_dump_ticks == 0)
            and self.cur_tick != 0
            and self.trainer.is_global_zero
        ):
            net = drop_forward_hooks(copy.deepcopy(self.net))  # the recording's hooks are unpicklable (round 3)
            state = dict(net=net, optimizer_state=self.trainer.optimizers[0].state_dict())
            torch.save(state, os.path.join(run_dir, f"training-state-{int(self.cur_nimg // 1000):06d}.pt"))
        self.cur_tick += 1
        self.tick_start_nimg = self.cur_nimg


def main():
    opts = dnnlib.EasyDict(parse_args())
    c = build_config(opts)

    devices = 2
    run_dir = opts.outdir if opts.nosubdir else os.path.join(opts.outdir, f"{opts.data}-lightning")
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "training_options.json"), "w") as f:
        json.dump(c, f, indent=2)

    model = EDM(c, world_size=devices)
    max_steps = int(round(c.total_kimg * 1000 / c.batch_size))
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=devices,
        max_steps=max_steps,
        accumulate_grad_batches=model.num_accumulation_rounds,
        use_distributed_sampler=False,  # the InfiniteSampler splits the data by rank itself
        benchmark=c.cudnn_benchmark,
        enable_checkpointing=False,  # the snapshots are written by the module, as the loop writes them
        logger=False,
        default_root_dir=run_dir,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
