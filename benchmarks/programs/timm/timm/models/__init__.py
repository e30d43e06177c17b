from .beit import *  # noqa: F403, I001
from .byoanet import *  # noqa: F403
from .byobnet import *  # noqa: F403
from .cait import *  # noqa: F403
from .coat import *  # noqa: F403
from .convit import *  # noqa: F403
from .convmixer import *  # noqa: F403
from .convnext import *  # noqa: F403
from .crossvit import *  # noqa: F403
from .cspnet import *  # noqa: F403
from .davit import *  # noqa: F403
from .deit import *  # noqa: F403
from .densenet import *  # noqa: F403
from .dla import *  # noqa: F403
from .dpn import *  # noqa: F403
from .edgenext import *  # noqa: F403
from .efficientformer import *  # noqa: F403
from .efficientformer_v2 import *  # noqa: F403
from .efficientnet import *  # noqa: F403
from .efficientvit_mit import *  # noqa: F403
from .efficientvit_msra import *  # noqa: F403
from .eva import *  # noqa: F403
from .fastvit import *  # noqa: F403
from .focalnet import *  # noqa: F403
from .gcvit import *  # noqa: F403
from .ghostnet import *  # noqa: F403
from .hardcorenas import *  # noqa: F403
from .hgnet import *  # noqa: F403
from .hiera import *  # noqa: F403
from .hieradet_sam2 import *  # noqa: F403
from .hrnet import *  # noqa: F403
from .inception_next import *  # noqa: F403
from .inception_resnet_v2 import *  # noqa: F403
from .inception_v3 import *  # noqa: F403
from .inception_v4 import *  # noqa: F403
from .levit import *  # noqa: F403
from .maxxvit import *  # noqa: F403
from .mambaout import *  # noqa: F403
from .metaformer import *  # noqa: F403
from .mlp_mixer import *  # noqa: F403
from .mobilenetv3 import *  # noqa: F403
from .mobilevit import *  # noqa: F403
from .mvitv2 import *  # noqa: F403
from .nasnet import *  # noqa: F403
from .nest import *  # noqa: F403
from .nextvit import *  # noqa: F403
from .nfnet import *  # noqa: F403
from .pit import *  # noqa: F403
from .pnasnet import *  # noqa: F403
from .pvt_v2 import *  # noqa: F403
from .rdnet import *  # noqa: F403
from .regnet import *  # noqa: F403
from .repghost import *  # noqa: F403
from .repvit import *  # noqa: F403
from .res2net import *  # noqa: F403
from .resnest import *  # noqa: F403
from .resnet import *  # noqa: F403
from .resnetv2 import *  # noqa: F403
from .rexnet import *  # noqa: F403
from .selecsls import *  # noqa: F403
from .senet import *  # noqa: F403
from .sequencer import *  # noqa: F403
from .sknet import *  # noqa: F403
from .swin_transformer import *  # noqa: F403
from .swin_transformer_v2 import *  # noqa: F403
from .swin_transformer_v2_cr import *  # noqa: F403
from .tiny_vit import *  # noqa: F403
from .tnt import *  # noqa: F403
from .tresnet import *  # noqa: F403
from .twins import *  # noqa: F403
from .vgg import *  # noqa: F403
from .visformer import *  # noqa: F403
from .vision_transformer import *  # noqa: F403
from .vision_transformer_hybrid import *  # noqa: F403
from .vision_transformer_relpos import *  # noqa: F403
from .vision_transformer_sam import *  # noqa: F403
from .vitamin import *  # noqa: F403
from .volo import *  # noqa: F403
from .vovnet import *  # noqa: F403
from .xception import *  # noqa: F403
from .xception_aligned import *  # noqa: F403
from .xcit import *  # noqa: F403

from ._builder import (
    build_model_with_cfg,  # noqa: F401
    load_pretrained,  # noqa: F401
    load_custom_pretrained,  # noqa: F401
    resolve_pretrained_cfg,  # noqa: F401
    set_pretrained_download_progress,  # noqa: F401
    set_pretrained_check_hash,  # noqa: F401
)
from ._factory import create_model, parse_model_name, safe_model_name  # noqa: F401
from ._features import FeatureInfo, FeatureHooks, FeatureHookNet, FeatureListNet, FeatureDictNet  # noqa: F401
from ._features_fx import (
    FeatureGraphNet,  # noqa: F401
    GraphExtractNet,  # noqa: F401
    create_feature_extractor,  # noqa: F401
    get_graph_node_names,  # noqa: F401
    register_notrace_module,  # noqa: F401
    is_notrace_module,  # noqa: F401
    get_notrace_modules,  # noqa: F401
    register_notrace_function,  # noqa: F401
    is_notrace_function,  # noqa: F401
    get_notrace_functions,  # noqa: F401
)
from ._helpers import clean_state_dict, load_state_dict, load_checkpoint, remap_state_dict, resume_checkpoint  # noqa: F401
from ._hub import load_model_config_from_hf, load_state_dict_from_hf, push_to_hf_hub  # noqa: F401
from ._manipulate import (
    model_parameters,  # noqa: F401
    named_apply,  # noqa: F401
    named_modules,  # noqa: F401
    named_modules_with_params,  # noqa: F401
    group_modules,  # noqa: F401
    group_parameters,  # noqa: F401
    checkpoint_seq,  # noqa: F401
    checkpoint,  # noqa: F401
    adapt_input_conv,  # noqa: F401
)
from ._pretrained import PretrainedCfg, DefaultCfg, filter_pretrained_cfg  # noqa: F401
from ._prune import adapt_model_from_string  # noqa: F401
from ._registry import (
    split_model_name_tag,  # noqa: F401
    get_arch_name,  # noqa: F401
    generate_default_cfgs,  # noqa: F401
    register_model,  # noqa: F401
    register_model_deprecations,  # noqa: F401
    model_entrypoint,  # noqa: F401
    list_models,  # noqa: F401
    list_pretrained,  # noqa: F401
    get_deprecated_models,  # noqa: F401
    is_model,  # noqa: F401
    list_modules,  # noqa: F401
    is_model_in_modules,  # noqa: F401
    is_model_pretrained,  # noqa: F401
    get_pretrained_cfg,  # noqa: F401
    get_pretrained_cfg_value,  # noqa: F401
    get_arch_pretrained_cfgs,  # noqa: F401
)
