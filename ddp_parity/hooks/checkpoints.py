"""Checkpoints, where torch takes them: what each `torch.save`/`torch.load` and each
`torch.distributed.checkpoint` (DCP) save/load was given, and what the program restored.

A checkpoint call is noted with the path as given (a file object by its name), the optimizer steps
done before it (`after_step`) and the kinds found in the object saved or loaded: a module's
state_dict (a mapping of tensors whose names are the model's parameter names, once the model is
known; `state_dict` when it is not), an optimizer's (`state` and `param_groups`), a scheduler's
(`last_epoch` and `base_lrs`), a GradScaler's (`scale`, `growth_factor`), an RNG state (a torch
generator's state bytes, numpy's MT19937 tuple, Python's `random` state, a key naming an rng) and
epoch/step counters. Each rank notes its own calls.

What a save holds is noted too (`contents`): each plain tensor by its key path (dict keys and list places joined by
dots, `ema.blocks.0.weight`, `optimizer_states.0.state.0.exp_avg`) with a digest of its dtype, shape and bytes, for
the first CONTENT_SAVES saves of a rank. The comparison reads them where the training is bitwise equal, so a state
kept beside the model (an EMA) saved at another moment is seen, though no step record holds it. Beside them, the saved
state that is no tensor and that a resume restores (`settings`): the param groups' hyperparameters and the
schedulers' numbers; and where the hooks found copies of the trained model (an EMA), their digest at the save
(`copies_at_save`, as a step's `copy_digest`), matched by the comparison with the copies' states of the steps before.

What was restored is what the program handed back to torch: each `load_state_dict` of a module, an
optimizer, a scheduler or a GradScaler, and each set_rng_state/set_state/setstate of a generator.
"""

from __future__ import annotations

import functools
import os
import sys

import torch
from torch.optim import lr_scheduler
from torch.optim import optimizer as torch_optimizer

from ddp_parity.fingerprints import copies_digest, sha256_of
from ddp_parity.hooks import modules, rng
from ddp_parity.hooks.after_import import AfterImport
from ddp_parity.hooks.state import FACT_LIMIT, guarded, recording
from ddp_parity.trace_files import CHECKPOINT_SAVE_OPS

NAMES = "_checkpoint_names"  # private facts: (the noted entry, the tensor names of each mapping of tensors)
COUNTERS = ("epoch", "step", "global_step", "iter_num", "iteration", "current_epoch", "steps", "epochs_run")
WALK_LIMIT = 5000  # objects looked at in one checkpoint: a huge nested object is not walked to the end
DCP = "torch.distributed.checkpoint"
CONTENT_SAVES = 64  # saves per rank whose tensors are digested: a run that saves every step keeps its facts small
CONTENT_WALK_LIMIT = 200_000  # objects looked at for one save's tensors (a model's and its optimizer's state)
CONTENT_DIGEST_CHARS = 16
CONTENTS_SAVED = "_checkpoint_contents_saved"  # private: how many saves had their tensors digested


def install() -> None:
    torch.save = _checkpoint_call("torch.save", torch.save, lambda args, kwargs, result: _first(args, kwargs, "obj"))
    torch.load = _checkpoint_call("torch.load", torch.load, lambda args, kwargs, result: result, path_at=0)
    for owner, kind in (
        (torch.nn.Module, "model"),
        (torch_optimizer.Optimizer, "optimizer"),
        (lr_scheduler.LRScheduler, "scheduler"),
        (getattr(lr_scheduler, "ReduceLROnPlateau", None), "scheduler"),
        (getattr(getattr(torch, "amp", None), "GradScaler", None), "grad_scaler"),
    ):
        if owner is not None and "load_state_dict" in owner.__dict__:
            owner.load_state_dict = _restore(kind, owner.load_state_dict)
    torch.set_rng_state = torch.random.set_rng_state = _restore("rng", torch.random.set_rng_state, "torch")
    for name in ("set_rng_state", "set_rng_state_all"):
        if hasattr(torch.cuda, name):
            setattr(torch.cuda, name, _restore("rng", getattr(torch.cuda, name), "cuda"))
    import random

    random.setstate = _restore("rng", random.setstate, "random")
    for name, patch in (("numpy.random", _wrap_numpy), (DCP, _wrap_dcp)):
        if name in sys.modules:
            patch(sys.modules[name])
        else:
            sys.meta_path.insert(0, AfterImport(name, _checkpoint_patch(name, patch)))


