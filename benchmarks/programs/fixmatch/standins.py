"""Stand-ins for what FixMatch-pytorch imports and this machine lacks (not the authors' code): torchvision's CIFAR10 /
CIFAR100 data sets and the transforms `dataset/cifar.py` uses, drawing from torch's global generator exactly where
torchvision's draw (`torch.rand(1)` for a flip, `torch.randint` for a crop's corner); tensorboard's SummaryWriter (a
no-op); `write_data`, the synthetic CIFAR the data sets read."""

from __future__ import annotations

import os

import numpy as np
import torch
from PIL import Image

N_TRAIN = 48  # 10 classes, at least 4 images each
N_TEST = 10
SIZE = 32  # dataset/cifar.py crops to 32 and cuts out 16


def write_data(root: str) -> None:
    """root/cifar10.npz: 48 training and 10 test images of 32 x 32 x 3 (uint8) and their labels, from numpy's
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

    def add_scalar(self, tag, value, step=None):
        pass

    def close(self):
        pass


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


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.transpose(Image.FLIP_LEFT_RIGHT)
        return img


class RandomCrop:
    """torchvision's: pad (np.pad for a mode other than constant, as its PIL path does), then a corner drawn by
    two torch.randint unless the padded image is already the size."""

    def __init__(self, size, padding=None, padding_mode="constant", fill=0):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.padding = padding
        self.padding_mode = padding_mode
        self.fill = fill

    def __call__(self, img):
        if self.padding is not None:
            p = self.padding
            arr = np.asarray(img)
            if self.padding_mode == "constant":
                arr = np.pad(arr, ((p, p), (p, p), (0, 0)), mode="constant", constant_values=self.fill)
            else:
                arr = np.pad(arr, ((p, p), (p, p), (0, 0)), mode=self.padding_mode)
            img = Image.fromarray(arr)
        w, h = img.size
        th, tw = self.size
        if w == tw and h == th:
            i, j = 0, 0
        else:
            i = torch.randint(0, h - th + 1, size=(1,)).item()
            j = torch.randint(0, w - tw + 1, size=(1,)).item()
        return img.crop((j, i, j + tw, i + th))


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
    RandomHorizontalFlip = RandomHorizontalFlip
    RandomCrop = RandomCrop
    ToTensor = ToTensor
    Normalize = Normalize
