"""Stand-ins for what main_moco.py imports and this machine lacks (torchvision, tensorboard): plain torch, numpy and
PIL, the same layers built in the same order and the same random draws where torchvision draws.

- ``models.resnet50``: a ResNet built as torchvision's (conv1 7x7/2, bn1, relu, maxpool, layer1..4 of Bottleneck
  blocks, avgpool, fc; kaiming_normal_ on convs, ones/zeros on norms, zero_init_residual on bn3), tiny: widths
  4-8-16-32 (expansion 4), one block a stage.
- ``datasets.ImageFolder``: ImageNet's folder stood in for by 64 RGB images of 24x24 drawn from a fixed seed in the
  process (numpy RandomState(0)), the label ``i % 4``; the root is not read.
- ``transforms``: RandomResizedCrop, RandomApply, ColorJitter, RandomGrayscale, RandomHorizontalFlip, ToTensor,
  Normalize, Compose on PIL images, drawing from torch's global generator in torchvision's order.
- ``SummaryWriter``: tensorboard's writer, writing nothing.
"""

from __future__ import annotations

import math
import types

import numpy as np
import torch
import torch.nn as nn
from PIL import Image, ImageEnhance

# --- models


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers, widths=(4, 8, 16, 32), num_classes=1000, zero_init_residual=False):
        super().__init__()
        self.inplanes = widths[0]
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, widths[0], layers[0])
        self.layer2 = self._make_layer(block, widths[1], layers[1], stride=2)
        self.layer3 = self._make_layer(block, widths[2], layers[2], stride=2)
        self.layer4 = self._make_layer(block, widths[3], layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3] * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.constant_(m.bn3.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride), nn.BatchNorm2d(planes * block.expansion)
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50(**kwargs):
    return ResNet(Bottleneck, [1, 1, 1, 1], **kwargs)


models = types.SimpleNamespace(resnet50=resnet50)

# --- datasets


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root, transform=None, n=64, size=24):
        self.root = root
        self.transform = transform
        rng = np.random.RandomState(0)
        self.images = [Image.fromarray(rng.randint(0, 256, (size, size, 3), dtype=np.uint8)) for _ in range(n)]
        self.targets = [i % 4 for i in range(n)]

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        img = self.images[index]
        if self.transform is not None:
            img = self.transform(img)
        return img, self.targets[index]


datasets = types.SimpleNamespace(ImageFolder=ImageFolder)

# --- transforms


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomResizedCrop:
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0)):
        self.size = (size, size)
        self.scale = scale
        self.ratio = ratio

    def get_params(self, img):
        width, height = img.size
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
        w, h = min(width, height), min(width, height)  # the fallback: a central square crop
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img):
        i, j, h, w = self.get_params(img)
        return img.crop((j, i, j + w, i + h)).resize(self.size, Image.BILINEAR)


class RandomApply:
    def __init__(self, transforms, p=0.5):
        self.transforms = transforms
        self.p = p

    def __call__(self, img):
        if self.p < torch.rand(1):
            return img
        for t in self.transforms:
            img = t(img)
        return img


class ColorJitter:
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        self.brightness = (max(0, 1 - brightness), 1 + brightness)
        self.contrast = (max(0, 1 - contrast), 1 + contrast)
        self.saturation = (max(0, 1 - saturation), 1 + saturation)
        self.hue = (-hue, hue)

    def __call__(self, img):
        fn_idx = torch.randperm(4)
        b = float(torch.empty(1).uniform_(*self.brightness))
        c = float(torch.empty(1).uniform_(*self.contrast))
        s = float(torch.empty(1).uniform_(*self.saturation))
        h = float(torch.empty(1).uniform_(*self.hue))
        for fn_id in fn_idx.tolist():
            if fn_id == 0:
                img = ImageEnhance.Brightness(img).enhance(b)
            elif fn_id == 1:
                img = ImageEnhance.Contrast(img).enhance(c)
            elif fn_id == 2:
                img = ImageEnhance.Color(img).enhance(s)
            else:
                hsv = np.array(img.convert("HSV"))
                hsv[..., 0] = (hsv[..., 0].astype(np.int16) + int(round(h * 255))) % 256
                img = Image.fromarray(hsv, "HSV").convert("RGB")
        return img


class RandomGrayscale:
    def __init__(self, p=0.1):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.convert("L").convert("RGB")
        return img


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.transpose(Image.FLIP_LEFT_RIGHT)
        return img


class ToTensor:
    def __call__(self, img):
        return torch.from_numpy(np.array(img, dtype=np.float32) / 255.0).permute(2, 0, 1).contiguous()


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, tensor):
        return (tensor - self.mean) / self.std


transforms = types.SimpleNamespace(
    Compose=Compose,
    RandomResizedCrop=RandomResizedCrop,
    RandomApply=RandomApply,
    ColorJitter=ColorJitter,
    RandomGrayscale=RandomGrayscale,
    RandomHorizontalFlip=RandomHorizontalFlip,
    ToTensor=ToTensor,
    Normalize=Normalize,
)

# --- tensorboard


class SummaryWriter:
    def add_scalar(self, *args, **kwargs):
        pass

    def close(self):
        pass
