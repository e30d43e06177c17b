"""Stand-ins for what VAR imports and this machine lacks (not the authors' code): typed-argument-parser's `Tap` (the
class variables, parsed from `--name=value` / `--name value` by their annotations, bools explicit); pytz's `timezone`
(zoneinfo); tensorboard's SummaryWriter (a no-op); huggingface_hub's PyTorchModelHubMixin (an empty mixin, used only
by VARHF, which training never builds); torchvision's DatasetFolder and the transforms `utils/data.py` uses, drawing
from torch's global generator exactly where torchvision's draw (`torch.randint` for a crop's corner, `torch.rand(1)`
for a flip); `write_data`, the synthetic image folders the data sets read and the tiny VQ-VAE's random-init
checkpoint that train.py loads (the authors download a trained one)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import typing
import zoneinfo
from collections import OrderedDict

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
N_TRAIN = 20  # 2 classes; a global batch of 8 -> 3 iterations an epoch, the last filled (fill_last)
N_VAL = 8
SIZE = 64  # max(patch_nums) * patch_size = 4 * 16
VAE_CKPT = "vae_ch32v64z8.pth"


def write_data(work: str) -> None:
    """work/data/{train,val}/class{0,1}/*.png: 20 + 8 RGB images of 64 x 64 from numpy's RandomState(0) (a blob of a
    colour per class plus noise); work/vae_ch32v64z8.pth: the tiny VQ-VAE (V=64, Cvae=8, ch=32, patch_nums 1,2,4)
    built with PyTorch's default initialization under torch.manual_seed(0), in a child interpreter (the model code's
    top-level imports `dist`, `models` need the program's folder on sys.path)."""
    rng = np.random.RandomState(0)
    palette = rng.randint(0, 256, size=(2, 3))
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    for split, n in (("train", N_TRAIN), ("val", N_VAL)):
        for k in range(n):
            label = k % 2
            folder = os.path.join(work, "data", split, f"class{label}")
            os.makedirs(folder, exist_ok=True)
            cy, cx = rng.randint(16, 48, size=2)
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 200.0)[..., None]
            noise = rng.randint(-30, 31, size=(SIZE, SIZE, 3))
            img = np.clip(blob * palette[label] + (1 - blob) * 64 + noise, 0, 255).astype(np.uint8)
            Image.fromarray(img).save(os.path.join(folder, f"{k:03d}.png"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDP_PARITY")}
    command = [sys.executable, os.path.abspath(__file__), "vae", os.path.join(work, VAE_CKPT)]
    subprocess.run(command, check=True, env=env)


def _write_vae(path: str) -> None:
    from models.vqvae import VQVAE

    torch.manual_seed(0)
    vae = VQVAE(vocab_size=64, z_channels=8, ch=32, test_mode=True, share_quant_resi=4, v_patch_nums=(1, 2, 4))
    torch.save(vae.state_dict(), path)


# --- typed-argument-parser ----------------------------------------------------------------------------------------
class Tap:
    def __init__(self, explicit_bool: bool = False, **_):
        self.explicit_bool = explicit_bool
        hints = typing.get_type_hints(type(self))
        self._types = {k: v for k, v in hints.items() if not k.startswith("_")}
        self.class_variables = OrderedDict((k, {"comment": ""}) for k in self._types)
        self.extra_args: list[str] = []

    @staticmethod
    def _convert(kind, text):
        if kind is bool:
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise ValueError(text)
        if kind is tuple:
            return tuple(text.split())
        return kind(text)

    def parse_args(self, args=None, known_only: bool = False):
        argv = list(sys.argv[1:] if args is None else args)
        for name in self._types:
            setattr(self, name, getattr(type(self), name))
        i = 0
        while i < len(argv):
            item = argv[i]
            if item.startswith("--"):
                key, _, value = item[2:].partition("=")
                if not _:
                    value = argv[i + 1]
                    i += 1
                if key in self._types:
                    setattr(self, key, self._convert(self._types[key], value))
                    i += 1
                    continue
                if not known_only:
                    raise SystemExit(f"unrecognized argument {item}")
                self.extra_args.append(item)
            else:
                self.extra_args.append(item)
            i += 1
        return self


# --- pytz -----------------------------------------------------------------------------------------------------------
class pytz:  # noqa: N801 (the module's name)
    @staticmethod
    def timezone(name: str):
        try:
            return zoneinfo.ZoneInfo(name)
        except zoneinfo.ZoneInfoNotFoundError:
            return datetime.timezone(datetime.timedelta(hours=8))


# --- tensorboard ----------------------------------------------------------------------------------------------------
class SummaryWriter:
    def __init__(self, log_dir=None, filename_suffix=""):
        self.log_dir = log_dir

    def add_scalar(self, *args, **kwargs):
        pass

    def add_histogram(self, *args, **kwargs):
        pass

    def add_image(self, *args, **kwargs):
        pass

    def flush(self):
        pass

    def close(self):
        pass


# --- huggingface_hub ------------------------------------------------------------------------------------------------
class PyTorchModelHubMixin:
    pass


# --- torchvision ----------------------------------------------------------------------------------------------------
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class DatasetFolder(torch.utils.data.Dataset):
    """torchvision.datasets.DatasetFolder: classes = the sorted sub-folders, samples = their files walked in sorted
    order."""

    def __init__(self, root, loader, extensions=None, transform=None, target_transform=None):
        self.root, self.loader, self.transform, self.target_transform = root, loader, transform, target_transform
        self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = []
        for c in sorted(self.class_to_idx):
            for dirpath, _, fnames in sorted(os.walk(os.path.join(root, c), followlinks=True)):
                for fname in sorted(fnames):
                    if fname.lower().endswith(tuple(extensions)):
                        self.samples.append((os.path.join(dirpath, fname), self.class_to_idx[c]))
        self.targets = [s[1] for s in self.samples]

    def __getitem__(self, index):
        path, target = self.samples[index]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target

    def __len__(self):
        return len(self.samples)


class InterpolationMode:
    NEAREST = Image.NEAREST
    BILINEAR = Image.BILINEAR
    BICUBIC = Image.BICUBIC
    LANCZOS = Image.LANCZOS


class transforms:  # noqa: N801 (the module's name)
    class Compose:
        def __init__(self, transforms):
            self.transforms = transforms

        def __call__(self, img):
            for t in self.transforms:
                img = t(img)
            return img

    class Resize:
        """The shorter edge to `size` (PIL, the given interpolation), as torchvision's PIL path."""

        def __init__(self, size, interpolation=Image.BILINEAR):
            self.size, self.interpolation = size, interpolation

        def __call__(self, img):
            w, h = img.size
            short, long = (w, h) if w <= h else (h, w)
            new_short, new_long = self.size, int(self.size * long / short)
            ow, oh = (new_short, new_long) if w <= h else (new_long, new_short)
            return img.resize((ow, oh), self.interpolation)

    class RandomCrop:
        def __init__(self, size):
            self.size = size

        def __call__(self, img):
            w, h = img.size
            th, tw = self.size
            i = torch.randint(0, h - th + 1, size=(1,)).item()
            j = torch.randint(0, w - tw + 1, size=(1,)).item()
            return img.crop((j, i, j + tw, i + th))

    class CenterCrop:
        def __init__(self, size):
            self.size = size

        def __call__(self, img):
            w, h = img.size
            th, tw = self.size
            i, j = int(round((h - th) / 2.0)), int(round((w - tw) / 2.0))
            return img.crop((j, i, j + tw, i + th))

    class RandomHorizontalFlip:
        def __init__(self, p=0.5):
            self.p = p

        def __call__(self, img):
            if torch.rand(1) < self.p:
                return img.transpose(Image.FLIP_LEFT_RIGHT)
            return img

    class ToTensor:
        def __call__(self, pic):
            arr = np.array(pic, np.uint8, copy=True)
            return torch.from_numpy(arr).permute(2, 0, 1).contiguous().to(torch.get_default_dtype()).div(255)


if __name__ == "__main__" and sys.argv[1:2] == ["vae"]:
    _write_vae(sys.argv[2])
