"""The context a step runs in, where the program sets it: seeds (torch.manual_seed, which Lightning's
seed_everything calls), train()/eval() switches, autocast entries, DDP's constructor arguments (and
the module it wraps: the model a step trains), and the modules a program calls at the top before its
first optimizer step (the model, when there is no DDP)."""

from __future__ import annotations

import functools
import weakref

import torch
from torch.nn.modules import module as torch_module
from torch.nn.parallel import DistributedDataParallel

from ddp_parity.fingerprints import buffers_sha256, parameters_sha256, params_sha256, sha256_of
from ddp_parity.hooks import modules, rng
from ddp_parity.hooks.state import guarded, recording
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
        return original_seed(seed)

    torch.manual_seed = manual_seed
    torch.random.manual_seed = manual_seed
    _wrap_train()
    _wrap_ddp()
    _wrap_autocast()
    _watch_top_calls()


@guarded("seeds")
def _note_seed(seed) -> None:
    if (live := recording()) is not None:
        live.note("seeds", {"seed": int(seed)})


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
        original(self, module, *args, **kwargs)
        _note_ddp(self)
        _watch_wrapped(self)

    DistributedDataParallel.__init__ = __init__


@guarded("DDP's module")
def _note_ddp_module(module) -> None:
    live = recording()
    if live is None:
        return
    if "init_params_sha256" in live.facts:
        return
    live.facts["init_params_sha256"] = params_sha256(module)  # before DDP broadcasts rank 0's
    # the same state apart: the parameters alone, and each buffer by name (init_params_sha256 covers both)
    live.facts["init_parameters_sha256"] = sha256_of([p.detach().cpu() for p in module.parameters()])
    live.facts["init_buffers_sha256"] = buffers_sha256(module)
    # and each parameter by name (its wrappers' prefixes gone): the states compared on what both hold
    live.facts["init_parameters_by_name"] = parameters_sha256(modules.unwrapped(module))


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
            if module.training and torch.is_grad_enabled():
                rng.take(live, "forward")  # step 1's start: its first training forward
                live.forward_inputs.append(args)  # step 1's batch, where no DataLoader gives it
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
            rng.take(live, "forward")
            live.forward_inputs.append((args, kwargs) if kwargs else args)

    def outer(module, args):  # DDP's wrapper is called before the model: the step's start is there
        if module.training and torch.is_grad_enabled():
            rng.take(live, "forward")

    for wrapper in live.wrapped_modules:
        if wrapper() is not None:
            wrapper().register_forward_pre_hook(outer)
    live.model.register_forward_pre_hook(pre, with_kwargs=True)


def stop_watching_top_calls() -> None:
    for handle in _TOP_CALL_HOOKS:
        handle.remove()
    _TOP_CALL_HOOKS.clear()
