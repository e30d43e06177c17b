"""Joining the process group under torchrun, safely across elastic restarts."""

from __future__ import annotations

import os

import torch.distributed as dist


def init_process_group_from_env(backend: str) -> None:
    """init_process_group from torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT).

    torchrun's agent keeps one TCPStore across restarts, and env:// adds no per-attempt prefix, so
    a restarted worker can read a dead worker's gloo address and hang or fail to connect (seen here
    with --max-restarts, raw and Lightning alike). Under the agent's store each attempt gets a key
    space of its own; elsewhere this is plain env://.
    """
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        dist.init_process_group(backend=backend, init_method="env://", rank=rank, world_size=world_size)
        return
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size, is_master=False)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group(
        backend=backend, store=dist.PrefixStore(f"ddp-parity/attempt{attempt}", store), rank=rank, world_size=world_size
    )