def _wrap_numpy(module) -> None:
    module.set_state = _restore("rng", module.set_state, "numpy")


def _first(args, kwargs, name: str):
    return args[0] if args else kwargs.get(name)


def _checkpoint_call(op: str, original, given, path_at: int = 1):
    @functools.wraps(original)
    def call(*args, **kwargs):
        live = recording()
        if live is None or getattr(live.local, "ours", False) or getattr(live.local, "in_checkpoint", False):
            return original(*args, **kwargs)  # not recorded, or inside a checkpoint call (DCP saves tensor by tensor)
        if sys._getframe(1).f_globals.get("__name__") == "torch.storage":
            return original(*args, **kwargs)  # a storage pickled by plain pickle or deepcopy, one tensor at a time
        live.local.in_checkpoint = True
        try:
            result = original(*args, **kwargs)
        finally:
            live.local.in_checkpoint = False
        if recording() is live:
            path = args[path_at] if len(args) > path_at else kwargs.get("f", kwargs.get("checkpoint_id"))
            if path is None:  # DCP given a storage writer or reader: its path
                path = kwargs.get("storage_writer", kwargs.get("storage_reader"))
            _note(live, op, path, given(args, kwargs, result), sys._getframe(1))
        return result

    return call


@guarded("checkpoints")
def _note(live, op: str, path, obj, caller=None) -> None:
    kinds, names = kinds_of(obj)
    said = _path(path)
    if said is not None and said.startswith("<") and caller is not None:
        said = _for_file(said, caller)
    live.note("checkpoints", {"op": op, "path": said, "after_step": live.steps, "kinds": sorted(kinds)})
    kept = live.facts["checkpoints"]
    if kept["count"] > FACT_LIMIT:  # the entry was not kept (the FACT_LIMIT first are)
        return
    if names:
        live.facts.setdefault(NAMES, []).append((kept["items"][-1], names))
    if op.rsplit(".", 1)[-1] in CHECKPOINT_SAVE_OPS:
        _note_contents(live, kept["items"][-1], obj)


@guarded("a checkpoint's tensors")
def _note_contents(live, entry: dict, obj) -> None:
    saved = live.facts.setdefault(CONTENTS_SAVED, 0)
    if saved >= CONTENT_SAVES:
        return
    live.facts[CONTENTS_SAVED] = saved + 1
    entry["contents"] = contents_of(obj)
    settings = settings_of(obj)
    if settings:
        entry["settings"] = settings
    copies = live.live_copies()
    if copies:  # the copies as they are at the save: a save before the step's update of an EMA is seen as such
        entry["copies_at_save"] = copies_digest(copies).tolist()


# what a param group or a scheduler holds that is how it is run or its bookkeeping, not what a resume trains with
IMPLEMENTATION_KEYS = frozenset(
    {"params", "foreach", "fused", "capturable", "differentiable", "_is_initial", "_get_lr_called_within_step"}
)
SETTING_VALUE_CHARS = 200  # a setting longer than this as JSON (a list of a parameter per group) is left out


def settings_of(obj) -> dict[str, object]:
    """{key path: value} of the saved state that is no tensor and that a resume restores: each optimizer param
    group's hyperparameters (`optimizer.param_groups.0.lr`; its `params` and implementation flags left out) and each
    scheduler's numbers (`scheduler.last_epoch`, `scheduler._last_lr`), as JSON values, key paths as contents_of's."""
    out: dict[str, object] = {}
    todo, seen, walked = [(obj, "")], 0, set()
    while todo and seen < WALK_LIMIT:
        value, path = todo.pop()
        seen += 1
        if not isinstance(value, (dict, list, tuple)) or id(value) in walked:
            continue
        walked.add(id(value))
        if isinstance(value, dict) and _kind_of(value, None) in ("optimizer", "scheduler"):
            out.update(_settings_in(value, path))
            continue
        items = value.items() if isinstance(value, dict) else enumerate(value)
        todo += [(v, f"{path}.{k}" if path else str(k)) for k, v in items if not isinstance(v, torch.Tensor)]
    return out


