"""ddp_parity.destroy_process_group: a DDP wrapper the caller dropped but a reference cycle keeps is
freed before the group is destroyed, so its Reducer never outlives the group to interpreter exit."""

from __future__ import annotations

import weakref

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_parity


def test_a_dropped_ddp_wrapper_in_a_cycle_is_freed_before_the_group_goes():
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    wrapper = DDP(torch.nn.Linear(3, 2))
    wrapper(torch.ones(4, 3)).sum().backward()  # the Reducer has run a collective
    wrapper.itself = wrapper  # a cycle: `del` alone leaves it to the garbage collector
    alive = weakref.ref(wrapper)
    del wrapper
    assert alive() is not None  # the state the helper exists for
    ddp_parity.destroy_process_group()
    assert alive() is None and not dist.is_initialized()
    ddp_parity.destroy_process_group()  # and again, with no group: nothing to do
