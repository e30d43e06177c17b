"""HRNet-Semantic-Segmentation's tools/train.py ported to Lightning, the way a user would: the authors' model, data set,
criterion and config (lib/) imported as they are; a LightningModule whose training_step calls the network and then
the criterion (no FullModel: the loss is computed in the step, outside the module DDP wraps); the same SGD over the
backbone / non-backbone param groups; the poly learning rate as a LambdaLR stepped every optimizer step over
trainer.estimated_stepping_batches; validation's confusion matrix all-reduced at the epoch's end; Lightning's own
DDP launcher (Trainer(strategy="ddp", accelerator="cpu", devices=2)), its DistributedSampler and checkpointing.

Run: python lightning_port.py --cfg experiments/seg_hrnet_tiny_32x32_ohem_sgd.yaml [KEY VALUE ...]"""

import argparse
import os
import sys

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
sys.path.insert(0, HERE)

import datasets  # noqa: E402, F401 (used by eval, as in tools/train.py)
import models  # noqa: E402
from config import config, update_config  # noqa: E402
from core.criterion import CrossEntropy, OhemCrossEntropy  # noqa: E402
from utils.utils import get_confusion_matrix  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description="Train segmentation network (Lightning)")
    parser.add_argument("--cfg", required=True, type=str)
    parser.add_argument("--seed", type=int, default=304)
    parser.add_argument("opts", default=None, nargs=argparse.REMAINDER)
    args = parser.parse_args()
    update_config(config, args)
    return args


class HRNetSegmentation(L.LightningModule):
    def __init__(self, cfg, train_dataset, test_dataset):
        super().__init__()
        self.cfg = cfg
        self.train_dataset, self.test_dataset = train_dataset, test_dataset
        class_weights = train_dataset.class_weights
        self.model = models.seg_hrnet.get_seg_model(cfg)
        if cfg.LOSS.USE_OHEM:
            self.criterion = OhemCrossEntropy(
                ignore_label=cfg.TRAIN.IGNORE_LABEL,
                thres=cfg.LOSS.OHEMTHRES,
                min_kept=cfg.LOSS.OHEMKEEP,
                weight=class_weights,
            )
        else:
            self.criterion = CrossEntropy(ignore_label=cfg.TRAIN.IGNORE_LABEL, weight=class_weights)
        self.confusion = None

    def forward(self, images):
        return self.model(images)

    def training_step(self, batch, batch_idx):
        images, labels, _, _ = batch
        pred = self.model(images)
        loss = self.criterion(pred, labels.long())
        self.log("train_loss", loss, prog_bar=True, sync_dist=True)
        return loss

    # round 1: Lightning's injected DistributedSampler is seeded from PL_GLOBAL_SEED (304), train.py's get_sampler
    # builds DistributedSampler(dataset) (seed 0, shuffled, for training and validation): the same samplers here
    # (built in the hooks, once the process group is up), and Lightning told not to replace them
    # (use_distributed_sampler=False; it still calls set_epoch on them every epoch)
    def train_dataloader(self):
        return DataLoader(
            self.train_dataset,
            batch_size=self.cfg.TRAIN.BATCH_SIZE_PER_GPU,
            sampler=DistributedSampler(self.train_dataset),
            num_workers=self.cfg.WORKERS,
            drop_last=True,
        )

    def val_dataloader(self):
        return DataLoader(
            self.test_dataset,
            batch_size=self.cfg.TRAIN.BATCH_SIZE_PER_GPU,
            sampler=DistributedSampler(self.test_dataset),
            num_workers=self.cfg.WORKERS,
        )

    def on_validation_epoch_start(self):
        n = self.cfg.DATASET.NUM_CLASSES
        self.confusion = np.zeros((n, n, self.cfg.MODEL.NUM_OUTPUTS))

    def validation_step(self, batch, batch_idx):
        image, label, _, _ = batch
        size = label.size()
        label = label.long()
        pred = self.model(image)
        loss = self.criterion(pred, label)
        if not isinstance(pred, (list, tuple)):
            pred = [pred]
        for i, x in enumerate(pred):
            x = torch.nn.functional.interpolate(
                input=x, size=size[-2:], mode="bilinear", align_corners=self.cfg.MODEL.ALIGN_CORNERS
            )
            self.confusion[..., i] += get_confusion_matrix(
                label, x, size, self.cfg.DATASET.NUM_CLASSES, self.cfg.TRAIN.IGNORE_LABEL
            )
        self.log("valid_loss", loss, sync_dist=True)

    def on_validation_epoch_end(self):
        confusion = torch.from_numpy(self.confusion)
        if self.trainer.world_size > 1:
            torch.distributed.all_reduce(confusion)
        confusion = confusion.numpy()
        pos = confusion[..., -1].sum(1)
        res = confusion[..., -1].sum(0)
        tp = np.diag(confusion[..., -1])
        iou = tp / np.maximum(1.0, pos + res - tp)
        self.log("valid_mIoU", float(iou.mean()), rank_zero_only=True)

    def configure_optimizers(self):
        cfg = self.cfg
        backbone, non_backbone = [], []
        for name, param in self.named_parameters():
            if any(part in name for part in cfg.TRAIN.NONBACKBONE_KEYWORDS):
                non_backbone.append(param)
            else:
                backbone.append(param)
        groups = [{"params": backbone, "lr": cfg.TRAIN.LR}]
        if cfg.TRAIN.NONBACKBONE_KEYWORDS:
            groups.append({"params": non_backbone, "lr": cfg.TRAIN.LR * cfg.TRAIN.NONBACKBONE_MULT})
        optimizer = torch.optim.SGD(
            groups, lr=cfg.TRAIN.LR, momentum=cfg.TRAIN.MOMENTUM, weight_decay=cfg.TRAIN.WD, nesterov=cfg.TRAIN.NESTEROV
        )
        max_iters = self.trainer.estimated_stepping_batches
        # round 2: train.py's adjust_learning_rate runs AFTER optimizer.step() with the index of the step just taken
        # (i_iter + cur_iters), so step k (0-based) runs at poly(k - 1) and steps 0 and 1 both at base_lr; a LambdaLR
        # stepped after every optimizer step is at poly(k): shifted by one here
        poly = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: (1 - max(it - 1, 0) / max_iters) ** 0.9)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": poly, "interval": "step"}}


