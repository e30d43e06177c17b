"""facebookresearch/dino's main_dino.py ported to Lightning, written as a Lightning user would: the same arguments
(main_dino's get_args_parser), data (DataAugmentationDINO over the same ImageFolder), networks (vision_transformer's
archs, DINOHead, utils.MultiCropWrapper) and loss (main_dino.DINOLoss, its center all_reduced); one seed for every
rank (seed_everything); the student and the teacher built together, the teacher starting from the student's weights
and updated as an EMA after every step with the momentum schedule; AdamW over utils.get_params_groups with the
cosine lr schedule (warmup) as a LambdaLR stepped every iteration, the weight decay schedule set on the regularized
group at the start of every batch; Lightning's gradient clipping at --clip_grad; the last layer's gradients cancelled
during the first --freeze_last_layer epochs; the loss, lr and wd logged with sync_dist; Lightning's DDP strategy,
sampler, launcher, a ModelCheckpoint every epoch (last.ckpt, and one kept every --saveckp_freq epochs) and a restart
from last.ckpt. No line records anything: `ddp-parity record` does.

That is the port as first written (e7be676); the rounds (SCORE.md) then built the networks in configure_model (1),
clipped each gradient by utils.clip_gradients instead of gradient_clip_val (2), saved main_dino.py's checkpoints in
on_train_epoch_end instead of a ModelCheckpoint (3) and set the lr by hand every iteration instead of a LambdaLR (4).

    python lightning_port.py --arch vit_micro --patch_size 8 ... (as main_dino.py)
"""

import argparse
import os

import lightning as L
import torch
import utils
import vision_transformer as vits
from main_dino import DataAugmentationDINO, DINOLoss, get_args_parser
from standins import datasets
from vision_transformer import DINOHead


