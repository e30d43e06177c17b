"""The tutorial's synthetic classification data, built the same on every process and every run."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import Dataset

from ddp_parity.config import DataConfig


class Sample(NamedTuple):
    """One item, or (after default_collate) one batch: features, label, dataset index.

    The index travels with the sample so a trace can record exactly which samples a step saw.
    """

    x: torch.Tensor
    y: torch.Tensor
    index: torch.Tensor


class SyntheticClassification(Dataset):
    """The tutorial's `randn(n, features)` inputs, from a generator of its own.

    A private generator (not the global RNG) means the data does not depend on how much random
    state the framework consumed before building it. NumPy's generator, not torch's: torch.randn's
    CPU kernel is vectorised, and under another ATen kernel set (ATEN_CPU_CAPABILITY, another CPU)
    it draws other last bits, so the same config would train on other data on the next machine;
    NumPy's normal draws are the same bits everywhere. The tutorial draws labels with `randint`,
    which leaves nothing to learn; here a fixed random linear "teacher" labels the inputs (argmax of
    x @ W, in float64, whose rounding is far below any margin between two classes), so a falling
    loss shows that training works.
    """

    def __init__(self, num_samples: int, num_features: int, num_classes: int, seed: int):
        x = np.random.default_rng(seed).standard_normal((num_samples, num_features), dtype=np.float32)
        teacher = np.random.default_rng(10_000 + num_classes).standard_normal((num_features, num_classes))
        self.x = torch.from_numpy(x)
        self.y = torch.from_numpy((x.astype(np.float64) @ teacher).argmax(axis=1))

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> Sample:
        return Sample(self.x[index], self.y[index], torch.tensor(index))


def build_datasets(config: DataConfig) -> tuple[SyntheticClassification, SyntheticClassification | None]:
    """Training set and (when `val_samples > 0`) a validation set from a different seed."""
    train = SyntheticClassification(config.num_samples, config.num_features, config.num_classes, config.data_seed)
    val = None
    if config.val_samples > 0:
        val = SyntheticClassification(config.val_samples, config.num_features, config.num_classes, config.data_seed + 1)
    return train, val
