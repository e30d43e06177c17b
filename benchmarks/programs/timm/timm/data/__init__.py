from .auto_augment import (  # noqa: I001
    RandAugment,  # noqa: F401
    AutoAugment,  # noqa: F401
    rand_augment_ops,  # noqa: F401
    auto_augment_policy,  # noqa: F401
    rand_augment_transform,  # noqa: F401
    auto_augment_transform,  # noqa: F401
)
from .config import resolve_data_config, resolve_model_data_config  # noqa: F401
from .constants import *  # noqa: F403
from .dataset import ImageDataset, IterableImageDataset, AugMixDataset  # noqa: F401
from .dataset_factory import create_dataset  # noqa: F401
from .dataset_info import DatasetInfo, CustomDatasetInfo  # noqa: F401
from .imagenet_info import ImageNetInfo, infer_imagenet_subset  # noqa: F401
from .loader import create_loader  # noqa: F401
from .mixup import Mixup, FastCollateMixup  # noqa: F401
from .readers import create_reader  # noqa: F401
from .readers import get_img_extensions, is_img_extension, set_img_extensions, add_img_extensions, del_img_extensions  # noqa: F401
from .real_labels import RealLabelsImagenet  # noqa: F401
from .transforms import *  # noqa: F403
from .transforms_factory import create_transform  # noqa: F401
