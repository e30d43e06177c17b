"""Backward and clipping, where torch runs them: every backward's root (the micro-batches of a
step, and which batch each consumed), and each clip_grad_norm_/clip_grad_value_ with its arguments,
the total norm it measured before clipping and the order of the parameters it was given."""

from __future__ import annotations

import functools
import inspect
import math

import torch

from ddp_parity.hooks import data
from ddp_parity.hooks.state import guarded, recording


def install() -> None:
    original_tensor_backward = torch.Tensor.backward
    original_autograd_backward = torch.autograd.backward

    @functools.wraps(original_tensor_backward)
    def tensor_backward(self, *args, **kwargs):
        _note_roots([self])
        return _inside_backward(original_tensor_backward, self, *args, **kwargs)

    @functools.wraps(original_autograd_backward)
    def autograd_backward(tensors, *args, **kwargs):
        _note_roots([tensors] if isinstance(tensors, torch.Tensor) else list(tensors))
        return _inside_backward(original_autograd_backward, tensors, *args, **kwargs)

    torch.Tensor.backward = tensor_backward
    torch.autograd.backward = autograd_backward

    for name, note in (("clip_grad_norm_", _note_clip_norm), ("clip_grad_value_", _note_clip_value)):
        original = getattr(torch.nn.utils.clip_grad, name)
        wrapper = _clipping(original, note)
        setattr(torch.nn.utils.clip_grad, name, wrapper)
        setattr(torch.nn.utils, name, wrapper)


def _inside_backward(fn, *args, **kwargs):
    """Run a backward with the flag up: Tensor.backward calling torch.autograd.backward is one root."""
    live = recording()
    if live is None:
        return fn(*args, **kwargs)
    was = getattr(live.local, "backward", False)
    live.local.backward = True
    try:
        return fn(*args, **kwargs)
    finally:
        live.local.backward = was


@guarded("backward roots (loss, micro_batches)")
def _note_roots(roots: list) -> None:
    live = recording()
    if live is None or getattr(live.local, "backward", False) or getattr(live.local, "ours", False):
        return
    if torch._C._current_graph_task_id() != -1:
        return  # a backward inside a backward (a reentrant checkpoint): not a root of the program's
    for root in roots:
        if isinstance(root, torch.Tensor):
            live.roots.append(root.detach())
            live.root_divisors.append(root_divisors(root))
    live.grad_sync.append(_grad_sync(live))
    data.consume_batch(live)


# autograd nodes of a multiplication or division whose second operand is a saved constant (a number, or a one-element
# tensor that takes no gradient): `loss / 2`, `loss * 0.5`, Lightning's `closure_loss / normalize`
CONSTANT_SCALINGS = {"DivBackward0": True, "DivBackward1": True, "MulBackward0": False, "MulBackward1": False}


def root_divisors(root: torch.Tensor) -> list[float]:
    """The divisions by a constant at the top of a backward root's graph, outermost first: a loop's
    `(loss / 2).backward()` gives [2.0]; Lightning dividing what training_step returned (`loss / 2`) by
    accumulate_grad_batches 2 gives [2.0, 2.0]; a multiplication by c counts as a division by 1 / c. Read before
    the backward runs (autograd frees what it saved), so that a factor between two sides' losses can be placed:
    in the loop's own division or in the framework's."""
    out: list[float] = []
    try:  # what cannot be read ends the list there: the root itself is noted whatever autograd holds
        node = root.grad_fn
        while node is not None and len(out) < 8:
            divides = CONSTANT_SCALINGS.get(type(node).__name__)
            constant = _saved_constant(getattr(node, "_saved_other", None)) if divides is not None else None
            inputs = [fn for fn, _ in node.next_functions]
            if constant is None or len(inputs) != 2 or inputs[0] is None or inputs[1] is not None:
                break  # not a scaling of the tensor below by a constant: the loss itself starts here
            out.append(constant if divides else 1.0 / constant)
            node = inputs[0]
    except Exception:
        pass
    return out


def _saved_constant(value) -> float | None:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.requires_grad or value.device.type != "cpu":
            return None  # an accelerator's tensor (GradScaler's scale) is never read: that would wait for the device
        value = value.item()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0 and math.isfinite(value):
        return float(value)
    return None


def _grad_sync(live) -> bool | None:
    """Whether the DDP module(s) the program built will all-reduce this backward's gradients
    (no_sync or require_backward_grad_sync = False say no)."""
    flags = [getattr(m(), "require_backward_grad_sync", None) for m in live.wrapped_modules if m() is not None]
    flags = [f for f in flags if f is not None]
    return all(flags) if flags else None


def _clipping(original, note):
    signature = inspect.signature(original)
    names = list(signature.parameters)
    simple = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in signature.parameters.values())

    @functools.wraps(original)
    def clip(*args, **kwargs):
        if recording() is None:
            return original(*args, **kwargs)
        bound = _bound(signature, names if simple else None, args, kwargs)
        if bound is None:
            return original(*args, **kwargs)
        args, kwargs, arguments = bound
        result = original(*args, **kwargs)
        note(arguments, result)
        return result

    return clip


@guarded("clipping arguments")
def _bound(signature, names, args, kwargs):
    """(args, kwargs, the call's arguments by name) with `parameters` made a list (read twice: by us and
    by torch, same order). A call by position and keyword to a signature of plain parameters is named
    here (signature.bind costs a tenth of a millisecond a step); any other goes through bind."""
    if names is not None and len(args) <= len(names) and all(k in names[len(args) :] for k in kwargs):
        arguments = {**dict(zip(names, args)), **kwargs}
        if "parameters" in arguments:
            parameters = arguments["parameters"]
            arguments["parameters"] = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
            if args:
                return (arguments["parameters"], *args[1:]), kwargs, arguments
            return args, {**kwargs, "parameters": arguments["parameters"]}, arguments
    bound = signature.bind(*args, **kwargs)
    parameters = bound.arguments["parameters"]
    bound.arguments["parameters"] = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    return bound.args, bound.kwargs, bound.arguments


@guarded("clip_grad_norm_")
def _note_clip_norm(arguments: dict, total_norm) -> None:
    live = recording()
    if live is None:
        return
    live.clip_calls += 1
    if live.clip is not None:
        return  # the first clip of a step measured the gradients before clipping
    norm_type = float(_number(arguments.get("norm_type", 2.0)))
    live.clip = {
        "total_norm": total_norm.detach() if isinstance(total_norm, torch.Tensor) else total_norm,
        "norm_type": "inf" if math.isinf(norm_type) else norm_type,
        "max_norm": _number(arguments["max_norm"]),
        "params": len(arguments["parameters"]),
        "order": [id(p) for p in arguments["parameters"]],  # named at the step's record (the model known)
        "foreach": arguments.get("foreach"),
        "error_if_nonfinite": arguments.get("error_if_nonfinite", False),
    }


@guarded("clip_grad_value_")
def _note_clip_value(arguments: dict, _result) -> None:
    live = recording()
    if live is not None and live.clip_value is None:
        live.clip_value = {"clip_value": _number(arguments["clip_value"]), "params": len(arguments["parameters"])}


def _number(value):
    """A Python number from an argument (a CPU tensor read; a device tensor's value is not waited for)."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.device.type == "cpu" and value.numel() == 1 else repr(value)
    return value
