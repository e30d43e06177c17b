"""The context a step runs in, where the program sets it: seeds (torch.manual_seed, which Lightning's
seed_everything calls), train()/eval() switches, autocast entries, DDP's constructor arguments (and
the module it wraps: the model a step trains), and the modules a program calls at the top before its
first optimizer step (the model, when there is no DDP)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import random
import sys
import weakref

import torch
from torch.nn.modules import module as torch_module
from torch.nn.parallel import DistributedDataParallel, distributed

from ddp_parity.fingerprints import buffers_sha256, hash_full_state, parameters_sha256, sha256_of
from ddp_parity.hooks import evaluation, modules, rng
from ddp_parity.hooks.after_import import AfterImport
from ddp_parity.hooks.state import guarded, recording
from ddp_parity.module_hooks import ours
from ddp_parity.watch import ModuleWatch

DDP_ARGUMENTS = (
    "device_ids",
    "output_device",
    "dim",
    "broadcast_buffers",
    "bucket_cap_mb",
    "find_unused_parameters",
    "gradient_as_bucket_view",
    "static_graph",
)


def install() -> None:
    original_seed = torch.manual_seed

    @functools.wraps(original_seed)
    def manual_seed(seed):
        _note_seed(seed)
        generator = original_seed(seed)
        _seeded()
        return generator

    torch.manual_seed = manual_seed
    torch.random.manual_seed = manual_seed
    _wrap_other_seeds()
    _wrap_train()
    _wrap_ddp()
    _wrap_autocast()
    _watch_top_calls()
    rng.arm()  # step 1's digests: its first network forward


@guarded("seeds")
def _note_seed(seed) -> None:
    """The seed, and whether torch's generator drew since the previous seed (a model built between two seeds, as
    Lightning's DDP setup seeds again after a LightningModule's __init__ built one): a seed repeated with nothing
    drawn between changes nothing that follows."""
    if (live := recording()) is not None:
        fact = {"seed": int(seed)}
        if live.facts.get("_seeded_state") is not None:
            fact["drawn_since_last_seed"] = rng.torch_state() != live.facts["_seeded_state"]
        live.note("seeds", fact)


def _wrap_other_seeds() -> None:
    """numpy's and Python's global seeds, as `numpy_seeds` and `random_seeds` (Lightning's seed_everything sets
    all three; a program may seed numpy per rank and torch alike). numpy.random is wrapped when the program
    imports it: importing it here would start its generator in every program, and its digest with it."""
    random.seed = _seeding(random.seed, "random_seeds")
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        _wrap_numpy_seed(numpy_random)
    else:
        sys.meta_path.insert(0, AfterImport("numpy.random", guarded("the numpy.random hooks")(_wrap_numpy_seed)))


def _wrap_numpy_seed(numpy_random) -> None:
    numpy_random.seed = _seeding(numpy_random.seed, "numpy_seeds")


def _seeding(original, kind: str):
    @functools.wraps(original)
    def seed(*args, **kwargs):
        _note_other_seed(kind, args[0] if args else kwargs.get("seed", kwargs.get("a")))
        return original(*args, **kwargs)

    return seed


@guarded("seeds")
def _note_other_seed(kind: str, value) -> None:
    if (live := recording()) is not None:
        live.note(kind, {"seed": value if value is None or isinstance(value, int) else f"{value!r:.80}"})


@guarded("seeds")
def _seeded() -> None:
    if (live := recording()) is not None:
        live.facts["_seeded_state"] = rng.torch_state()


def _wrap_train() -> None:
    original = torch.nn.Module.train

    @functools.wraps(original)
    def train(self, mode: bool = True):
        live = recording()
        if live is None or getattr(live.local, "in_train", False):
            return original(self, mode)  # a child's switch inside its parent's: the parent's is noted
        live.local.in_train = True
        try:
            return original(self, mode)
        finally:
            live.local.in_train = False
            _note_mode(self, mode)

    torch.nn.Module.train = train


@guarded("train()/eval()")
def _note_mode(module, mode) -> None:
    live = recording()
    if live is None:
        return
    if not mode:
        evaluation.switched_to_eval(live, module)
    modes = live.facts.setdefault("_last_mode", {})
    key = id(module)
    if modes.get(key) != bool(mode):  # only switches: a loop calling train() every step notes it once
        modes[key] = bool(mode)
        live.note("modes", {"module": type(module).__name__, "training": bool(mode)})


def _wrap_ddp() -> None:
    original = DistributedDataParallel.__init__

    @functools.wraps(original)
    def __init__(self, module, *args, **kwargs):
        _note_ddp_module(module)
        with _warnings_past_this_wrapper(distributed):
            original(self, module, *args, **kwargs)
        _note_ddp(self)
        _watch_wrapped(self)

    DistributedDataParallel.__init__ = __init__


class _OneFrameFurther:
    """A module's `warnings`, as seen from inside a call this wrapper makes: torch's constructor warns with
    `stacklevel=2`, the program's line that built it, but with the wrapper between them that frame is the
    wrapper's, and the program's stderr would name a line of ours. So each warning goes two frames further (the
    forwarding frame here, and the wrapper's); one at `stacklevel=1`, the constructor's own line, one further."""

    def __init__(self, real):
        self._real = real

    def warn(self, message, category=None, stacklevel=1, source=None, **later_keywords):
        self._real.warn(message, category, stacklevel + 2 if stacklevel > 1 else 2, source, **later_keywords)

    def __getattr__(self, name):
        return getattr(self._real, name)


@contextlib.contextmanager
def _warnings_past_this_wrapper(torch_module_of_the_call):
    real = torch_module_of_the_call.warnings
    torch_module_of_the_call.warnings = _OneFrameFurther(real)
    try:
        yield
    finally:
        torch_module_of_the_call.warnings = real


@guarded("DDP's module")
def _note_ddp_module(module) -> None:
    """The initial state of each module given to DDP, before DDP broadcasts rank 0's: the first one's are the
    rank's init facts; every one's, in the order they were wrapped, are kept for a model of several of them
    (`wrapped_init_facts`)."""
    live = recording()
    if live is None:
        return
    parts = live.facts.setdefault("_init_parts", {"ids": [], "state": hashlib.sha256(), "params": hashlib.sha256()})
    if id(module) in parts["ids"]:
        return
    parts["ids"].append(id(module))
    hash_full_state(module, keep=False, h=parts["state"])
    sha256_of([p.detach().cpu() for p in module.parameters()], h=parts["params"])
    parts.setdefault("by_module", []).append((buffers_sha256(module), parameters_sha256(modules.unwrapped(module))))
    if "init_params_sha256" in live.facts:
        return
    live.facts["init_params_sha256"] = parts["state"].hexdigest()
    # the same state apart: the parameters alone, and each buffer by name (init_params_sha256 covers both)
    live.facts["init_parameters_sha256"] = parts["params"].hexdigest()
    live.facts["init_buffers_sha256"], live.facts["init_parameters_by_name"] = parts["by_module"][0]
    # (each parameter by name, its wrappers' prefixes gone: the states compared on what both hold)


def wrapped_init_facts(live, model: modules.Wrapped) -> None:
    """A model of several DDP modules: its init facts are theirs together, named as the model names them,
    hashed as one module holding them in that order hashes (each module's state before its broadcast)."""
    parts = live.facts.get("_init_parts")
    if parts is None or len(parts["by_module"]) != len(model._modules):
        return
    live.facts["init_params_sha256"] = parts["state"].hexdigest()
    live.facts["init_parameters_sha256"] = parts["params"].hexdigest()
    for key, index in (("init_buffers_sha256", 0), ("init_parameters_by_name", 1)):
        live.facts[key] = {
            f"{name}.{tensor}": digest
            for name, facts in zip(model._modules, parts["by_module"], strict=True)
            for tensor, digest in facts[index].items()
        }


@guarded("DDP's constructor arguments")
def _note_ddp(ddp) -> None:
    live = recording()
    if live is None:
        return
    live.wrapped_modules.append(weakref.ref(ddp))
    facts = {key: _plain(getattr(ddp, key, None)) for key in DDP_ARGUMENTS}
    facts["bucket_cap_bytes"] = getattr(ddp, "bucket_bytes_cap", None)
    live.note("ddp", facts)


@guarded("the module watch")
def _watch_wrapped(ddp) -> None:
    """Watch the first model a DDP wrapper holds from now on, as recorder.watch(model) does (the steps of
    watch.DEFAULT_STEPS, or DDP_PARITY_WATCH_STEP): its calls of step 1 come before the recorder starts, at the
    first optimizer step, which then takes the watch over."""
    live = recording()
    if live is None or live.watch is not None:
        return
    live.watch = ModuleWatch(ddp.module)


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


def _wrap_autocast() -> None:
    original = torch.amp.autocast_mode.autocast.__enter__

    @functools.wraps(original)
    def __enter__(self):
        _note_autocast(self)
        return original(self)

    torch.amp.autocast_mode.autocast.__enter__ = __enter__


@guarded("autocast")
def _note_autocast(ctx) -> None:
    live = recording()
    if live is None:
        return
    key = (getattr(ctx, "device", None), str(getattr(ctx, "fast_dtype", None)), getattr(ctx, "_enabled", None))
    seen = live.facts.setdefault("_autocast_seen", set())
    if key not in seen:  # each kind once, with the step it first came before
        seen.add(key)
        live.note("autocast", {"device_type": key[0], "dtype": key[1], "enabled": key[2]})


def _watch_top_calls() -> None:
    """Until the first optimizer step: the modules called at the top (no other module's forward in
    flight), the model of a program without DDP. Removed at the first step: no cost per step."""
    depth = {"n": 0}

    def pre(module, args):
        live = recording()
        if live is not None and depth["n"] == 0 and live.optimizer is None:
            if not any(seen() is module for seen in live.root_modules):
                live.root_modules.append(weakref.ref(module))
            if module.training and torch.is_grad_enabled() and next(module.parameters(), None) is not None:
                # step 1's batch, where no DataLoader gives it: a network's inputs, never a loss module's (the
                # network's output and the targets, which a loop calling a loss function never shows)
                live.forward_inputs.append(args)
                live.forward_callers.append(id(module))
        depth["n"] += 1

    def post(module, args, output):
        depth["n"] = max(0, depth["n"] - 1)

    handles = [
        torch_module.register_module_forward_pre_hook(pre),
        torch_module.register_module_forward_hook(post, always_call=True),
    ]
    _TOP_CALL_HOOKS.extend(handles)


_TOP_CALL_HOOKS: list = []


@guarded("the model's training inputs")
def watch_training_inputs(live) -> None:
    """From the first step on: the inputs of each training forward of the model the steps train (in
    train mode, with gradients), the step's batch for a loop that draws its own (nanoGPT's get_batch).
    They are the batch's digest only where no DataLoader batch was consumed."""

    def pre(module, args, kwargs):
        if module.training and torch.is_grad_enabled() and not getattr(live.local, "ours", False):
            live.forward_inputs.append((args, kwargs) if kwargs else args)

    model = live.model
    if isinstance(model, modules.Wrapped):  # never called: its first part a step called takes the step's inputs
        model = _entry_of(live, model)
        if model is None:
            return
    model.register_forward_pre_hook(ours(pre), with_kwargs=True)


def _entry_of(live, model) -> torch.nn.Module | None:
    """The part of a model of several DDP modules that step 1 called first (through its wrapper, at the top):
    step 1's inputs are kept for that part's calls alone, as a whole model's forward takes the batch alone."""
    wrappers = {id(w()): w() for w in live.wrapped_modules if w() is not None}
    parts = {id(part): part for part in model.children()}
    callers = [parts.get(id(modules.unwrapped(wrappers[c])) if c in wrappers else c) for c in live.forward_callers]
    entry = next((part for part in callers if part is not None), None)
    if entry is not None:
        live.forward_inputs = [args for args, part in zip(live.forward_inputs, callers) if part is entry]
    return entry


def stop_watching_top_calls() -> None:
    for handle in _TOP_CALL_HOOKS:
        handle.remove()
    _TOP_CALL_HOOKS.clear()
