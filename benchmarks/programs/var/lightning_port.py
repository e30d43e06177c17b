"""VAR's train.py ported to Lightning (not the authors' code): the same arguments (the authors' `Args`), the model,
data, sampler, optimizer, lr/wd schedule and progressive training from the copied files; Lightning's DDP on 2 CPU
processes, its own launcher."""

import os
import shutil
import sys
from functools import partial

import lightning as L
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from models import build_vae_var  # noqa: E402
from utils.arg_util import Args  # noqa: E402
from utils.data import build_dataset  # noqa: E402
from utils.data_sampler import DistInfiniteBatchSampler, EvalDistributedSampler  # noqa: E402
from utils.lr_control import filter_params, lr_wd_annealing  # noqa: E402
from utils.misc import _change_builtin_print  # noqa: E402

DEVICES = 2


def get_args() -> Args:
    """train.py's init_dist_and_get_args, without its process group (Lightning makes it): the derived values for 2
    processes."""
    args = Args(explicit_bool=True).parse_args(known_only=True)
    args.device = "cpu"
    args.patch_nums = tuple(map(int, args.pn.replace("-", "_").split("_")))
    args.resos = tuple(pn * args.patch_size for pn in args.patch_nums)
    args.data_load_reso = max(args.resos)
    args.batch_size = round(args.bs / args.ac / DEVICES)
    args.bs = args.glb_batch_size = args.batch_size * DEVICES
    args.workers = min(max(0, args.workers), args.batch_size)
    args.tlr = args.ac * args.tblr * args.glb_batch_size / 256
    args.twde = args.twde or args.twd
    if args.wp == 0:
        args.wp = args.ep * 1 / 50
    if args.pgwp == 0:
        args.pgwp = args.ep * 1 / 300
    if args.pg > 0:
        args.sche = f"lin{args.pg:g}"
    return args


