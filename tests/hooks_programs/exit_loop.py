"""Two ranks (torchrun) that train a few DDP steps and never destroy their process group, as StyleGAN2's loop does.
Before it imports torch it registers an exit handler (which runs after any registered later: the recording's),
which prints whether the default process group is still there at exit. It knows nothing of any recorder.

    torchrun --nproc_per_node=2 tests/hooks_programs/exit_loop.py
"""

from __future__ import annotations

import atexit
import sys


def say_the_group() -> None:
    dist = sys.modules.get("torch.distributed")
    initialized = bool(dist is not None and dist.is_initialized())
    print(f"group at exit: initialized={initialized}", flush=True)


atexit.register(say_the_group)

import torch  # noqa: E402 - after the exit handler, on purpose
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    globals()["kept"] = model  # alive to interpreter exit, as a script's module-level wrapper is


if __name__ == "__main__":
    main()
