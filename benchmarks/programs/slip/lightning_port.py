"""SLIP's main.py (facebookresearch/SLIP, MIT) as a LightningModule, run by Lightning's own launcher:
`python lightning_port.py ARGS`, the same arguments as main.py. The model, loss, data set, schedule and zero-shot
accuracy are SLIP's own code, imported; Lightning does the DDP wrapping, the sampler, accumulation and the loop."""

from __future__ import annotations

import argparse
import json
import os

import datasets
import lightning as L
import models
import torch
import utils
from main import accuracy, get_args_parser
from standins import ImageFolder, SimpleTokenizer, transforms

NORMALIZE = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])


class SLIPModule(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.model = None  # built in setup(), after the seed of this rank
        self.criterion = models.get_loss(args.model, args.ssl_temp, args.ssl_scale)
        self.tokenizer = SimpleTokenizer()
        self.lr_schedule = None
        # accumulation by hand, as main.py does it: Lightning's accumulate_grad_batches skips DDP's gradient sync
        # (no_sync) on all but the last micro-batch, which sums the gradients in another order
        self.automatic_optimization = False

    def setup(self, stage):
        # main.py seeds each rank with seed + rank, then builds the model
        L.seed_everything(self.args.seed + self.global_rank)
        if self.model is None:
            self.model = getattr(models, self.args.model)(
                ssl_mlp_dim=self.args.ssl_mlp_dim, ssl_emb_dim=self.args.ssl_emb_dim
            )

    # --- data -------------------------------------------------------------------------------------------------
    def train_dataloader(self):
        train_transform = transforms.Compose(
            [transforms.RandomResizedCrop(16, scale=(0.5, 1.0)), transforms.ToTensor(), NORMALIZE]
        )
        train_dataset = datasets.get_dataset(train_transform, self.tokenizer, self.args)
        # one permutation for every rank, whatever each rank's global seed (Trainer(use_distributed_sampler=False))
        train_sampler = torch.utils.data.distributed.DistributedSampler(train_dataset, seed=0)
        return torch.utils.data.DataLoader(
            train_dataset,
            batch_size=self.args.batch_size,
            sampler=train_sampler,
            num_workers=self.args.workers,
            pin_memory=True,
            drop_last=True,
        )

    def val_dataloader(self):
        val_transform = transforms.Compose(
            [transforms.Resize(16), transforms.CenterCrop(16), transforms.ToTensor(), NORMALIZE]
        )
        val_dataset = ImageFolder(os.path.join(self.args.root, "imagenet", "val"), val_transform)
        val_sampler = torch.utils.data.distributed.DistributedSampler(val_dataset)  # as main.py builds it
        return torch.utils.data.DataLoader(
            val_dataset,
            batch_size=self.args.batch_size,
            sampler=val_sampler,
            num_workers=self.args.workers,
            pin_memory=True,
            drop_last=False,
        )

    # --- optimization -----------------------------------------------------------------------------------------
    def configure_optimizers(self):
        p_wd, p_non_wd = [], []
        for n, p in self.model.named_parameters():
            if not p.requires_grad:
                continue
            if p.ndim < 2 or "bias" in n or "ln" in n or "bn" in n:
                p_non_wd.append(p)
            else:
                p_wd.append(p)
        optim_params = [{"params": p_wd, "weight_decay": self.args.wd}, {"params": p_non_wd, "weight_decay": 0}]
        return torch.optim.AdamW(
            optim_params, lr=self.args.lr, betas=self.args.betas, eps=self.args.eps, weight_decay=self.args.wd
        )

    def on_train_start(self):
        iters_per_epoch = self.trainer.num_training_batches // self.args.update_freq
        self.lr_schedule = utils.cosine_scheduler(
            self.args.lr,
            self.args.lr_end,
            self.args.epochs,
            iters_per_epoch,
            warmup_epochs=self.args.warmup_epochs,
            start_warmup_value=self.args.lr_start,
        )

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        # the lr of this optimizer step, set by hand as main.py does
        for param_group in optimizer.param_groups:
            param_group["lr"] = self.lr_schedule[self.global_step]
        outputs = self.model(*batch)
        loss_dict = self.criterion(outputs)
        loss = loss_dict["loss"]
        loss /= self.args.update_freq
        self.manual_backward(loss)
        if (batch_idx + 1) % self.args.update_freq != 0:
            return
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        # clamp logit scale to [0, 100]
        with torch.no_grad():
            self.model.logit_scale.clamp_(0, 4.6052)
        self.log_dict({k: v.detach().float() for k, v in loss_dict.items()}, prog_bar=True)

    # --- zero-shot validation ---------------------------------------------------------------------------------
    def on_validation_epoch_start(self):
        with open(os.path.join(self.args.root, "templates.json")) as f:
            templates = json.load(f)["imagenet"]
        with open(os.path.join(self.args.root, "labels.json")) as f:
            labels = json.load(f)["imagenet"]
        text_features = []
        for label in labels:
            texts = self.tokenizer([t.format(label) for t in templates])
            class_embeddings = self.model.encode_text(texts)
            class_embeddings = class_embeddings / class_embeddings.norm(dim=-1, keepdim=True)
            class_embeddings = class_embeddings.mean(dim=0)
            class_embeddings = class_embeddings / class_embeddings.norm(dim=-1, keepdim=True)
            text_features.append(class_embeddings)
        self.text_features = torch.stack(text_features, dim=0)

    def validation_step(self, batch, batch_idx):
        images, target = batch
        image_features = self.model.encode_image(images)
        image_features = image_features / image_features.norm(dim=-1, keepdim=True)
        logits_per_image = image_features @ self.text_features.t()
        acc1, acc5 = accuracy(logits_per_image, target, topk=(1, 5))
        self.log_dict({"acc1": acc1.item(), "acc5": acc5.item()}, sync_dist=True, batch_size=images.size(0))


def main():
    parser = argparse.ArgumentParser("SLIP training (Lightning)", parents=[get_args_parser()])
    args = parser.parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    L.seed_everything(args.seed)
    module = SLIPModule(args)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=args.epochs,
        precision="32-true" if args.disable_amp else "16-mixed",
        check_val_every_n_epoch=args.eval_freq,
        log_every_n_steps=args.print_freq,
        default_root_dir=args.output_dir,
        use_distributed_sampler=False,
    )
    trainer.fit(module)


if __name__ == "__main__":
    main()
