"""Which module a step trains: the one that owns the optimizer's parameters, among the modules the
program gave DDP and the modules it called at the top before its first step, unwrapped (DDP's
`module`, Lightning's wrapper's `_forward_module`, torch.compile's `_orig_mod`) so that its parameter
names are the ones an explicit recorder gives (`final.safetensors` pairs tensors by them)."""

from __future__ import annotations

import torch

from ddp_parity.fingerprints import parameter_names

WRAPPER_ATTRIBUTES = ("module", "_forward_module", "_orig_mod")


def unwrapped(module: torch.nn.Module) -> torch.nn.Module:
    """The module inside every wrapper around it."""
    for _ in range(8):  # wrappers nest a few deep at most (DDP > Lightning's wrapper > compile)
        inner = next(
            (
                getattr(module, a)
                for a in WRAPPER_ATTRIBUTES
                if isinstance(getattr(module, a, None), torch.nn.Module) and getattr(module, a) is not module
            ),
            None,
        )
        if inner is None or _param_ids(inner) != _param_ids(module):
            return module  # an attribute that is a part, not the whole (a module of its own named `module`)
        module = inner
    return module


def model_of(optimizer: torch.optim.Optimizer, candidates: list[torch.nn.Module]) -> torch.nn.Module | None:
    """The candidate (unwrapped) owning the most of the optimizer's parameters; of equals, the first
    given (a module given to DDP before one called at the top)."""
    wanted = {id(p) for group in optimizer.param_groups for p in group["params"]}
    best, best_count = None, 0
    for candidate in candidates:
        model = unwrapped(candidate)
        count = len(wanted & _param_ids(model))
        if count > best_count:
            best, best_count = model, count
    return best


def names_of(model: torch.nn.Module | None) -> dict[int, str]:
    return parameter_names(model) if model is not None else {}


def _param_ids(module: torch.nn.Module) -> set[int]:
    return {id(p) for p in module.parameters()}
