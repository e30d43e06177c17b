"""A "bring your own model" for the parity plugin: a small CNN with dropout and batch norm, on
synthetic 1x16x16 images, shared by `train_raw.py` (hand-written DDP) and `train_lightning.py`.

Nothing here comes from the tutorial network in `ddp_parity/`: this file is what a user brings.
The parity plugin itself (`TraceRecorder`, `TraceCallback`) is only used by the two scripts.
"""

from __future__ import annotations

import argparse
import os
import random
from dataclasses import asdict, dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

# ---------------------------------------------------------------------------------------------
# the configuration both scripts take (same flags, same defaults)


@dataclass
class Config:
    run_dir: str
    seed: int = 42  # seeds random/numpy/torch and the DistributedSampler, as seed_everything does
    threads: int = 1  # per process, on both sides (CPU float results depend on it)
    devices: int = 2  # Lightning's devices; the raw loop takes its world size from torchrun
    epochs: int = 2
    batch_size: int = 32  # per rank
    lr: float = 2e-3
    weight_decay: float = 1e-2
    dropout: float = 0.3
    num_samples: int = 1500  # 750 per rank with 2 ranks: 23 full batches and one of 14
    val_samples: int = 256
    data_seed: int = 0
    num_classes: int = 10

    def to_dict(self) -> dict:
        return asdict(self)


def parse_args(argv: list[str] | None = None, prog: str | None = None) -> Config:
    p = argparse.ArgumentParser(prog=prog, description="bring-your-own-model parity example")
    p.add_argument("--run_dir", "--run-dir", required=True, help="where this run writes its trace")
    for name, default in Config.__dataclass_fields__.items():
        if name != "run_dir":
            p.add_argument(f"--{name}", type=type(default.default), default=default.default)
    args = p.parse_args(argv)
    cfg = Config(**vars(args))
    if cfg.batch_size < 1 or cfg.epochs < 1 or not 0.0 <= cfg.dropout < 1.0 or cfg.threads < 1:
        p.error(f"bad values: {cfg}")
    return cfg


# ---------------------------------------------------------------------------------------------
# determinism helpers the raw loop needs (Lightning does the same inside seed_everything)


def pin_threads(threads: int) -> None:
    """Same intra-op thread count on both sides. Exported too: torchrun sets OMP_NUM_THREADS=1 when
    it is unset, Lightning's launcher sets cpu_count // devices."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


def seed_everything(seed: int) -> None:
    """What `lightning.seed_everything(seed)` does (workers=False), without importing Lightning."""
    os.environ["PL_GLOBAL_SEED"] = str(seed)
    os.environ["PL_SEED_WORKERS"] = "0"
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ---------------------------------------------------------------------------------------------
# data: class templates plus noise, from a generator of its own (never the global RNG)


class Item(NamedTuple):
    """One image, or after default_collate one batch. `index` is what the trace records."""

    x: torch.Tensor
    y: torch.Tensor
    index: torch.Tensor


class SyntheticImages(Dataset):
    """`num_samples` 1x16x16 images: a per-class random template, shifted by up to 2 pixels, plus
    noise. Built once from its own seeded torch.Generator, so it does not depend on (or change)
    how much of the global RNG anything consumed. `__getitem__` draws nothing: Lightning fetches
    one batch ahead, so random augmentation drawn from the global RNG there would interleave with
    dropout in a different order than a plain `for batch in loader` loop."""

    def __init__(self, num_samples: int, num_classes: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        templates = torch.randn(num_classes, 1, 16, 16, generator=torch.Generator().manual_seed(1234))
        self.y = torch.randint(num_classes, (num_samples,), generator=g)
        shifts = torch.randint(-2, 3, (num_samples, 2), generator=g)
        x = templates[self.y]
        x = torch.stack([torch.roll(img, (int(dy), int(dx)), dims=(1, 2)) for img, (dy, dx) in zip(x, shifts)])
        self.x = 0.6 * x + torch.randn(num_samples, 1, 16, 16, generator=g)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> Item:
        return Item(self.x[index], self.y[index], torch.tensor(index))


def build_datasets(cfg: Config) -> tuple[SyntheticImages, SyntheticImages]:
    train = SyntheticImages(cfg.num_samples, cfg.num_classes, cfg.data_seed)
    val = SyntheticImages(cfg.val_samples, cfg.num_classes, cfg.data_seed + 1)
    return train, val


# ---------------------------------------------------------------------------------------------
# the network: conv -> BN -> ReLU -> pool, twice; dropout on the features and before the head


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = 10, dropout: float = 0.3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8x8
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 16x4x4
            nn.Dropout2d(dropout),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 4 * 4, 64), nn.ReLU(), nn.Dropout(dropout), nn.Linear(64, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def build_model(cfg: Config) -> SmallCNN:
    return SmallCNN(cfg.num_classes, cfg.dropout)


def build_optimizer(params, cfg: Config) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def validation_sums(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """[sum of losses, correct, count] of one batch, float64 so sums over ranks do not round."""
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y, reduction="sum")
    return torch.stack(
        [loss.double(), (logits.argmax(1) == y).sum().double(), torch.tensor(float(len(y)), dtype=torch.float64)]
    )


def validation_metrics(sums: torch.Tensor) -> dict:
    """From the all-reduced sums: the same floats on every rank and on both sides."""
    loss, correct, count = sums.tolist()
    return {"val_loss": loss / count, "val_acc": correct / count, "val_count": int(count)}
