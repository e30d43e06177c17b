"""Stand-ins for what open_clip's training imports and this machine lacks (torchvision's transforms and
FrozenBatchNorm2d, ftfy and regex for the BPE tokenizer, pandas' read_csv, webdataset and braceexpand), and the
synthetic CSV data set. The transforms draw from the same generator (torch's global one) in the same order as
torchvision's; what the tiny config never reaches raises. Not part of mlfoundations/open_clip."""

from __future__ import annotations

import math
import os
import re as _re
from enum import Enum
from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image
from torch import nn

# --- ftfy.fix_text: the captions here are plain ASCII, which ftfy returns unchanged ----------------------------

ftfy = SimpleNamespace(fix_text=lambda text: text)


# --- the `regex` module as the tokenizer uses it: \p{L} (letters) and \p{N} (digits here) in Python's `re` -------


def _translate(pattern: str) -> str:
    pattern = pattern.replace(r"[\p{L}]+", r"[^\W\d_]+").replace(r"[\p{N}]", r"\d")
    return pattern.replace(r"[^\s\p{L}\p{N}]+", r"(?:[^\s\w]|_)+")


regex = SimpleNamespace(
    compile=lambda pattern, flags=0: _re.compile(_translate(pattern), flags),
    sub=lambda pattern, repl, string, **k: _re.sub(pattern, repl, string, **k),
    findall=lambda pattern, string, *a, **k: _re.findall(pattern, string, *a, **k),
    IGNORECASE=_re.IGNORECASE,
)


# --- torchvision.transforms (0.15) on PIL images -----------------------------------------------------------------


class InterpolationMode(Enum):
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"


_PIL = {
    InterpolationMode.NEAREST: Image.NEAREST,
    InterpolationMode.BILINEAR: Image.BILINEAR,
    InterpolationMode.BICUBIC: Image.BICUBIC,
}


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


def _resize(img, size, interpolation):
    w, h = img.size
    if isinstance(size, int):  # the shorter edge to size, the aspect kept
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = size, int(size * long / short)
        ow, oh = (new_short, new_long) if w <= h else (new_long, new_short)
    else:
        oh, ow = size
    if (ow, oh) == (w, h):
        return img
    return img.resize((ow, oh), _PIL[interpolation])


class RandomResizedCrop(nn.Module):
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=InterpolationMode.BILINEAR):
        super().__init__()
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.scale, self.ratio, self.interpolation = scale, ratio, interpolation

    @staticmethod
    def get_params(img, scale, ratio):
        width, height = img.size
        area = height * width
        log_ratio = torch.log(torch.tensor(ratio))
        for _ in range(10):
            target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
            aspect_ratio = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                i = torch.randint(0, height - h + 1, size=(1,)).item()
                j = torch.randint(0, width - w + 1, size=(1,)).item()
                return i, j, h, w
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def forward(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return _resize(img.crop((j, i, j + w, i + h)), self.size, self.interpolation)


class Resize(nn.Module):
    def __init__(self, size, interpolation=InterpolationMode.BILINEAR):
        super().__init__()
        self.size, self.interpolation = size, interpolation

    def forward(self, img):
        return _resize(img, self.size, self.interpolation)


class CenterCrop(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = (size, size) if isinstance(size, int) else tuple(size)

    def forward(self, img):
        w, h = img.size
        th, tw = self.size
        top, left = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
        return img.crop((left, top, left + tw, top + th))


class ToTensor:
    def __call__(self, pic):
        arr = np.array(pic, np.uint8, copy=True)
        t = torch.from_numpy(arr).view(pic.size[1], pic.size[0], len(pic.getbands()))
        return t.permute((2, 0, 1)).contiguous().float().div(255)


class Normalize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.mean, self.std = mean, std

    def forward(self, tensor):
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return tensor.sub(mean).div(std)


def _unreached(name):
    def fail(*args, **kwargs):
        raise NotImplementedError(f"{name}: not stood in for (the tiny config does not reach it)")

    return fail


# torchvision.transforms.functional: only ResizeMaxSize (resize_longest_max, not used) calls it
functional = SimpleNamespace(resize=_unreached("F.resize"), pad=_unreached("F.pad"))


class FrozenBatchNorm2d(nn.Module):
    """torchvision.ops.misc.FrozenBatchNorm2d: only the ResNet towers' freeze_batch_norm_2d builds it (not used)."""

    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        raise NotImplementedError("FrozenBatchNorm2d: not stood in for")


# --- pandas.read_csv (a separated file with a header row), torchvision.datasets, webdataset, braceexpand ---------


class _Frame(dict):
    def __getitem__(self, key):
        return SimpleNamespace(tolist=lambda: list(dict.__getitem__(self, key)))


def read_csv(path, sep=","):
    with open(path) as f:
        rows = [line.rstrip("\n").split(sep) for line in f if line.strip()]
    header, body = rows[0], rows[1:]
    return _Frame({name: [row[k] for row in body] for k, name in enumerate(header)})


pd = SimpleNamespace(read_csv=read_csv)
datasets = SimpleNamespace(ImageFolder=_unreached("torchvision.datasets.ImageFolder"))
braceexpand = SimpleNamespace(braceexpand=_unreached("braceexpand"))


class _Unreached:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        return _unreached(f"{self._name}.{attr}")


class _PipelineStage:
    pass


wds = _Unreached("webdataset")
wds.PipelineStage = _PipelineStage  # detshuffle2 subclasses it at import
_shuffle = _unreached("webdataset.filters._shuffle")
base_plus_ext = _unreached("webdataset.tariterators.base_plus_ext")
url_opener = _unreached("webdataset.tariterators.url_opener")
tar_file_expander = _unreached("webdataset.tariterators.tar_file_expander")
valid_sample = _unreached("webdataset.tariterators.valid_sample")


# --- the data: a CSV (tab-separated: filepath, title) of 16 x 16 RGB images and their captions -------------------

WORDS = "a photo of red blue green dog cat bird tree car house small large on the in with".split()


def write_data(root: str, n_train: int = 32, n_val: int = 8, size: int = 16) -> None:
    """Under root: images/NNN.png, train.csv and val.csv (filepath<TAB>title, open_clip's default keys); every
    pixel and word drawn from numpy's RandomState(0)."""
    rng = np.random.RandomState(0)
    os.makedirs(os.path.join(root, "images"), exist_ok=True)
    for split, n, offset in (("train", n_train, 0), ("val", n_val, n_train)):
        lines = ["filepath\ttitle"]
        for i in range(offset, offset + n):
            path = os.path.join(root, "images", f"{i:03d}.png")
            Image.fromarray(rng.randint(0, 256, (size, size, 3), dtype=np.uint8), "RGB").save(path)
            lines.append(f"{path}\t{' '.join(rng.choice(WORDS, size=rng.randint(2, 6)))}")
        with open(os.path.join(root, f"{split}.csv"), "w") as f:
            f.write("\n".join(lines) + "\n")
