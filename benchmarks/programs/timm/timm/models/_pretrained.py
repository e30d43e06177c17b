import copy  # noqa: F401, I001
from collections import deque, defaultdict  # noqa: F401
from dataclasses import dataclass, field, replace, asdict  # noqa: F401
from typing import Any, Deque, Dict, Tuple, Optional, Union  # noqa: UP035


__all__ = ["PretrainedCfg", "filter_pretrained_cfg", "DefaultCfg"]


@dataclass
class PretrainedCfg:
    """ """

    # weight source locations
    url: Optional[Union[str, Tuple[str, str]]] = None  # remote URL  # noqa: UP006, UP007, UP045
    file: Optional[str] = None  # local / shared filesystem path  # noqa: UP045
    state_dict: Optional[Dict[str, Any]] = None  # in-memory state dict  # noqa: UP006, UP045
    hf_hub_id: Optional[str] = None  # Hugging Face Hub model id ('organization/model')  # noqa: UP045
    hf_hub_filename: Optional[str] = None  # Hugging Face Hub filename (overrides default)  # noqa: UP045

    source: Optional[str] = None  # source of cfg / weight location used (url, file, hf-hub)  # noqa: UP045
    architecture: Optional[str] = None  # architecture variant can be set when not implicit  # noqa: UP045
    tag: Optional[str] = None  # pretrained tag of source  # noqa: UP045
    custom_load: bool = False  # use custom model specific model.load_pretrained() (ie for npz files)

    # input / data config
    input_size: Tuple[int, int, int] = (3, 224, 224)  # noqa: UP006
    test_input_size: Optional[Tuple[int, int, int]] = None  # noqa: UP006, UP045
    min_input_size: Optional[Tuple[int, int, int]] = None  # noqa: UP006, UP045
    fixed_input_size: bool = False
    interpolation: str = "bicubic"
    crop_pct: float = 0.875
    test_crop_pct: Optional[float] = None  # noqa: UP045
    crop_mode: str = "center"
    mean: Tuple[float, ...] = (0.485, 0.456, 0.406)  # noqa: UP006
    std: Tuple[float, ...] = (0.229, 0.224, 0.225)  # noqa: UP006

    # head / classifier config and meta-data
    num_classes: int = 1000
    label_offset: Optional[int] = None  # noqa: UP045
    label_names: Optional[Tuple[str]] = None  # noqa: UP006, UP045
    label_descriptions: Optional[Dict[str, str]] = None  # noqa: UP006, UP045

    # model attributes that vary with above or required for pretrained adaptation
    pool_size: Optional[Tuple[int, ...]] = None  # noqa: UP006, UP045
    test_pool_size: Optional[Tuple[int, ...]] = None  # noqa: UP006, UP045
    first_conv: Optional[str] = None  # noqa: UP045
    classifier: Optional[str] = None  # noqa: UP045

    license: Optional[str] = None  # noqa: UP045
    description: Optional[str] = None  # noqa: UP045
    origin_url: Optional[str] = None  # noqa: UP045
    paper_name: Optional[str] = None  # noqa: UP045
    paper_ids: Optional[Union[str, Tuple[str]]] = None  # noqa: UP006, UP007, UP045
    notes: Optional[Tuple[str]] = None  # noqa: UP006, UP045

    @property
    def has_weights(self):
        return self.url or self.file or self.hf_hub_id

    def to_dict(self, remove_source=False, remove_null=True):
        return filter_pretrained_cfg(asdict(self), remove_source=remove_source, remove_null=remove_null)


def filter_pretrained_cfg(cfg, remove_source=False, remove_null=True):
    filtered_cfg = {}
    keep_null = {"pool_size", "first_conv", "classifier"}  # always keep these keys, even if none
    for k, v in cfg.items():
        if remove_source and k in {"url", "file", "hf_hub_id", "hf_hub_id", "hf_hub_filename", "source"}:  # noqa: B033
            continue
        if remove_null and v is None and k not in keep_null:
            continue
        filtered_cfg[k] = v
    return filtered_cfg


@dataclass
class DefaultCfg:
    tags: Deque[str] = field(default_factory=deque)  # priority queue of tags (first is default)  # noqa: UP006
    cfgs: Dict[str, PretrainedCfg] = field(default_factory=dict)  # pretrained cfgs by tag  # noqa: UP006
    is_pretrained: bool = False  # at least one of the configs has a pretrained source set

    @property
    def default(self):
        return self.cfgs[self.tags[0]]

    @property
    def default_with_tag(self):
        tag = self.tags[0]
        return tag, self.cfgs[tag]
