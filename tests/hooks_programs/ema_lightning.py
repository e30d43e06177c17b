"""ema_raw.py's self-distillation as a LightningModule holding the student and its EMA teacher as
attributes (Lightning's DDP wraps both), trained through a plain Trainer(strategy="ddp") and
Lightning's own launcher, knowing nothing of any recorder.

    python tests/hooks_programs/ema_lightning.py
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
from ema_raw import MOMENTUM, SMALL, build_student, build_teacher, distillation_loss, ema_update  # noqa: E402
from model import Config, build_datasets, build_optimizer, pin_threads  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402


class LitDistillation(L.LightningModule):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.student = build_student()
        self.teacher = build_teacher(self.student)

    def training_step(self, batch, batch_idx):
        with torch.no_grad():
            teacher_out = self.teacher(batch.x)
        return distillation_loss(self.student(batch.x), teacher_out, batch.y)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        ema_update(self.teacher, self.student, MOMENTUM)

    def configure_optimizers(self):
        return build_optimizer(self.student.parameters(), self.cfg)


def main() -> int:
    cfg = Config(**SMALL)
    pin_threads(cfg.threads)
    L.seed_everything(cfg.seed, verbose=False)
    model = LitDistillation(cfg)
    train_set, _ = build_datasets(cfg)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=cfg.epochs,
        logger=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
    )
    trainer.fit(model, DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True))
    if dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
