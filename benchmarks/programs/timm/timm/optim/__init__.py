from .adabelief import AdaBelief  # noqa: F401, I001
from .adafactor import Adafactor  # noqa: F401
from .adafactor_bv import AdafactorBigVision  # noqa: F401
from .adahessian import Adahessian  # noqa: F401
from .adamp import AdamP  # noqa: F401
from .adamw import AdamWLegacy  # noqa: F401
from .adan import Adan  # noqa: F401
from .adopt import Adopt  # noqa: F401
from .lamb import Lamb  # noqa: F401
from .laprop import LaProp  # noqa: F401
from .lars import Lars  # noqa: F401
from .lion import Lion  # noqa: F401
from .lookahead import Lookahead  # noqa: F401
from .madgrad import MADGRAD  # noqa: F401
from .mars import Mars  # noqa: F401
from .nadam import NAdamLegacy  # noqa: F401
from .nadamw import NAdamW  # noqa: F401
from .nvnovograd import NvNovoGrad  # noqa: F401
from .radam import RAdamLegacy  # noqa: F401
from .rmsprop_tf import RMSpropTF  # noqa: F401
from .sgdp import SGDP  # noqa: F401
from .sgdw import SGDW  # noqa: F401

# bring common torch.optim Optimizers into timm.optim namespace for consistency
from torch.optim import Adadelta, Adagrad, Adamax, Adam, AdamW, RMSprop, SGD  # noqa: F401

try:
    # in case any very old torch versions being used
    from torch.optim import NAdam, RAdam  # noqa: F401
except ImportError:
    pass

from ._optim_factory import (  # noqa: I001
    list_optimizers,  # noqa: F401
    get_optimizer_class,  # noqa: F401
    get_optimizer_info,  # noqa: F401
    OptimInfo,  # noqa: F401
    OptimizerRegistry,  # noqa: F401
    create_optimizer_v2,  # noqa: F401
    create_optimizer,  # noqa: F401
    optimizer_kwargs,  # noqa: F401
)
from ._param_groups import param_groups_layer_decay, param_groups_weight_decay, auto_group_layers  # noqa: F401
