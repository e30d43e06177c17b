from .coca_model import CoCa  # noqa: F401
from .constants import OPENAI_DATASET_MEAN, OPENAI_DATASET_STD  # noqa: F401
from .factory import (
    add_model_config,  # noqa: F401
    create_loss,  # noqa: F401
    create_model,  # noqa: F401
    create_model_and_transforms,  # noqa: F401
    create_model_from_pretrained,  # noqa: F401
    get_model_config,  # noqa: F401
    get_tokenizer,  # noqa: F401
    list_models,  # noqa: F401
    load_checkpoint,  # noqa: F401
)
from .loss import ClipLoss, CoCaLoss, DistillClipLoss  # noqa: F401
from .model import (
    CLIP,  # noqa: F401
    CLIPTextCfg,  # noqa: F401
    CLIPVisionCfg,  # noqa: F401
    CustomTextCLIP,  # noqa: F401
    convert_weights_to_fp16,  # noqa: F401
    convert_weights_to_lp,  # noqa: F401
    get_cast_dtype,  # noqa: F401
    get_input_dtype,  # noqa: F401
    trace_model,  # noqa: F401
)
from .openai import list_openai_models, load_openai_model  # noqa: F401
from .pretrained import (
    download_pretrained,  # noqa: F401
    download_pretrained_from_url,  # noqa: F401
    get_pretrained_cfg,  # noqa: F401
    get_pretrained_url,  # noqa: F401
    is_pretrained_cfg,  # noqa: F401
    list_pretrained,  # noqa: F401
    list_pretrained_models_by_tag,  # noqa: F401
    list_pretrained_tags_by_model,  # noqa: F401
)
from .push_to_hf_hub import push_pretrained_to_hf_hub, push_to_hf_hub  # noqa: F401
from .tokenizer import SimpleTokenizer, decode, tokenize  # noqa: F401
from .transform import AugmentationCfg, image_transform  # noqa: F401
from .zero_shot_classifier import build_zero_shot_classifier, build_zero_shot_classifier_legacy  # noqa: F401
from .zero_shot_metadata import IMAGENET_CLASSNAMES, OPENAI_IMAGENET_TEMPLATES, SIMPLE_IMAGENET_TEMPLATES  # noqa: F401
