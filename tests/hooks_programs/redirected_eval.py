"""A loop that runs its steps as Lightning runs a LightningModule's: through the forward of a wrapper holding the
model and a frozen EMA of it, a forward that dispatches to a training or validation step (as Lightning's forward
redirection makes validation_step the module's forward). The validation step calls the model and the EMA directly
and returns None. One process, no recorder of its own.

    python tests/hooks_programs/redirected_eval.py
"""

from __future__ import annotations

import copy

import torch

STEPS, BATCH, FEATURES = 3, 8, 4


class Steps(torch.nn.Module):
    """The LightningModule's shape: the trained model and its EMA as attributes, the steps as methods."""

    def __init__(self):
        super().__init__()
        self.model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        self.ema = copy.deepcopy(self.model).requires_grad_(False)

    def forward(self, stage: str, x: torch.Tensor, which: int = 0):
        return self.training_step(x) if stage == "train" else self.validation_step(x, which)

    def training_step(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.model(x), x.sum(dim=1, keepdim=True).sin())

    def validation_step(self, x: torch.Tensor, which: int) -> None:
        (self.model if which == 0 else self.ema)(x)  # the figures a real one would log: one pass each, as pycls's


@torch.no_grad()
def validate(steps: Steps, data: torch.Generator) -> None:
    steps.eval()
    for which in (0, 1):
        steps("validate", torch.randn(BATCH, FEATURES, generator=data), which)
    steps.train()


def main() -> None:
    torch.manual_seed(0)
    steps = Steps()
    optimizer = torch.optim.SGD(steps.model.parameters(), lr=0.5)
    data = torch.Generator().manual_seed(1)
    validate(steps, data)  # as Lightning's sanity check
    for _ in range(STEPS):
        steps("train", torch.randn(BATCH, FEATURES, generator=data)).backward()
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            for target, source in zip(steps.ema.parameters(), steps.model.parameters()):
                target.lerp_(source, 0.5)
        validate(steps, data)


if __name__ == "__main__":
    main()
