"""Stand-ins for what HRNet-Semantic-Segmentation imports and is not installed here: yacs (CfgNode), OpenCV (cv2:
imread, resize, copyMakeBorder on numpy arrays) and tensorboardX (SummaryWriter). None of them draws a random number;
the program's augmentation draws from Python's and numpy's global generators itself (base_dataset.py).

yacs: CfgNode (attribute access, new_allowed, clone, defrost/freeze, merge_from_file, merge_from_list, dump).
cv2: imread (IMREAD_COLOR: BGR uint8 H x W x 3; IMREAD_GRAYSCALE: uint8 H x W), resize (INTER_LINEAR: OpenCV's
half-pixel bilinear, rounded back to the input's integer type; INTER_NEAREST: OpenCV's floor(dst * scale)),
copyMakeBorder (BORDER_CONSTANT).
tensorboardX: SummaryWriter (add_scalar kept in memory, nothing written).
And `write_data`: cityscapes-style image / label lists of synthetic 32 x 32 images and label maps (label ids 0, 7, 8,
11, 12: Cityscapes' ids that its label_mapping turns into the ignore label and the train ids 0, 1, 2, 3)."""

from __future__ import annotations

import ast
import copy
import os

import numpy as np
import yaml
from PIL import Image

# ---------------------------------------------------------------- yacs.config.CfgNode


class CfgNode(dict):
    """yacs' CfgNode: a dict whose keys are attributes, frozen against assignment unless defrosted."""

    IMMUTABLE = "__immutable__"

    NEW_ALLOWED = "__new_allowed__"

    def __init__(self, init_dict=None, new_allowed=False):
        init_dict = {} if init_dict is None else init_dict
        super().__init__({k: CfgNode(v, new_allowed) if isinstance(v, dict) else v for k, v in init_dict.items()})
        self.__dict__[CfgNode.IMMUTABLE] = False
        self.__dict__[CfgNode.NEW_ALLOWED] = new_allowed

    def __getattr__(self, name):
        if name in self:
            return self[name]
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if self.__dict__[CfgNode.IMMUTABLE]:
            raise AttributeError(f"Attempted to set {name} to {value}, but CfgNode is immutable")
        self[name] = value

    def __deepcopy__(self, memo):
        node = CfgNode({k: copy.deepcopy(v, memo) for k, v in self.items()}, self.__dict__[CfgNode.NEW_ALLOWED])
        node.__dict__[CfgNode.IMMUTABLE] = self.__dict__[CfgNode.IMMUTABLE]
        return node

    def __reduce__(self):
        return (CfgNode, (self.to_dict(),))

    def _immutable(self, flag):
        self.__dict__[CfgNode.IMMUTABLE] = flag
        for v in self.values():
            if isinstance(v, CfgNode):
                v._immutable(flag)

    def freeze(self):
        self._immutable(True)

    def defrost(self):
        self._immutable(False)

    def is_frozen(self):
        return self.__dict__[CfgNode.IMMUTABLE]

    def clone(self):
        return copy.deepcopy(self)

    def to_dict(self):
        return {
            k: v.to_dict() if isinstance(v, CfgNode) else (list(v) if isinstance(v, tuple) else v)
            for k, v in self.items()
        }

    def dump(self, **kwargs):
        return yaml.safe_dump(self.to_dict(), **kwargs)

    @staticmethod
    def _coerce(value, original, key):
        if isinstance(value, str) and not isinstance(original, str):
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                pass
        if original is None or value is None or type(value) is type(original):
            return value
        if isinstance(original, tuple) and isinstance(value, list):
            return tuple(value)
        if isinstance(original, list) and isinstance(value, tuple):
            return list(value)
        if isinstance(original, float) and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        raise ValueError(
            f"Type mismatch ({type(original)} vs. {type(value)}) with values ({original} vs. {value}) "
            f"for config key: {key}"
        )

    def _merge(self, other, prefix=""):
        for k, v in other.items():
            full = prefix + k
            if k not in self:
                if not self.__dict__[CfgNode.NEW_ALLOWED]:
                    raise KeyError(f"Non-existent config key: {full}")
                # yacs: a key new to a node built with new_allowed=True is added as it is
                self[k] = CfgNode(v, True) if isinstance(v, dict) else copy.deepcopy(v)
                continue
            if isinstance(v, dict):
                self[k]._merge(v, full + ".")
            else:
                self[k] = CfgNode._coerce(copy.deepcopy(v), self[k], full)

    def merge_from_file(self, cfg_filename):
        with open(cfg_filename) as f:
            self._merge(yaml.safe_load(f) or {})

    def merge_from_list(self, cfg_list):
        assert len(cfg_list) % 2 == 0, f"Override list has odd length: {cfg_list}"
        for full_key, v in zip(cfg_list[0::2], cfg_list[1::2], strict=True):
            *path, last = full_key.split(".")
            d = self
            for sub in path:
                d = d[sub]
            if last not in d:
                raise KeyError(f"Non-existent config key: {full_key}")
            d[last] = CfgNode._coerce(v, d[last], full_key)


# ---------------------------------------------------------------- cv2

