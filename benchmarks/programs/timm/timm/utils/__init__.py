from .agc import adaptive_clip_grad  # noqa: F401, I001
from .attention_extract import AttentionExtract  # noqa: F401
from .checkpoint_saver import CheckpointSaver  # noqa: F401
from .clip_grad import dispatch_clip_grad  # noqa: F401
from .cuda import ApexScaler, NativeScaler  # noqa: F401
from .decay_batch import decay_batch_step, check_batch_size_retry  # noqa: F401
from .distributed import (
    distribute_bn,  # noqa: F401
    reduce_tensor,  # noqa: F401
    init_distributed_device,  # noqa: F401
    world_info_from_env,  # noqa: F401
    is_distributed_env,  # noqa: F401
    is_primary,  # noqa: F401
)
from .jit import set_jit_legacy, set_jit_fuser  # noqa: F401
from .log import setup_default_logging, FormatterNoInfo  # noqa: F401
from .metrics import AverageMeter, accuracy  # noqa: F401
from .misc import natural_key, add_bool_arg, ParseKwargs  # noqa: F401
from .model import unwrap_model, get_state_dict, freeze, unfreeze, reparameterize_model  # noqa: F401
from .model_ema import ModelEma, ModelEmaV2, ModelEmaV3  # noqa: F401
from .random import random_seed  # noqa: F401
from .summary import update_summary, get_outdir  # noqa: F401
