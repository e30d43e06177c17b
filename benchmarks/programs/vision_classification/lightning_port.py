"""pytorch/vision's references/classification/train.py ported to Lightning, written as a Lightning user would: the same
arguments (train.py's parser), data, presets and model; SGD over utils.set_weight_decay's groups with the warmup +
main SequentialLR stepped per epoch (a scheduler dict), label smoothing, `gradient_clip_val` for --clip-grad-norm,
Lightning's EMAWeightAveraging callback for --model-ema (round 4: train.py's EMA by hand), validation logged with
sync_dist, Lightning's DDP strategy, sampler, checkpointing and launcher. No line records anything: `ddp-parity
record` does.

    python lightning_port.py --data-path data --device cpu --epochs 3 -b 8 --workers 0 ... (as train.py)
"""

import os

import lightning as L
import presets
import torch
import utils
from standins import InterpolationMode, torchvision
from torch import nn
from train import get_args_parser


class LitClassifier(L.LightningModule):
    def __init__(self, args, num_classes):
        super().__init__()
        self.args = args
        self.num_classes = num_classes
        self.criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

    def configure_model(self):
        # round 1: built after Lightning re-seeds the ranks in its DDP setup, so that the augmentations draw after
        # the model's initialisation, as in main() (seed, model, then the loader's transforms). Round 2 (not from the
        # tool's words): built once; EMAWeightAveraging's setup (before round 4) called configure_model too, and a
        # second build drew the trained model's weights after the first's
        if hasattr(self, "model"):
            return
        self.model = torchvision.models.get_model(
            self.args.model, weights=self.args.weights, num_classes=self.num_classes
        )

    def on_fit_start(self):
        # round 4 (not from the tool's words): the EMA as train.py keeps it (utils.ExponentialMovingAverage, reset
        # during warmup), not EMAWeightAveraging, which copied the average into the trained model at the end. Kept out
        # of the module's children: DDP would wait for gradients of its parameters
        self.model_ema = None
        if self.args.model_ema:
            args = self.args
            adjust = self.trainer.world_size * args.batch_size * args.model_ema_steps / args.epochs
            alpha = min(1.0, (1.0 - args.model_ema_decay) * adjust)
            object.__setattr__(
                self, "model_ema", utils.ExponentialMovingAverage(self.model, device=self.device, decay=1.0 - alpha)
            )

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.model_ema is not None and batch_idx % self.args.model_ema_steps == 0:
            self.model_ema.update_parameters(self.model)
            if self.current_epoch < self.args.lr_warmup_epochs:
                # Reset ema buffer to keep copying weights during warmup period
                self.model_ema.n_averaged.fill_(0)

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        image, target = batch
        output = self.model(image)
        loss = self.criterion(output, target)
        acc1, acc5 = utils.accuracy(output, target, topk=(1, 5))
        self.log_dict({"loss": loss, "acc1": acc1, "acc5": acc5}, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        image, target = batch
        output = (self.model if dataloader_idx == 0 else self.model_ema)(image)
        loss = self.criterion(output, target)
        acc1, acc5 = utils.accuracy(output, target, topk=(1, 5))
        prefix = "val" if dataloader_idx == 0 else "ema_val"
        self.log_dict(
            {f"{prefix}_loss": loss, f"{prefix}_acc1": acc1, f"{prefix}_acc5": acc5},
            sync_dist=True,
            add_dataloader_idx=False,
        )

    def configure_optimizers(self):
        args = self.args
        parameters = utils.set_weight_decay(self.model, args.weight_decay, norm_weight_decay=args.norm_weight_decay)
        optimizer = torch.optim.SGD(
            parameters,
            lr=args.lr,
            momentum=args.momentum,
            weight_decay=args.weight_decay,
            nesterov="nesterov" in args.opt.lower(),
        )
        warmup = torch.optim.lr_scheduler.LinearLR(
            optimizer, start_factor=args.lr_warmup_decay, total_iters=args.lr_warmup_epochs
        )
        main = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=args.epochs - args.lr_warmup_epochs, eta_min=args.lr_min
        )
        scheduler = torch.optim.lr_scheduler.SequentialLR(
            optimizer, schedulers=[warmup, main], milestones=[args.lr_warmup_epochs]
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"}}


def main():
    args = get_args_parser().parse_args()
    L.seed_everything(args.seed)
    world_size = 2
    interpolation = InterpolationMode(args.interpolation)
    dataset = torchvision.datasets.ImageFolder(
        os.path.join(args.data_path, "train"),
        presets.ClassificationPresetTrain(
            crop_size=args.train_crop_size, interpolation=interpolation, backend=args.backend
        ),
    )
    dataset_test = torchvision.datasets.ImageFolder(
        os.path.join(args.data_path, "val"),
        presets.ClassificationPresetEval(
            crop_size=args.val_crop_size,
            resize_size=args.val_resize_size,
            interpolation=interpolation,
            backend=args.backend,
        ),
    )
    train_loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.workers
    )
    val_loader = torch.utils.data.DataLoader(dataset_test, batch_size=args.batch_size, num_workers=args.workers)

    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=world_size,
        max_epochs=args.epochs,
        gradient_clip_val=args.clip_grad_norm,
        default_root_dir=args.output_dir,
    )
    # round 3 (not from the tool's words): train.py evaluates twice an epoch, the model and then its EMA, each pass
    # over data_loader_test drawing its base seed from the global generator; one pass here put every later epoch's
    # augmentations one draw behind
    val_loaders = [val_loader, val_loader] if args.model_ema else val_loader
    trainer.fit(LitClassifier(args, len(dataset.classes)), train_loader, val_loaders)


if __name__ == "__main__":
    main()
