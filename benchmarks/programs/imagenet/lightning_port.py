"""imagenet/main.py ported to Lightning, written first as a Lightning user would: the same model, data, SGD and
the per-epoch decay as a StepLR(step_size=30, gamma=0.1), top-1 accuracy on the validation set every epoch.

    python lightning_port.py --epochs 3 -b 16 --seed 0 --run-dir OUT/trace
"""

import lightning as L
import torch
from main import accuracy, parser, synthetic_images, tiny_cnn
from torch.utils.data import DataLoader

from ddp_parity import TraceCallback  # parity


class LitClassifier(L.LightningModule):
    def __init__(self, lr: float, momentum: float, weight_decay: float):
        super().__init__()
        self.save_hyperparameters()
        self.model = tiny_cnn()
        self.criterion = torch.nn.CrossEntropyLoss()
        self.last_validation = None

    def training_step(self, batch, batch_idx):
        images, target = batch
        return self.criterion(self.model(images), target)

    def on_validation_epoch_start(self):
        self.sums = torch.zeros(2)  # accuracy x samples, samples

    def validation_step(self, batch, batch_idx):
        images, target = batch
        acc1 = accuracy(self.model(images), target, topk=(1,))[0]
        self.sums += torch.stack([acc1[0] * images.size(0), torch.tensor(float(images.size(0)))])

    def on_validation_epoch_end(self):
        # round 2 (docs/programs.md): sums and counts reduced across ranks, each sample counted once
        torch.distributed.all_reduce(self.sums)
        self.last_validation = {"acc1": self.sums[0] / self.sums[1]}  # what TraceCallback records
        self.log("val_acc1", self.last_validation["acc1"])

    def configure_optimizers(self):
        h = self.hparams
        optimizer = torch.optim.SGD(self.parameters(), h.lr, momentum=h.momentum, weight_decay=h.weight_decay)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)]


def main():
    args = parser.parse_args()
    if args.seed is not None:
        L.seed_everything(args.seed)
    world = 2
    config = {k: v for k, v in vars(args).items() if k not in ("run_dir", "rank")} | {"world_size": world}
    train = DataLoader(synthetic_images(args.train_size, seed=1), batch_size=args.batch_size // world, shuffle=True)
    val = DataLoader(synthetic_images(args.val_size, seed=2), batch_size=args.batch_size // world)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=world,
        max_epochs=args.epochs,
        callbacks=[TraceCallback(args.run_dir, config=config)],  # parity
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(LitClassifier(args.lr, args.momentum, args.weight_decay), train, val)


if __name__ == "__main__":
    main()
