"""Stand-ins for what timm's train.py imports and this machine lacks (not the authors' code): torchvision's
`transforms` (the ones the tiny config builds: Compose, RandomHorizontalFlip, ColorJitter, ToTensor, Normalize,
Resize, CenterCrop) and `transforms.functional` (what timm/data/transforms.py calls), drawing from torch's global
generator exactly where torchvision's draw (`torch.rand(1)` for a flip, `torch.randperm(4)` for ColorJitter's order);
`FrozenBatchNorm2d` (torchvision.ops.misc, only used in isinstance checks here); torchvision.datasets and
`utils.save_image` (imported, never reached); `write_data`, the synthetic class folders the image-folder reader
reads."""

from __future__ import annotations

import enum
import os
import types

import numpy as np
import torch
from PIL import Image

N_TRAIN = 24  # 3 classes x 8
N_VAL = 8
SIZE = 16
CLASSES = 3


def write_data(work: str) -> None:
    """work/data/{train,validation}/class{0,1,2}/*.png: 24 + 8 RGB 16 x 16 images from numpy's RandomState(0) (a
    colour a class plus noise)."""
    rng = np.random.RandomState(0)
    palette = rng.randint(0, 256, size=(CLASSES, 3))
    for split, n in (("train", N_TRAIN), ("validation", N_VAL)):
        for k in range(n):
            label = k % CLASSES
            folder = os.path.join(work, "data", split, f"class{label}")
            os.makedirs(folder, exist_ok=True)
            noise = rng.randint(-40, 41, size=(SIZE, SIZE, 3))
            img = np.clip(palette[label] + noise, 0, 255).astype(np.uint8)
            Image.fromarray(img).save(os.path.join(folder, f"{k:03d}.png"))


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


_PIL = {
    InterpolationMode.NEAREST: Image.NEAREST,
    InterpolationMode.BILINEAR: Image.BILINEAR,
    InterpolationMode.BICUBIC: Image.BICUBIC,
    InterpolationMode.BOX: Image.BOX,
    InterpolationMode.HAMMING: Image.HAMMING,
    InterpolationMode.LANCZOS: Image.LANCZOS,
}


def _pil_mode(interpolation):
    if isinstance(interpolation, InterpolationMode):
        return _PIL[interpolation]
    return interpolation


# ---- torchvision.transforms.functional (PIL images only, as torchvision's F_pil) ----
def get_image_size(img):
    return list(img.size)


def get_dimensions(img):
    w, h = img.size
    return [len(img.getbands()), h, w]


def crop(img, top, left, height, width):
    return img.crop((left, top, left + width, top + height))


