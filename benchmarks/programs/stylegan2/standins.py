"""Stand-ins for what stylegan2-pytorch's training path imports and this machine lacks (no torchvision, no lmdb):

- `lmdb_standin`: an in-memory LMDB environment holding the keys MultiResolutionDataset reads (`length`, and
  `{resolution}-{index:05d}` -> PNG bytes), N_IMAGES RGB images of `resolution` x `resolution` drawn from a fixed seed
  (numpy RandomState(0)), no file read or written;
- `transforms`: Compose, RandomHorizontalFlip (one `torch.rand(1)` draw from the global generator per image, as
  torchvision's), ToTensor (PIL -> float CHW / 255, as torchvision's), Normalize (inplace as asked);
- `utils.save_image`: torchvision's make_grid + save_image for the arguments train.py passes (`nrow`, `normalize`,
  the old `range` keyword), written with PIL.
"""

from __future__ import annotations

import math
from io import BytesIO
from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image

N_IMAGES = 8


class _Txn:
    def __init__(self, store: dict):
        self.store = store

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def get(self, key: bytes):
        return self.store.get(key)


class _Env:
    def __init__(self, store: dict):
        self.store = store

    def begin(self, write=False):
        return _Txn(self.store)


def lmdb_standin(path, resolution=256, **_kwargs):
    """What `lmdb.open(path, ...)` gives MultiResolutionDataset over a prepared set of N_IMAGES images."""
    rng = np.random.RandomState(0)
    store = {b"length": str(N_IMAGES).encode("utf-8")}
    for index in range(N_IMAGES):
        pixels = rng.randint(0, 256, size=(resolution, resolution, 3), dtype=np.uint8)
        buffer = BytesIO()
        Image.fromarray(pixels, "RGB").save(buffer, format="png")
        store[f"{resolution}-{str(index).zfill(5)}".encode()] = buffer.getvalue()
    return _Env(store)


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            if isinstance(img, torch.Tensor):
                return img.flip(-1)
            return img.transpose(Image.FLIP_LEFT_RIGHT)
        return img


class ToTensor:
    def __call__(self, pic):
        img = torch.from_numpy(np.array(pic.convert("RGB"), np.uint8, copy=True))
        img = img.view(pic.size[1], pic.size[0], 3).permute((2, 0, 1)).contiguous()
        return img.to(dtype=torch.get_default_dtype()).div(255)


class Normalize:
    def __init__(self, mean, std, inplace=False):
        self.mean, self.std, self.inplace = mean, std, inplace

    def __call__(self, tensor):
        if not self.inplace:
            tensor = tensor.clone()
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype)[:, None, None]
        std = torch.as_tensor(self.std, dtype=tensor.dtype)[:, None, None]
        return tensor.sub_(mean).div_(std)


transforms = SimpleNamespace(
    Compose=Compose, RandomHorizontalFlip=RandomHorizontalFlip, ToTensor=ToTensor, Normalize=Normalize
)


def make_grid(tensor, nrow=8, padding=2, normalize=False, value_range=None, pad_value=0.0):
    tensor = tensor.detach().clone()
    if normalize:
        low, high = value_range if value_range is not None else (float(tensor.min()), float(tensor.max()))
        tensor = tensor.clamp(min=low, max=high).sub_(low).div_(max(high - low, 1e-5))
    nmaps = tensor.size(0)
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(float(nmaps) / xmaps))
    height, width = int(tensor.size(2) + padding), int(tensor.size(3) + padding)
    grid = tensor.new_full((tensor.size(1), height * ymaps + padding, width * xmaps + padding), pad_value)
    k = 0
    for y in range(ymaps):
        for x in range(xmaps):
            if k >= nmaps:
                break
            grid.narrow(1, y * height + padding, height - padding).narrow(
                2, x * width + padding, width - padding
            ).copy_(tensor[k])
            k += 1
    return grid


def save_image(tensor, fp, nrow=8, padding=2, normalize=False, range=None, value_range=None, **kwargs):  # noqa: A002
    grid = make_grid(tensor, nrow=nrow, padding=padding, normalize=normalize, value_range=value_range or range)
    ndarr = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to("cpu", torch.uint8).numpy()
    Image.fromarray(ndarr).save(fp)


utils = SimpleNamespace(save_image=save_image, make_grid=make_grid)
