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
from train_dist import Net, synthetic_mnist


class LitNet(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = Net()

    def training_step(self, batch, batch_idx):
        data, target = batch
        loss = F.nll_loss(self.model(data), target)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return optim.SGD(self.parameters(), lr=0.01, momentum=0.5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", default=10, type=int)
    parser.add_argument("--size", default=60000, type=int)
    args = parser.parse_args()
    L.seed_everything(1234)
    model = LitNet()
    loader = torch.utils.data.DataLoader(synthetic_mnist(args.size), batch_size=64, shuffle=True)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, loader)


if __name__ == "__main__":
    main()
