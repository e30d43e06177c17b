"""barlowtwins' main.py ported to Lightning, written as a Lightning user would: the same BarlowTwins module, LARS
over the same two param groups, the lr set by hand each step (main.py's adjust_learning_rate) in
on_train_batch_start, the same dataset and transforms; Lightning's DDP strategy, sampler and launcher. No line
records anything: `ddp-parity record` does.

    python lightning_port.py DATA --epochs 2 --batch-size 16 --workers 0 --projector 64-64-64
"""

import lightning as L
import main
import torch
from main import BarlowTwins, Transform, adjust_learning_rate, parser
from standins import torchvision


class LARS(main.LARS):
    """main.py's LARS steps without a closure; Lightning's optimizer_step passes one (training_step + backward).
    Round 3: the same class name as main.py's (it was ClosureLARS)."""

    def step(self, closure=None):
        if closure is not None:
            with torch.enable_grad():
                closure()
        super().step()


class LitBarlowTwins(L.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args

    def configure_model(self):
        # round 4: built after Lightning re-seeds the ranks in its DDP setup, so that the augmentations draw from
        # the global generator after the model's initialisation, as in main_worker (seed, model, then the loader)
        self.model = BarlowTwins(self.args)

    def training_step(self, batch, batch_idx):
        (y1, y2), _ = batch
        loss = self.model(y1, y2)
        self.log("loss", loss)
        return loss

    def on_train_batch_start(self, batch, batch_idx):
        loader = self.trainer.train_dataloader
        adjust_learning_rate(self.args, self.optimizers().optimizer, loader, self.global_step)

    def configure_optimizers(self):
        param_weights = [p for p in self.parameters() if p.ndim != 1]
        param_biases = [p for p in self.parameters() if p.ndim == 1]
        parameters = [{"params": param_weights}, {"params": param_biases}]
        return LARS(
            parameters, lr=0, weight_decay=self.args.weight_decay, weight_decay_filter=True, lars_adaptation_filter=True
        )


def main():
    args = parser.parse_args()
    L.seed_everything(0)
    torch.backends.cudnn.benchmark = True  # round 2: as main_worker sets it
    world_size = 2
    dataset = torchvision.datasets.ImageFolder(args.data / "train", Transform())
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size // world_size, num_workers=args.workers)
    model = LitBarlowTwins(args)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=world_size,
        max_epochs=args.epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, loader)


if __name__ == "__main__":
    main()
