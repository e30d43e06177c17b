"""Stand-ins for what ViT-pytorch imports and this machine lacks (not the authors' code): torchvision's CIFAR10 /
CIFAR100 data sets and the transforms `utils/data_utils.py` uses, drawing from torch's global generator exactly where
torchvision's draw (`RandomResizedCrop.get_params`: `torch.empty(1).uniform_` for the scale and the log ratio, two
`torch.randint` for the corner, up to 10 tries); ml_collections' ConfigDict (attribute and item access); scipy's
`ndimage` (only `load_from`'s resizing of a pretrained position embedding uses it; no pretrained weights here);
tensorboard's SummaryWriter (a no-op); `write_data`, the synthetic CIFAR the data sets read."""

from __future__ import annotations

import math
import os

import numpy as np
import torch
from PIL import Image

N_TRAIN = 40  # 20 a rank: 5 micro-batches of 4 a rank and epoch
N_TEST = 16
SIZE = 32


def write_data(root: str) -> None:
    """root/cifar10.npz: 40 training and 16 test images of 32 x 32 x 3 (uint8) and their labels, from numpy's
    RandomState(0): smooth blobs of a colour per class plus noise, so that a class is learnable."""
    rng = np.random.RandomState(0)
    os.makedirs(root, exist_ok=True)
    palette = rng.randint(0, 256, size=(10, 3))

    def images(labels):
        out = np.empty((len(labels), SIZE, SIZE, 3), np.uint8)
        yy, xx = np.mgrid[0:SIZE, 0:SIZE]
        for k, label in enumerate(labels):
            cy, cx = rng.randint(8, 24, size=2)
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 60.0)[..., None]
            noise = rng.randint(-30, 31, size=(SIZE, SIZE, 3))
            out[k] = np.clip(blob * palette[label] + (1 - blob) * 64 + noise, 0, 255).astype(np.uint8)
        return out

    train_y = rng.permutation(np.arange(N_TRAIN) % 10)
    test_y = np.arange(N_TEST) % 10
    np.savez(
        os.path.join(root, "cifar10.npz"),
        train_x=images(train_y),
        train_y=train_y,
        test_x=images(test_y),
        test_y=test_y,
    )


# --- tensorboard ---------------------------------------------------------------------------------------------------
class SummaryWriter:
    def __init__(self, log_dir=None):
        self.log_dir = log_dir

    def add_scalar(self, tag, scalar_value=None, global_step=None):
        pass

    def close(self):
        pass


# --- ml_collections --------------------------------------------------------------------------------------------------
class ConfigDict(dict):
    """ml_collections.ConfigDict as configs.py uses it: a dict whose keys are attributes too."""

    def __init__(self, initial=None):
        super().__init__()
        for key, value in (initial or {}).items():
            self[key] = value

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError as e:
            raise AttributeError(key) from e

    def __setattr__(self, key, value):
        self[key] = value

    def __delattr__(self, key):
        del self[key]


class ml_collections:  # noqa: N801 (the library's module name)
    ConfigDict = ConfigDict


# --- scipy.ndimage -------------------------------------------------------------------------------------------------
class ndimage:  # noqa: N801 (scipy's module name)
    @staticmethod
    def zoom(*args, **kwargs):
        raise NotImplementedError("scipy is not installed; no pretrained position embedding is resized here")


# --- torchvision.datasets ------------------------------------------------------------------------------------------
class _CIFAR:
    """torchvision's CIFAR10: `.data` (N, 32, 32, 3) uint8, `.targets` a list of ints, `__getitem__` a PIL image
    through `transform`."""

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        arrays = np.load(os.path.join(root, "cifar10.npz"))
        self.data = arrays["train_x" if train else "test_x"]
        self.targets = [int(t) for t in arrays["train_y" if train else "test_y"]]
        self.transform = transform
        self.target_transform = target_transform

    def __getitem__(self, index):
        img, target = self.data[index], self.targets[index]
        img = Image.fromarray(img)
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __len__(self):
        return len(self.data)


class datasets:  # noqa: N801 (torchvision's module name)
    CIFAR10 = _CIFAR
    CIFAR100 = _CIFAR


# --- torchvision.transforms ----------------------------------------------------------------------------------------
class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomResizedCrop:
    """torchvision's get_params (the same draws from torch's global generator, in the same order), then the crop
    resized bilinearly by PIL as its PIL path does."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0)):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.scale = scale
        self.ratio = ratio

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
            w = width
            h = int(round(w / min(ratio)))
        elif in_ratio > max(ratio):
            h = height
            w = int(round(h * max(ratio)))
        else:
            w = width
            h = height
        i = (height - h) // 2
        j = (width - w) // 2
        return i, j, h, w

    def __call__(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        img = img.crop((j, i, j + w, i + h))
        return img.resize((self.size[1], self.size[0]), Image.BILINEAR)


class Resize:
    def __init__(self, size):
        self.size = (size, size) if isinstance(size, int) else tuple(size)

    def __call__(self, img):
        if img.size == (self.size[1], self.size[0]):
            return img
        return img.resize((self.size[1], self.size[0]), Image.BILINEAR)


class ToTensor:
    def __call__(self, pic):
        arr = np.array(pic, np.uint8, copy=True)
        t = torch.from_numpy(arr).view(pic.size[1], pic.size[0], len(pic.getbands()))
        return t.permute((2, 0, 1)).contiguous().float().div(255)


class Normalize:
    def __init__(self, mean, std):
        self.mean = mean
        self.std = std

    def __call__(self, tensor):
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return tensor.sub(mean).div(std)


class transforms:  # noqa: N801 (torchvision's module name)
    Compose = Compose
    RandomResizedCrop = RandomResizedCrop
    Resize = Resize
    ToTensor = ToTensor
    Normalize = Normalize