class VARModule(L.LightningModule):
    def __init__(self, args: Args, num_classes: int, iters_train: int):
        super().__init__()
        self.args = args
        self.iters_train = iters_train
        self.num_classes = num_classes
        self.train_loss = nn.CrossEntropyLoss(label_smoothing=args.ls, reduction="none")
        self.val_loss = nn.CrossEntropyLoss(label_smoothing=0.0, reduction="mean")
        self.L = sum(pn * pn for pn in args.patch_nums)
        self.last_l = args.patch_nums[-1] ** 2
        self.register_buffer("loss_weight", torch.ones(1, self.L) / self.L, persistent=False)
        self.begin_ends = []
        cur = 0
        for pn in args.patch_nums:
            self.begin_ends.append((cur, cur + pn * pn))
            cur += pn * pn
        self.prog_it, self.last_prog_si, self.first_prog = 0, -1, True
        self.best_val_loss_tail = 999

    def configure_model(self):
        # built after Lightning's DDP setup re-seeds each rank, as train.py builds it after its seed (the draws of
        # the initial weights then shift the crops and drops that follow alike)
        args, num_classes = self.args, self.num_classes
        self.vae, self.var = build_vae_var(
            V=64,
            Cvae=8,
            ch=32,
            share_quant_resi=4,
            device="cpu",
            patch_nums=args.patch_nums,
            num_classes=num_classes,
            depth=args.depth,
            shared_aln=args.saln,
            attn_l2_norm=args.anorm,
            flash_if_available=args.fuse,
            fused_if_available=args.fuse,
            init_adaln=args.aln,
            init_adaln_gamma=args.alng,
            init_head=args.hd,
            init_std=args.ini,
        )
        self.vae.load_state_dict(torch.load("vae_ch32v64z8.pth", map_location="cpu"), strict=True)

    def configure_optimizers(self):
        names, paras, para_groups = filter_params(
            self.var,
            nowd_keys={
                "cls_token", "start_token", "task_token", "cfg_uncond",
                "pos_embed", "pos_1LC", "pos_start", "start_pos", "lvl_embed",
                "gamma", "beta", "ada_gss", "moe_bias", "scale_mul",
            },
        )  # fmt: skip
        opt = partial(torch.optim.AdamW, betas=(0.9, 0.95), fused=self.args.afuse)
        return opt(params=para_groups, lr=self.args.tlr, weight_decay=0)

    def prog_stage(self, g_it: int) -> int:
        args, iters_train = self.args, self.iters_train
        wp_it, max_it = args.wp * iters_train, args.ep * iters_train
        if args.pg:
            if g_it <= wp_it:
                return args.pg0
            if g_it >= max_it * args.pg:
                return len(args.patch_nums) - 1
            delta = len(args.patch_nums) - 1 - args.pg0
            progress = min(max((g_it - wp_it) / (max_it * args.pg - wp_it), 0), 1)
            return args.pg0 + round(progress * delta)
        return -1

    def on_train_batch_start(self, batch, batch_idx):
        args = self.args
        g_it = self.global_step
        lr_wd_annealing(
            args.sche, self.trainer.optimizers[0], args.tlr, args.twd, args.twde, g_it,
            args.wp * self.iters_train, args.ep * self.iters_train, wp0=args.wp0, wpe=args.wpe,
        )  # fmt: skip

    def training_step(self, batch, batch_idx):
        inp_B3HW, label_B = batch
        prog_si = self.prog_stage(self.global_step)
        self.var.prog_si = self.vae.quantize.prog_si = prog_si
        if self.last_prog_si != prog_si:
            if self.last_prog_si != -1:
                self.first_prog = False
            self.last_prog_si = prog_si
            self.prog_it = 0
        self.prog_it += 1
        prog_wp = max(min(self.prog_it / (self.args.pgwp * self.iters_train), 1), 0.01)
        if self.first_prog:
            prog_wp = 1
        if prog_si == len(self.args.patch_nums) - 1:
            prog_si = -1

        B, V = label_B.shape[0], self.vae.vocab_size
        with torch.no_grad():
            gt_idx_Bl = self.vae.img_to_idxBl(inp_B3HW)
            gt_BL = torch.cat(gt_idx_Bl, dim=1)
            x_BLCv_wo_first_l = self.vae.quantize.idxBl_to_var_input(gt_idx_Bl)
        logits_BLV = self.var(label_B, x_BLCv_wo_first_l)
        loss = self.train_loss(logits_BLV.view(-1, V), gt_BL.view(-1)).view(B, -1)
        if prog_si >= 0:
            bg, ed = self.begin_ends[prog_si]
            lw = self.loss_weight[:, :ed].clone()
            lw[:, bg:ed] *= min(max(prog_wp, 0), 1)
        else:
            lw = self.loss_weight
        loss = loss.mul(lw).sum(dim=-1).mean()
        self.var.prog_si = self.vae.quantize.prog_si = -1
        self.log("Lm", self.val_loss(logits_BLV.data.view(-1, V), gt_BL.view(-1)), prog_bar=True)
        return loss

    def train_dataloader(self):
        args, rank, world = self.args, self.global_rank, self.trainer.world_size
        loader = DataLoader(
            dataset=self.dataset_train,
            num_workers=args.workers,
            pin_memory=True,
            generator=args.get_different_generator_for_each_rank(),
            batch_sampler=DistInfiniteBatchSampler(
                dataset_len=len(self.dataset_train),
                glb_batch_size=args.glb_batch_size,
                same_seed_for_all_ranks=args.same_seed_for_all_ranks,
                shuffle=True,
                fill_last=True,
                rank=rank,
                world_size=world,
                start_ep=0,
                start_it=0,
            ),
        )
        return OneIterator(loader)

    def build_val_loader(self):
        args, rank, world = self.args, self.global_rank, self.trainer.world_size
        return DataLoader(
            self.dataset_val,
            num_workers=0,
            pin_memory=True,
            batch_size=round(args.batch_size * 1.5),
            sampler=EvalDistributedSampler(self.dataset_val, num_replicas=world, rank=rank),
            shuffle=False,
            drop_last=False,
        )

    def on_train_epoch_end(self):
        # train.py evaluates (VARTrainer.eval_ep, every rank, the stats all_reduced) every 10th and the last epoch
        ep = self.current_epoch
        if not ((ep + 1) % 10 == 0 or (ep + 1) == self.args.ep):
            return
        if not hasattr(self, "ld_val"):
            self.ld_val = self.build_val_loader()
        stats = self.eval_ep(self.ld_val)
        best_updated = self.best_val_loss_tail > stats[1]
        self.best_val_loss_tail = min(self.best_val_loss_tail, stats[1])
        if self.global_rank == 0:
            print(f" [*] [ep{ep}]  (val {stats[-1]})  vL_mean: {stats[0]:.4f}, vL_tail: {stats[1]:.4f}", flush=True)
        if self.local_rank == 0:  # train.py's ar-ckpt-last.pth (and -best), VARTrainer.state_dict's layout
            local_out_ckpt = os.path.join(self.args.local_out_dir_path, "ar-ckpt-last.pth")
            trainer_state = {
                "config": {
                    "patch_nums": self.args.patch_nums,
                    "resos": self.args.resos,
                    "label_smooth": self.args.ls,
                    "prog_it": self.prog_it,
                    "last_prog_si": self.last_prog_si,
                    "first_prog": self.first_prog,
                },
                "var_wo_ddp": self.var.state_dict(),
                "vae_local": self.vae.state_dict(),
                "var_opt": {"optimizer": self.trainer.optimizers[0].state_dict()},
            }
            ckpt = {"epoch": ep + 1, "iter": 0, "trainer": trainer_state, "args": self.args.state_dict()}
            torch.save(ckpt, local_out_ckpt)
            if best_updated:
                shutil.copy(local_out_ckpt, os.path.join(self.args.local_out_dir_path, "ar-ckpt-best.pth"))
        torch.distributed.barrier()

    @torch.no_grad()
    def eval_ep(self, ld_val):
        tot = 0
        L_mean, L_tail, acc_mean, acc_tail = 0, 0, 0, 0
        training = self.var.training
        self.var.eval()
        for inp_B3HW, label_B in ld_val:
            B, V = label_B.shape[0], self.vae.vocab_size
            gt_idx_Bl = self.vae.img_to_idxBl(inp_B3HW)
            gt_BL = torch.cat(gt_idx_Bl, dim=1)
            x_BLCv_wo_first_l = self.vae.quantize.idxBl_to_var_input(gt_idx_Bl)
            logits_BLV = self.var(label_B, x_BLCv_wo_first_l)
            L_mean += self.val_loss(logits_BLV.data.view(-1, V), gt_BL.view(-1)) * B
            L_tail += (
                self.val_loss(logits_BLV.data[:, -self.last_l :].reshape(-1, V), gt_BL[:, -self.last_l :].reshape(-1))
                * B
            )
            acc_mean += (logits_BLV.data.argmax(dim=-1) == gt_BL).sum() * (100 / gt_BL.shape[1])
            acc_tail += (logits_BLV.data[:, -self.last_l :].argmax(dim=-1) == gt_BL[:, -self.last_l :]).sum() * (
                100 / self.last_l
            )
            tot += B
        self.var.train(training)
        stats = L_mean.new_tensor([L_mean.item(), L_tail.item(), acc_mean.item(), acc_tail.item(), tot])
        torch.distributed.all_reduce(stats)
        tot = round(stats[-1].item())
        stats /= tot
        return (*stats.tolist()[:4], tot)


