"""ema_raw.py's self-distillation as a LightningModule holding the student and its EMA teacher as
attributes (Lightning's DDP wraps both), trained through a plain Trainer(strategy="ddp") and
Lightning's own launcher, knowing nothing of any recorder.

    python tests/hooks_programs/ema_lightning.py [--save-dir DIR [--ema-in-optimizer-step]]

With --save-dir, a ModelCheckpoint saves after every step. Lightning runs a callback's on_train_batch_end before the
LightningModule's, so a teacher updated there is saved before that step's update; --ema-in-optimizer-step updates it
right after the optimizer step instead, and the checkpoints hold what ema_raw.py's do.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "byo_model"))

import lightning as L  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from ema_raw import MOMENTUM, SMALL, build_student, build_teacher, distillation_loss, ema_update  # noqa: E402
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from model import Config, build_datasets, build_optimizer, pin_threads  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402


class LitDistillation(L.LightningModule):
    def __init__(self, cfg: Config, ema_in_optimizer_step: bool = False):
        super().__init__()
        self.cfg = cfg
        self.ema_in_optimizer_step = ema_in_optimizer_step
        self.student = build_student()
        self.teacher = build_teacher(self.student)

    def training_step(self, batch, batch_idx):
        with torch.no_grad():
            teacher_out = self.teacher(batch.x)
        return distillation_loss(self.student(batch.x), teacher_out, batch.y)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if not self.ema_in_optimizer_step:
            ema_update(self.teacher, self.student, MOMENTUM)

    def optimizer_step(self, *args, **kwargs):
        super().optimizer_step(*args, **kwargs)
        if self.ema_in_optimizer_step:
            ema_update(self.teacher, self.student, MOMENTUM)

    def configure_optimizers(self):
        return build_optimizer(self.student.parameters(), self.cfg)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--save-dir", type=Path, help="save a checkpoint after every step")
    p.add_argument("--ema-in-optimizer-step", action="store_true", help="update the teacher before any callback")
    args = p.parse_args()
    cfg = Config(**SMALL)
    pin_threads(cfg.threads)
    L.seed_everything(cfg.seed, verbose=False)
    model = LitDistillation(cfg, args.ema_in_optimizer_step)
    saving = args.save_dir is not None
    every_step = ModelCheckpoint(dirpath=args.save_dir, every_n_train_steps=1, save_top_k=-1) if saving else None
    train_set, _ = build_datasets(cfg)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=cfg.epochs,
        logger=False,
        enable_checkpointing=saving,
        callbacks=[every_step] if saving else None,
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
