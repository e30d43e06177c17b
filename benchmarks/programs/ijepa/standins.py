"""Stand-ins for what I-JEPA's src/ takes from torchvision (not installed here, and ImageNet is a download):
`torchvision.datasets.ImageFolder` is a synthetic 10-class set of 40x40 RGB PIL images generated from a fixed seed
(the root it is given is not read), and `transforms` the few transforms src/transforms.py composes, acting on PIL
images and drawing their randomness from torch's global generator as torchvision's do: RandomResizedCrop draws its
scale, its log-ratio and its corner as torchvision's get_params does (up to 10 tries, then the central crop); the
pixels they make are not torchvision's, the draws are of the same kind and order."""

import math
from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image, ImageEnhance, ImageOps

SIZE = 32  # images in the synthetic set: 2 ranks x batch 4 x 4 iterations an epoch
SIDE = 40  # pixels a side, cropped to crop_size by RandomResizedCrop


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root=None, transform=None, target_transform=None):
        g = torch.Generator().manual_seed(0)
        pixels = torch.randint(0, 256, (SIZE, SIDE, SIDE, 3), generator=g, dtype=torch.uint8).numpy()
        self.root = root
        self.samples = [(Image.fromarray(pixels[i]), i % 10) for i in range(SIZE)]
        self.classes = [str(c) for c in range(10)]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        img, target = self.samples[index]
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomResizedCrop:
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=Image.BILINEAR):
        self.size, self.scale, self.ratio, self.interpolation = size, scale, ratio, interpolation

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
        in_ratio = float(width) / float(height)  # the central crop, as torchvision's fallback
        if in_ratio < min(self.ratio):
            w, h = width, int(round(width / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            h, w = height, int(round(height * max(self.ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img):
        i, j, h, w = self.get_params(img)
        return img.crop((j, i, j + w, i + h)).resize((self.size, self.size), self.interpolation)


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
torchvision = SimpleNamespace(datasets=SimpleNamespace(ImageFolder=ImageFolder), transforms=transforms)
