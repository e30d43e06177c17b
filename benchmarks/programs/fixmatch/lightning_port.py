"""FixMatch-pytorch's train.py (kekmodel/FixMatch-pytorch, MIT) as a LightningModule, run by Lightning's own launcher:
`python lightning_port.py ARGS`, the same arguments as train.py. The data sets, the WideResNet, the EMA, the schedule
and interleave/de_interleave are the authors' own code, imported; Lightning does the DDP wrapping, the samplers,
the loop over both loaders and the checkpoints."""

from __future__ import annotations

import argparse
import math

import lightning as L
import torch
import torch.nn.functional as F
import torch.optim as optim
from dataset.cifar import DATASET_GETTERS
from models.ema import ModelEMA
from models.wideresnet import build_wideresnet
from torch.utils.data import DataLoader, SequentialSampler
from torch.utils.data.distributed import DistributedSampler
from train import de_interleave, get_cosine_schedule_with_warmup, interleave, test


def get_args():
    parser = argparse.ArgumentParser(description="PyTorch FixMatch Training (Lightning)")
    parser.add_argument("--num-workers", type=int, default=4)
    parser.add_argument("--dataset", default="cifar10", type=str, choices=["cifar10", "cifar100"])
    parser.add_argument("--num-labeled", type=int, default=4000)
    parser.add_argument("--expand-labels", action="store_true")
    parser.add_argument("--total-steps", default=2**20, type=int)
    parser.add_argument("--eval-step", default=1024, type=int)
    parser.add_argument("--batch-size", default=64, type=int)
    parser.add_argument("--lr", "--learning-rate", default=0.03, type=float)
    parser.add_argument("--warmup", default=0, type=float)
    parser.add_argument("--wdecay", default=5e-4, type=float)
    parser.add_argument("--nesterov", action="store_true", default=True)
    parser.add_argument("--use-ema", action="store_true", default=True)
    parser.add_argument("--ema-decay", default=0.999, type=float)
    parser.add_argument("--mu", default=7, type=int)
    parser.add_argument("--lambda-u", default=1, type=float)
    parser.add_argument("--T", default=1, type=float)
    parser.add_argument("--threshold", default=0.95, type=float)
    parser.add_argument("--out", default="result")
    parser.add_argument("--seed", default=None, type=int)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    args.num_classes = 10 if args.dataset == "cifar10" else 100
    args.model_depth, args.model_width = 10, 1  # the tiny WideResNet of train.py's cifar10 branch here
    args.device = torch.device("cpu")
    return args


