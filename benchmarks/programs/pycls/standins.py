"""Stand-ins for what pycls imports and this machine lacks (yacs, iopath, simplejson, submitit, fairscale, and
pycls's ImageNet module, which needs OpenCV), registered in sys.modules under the names pycls imports, plus
`write_data`: a tiny CIFAR-10 in the format of the real one (the pickled `data_batch_1..5` and `test_batch` that
pycls's own `Cifar10` reads). Not part of facebookresearch/pycls. Import this module before any pycls module."""

from __future__ import annotations

import copy
import decimal
import json
import os
import pickle
import sys
import types
from ast import literal_eval

import numpy as np
import yaml

# --- yacs 0.1.8: CfgNode (the parts pycls uses, with yacs's own merge and type rules) ----------------------------


class CfgNode(dict):
    IMMUTABLE = "__immutable__"
    DEPRECATED_KEYS = "__deprecated_keys__"
    RENAMED_KEYS = "__renamed_keys__"
    NEW_ALLOWED = "__new_allowed__"

    def __init__(self, init_dict=None, key_list=None, new_allowed=False):
        init_dict = {} if init_dict is None else init_dict
        key_list = [] if key_list is None else key_list
        for k, v in init_dict.items():
            if type(v) is dict:
                init_dict[k] = CfgNode(v, key_list=key_list + [k])
        super().__init__(init_dict)
        self.__dict__[CfgNode.IMMUTABLE] = False
        self.__dict__[CfgNode.DEPRECATED_KEYS] = set()
        self.__dict__[CfgNode.RENAMED_KEYS] = {}
        self.__dict__[CfgNode.NEW_ALLOWED] = new_allowed

    def __getattr__(self, name):
        if name in self:
            return self[name]
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if self.is_frozen():
            raise AttributeError(f"Attempted to set {name} to {value}, but CfgNode is immutable")
        assert name not in self.__dict__, f"Invalid attempt to modify internal CfgNode state: {name}"
        self[name] = value

    def __str__(self):
        return yaml.safe_dump(self._to_dict(), default_flow_style=False)

    def _to_dict(self):
        return {k: v._to_dict() if isinstance(v, CfgNode) else v for k, v in self.items()}

    def dump(self, **kwargs):
        return yaml.safe_dump(self._to_dict(), **kwargs)

    def merge_from_file(self, cfg_filename):
        with open(cfg_filename) as f:
            self.merge_from_other_cfg(self.load_cfg(f))

    def merge_from_other_cfg(self, cfg_other):
        _merge_a_into_b(cfg_other, self, self, [])

    def merge_from_list(self, cfg_list):
        assert len(cfg_list) % 2 == 0, f"Override list has odd length: {cfg_list}; it must be a list of pairs"
        root = self
        for full_key, v in zip(cfg_list[0::2], cfg_list[1::2]):
            if root.key_is_deprecated(full_key):
                continue
            key_list = full_key.split(".")
            d = self
            for subkey in key_list[:-1]:
                assert subkey in d, f"Non-existent key: {full_key}"
                d = d[subkey]
            subkey = key_list[-1]
            assert subkey in d, f"Non-existent key: {full_key}"
            value = _decode_cfg_value(v)
            d[subkey] = _check_and_coerce_cfg_value_type(value, d[subkey], subkey, full_key)

    def freeze(self):
        self._immutable(True)

    def defrost(self):
        self._immutable(False)

    def is_frozen(self):
        return self.__dict__[CfgNode.IMMUTABLE]

    def _immutable(self, is_immutable):
        self.__dict__[CfgNode.IMMUTABLE] = is_immutable
        for v in list(self.__dict__.values()) + list(self.values()):
            if isinstance(v, CfgNode):
                v._immutable(is_immutable)

    def clone(self):
        return copy.deepcopy(self)

    def register_deprecated_key(self, key):
        self.__dict__[CfgNode.DEPRECATED_KEYS].add(key)

    def key_is_deprecated(self, full_key):
        return full_key in self.__dict__[CfgNode.DEPRECATED_KEYS]

    def key_is_renamed(self, full_key):
        return full_key in self.__dict__[CfgNode.RENAMED_KEYS]

    def is_new_allowed(self):
        return self.__dict__[CfgNode.NEW_ALLOWED]

    @classmethod
    def load_cfg(cls, cfg_file_obj_or_str):
        text = cfg_file_obj_or_str if isinstance(cfg_file_obj_or_str, str) else cfg_file_obj_or_str.read()
        return cls(yaml.safe_load(text) or {})


def _decode_cfg_value(value):
    if isinstance(value, dict):
        return CfgNode(value)
    if not isinstance(value, str):
        return value
    try:
        value = literal_eval(value)
    except (ValueError, SyntaxError):
        pass
    return value


def _check_and_coerce_cfg_value_type(replacement, original, key, full_key):
    original_type, replacement_type = type(original), type(replacement)
    if replacement_type == original_type:
        return replacement
    for from_type, to_type in ((tuple, list), (list, tuple)):
        if replacement_type == from_type and original_type == to_type:
            return to_type(replacement)
    if original_type is float and replacement_type is int:  # yacs accepts an int where a float was
        return float(replacement)
    raise ValueError(
        f"Type mismatch ({original_type} vs. {replacement_type}) with values ({original} vs. {replacement}) "
        f"for config key: {full_key}"
    )


