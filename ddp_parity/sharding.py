"""FSDP2 for both twins: the one sharding plan they apply, and the whole tensors behind sharded ones.

`shard(net, plan)` is what raw/train.py does by hand and what the Lightning and Fabric twins do in
`configure_model`: `fully_shard` on each planned block, then on the root (which takes the rest),
every parameter becoming a DTensor holding this rank's slice of dim 0. A DTensor's digest is taken
of its full tensor (`full_tensor`, an all-gather: every rank calls it at the same point), so the
trace of a sharded run compares bit for bit with a DDP run's and with any other world size's.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.utils._foreach_utils import _has_foreach_support  # get_total_norm's own choice of kernel

from ddp_parity.config import ConfigError, FSDPConfig, ModelConfig
from ddp_parity.model import build_net

if TYPE_CHECKING:
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def wrapped_module_names(net: nn.Module, plan: FSDPConfig) -> list[str]:
    """The blocks that get their own fully_shard: the plan's names, or every Linear layer."""
    if plan.wrap is None:
        return [name for name, module in net.named_modules() if isinstance(module, nn.Linear)]
    known = [name for name, _ in net.named_modules() if name]
    unknown = [name for name in plan.wrap if name not in known]
    if unknown:
        raise ConfigError(f"`fsdp.wrap` names {unknown}, which the network does not have; it has {known}")
    return list(plan.wrap)


def check_fsdp_plan(model: ModelConfig, plan: FSDPConfig) -> None:
    """`fsdp.wrap` names modules the configured network has (built on the meta device: no memory,
    no RNG draw); else ConfigError naming the key, before any process is launched."""
    with torch.device("meta"):
        wrapped_module_names(build_net(model), plan)


def mixed_precision_policy(plan: FSDPConfig) -> MixedPrecisionPolicy:
    from torch.distributed.fsdp import MixedPrecisionPolicy  # FSDP only where it shards: see loaded_class

    return MixedPrecisionPolicy(param_dtype=DTYPES[plan.param_dtype], reduce_dtype=DTYPES[plan.reduce_dtype])


def shard(net: nn.Module, plan: FSDPConfig, mesh=None) -> nn.Module:
    """fully_shard each planned block, then the root: the blocks' parameters are gathered one block at
    a time in forward and backward; the root's (whatever no block took) for the whole step."""
    from torch.distributed.fsdp import fully_shard  # FSDP only where it shards: see loaded_class

    options = {
        "mesh": mesh,
        "reshard_after_forward": plan.reshard_after_forward,
        "mp_policy": mixed_precision_policy(plan),
    }
    for name in wrapped_module_names(net, plan):
        fully_shard(net.get_submodule(name), **options)
    fully_shard(net, **options)
    return net


def loaded_class(module: str, name: str) -> type | None:
    """`module.name` if something in this process imported `module`, else None. Nothing can be an
    FSDPModule or a DTensor before FSDP or DTensor was imported, and importing them costs every process
    half a second of start-up: a DDP run, the recorder and the comparison never pay it."""
    return getattr(sys.modules.get(module), name, None)


def is_fsdp_module(module: nn.Module) -> bool:
    fsdp_module = loaded_class("torch.distributed.fsdp", "FSDPModule")
    return fsdp_module is not None and isinstance(module, fsdp_module)


def is_dtensor(tensor: torch.Tensor) -> bool:
    dtensor = loaded_class("torch.distributed.tensor", "DTensor")
    return dtensor is not None and isinstance(tensor, dtensor)


def is_sharded(model: nn.Module) -> bool:
    return is_fsdp_module(model) or any(is_fsdp_module(m) for m in model.modules())


def sharding_facts(model: nn.Module) -> dict[str, dict] | None:
    """What fully_shard was given, read back from FSDP2's own state (not from the config, so a plan
    hard-coded differently on one side shows): {module name relative to the outermost fully_shard
    module: its param_dtype, reduce_dtype and reshard_after_forward}; None for an unsharded model."""
    sharded = [(name, module) for name, module in model.named_modules() if is_fsdp_module(module)]
    if not sharded:
        return None
    root = sharded[0][0]
    return {relative_name(name, root): _fully_shard_facts(module) for name, module in sharded}


def relative_name(name: str, root: str) -> str:
    return "" if name == root else name[len(root) + 1 :] if root else name


def _fully_shard_facts(module: FSDPModule) -> dict:
    state = module._get_fsdp_state()
    group = state._fsdp_param_group  # None for a module whose parameters all went to its blocks
    policy = group.mp_policy if group is not None else state._mp_policy
    return {
        "param_dtype": str(policy.param_dtype).removeprefix("torch."),
        "reduce_dtype": str(policy.reduce_dtype).removeprefix("torch."),
        "reshard_after_forward": None if group is None else group.post_forward_mesh_info is not None,
    }


def full_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole tensor (a collective: every rank must call it), any other tensor as it is."""
    return tensor.full_tensor() if is_dtensor(tensor) else tensor


def total_grad_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """torch.nn.utils.get_total_norm, bit for bit, over the full gradients: under FSDP2 the same bits
    as under DDP (a norm over shards, then across ranks, would round in another order). Sharded
    gradients are gathered one at a time: a rank holds one whole tensor above its shards, never the
    whole model's."""
    if not any(is_dtensor(g) for g in grads):
        return torch.nn.utils.get_total_norm(grads)  # plain tensors: torch's own, unchanged
    norms = [_tensor_norm(full_tensor(g)) for g in grads]
    return torch.linalg.vector_norm(torch.stack([n.to(norms[0].device) for n in norms]), 2.0)


def total_grad_norm_parts(grads: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    """(total_grad_norm(grads), and where get_total_norm measures them as one group -- plain tensors of
    one device and dtype -- each gradient's norm as it did, bit for bit: the layer sketch's gradient
    norms, not measured twice)."""
    if grads and not any(is_dtensor(g) for g in grads):
        device, dtype = grads[0].device, grads[0].dtype
        if all(g.device == device and g.dtype == dtype for g in grads):
            norms = grad_norms(grads)
            return torch.linalg.vector_norm(torch.stack(norms), 2.0), norms  # get_total_norm's one group
    return total_grad_norm(grads), None


def grad_norms(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each gradient's 2-norm by the kernel get_total_norm uses for plain tensors of one device: the
    foreach kernel where the device has one (a CPU too), linalg.vector_norm elsewhere."""
    if _has_foreach_support(grads, grads[0].device):
        return list(torch._foreach_norm(grads, 2.0))
    return [torch.linalg.vector_norm(g, 2.0) for g in grads]


def _tensor_norm(tensor: torch.Tensor) -> torch.Tensor:
    """One tensor's 2-norm with the kernel get_total_norm uses on its device: the foreach kernel where
    the device has one, linalg.vector_norm elsewhere (CPU); the two can round apart with several threads."""
    if _has_foreach_support([tensor], tensor.device):
        return torch._foreach_norm([tensor], 2.0)[0]
    return torch.linalg.vector_norm(tensor, 2.0)
