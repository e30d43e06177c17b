"""The random generators' state at each optimizer step's start, as digests: the step record's `rng`.

The moment is the step's first training forward (a module called at the top in train mode with
gradients on: DDP's wrapper, the model), after its batch was drawn and before any layer of the step
draws; where no such forward is seen (a Lightning module whose training_step never calls the wrapped
module), right before the update (`at: "update"`). Two sides' digests are compared only where both
were taken at the same moment.

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

import torch

from ddp_parity.hooks.state import guarded

MT19937_BYTES = 624 * 4 + 4  # numpy's mt19937_state: uint32 key[624], int pos


def digests(at: str) -> dict:
    """{at, torch, cuda?, numpy?, random?}: 16 hex digits per generator; a generator that could not be
    read is left out (and said once in `unrecorded`)."""
    out = {"at": at, "torch": _hex(torch.default_generator.get_state().numpy())}
    for name, read in READERS:
        value = read()
        if value is not None:
            out[name] = value
    return out


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


@guarded("the generators' state")
def _take(at: str):
    return digests(at)
