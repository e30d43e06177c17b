"""The corpus's model families and data: an MLP, a CNN with BatchNorm and a small Transformer with
dropout, each small enough that a training step takes milliseconds on one CPU thread. Modules are
named attributes, so a diagnosis names them the way a user reads their own model."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import Dataset

CLASSES, FEATURES, IMAGE, VOCAB, TOKENS = 4, 8, 6, 12, 6


class MLP(nn.Module):
    def __init__(self, dropout: float = 0.1, eps: float = 1e-5, approximate: str = "none", autocast_head=False):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 32)
        self.norm = nn.LayerNorm(32, eps=eps)
        self.act = nn.GELU(approximate=approximate)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(32, CLASSES)
        self.autocast_head = autocast_head

    def forward(self, x):
        h = self.drop(self.act(self.norm(self.fc1(x))))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast_head):
            return self.head(h).float()


class CNN(nn.Module):
    def __init__(self, dropout: float = 0.1, momentum: float = 0.1, **_):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4, momentum=momentum)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(4, CLASSES)

    def forward(self, x):
        h = self.pool(self.act(self.bn(self.conv(x)))).flatten(1)
        return self.head(self.drop(h))


class Transformer(nn.Module):
    def __init__(self, dropout: float = 0.1, **_):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 16)
        self.encoder = nn.TransformerEncoderLayer(16, 2, 32, dropout=dropout, batch_first=True)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(1))


FAMILIES = {"mlp": MLP, "cnn": CNN, "transformer": Transformer}


class Samples(Dataset):
    """Fixed samples of a family's input shape; `augment` adds jitter drawn from torch's global
    stream in __getitem__ (in a DataLoader worker: the worker's stream), as a random transform does."""

    def __init__(self, family: str, n: int, seed: int = 3, augment: bool = False):
        g = torch.Generator().manual_seed(seed)
        if family == "transformer":
            self.x = torch.randint(0, VOCAB, (n, TOKENS), generator=g)
        else:
            shape = (FEATURES,) if family == "mlp" else (1, IMAGE, IMAGE)
            self.x = torch.randn(n, *shape, generator=g)
        self.y = torch.randint(0, CLASSES, (n,), generator=g)
        self.augment = augment and family != "transformer"

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i] + 0.05 * torch.randn(self.x[i].shape) if self.augment else self.x[i]
        return {"x": x, "y": self.y[i], "index": i}
