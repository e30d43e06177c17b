# from .beit import *  # noqa: F403, I001  # changed: only the model the tiny config builds (resnet) is copied
# from .byoanet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .byobnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .cait import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .coat import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .convit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .convmixer import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .convnext import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .crossvit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .cspnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .davit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .deit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .densenet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .dla import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .dpn import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .edgenext import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .efficientformer import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .efficientformer_v2 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .efficientnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .efficientvit_mit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .efficientvit_msra import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .eva import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .fastvit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .focalnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .gcvit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .ghostnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .hardcorenas import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .hgnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .hiera import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .hieradet_sam2 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .hrnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .inception_next import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .inception_resnet_v2 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .inception_v3 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .inception_v4 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .levit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .maxxvit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .mambaout import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .metaformer import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .mlp_mixer import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .mobilenetv3 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .mobilevit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .mvitv2 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .nasnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .nest import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .nextvit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .nfnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .pit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .pnasnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .pvt_v2 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .rdnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .regnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .repghost import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .repvit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .res2net import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .resnest import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
from .resnet import *  # noqa: F403, I001
# from .resnetv2 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .rexnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .selecsls import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .senet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .sequencer import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .sknet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .swin_transformer import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .swin_transformer_v2 import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .swin_transformer_v2_cr import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .tiny_vit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .tnt import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .tresnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .twins import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .vgg import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .visformer import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .vision_transformer import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .vision_transformer_hybrid import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .vision_transformer_relpos import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .vision_transformer_sam import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .vitamin import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .volo import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .vovnet import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .xception import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .xception_aligned import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied
# from .xcit import *  # noqa: F403  # changed: only the model the tiny config builds (resnet) is copied

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
