"""One process, no DDP, no DataLoader: a linear model that also holds an empty parameter (a tensor
of no elements, which the per-layer sketch cannot draw directions for). It prints its losses and
saves its final weights (argv[1])."""

import sys

import torch


class Odd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
        self.empty = torch.nn.Parameter(torch.zeros(0))

    def forward(self, x):
        return self.linear(x).squeeze(-1) + self.empty.sum()


torch.manual_seed(0)
model = Odd()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(12, 4), torch.randn(12)
for step in range(3):
    loss = torch.nn.functional.mse_loss(model(x[step * 4 : step * 4 + 4]), y[step * 4 : step * 4 + 4])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step + 1} loss {loss.item():.8f}", flush=True)
torch.save(model.state_dict(), sys.argv[1])
