"""open_clip's training (mlfoundations/open_clip v2.20.0 `training/main.py`, MIT) as a LightningModule, run by
Lightning's own launcher: `python lightning_port.py ARGS`, the same arguments as main.py. The model, the transforms,
the tokenizer, the CSV data set, the ClipLoss and the cosine schedule are open_clip's own code, imported; Lightning
does the DDP wrapping, the sampler, the accumulation, the loop and the checkpoints."""

from __future__ import annotations

import math
import os
import sys

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from open_clip import create_loss, create_model_and_transforms, get_tokenizer
from torch import optim
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from training.data import CsvDataset
from training.params import parse_args
from training.scheduler import cosine_lr


class OpenCLIPModule(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.model, self.preprocess_train, self.preprocess_val = create_model_and_transforms(
            args.model,
            args.pretrained,
            precision=args.precision,
            device="cpu",
            force_image_size=args.force_image_size,
            aug_cfg=args.aug_cfg,
            output_dict=True,
        )
        self.tokenizer = get_tokenizer(args.model)
        self.loss = None
        self.scheduler = None
        self.automatic_optimization = False
        self.accum_images, self.accum_texts, self.accum_features = [], [], {}

    def setup(self, stage):
        # main.py seeds every rank with seed + 0 for the model, then with seed + rank for the data
        L.seed_everything(self.args.seed + self.global_rank)
        # ClipLoss gathers the features of every rank: it needs this rank and the world size
        self.args.rank = self.global_rank
        self.args.world_size = self.trainer.world_size
        self.loss = create_loss(self.args)

    # --- data ---------------------------------------------------------------------------------------------------
    def _dataset(self, path, transform):
        args = self.args
        return CsvDataset(
            path,
            transform,
            img_key=args.csv_img_key,
            caption_key=args.csv_caption_key,
            sep=args.csv_separator,
            tokenizer=self.tokenizer,
        )

    def train_dataloader(self):
        dataset = self._dataset(self.args.train_data, self.preprocess_train)
        # one permutation for every rank, as main.py's DistributedSampler(dataset) (seed 0), whatever each rank's
        # global seed (Trainer(use_distributed_sampler=False); Lightning still calls its set_epoch)
        sampler = DistributedSampler(dataset, seed=0)
        return DataLoader(
            dataset, batch_size=self.args.batch_size, sampler=sampler, num_workers=self.args.workers, drop_last=True
        )

    def val_dataloader(self):
        dataset = self._dataset(self.args.val_data, self.preprocess_val)
        return DataLoader(dataset, batch_size=self.args.batch_size, shuffle=False, num_workers=self.args.workers)

    # --- optimization -------------------------------------------------------------------------------------------
    def configure_optimizers(self):
        args = self.args

        def exclude(n, p):
            return p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n

        named_parameters = list(self.model.named_parameters())
        gain_or_bias_params = [p for n, p in named_parameters if exclude(n, p) and p.requires_grad]
        rest_params = [p for n, p in named_parameters if not exclude(n, p) and p.requires_grad]
        optimizer = optim.AdamW(
            [{"params": gain_or_bias_params, "weight_decay": 0.0}, {"params": rest_params, "weight_decay": args.wd}],
            lr=args.lr,
            betas=(args.beta1, args.beta2),
            eps=args.eps,
        )
        # open_clip's cosine_lr assigns the lr by hand at every step: called in on_train_batch_start; its length in
        # optimizer steps, as main.py's (num_batches // accum_freq) * epochs (under manual optimization Lightning's
        # estimated_stepping_batches counts every batch)
        total_steps = self.trainer.estimated_stepping_batches // args.accum_freq
        self.scheduler = cosine_lr(optimizer, args.lr, args.warmup, total_steps)
        return optimizer

    def on_train_batch_start(self, batch, batch_idx):
        self.scheduler(self.global_step)

    def training_step(self, batch, batch_idx):
        # open_clip's --accum-freq, by hand: the features of every micro-batch first computed without grad and
        # cached, then each micro-batch re-run with grad against the cached others, one optimizer step
        # (Lightning's accumulate_grad_batches computes each micro-batch's loss on its own features alone)
        optimizer = self.optimizers()
        images, texts = batch
        with torch.no_grad():
            model_out = self.model(images, texts)
            model_out.pop("logit_scale")
            for key, val in model_out.items():
                self.accum_features.setdefault(key, []).append(val)
            self.accum_images.append(images)
            self.accum_texts.append(texts)
        if ((batch_idx + 1) % self.args.accum_freq) > 0:
            return None
        optimizer.zero_grad()
        for j in range(self.args.accum_freq):
            model_out = self.model(self.accum_images[j], self.accum_texts[j])
            logit_scale = model_out.pop("logit_scale")
            inputs = {}
            for key, accumulated in self.accum_features.items():
                inputs[key] = torch.cat(accumulated[:j] + [model_out[key]] + accumulated[j + 1 :])
            losses = self.loss(**inputs, logit_scale=logit_scale, output_dict=True)
            total_loss = sum(losses.values())
            self.manual_backward(total_loss)
        optimizer.step()
        self.accum_images, self.accum_texts, self.accum_features = [], [], {}
        self.log("loss", total_loss, prog_bar=True)
        self.log("logit_scale", logit_scale)
        return total_loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        # clamp to 4.6052 = ln(100), as in the original paper
        with torch.no_grad():
            self.model.logit_scale.clamp_(0, math.log(100))

    # --- evaluation ---------------------------------------------------------------------------------------------
    def validation_step(self, batch, batch_idx):
        images, texts = batch
        model_out = self.model(images, texts)
        logits_per_image = model_out["logit_scale"] * model_out["image_features"] @ model_out["text_features"].t()
        labels = torch.arange(images.shape[0])
        val_loss = (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_image.t(), labels)) / 2
        self.log("clip_val_loss", val_loss, sync_dist=True)


def main(argv):
    args = parse_args(argv)
    L.seed_everything(args.seed)
    if isinstance(args.force_image_size, (tuple, list)) and len(args.force_image_size) == 1:
        args.force_image_size = args.force_image_size[0]
    args.distributed = True
    args.horovod = False
    args.distill = False
    out = os.path.join(args.logs, args.name)
    module = OpenCLIPModule(args)
    checkpoint = ModelCheckpoint(
        dirpath=os.path.join(out, "checkpoints"),
        filename="epoch_{epoch}",
        save_top_k=-1,
        every_n_epochs=args.save_frequency,
    )
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        callbacks=[checkpoint],
        default_root_dir=out,
        logger=False,
        enable_progress_bar=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
    )
    trainer.fit(module)


if __name__ == "__main__":
    main(sys.argv[1:])
