"""openai/improved-diffusion's scripts/image_train.py (TrainLoop) ported to Lightning, written as a Lightning user
would: the same arguments (image_train's parser), model and diffusion (create_model_and_diffusion, in
configure_model), timestep sampler (create_named_schedule_sampler) and data set (image_datasets.ImageDataset over the
image folder, sharded by rank as load_data's, no DistributedSampler); one seed (seed_everything(0), as image_train
seeds torch and numpy); AdamW with the lr annealed linearly to 0 over --lr_anneal_steps by a LambdaLR stepped every
optimizer step; the micro-batches as Lightning's gradient accumulation (a loader of --microbatch images,
accumulate_grad_batches = batch_size // microbatch); the EMAs (one list of tensors per --ema_rate) made when training
starts and updated by the program's update_ema after each optimizer step, saved in the checkpoint; the loss and mse
logged with sync_dist; Lightning's DDP strategy, launcher and a ModelCheckpoint every --save_interval steps. No line
records anything: `ddp-parity record` does.

    python lightning_port.py --data_dir data --image_size 8 ... (as image_train.py)
"""

import copy

import lightning as L
import torch
from image_train import create_argparser
from improved_diffusion.image_datasets import ImageDataset, _list_image_files_recursively
from improved_diffusion.nn import update_ema
from improved_diffusion.resample import create_named_schedule_sampler
from improved_diffusion.script_util import args_to_dict, create_model_and_diffusion, model_and_diffusion_defaults
from lightning.pytorch.callbacks import ModelCheckpoint


class LitDiffusion(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.ema_rate = [float(x) for x in args.ema_rate.split(",")]

    def configure_model(self):
        # built after Lightning's DDP setup re-seeds the ranks, so that the model's initialisation draws from the
        # seeded generator before the data loader does, as in image_train
        args = self.args
        self.model, self.diffusion = create_model_and_diffusion(
            **args_to_dict(args, model_and_diffusion_defaults().keys())
        )
        self.schedule_sampler = create_named_schedule_sampler(args.schedule_sampler, self.diffusion)

    def on_train_start(self):
        # one EMA per rate, a copy of the (synced) parameters
        self.ema_params = [copy.deepcopy(list(self.model.parameters())) for _ in self.ema_rate]

    def training_step(self, batch, batch_idx):
        x, cond = batch
        t, weights = self.schedule_sampler.sample(x.shape[0], self.device)
        losses = self.diffusion.training_losses(self.model, x, t, model_kwargs=cond)
        loss = (losses["loss"] * weights).mean()
        self.log("loss", loss, sync_dist=True)
        self.log("mse", (losses["mse"] * weights).mean(), sync_dist=True)
        # TrainLoop backpropagates each micro-batch's mean loss as is (the gradients of the micro-batches add up);
        # Lightning divides the loss by accumulate_grad_batches: undo it
        return loss * self.trainer.accumulate_grad_batches

    def optimizer_step(self, *args, **kwargs):
        # the EMAs follow each optimizer step (on_train_batch_end runs after every micro-batch)
        super().optimizer_step(*args, **kwargs)
        for rate, params in zip(self.ema_rate, self.ema_params):
            update_ema(params, self.model.parameters(), rate=rate)

    def on_save_checkpoint(self, checkpoint):
        names = [name for name, _ in self.model.named_parameters()]
        checkpoint["ema"] = {
            rate: {name: p.detach().clone() for name, p in zip(names, params)}
            for rate, params in zip(self.ema_rate, self.ema_params)
        }

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.model.parameters(), lr=self.args.lr, weight_decay=self.args.weight_decay)
        anneal = self.args.lr_anneal_steps
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1 - step / anneal)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def main():
    args = create_argparser().parse_args()
    L.seed_everything(0)  # image_train's seed: torch and numpy, the same on every rank

    microbatch = args.microbatch if args.microbatch > 0 else args.batch_size
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_steps=args.lr_anneal_steps,
        accumulate_grad_batches=args.batch_size // microbatch,
        log_every_n_steps=args.log_interval,
        default_root_dir=args.log_dir,
        use_distributed_sampler=False,  # the data set shards the image list by rank itself, as load_data's does
        callbacks=[
            ModelCheckpoint(
                dirpath=f"{args.log_dir}/checkpoints", every_n_train_steps=args.save_interval, save_top_k=-1
            )
        ],
    )
    files = _list_image_files_recursively(args.data_dir)
    dataset = ImageDataset(args.image_size, files, shard=trainer.global_rank, num_shards=trainer.world_size)
    loader = torch.utils.data.DataLoader(dataset, batch_size=microbatch, shuffle=True, num_workers=1, drop_last=True)

    trainer.fit(LitDiffusion(args), loader)


if __name__ == "__main__":
    main()