class LitDINO(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args

    def configure_model(self):
        # round 1: built after Lightning's DDP setup re-seeds every rank, so that the augmentations of the first
        # batches are drawn after the networks' initialisation, as in main_dino.py (seed, networks, then the loop)
        if hasattr(self, "student"):
            return
        args = self.args
        args.arch = args.arch.replace("deit", "vit")
        student = vits.__dict__[args.arch](patch_size=args.patch_size, drop_path_rate=args.drop_path_rate)
        teacher = vits.__dict__[args.arch](patch_size=args.patch_size)
        embed_dim = student.embed_dim
        self.student = utils.MultiCropWrapper(
            student,
            DINOHead(
                embed_dim,
                args.out_dim,
                use_bn=args.use_bn_in_head,
                norm_last_layer=args.norm_last_layer,
                hidden_dim=64,
                bottleneck_dim=32,
            ),
        )
        self.teacher = utils.MultiCropWrapper(
            teacher, DINOHead(embed_dim, args.out_dim, args.use_bn_in_head, hidden_dim=64, bottleneck_dim=32)
        )
        # teacher and student start with the same weights; no backpropagation through the teacher
        self.teacher.load_state_dict(self.student.state_dict())
        for p in self.teacher.parameters():
            p.requires_grad = False
        self.dino_loss = DINOLoss(
            args.out_dim,
            args.local_crops_number + 2,  # 2 global crops + the local ones
            args.warmup_teacher_temp,
            args.teacher_temp,
            args.warmup_teacher_temp_epochs,
            args.epochs,
        )

    def schedules(self):
        args = self.args
        niter_per_ep = self.trainer.estimated_stepping_batches // self.trainer.max_epochs
        self.base_lr = args.lr * (args.batch_size_per_gpu * self.trainer.world_size) / 256.0  # linear scaling rule
        self.lr_schedule = utils.cosine_scheduler(
            self.base_lr, args.min_lr, args.epochs, niter_per_ep, warmup_epochs=args.warmup_epochs
        )
        self.wd_schedule = utils.cosine_scheduler(args.weight_decay, args.weight_decay_end, args.epochs, niter_per_ep)
        self.momentum_schedule = utils.cosine_scheduler(args.momentum_teacher, 1, args.epochs, niter_per_ep)

    def iteration(self, batch_idx):
        return self.trainer.num_training_batches * self.current_epoch + batch_idx  # global training iteration

    def on_train_batch_start(self, batch, batch_idx):
        # round 4: the lr set by hand every iteration, as main_dino.py does, instead of a LambdaLR over an optimizer
        # built at the base lr (the tool: the param groups' lr as constructed, 0.001 vs 0.000625); the weight decay
        # schedule on the regularized group only
        it = self.iteration(batch_idx)
        for i, param_group in enumerate(self.optimizers().param_groups):
            param_group["lr"] = self.lr_schedule[it]
            if i == 0:
                param_group["weight_decay"] = self.wd_schedule[it]

    def training_step(self, batch, batch_idx):
        images, _ = batch
        teacher_output = self.teacher(images[:2])  # only the 2 global views pass through the teacher
        student_output = self.student(images)
        loss = self.dino_loss(student_output, teacher_output, self.current_epoch)
        optimizer = self.optimizers()
        self.log("loss", loss, prog_bar=True, sync_dist=True)
        self.log("lr", optimizer.param_groups[0]["lr"], sync_dist=True)
        self.log("wd", optimizer.param_groups[0]["weight_decay"], sync_dist=True)
        return loss

    def on_before_optimizer_step(self, optimizer):
        # round 2: main_dino.py clips each parameter's gradient by its own norm (utils.clip_gradients), not their
        # total norm as Lightning's gradient_clip_val does; then the last layer is kept fixed during the first epoch(s)
        if self.args.clip_grad:
            utils.clip_gradients(self.student, self.args.clip_grad)
        utils.cancel_gradients_last_layer(self.current_epoch, self.student, self.args.freeze_last_layer)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        # EMA update for the teacher
        with torch.no_grad():
            m = self.momentum_schedule[self.iteration(batch_idx)]
            for param_q, param_k in zip(self.student.parameters(), self.teacher.parameters()):
                param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)

    def on_train_epoch_end(self):
        # round 3 (not from the tool's words): main_dino.py's checkpoints, checkpoint.pth after every epoch and
        # checkpoint{epoch:04}.pth where epoch % --saveckp_freq == 0; ModelCheckpoint(every_n_epochs=2) saved after
        # epoch 1 only (last.ckpt with it), so the last checkpoint was a step-4 one
        out = self.args.output_dir
        self.trainer.save_checkpoint(os.path.join(out, "checkpoint.ckpt"))
        if self.args.saveckp_freq and self.current_epoch % self.args.saveckp_freq == 0:
            self.trainer.save_checkpoint(os.path.join(out, f"checkpoint{self.current_epoch:04}.ckpt"))

    def configure_optimizers(self):
        self.schedules()
        return torch.optim.AdamW(utils.get_params_groups(self.student))  # lr and wd set by hand every iteration


def main():
    parser = argparse.ArgumentParser("DINO", parents=[get_args_parser()])
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    L.seed_everything(args.seed)

    transform = DataAugmentationDINO(args.global_crops_scale, args.local_crops_scale, args.local_crops_number)
    dataset = datasets.ImageFolder(args.data_path, transform=transform)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=args.batch_size_per_gpu,
        shuffle=True,
        num_workers=args.num_workers,
        pin_memory=True,
        drop_last=True,
    )
    model = LitDINO(args)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        precision="16-mixed" if args.use_fp16 else "32-true",
        default_root_dir=args.output_dir,
        enable_checkpointing=False,  # round 3: the checkpoints are saved in on_train_epoch_end, as main_dino.py's
    )
    last = os.path.join(args.output_dir, "checkpoint.ckpt")
    trainer.fit(model, loader, ckpt_path=last if os.path.isfile(last) else None)


if __name__ == "__main__":
    main()
