"""The random generators' state at each optimizer step's start, as digests: the step record's `rng`.

The moment is the step's first training forward (train mode, gradients on) of a module that computes (one holding
parameters: a loss module is called after the network, or alone where the network ran in eval mode),
not a wrapper that only dispatches (DDP's, DataParallel's, FSDP1's, Lightning's around training_step,
Fabric's), whose call comes at another point of the step on each side. A raw loop calls DDP's
wrapper from its own code, maybe after drawing (EDM's loss draws its noise, then calls the network);
Lightning calls its wrapper before training_step, where the same draws come after. So the moment is
the network's own first call on both sides: after the batch and whatever the loop draws before the
network, before any layer draws. Where no such forward is seen, right before the update (`at:
"update"`). Two sides' digests are compared only where both were taken at the same moment. A hook on
every module's call waits for that first forward from the end of the previous step and is removed
there: a few calls a step (the wrappers'), never every layer's. The network found then keeps a hook of
its own: a later call of it before the step's first backward takes the digests again, so that a forward
run before training (a model summary, a dry run) is not step 1's start.

Each generator is digested where reading it is cheap, with no device sync: torch's global CPU
generator (its 5056 state bytes), the current CUDA device's default generator where CUDA is
initialised (its seed and offset, host values), numpy's global generator where numpy.random is imported (its
MT19937 key and position, read in place), Python's `random` where it is imported (its 625 Mersenne
Twister words and its cached Gaussian). About 30 us a step in all.
"""

from __future__ import annotations

import array
import ctypes
import hashlib
import sys
import weakref

import torch

from ddp_parity.hooks.state import guarded, recording
from ddp_parity.module_hooks import ours

MT19937_BYTES = 624 * 4 + 4  # numpy's mt19937_state: uint32 key[624], int pos


def digests(at: str) -> dict:
    """{at, torch, cuda?, numpy?, random?}: 16 hex digits per generator; a generator that could not be
    read is left out (and said once in `unrecorded`)."""
    out = {"at": at, "torch": torch_state()}
    for name, read in READERS:
        value = read()
        if value is not None:
            out[name] = value
    return out


def torch_state() -> str:
    """The digest of torch's global CPU generator alone (what a model's initial weights draw from)."""
    return _hex(torch.default_generator.get_state().numpy())


def _hex(buffer) -> str:
    return hashlib.blake2b(buffer, digest_size=8).hexdigest()


def _cuda():
    if not torch.cuda.is_initialized():
        return None
    generator = torch.cuda.default_generators[torch.cuda.current_device()]
    return _hex(generator.get_state().numpy())  # seed and philox offset, kept on the host


def _numpy():
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is None:
        return None
    bit_generator = numpy_random.mtrand._rand._bit_generator
    return _hex(ctypes.string_at(bit_generator.ctypes.state_address, MT19937_BYTES))


def _python():
    module = sys.modules.get("random")
    if module is None:
        return None
    version, words, gauss_next = module.getstate()
    # not hash() of the state: it holds None (no Gaussian cached), whose hash is an address before Python 3.12,
    # so two processes in the same state hashed apart
    return _hex(array.array("Q", words).tobytes() + repr((version, gauss_next)).encode())


READERS = tuple(
    (name, guarded(f"the {name} generator's state")(read))
    for name, read in (("cuda", _cuda), ("numpy", _numpy), ("random", _python))
)


def take(live, at: str) -> None:
    """The step's digests, once per step (the first training forward, or the update)."""
    if live.rng is None and not getattr(live.local, "ours", False):
        live.rng = _take(at)


# wrappers whose forward only hands the call on (to their module, or to training_step): by class name, so that
# neither Lightning nor FSDP1 is imported to tell them
DISPATCHERS = frozenset(
    {"DistributedDataParallel", "DataParallel", "FullyShardedDataParallel", "_LightningModuleWrapperBase",
     "_FabricModule"}
)  # fmt: skip
_armed: list = []  # the handle of the hook that waits for the step's first network forward


def arm() -> None:
    """From now until the next training forward of a module that computes: take the step's digests there."""
    if not _armed:
        _armed.append(torch.nn.modules.module.register_module_forward_pre_hook(_first_forward))


def disarm() -> None:
    while _armed:
        _armed.pop().remove()


def _first_forward(module, args) -> None:
    live = recording()
    if live is None or live.rng is not None or not live.active:
        disarm()
        return
    if not (module.training and torch.is_grad_enabled()) or getattr(live.local, "ours", False):
        return  # an evaluation's forward, or the recording's own: the step's first training forward is still to come
    if _dispatches(module) or not _holds_parameters(module):
        return  # a wrapper, or a module with no parameters (a loss module, called after the network or in its place)
    disarm()
    if module in _followed:
        return  # its own hook (below, run right after this one) takes them
    take(live, "forward")
    _followed.add(module)
    module.register_forward_pre_hook(ours(_again))


def _holds_parameters(module) -> bool:
    """A network: a module with a parameter of its own or of a submodule. A loss module (an nn.Module the loop calls
    on the network's output) holds none: a loop whose model was left in eval mode calls it with gradients on after
    an eval-mode forward, and the step was then said to start at that call, as a training step's does."""
    return next(module.parameters(), None) is not None


def _dispatches(module) -> bool:
    """A wrapper that only hands the call on, or a LightningModule whose forward Lightning's forward redirection
    replaced by one that runs training_step (an instance attribute `wrapped_forward`: the strategy calls the DDP
    wrapper, which calls the LightningModule, whose call runs training_step)."""
    if any(cls.__name__ in DISPATCHERS for cls in type(module).__mro__):
        return True
    return getattr(module.__dict__.get("forward"), "__name__", None) == "wrapped_forward"


# the networks whose first training forward took a step's digests: each call of one before the step's first backward
# takes them again, so that forwards a program runs before its training (a model summary, a dry run: EDM's on rank
# 0) are not step 1's start, the forward whose loss is backpropagated is
_followed: weakref.WeakSet = weakref.WeakSet()


def _again(module, args) -> None:
    live = recording()
    if live is None or not live.active or live.roots or getattr(live.local, "ours", False):
        return
    if module.training and torch.is_grad_enabled():
        live.rng = _take("forward")


@guarded("the generators' state")
def _take(at: str):
    return digests(at)
