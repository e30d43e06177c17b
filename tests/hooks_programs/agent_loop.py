"""One process: a small actor-critic agent trained the way RL loops train one (cleanrl's PPO), through its own
methods only (`get_value`, `get_action_and_value`, which call its parts), never `agent(x)`, with no DDP wrapper. It
knows nothing of any recorder. One flag changes how it is called, nothing it computes:

    --called-once   calls the whole agent once before the first step (`agent(x)`, its value, no gradient): the one
                    line a loop needed before the hooks took for the model the module owning every trained parameter

It prints each step's loss.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.network = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh())
        self.actor = nn.Linear(16, 3)
        self.critic = nn.Linear(16, 1)

    def forward(self, x):  # never called by the loop, but with --called-once
        return self.get_value(x)

    def get_value(self, x):
        return self.critic(self.network(x))

    def get_action_and_value(self, x, action):
        hidden = self.network(x)
        logprob = torch.log_softmax(self.actor(hidden), dim=-1).gather(1, action[:, None])[:, 0]
        return logprob, self.critic(hidden)[:, 0]


def loss_of(logprob, value, returns):
    return -(logprob * (returns - value.detach())).mean() + 0.5 * ((value - returns) ** 2).mean()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--called-once", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    agent = Agent()
    optimizer = torch.optim.Adam(agent.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    if args.called_once:
        with torch.no_grad():
            agent(torch.zeros(1, 6))
    for step in range(1, args.steps + 1):
        x, action = torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)
        with torch.no_grad():  # a rollout's value estimates, as PPO computes its returns
            returns = agent.get_value(x)[:, 0] + torch.randn(8, generator=g)
        logprob, value = agent.get_action_and_value(x, action)
        loss = loss_of(logprob, value, returns)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.8f}", flush=True)


if __name__ == "__main__":
    main()
