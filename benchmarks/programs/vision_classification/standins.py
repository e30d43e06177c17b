"""Stand-ins for what pytorch/vision's references/classification takes from torchvision (not installed here; ImageNet is
a download): `datasets.ImageFolder` a synthetic 10-class set of 3x40x40 uint8 images generated from a fixed seed
(`train` and `val` from two seeds, whatever the folder), `models.get_model` a tiny CNN with batch norms (so that the
norm weight-decay group has members), and the few transforms the presets compose. The transforms act on uint8 CHW
tensors (the images a PIL decoder would give) and draw their randomness from torch's global generator in the order
torchvision's do (RandomResizedCrop: scale, log-ratio, then the offsets; RandomHorizontalFlip: one `torch.rand(1)`);
the pixels they make are not torchvision's. `get_mixup_cutmix` (the program's transforms.py) returns None at the
defaults (no mixup, no cutmix) and refuses anything else."""

import enum
import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root, transform=None, num_classes=10, size=None, side=40):
        val = str(root).rstrip("/").endswith("val")
        size = size if size is not None else (32 if val else 64)
        g = torch.Generator().manual_seed(1 if val else 0)
        self.images = torch.randint(0, 256, (size, 3, side, side), generator=g, dtype=torch.uint8)
        self.targets = [i % num_classes for i in range(size)]
        self.classes = [f"class{c}" for c in range(num_classes)]
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img, target = self.images[index], self.targets[index]
        return (self.transform(img) if self.transform is not None else img), target


class TinyResNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def get_model(name, weights=None, num_classes=1000):
    if weights is not None:
        raise NotImplementedError("pretrained weights are not stood in")
    return TinyResNet(num_classes=num_classes)


def _resize(img, size, interpolation):
    mode = interpolation.value if isinstance(interpolation, InterpolationMode) else str(interpolation)
    out = F.interpolate(img[None].float(), size=size, mode=mode, antialias=mode != "nearest", align_corners=None)[0]
    return out.round().clamp(0, 255).to(img.dtype) if img.dtype == torch.uint8 else out


class RandomResizedCrop:
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=None, antialias=True):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.scale, self.ratio = scale, ratio
        self.interpolation = interpolation or InterpolationMode.BILINEAR

    def get_params(self, img):
        height, width = img.shape[-2:]
        area = height * width
        log_ratio = torch.log(torch.tensor(self.ratio))
        for _ in range(10):
            target_area = area * torch.empty(1).uniform_(self.scale[0], self.scale[1]).item()
            aspect_ratio = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                i = torch.randint(0, height - h + 1, size=(1,)).item()
                j = torch.randint(0, width - w + 1, size=(1,)).item()
                return i, j, h, w
        side = min(height, width)  # fallback to a central crop
        return (height - side) // 2, (width - side) // 2, side, side

    def __call__(self, img):
        i, j, h, w = self.get_params(img)
        return _resize(img[..., i : i + h, j : j + w], self.size, self.interpolation)


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        return img.flip(-1) if torch.rand(1) < self.p else img


class Resize:
    def __init__(self, size, interpolation=None, antialias=True):
        self.size, self.interpolation = size, interpolation or InterpolationMode.BILINEAR

    def __call__(self, img):
        h, w = img.shape[-2:]
        short, long = (h, w) if h <= w else (w, h)
        new_long = int(self.size * long / short)
        size = (self.size, new_long) if h <= w else (new_long, self.size)
        return _resize(img, size, self.interpolation)


class CenterCrop:
    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        h, w = img.shape[-2:]
        top, left = int(round((h - self.size) / 2.0)), int(round((w - self.size) / 2.0))
        return img[..., top : top + self.size, left : left + self.size]


class PILToTensor:
    def __call__(self, img):
        return img  # the stand-in images are uint8 tensors already


class ConvertImageDtype:
    def __init__(self, dtype):
        self.dtype = dtype

    def __call__(self, img):
        return img.to(self.dtype) / 255.0 if img.dtype == torch.uint8 else img.to(self.dtype)


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, tensor):
        return (tensor - self.mean) / self.std


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


def get_mixup_cutmix(*, mixup_alpha, cutmix_alpha, num_classes, use_v2):
    if mixup_alpha > 0 or cutmix_alpha > 0:
        raise NotImplementedError("torchvision's MixUp and CutMix are not stood in")
    return None


transforms = SimpleNamespace(
    RandomResizedCrop=RandomResizedCrop,
    RandomHorizontalFlip=RandomHorizontalFlip,
    Resize=Resize,
    CenterCrop=CenterCrop,
    PILToTensor=PILToTensor,
    ConvertImageDtype=ConvertImageDtype,
    Normalize=Normalize,
    Compose=Compose,
)
torchvision = SimpleNamespace(
    datasets=SimpleNamespace(ImageFolder=ImageFolder),
    models=SimpleNamespace(get_model=get_model),
    transforms=transforms,
)
