"""Which module a step trains: the one that owns the optimizer's parameters, among the modules the
program gave DDP and the modules it called at the top before its first step, unwrapped (DDP's
`module`, Lightning's wrapper's `_forward_module`, torch.compile's `_orig_mod`) so that its parameter
names are the ones an explicit recorder gives (`final.safetensors` pairs tensors by them).

A program that gives DDP several modules trained by one optimizer (I-JEPA's context encoder, predictor and
target encoder) has no one module that owns the step's parameters: the model is then every module it gave DDP,
held as one (`Wrapped`), each named as the program's own variable names it, as a LightningModule holding them
names its attributes."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

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


def model_of(
    optimizer: torch.optim.Optimizer,
    candidates: list[torch.nn.Module],
    wrappers: list[torch.nn.Module] = (),
    also: set[int] = frozenset(),
) -> torch.nn.Module | None:
    """The candidate (unwrapped) owning the most of the optimizer's parameters and of those of the other
    optimizers built (`also`, their ids: a GAN's generator, whose optimizer steps after the discriminator's);
    of equals, the first given (a module given to DDP before one called at the top). Where none owns them all
    and the modules given to DDP (`wrappers`, in the order they were wrapped) own more of them together, those
    modules held as one (`Wrapped`): a GAN's two networks are then both the model, their final weights both
    compared. Where neither owns them all, the smallest live module that does (`smallest_owner`): a model never
    called, whose methods call its parts, so that its digests and final state cover everything trained."""
    wanted = _param_ids_of(optimizer) | set(also)
    best, best_count = None, 0
    for candidate in candidates:
        model = unwrapped(candidate)
        count = len(wanted & _param_ids(model))
        if count > best_count:
            best, best_count = model, count
    parts = _distinct([unwrapped(w) for w in wrappers])
    if best_count < len(wanted) and len(parts) > 1:
        if len(wanted & set().union(*(_param_ids(m) for m in parts))) > best_count:
            return Wrapped(parts, variable_names(parts, wrappers))
    if best_count < len(wanted):
        # a model the loop uses only through its own methods (an RL agent's get_action_and_value) is never
        # called: the modules called are its parts, each owning a part of what the optimizer trains
        owner = smallest_owner(wanted)
        if owner is None:  # the other optimizers' parameters held elsewhere: this one's alone
            owner = smallest_owner(_param_ids_of(optimizer))
        if owner is not None and len(wanted & _param_ids(owner)) > best_count:
            return owner
    return best


def smallest_owner(wanted: set[int]) -> torch.nn.Module | None:
    """The live module owning every parameter in `wanted` (their ids) with the fewest parameters, then the fewest
    submodules (a module, not a wrapper or a container holding it alone); None where none owns them all. A search
    of every object the garbage collector tracks: run once, at the first step, and only where no module the
    program called or gave DDP owns the optimizer's parameters."""
    best, best_size = None, None
    for obj in gc.get_objects():
        kind = type(obj)  # never obj.__class__: a proxy of the program's (a deprecated alias) answers it with a warning
        if not issubclass(kind, torch.nn.Module) or issubclass(kind, Wrapped):
            continue
        try:  # a half-built or odd module of the program's: it owns nothing we can read
            owned = _param_ids(obj)
            if not wanted <= owned:
                continue
            size = (len(owned), sum(1 for _ in obj.modules()))
        except Exception:
            continue
        if best_size is None or size < best_size:
            best, best_size = obj, size
    return best


def _param_ids_of(optimizer: torch.optim.Optimizer) -> set[int]:
    return {id(p) for group in optimizer.param_groups for p in group["params"]}


class Wrapped(torch.nn.Module):
    """The modules a program gave DDP one by one, held as one module (they are its children, unchanged),
    never called: the steps call each through its own wrapper."""

    def __init__(self, parts: list[torch.nn.Module], names: list[str]) -> None:
        super().__init__()
        for name, part in zip(names, parts, strict=True):
            self.add_module(name, part)

    def forward(self, *args, **kwargs):
        raise RuntimeError("ddp-parity's view of several DDP modules is never called")