def _settings_in(state: dict, path: str) -> dict[str, object]:
    """An optimizer's or a scheduler's state_dict: its param groups' settings, or its own numbers."""
    at = f"{path}." if path else ""
    if isinstance(state.get("param_groups"), list):
        return {
            f"{at}param_groups.{i}.{k}": v
            for i, group in enumerate(state["param_groups"])
            if isinstance(group, dict)
            for k, v in group.items()
            if k not in IMPLEMENTATION_KEYS and _a_setting(v)
        }
    return {
        f"{at}{k}": v for k, v in state.items() if isinstance(k, str) and k not in IMPLEMENTATION_KEYS and _a_setting(v)
    }


def _a_setting(value) -> bool:
    """A number, a flag, a string or a short list of numbers (Adam's betas, a scheduler's base_lrs)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value is not None and len(str(value)) <= SETTING_VALUE_CHARS
    return (
        isinstance(value, (list, tuple))
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        and len(str(list(value))) <= SETTING_VALUE_CHARS
    )


def contents_of(obj) -> dict[str, str]:
    """{key path: digest} of each plain tensor in a saved object: a module's by its state_dict; a tensor held
    otherwise (a DTensor's shard, a meta or sparse tensor) is left out. A container held twice is walked once."""
    out: dict[str, str] = {}
    todo, seen, walked = [(obj, "")], 0, set()
    made = []  # the state_dicts made here, kept alive: a freed one's id is reused by the next module's
    while todo and seen < CONTENT_WALK_LIMIT:
        value, path = todo.pop()
        seen += 1
        if isinstance(value, torch.nn.Module):
            value = value.state_dict()
            made.append(value)
        if type(value) in (torch.Tensor, torch.nn.Parameter):
            digest = _tensor_digest(value)
            if digest is not None:
                out[path] = digest
            continue
        if isinstance(value, (dict, list, tuple)):
            if id(value) in walked:  # held twice (or holding itself): walked once, under its first path
                continue
            walked.add(id(value))
        if isinstance(value, dict):
            todo += [(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            todo += [(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(value)]
    return out


def _tensor_digest(tensor: torch.Tensor) -> str | None:
    """None for a tensor whose bytes cannot be read as they are (one odd tensor leaves the others' digests)."""
    if tensor.layout != torch.strided or tensor.device.type == "meta" or tensor.is_quantized or tensor.is_nested:
        return None
    try:
        return sha256_of([tensor.detach().cpu()])[:CONTENT_DIGEST_CHARS]
    except (RuntimeError, TypeError, ValueError):
        return None


def _path(path) -> str | None:
    if path is None:
        return None
    if isinstance(path, (str, os.PathLike)):
        return os.fsdecode(path)
    name = getattr(path, "name", None) or getattr(path, "path", None)
    return f"<{type(path).__name__}{' ' + str(name) if name else ''}>"


FILE_VARIABLES = ("filepath", "path", "filename", "ckpt_path")  # where a caller saving to memory keeps the file's


def _for_file(said: str, caller) -> str:
    """A buffer saved to by a caller that writes it to a file (Lightning's `_atomic_save(checkpoint, filepath)`):
    the buffer, then that file, as the caller names it."""
    for name in FILE_VARIABLES:
        value = caller.f_locals.get(name)
        if isinstance(value, (str, os.PathLike)):
            return f"{said[:-1]} for {os.fsdecode(value)}>"
    return said


def kinds_of(obj) -> tuple[set[str], list[frozenset]]:
    """The kinds found in a checkpoint's object, and the names of each mapping of tensors in it (a
    module's state_dict, told apart once the model's names are known)."""
    kinds: set[str] = set()
    names: list[frozenset] = []
    todo, seen = [(obj, None)], 0
    while todo and seen < WALK_LIMIT:
        value, key = todo.pop()
        seen += 1
        kind = _kind_of(value, key)
        if kind is not None:
            kinds.add(kind)
            if kind == "state_dict":
                names.append(frozenset(value.keys()))
            if kind not in ("counters",):
                continue
        if isinstance(value, dict):
            todo += [(v, k) for k, v in value.items()]
        elif isinstance(value, (list, tuple)):
            todo += [(v, key) for v in value]
    return kinds, names


def _kind_of(value, key) -> str | None:
    if isinstance(value, torch.nn.Module):
        return "model"
    if isinstance(value, torch_optimizer.Optimizer):
        return "optimizer"
    if isinstance(value, (lr_scheduler.LRScheduler, getattr(lr_scheduler, "ReduceLROnPlateau", ()))):
        return "scheduler"
    if isinstance(key, str) and "rng" in key.lower() and not isinstance(value, (dict, list)):
        return "rng"
    if isinstance(value, torch.Tensor):
        return "rng" if value.dtype == torch.uint8 and value.dim() == 1 and value.numel() in (5056, 16) else None
    head = value[0] if isinstance(value, tuple) and value else None
    if isinstance(head, str) and head == "MT19937":
        return "rng"  # numpy's legacy state
    if type(head) is int and head == 3 and len(value) == 3 and isinstance(value[1], tuple) and len(value[1]) == 625:
        return "rng"  # Python's random.getstate()
    if isinstance(key, str) and key.lower() in COUNTERS and isinstance(value, int) and not isinstance(value, bool):
        return "counters"
    if not isinstance(value, dict) or not value:
        return None
    keys = set(value)
    if {"state", "param_groups"} <= keys:
        return "optimizer"
    if {"last_epoch", "base_lrs"} <= keys:
        return "scheduler"
    if {"scale", "growth_factor"} <= keys:
        return "grad_scaler"
    if all(isinstance(k, str) for k in keys) and all(isinstance(v, torch.Tensor) for v in value.values()):
        return "state_dict"
    return None


def resolve(live) -> None:
    """Name each mapping of tensors that holds the model's parameter names (any wrapper prefix
    stripped) a `model` state_dict; before the model is known they stay `state_dict`."""
    params = {name for name in modules.names_of(live.model).values()}
    if not params:
        return
    for entry, names in live.facts.get(NAMES, []):
        if any(params <= {_unprefixed(n) for n in found} for found in names):
            entry["kinds"] = sorted({*entry["kinds"], "model"} - {"state_dict"})


def _unprefixed(name: str) -> str:
    for prefix in ("module.", "_forward_module.", "_orig_mod.", "model."):
        while name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def _restore(kind: str, original, generator: str | None = None):
    @functools.wraps(original)
    def restore(*args, **kwargs):
        result = original(*args, **kwargs)
        owner = args[0] if args and kind != "rng" else None
        _note_restore(kind, owner, sys._getframe(1).f_globals.get("__name__"), generator)
        return result

    return restore


@guarded("what the program restored")
def _note_restore(kind: str, owner, caller, generator: str | None = None) -> None:
    """A state handed back to torch. A generator's is named; torch's global one with the digest of the state put
    back, so that the draws it undid are known (a DataLoader iterator's `rng_before` equal to it)."""
    live = recording()
    if live is None or getattr(live.local, "ours", False):
        return
    owner_class = type(owner).__name__ if owner is not None else None
    fact = {"kind": kind, "class": owner_class, "caller": caller}
    if generator is not None:
        fact["generator"] = generator
    if generator == "torch":
        fact["state"] = rng.torch_state()
    live.note("restores", fact)


def _wrap_dcp(module) -> None:
    for name in CHECKPOINT_SAVE_OPS:
        if hasattr(module, name):
            setattr(module, name, _checkpoint_call(f"dcp.{name}", getattr(module, name), _dcp_state, path_at=1))
    for name in ("load", "load_state_dict"):
        if hasattr(module, name):
            setattr(module, name, _checkpoint_call(f"dcp.{name}", getattr(module, name), _dcp_state, path_at=1))


def _dcp_state(args, kwargs, result):
    return _first(args, kwargs, "state_dict")


def _checkpoint_patch(name: str, patch):
    """`patch` as AfterImport calls it: a failure is said in `unrecorded`, never raised into the program's import."""

    def patched(module) -> None:
        try:
            patch(module)
        except Exception as exc:
            live = recording()
            if live is not None:
                live.could_not(f"{name}'s checkpoint functions", exc)

    return patched
