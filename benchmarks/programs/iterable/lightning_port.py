"""The streaming DDP loop of train.py ported to Lightning, written first as a Lightning user would: the same
ToyModel, MSELoss and SGD in a LightningModule, the same IterableDataset of indices in a DataLoader.

    python lightning_port.py --epochs 2 --size 64 --batch_size 4 --run_dir OUT/trace
"""

import argparse

import lightning as L
import torch
from streams import MyIterableDataset, ToyModel, features
from torch.utils.data import DataLoader

from ddp_parity import TraceCallback  # parity


class LitToy(L.LightningModule):
    def __init__(self, size: int):
        super().__init__()
        self.save_hyperparameters()
        self.model = ToyModel()
        self.loss_fn = torch.nn.MSELoss()
        # round 2 (docs/programs.md): the feature table is data, not module state (it was two buffers)
        self.inputs, self.targets = features(size)

    def training_step(self, idx, batch_idx):
        return self.loss_fn(self.model(self.inputs[idx]), self.targets[idx])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.001)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--run_dir", default="trace")
    args = parser.parse_args()
    L.seed_everything(0)
    loader = DataLoader(MyIterableDataset(0, args.size), batch_size=args.batch_size)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        callbacks=[TraceCallback(args.run_dir, config=vars(args) | {"run_dir": None})],  # parity
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(LitToy(args.size), loader)


if __name__ == "__main__":
    main()
