"""Stand-ins for what main_swav.py imports and this machine lacks (apex, torchvision, pandas), and for what a CPU
cannot run (torch's SyncBatchNorm is GPU-only): the same layers and the same random draws, in plain torch, numpy and
PIL. Also `write_images`, the tiny synthetic ImageFolder both sides read (the corpus's `prepare` step)."""

from __future__ import annotations

import math
import os
import pickle
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn as nn
from PIL import Image, ImageEnhance

# ---------------------------------------------------------------- data


def write_images(root: str, classes: int = 2, per_class: int = 16, size: int = 40, seed: int = 0) -> None:
    """A synthetic ImageFolder under ROOT/data/train: CLASSES folders of PER_CLASS RGB PNGs, SIZExSIZE, drawn from a
    fixed seed (smooth gradients plus noise, so crops and colour jitter change them visibly)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    for c in range(classes):
        folder = Path(root) / "data" / "train" / f"class{c}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            base = rng.uniform(0, 255, size=3)
            slope = rng.uniform(-120, 120, size=(2, 3))
            img = base + xx[..., None] * slope[0] + yy[..., None] * slope[1] + rng.normal(0, 20, size=(size, size, 3))
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(folder / f"img{i:03d}.png")


class ImageFolder(torch.utils.data.Dataset):
    """torchvision.datasets.ImageFolder: class folders sorted, files sorted, samples (path, class index), PIL RGB."""

    def __init__(self, root, transform=None):
        root = os.path.expanduser(root)
        self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = []
        for c in self.classes:
            for dirpath, _, names in sorted(os.walk(os.path.join(root, c), followlinks=True)):
                for name in sorted(names):
                    if name.lower().endswith((".png", ".jpg", ".jpeg")):
                        self.samples.append((os.path.join(dirpath, name), self.class_to_idx[c]))
        self.targets = [s[1] for s in self.samples]
        self.transform = transform

    def loader(self, path):
        with open(path, "rb") as f:
            return Image.open(f).convert("RGB")

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, target = self.samples[index]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        return sample, target


class datasets:  # noqa: N801 - stands in for the module torchvision.datasets
    ImageFolder = ImageFolder


# ---------------------------------------------------------------- transforms (torchvision's draws, PIL backend)


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomResizedCrop:
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0)):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.scale = scale
        self.ratio = ratio

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
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w = width
            h = int(round(w / min(ratio)))
        elif in_ratio > max(ratio):
            h = height
            w = int(round(h * max(ratio)))
        else:
            w, h = width, height
        i = (height - h) // 2
        j = (width - w) // 2
        return i, j, h, w

    def __call__(self, img):
        i, j, h, w = self.get_params(img, self.scale, self.ratio)
        return img.crop((j, i, j + w, i + h)).resize((self.size[1], self.size[0]), Image.BILINEAR)


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.transpose(Image.FLIP_LEFT_RIGHT)
        return img


def _adjust_hue(img, hue_factor):
    h, s, v = img.convert("HSV").split()
    np_h = np.array(h, dtype=np.uint8)
    with np.errstate(over="ignore"):
        np_h += np.array(hue_factor * 255).astype(np.uint8)
    h = Image.fromarray(np_h, "L")
    return Image.merge("HSV", (h, s, v)).convert("RGB")


class ColorJitter:
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        self.brightness = self._range(brightness, 1)
        self.contrast = self._range(contrast, 1)
        self.saturation = self._range(saturation, 1)
        self.hue = self._range(hue, 0, clip=False)

    @staticmethod
    def _range(value, center, clip=True):
        lo, hi = center - value, center + value
        if clip:
            lo = max(lo, 0.0)
        return None if lo == hi == center else (float(lo), float(hi))

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


class RandomGrayscale:
    def __init__(self, p=0.1):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.convert("L").convert("RGB")
        return img


class ToTensor:
    def __call__(self, img):
        arr = np.array(img, dtype=np.uint8, copy=True)
        return torch.from_numpy(arr).permute(2, 0, 1).contiguous().float().div(255)


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, t):
        return (t - self.mean) / self.std


class transforms:  # noqa: N801 - stands in for the module torchvision.transforms
    Compose = Compose
    RandomResizedCrop = RandomResizedCrop
    RandomHorizontalFlip = RandomHorizontalFlip
    ColorJitter = ColorJitter
    RandomApply = RandomApply
    RandomGrayscale = RandomGrayscale
    ToTensor = ToTensor
    Normalize = Normalize


# ---------------------------------------------------------------- apex


class LARC:
    """apex.parallel.LARC as apex defines it: a wrapper around an optimizer whose step rescales each parameter's
    gradient by the trust ratio trust_coefficient * |p| / (|g| + |p| * wd + eps) (with the weight decay folded in,
    and, with clip, the ratio clipped against the group's lr), then calls the wrapped optimizer's step with its
    weight decay switched off."""

    def __init__(self, optimizer, trust_coefficient=0.02, clip=True, eps=1e-8):
        self.optim = optimizer
        self.trust_coefficient = trust_coefficient
        self.eps = eps
        self.clip = clip

    def __getstate__(self):
        return self.optim.__getstate__()

    def __setstate__(self, state):
        self.optim.__setstate__(state)

    @property
    def state(self):
        return self.optim.state

    def __repr__(self):
        return self.optim.__repr__()

    @property
    def param_groups(self):
        return self.optim.param_groups

    @param_groups.setter
    def param_groups(self, value):
        self.optim.param_groups = value

    def state_dict(self):
        return self.optim.state_dict()

    def load_state_dict(self, state_dict):
        self.optim.load_state_dict(state_dict)

    def zero_grad(self):
        self.optim.zero_grad()

    def add_param_group(self, param_group):
        self.optim.add_param_group(param_group)

    def step(self):
        with torch.no_grad():
            weight_decays = []
            for group in self.optim.param_groups:
                # absorb weight decay control from optimizer
                weight_decay = group["weight_decay"] if "weight_decay" in group else 0
                weight_decays.append(weight_decay)
                group["weight_decay"] = 0
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    param_norm = torch.norm(p.data)
                    grad_norm = torch.norm(p.grad.data)

                    if param_norm != 0 and grad_norm != 0:
                        # calculate adaptive lr + weight decay
                        adaptive_lr = (
                            self.trust_coefficient * (param_norm) / (grad_norm + param_norm * weight_decay + self.eps)
                        )

                        # clip learning rate for LARC
                        if self.clip:
                            # calculation of adaptive_lr so that when multiplied by lr it equals `min(adaptive_lr, lr)`
                            adaptive_lr = min(adaptive_lr / group["lr"], 1)

                        p.grad.data += weight_decay * p.data
                        p.grad.data *= adaptive_lr

        self.optim.step()
        # return weight decay control to optimizer
        for i, group in enumerate(self.optim.param_groups):
            group["weight_decay"] = weight_decays[i]


# ---------------------------------------------------------------- SyncBatchNorm on a CPU


class SyncBatchNorm(nn.modules.batchnorm._BatchNorm):
    """torch's SyncBatchNorm, whose forward refuses CPU tensors (and DDP refuses a CPU module holding one, so this is
    not its subclass): in training, with more than one rank, the batch's per-channel sum, sum of squares and count
    are all-reduced (a differentiable all_reduce: the backward all-reduces the gradients of the statistics, as
    torch's sync_batch_norm does), the input normalized by the global mean and (biased) variance, and the running
    statistics updated with the global unbiased variance. Otherwise plain batch norm."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, process_group=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        sync = self.training and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        if not sync:
            return super().forward(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                momentum = 1.0 / self.num_batches_tracked.item()
        dims = [d for d in range(input.dim()) if d != 1]
        channels = input.size(1)
        count = torch.full((1,), float(input.numel() // channels), dtype=input.dtype)
        stats = torch.cat([input.sum(dims), (input * input).sum(dims), count])
        stats = dist_nn.all_reduce(stats)
        total = stats[-1]
        mean = stats[:channels] / total
        var = stats[channels : 2 * channels] / total - mean * mean
        if self.track_running_stats:
            with torch.no_grad():
                self.running_mean.mul_(1 - momentum).add_(mean.detach(), alpha=momentum)
                unbiased = var.detach() * total / (total - 1)
                self.running_var.mul_(1 - momentum).add_(unbiased, alpha=momentum)
        shape = [1, channels] + [1] * (input.dim() - 2)
        out = (input - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out


def convert_sync_batchnorm(module, process_group=None):
    """nn.SyncBatchNorm.convert_sync_batchnorm, converting to the CPU SyncBatchNorm above (the same attributes, the
    same parameters and buffers moved over)."""
    module_output = module
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        module_output = SyncBatchNorm(
            module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats, process_group
        )
        if module.affine:
            with torch.no_grad():
                module_output.weight = module.weight
                module_output.bias = module.bias
        module_output.running_mean = module.running_mean
        module_output.running_var = module.running_var
        module_output.num_batches_tracked = module.num_batches_tracked
        module_output.training = module.training
        if hasattr(module, "qconfig"):
            module_output.qconfig = module.qconfig
    for name, child in module.named_children():
        module_output.add_module(name, convert_sync_batchnorm(child, process_group))
    del module
    return module_output


# ---------------------------------------------------------------- pandas (PD_Stats keeps a table of epoch stats)


class _Loc:
    def __init__(self, frame):
        self.frame = frame

    def __setitem__(self, index, row):
        self.frame.rows.append(tuple(row))


class DataFrame:
    def __init__(self, columns):
        self.columns = list(columns)
        self.rows = []
        self.loc = _Loc(self)

    @property
    def index(self):
        return range(len(self.rows))

    def to_pickle(self, path):
        with open(path, "wb") as f:
            pickle.dump({"columns": self.columns, "rows": self.rows}, f)


def read_pickle(path):
    with open(path, "rb") as f:
        data = pickle.load(f)
    frame = DataFrame(data["columns"])
    frame.rows = list(data["rows"])
    return frame


class pd:  # noqa: N801 - stands in for the module pandas
    DataFrame = DataFrame
    read_pickle = read_pickle
