"""raw_loop.py's training as a LightningModule and a plain Trainer(strategy="ddp"), through
Lightning's own launcher, knowing nothing of any recorder.

    python tests/hooks_programs/lightning_loop.py [--step-scheduler-by-hand]

--step-scheduler-by-hand also calls the scheduler's step() after each batch, while lr_scheduler_config (interval
"step") steps it too: the scheduler moves twice per optimizer step (a slip seen in public ports).
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "byo_model"))

import lightning as L  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from model import Config, build_datasets, build_model, build_optimizer, pin_threads  # noqa: E402
from raw_loop import CLIP, GAMMA, SMALL, STEP_SIZE  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

BY_HAND = "--step-scheduler-by-hand" in sys.argv[1:]


class LitCNN(L.LightningModule):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.net = build_model(cfg)
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def training_step(self, batch, batch_idx):
        torch.rand(1)  # raw_loop.py's draw before the network
        return self.loss_fn(self.net(batch.x), batch.y)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if BY_HAND:
            self.lr_schedulers().step()

    def validation_step(self, batch, batch_idx):
        self.net(batch.x)

    def configure_optimizers(self):
        optimizer = build_optimizer(self.parameters(), self.cfg)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=STEP_SIZE, gamma=GAMMA)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def main() -> int:
    cfg = Config(**SMALL)
    pin_threads(cfg.threads)
    L.seed_everything(cfg.seed, verbose=False)
    model = LitCNN(cfg)
    train_set, val_set = build_datasets(cfg)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=cfg.epochs,
        gradient_clip_val=CLIP,
        logger=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
    )
    trainer.fit(
        model,
        DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True),
        DataLoader(val_set, batch_size=cfg.batch_size),
    )
    if dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