def variable_names(parts: list[torch.nn.Module], wrappers: list[torch.nn.Module]) -> list[str]:
    """Each part's name as the program's code holds it (the part or its wrapper): a variable of a frame of
    the program, innermost first, or an attribute of an object one holds (a trainer's `self.model`); where
    none names it, or two would share a name, `ddp<i>` by the order they were wrapped."""
    index = {id(part): i for i, part in enumerate(parts)}
    for wrapper in wrappers:
        index.setdefault(id(wrapper), index.get(id(unwrapped(wrapper)), -1))
    names: list[str | None] = [None] * len(parts)
    frame = sys._getframe(1)
    while frame is not None and None in names:
        if not _tool_frame(frame):
            for name, value in _named_values(frame.f_locals):
                i = index.get(id(value), -1)
                if i >= 0 and names[i] is None and _usable(name) and name not in names:
                    names[i] = name
        frame = frame.f_back
    return [name if name is not None else f"ddp{i}" for i, name in enumerate(names)]


def _named_values(scope: dict):
    """A scope's variables, then the attributes of the objects they hold (one level: `self.encoder`)."""
    items = list(scope.items())
    yield from items
    for _, value in items:
        try:  # an object of the program's may answer an attribute lookup with anything: it names nothing then
            attributes = value._modules if isinstance(value, torch.nn.Module) else getattr(value, "__dict__", None)
            if isinstance(attributes, dict) and not isinstance(value, type):
                yield from list(attributes.items())
        except Exception:
            continue


def _usable(name: str) -> bool:
    """A name a module attribute can take, and that no wrapper attribute or private name shadows."""
    return name.isidentifier() and not name.startswith("_") and name not in WRAPPER_ATTRIBUTES


_TOOL_ROOTS = (Path(torch.__file__).parent, Path(__file__).resolve().parents[1])


def _tool_frame(frame) -> bool:
    """A frame of torch or of ddp-parity: its variables are not the program's names."""
    path = Path(frame.f_code.co_filename)
    return any(root in path.parents for root in _TOOL_ROOTS)


def _distinct(modules: list[torch.nn.Module]) -> list[torch.nn.Module]:
    seen: set[int] = set()
    return [m for m in modules if not (id(m) in seen or seen.add(id(m)))]


def names_of(model: torch.nn.Module | None) -> dict[int, str]:
    return parameter_names(model) if model is not None else {}


def _param_ids(module: torch.nn.Module) -> set[int]:
    return {id(p) for p in module.parameters()}


def lightning_loop_facts(modules: list[torch.nn.Module]) -> dict | None:
    """Where a module (or one it wraps) is a LightningModule attached to a Trainer: the trainer's
    accumulate_grad_batches and whether the module optimizes automatically. Under automatic optimization
    Lightning divides what training_step returns by accumulate_grad_batches before backward, its own division
    of the loss, which the comparison tells from a division the port wrote (compare/causes/forward.py)."""
    for module in modules:
        for _ in range(8):  # wrappers nest a few deep at most (DDP > Lightning's wrapper > compile)
            trainer = getattr(module, "_trainer", None)  # LightningModule's, read without Lightning imported
            accumulate = getattr(trainer, "accumulate_grad_batches", None)
            if isinstance(accumulate, int) and not isinstance(accumulate, bool):
                automatic = getattr(module, "automatic_optimization", None)
                return {
                    "accumulate_grad_batches": accumulate,
                    "automatic_optimization": automatic if isinstance(automatic, bool) else None,
                }
            module = next((getattr(module, a) for a in WRAPPER_ATTRIBUTES if hasattr(module, a)), None)
            if not isinstance(module, torch.nn.Module):
                break
    return None
