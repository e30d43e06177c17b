from .activations import *  # noqa: F403, I001
from .adaptive_avgmax_pool import (
    adaptive_avgmax_pool2d,  # noqa: F401
    select_adaptive_pool2d,  # noqa: F401
    AdaptiveAvgMaxPool2d,  # noqa: F401
    SelectAdaptivePool2d,  # noqa: F401
)
from .attention2d import MultiQueryAttention2d, Attention2d, MultiQueryAttentionV2  # noqa: F401
from .attention_pool import AttentionPoolLatent  # noqa: F401
from .attention_pool2d import AttentionPool2d, RotAttentionPool2d, RotaryEmbedding  # noqa: F401
from .blur_pool import BlurPool2d, create_aa  # noqa: F401
from .classifier import create_classifier, ClassifierHead, NormMlpClassifierHead, ClNormMlpClassifierHead  # noqa: F401
from .cond_conv2d import CondConv2d, get_condconv_initializer  # noqa: F401
from .config import (
    is_exportable,  # noqa: F401
    is_scriptable,  # noqa: F401
    is_no_jit,  # noqa: F401
    use_fused_attn,  # noqa: F401
    set_exportable,  # noqa: F401
    set_scriptable,  # noqa: F401
    set_no_jit,  # noqa: F401
    set_layer_config,  # noqa: F401
    set_fused_attn,  # noqa: F401
    set_reentrant_ckpt,  # noqa: F401
    use_reentrant_ckpt,  # noqa: F401
)
from .conv2d_same import Conv2dSame, conv2d_same  # noqa: F401
from .conv_bn_act import ConvNormAct, ConvNormActAa, ConvBnAct  # noqa: F401
from .create_act import create_act_layer, get_act_layer, get_act_fn  # noqa: F401
from .create_attn import get_attn, create_attn  # noqa: F401
from .create_conv2d import create_conv2d  # noqa: F401
from .create_norm import get_norm_layer, create_norm_layer  # noqa: F401
from .create_norm_act import get_norm_act_layer, create_norm_act_layer, get_norm_act_layer  # noqa: F401, F811
from .drop import DropBlock2d, DropPath, drop_block_2d, drop_path  # noqa: F401
from .eca import EcaModule, CecaModule, EfficientChannelAttn, CircularEfficientChannelAttn  # noqa: F401
from .evo_norm import (
    EvoNorm2dB0,  # noqa: F401
    EvoNorm2dB1,  # noqa: F401
    EvoNorm2dB2,  # noqa: F401
    EvoNorm2dS0,  # noqa: F401
    EvoNorm2dS0a,  # noqa: F401
    EvoNorm2dS1,  # noqa: F401
    EvoNorm2dS1a,  # noqa: F401
    EvoNorm2dS2,  # noqa: F401
    EvoNorm2dS2a,  # noqa: F401
)
from .fast_norm import is_fast_norm, set_fast_norm, fast_group_norm, fast_layer_norm  # noqa: F401
from .filter_response_norm import FilterResponseNormTlu2d, FilterResponseNormAct2d  # noqa: F401
from .format import Format, get_channel_dim, get_spatial_dim, nchw_to, nhwc_to  # noqa: F401
from .gather_excite import GatherExcite  # noqa: F401
from .global_context import GlobalContext  # noqa: F401
from .grid import ndgrid, meshgrid  # noqa: F401
from .helpers import to_ntuple, to_2tuple, to_3tuple, to_4tuple, make_divisible, extend_tuple  # noqa: F401
from .hybrid_embed import HybridEmbed, HybridEmbedWithSize  # noqa: F401
from .inplace_abn import InplaceAbn  # noqa: F401
from .layer_scale import LayerScale, LayerScale2d  # noqa: F401
from .linear import Linear  # noqa: F401
from .mixed_conv2d import MixedConv2d  # noqa: F401
from .mlp import Mlp, GluMlp, GatedMlp, SwiGLU, SwiGLUPacked, ConvMlp, GlobalResponseNormMlp  # noqa: F401
from .non_local_attn import NonLocalAttn, BatNonLocalAttn  # noqa: F401
from .norm import GroupNorm, GroupNorm1, LayerNorm, LayerNorm2d, RmsNorm, RmsNorm2d, SimpleNorm, SimpleNorm2d  # noqa: F401
from .norm_act import (
    BatchNormAct2d,  # noqa: F401
    GroupNormAct,  # noqa: F401
    GroupNorm1Act,  # noqa: F401
    LayerNormAct,  # noqa: F401
    LayerNormAct2d,  # noqa: F401
    SyncBatchNormAct,  # noqa: F401
    convert_sync_batchnorm,  # noqa: F401
    FrozenBatchNormAct2d,  # noqa: F401
    freeze_batch_norm_2d,  # noqa: F401
    unfreeze_batch_norm_2d,  # noqa: F401
)
from .padding import get_padding, get_same_padding, pad_same  # noqa: F401
from .patch_dropout import PatchDropout  # noqa: F401
from .patch_embed import PatchEmbed, PatchEmbedWithSize, resample_patch_embed  # noqa: F401
from .pool2d_same import AvgPool2dSame, create_pool2d  # noqa: F401
from .pos_embed import resample_abs_pos_embed, resample_abs_pos_embed_nhwc  # noqa: F401
from .pos_embed_rel import (
    RelPosMlp,  # noqa: F401
    RelPosBias,  # noqa: F401
    RelPosBiasTf,  # noqa: F401
    gen_relative_position_index,  # noqa: F401
    gen_relative_log_coords,  # noqa: F401
    resize_rel_pos_bias_table,  # noqa: F401
    resize_rel_pos_bias_table_simple,  # noqa: F401
    resize_rel_pos_bias_table_levit,  # noqa: F401
)
from .pos_embed_sincos import (
    pixel_freq_bands,  # noqa: F401
    freq_bands,  # noqa: F401
    build_sincos2d_pos_embed,  # noqa: F401
    build_fourier_pos_embed,  # noqa: F401
    build_rotary_pos_embed,  # noqa: F401
    apply_rot_embed,  # noqa: F401
    apply_rot_embed_cat,  # noqa: F401
    apply_rot_embed_list,  # noqa: F401
    apply_keep_indices_nlc,  # noqa: F401
    FourierEmbed,  # noqa: F401
    RotaryEmbedding,  # noqa: F401, F811
    RotaryEmbeddingCat,  # noqa: F401
)
from .squeeze_excite import SEModule, SqueezeExcite, EffectiveSEModule, EffectiveSqueezeExcite  # noqa: F401
from .selective_kernel import SelectiveKernel  # noqa: F401
from .separable_conv import SeparableConv2d, SeparableConvNormAct  # noqa: F401
from .space_to_depth import SpaceToDepth, DepthToSpace  # noqa: F401
from .split_attn import SplitAttn  # noqa: F401
from .split_batchnorm import SplitBatchNorm2d, convert_splitbn_model  # noqa: F401
from .std_conv import StdConv2d, StdConv2dSame, ScaledStdConv2d, ScaledStdConv2dSame  # noqa: F401
from .test_time_pool import TestTimePoolHead, apply_test_time_pool  # noqa: F401
from .trace_utils import _assert, _float_to_int  # noqa: F401
from .typing import LayerType, PadType  # noqa: F401
from .weight_init import (
    trunc_normal_,  # noqa: F401
    trunc_normal_tf_,  # noqa: F401
    variance_scaling_,  # noqa: F401
    lecun_normal_,  # noqa: F401
    init_weight_jax,  # noqa: F401
    init_weight_vit,  # noqa: F401
)