def build_dataset(cfg, list_path, train):
    size = cfg.TRAIN.IMAGE_SIZE if train else cfg.TEST.IMAGE_SIZE
    return eval("datasets." + cfg.DATASET.DATASET)(
        root=cfg.DATASET.ROOT,
        list_path=list_path,
        num_samples=None if train else cfg.TEST.NUM_SAMPLES,
        num_classes=cfg.DATASET.NUM_CLASSES,
        multi_scale=cfg.TRAIN.MULTI_SCALE if train else False,
        flip=cfg.TRAIN.FLIP if train else False,
        ignore_label=cfg.TRAIN.IGNORE_LABEL,
        base_size=cfg.TRAIN.BASE_SIZE if train else cfg.TEST.BASE_SIZE,
        crop_size=(size[1], size[0]),
        downsample_rate=cfg.TRAIN.DOWNSAMPLERATE if train else 1,
        scale_factor=cfg.TRAIN.SCALE_FACTOR,
    )


def main():
    args = parse_args()
    L.seed_everything(args.seed)

    train_dataset = build_dataset(config, config.DATASET.TRAIN_SET, train=True)
    test_dataset = build_dataset(config, config.DATASET.TEST_SET, train=False)
    module = HRNetSegmentation(config, train_dataset, test_dataset)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=len(config.GPUS),
        use_distributed_sampler=False,
        max_epochs=config.TRAIN.END_EPOCH,
        default_root_dir=config.OUTPUT_DIR,
        log_every_n_steps=config.PRINT_FREQ,
    )
    trainer.fit(module)
    if trainer.is_global_zero:
        torch.save(module.model.state_dict(), os.path.join(config.OUTPUT_DIR, "final_state.pth"))


if __name__ == "__main__":
    main()
