"""Exact distributed validation: every validation sample counted exactly once, metrics synced by torchmetrics.

DistributedSampler pads the last shard by repeating samples so that every rank gets the same
count; for training that is harmless, for validation it silently double-counts. ExactShardSampler
gives rank r the samples r, r + world, r + 2 * world, ... with no padding; torchmetrics sums the
per-rank states (its sync handles ranks of different lengths), so the figures are those of the
whole set seen once.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.data import DistributedSampler
from torchmetrics import MeanMetric, SumMetric
from torchmetrics.classification import MulticlassAccuracy


class ExactShardSampler(DistributedSampler):
    """Strided shards without padding. A DistributedSampler subclass, so Lightning keeps it as it is
    (it only injects its own sampler where a loader has none that is distributed)."""

    def __init__(self, dataset, num_replicas: int, rank: int):
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=False, drop_last=False)
        self.num_samples = len(range(rank, len(dataset), num_replicas))
        self.total_size = len(dataset)

    def __iter__(self):
        return iter(range(self.rank, self.total_size, self.num_replicas))

    def __len__(self) -> int:
        return self.num_samples


class ValidationMetrics(nn.Module):
    """Mean cross-entropy, micro accuracy and the sample count, over all ranks."""

    def __init__(self, num_classes: int):
        super().__init__()
        # float64 sums: the mean loss then matches a one-process evaluation to roundoff
        self.loss = MeanMetric().set_dtype(torch.float64)
        self.accuracy = MulticlassAccuracy(num_classes=num_classes, average="micro")
        self.count = SumMetric().set_dtype(torch.float64)
        self.loss_fn = nn.CrossEntropyLoss(reduction="none")

    def update(self, logits: torch.Tensor, target: torch.Tensor) -> None:
        logits = logits.float()
        self.loss.update(self.loss_fn(logits, target))
        self.accuracy.update(logits, target)
        self.count.update(torch.tensor(float(target.numel()), device=target.device))

    def reset(self) -> None:
        for metric in (self.loss, self.accuracy, self.count):
            metric.reset()

    def compute(self) -> dict:
        count = self.count.compute().item()
        assert count == math.floor(count)
        return {
            "val_loss": self.loss.compute().item(),
            "val_acc": self.accuracy.compute().item(),
            "val_count": int(count),
        }
