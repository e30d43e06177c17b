"""The network, its loss and its optimizer: one definition for both implementations."""

from __future__ import annotations

import torch
from torch import nn

from ddp_parity.config import ModelConfig


class Net(nn.Module):
    """The tutorial's `Linear(32,64) -> ReLU -> Linear(64,10)`, with configurable sizes.

    `depth` counts hidden Linear+ReLU layers; depth=1 with the defaults is the tutorial network.
    """

    def __init__(
        self, input_dim: int = 32, hidden_dim: int = 64, num_classes: int = 10, depth: int = 1, dropout: float = 0.0
    ):
        super().__init__()
        layers: list[nn.Module] = []
        width = input_dim
        for _ in range(depth):
            layers += [nn.Linear(width, hidden_dim), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = hidden_dim
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_net(config: ModelConfig) -> Net:
    net = Net(config.input_dim, config.hidden_dim, config.num_classes, config.depth, config.dropout)
    nudge_by_ulps(net, config.init_ulps, config.init_ulps_seed)
    return net


def nudge_by_ulps(module: nn.Module, ulps: int, seed: int = 0) -> None:
    """Move every parameter entry `ulps` representable numbers up or down (a seeded coin each): a
    change of rounding size only, for a noise control. Its own generator leaves torch's global RNG,
    and so everything training draws from it, as it was."""
    if ulps <= 0:
        return
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            up = torch.randint(0, 2, p.shape, generator=generator).to(device=p.device, dtype=torch.bool)
            towards = torch.where(up, torch.inf, -torch.inf).to(p.dtype)
            for _ in range(ulps):
                p.copy_(torch.nextafter(p, towards))


def build_loss() -> nn.Module:
    return nn.CrossEntropyLoss()


def build_optimizer(params, config: ModelConfig) -> torch.optim.Optimizer:
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)


def build_scheduler(optimizer: torch.optim.Optimizer, config: ModelConfig):
    """The schedule, or None. Its `interval` (step or epoch) is config.lr_schedule_interval."""
    if config.lr_schedule == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=config.lr_step_size, gamma=config.lr_gamma)
    if config.lr_schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=config.lr_step_size)
    return None
