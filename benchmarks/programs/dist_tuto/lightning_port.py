"""dist_tuto's synchronous SGD (train_dist.py) ported to Lightning, written as a Lightning user would: the same Net,
data and SGD in a LightningModule; the gradient averaging and the partitioning left to the DDP strategy. No line
records anything: `ddp-parity record` does.

    python lightning_port.py --epochs 2 --size 512
"""

import argparse

import lightning as L
import torch
import torch.nn.functional as F
import torch.optim as optim
from train_dist import DataPartitioner, Net, synthetic_mnist


class LitNet(L.LightningModule):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def configure_model(self):
        # round 3: the Net built after Lightning re-seeds the ranks (its DDP setup calls seed_everything again), so
        # that it draws from torch.manual_seed(1234) as train_dist's run() does, just before the loader's shuffle
        self.model = Net()

    def training_step(self, batch, batch_idx):
        data, target = batch
        loss = F.nll_loss(self.model(data), target)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return optim.SGD(self.parameters(), lr=0.01, momentum=0.5)

    def train_dataloader(self):
        # round 2: each rank its own partition of the data (train_dist's DataPartitioner, after the process group
        # exists), shuffled by its DataLoader as partition_dataset does; Lightning's DistributedSampler off
        size, rank = self.trainer.world_size, self.trainer.global_rank
        partition = DataPartitioner(synthetic_mnist(self.size), [1.0 / size for _ in range(size)]).use(rank)
        return torch.utils.data.DataLoader(partition, batch_size=int(128 / float(size)), shuffle=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", default=10, type=int)
    parser.add_argument("--size", default=60000, type=int)
    args = parser.parse_args()
    L.seed_everything(1234)
    model = LitNet(args.size)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,  # round 2
    )
    trainer.fit(model)


if __name__ == "__main__":
    main()