class FixMatch(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.model = None  # built in configure_model, after Lightning's DDP setup re-seeds (as train.py builds it
        self.ema_model = None  # after its set_seed)

    def configure_model(self):
        if self.model is not None:
            return
        args = self.args
        self.model = build_wideresnet(
            depth=args.model_depth, widen_factor=args.model_width, dropout=0, num_classes=args.num_classes
        )
        self.ema_model = ModelEMA(args, self.model, args.ema_decay) if args.use_ema else None

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        args = self.args
        inputs_x, targets_x = batch["labeled"]
        (inputs_u_w, inputs_u_s), _ = batch["unlabeled"]
        batch_size = inputs_x.shape[0]
        inputs = interleave(torch.cat((inputs_x, inputs_u_w, inputs_u_s)), 2 * args.mu + 1)
        logits = self.model(inputs)
        logits = de_interleave(logits, 2 * args.mu + 1)
        logits_x = logits[:batch_size]
        logits_u_w, logits_u_s = logits[batch_size:].chunk(2)

        Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")
        pseudo_label = torch.softmax(logits_u_w.detach() / args.T, dim=-1)
        max_probs, targets_u = torch.max(pseudo_label, dim=-1)
        mask = max_probs.ge(args.threshold).float()
        Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
        loss = Lx + args.lambda_u * Lu
        self.log_dict({"loss_x": Lx, "loss_u": Lu, "mask": mask.mean()}, prog_bar=True)
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.ema_model is not None:
            self.ema_model.update(self.model)

    def on_train_epoch_end(self):
        # train.py evaluates the EMA model on rank 0 only, over the whole test set in order (its test(), imported)
        if self.global_rank == 0:
            args = self.args
            args.local_rank = self.global_rank
            test_loader = DataLoader(
                self.trainer.datamodule.test,
                sampler=SequentialSampler(self.trainer.datamodule.test),
                batch_size=args.batch_size,
                num_workers=args.num_workers,
            )
            test_model = self.ema_model.ema if self.ema_model is not None else self.model
            test_loss, test_acc = test(args, test_loader, test_model, self.current_epoch)
            self.print(f"epoch {self.current_epoch}: test_loss {test_loss:.4f} test_acc {test_acc:.2f}")

    def on_save_checkpoint(self, checkpoint):
        # train.py's checkpoint holds the EMA model beside the model (ema_state_dict); Lightning saves only submodules
        if self.ema_model is not None:
            checkpoint["ema_state_dict"] = self.ema_model.ema.state_dict()

    def configure_optimizers(self):
        args = self.args
        no_decay = ["bias", "bn"]
        grouped_parameters = [
            {
                "params": [p for n, p in self.model.named_parameters() if not any(nd in n for nd in no_decay)],
                "weight_decay": args.wdecay,
            },
            {
                "params": [p for n, p in self.model.named_parameters() if any(nd in n for nd in no_decay)],
                "weight_decay": 0.0,
            },
        ]
        optimizer = optim.SGD(grouped_parameters, lr=args.lr, momentum=0.9, nesterov=args.nesterov)
        scheduler = get_cosine_schedule_with_warmup(optimizer, args.warmup, args.total_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class FixMatchBatches:
    """train.py's data loop: eval_step batches an epoch from a labeled and an unlabeled loader whose iterators are
    NOT restarted at each epoch; each is re-created when it runs out, its sampler's epoch counted on its own."""

    def __init__(self, labeled, unlabeled, eval_step):
        self.labeled, self.unlabeled, self.eval_step = labeled, unlabeled, eval_step
        self.labeled_iter = self.unlabeled_iter = None
        self.labeled_epoch = self.unlabeled_epoch = 0

    def __len__(self):
        return self.eval_step

    def __iter__(self):
        if self.labeled_iter is None:
            self.labeled.sampler.set_epoch(self.labeled_epoch)
            self.unlabeled.sampler.set_epoch(self.unlabeled_epoch)
            self.labeled_iter = iter(self.labeled)
            self.unlabeled_iter = iter(self.unlabeled)
        for _ in range(self.eval_step):
            try:
                labeled = next(self.labeled_iter)
            except StopIteration:
                self.labeled_epoch += 1
                self.labeled.sampler.set_epoch(self.labeled_epoch)
                self.labeled_iter = iter(self.labeled)
                labeled = next(self.labeled_iter)
            try:
                unlabeled = next(self.unlabeled_iter)
            except StopIteration:
                self.unlabeled_epoch += 1
                self.unlabeled.sampler.set_epoch(self.unlabeled_epoch)
                self.unlabeled_iter = iter(self.unlabeled)
                unlabeled = next(self.unlabeled_iter)
            yield {"labeled": labeled, "unlabeled": unlabeled}


class FixMatchData(L.LightningDataModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.batches = None

    def setup(self, stage):
        self.labeled, self.unlabeled, self.test = DATASET_GETTERS[self.args.dataset](self.args, "./data")

    def train_dataloader(self):
        args = self.args
        if self.batches is None:  # one for the whole fit: its iterators outlive Lightning's epochs
            labeled = DataLoader(
                self.labeled,
                sampler=DistributedSampler(self.labeled),
                batch_size=args.batch_size,
                num_workers=args.num_workers,
                drop_last=True,
            )
            unlabeled = DataLoader(
                self.unlabeled,
                sampler=DistributedSampler(self.unlabeled),
                batch_size=args.batch_size * args.mu,
                num_workers=args.num_workers,
                drop_last=True,
            )
            self.batches = FixMatchBatches(labeled, unlabeled, args.eval_step)
        return self.batches


def main():
    args = get_args()
    if args.seed is not None:
        L.seed_everything(args.seed)
    args.epochs = math.ceil(args.total_steps / args.eval_step)
    trainer = L.Trainer(
        strategy="ddp_find_unused_parameters_true",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        limit_train_batches=args.eval_step,
        default_root_dir=args.out,
        enable_progress_bar=not args.no_progress,
    )
    trainer.fit(FixMatch(args), datamodule=FixMatchData(args))


if __name__ == "__main__":
    main()
