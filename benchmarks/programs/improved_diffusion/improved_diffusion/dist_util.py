# ruff: noqa: I001, F401  # changed: F401 (os is unused once the MPI setup is commented out)
"""
Helpers for distributed training.
"""

import io
import os
import socket

from .standins import bf  # changed: blobfile is not installed (local files)

# from mpi4py import MPI  # changed: no MPI here; the ranks come from torchrun (env://)
import torch as th
import torch.distributed as dist

# Change this to reflect your cluster layout.
# The GPU for a given rank is (rank % GPUS_PER_NODE).
GPUS_PER_NODE = 8

SETUP_RETRY_COUNT = 3


def setup_dist():
    """
    Setup a distributed process group.
    """
    if dist.is_initialized():
        return

    # changed: the ranks, address and port come from torchrun (env://), not from MPI: the block below is commented out
    # comm = MPI.COMM_WORLD  # changed: as above
    # backend = "gloo" if not th.cuda.is_available() else "nccl"  # changed: as above
    #  # changed: as above
    # if backend == "gloo":  # changed: as above
    #     hostname = "localhost"  # changed: as above
    # else:  # changed: as above
    #     hostname = socket.gethostbyname(socket.getfqdn())  # changed: as above
    # os.environ["MASTER_ADDR"] = comm.bcast(hostname, root=0)  # changed: as above
    # os.environ["RANK"] = str(comm.rank)  # changed: as above
    # os.environ["WORLD_SIZE"] = str(comm.size)  # changed: as above
    #  # changed: as above
    # port = comm.bcast(_find_free_port(), root=0)  # changed: as above
    # os.environ["MASTER_PORT"] = str(port)  # changed: as above
    dist.init_process_group(backend="gloo", init_method="env://")  # changed: gloo on CPU (was backend)


def dev():
    """
    Get the device to use for torch.distributed.
    """
    if th.cuda.is_available():
        return th.device(f"cuda:{dist.get_rank() % GPUS_PER_NODE}")  # changed: was MPI.COMM_WORLD.Get_rank()
    return th.device("cpu")


def load_state_dict(path, **kwargs):
    """
    Load a PyTorch file without redundant fetches across MPI ranks.
    """
    if dist.get_rank() == 0:  # changed: the rank from torch.distributed (was MPI.COMM_WORLD)
        with bf.BlobFile(path, "rb") as f:
            data = f.read()
    else:
        data = None
    data = [data]  # changed: broadcast by torch.distributed (was MPI.COMM_WORLD.bcast)
    dist.broadcast_object_list(data, 0)  # changed: as above
    data = data[0]  # changed: as above
    return th.load(io.BytesIO(data), **kwargs)


def sync_params(params):
    """
    Synchronize a sequence of Tensors across ranks from rank 0.
    """
    for p in params:
        with th.no_grad():
            dist.broadcast(p, 0)


def _find_free_port():
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("", 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        return s.getsockname()[1]
    finally:
        s.close()
