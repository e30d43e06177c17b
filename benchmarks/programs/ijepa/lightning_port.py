"""I-JEPA's src/train.py ported to Lightning, written as a Lightning user would: the same context encoder, predictor
and target encoder (src/helper.py's init_model, a deep copy for the target), the same data (make_imagenet1k with its
DistributedSampler and the multi-block MaskCollator), the same AdamW param groups and hand-stepped
WarmupCosineSchedule / CosineWDSchedule (init_opt), stepped at the start of every training step as train_step does,
the same smooth-L1 loss all-reduced over the ranks, and the target encoder's EMA with the same momentum schedule after
every optimizer step; Lightning's DDP strategy and launcher, and its checkpoint each epoch. No line records anything:
`ddp-parity record` does.

    python lightning_port.py --fname configs/tiny.yaml
"""

import argparse
import copy

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
import yaml
from lightning.pytorch.strategies import DDPStrategy
from src.datasets.imagenet1k import make_imagenet1k
from src.helper import init_model, init_opt
from src.masks.multiblock import MaskCollator
from src.masks.utils import apply_masks
from src.transforms import make_transforms
from src.utils.distributed import AllReduce
from src.utils.tensors import repeat_interleave_batch

parser = argparse.ArgumentParser()
parser.add_argument("--fname", type=str, help="name of config file to load", default="configs.yaml")


class IJEPA(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        meta, mask = args["meta"], args["mask"]
        self.encoder, self.predictor = init_model(
            device=torch.device("cpu"),
            patch_size=mask["patch_size"],
            crop_size=args["data"]["crop_size"],
            pred_depth=meta["pred_depth"],
            pred_emb_dim=meta["pred_emb_dim"],
            model_name=meta["model_name"],
        )
        self.target_encoder = copy.deepcopy(self.encoder)
        for p in self.target_encoder.parameters():
            p.requires_grad = False
        self.mask_collator = MaskCollator(
            input_size=args["data"]["crop_size"],
            patch_size=mask["patch_size"],
            pred_mask_scale=mask["pred_mask_scale"],
            enc_mask_scale=mask["enc_mask_scale"],
            aspect_ratio=mask["aspect_ratio"],
            nenc=mask["num_enc_masks"],
            npred=mask["num_pred_masks"],
            allow_overlap=mask["allow_overlap"],
            min_keep=mask["min_keep"],
        )

    def train_dataloader(self):
        data = self.args["data"]
        transform = make_transforms(
            crop_size=data["crop_size"],
            crop_scale=data["crop_scale"],
            gaussian_blur=data["use_gaussian_blur"],
            horizontal_flip=data["use_horizontal_flip"],
            color_distortion=data["use_color_distortion"],
            color_jitter=data["color_jitter_strength"],
        )
        # the authors' loader and its DistributedSampler: Lightning keeps a DistributedSampler it is given and calls
        # its set_epoch every epoch
        _, loader, _ = make_imagenet1k(
            transform=transform,
            batch_size=data["batch_size"],
            collator=self.mask_collator,
            pin_mem=data["pin_mem"],
            training=True,
            num_workers=data["num_workers"],
            world_size=self.trainer.world_size,
            rank=self.trainer.global_rank,
            root_path=data["root_path"],
            image_folder=data["image_folder"],
            copy_data=self.args["meta"]["copy_data"],
            drop_last=True,
        )
        return loader

    def configure_optimizers(self):
        opt = self.args["optimization"]
        num_epochs = opt["epochs"]
        ipe = self.trainer.estimated_stepping_batches // num_epochs  # len(loader): iterations an epoch, a rank
        # the schedulers are plain objects stepped by hand (train_step's scheduler.step(), wd_scheduler.step()), not
        # torch LRSchedulers: they stay on the module and training_step steps them; precision is Lightning's, so
        # init_opt makes no GradScaler
        optimizer, _, self.scheduler, self.wd_scheduler = init_opt(
            encoder=self.encoder,
            predictor=self.predictor,
            wd=float(opt["weight_decay"]),
            final_wd=float(opt["final_weight_decay"]),
            start_lr=opt["start_lr"],
            ref_lr=opt["lr"],
            final_lr=opt["final_lr"],
            iterations_per_epoch=ipe,
            warmup=opt["warmup"],
            num_epochs=num_epochs,
            ipe_scale=opt["ipe_scale"],
            use_bfloat16=False,
        )
        ema, ipe_scale = opt["ema"], opt["ipe_scale"]
        total = ipe * num_epochs * ipe_scale
        self.momentum_scheduler = (ema[0] + i * (ema[1] - ema[0]) / total for i in range(int(total) + 1))
        return optimizer

    def training_step(self, batch, batch_idx):
        udata, masks_enc, masks_pred = batch
        imgs = udata[0]
        new_lr = self.scheduler.step()
        new_wd = self.wd_scheduler.step()

        with torch.no_grad():  # the targets: masked regions of the target encoder's normalised features
            h = self.target_encoder(imgs)
            h = F.layer_norm(h, (h.size(-1),))
            B = len(h)
            h = apply_masks(h, masks_pred)
            h = repeat_interleave_batch(h, B, repeat=len(masks_enc))

        z = self.encoder(imgs, masks_enc)
        z = self.predictor(z, masks_enc, masks_pred)
        loss = F.smooth_l1_loss(z, h)
        loss = AllReduce.apply(loss)
        self.log_dict({"loss": loss, "lr": new_lr, "wd": new_wd}, prog_bar=True)
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        # the momentum update of the target encoder, after the optimizer step
        with torch.no_grad():
            m = next(self.momentum_scheduler)
            for param_q, param_k in zip(self.encoder.parameters(), self.target_encoder.parameters()):
                param_k.data.mul_(m).add_((1.0 - m) * param_q.detach().data)


def main():
    args = parser.parse_args()
    with open(args.fname) as y_file:
        params = yaml.load(y_file, Loader=yaml.FullLoader)
    # round 1: seeded as train.py seeds (np.random.seed, torch.manual_seed with _GLOBAL_SEED, once), not by
    # seed_everything, whose seed Lightning's DDP setup sets again after the model is built: the mask collator and
    # the crops drew from another point of the global generator
    np.random.seed(0)
    torch.manual_seed(0)
    model = IJEPA(params)
    trainer = L.Trainer(
        strategy=DDPStrategy(static_graph=True),  # train.py wraps the encoder and the predictor with static_graph
        accelerator="cpu",
        devices=2,
        max_epochs=params["optimization"]["epochs"],
        # use_bfloat16: train.py's torch.cuda.amp.autocast and GradScaler disable themselves on a CPU (float32)
        precision="32-true",
        benchmark=True,  # torch.backends.cudnn.benchmark = True
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
