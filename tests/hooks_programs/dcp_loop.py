"""One process: trains two steps, saves model and optimizer with torch.distributed.checkpoint (DCP), then
loads them back and restores the model only, and trains two more steps. It knows nothing of any recorder.

    python tests/hooks_programs/dcp_loop.py DIR
"""

from __future__ import annotations

import sys

import torch
import torch.distributed.checkpoint as dcp
from torch import nn


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    for step in range(1, 5):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.8f}", flush=True)
        if step == 2:
            dcp.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, checkpoint_id=sys.argv[1])
            state = {"model": model.state_dict()}
            dcp.load(state, checkpoint_id=sys.argv[1])
            model.load_state_dict(state["model"])


if __name__ == "__main__":
    main()
