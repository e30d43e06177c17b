"""Stand-ins for what MoCo's main_moco.py takes from torchvision (not installed here, and ImageNet is a download):
`models.resnet50` is a tiny CNN of the same interface (`num_classes`, an `fc` the builder replaces with an MLP under
--mlp), `datasets.ImageFolder` a synthetic 10-class set of 32x32 RGB PIL images generated from a fixed seed, and
`transforms` the few transforms main_moco.py composes, acting on PIL images and drawing their randomness from torch's
global generator as torchvision's do (the pixels they make are not torchvision's; the draws are of the same kind and
order). moco/loader.py's GaussianBlur draws from Python's `random`, as written."""

from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image, ImageEnhance, ImageOps
from torch import nn


class TinyResNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.avgpool = nn.AdaptiveAvgPool2d(4)
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        x = self.avgpool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(x, 1))


def resnet50(num_classes=1000):
    return TinyResNet(num_classes=num_classes)


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root, transform=None, size=32):
        g = torch.Generator().manual_seed(0)
        pixels = torch.randint(0, 256, (size, 32, 32, 3), generator=g, dtype=torch.uint8).numpy()
        self.samples = [(Image.fromarray(pixels[i]), i % 10) for i in range(size)]
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        img, target = self.samples[index]
        return (self.transform(img) if self.transform is not None else img), target


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomResizedCrop:
    def __init__(self, size, interpolation=Image.BILINEAR, scale=(0.08, 1.0)):
        self.size, self.interpolation, self.scale = size, interpolation, scale

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
        self.factors.append((ImageEnhance.Color, saturation))  # hue: not stood in for (no PIL enhancer)

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
models = SimpleNamespace(resnet50=resnet50)
datasets = SimpleNamespace(ImageFolder=ImageFolder)
