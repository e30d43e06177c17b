"""The recording's hooks on a user's modules are left out of what copies or pickles a module
(ddp_parity/module_hooks.py); the program's own hooks stay."""

from __future__ import annotations

import copy
import io
import pickle

import torch
from torch import nn

from ddp_parity.module_hooks import ours


def _program_hook(module, args, output):  # a module-level function: picklable, as a program's own hook may be
    return None


def test_our_hooks_are_left_out_of_copies_and_pickles_and_the_programs_stay():
    model = nn.Sequential(nn.Linear(3, 3))
    plain = io.BytesIO()
    torch.save(model, plain)
    seen = []

    def recording_hook(module, args, output):  # a closure, as the recording's are: it cannot be pickled
        seen.append(module)

    model.register_forward_hook(ours(recording_hook))
    model.register_forward_pre_hook(ours(lambda module, args: None))
    model[0].register_forward_hook(ours(recording_hook), always_call=True)
    hooked = io.BytesIO()
    torch.save(model, hooked)  # raised "Can't pickle local object" with the closures in the state
    assert hooked.getvalue() == plain.getvalue()
    model[0].register_forward_hook(_program_hook)
    twin = copy.deepcopy(model)
    assert list(twin[0]._forward_hooks.values()) == [_program_hook] and not twin._forward_hooks
    assert not twin._forward_pre_hooks and not twin[0]._forward_hooks_always_called
    assert list(pickle.loads(pickle.dumps(model))[0]._forward_hooks.values()) == [_program_hook]
    model(torch.ones(1, 3))
    assert seen == [model[0], model]  # the hooks still run on the module itself
    assert model.__getstate__()["_forward_hooks"] is not model._forward_hooks  # a copy of the state, never the module's
    assert len(model._forward_hooks) == 1 and len(model[0]._forward_hooks) == 2
