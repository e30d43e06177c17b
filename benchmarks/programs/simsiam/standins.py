"""Stand-ins for what simsiam's main_simsiam.py takes from torchvision (not installed here, and ImageNet is a
download), and for SyncBatchNorm, which refuses CPU tensors ("SyncBatchNorm expected input tensor to be on GPU").

- `models.resnet50` is a tiny ResNet of torchvision's interface: `num_classes` and `zero_init_residual` arguments,
  one residual block whose last BatchNorm starts at zero under `zero_init_residual`, and an `fc` the builder
  replaces (32 features before it).
- `datasets.ImageFolder` is a synthetic 10-class set of 32x32 RGB PIL images generated from a fixed seed.
- `transforms` are the few transforms main_simsiam.py composes, acting on PIL images (simsiam.loader's
  GaussianBlur filters a PIL image) and drawing their randomness from torch's global generator as torchvision's
  do (the pixels they make are not torchvision's; the draws are of the same kind and order).
- `SyncBatchNorm.convert_sync_batchnorm` swaps every BatchNorm for one that normalises by the statistics of the
  whole global batch: per-channel sums, sums of squares and the count all-reduced (torch.distributed.nn's
  all_reduce, whose backward all-reduces the gradient) as torch's SyncBatchNorm does on a GPU; the running
  statistics take the unbiased variance of the global batch. The parameter and buffer names stay BatchNorm's.
"""

from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
from PIL import Image, ImageEnhance, ImageOps
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

# ---- models


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + x)


class TinyResNet(nn.Module):
    def __init__(self, num_classes=1000, zero_init_residual=False, width=8):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=4, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = BasicBlock(width)
        self.avgpool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(width * 4, num_classes)
        if zero_init_residual:
            nn.init.constant_(self.layer1.bn2.weight, 0)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.avgpool(self.layer1(x))
        return self.fc(torch.flatten(x, 1))


def resnet50(num_classes=1000, zero_init_residual=False):
    return TinyResNet(num_classes=num_classes, zero_init_residual=zero_init_residual)


models = SimpleNamespace(resnet50=resnet50)


# ---- datasets


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root, transform=None, size=64):
        g = torch.Generator().manual_seed(0)
        pixels = torch.randint(0, 256, (size, 32, 32, 3), generator=g, dtype=torch.uint8).numpy()
        self.samples = [(Image.fromarray(pixels[i]), i % 10) for i in range(size)]
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        img, target = self.samples[index]
        return (self.transform(img) if self.transform is not None else img), target


datasets = SimpleNamespace(ImageFolder=ImageFolder)


# ---- transforms


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomResizedCrop:
    def __init__(self, size, scale=(0.08, 1.0), interpolation=Image.BILINEAR):
        self.size, self.scale, self.interpolation = size, scale, interpolation

    def __call__(self, img):
        w, h = img.size
        s = float(torch.empty(1).uniform_(self.scale[0], self.scale[1]))
        side = max(1, int(round(min(w, h) * s**0.5)))
        i = int(torch.randint(0, h - side + 1, size=(1,)))
        j = int(torch.randint(0, w - side + 1, size=(1,)))
        return img.crop((j, i, j + side, i + side)).resize((self.size, self.size), self.interpolation)


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        return ImageOps.mirror(img) if torch.rand(1) < self.p else img


class RandomApply:
    def __init__(self, transforms, p=0.5):
        self.transforms, self.p = transforms, p

    def __call__(self, img):
        if self.p < torch.rand(1):
            return img
        for t in self.transforms:
            img = t(img)
        return img


class ColorJitter:
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        self.factors = [(ImageEnhance.Brightness, brightness), (ImageEnhance.Contrast, contrast)]
        self.factors.append((ImageEnhance.Color, saturation))

    def __call__(self, img):
        for i in torch.randperm(len(self.factors)).tolist():
            enhance, amount = self.factors[i]
            img = enhance(img).enhance(float(torch.empty(1).uniform_(1 - amount, 1 + amount)))
        return img


class RandomGrayscale:
    def __init__(self, p=0.1):
        self.p = p

    def __call__(self, img):
        return img.convert("L").convert("RGB") if torch.rand(1) < self.p else img


class ToTensor:
    def __call__(self, img):
        return torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.0).permute(2, 0, 1).contiguous()


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, tensor):
        return (tensor - self.mean) / self.std


transforms = SimpleNamespace(
    Compose=Compose,
    RandomResizedCrop=RandomResizedCrop,
    RandomHorizontalFlip=RandomHorizontalFlip,
    RandomApply=RandomApply,
    ColorJitter=ColorJitter,
    RandomGrayscale=RandomGrayscale,
    ToTensor=ToTensor,
    Normalize=Normalize,
)


# ---- SyncBatchNorm on a CPU


class SyncBatchNorm(_BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        synced = self.training and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        if not synced:
            return super().forward(input)
        channels = input.size(1)
        dims = [0, *range(2, input.dim())]
        count = torch.full((1,), input.numel() // channels, dtype=input.dtype)
        stats = dist_nn.all_reduce(torch.cat([input.sum(dims), (input * input).sum(dims), count]))
        total = stats[-1]
        mean = stats[:channels] / total
        var = stats[channels : 2 * channels] / total - mean * mean
        shape = [1, channels] + [1] * (input.dim() - 2)
        out = (input - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                m = self.momentum
                self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
                self.running_var.mul_(1 - m).add_(var.detach() * total / (total - 1), alpha=m)
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module):
        converted = module
        if isinstance(module, _BatchNorm):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats)
            if module.affine:
                with torch.no_grad():
                    converted.weight = module.weight
                    converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child))
        return converted
