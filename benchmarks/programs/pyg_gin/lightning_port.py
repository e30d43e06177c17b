"""pytorch_geometric's distributed_batching.py (GIN on ogbg-molhiv) as a Lightning program: the script's GIN, data
set, loader and Evaluator imported, a LightningModule training it with BCEWithLogitsLoss and Adam, the validation and
test ROC-AUC computed each epoch, under Trainer(strategy="ddp", accelerator="cpu", devices=2). No line records
anything: `ddp-parity record` does.

    python lightning_port.py
"""

import os.path as osp

import lightning as L
import standins as T
import torch
from distributed_batching import GIN
from standins import DataLoader, Evaluator, PygGraphPropPredDataset
from torch.utils.data.distributed import DistributedSampler

DATASET_NAME = "ogbg-molhiv"
ROOT = osp.join(osp.dirname(__file__), "..", "..", "data", "OGB")
HIDDEN = 16
BATCH_SIZE = 16
EPOCHS = 2


class GraphData(L.LightningDataModule):
    def __init__(self):
        super().__init__()
        self.dataset = PygGraphPropPredDataset(
            DATASET_NAME, root=ROOT, pre_transform=T.ToSparseTensor(attr="edge_attr")
        )
        self.split_idx = self.dataset.get_idx_split()

    def train_dataloader(self):
        # round 1: the script's own DistributedSampler (seed 0), not Lightning's (seeded from PL_GLOBAL_SEED)
        train_dataset = self.dataset[self.split_idx["train"]]
        sampler = DistributedSampler(train_dataset, shuffle=True, drop_last=True)
        return DataLoader(train_dataset, batch_size=BATCH_SIZE, sampler=sampler)

    def eval_dataloaders(self):
        # round 3: the validation and test loaders of the script, built and iterated on rank 0 only
        return {
            "val_rocauc": DataLoader(self.dataset[self.split_idx["valid"]], batch_size=256),
            "test_rocauc": DataLoader(self.dataset[self.split_idx["test"]], batch_size=256),
        }


class LitGIN(L.LightningModule):
    def __init__(self, num_tasks):
        super().__init__()
        self.save_hyperparameters()
        self.num_tasks = num_tasks
        self.criterion = torch.nn.BCEWithLogitsLoss()
        self.evaluator = Evaluator(DATASET_NAME)

    def configure_model(self):
        # round 2: the GIN built after Lightning's DDP setup re-seeds every rank, so that what the dropout draws
        # follows torch.manual_seed(12345) and the initial weights' draws, as in the script's run()
        self.model = GIN(HIDDEN, self.num_tasks, num_layers=3, dropout=0.5)

    def forward(self, data):
        return self.model(data.x, data.adj_t, data.batch)

    def on_train_epoch_start(self):
        # round 1: the script counts its epochs from 1 (set_epoch(epoch) for epoch in range(1, ...)), Lightning from 0
        self.trainer.train_dataloader.sampler.set_epoch(self.current_epoch + 1)

    def training_step(self, data, batch_idx):
        logits = self(data)
        loss = self.criterion(logits, data.y.to(torch.float))
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True, batch_size=data.num_graphs)
        return loss

    def on_train_epoch_end(self):
        # round 3: evaluated on rank 0 only, as the script does ("We evaluate on a single GPU for now"): Lightning's
        # validation loop ran on every rank, and each iteration of a DataLoader draws from torch's generator
        if self.global_rank != 0:
            return
        self.model.eval()
        for name, loader in self.trainer.datamodule.eval_dataloaders().items():
            y_pred, y_true = [], []
            for data in loader:
                with torch.no_grad():
                    y_pred.append(self(data))
                    y_true.append(data.y)
            rocauc = self.evaluator.eval({"y_pred": torch.cat(y_pred, dim=0), "y_true": torch.cat(y_true, dim=0)})
            self.log(name, rocauc["rocauc"], rank_zero_only=True)
        self.model.train()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.001)


def main():
    L.seed_everything(12345)
    data = GraphData()
    model = LitGIN(data.dataset.num_tasks)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=EPOCHS,
        enable_progress_bar=False,
        use_distributed_sampler=False,  # round 1: the training sampler is the script's
    )
    trainer.fit(model, datamodule=data)


if __name__ == "__main__":
    main()
