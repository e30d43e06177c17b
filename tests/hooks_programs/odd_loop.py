"""A loop of everything a recorder finds odd, knowing nothing of any recorder: a complex parameter
beside a real layer, batches holding file names and objects, an lr held as a tensor, a step whose
gradients are set by hand (no backward). With `--disk-limit BYTES` every file this process writes
stops growing at BYTES, as on a full disk. It prints its losses and final weights bit for bit.

    python tests/hooks_programs/odd_loop.py [--disk-limit 6000]
"""

from __future__ import annotations

import argparse
import resource
import signal

import torch
from torch.utils.data import DataLoader, Dataset


class Named(Dataset):
    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> dict:
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(4, generator=g), "y": torch.randn(1, generator=g), "name": f"{i}.png"}


def collate(samples: list[dict]) -> dict:
    return {
        "x": torch.stack([s["x"] for s in samples]),
        "y": torch.stack([s["y"] for s in samples]),
        "names": [s["name"] for s in samples],
        "source": object(),  # an object of the user's: no value to digest
    }


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.phase = torch.nn.Parameter(torch.ones(1, dtype=torch.complex64))

    def forward(self, x):
        return self.layer(x) * self.phase.abs()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--disk-limit", type=int)
    args = p.parse_args()
    if args.disk_limit:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (args.disk_limit, resource.RLIM_INFINITY))
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=torch.tensor(0.1))
    for step, batch in enumerate(DataLoader(Named(), batch_size=4, collate_fn=collate), start=1):
        optimizer.zero_grad()
        if step == 2:  # gradients of the program's own making: no backward
            for q in model.parameters():
                q.grad = torch.full_like(q, 0.01)
        else:
            loss = torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])
            loss.backward()
            print(f"step {step} loss {loss.item().hex()}", flush=True)
        optimizer.step()
    for name, q in model.state_dict().items():
        print(name, q.numpy().tobytes().hex(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