def _merge_a_into_b(a, b, root, key_list):
    for k, v_ in a.items():
        full_key = ".".join(key_list + [k])
        v = copy.deepcopy(v_)
        v = _decode_cfg_value(v)
        if k in b:
            v = _check_and_coerce_cfg_value_type(v, b[k], k, full_key)
            if isinstance(v, CfgNode):
                _merge_a_into_b(v, b[k], root, key_list + [k])
            else:
                b[k] = v
        elif b.is_new_allowed():
            b[k] = v
        elif root.key_is_deprecated(full_key):
            continue
        else:
            raise KeyError(f"Non-existent config key: {full_key}")


# --- iopath: PathManagerFactory.get() (local files only) ---------------------------------------------------------


class _PathManager:
    def open(self, path, mode="r", **kwargs):
        return open(path, mode, **kwargs)

    def exists(self, path):
        return os.path.exists(path)

    def isfile(self, path):
        return os.path.isfile(path)

    def ls(self, path):
        return os.listdir(path)

    def mkdirs(self, path):
        os.makedirs(path, exist_ok=True)

    def rm(self, path):
        os.remove(path)

    def get_local_path(self, path, **kwargs):
        return path


class PathManagerFactory:
    @staticmethod
    def get(key="__DEFAULT__"):
        return _PathManager()


# --- simplejson.dumps (use_decimal: a Decimal written as its digits) ----------------------------------------------


def _simplejson_dumps(obj, sort_keys=False, use_decimal=False, **kwargs):
    def plain(o):
        if isinstance(o, dict):
            return {k: plain(v) for k, v in o.items()}
        if isinstance(o, decimal.Decimal):
            return float(o)
        return o

    return json.dumps(plain(obj), sort_keys=sort_keys, **kwargs)


# --- submitit, fairscale: only on paths this port never takes (slurm launch, FSDP) --------------------------------


def _unavailable(*args, **kwargs):
    raise RuntimeError("not available here (a stand-in: this port runs LAUNCH.MODE local, FSDP off)")


class _Checkpointable:
    pass


class _ImageNetUnavailable:
    def __init__(self, *args, **kwargs):
        _unavailable()


def _module(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules.setdefault(name, module)
    return sys.modules[name]


def install():
    """Register the stand-in modules under the names pycls imports (idempotent)."""
    _module("yacs")
    _module("yacs.config", CfgNode=CfgNode)
    _module("iopath")
    _module("iopath.common")
    _module("iopath.common.file_io", PathManagerFactory=PathManagerFactory)
    _module("simplejson", dumps=_simplejson_dumps, loads=json.loads)
    helpers = types.SimpleNamespace(Checkpointable=_Checkpointable)
    _module(
        "submitit",
        helpers=helpers,
        AutoExecutor=_unavailable,
        LocalExecutor=_unavailable,
        JobEnvironment=_unavailable,
    )
    _module("fairscale")
    _module("fairscale.nn", auto_wrap=_unavailable, config_auto_wrap_policy=None, enable_wrap=_unavailable)
    _module("fairscale.nn.data_parallel", FullyShardedDataParallel=_unavailable)
    _module("fairscale.optim")
    _module("fairscale.optim.grad_scaler", ShardedGradScaler=_unavailable)


install()

# ImageNet and ImageNetFFCV (pycls/datasets/imagenet.py needs OpenCV): never built here, the set is cifar10
ImageNet = ImageNetFFCV = _ImageNetUnavailable


# --- the data: a tiny CIFAR-10 in CIFAR-10's own pickle format ----------------------------------------------------

N_TRAIN = 64  # 5 data batches of the real set's format, split as evenly as they go
N_TEST = 32


def _pickle_batch(path, data, labels):
    with open(path, "wb") as f:
        pickle.dump({b"data": data, b"labels": labels, b"batch_label": b"tiny"}, f)


def write_data(root):
    """Write `root/cifar10/data_batch_1..5` and `test_batch` (uint8 rows of 3 x 32 x 32, labels 0..9), drawn from
    numpy's RandomState(0): the class shifts each image's mean so the net has something to learn."""
    out = os.path.join(root, "cifar10")
    os.makedirs(out, exist_ok=True)
    rng = np.random.RandomState(0)

    def draw(n):
        labels = rng.randint(0, 10, size=n)
        base = rng.randint(0, 256, size=(n, 3072)).astype(np.int64)
        data = np.clip(base // 2 + labels[:, None] * 12, 0, 255).astype(np.uint8)
        return data, [int(x) for x in labels]

    data, labels = draw(N_TRAIN)
    for i, idx in enumerate(np.array_split(np.arange(N_TRAIN), 5)):
        _pickle_batch(os.path.join(out, f"data_batch_{i + 1}"), data[idx], [labels[j] for j in idx])
    data, labels = draw(N_TEST)
    _pickle_batch(os.path.join(out, "test_batch"), data, labels)
    return out


__all__ = ["CfgNode", "ImageNet", "ImageNetFFCV", "PathManagerFactory", "install", "write_data"]
