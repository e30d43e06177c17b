"""The tutorial's claim, measured: one process trains on the global batches a DDP run sees.

    python raw/reference.py --config configs/default.yaml --trainer.devices 4
    python compare/run.py --reference --nproc 4            # and compare it with both DDP runs

It emulates trainer.devices x trainer.num_nodes ranks: each step it takes every rank's batch (the
per-rank DistributedSamplers of that world size, stepped together) and trains on the mean of the
ranks' mean losses, whose gradient is what DDP's all-reduce averages. raw/train.py stays the DDP
loop: this script replaces its loaders and its batch loss before `train.main` runs, as
raw/mistakes.py does, and takes the same flags.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

import torch

from ddp_parity.config import ConfigError

train = None  # raw/train.py, imported by main() (beside this file: a script's folder is on its import path)


class GlobalBatch(NamedTuple):
    """Every emulated rank's batch of one step; `index` is their indices in rank order."""

    batches: list
    index: torch.Tensor


class GlobalBatchLoader:
    """Steps the N per-rank loaders of a DDP run together: one item is the global batch of one step."""

    def __init__(self, loaders):
        self.loaders = loaders

    def __iter__(self):
        for per_rank in zip(*self.loaders):
            yield GlobalBatch(list(per_rank), torch.cat([b.index for b in per_rank]))

    def __len__(self) -> int:
        return len(self.loaders[0])


class GlobalSampler:
    """set_epoch reaches every rank's sampler; the trace's sampler facts are rank 0's."""

    def __init__(self, samplers):
        self.samplers = samplers

    def set_epoch(self, epoch: int) -> None:
        for sampler in self.samplers:
            sampler.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.samplers[0])

    def __getattr__(self, name):
        return getattr(self.samplers[0], name)


def emulated_world_size(cfg) -> int:
    if cfg.trainer.devices == "auto":
        raise ConfigError("raw/reference.py needs `trainer.devices` as a number (the world size to emulate)")
    return cfg.trainer.devices * cfg.trainer.num_nodes


def bend_train() -> None:
    parse, build_loaders, batch_loss, recorder = (
        train.parse_raw_config,
        train.build_loaders,
        train.batch_loss,
        train.TraceRecorder,
    )
    world = {}

    def parse_and_check(argv):
        cfg = parse(argv)
        world["size"] = emulated_world_size(cfg)
        return cfg

    def global_loaders(cfg, rank, world_size):
        per_rank = [build_loaders(cfg, r, world["size"]) for r in range(world["size"])]
        loaders, samplers, _ = zip(*per_rank)
        val_loader = build_loaders(cfg, 0, 1)[2]  # the one process validates every sample
        return GlobalBatchLoader(loaders), GlobalSampler(samplers), val_loader

    def mean_of_rank_losses(model, batch, device):
        return sum(batch_loss(model, b, device) for b in batch.batches) / len(batch.batches)

    def reference_recorder(run_dir, **kwargs):
        kwargs["extra_meta"] = {**kwargs.get("extra_meta", {}), "reference_world_size": world["size"]}
        return recorder(run_dir, **kwargs)

    train.SIDE = "reference"
    train.parse_raw_config, train.build_loaders, train.batch_loss = parse_and_check, global_loaders, mean_of_rank_losses
    train.TraceRecorder = reference_recorder


def main(argv: list[str]) -> int:
    if "RANK" in os.environ:
        print(
            "raw/reference.py: error: it runs as one plain process: start it with python, not torchrun", file=sys.stderr
        )
        return 2
    global train
    import train

    bend_train()
    return train.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