class OneIterator:
    """train.py iterates its infinite batch sampler through ONE iterator (iter(ld_train), made once) across its
    epochs, taking len(ld_train) batches an epoch; Lightning makes a new iterator of its train loader every epoch,
    which restarts DistInfiniteBatchSampler.__iter__ on the old order. Each epoch here takes the next len(loader)
    batches of one iterator."""

    def __init__(self, loader):
        self.loader, self.it = loader, None

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        if self.it is None:
            self.it = iter(self.loader)
        for _ in range(len(self.loader)):
            yield next(self.it)


def main():
    args = get_args()
    os.makedirs(args.local_out_dir_path, exist_ok=True)  # as init_dist_and_get_args
    _change_builtin_print(int(os.environ.get("LOCAL_RANK", 0)) == 0)  # the authors' print(..., force=, clean=)
    # train.py's seed_everything: seed * world_size + rank on each rank (random, numpy, torch)
    L.seed_everything(args.seed * DEVICES + int(os.environ.get("LOCAL_RANK", 0)))
    num_classes, dataset_train, dataset_val = build_dataset(
        args.data_path, final_reso=args.data_load_reso, hflip=args.hflip, mid_reso=args.mid_reso
    )
    iters_train = (len(dataset_train) + args.glb_batch_size - 1) // args.glb_batch_size
    model = VARModule(args, num_classes, iters_train)
    model.dataset_train, model.dataset_val = dataset_train, dataset_val
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=DEVICES,
        max_epochs=args.ep,
        gradient_clip_val=args.tclip,
        use_distributed_sampler=False,  # DistInfiniteBatchSampler shards by rank itself
        default_root_dir=args.local_out_dir_path,
        enable_checkpointing=False,  # train.py's own checkpoint, saved in on_train_epoch_end
        logger=False,
        enable_progress_bar=False,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
