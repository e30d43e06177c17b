"""Joining the process group under torchrun, safely across elastic restarts, and who this process is.

For your own loop under `torchrun --max-restarts=N`:

    import ddp_parity
    ddp_parity.init_process_group("gloo")   # instead of torch.distributed.init_process_group("gloo")
"""

from __future__ import annotations

import gc
import os
from datetime import timedelta

import torch.distributed as dist

from ddp_parity.config import ConfigError

# where a launcher tells a worker it stands in the job
WORKER_ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR")
LAUNCH_ENV_KEYS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", *WORKER_ENV_KEYS)
LAUNCH_ENV_PREFIXES = ("TORCHELASTIC_", "SLURM_")


def init_process_group(backend: str | None = None, **kwargs) -> None:
    """`torch.distributed.init_process_group` that survives `torchrun --max-restarts`.

    torchrun's agent keeps one TCPStore across restarts, and env:// adds no per-attempt prefix, so
    a restarted worker can read a dead worker's gloo address and hang or fail to connect. Under the
    agent's store each attempt (TORCHELASTIC_RESTART_COUNT) gets a key space of its own; anywhere
    else, or when you pass your own `store` / `init_method`, this is the plain call. Other keyword
    arguments (`timeout`, `device_id`, ...) are passed on.
    """
    own_rendezvous = "store" in kwargs or "init_method" in kwargs
    if own_rendezvous or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        dist.init_process_group(backend=backend, **kwargs)
        return
    rank = kwargs.pop("rank", int(os.environ["RANK"]))
    world_size = kwargs.pop("world_size", int(os.environ["WORLD_SIZE"]))
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world_size,
        is_master=False,
        timeout=kwargs.get("timeout") or timedelta(minutes=5),
    )
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    prefixed = dist.PrefixStore(f"ddp-parity/attempt{attempt}", store)
    dist.init_process_group(backend=backend, store=prefixed, rank=rank, world_size=world_size, **kwargs)


def destroy_process_group() -> None:
    """`torch.distributed.destroy_process_group`, after freeing what may still hold the group.

    A DDP wrapper in a reference cycle outlives `del` until the garbage collector runs; its Reducer
    holds the process group, and freed at interpreter exit it joins gloo's threads there: a hang, or
    `terminate called without an active exception` and a SIGABRT of a rank that had finished its
    work (seen in about one run in four of two ranks on two cores). Drop your own references to the
    DDP wrapper (and any traceback's frames) first; this collects the rest, then destroys the group.
    """
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def init_process_group_from_env(backend: str) -> None:
    """The twins' name for `init_process_group` (env:// outside torchrun's agent store)."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        init_process_group(backend)
    else:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group(backend=backend, init_method="env://", rank=rank, world_size=world_size)


def global_rank() -> int:
    """This process's global rank under any launcher.

    The process group knows it once initialised. Before that: torchrun sets RANK; Lightning's own
    launcher sets only LOCAL_RANK, NODE_RANK and WORLD_SIZE (global rank = node rank x processes per
    node + local rank, where LOCAL_WORLD_SIZE, when set, gives the processes per node); a plain
    process is rank 0.
    """
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    if os.environ.get("RANK", "").isdigit():
        return int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0") or 0)
    node_rank = int(os.environ.get("NODE_RANK", os.environ.get("GROUP_RANK", "0")) or 0)
    per_node = os.environ.get("LOCAL_WORLD_SIZE", "")
    if node_rank and per_node.isdigit():
        return node_rank * int(per_node) + local_rank
    return local_rank  # node 0 (or an unknown layout: the local rank, as the best that is known)


def world_facts() -> dict:
    """Where this process stands in the job, as it sees it. A task srun started for Lightning's
    SLURMEnvironment has no LOCAL_RANK / NODE_RANK: SLURM_LOCALID / SLURM_NODEID say it there."""
    initialised = dist.is_available() and dist.is_initialized()
    return {
        "rank": global_rank(),
        "local_rank": _first_int("LOCAL_RANK", "SLURM_LOCALID"),
        "world_size": dist.get_world_size() if initialised else int(os.environ.get("WORLD_SIZE", "1") or 1),
        "node_rank": _first_int("NODE_RANK", "GROUP_RANK", "SLURM_NODEID"),
    }


def _first_int(*keys: str) -> int:
    """The first of these environment variables that holds an integer, else 0."""
    return next((int(os.environ[k]) for k in keys if os.environ.get(k, "").isdigit()), 0)


def launch_env() -> dict:
    """The launch-related environment variables this process was given (only those set)."""
    return {
        key: value
        for key, value in sorted(os.environ.items())
        if key in LAUNCH_ENV_KEYS or key.startswith(LAUNCH_ENV_PREFIXES)
    }


def check_master_port_free(world_size: int) -> None:
    """Lightning's and Fabric's own launchers make this process the rendezvous server on MASTER_PORT:
    a port in use would fail deep inside them, on every rank. Say so first, in one line. Not for a
    process torchrun or srun started (they own the rendezvous, and rank 0's store may hold the port)."""
    import socket

    started_by_a_launcher = any(key in os.environ for key in ("LOCAL_RANK", "TORCHELASTIC_RUN_ID", "SLURM_PROCID"))
    addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "0") or 0)
    if world_size < 2 or started_by_a_launcher or not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((addr, port))
        except OSError:
            raise ConfigError(
                f"MASTER_PORT {port} on {addr} is already in use: choose a free port (compare/run.py picks one)"
            ) from None
