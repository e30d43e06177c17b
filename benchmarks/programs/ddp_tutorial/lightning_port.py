"""The DDP tutorial's multigpu_torchrun.py ported to Lightning, written first as a Lightning user would: the
same dataset (datautils.py), model and optimizer in a LightningModule, Lightning's DistributedSampler.

    python lightning_port.py TOTAL_EPOCHS SAVE_EVERY --batch_size 32 --run_dir OUT/trace
"""

import argparse

import lightning as L
import torch
from datautils import MyTrainDataset
from torch.utils.data import DataLoader

from ddp_parity import TraceCallback  # parity


class LitLinear(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = torch.nn.Linear(20, 1)
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def training_step(self, batch, batch_idx):
        source, targets = batch
        return self.loss_fn(self.model(source), targets)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-3)


def main():
    parser = argparse.ArgumentParser(description="simple distributed training job, in Lightning")
    parser.add_argument("total_epochs", type=int)
    parser.add_argument("save_every", type=int)
    parser.add_argument("--batch_size", default=32, type=int)
    parser.add_argument("--run_dir", default="trace")
    args = parser.parse_args()
    L.seed_everything(0)
    # round 2: the dataset before the model, as load_train_objs builds them (both draw from torch's global RNG)
    dataset = MyTrainDataset(2048)
    model = LitLinear()
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    config = {"total_epochs": args.total_epochs, "save_every": args.save_every, "batch_size": args.batch_size}
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.total_epochs,
        callbacks=[TraceCallback(args.run_dir, config=config)],  # parity
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, loader)


if __name__ == "__main__":
    main()
