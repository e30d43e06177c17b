"""Fingerprints and facts the recorder takes from a user's objects: digests of batches, parameters
and buffers (bytes, dtype and shape), the names of tied parameters, and the facts of an optimizer
and a sampler. Pure reads: nothing here writes a file or raises on an object it cannot read fully
(a sampler without a length, a batch of any structure)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import weakref
from collections.abc import Iterator
from typing import Any

import torch

from ddp_parity.sharding import full_tensor
from ddp_parity.trace_files import SCHEDULER_BOOKKEEPING


def digest_indices(indices: list[int]) -> str:
    return hashlib.sha256(json.dumps(indices).encode()).hexdigest()[:16]


def batch_fingerprint(batch: Any) -> str | StagedDigest | None:
    """`batch_digest` of a batch (see `batch_contents`), None when a part of it cannot be digested."""
    digest, undigested = batch_contents(batch)
    return None if undigested else digest


def batch_contents(batch: Any) -> tuple[str | StagedDigest, list[str]]:
    """(`batch_digest`, the parts left out of it): hex sha256 over every leaf of a batch except its
    `index` field or key, in a fixed order (sequences in order, dict keys sorted). A tensor enters as
    dtype, shape and raw bytes; a string, bytes, a number, a bool or None by its type and value (a
    file name, a token count). An object of a plain class whose attributes hold a tensor (DETR's
    NestedTensor) enters by its public attributes in name order. Anything else (a generator: reading it
    would consume the user's data; another object; a set, whose order changes between processes) cannot
    be digested deterministically:
    its path (`batch[2]`, `batch['meta']`) and type are returned, and a digest that does not cover the
    whole batch must not be called the batch's (trace.py leaves it out of the record).

    Containers do not enter the digest, so a list of micro-batches digests like one batch holding
    their leaves one after the other. Tensors on an accelerator are copied to the host without
    waiting (non_blocking) and hashed when the trace is next flushed, so digesting never syncs the
    device per step; the digest is the same as for the same tensors on the CPU.
    """
    parts, undigested = [], []
    for path, leaf in _leaves_in(batch, "batch"):
        part = _digest_part(leaf)
        if part is None:
            undigested.append(f"{path}: {type(leaf).__name__}")
        else:
            parts.append(part)
    if all(not isinstance(p, torch.Tensor) or p.device.type == "cpu" for p in parts):
        return sha256_of(parts), undigested
    on_host = [p.to("cpu", non_blocking=True) if isinstance(p, torch.Tensor) else p for p in parts]
    return StagedDigest(on_host), undigested


class StagedDigest:
    """A batch digest whose host copies may still be in flight; `hexdigest()` after a device sync."""

    def __init__(self, parts: list[torch.Tensor | bytes]):
        self.tensors = parts
        self.nbytes = sum(t.numel() * t.element_size() for t in parts if isinstance(t, torch.Tensor))

    def hexdigest(self) -> str:
        return sha256_of(self.tensors)


def sha256_of(parts: list[torch.Tensor | bytes], h=None) -> str:
    """Tensors as dtype, shape and bytes; bytes (a value's typed encoding, `_digest_part`) as they are. `h`: a
    hash to go on with (the parts after those it has taken), else a new one."""
    h = hashlib.sha256() if h is None else h
    for t in parts:
        if isinstance(t, bytes):
            h.update(t)
            continue
        h.update(f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}".encode())
        h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()


INDEX_KEYS = ("index", "indices")  # what a batch carries to name its samples: left out of batch_digest


def _digest_part(leaf: Any) -> torch.Tensor | bytes | None:
    """What enters the digest for one leaf of a batch, None for what cannot be digested by value."""
    if isinstance(leaf, torch.Tensor):
        plain = leaf.layout == torch.strided and leaf.device.type != "meta" and not leaf.is_nested
        return leaf.detach() if plain else None
    if leaf is None or isinstance(leaf, (bool, int, float, complex)):
        text = float.hex(leaf) if type(leaf) is float else repr(leaf)
        return _typed(type(leaf).__name__, text.encode())
    if isinstance(leaf, str):
        return _typed("str", leaf.encode("utf-8", "surrogatepass"))
    if isinstance(leaf, (bytes, bytearray)):
        return _typed("bytes", bytes(leaf))
    if type(leaf).__module__ == "numpy":  # a numpy array or scalar: as the tensor it converts to
        try:
            return torch.as_tensor(leaf).reshape(getattr(leaf, "shape", ()))
        except (TypeError, ValueError, RuntimeError):  # an object array
            return None
    return None


def _typed(kind: str, payload: bytes) -> bytes:
    """A value's bytes behind its type and length: 1 and "1", or "ab","c" and "a","bc", never collide."""
    return f"<{kind}:{len(payload)}>".encode() + payload


def _leaves_in(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            if key not in INDEX_KEYS:
                yield from _leaves_in(obj[key], f"{path}[{key!r}]")
    elif isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a NamedTuple such as our Sample
        for key, value in zip(obj._fields, obj):
            if key not in INDEX_KEYS:
                yield from _leaves_in(value, f"{path}.{key}")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from _leaves_in(value, f"{path}[{i}]")
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            if field.name not in INDEX_KEYS:
                yield from _leaves_in(getattr(obj, field.name), f"{path}.{field.name}")
    elif _holds_tensors(obj):  # a container class of the program's own (DETR's NestedTensor: tensors and a mask)
        for key in sorted(vars(obj)):
            if key not in INDEX_KEYS and not key.startswith("_"):
                yield from _leaves_in(vars(obj)[key], f"{path}.{key}")
    else:
        yield path, obj


def _holds_tensors(obj: Any) -> bool:
    """An object of a plain class whose attributes hold a tensor (never a module, a tensor subclass or a type)."""
    if isinstance(obj, (torch.Tensor, torch.nn.Module, type)):
        return False
    try:  # an object whose attribute lookup raises stays a leaf (undigested), never an error in the user's step
        return any(isinstance(v, torch.Tensor) for v in vars(obj).values())
    except Exception:  # noqa: BLE001
        return False


def batch_indices(batch: Any) -> torch.Tensor | None:
    """The dataset indices a batch carries: a `.index` field (our `Sample`) or an `"index"` key."""
    if isinstance(batch, dict):
        found = batch.get("index", batch.get("indices"))
    else:
        found = getattr(batch, "index", None)
    return found if isinstance(found, torch.Tensor) else None


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside a DistributedDataParallel wrapper (checkpoints never carry `module.`)."""
    return model.module if hasattr(model, "module") and isinstance(model.module, torch.nn.Module) else model


def params_sha256(model: torch.nn.Module) -> str:
    """sha256 of the parameters' and buffers' bytes in registration order; names are left out so that a plain
    network and the LightningModule holding it (`net.` + its names) hash alike."""
    return hash_full_state(model, keep=False)[0]


def hash_full_state(model: torch.nn.Module, keep: bool, h=None) -> tuple[str, dict[str, torch.Tensor]]:
    """The sha256 of the state dict's bytes (buffers too: BatchNorm's running stats), and with `keep`
    its tensors on the CPU. Under FSDP2 each sharded entry is gathered whole, one at a time (a
    collective: every rank calls this), so a rank that keeps nothing holds one full tensor at most.
    `h`: a hash to go on with (one module's state after another's: the state of a module holding both)."""
    h, kept, storages = hashlib.sha256() if h is None else h, {}, set()
    for name, tensor in unwrap(model).state_dict().items():
        if not isinstance(tensor, torch.Tensor):
            continue  # a module's extra state (get_extra_state): no tensor, nothing to compare bitwise
        whole = full_tensor(tensor.detach()).cpu().contiguous()
        h.update(whole.view(-1).view(torch.uint8).numpy().tobytes())
        if keep:
            # a tied weight (nanoGPT's wte/lm_head) is one storage under two names: safetensors refuses
            # shared storage, so each further name keeps its own copy and every name compares as itself
            storage = whole.untyped_storage().data_ptr()
            kept[name] = whole.clone() if storage in storages else whole
            storages.add(storage)
    return h.hexdigest(), kept


def tied_names(model: torch.nn.Module) -> dict[str, str]:
    """{alias: the name it shares its parameter with}: weight tying, read from the module tree."""
    first: dict[int, str] = {}
    tied = {}
    for name, p in unwrap(model).named_parameters(remove_duplicate=False):
        name = normalised_name(name)
        if id(p) in first:
            tied[name] = first[id(p)]
        else:
            first[id(p)] = name
    return tied


def param_digest(model: torch.nn.Module) -> torch.Tensor:
    """A cheap per-step fingerprint of the parameters: float64 sums of the first and the last
    parameter tensors, and of the first and last that take a gradient where those are others (LoRA's
    first and last are frozen: a digest of them alone stays equal while the training parts), kept on the
    device (no sync) until the trace is flushed."""
    params = list(unwrap(model).parameters())
    if not params:  # a module without parameters (a loss module handed in by mistake): nothing to digest
        return torch.zeros(0, dtype=torch.float64)
    picked = [full_tensor(params[i].detach()) for i in _digest_picks(model, params)]  # whole tensors under FSDP2
    return torch.stack([_sum64(p) for p in picked])


def copies_digest(copies: list[torch.nn.Module]) -> torch.Tensor:
    """`param_digest` of each copy of the model (an EMA), one after the other: a step's `copy_digest`, and a save's
    `copies_at_save`, so that a saved copy is matched with the copy's own states of the steps before."""
    return torch.cat([param_digest(copy) for copy in copies])


def param_digest_names(model: torch.nn.Module) -> list[str]:
    """The normalised names of the parameters `param_digest` sums, in its order, so that a comparison
    pairs a digest with the other side's only where both digest the same parameters."""
    named = list(unwrap(model).named_parameters())
    return [normalised_name(named[i][0]) for i in _digest_picks(model, [p for _, p in named])] if named else []


_picks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model: (its parameters' count, the picks)


def _digest_picks(model: torch.nn.Module, params: list[torch.Tensor]) -> list[int]:
    """The positions `param_digest` sums: the first and the last parameter, then the first and the last
    with requires_grad where those are others. Chosen at the first call for a model and kept (a layer
    unfrozen later must not change what the recorded names mean), chosen again only where the model's
    parameters changed in number."""
    key = unwrap(model)
    kept = _picks.get(key)
    if kept is not None and kept[0] == len(params):
        return kept[1]
    picks = [0, len(params) - 1]  # twice the one parameter of a one-tensor model, as digests always were
    trained = [i for i, p in enumerate(params) if p.requires_grad]
    picks += [i for i in dict.fromkeys(trained[:1] + trained[-1:]) if i not in picks]
    _picks[key] = (len(params), picks)
    return picks


def frozen_names(model: torch.nn.Module) -> list[str]:
    """The normalised names of the parameters that take no gradient (requires_grad False: a frozen
    teacher, a frozen backbone): a parameter on one side only is told apart as trained or not."""
    return [normalised_name(n) for n, p in unwrap(model).named_parameters() if not p.requires_grad]


def _sum64(tensor: torch.Tensor) -> torch.Tensor:
    """The float64 sum of a tensor of any dtype: a complex one as the sum of its real and imaginary
    parts (a cast to float64 would drop the imaginary ones); an empty one sums to 0.
    sum(dtype=float64) casts inside the reduction (no float64 copy); bitwise equal to .double().sum()."""
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor.sum(dtype=torch.float64)


def normalised_name(name: str) -> str:
    """A parameter or buffer name without what wrappers add: torch.compile's `_orig_mod.` (DDP's
    `module.` never appears: names are taken from the unwrapped model)."""
    return ".".join(part for part in name.split(".") if part != "_orig_mod")


def parameter_names(model: torch.nn.Module) -> dict[int, str]:
    """{id(parameter): normalised name}, to name an optimizer's parameters."""
    return {id(p): normalised_name(n) for n, p in unwrap(model).named_parameters()}


def parameters_sha256(model: torch.nn.Module) -> dict[str, str]:
    """{normalised parameter name: hex sha256 of dtype, shape and bytes}: the initial parameters by name,
    so that two initial states are compared on the parameters both hold when one holds more (a frozen
    EMA teacher beside the student)."""
    return {normalised_name(n): sha256_of([full_tensor(p.detach()).cpu()]) for n, p in unwrap(model).named_parameters()}


def buffers_sha256(model: torch.nn.Module) -> dict[str, str]:
    """{normalised buffer name: hex sha256 of dtype, shape and bytes}: BatchNorm's running stats and the like."""
    return {normalised_name(n): sha256_of([b.detach().cpu()]) for n, b in unwrap(model).named_buffers()}


def optimizer_facts(optimizer: torch.optim.Optimizer, model: torch.nn.Module | None = None) -> dict:
    """The optimizer's class and its param groups: the parameters of each (normalised names when the
    model is given, else their position and shape) and every hyperparameter, as the optimizer holds
    them now (a scheduler's bookkeeping left out)."""
    names = parameter_names(model) if model is not None else {}
    groups = []
    for g, group in enumerate(optimizer.param_groups):
        params = [names.get(id(p), unowned_parameter_name(g, i, p.shape)) for i, p in enumerate(group["params"])]
        hyper = {k: _jsonable(v) for k, v in sorted(group.items()) if k != "params" and k not in SCHEDULER_BOOKKEEPING}
        groups.append({"params": params, **hyper})
    return {"class": type(unwrap_optimizer(optimizer)).__name__, "param_groups": groups, "named": model is not None}


def unowned_parameter_name(group: int, index: int, shape) -> str:
    """The name an optimizer's parameter takes where the recorded model does not own it: its place and shape
    (`group0.param8[4, 32]`), all a comparison can pair it by."""
    return f"group{group}.param{index}{list(shape)}"


_UNOWNED = re.compile(r"group\d+\.param\d+\[((?:\d+(?:, )?)*)\]")


def unowned_parameter_shape(name: str) -> tuple[int, ...] | None:
    """The shape in an `unowned_parameter_name`, None for the name of a parameter the model owns."""
    match = _UNOWNED.fullmatch(name)
    return tuple(int(n) for n in match.group(1).split(", ") if n) if match else None


def param_group_ids(optimizer: torch.optim.Optimizer) -> list[list[int]]:
    """The identities of each param group's parameters, to name them later (`name_param_groups`)."""
    return [[id(p) for p in group["params"]] for group in optimizer.param_groups]


def name_param_groups(facts: dict, ids: list[list[int]], model: torch.nn.Module) -> dict:
    """`optimizer_facts` taken without the model, its parameters named now that the model is known,
    every hyperparameter as it was taken (re-read later, a scheduler's lr would be another step's)."""
    names = parameter_names(model)
    groups = [
        {**group, "params": [names.get(i, shown) for i, shown in zip(group_ids, group["params"])]}
        for group, group_ids in zip(facts["param_groups"], ids)
    ]
    return {**facts, "param_groups": groups, "named": True}


def unwrap_optimizer(optimizer):
    """The torch optimizer inside a framework's wrapper (Fabric's `.optimizer`, Lightning's
    `._optimizer`): the same update, so the same class to compare."""
    for attribute in ("optimizer", "_optimizer"):
        inner = getattr(optimizer, attribute, None)
        if isinstance(inner, torch.optim.Optimizer) and inner is not optimizer:
            return unwrap_optimizer(inner)
    return optimizer


def _jsonable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def sampler_facts(sampler) -> dict:
    """What decides a DistributedSampler's order: its class, seed, shuffle, drop_last and shard; and a sampler of
    the program's own, its plain attributes. A sampler without a length (an IterableDataset's) records None: the
    recorder never raises on it."""
    try:
        num_samples = len(sampler)
    except Exception:  # noqa: BLE001 - no length (an IterableDataset's), or one a subclass cannot give yet
        num_samples = None  # (read inside DistributedSampler.__init__, before the subclass set what __len__ uses)
    facts = {"class": type(sampler).__name__, "num_samples": num_samples}
    for key in ("seed", "shuffle", "drop_last", "num_replicas", "rank"):
        if hasattr(sampler, key):
            facts[key] = getattr(sampler, key)
    return {**own_sampler_attributes(sampler), **facts}


MOST_OWN_ATTRIBUTES = 16  # a sampler's facts stay a line in meta.json, whatever the program stores on it


def own_sampler_attributes(sampler) -> dict:
    """A sampler of the program's own (no class of torch's): its public attributes that are plain numbers, flags or
    short strings (an enlarge ratio, a total size, a seed), which decide its order as a DistributedSampler's seed
    and shard decide that one's. Its epoch is left out: set_epoch moves it, and each pass records the one it drew
    with (`loader_iterators`)."""
    if type(sampler).__module__.startswith("torch.utils.data"):
        return {}
    attributes = getattr(sampler, "__dict__", None)
    if not isinstance(attributes, dict):
        return {}
    plain = {}
    for key, value in sorted(attributes.items()):
        if key.startswith("_") or key == "epoch" or not _plain(value):
            continue
        plain[key] = value
        if len(plain) == MOST_OWN_ATTRIBUTES:
            break
    return plain


def _plain(value) -> bool:
    return isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= 64)