def resize(img, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
    w, h = img.size
    if isinstance(size, int) or len(size) == 1:
        size = size if isinstance(size, int) else size[0]
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = size, int(size * long / short)
        new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    else:
        new_h, new_w = size
    if (new_w, new_h) == (w, h):
        return img
    return img.resize((new_w, new_h), _pil_mode(interpolation))


def resized_crop(img, top, left, height, width, size, interpolation=InterpolationMode.BILINEAR, antialias=True):
    return resize(crop(img, top, left, height, width), size, interpolation)


def center_crop(img, output_size):
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    elif len(output_size) == 1:
        output_size = (output_size[0], output_size[0])
    _, h, w = get_dimensions(img)
    ch, cw = output_size
    top = int(round((h - ch) / 2.0))
    left = int(round((w - cw) / 2.0))
    return crop(img, top, left, ch, cw)


def hflip(img):
    return img.transpose(Image.FLIP_LEFT_RIGHT)


def to_tensor(pic):
    arr = np.array(pic, dtype=np.uint8, copy=True)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    img = torch.from_numpy(arr).permute((2, 0, 1)).contiguous()
    return img.to(dtype=torch.get_default_dtype()).div(255)


def pil_to_tensor(pic):
    arr = np.array(pic, dtype=np.uint8, copy=True)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return torch.from_numpy(arr).permute((2, 0, 1)).contiguous()


def normalize(tensor, mean, std, inplace=False):
    if not inplace:
        tensor = tensor.clone()
    mean = torch.as_tensor(mean, dtype=tensor.dtype, device=tensor.device).view(-1, 1, 1)
    std = torch.as_tensor(std, dtype=tensor.dtype, device=tensor.device).view(-1, 1, 1)
    return tensor.sub_(mean).div_(std)


def pad(img, padding, fill=0, padding_mode="constant"):
    raise NotImplementedError("stand-in: pad is not used by the tiny config")


F = types.SimpleNamespace(
    InterpolationMode=InterpolationMode,
    get_image_size=get_image_size,
    get_dimensions=get_dimensions,
    crop=crop,
    resize=resize,
    resized_crop=resized_crop,
    center_crop=center_crop,
    hflip=hflip,
    to_tensor=to_tensor,
    pil_to_tensor=pil_to_tensor,
    normalize=normalize,
    pad=pad,
)


# ---- torchvision.transforms ----
class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ToTensor:
    def __call__(self, pic):
        return to_tensor(pic)


class Normalize(torch.nn.Module):
    def __init__(self, mean, std, inplace=False):
        super().__init__()
        self.mean, self.std, self.inplace = mean, std, inplace

    def forward(self, tensor):
        return normalize(tensor, self.mean, self.std, self.inplace)


class RandomHorizontalFlip(torch.nn.Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, img):
        if torch.rand(1) < self.p:  # torchvision's draw
            return hflip(img)
        return img


class Resize(torch.nn.Module):
    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
        super().__init__()
        self.size, self.interpolation = size, interpolation

    def forward(self, img):
        return resize(img, self.size, self.interpolation)


class CenterCrop(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def forward(self, img):
        return center_crop(img, self.size)


class ColorJitter(torch.nn.Module):
    """torchvision's ColorJitter: a factor of 0 is None (no change), but forward still draws the order of the four
    adjustments (torch.randperm(4)) and a uniform factor for each one set; only zero factors are stood in for."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        for v in (brightness, contrast, saturation, hue):
            if v not in (0, 0.0, None):
                raise NotImplementedError("stand-in: ColorJitter only with zero factors (--color-jitter 0)")

    def forward(self, img):
        torch.randperm(4)  # torchvision's get_params draws the order even when every factor is None
        return img


class _Unused:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("stand-in: not used by the tiny config")


RandomVerticalFlip = RandomApply = RandomGrayscale = GaussianBlur = _Unused

transforms = types.SimpleNamespace(
    Compose=Compose,
    ToTensor=ToTensor,
    Normalize=Normalize,
    RandomHorizontalFlip=RandomHorizontalFlip,
    RandomVerticalFlip=RandomVerticalFlip,
    Resize=Resize,
    CenterCrop=CenterCrop,
    ColorJitter=ColorJitter,
    RandomApply=RandomApply,
    RandomGrayscale=RandomGrayscale,
    GaussianBlur=GaussianBlur,
    InterpolationMode=InterpolationMode,
    functional=F,
)

# torchvision.datasets: imported by timm/data/dataset_factory.py, reached only for torch/... dataset names
CIFAR100 = CIFAR10 = MNIST = KMNIST = FashionMNIST = ImageFolder = _Unused


class FrozenBatchNorm2d(torch.nn.Module):
    """torchvision.ops.misc.FrozenBatchNorm2d: BatchNorm2d with fixed statistics and affine parameters."""

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(num_features))
        self.register_buffer("bias", torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        w = self.weight.reshape(1, -1, 1, 1)
        b = self.bias.reshape(1, -1, 1, 1)
        rv = self.running_var.reshape(1, -1, 1, 1)
        rm = self.running_mean.reshape(1, -1, 1, 1)
        scale = w * (rv + self.eps).rsqrt()
        return x * scale + (b - rm * scale)


def save_image(*args, **kwargs):
    raise NotImplementedError("stand-in: torchvision.utils.save_image (train.py's --save-images debug) not used")


utils = types.SimpleNamespace(save_image=save_image)
