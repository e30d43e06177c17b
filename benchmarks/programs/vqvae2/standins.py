"""Stand-ins for what train_vqvae.py imports from torchvision (not installed here): `datasets.ImageFolder`, the four
`transforms` it composes and `utils.save_image`, written as torchvision 0.8 does them on PIL images (none of them
draws a random number); and `write_data`, the synthetic image folder the tiny config trains on. Not the authors'."""

from __future__ import annotations

import math
import os
from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image

# --- torchvision.transforms (deterministic ones) ------------------------------------------------------------------


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class Resize:
    """An int size: the smaller edge to size, the aspect kept (torchvision's rule), bilinear."""

    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        w, h = img.size
        if (w <= h and w == self.size) or (h <= w and h == self.size):
            return img
        if w < h:
            ow, oh = self.size, int(self.size * h / w)
        else:
            oh, ow = self.size, int(self.size * w / h)
        return img.resize((ow, oh), Image.BILINEAR)


class CenterCrop:
    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        w, h = img.size
        top, left = int(round((h - self.size) / 2.0)), int(round((w - self.size) / 2.0))
        return img.crop((left, top, left + self.size, top + self.size))


class ToTensor:
    def __call__(self, pic):
        arr = np.array(pic, np.uint8, copy=True)
        t = torch.from_numpy(arr).view(pic.size[1], pic.size[0], len(pic.getbands()))
        return t.permute((2, 0, 1)).contiguous().float().div(255)


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, tensor):
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return tensor.sub(mean).div(std)


transforms = SimpleNamespace(
    Compose=Compose, Resize=Resize, CenterCrop=CenterCrop, ToTensor=ToTensor, Normalize=Normalize
)


# --- torchvision.datasets.ImageFolder --------------------------------------------------------------------------------


class ImageFolder(torch.utils.data.Dataset):
    """Classes from the sorted folder names, the files sorted in each; samples are (image, class index)."""

    def __init__(self, root, transform=None):
        self.classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.samples = [
            (os.path.join(root, c, f), k)
            for k, c in enumerate(self.classes)
            for f in sorted(os.listdir(os.path.join(root, c)))
        ]
        self.transform = transform

    def __getitem__(self, index):
        path, target = self.samples[index]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        return (self.transform(img) if self.transform is not None else img), target

    def __len__(self):
        return len(self.samples)


datasets = SimpleNamespace(ImageFolder=ImageFolder)


# --- torchvision.utils.save_image (make_grid, normalize with range, PNG by PIL) -------------------------------------


def make_grid(tensor, nrow=8, padding=2, normalize=False, range=None, pad_value=0):  # noqa: A002 (torchvision's name)
    tensor = tensor.clone()
    if normalize:
        low, high = range if range is not None else (float(tensor.min()), float(tensor.max()))
        tensor.clamp_(min=low, max=high).sub_(low).div_(max(high - low, 1e-5))
    nmaps = tensor.size(0)
    xmaps = min(nrow, nmaps)
    ymaps = int(math.ceil(float(nmaps) / xmaps))
    height, width = int(tensor.size(2) + padding), int(tensor.size(3) + padding)
    grid = tensor.new_full((tensor.size(1), height * ymaps + padding, width * xmaps + padding), pad_value)
    k = 0
    for y in builtins_range(ymaps):
        for x in builtins_range(xmaps):
            if k >= nmaps:
                break
            grid.narrow(1, y * height + padding, height - padding).narrow(
                2, x * width + padding, width - padding
            ).copy_(tensor[k])
            k += 1
    return grid


builtins_range = range


def save_image(tensor, fp, nrow=8, padding=2, normalize=False, range=None, pad_value=0):  # noqa: A002
    grid = make_grid(tensor, nrow=nrow, padding=padding, normalize=normalize, range=range, pad_value=pad_value)
    ndarr = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to("cpu", torch.uint8).numpy()
    Image.fromarray(ndarr).save(fp)


utils = SimpleNamespace(save_image=save_image, make_grid=make_grid)


# --- the data -------------------------------------------------------------------------------------------------------


def write_data(work: str, n_images: int = 80, width: int = 20, height: int = 18) -> None:
    """Under work: data/<class>/NNN.png, n_images RGB images of width x height in two classes, every pixel drawn
    from numpy's RandomState(0) (smooth blobs, so that there is something to reconstruct); and the folders
    train_vqvae.py writes into, checkpoint/ and sample/ (the repository holds them)."""
    rng = np.random.RandomState(0)
    yy, xx = np.mgrid[0:height, 0:width]
    for i in builtins_range(n_images):
        folder = os.path.join(work, "data", f"class{i % 2}")
        os.makedirs(folder, exist_ok=True)
        img = np.zeros((height, width, 3))
        for _ in builtins_range(3):
            cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(2, 6)
            color = rng.uniform(0, 255, size=3)
            img += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * r * r))[..., None] * color
        img += rng.uniform(0, 20, size=img.shape)
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB").save(os.path.join(folder, f"{i:03d}.png"))
    for name in ("checkpoint", "sample"):
        os.makedirs(os.path.join(work, name), exist_ok=True)