IMREAD_GRAYSCALE = 0
IMREAD_COLOR = 1
INTER_NEAREST = 0
INTER_LINEAR = 1
BORDER_CONSTANT = 0


def imread(filename, flags=IMREAD_COLOR):
    if not os.path.isfile(filename):
        return None
    with Image.open(filename) as img:
        if flags == IMREAD_GRAYSCALE:
            return np.asarray(img.convert("L")).copy()
        return np.ascontiguousarray(np.asarray(img.convert("RGB"))[:, :, ::-1])


def _resize_linear(src, new_w, new_h):
    h, w = src.shape[:2]
    data = src.astype(np.float64)

    def axis(n_out, n_in):
        pos = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
        pos = np.clip(pos, 0, n_in - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, pos - lo

    y0, y1, fy = axis(new_h, h)
    x0, x1, fx = axis(new_w, w)
    if data.ndim == 3:
        fy = fy[:, None, None]
        fx = fx[None, :, None]
    else:
        fy = fy[:, None]
        fx = fx[None, :]
    top = data[y0][:, x0] * (1 - fx) + data[y0][:, x1] * fx
    bottom = data[y1][:, x0] * (1 - fx) + data[y1][:, x1] * fx
    out = top * (1 - fy) + bottom * fy
    if np.issubdtype(src.dtype, np.integer):
        info = np.iinfo(src.dtype)
        out = np.clip(np.rint(out), info.min, info.max)
    return out.astype(src.dtype)


def _resize_nearest(src, new_w, new_h):
    h, w = src.shape[:2]
    ys = np.minimum((np.arange(new_h) * (h / new_h)).astype(np.int64), h - 1)
    xs = np.minimum((np.arange(new_w) * (w / new_w)).astype(np.int64), w - 1)
    return src[ys][:, xs].copy()


def resize(src, dsize, dst=None, fx=None, fy=None, interpolation=INTER_LINEAR):
    h, w = src.shape[:2]
    if dsize is None or tuple(dsize) == (0, 0):
        new_w, new_h = int(round(w * fx)), int(round(h * fy))
    else:
        new_w, new_h = int(dsize[0]), int(dsize[1])
    if interpolation == INTER_NEAREST:
        return _resize_nearest(src, new_w, new_h)
    return _resize_linear(src, new_w, new_h)


def copyMakeBorder(src, top, bottom, left, right, borderType, dst=None, value=None):  # noqa: N802 (OpenCV's name)
    assert borderType == BORDER_CONSTANT
    value = (0,) if value is None else (value if isinstance(value, (tuple, list)) else (value,))
    out_h, out_w = src.shape[0] + top + bottom, src.shape[1] + left + right
    if src.ndim == 3:
        out = np.empty((out_h, out_w, src.shape[2]), dtype=src.dtype)
        for c in range(src.shape[2]):
            out[:, :, c] = value[c] if c < len(value) else 0
    else:
        out = np.full((out_h, out_w), value[0], dtype=src.dtype)
    out[top : top + src.shape[0], left : left + src.shape[1]] = src
    return out


# ---------------------------------------------------------------- tensorboardX


class SummaryWriter:
    def __init__(self, logdir=None, **kwargs):
        self.logdir = logdir
        self.scalars = []

    def add_scalar(self, tag, value, global_step=None):
        self.scalars.append((tag, float(value), global_step))

    def close(self):
        pass


# ---------------------------------------------------------------- the data

SIZE = 32
TRAIN_IMAGES = 12
VAL_IMAGES = 4
LABEL_IDS = (0, 7, 8, 11, 12)  # 0 -> ignore; 7, 8, 11, 12 -> train ids 0..3


def write_data(root: str) -> None:
    """root/{images,labels}/NAME.png and root/train.lst, root/val.lst ("image label" per line, cityscapes-style):
    label maps of 4 x 4-pixel blocks of the ids above (a few ignore-label blocks), and images whose colour follows
    the label plus noise, from a fixed numpy generator."""
    rng = np.random.RandomState(0)
    palette = rng.randint(0, 256, size=(max(LABEL_IDS) + 1, 3))
    for sub in ("images", "labels"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    for split, count in (("train", TRAIN_IMAGES), ("val", VAL_IMAGES)):
        lines = []
        for i in range(count):
            blocks = rng.choice(LABEL_IDS, size=(SIZE // 4, SIZE // 4), p=(0.1, 0.3, 0.2, 0.2, 0.2))
            label = np.kron(blocks, np.ones((4, 4), dtype=np.int64)).astype(np.uint8)
            image = palette[label] + rng.randint(-40, 41, size=(SIZE, SIZE, 3))
            image = np.clip(image, 0, 255).astype(np.uint8)
            name = f"{split}_{i:03d}"
            Image.fromarray(image).save(os.path.join(root, "images", name + ".png"))
            Image.fromarray(label).save(os.path.join(root, "labels", name + ".png"))
            lines.append(f"images/{name}.png labels/{name}.png")
        with open(os.path.join(root, split + ".lst"), "w") as f:
            f.write("\n".join(lines) + "\n")
