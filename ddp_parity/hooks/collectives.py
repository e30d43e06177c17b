"""The program's own collectives: each call of torch.distributed's all_reduce, all_gather, broadcast,
reduce, reduce_scatter, all_gather_into_tensor, reduce_scatter_tensor, all_to_all and
all_to_all_single the program (or a library it calls: Lightning's metric sync) makes, with its op,
reduce op, dtype and shape, whether it was given the gradients, the module that called it (past
torch's own frames, but for torch's code that makes collectives of its own: torch.distributed.optim's), and a
digest of its result after the op (a CPU tensor of at most DIGEST_LIMIT elements, synchronous calls).

DDP's own bucket reductions go through the process group's C++ API and are not seen; neither are
the calls torch.distributed makes inside itself (broadcast_object_list's broadcast), nor the
recorder's own. A step's record lists those made since the previous optimizer step returned (at
most PER_STEP, `collectives_count` counts them all); those after the last step go to
rank{r}.hooks.json.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys

import torch
import torch.distributed as dist

from ddp_parity.hooks.state import guarded, recording

OPS = (
    "all_reduce",
    "all_gather",
    "broadcast",
    "reduce",
    "reduce_scatter",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
)
PER_STEP = 32  # collectives kept per step record (a hand-written average calls one per parameter)
DIGEST_LIMIT = 1 << 16  # elements of a result digested (CPU only): a metric, a loss, a small gradient


def install() -> None:
    for name in OPS:
        original = getattr(dist, name, None)
        if original is not None:
            parameters = list(inspect.signature(original).parameters)
            setattr(dist, name, _wrapped(name, original, parameters))


def _wrapped(name: str, original, parameters: list[str]):
    where = {key: parameters.index(key) for key in ("op", "async_op") if key in parameters}
    first = parameters[0]  # every op's first parameter holds its result (a tensor or a list of them)

    def result_of(args, kwargs):
        return args[0] if args else kwargs.get(first)

    @functools.wraps(original)
    def collective(*args, **kwargs):
        result = original(*args, **kwargs)
        live = recording()
        if live is not None and not getattr(live.local, "ours", False):
            _note(live, name, result_of(args, kwargs), args, kwargs, where, _caller(sys._getframe(1)))
        return result

    return collective


# torch's code that makes collectives of its own, whoever called it: ZeroRedundancyOptimizer's broadcasts of the
# parameters after its step, a model averager's or Join's all_reduces
MAKERS = ("torch.distributed.optim", "torch.distributed.algorithms")


def _caller(frame) -> str | None:
    """The module that made the collective: past torch's own frames (torch.distributed.nn's differentiable
    all_gather is the program's call), except torch's code that makes collectives of its own (MAKERS), named
    itself whether the program or a library called it."""
    for _ in range(16):
        name = frame.f_globals.get("__name__") if frame is not None else None
        if frame is None or not (name == "torch" or str(name).startswith("torch.")):
            return name
        if any(name == maker or name.startswith(maker + ".") for maker in MAKERS):
            return name
        frame = frame.f_back
    return name


def _argument(args, kwargs, where: dict, key: str, default=None):
    if key in kwargs:
        return kwargs[key]
    at = where.get(key)
    return args[at] if at is not None and len(args) > at else default


@guarded("the program's collectives")
def _note(live, name: str, result, args, kwargs, where: dict, caller) -> None:
    live.collectives_count += 1
    if len(live.collectives) >= PER_STEP:
        return
    tensors = (
        [result] if isinstance(result, torch.Tensor) else [t for t in (result or []) if isinstance(t, torch.Tensor)]
    )
    entry = {"op": name, "caller": caller}
    if "op" in where:
        op = _argument(args, kwargs, where, "op", dist.ReduceOp.SUM)
        entry["reduce_op"] = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    if tensors:
        entry["dtype"] = str(tensors[0].dtype).removeprefix("torch.")
        entry["shape"] = list(tensors[0].shape)
        if len(tensors) > 1 or not isinstance(result, torch.Tensor):
            entry["tensors"] = len(tensors)
        if _of_gradients(live, tensors):
            entry["of"] = "grad"
        if _argument(args, kwargs, where, "async_op", False):
            entry["async"] = True
        else:
            digest = _digest(tensors)
            if digest is not None:
                entry["digest"] = digest
    live.collectives.append(entry)


def _digest(tensors: list) -> str | None:
    if any(t.device.type != "cpu" for t in tensors) or sum(t.numel() for t in tensors) > DIGEST_LIMIT:
        return None
    h = hashlib.blake2b(digest_size=8)
    for t in tensors:
        h.update(t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _of_gradients(live, tensors: list) -> bool:
    """Whether a tensor given is a parameter's .grad (of an optimizer the program built)."""
    key = (live.steps, len(live.roots))  # gradients are made anew by a backward (zero_grad(set_to_none))
    cached = live.facts.get("_grad_ids")
    if cached is None or cached[0] != key:
        ids = set()
        for optimizer, _ids, _facts in live.facts.get("_built", []):
            for group in optimizer.param_groups:
                ids.update(id(p.grad) for p in group["params"] if p.grad is not None)
        cached = live.facts["_grad_ids"] = (key, ids)
    return any(id(t) in cached[1] for t in tensors)


def after_last_step(live) -> dict | None:
    """The collectives made after the last recorded step (for rank{r}.hooks.json)."""
    if not live.collectives_count:
        return None
    return {"after_step": live.steps, "count": live.collectives_count, "items": live.collectives}
