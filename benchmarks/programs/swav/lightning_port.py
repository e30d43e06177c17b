"""SwAV (main_swav.py) as a LightningModule: the same arguments, the program's model, data set, Sinkhorn-Knopp and LARC
reused by import, trained by `Trainer(strategy="ddp", accelerator="cpu", devices=2)` under Lightning's own launcher:

    python lightning_port.py ARGS   (the arguments of main_swav.py)
"""

import math
import os

import lightning as L
import main_swav
import numpy as np
import src.resnet50 as resnet_models
import torch
import torch.nn as nn
import torch.nn.functional as F
from main_swav import distributed_sinkhorn, parser
from src.multicropdataset import MultiCropDataset
from standins import LARC, convert_sync_batchnorm


class LARCStep(LARC):
    """apex's LARC takes no closure, and has no `defaults`: Lightning's optimizer step passes a closure (training_step
    and backward), and Lightning takes an optimizer for one only with `defaults`."""

    @property
    def defaults(self):
        return self.optim.defaults

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        super().step()
        return loss


class SwAV(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.model = None
        self.queue = None
        self.use_the_queue = False

    def configure_model(self):
        # built after Lightning's DDP setup re-seeds every rank, as main_swav.py builds it after its one seed
        if self.model is not None:
            return
        args = self.args
        model = resnet_models.__dict__[args.arch](
            normalize=True,
            hidden_mlp=args.hidden_mlp,
            output_dim=args.feat_dim,
            nmb_prototypes=args.nmb_prototypes,
        )
        if args.sync_bn == "pytorch":
            model = convert_sync_batchnorm(model)
        self.model = model

    def setup(self, stage):
        args = self.args
        args.world_size = self.trainer.world_size
        args.rank = self.trainer.global_rank
        # the queue needs to be divisible by the batch size
        args.queue_length -= args.queue_length % (args.batch_size * args.world_size)
        self.queue_path = os.path.join(args.dump_path, "queue" + str(args.rank) + ".pth")
        if os.path.isfile(self.queue_path):
            self.queue = torch.load(self.queue_path)["queue"]

    def train_dataloader(self):
        args = self.args
        train_dataset = MultiCropDataset(
            args.data_path,
            args.size_crops,
            args.nmb_crops,
            args.min_scale_crops,
            args.max_scale_crops,
        )
        # the sampler main_swav.py builds (seed 0), not Lightning's, which it seeds from the global seed
        sampler = torch.utils.data.distributed.DistributedSampler(train_dataset)
        return torch.utils.data.DataLoader(
            train_dataset,
            sampler=sampler,
            batch_size=args.batch_size,
            num_workers=args.workers,
            pin_memory=True,
            drop_last=True,
        )

    def configure_optimizers(self):
        args = self.args
        optimizer = torch.optim.SGD(self.parameters(), lr=args.base_lr, momentum=0.9, weight_decay=args.wd)
        optimizer = LARCStep(optimizer=optimizer, trust_coefficient=0.001, clip=False)
        steps_per_epoch = self.trainer.estimated_stepping_batches // args.epochs
        warmup_lr_schedule = np.linspace(args.start_warmup, args.base_lr, steps_per_epoch * args.warmup_epochs)
        iters = np.arange(steps_per_epoch * (args.epochs - args.warmup_epochs))
        cosine_lr_schedule = np.array(
            [
                args.final_lr
                + 0.5
                * (args.base_lr - args.final_lr)
                * (1 + math.cos(math.pi * t / (steps_per_epoch * (args.epochs - args.warmup_epochs))))
                for t in iters
            ]
        )
        self.lr_schedule = np.concatenate((warmup_lr_schedule, cosine_lr_schedule))
        return optimizer

    def on_train_epoch_start(self):
        args = self.args
        self.use_the_queue = False
        if args.queue_length > 0 and self.current_epoch >= args.epoch_queue_starts and self.queue is None:
            self.queue = torch.zeros(len(args.crops_for_assign), args.queue_length // args.world_size, args.feat_dim)

    def training_step(self, inputs, batch_idx):
        args = self.args
        # update learning rate
        for param_group in self.optimizers().param_groups:
            param_group["lr"] = self.lr_schedule[self.global_step]

        # normalize the prototypes
        with torch.no_grad():
            w = self.model.prototypes.weight.data.clone()
            w = nn.functional.normalize(w, dim=1, p=2)
            self.model.prototypes.weight.copy_(w)

        embedding, output = self.model(inputs)
        embedding = embedding.detach()
        bs = inputs[0].size(0)

        loss = 0
        for i, crop_id in enumerate(args.crops_for_assign):
            with torch.no_grad():
                out = output[bs * crop_id : bs * (crop_id + 1)].detach()
                if self.queue is not None:
                    if self.use_the_queue or not torch.all(self.queue[i, -1, :] == 0):
                        self.use_the_queue = True
                        out = torch.cat((torch.mm(self.queue[i], self.model.prototypes.weight.t()), out))
                    self.queue[i, bs:] = self.queue[i, :-bs].clone()
                    self.queue[i, :bs] = embedding[crop_id * bs : (crop_id + 1) * bs]
                q = distributed_sinkhorn(out)[-bs:]
            subloss = 0
            for v in np.delete(np.arange(np.sum(args.nmb_crops)), crop_id):
                x = output[bs * v : bs * (v + 1)] / args.temperature
                subloss -= torch.mean(torch.sum(q * F.log_softmax(x, dim=1), dim=1))
            loss += subloss / (np.sum(args.nmb_crops) - 1)
        loss /= len(args.crops_for_assign)
        self.log("loss", loss, prog_bar=True)
        return loss

    def on_after_backward(self):
        # cancel gradients for the prototypes
        if self.global_step < self.args.freeze_prototypes_niters:
            for name, p in self.named_parameters():
                if "prototypes" in name:
                    p.grad = None

    def on_train_epoch_end(self):
        if self.queue is not None:
            torch.save({"queue": self.queue}, self.queue_path)


def main():
    args = parser.parse_args()
    main_swav.args = args  # distributed_sinkhorn reads the module's global args
    os.makedirs(args.dump_path, exist_ok=True)
    L.seed_everything(args.seed)

    model = SwAV(args)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        default_root_dir=args.dump_path,
        use_distributed_sampler=False,  # main_swav.py's own DistributedSampler (seed 0), in train_dataloader
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
