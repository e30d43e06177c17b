"""Stand-ins for what facebookresearch/dino's main_dino.py takes from torchvision (not installed here) and for
ImageNet (a download):

- `datasets.ImageFolder`: a synthetic 10-class set of 32 RGB PIL images of 40x48 pixels generated from a fixed seed
  of its own (whatever the folder), so that RandomResizedCrop crops and resizes as it does ImageNet's.
- `transforms`: the torchvision transforms DataAugmentationDINO composes, each drawing from the global torch
  generator exactly what torchvision's draws, in the same order: `RandomResizedCrop` (per try `torch.empty(1)
  .uniform_` for the area and the log-ratio, then two `torch.randint` for the corner; a centre crop after 10 failed
  tries), `RandomHorizontalFlip` (`torch.rand(1)`), `RandomApply` (`torch.rand(1)`, applied when p >= it),
  `ColorJitter` (`torch.randperm(4)`, then one `uniform_` per factor: brightness, contrast, saturation, hue),
  `RandomGrayscale` (`torch.rand(1)`), `ToTensor`, `Normalize`; the image operations are PIL's, as torchvision's
  functional does for PIL images (ImageEnhance for brightness, contrast and saturation; the hue shifted in HSV).
  utils.GaussianBlur and utils.Solarization are the authors' (PIL, Python's `random`).
- `models`: torchvision.models, only for main_dino.py's list of torchvision architectures (none here).
"""

import math
from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image, ImageEnhance

# --------------------------------------------------------------------------------------------------- data (ImageNet)


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root, transform=None, num_classes=10, size=32, height=40, width=48):
        g = torch.Generator().manual_seed(0)
        pixels = torch.randint(0, 256, (size, height, width, 3), generator=g, dtype=torch.uint8).numpy()
        self.images = [Image.fromarray(p) for p in pixels]
        self.targets = [i % num_classes for i in range(size)]
        self.classes = [f"class{c}" for c in range(num_classes)]
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img, target = self.images[index], self.targets[index]
        return (self.transform(img) if self.transform is not None else img), target


datasets = SimpleNamespace(ImageFolder=ImageFolder)
models = SimpleNamespace()  # torchvision.models: no architecture here

# ------------------------------------------------------------------------------------------ torchvision.transforms


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomResizedCrop:
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=Image.BILINEAR):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.scale, self.ratio, self.interpolation = scale, ratio, interpolation

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
        in_ratio = float(width) / float(height)  # fallback to a central crop
        if in_ratio < min(ratio):
            w = width
            h = int(round(w / min(ratio)))
        elif in_ratio > max(ratio):
            h = height
            w = int(round(h * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return img.crop((j, i, j + w, i + h)).resize((self.size[1], self.size[0]), self.interpolation)


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.transpose(Image.FLIP_LEFT_RIGHT)
        return img


class RandomApply:
    def __init__(self, transforms, p=0.5):
        self.transforms, self.p = transforms, p

    def __call__(self, img):
        if self.p < torch.rand(1):
            return img
        for t in self.transforms:
            img = t(img)
        return img


def _adjust_hue(img, hue_factor):
    h, s, v = img.convert("HSV").split()
    np_h = np.array(h, dtype=np.uint8)
    with np.errstate(over="ignore"):  # uint8 addition wraps around, as torchvision's
        np_h += np.array(hue_factor * 255).astype(np.int32).astype(np.uint8)
    h = Image.fromarray(np_h, "L")
    return Image.merge("HSV", (h, s, v)).convert("RGB")


class ColorJitter:
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        self.brightness = self._check(brightness, center=1.0)
        self.contrast = self._check(contrast, center=1.0)
        self.saturation = self._check(saturation, center=1.0)
        self.hue = self._check(hue, center=0.0, clip_first_on_zero=False)

    @staticmethod
    def _check(value, center, clip_first_on_zero=True):
        value = [center - float(value), center + float(value)]
        if clip_first_on_zero:
            value[0] = max(value[0], 0.0)
        return None if value[0] == value[1] == center else tuple(value)

    def __call__(self, img):
        fn_idx = torch.randperm(4)
        b = None if self.brightness is None else float(torch.empty(1).uniform_(*self.brightness))
        c = None if self.contrast is None else float(torch.empty(1).uniform_(*self.contrast))
        s = None if self.saturation is None else float(torch.empty(1).uniform_(*self.saturation))
        h = None if self.hue is None else float(torch.empty(1).uniform_(*self.hue))
        for fn_id in fn_idx:
            if fn_id == 0 and b is not None:
                img = ImageEnhance.Brightness(img).enhance(b)
            elif fn_id == 1 and c is not None:
                img = ImageEnhance.Contrast(img).enhance(c)
            elif fn_id == 2 and s is not None:
                img = ImageEnhance.Color(img).enhance(s)
            elif fn_id == 3 and h is not None:
                img = _adjust_hue(img, h)
        return img


class RandomGrayscale:
    def __init__(self, p=0.1):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            gray = np.array(img.convert("L"), dtype=np.uint8)
            return Image.fromarray(np.dstack([gray, gray, gray]), "RGB")
        return img


class ToTensor:
    def __call__(self, pic):
        arr = np.array(pic, dtype=np.uint8, copy=True)
        return torch.from_numpy(arr).permute(2, 0, 1).contiguous().float().div(255)


class Normalize:
    def __init__(self, mean, std, inplace=False):
        self.mean, self.std, self.inplace = mean, std, inplace

    def __call__(self, tensor):
        tensor = tensor if self.inplace else tensor.clone()
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype)[:, None, None]
        std = torch.as_tensor(self.std, dtype=tensor.dtype)[:, None, None]
        return tensor.sub_(mean).div_(std)


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
