"""Activation Factory
Hacked together by / Copyright 2020 Ross Wightman
"""

from typing import Union, Callable, Type  # noqa: I001, UP035

from .activations import *  # noqa: F403
from .activations_me import *  # noqa: F403
from .config import is_exportable, is_scriptable

# PyTorch has an optimized, native 'silu' (aka 'swish') operator as of PyTorch 1.7.
# Also hardsigmoid, hardswish, and soon mish. This code will use native version if present.
# Eventually, the custom SiLU, Mish, Hard*, layers will be removed and only native variants will be used.
_has_silu = "silu" in dir(torch.nn.functional)  # noqa: F405
_has_hardswish = "hardswish" in dir(torch.nn.functional)  # noqa: F405
_has_hardsigmoid = "hardsigmoid" in dir(torch.nn.functional)  # noqa: F405
_has_mish = "mish" in dir(torch.nn.functional)  # noqa: F405


_ACT_FN_DEFAULT = dict(
    silu=F.silu if _has_silu else swish,  # noqa: F405
    swish=F.silu if _has_silu else swish,  # noqa: F405
    mish=F.mish if _has_mish else mish,  # noqa: F405
    relu=F.relu,  # noqa: F405
    relu6=F.relu6,  # noqa: F405
    leaky_relu=F.leaky_relu,  # noqa: F405
    elu=F.elu,  # noqa: F405
    celu=F.celu,  # noqa: F405
    selu=F.selu,  # noqa: F405
    gelu=gelu,  # noqa: F405
    gelu_tanh=gelu_tanh,  # noqa: F405
    quick_gelu=quick_gelu,  # noqa: F405
    sigmoid=sigmoid,  # noqa: F405
    tanh=tanh,  # noqa: F405
    hard_sigmoid=F.hardsigmoid if _has_hardsigmoid else hard_sigmoid,  # noqa: F405
    hard_swish=F.hardswish if _has_hardswish else hard_swish,  # noqa: F405
    hard_mish=hard_mish,  # noqa: F405
)

_ACT_FN_ME = dict(
    silu=F.silu if _has_silu else swish_me,  # noqa: F405
    swish=F.silu if _has_silu else swish_me,  # noqa: F405
    mish=F.mish if _has_mish else mish_me,  # noqa: F405
    hard_sigmoid=F.hardsigmoid if _has_hardsigmoid else hard_sigmoid_me,  # noqa: F405
    hard_swish=F.hardswish if _has_hardswish else hard_swish_me,  # noqa: F405
    hard_mish=hard_mish_me,  # noqa: F405
)

_ACT_FNS = (_ACT_FN_ME, _ACT_FN_DEFAULT)
for a in _ACT_FNS:
    a.setdefault("hardsigmoid", a.get("hard_sigmoid"))
    a.setdefault("hardswish", a.get("hard_swish"))


_ACT_LAYER_DEFAULT = dict(
    silu=nn.SiLU if _has_silu else Swish,  # noqa: F405
    swish=nn.SiLU if _has_silu else Swish,  # noqa: F405
    mish=nn.Mish if _has_mish else Mish,  # noqa: F405
    relu=nn.ReLU,  # noqa: F405
    relu6=nn.ReLU6,  # noqa: F405
    leaky_relu=nn.LeakyReLU,  # noqa: F405
    elu=nn.ELU,  # noqa: F405
    prelu=PReLU,  # noqa: F405
    celu=nn.CELU,  # noqa: F405
    selu=nn.SELU,  # noqa: F405
    gelu=GELU,  # noqa: F405
    gelu_tanh=GELUTanh,  # noqa: F405
    quick_gelu=QuickGELU,  # noqa: F405
    sigmoid=Sigmoid,  # noqa: F405
    tanh=Tanh,  # noqa: F405
    hard_sigmoid=nn.Hardsigmoid if _has_hardsigmoid else HardSigmoid,  # noqa: F405
    hard_swish=nn.Hardswish if _has_hardswish else HardSwish,  # noqa: F405
    hard_mish=HardMish,  # noqa: F405
    identity=nn.Identity,  # noqa: F405
)

_ACT_LAYER_ME = dict(
    silu=nn.SiLU if _has_silu else SwishMe,  # noqa: F405
    swish=nn.SiLU if _has_silu else SwishMe,  # noqa: F405
    mish=nn.Mish if _has_mish else MishMe,  # noqa: F405
    hard_sigmoid=nn.Hardsigmoid if _has_hardsigmoid else HardSigmoidMe,  # noqa: F405
    hard_swish=nn.Hardswish if _has_hardswish else HardSwishMe,  # noqa: F405
    hard_mish=HardMishMe,  # noqa: F405
)

_ACT_LAYERS = (_ACT_LAYER_ME, _ACT_LAYER_DEFAULT)
for a in _ACT_LAYERS:
    a.setdefault("hardsigmoid", a.get("hard_sigmoid"))
    a.setdefault("hardswish", a.get("hard_swish"))


def get_act_fn(name: Union[Callable, str] = "relu"):  # noqa: UP007
    """Activation Function Factory
    Fetching activation fns by name with this function allows export or torch script friendly
    functions to be returned dynamically based on current config.
    """
    if not name:
        return None
    if isinstance(name, Callable):
        return name
    name = name.lower()
    if not (is_exportable() or is_scriptable()):
        # If not exporting or scripting the model, first look for a memory-efficient version with
        # custom autograd, then fallback
        if name in _ACT_FN_ME:
            return _ACT_FN_ME[name]
    return _ACT_FN_DEFAULT[name]


def get_act_layer(name: Union[Type[nn.Module], str] = "relu"):  # noqa: F405, UP006, UP007
    """Activation Layer Factory
    Fetching activation layers by name with this function allows export or torch script friendly
    functions to be returned dynamically based on current config.
    """
    if name is None:
        return None
    if not isinstance(name, str):
        # callable, module, etc
        return name
    if not name:
        return None
    name = name.lower()
    if not (is_exportable() or is_scriptable()):
        if name in _ACT_LAYER_ME:
            return _ACT_LAYER_ME[name]
    return _ACT_LAYER_DEFAULT[name]


def create_act_layer(name: Union[Type[nn.Module], str], inplace=None, **kwargs):  # noqa: F405, UP006, UP007
    act_layer = get_act_layer(name)
    if act_layer is None:
        return None
    if inplace is None:
        return act_layer(**kwargs)
    try:
        return act_layer(inplace=inplace, **kwargs)
    except TypeError:
        # recover if act layer doesn't have inplace arg
        return act_layer(**kwargs)
