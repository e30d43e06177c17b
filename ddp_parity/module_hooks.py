"""Hooks the recording puts on a user's modules, left out of what copies or pickles a module.

A module keeps its forward hooks in its `__dict__`, so `copy.deepcopy(model)` (an EMA copy) and
`torch.save(model)` / `pickle.dumps(model)` (a snapshot of the whole module) take them along. Ours are
closures over the recording's state: a pickle of a module holding one fails ("Can't pickle local
object"), and a copy would carry a hook watching a module the recording never chose. So while any of
ours is registered, `torch.nn.Module.__getstate__` (which both pickling and deepcopy call) gives the
module's state without them: a program's copies and snapshots are what they are without recording,
byte for byte where the program registers no hooks of its own.

    module.register_forward_hook(ours(hook))   # instead of module.register_forward_hook(hook)
"""

from __future__ import annotations

import weakref

import torch

# the dicts that hold a module's forward hooks by handle id, and the flags kept beside them by the same id
_HOOKS = ("_forward_hooks", "_forward_pre_hooks")
_FLAGS = ("_forward_hooks_with_kwargs", "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs")

_ours: weakref.WeakSet = weakref.WeakSet()
_original_getstate = None


def ours(hook):
    """Mark `hook` (a function: one registered object, kept alive by the module that holds it) as the
    recording's, and leave it out of the module's pickled or copied state from now on."""
    _install()
    _ours.add(hook)
    return hook


def _install() -> None:
    global _original_getstate
    if _original_getstate is None:
        _original_getstate = torch.nn.Module.__getstate__
        torch.nn.Module.__getstate__ = _getstate_without_ours


def _getstate_without_ours(self):
    state = _original_getstate(self)
    dropped = {key for name in _HOOKS for key, hook in (state.get(name) or {}).items() if _is_ours(hook)}
    if not dropped:
        return state  # the state as torch gives it, the same object
    state = dict(state)
    for name in (*_HOOKS, *_FLAGS):
        if name in state:
            state[name] = type(state[name])((k, v) for k, v in state[name].items() if k not in dropped)
    return state


def _is_ours(hook) -> bool:
    try:
        return hook in _ours
    except TypeError:  # an object of the program's that cannot be hashed or weakly referenced
        return False
