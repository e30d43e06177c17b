"""Stand-ins for what Swin-Transformer imports and is not installed here: yacs (CfgNode), termcolor (colored),
timm 0.4.12 (its get_started.md's pin) and torchvision. The same layers, the same random draws from the same
generators, at a small size; nothing here draws a random number that the real library would not.

yacs: CfgNode (attribute access, clone, defrost/freeze, merge_from_file, merge_from_list, dump).
termcolor: colored (the text, uncoloured: the logs go to files).
timm: DropPath/drop_path (torch.rand in forward), to_2tuple, trunc_normal_ (torch's copy of timm's algorithm),
Mixup (mode 'batch': one lambda per batch from numpy's global generator; timm 0.4.12 builds its one-hot targets on
'cuda': here on the batch's device), SoftTargetCrossEntropy, LabelSmoothingCrossEntropy, Scheduler and
CosineLRScheduler (0.4.12: t_mul, decay_rate, warmup_prefix, step_update), accuracy, AverageMeter, create_transform
(transforms_imagenet_train without auto-augment, colour jitter or random erasing), IMAGENET_DEFAULT_MEAN/STD.
torchvision: datasets.ImageFolder, transforms (Compose, RandomCrop with padding, RandomHorizontalFlip, ToTensor,
Normalize, Resize, CenterCrop), InterpolationMode.
And `write_data`: the synthetic image folders in place of ImageNet."""

from __future__ import annotations

import ast
import copy
import math
import os
import types
from collections.abc import Iterable
from itertools import repeat

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml
from PIL import Image

IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)

# ---------------------------------------------------------------- yacs.config.CfgNode


class CfgNode(dict):
    """yacs' CfgNode: a dict whose keys are attributes, frozen against assignment unless defrosted."""

    IMMUTABLE = "__immutable__"

    def __init__(self, init_dict=None):
        init_dict = {} if init_dict is None else init_dict
        super().__init__({k: CfgNode(v) if isinstance(v, dict) else v for k, v in init_dict.items()})
        self.__dict__[CfgNode.IMMUTABLE] = False

    def __getattr__(self, name):
        if name in self:
            return self[name]
        raise AttributeError(name)

    def __setattr__(self, name, value):
        if self.__dict__[CfgNode.IMMUTABLE]:
            raise AttributeError(f"Attempted to set {name} to {value}, but CfgNode is immutable")
        self[name] = value

    def __deepcopy__(self, memo):
        node = CfgNode({k: copy.deepcopy(v, memo) for k, v in self.items()})
        node.__dict__[CfgNode.IMMUTABLE] = self.__dict__[CfgNode.IMMUTABLE]
        return node

    def __reduce__(self):
        return (CfgNode, (self.to_dict(),))

    def _immutable(self, flag):
        self.__dict__[CfgNode.IMMUTABLE] = flag
        for v in self.values():
            if isinstance(v, CfgNode):
                v._immutable(flag)

    def freeze(self):
        self._immutable(True)

    def defrost(self):
        self._immutable(False)

    def is_frozen(self):
        return self.__dict__[CfgNode.IMMUTABLE]

    def clone(self):
        return copy.deepcopy(self)

    def to_dict(self):
        return {
            k: v.to_dict() if isinstance(v, CfgNode) else (list(v) if isinstance(v, tuple) else v)
            for k, v in self.items()
        }

    def dump(self, **kwargs):
        return yaml.safe_dump(self.to_dict(), **kwargs)

    @staticmethod
    def _coerce(value, original, key):
        if isinstance(value, str) and not isinstance(original, str):
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                pass
        if original is None or value is None or type(value) is type(original):
            return value
        if isinstance(original, tuple) and isinstance(value, list):
            return tuple(value)
        if isinstance(original, list) and isinstance(value, tuple):
            return list(value)
        if isinstance(original, float) and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        raise ValueError(
            f"Type mismatch ({type(original)} vs. {type(value)}) with values ({original} vs. {value}) "
            f"for config key: {key}"
        )

    def _merge(self, other, prefix=""):
        for k, v in other.items():
            full = prefix + k
            if k not in self:
                raise KeyError(f"Non-existent config key: {full}")
            if isinstance(v, dict):
                self[k]._merge(v, full + ".")
            else:
                self[k] = CfgNode._coerce(copy.deepcopy(v), self[k], full)

    def merge_from_file(self, cfg_filename):
        with open(cfg_filename) as f:
            self._merge(yaml.safe_load(f) or {})

    def merge_from_list(self, cfg_list):
        assert len(cfg_list) % 2 == 0, f"Override list has odd length: {cfg_list}"
        for full_key, v in zip(cfg_list[0::2], cfg_list[1::2], strict=True):
            *path, last = full_key.split(".")
            d = self
            for sub in path:
                d = d[sub]
            if last not in d:
                raise KeyError(f"Non-existent config key: {full_key}")
            d[last] = CfgNode._coerce(v, d[last], full_key)


# ---------------------------------------------------------------- termcolor


def colored(text, color=None, on_color=None, attrs=None):
    return text


# ---------------------------------------------------------------- timm.models.layers


def _ntuple(n):
    def parse(x):
        if isinstance(x, Iterable):
            return x
        return tuple(repeat(x, n))

    return parse


to_2tuple = _ntuple(2)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    return nn.init.trunc_normal_(tensor, mean=mean, std=std, a=a, b=b)  # timm's copy of the same algorithm


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = keep_prob + torch.rand(shape, dtype=x.dtype, device=x.device)
    random_tensor.floor_()
    return x.div(keep_prob) * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob=None):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


# ---------------------------------------------------------------- timm.loss


class LabelSmoothingCrossEntropy(nn.Module):
    def __init__(self, smoothing=0.1):
        super().__init__()
        assert smoothing < 1.0
        self.smoothing = smoothing
        self.confidence = 1.0 - smoothing

    def forward(self, x, target):
        logprobs = F.log_softmax(x, dim=-1)
        nll_loss = -logprobs.gather(dim=-1, index=target.unsqueeze(1)).squeeze(1)
        smooth_loss = -logprobs.mean(dim=-1)
        loss = self.confidence * nll_loss + self.smoothing * smooth_loss
        return loss.mean()


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x, target):
        loss = torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1)
        return loss.mean()


# ---------------------------------------------------------------- timm.utils


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:k].reshape(-1).float().sum(0) * 100.0 / batch_size for k in topk]


class AverageMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


# ---------------------------------------------------------------- timm.scheduler


class Scheduler:
    """timm's Scheduler base: the values written into every param group by step(epoch) or step_update(n)."""

    def __init__(self, optimizer, param_group_field, initialize=True, **noise):
        if any(v is not None for k, v in noise.items() if k in ("noise_range_t",)):
            raise NotImplementedError("lr noise: not stood in")
        self.optimizer = optimizer
        self.param_group_field = param_group_field
        self._initial_param_group_field = f"initial_{param_group_field}"
        if initialize:
            for group in self.optimizer.param_groups:
                group.setdefault(self._initial_param_group_field, group[param_group_field])
        self.base_values = [group[self._initial_param_group_field] for group in self.optimizer.param_groups]
        self.metric = None
        self.update_groups(self.base_values)

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_epoch_values(self, epoch):
        return None

    def get_update_values(self, num_updates):
        return None

    def step(self, epoch, metric=None):
        self.metric = metric
        values = self.get_epoch_values(epoch)
        if values is not None:
            self.update_groups(values)

    def step_update(self, num_updates, metric=None):
        self.metric = metric
        values = self.get_update_values(num_updates)
        if values is not None:
            self.update_groups(values)

    def update_groups(self, values):
        if not isinstance(values, (list, tuple)):
            values = [values] * len(self.optimizer.param_groups)
        for param_group, value in zip(self.optimizer.param_groups, values, strict=False):
            param_group[self.param_group_field] = value


class CosineLRScheduler(Scheduler):
    def __init__(
        self,
        optimizer,
        t_initial,
        t_mul=1.0,
        lr_min=0.0,
        decay_rate=1.0,
        warmup_t=0,
        warmup_lr_init=0,
        warmup_prefix=False,
        cycle_limit=0,
        t_in_epochs=True,
        initialize=True,
    ):
        super().__init__(optimizer, param_group_field="lr", initialize=initialize)
        assert t_initial > 0
        self.t_initial = t_initial
        self.t_mul = t_mul
        self.lr_min = lr_min
        self.decay_rate = decay_rate
        self.cycle_limit = cycle_limit
        self.warmup_t = warmup_t
        self.warmup_lr_init = warmup_lr_init
        self.warmup_prefix = warmup_prefix
        self.t_in_epochs = t_in_epochs
        if self.warmup_t:
            self.warmup_steps = [(v - warmup_lr_init) / self.warmup_t for v in self.base_values]
            super().update_groups(self.warmup_lr_init)
        else:
            self.warmup_steps = [1 for _ in self.base_values]

    def _get_lr(self, t):
        if t < self.warmup_t:
            return [self.warmup_lr_init + t * s for s in self.warmup_steps]
        if self.warmup_prefix:
            t = t - self.warmup_t
        if self.t_mul != 1:
            i = math.floor(math.log(1 - t / self.t_initial * (1 - self.t_mul), self.t_mul))
            t_i = self.t_mul**i * self.t_initial
            t_curr = t - (1 - self.t_mul**i) / (1 - self.t_mul) * self.t_initial
        else:
            i = t // self.t_initial
            t_i = self.t_initial
            t_curr = t - (self.t_initial * i)
        gamma = self.decay_rate**i
        lr_min = self.lr_min * gamma
        lr_max_values = [v * gamma for v in self.base_values]
        if self.cycle_limit == 0 or (self.cycle_limit > 0 and i < self.cycle_limit):
            return [
                lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * t_curr / t_i)) for lr_max in lr_max_values
            ]
        return [self.lr_min for _ in self.base_values]

    def get_epoch_values(self, epoch):
        return self._get_lr(epoch) if self.t_in_epochs else None

    def get_update_values(self, num_updates):
        return None if self.t_in_epochs else self._get_lr(num_updates)


class StepLRScheduler(Scheduler):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("StepLRScheduler: not stood in (LR_SCHEDULER.NAME cosine)")


# ---------------------------------------------------------------- timm.data: Mixup


def one_hot(x, num_classes, on_value=1.0, off_value=0.0, device="cuda"):
    x = x.long().view(-1, 1)
    return torch.full((x.size()[0], num_classes), off_value, device=device).scatter_(1, x, on_value)


def mixup_target(target, num_classes, lam=1.0, smoothing=0.0, device="cuda"):
    off_value = smoothing / num_classes
    on_value = 1.0 - smoothing + off_value
    y1 = one_hot(target, num_classes, on_value=on_value, off_value=off_value, device=device)
    y2 = one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value, device=device)
    return y1 * lam + y2 * (1.0 - lam)


def rand_bbox(img_shape, lam, margin=0.0, count=None):
    ratio = np.sqrt(1 - lam)
    img_h, img_w = img_shape[-2:]
    cut_h, cut_w = int(img_h * ratio), int(img_w * ratio)
    margin_y, margin_x = int(margin * cut_h), int(margin * cut_w)
    cy = np.random.randint(0 + margin_y, img_h - margin_y, size=count)
    cx = np.random.randint(0 + margin_x, img_w - margin_x, size=count)
    yl = np.clip(cy - cut_h // 2, 0, img_h)
    yh = np.clip(cy + cut_h // 2, 0, img_h)
    xl = np.clip(cx - cut_w // 2, 0, img_w)
    xh = np.clip(cx + cut_w // 2, 0, img_w)
    return yl, yh, xl, xh


def cutmix_bbox_and_lam(img_shape, lam, ratio_minmax=None, correct_lam=True, count=None):
    if ratio_minmax is not None:
        raise NotImplementedError("cutmix_minmax: not stood in")
    yl, yu, xl, xu = rand_bbox(img_shape, lam, count=count)
    if correct_lam:
        bbox_area = (yu - yl) * (xu - xl)
        lam = 1.0 - bbox_area / float(img_shape[-2] * img_shape[-1])
    return (yl, yu, xl, xu), lam


class Mixup:
    """timm's Mixup, mode 'batch' only: one lambda per batch, drawn from numpy's global generator."""

    def __init__(
        self,
        mixup_alpha=1.0,
        cutmix_alpha=0.0,
        cutmix_minmax=None,
        prob=1.0,
        switch_prob=0.5,
        mode="batch",
        correct_lam=True,
        label_smoothing=0.1,
        num_classes=1000,
    ):
        if mode != "batch":
            raise NotImplementedError("Mixup mode: only 'batch' is stood in")
        self.mixup_alpha = mixup_alpha
        self.cutmix_alpha = cutmix_alpha
        self.cutmix_minmax = cutmix_minmax
        if self.cutmix_minmax is not None:
            assert len(self.cutmix_minmax) == 2
            self.cutmix_alpha = 1.0
        self.mix_prob = prob
        self.switch_prob = switch_prob
        self.label_smoothing = label_smoothing
        self.num_classes = num_classes
        self.mode = mode
        self.correct_lam = correct_lam
        self.mixup_enabled = True

    def _params_per_batch(self):
        lam = 1.0
        use_cutmix = False
        if self.mixup_enabled and np.random.rand() < self.mix_prob:
            if self.mixup_alpha > 0.0 and self.cutmix_alpha > 0.0:
                use_cutmix = np.random.rand() < self.switch_prob
                lam_mix = (
                    np.random.beta(self.cutmix_alpha, self.cutmix_alpha)
                    if use_cutmix
                    else np.random.beta(self.mixup_alpha, self.mixup_alpha)
                )
            elif self.mixup_alpha > 0.0:
                lam_mix = np.random.beta(self.mixup_alpha, self.mixup_alpha)
            elif self.cutmix_alpha > 0.0:
                use_cutmix = True
                lam_mix = np.random.beta(self.cutmix_alpha, self.cutmix_alpha)
            else:
                raise AssertionError(
                    "One of mixup_alpha > 0., cutmix_alpha > 0., cutmix_minmax not None should be true."
                )
            lam = float(lam_mix)
        return lam, use_cutmix

    def _mix_batch(self, x):
        lam, use_cutmix = self._params_per_batch()
        if lam == 1.0:
            return 1.0
        if use_cutmix:
            (yl, yh, xl, xh), lam = cutmix_bbox_and_lam(
                x.shape, lam, ratio_minmax=self.cutmix_minmax, correct_lam=self.correct_lam
            )
            x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
        else:
            x_flipped = x.flip(0).mul_(1.0 - lam)
            x.mul_(lam).add_(x_flipped)
        return lam

    def __call__(self, x, target):
        assert len(x) % 2 == 0, "Batch size should be even when using this"
        lam = self._mix_batch(x)
        target = mixup_target(target, self.num_classes, lam, self.label_smoothing, x.device)
        return x, target


# ---------------------------------------------------------------- torchvision.transforms, timm's create_transform


class InterpolationMode:
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


timm_data_transforms = types.SimpleNamespace(_pil_interp=None)  # the module whose _pil_interp data/build.py sets


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomCrop:
    """torchvision's RandomCrop(size, padding) on a PIL image: zero padding, then i and j from torch.randint."""

    def __init__(self, size, padding=None):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.padding = padding

    def __call__(self, img):
        a = np.asarray(img)
        if self.padding:
            p = self.padding
            a = np.pad(a, ((p, p), (p, p), (0, 0)), mode="constant")
        h, w = a.shape[:2]
        th, tw = self.size
        if h == th and w == tw:
            return Image.fromarray(np.ascontiguousarray(a))
        i = torch.randint(0, h - th + 1, size=(1,)).item()
        j = torch.randint(0, w - tw + 1, size=(1,)).item()
        return Image.fromarray(np.ascontiguousarray(a[i : i + th, j : j + tw]))


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.transpose(Image.FLIP_LEFT_RIGHT)
        return img


class ToTensor:
    def __call__(self, img):
        return torch.from_numpy(np.array(img, dtype=np.uint8)).permute(2, 0, 1).contiguous().float().div(255)


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, t):
        return (t - self.mean) / self.std


class _Refused:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: not stood in (IMG_SIZE <= 32 takes neither)")


class Resize(_Refused):
    pass


class CenterCrop(_Refused):
    pass


class RandomResizedCropAndInterpolation:
    """Only a placeholder: data/build.py replaces it by RandomCrop at IMG_SIZE <= 32, the only sizes run here."""

    def __init__(self, size, scale=None, ratio=None, interpolation="bilinear"):
        self.size = size

    def __call__(self, img):
        raise NotImplementedError("RandomResizedCropAndInterpolation: not stood in (IMG_SIZE <= 32)")


def create_transform(
    input_size,
    is_training=False,
    color_jitter=0.4,
    auto_augment=None,
    interpolation="bilinear",
    re_prob=0.0,
    re_mode="const",
    re_count=1,
):
    """timm's transforms_imagenet_train with no auto-augment, no colour jitter, no random erasing: the crop, a
    horizontal flip (p 0.5), ToTensor, Normalize."""
    assert is_training
    if auto_augment or color_jitter or re_prob:
        raise NotImplementedError("auto-augment, colour jitter and random erasing are not stood in")
    return Compose(
        [
            RandomResizedCropAndInterpolation(input_size, interpolation=interpolation),
            RandomHorizontalFlip(),
            ToTensor(),
            Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD),
        ]
    )


transforms = types.SimpleNamespace(
    Compose=Compose,
    RandomCrop=RandomCrop,
    RandomHorizontalFlip=RandomHorizontalFlip,
    ToTensor=ToTensor,
    Normalize=Normalize,
    Resize=Resize,
    CenterCrop=CenterCrop,
)

# ---------------------------------------------------------------- torchvision.datasets.ImageFolder

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def pil_loader(path):
    with open(path, "rb") as f:
        img = Image.open(f)
        return img.convert("RGB")


class ImageFolder(torch.utils.data.Dataset):
    """torchvision's ImageFolder: classes are the sorted sub-folders, samples each class's files in sorted order."""

    def __init__(self, root, transform=None, target_transform=None, loader=pil_loader):
        self.root = root
        self.classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = []
        for c in self.classes:
            for base, _, files in sorted(os.walk(os.path.join(root, c), followlinks=True)):
                for name in sorted(files):
                    if name.lower().endswith(IMG_EXTENSIONS):
                        self.samples.append((os.path.join(base, name), self.class_to_idx[c]))
        self.imgs = self.samples
        self.targets = [s[1] for s in self.samples]
        self.transform = transform
        self.target_transform = target_transform
        self.loader = loader

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, index):
        path, target = self.samples[index]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target


datasets = types.SimpleNamespace(ImageFolder=ImageFolder)

# ---------------------------------------------------------------- the data


def write_data(root, n_train=32, n_val=8, num_classes=5, size=16, seed=0):
    """ImageNet's layout in place of ImageNet: `root/{train,val}/class_k/NNN.png`, RGB `size` x `size` images, each
    a class's base colour pattern plus noise, drawn once from numpy's RandomState(seed) (never the global
    generators)."""
    rs = np.random.RandomState(seed)
    base = rs.randint(0, 256, size=(num_classes, size, size, 3))
    for split, n in (("train", n_train), ("val", n_val)):
        labels = np.arange(n) % num_classes
        noise = rs.randint(-64, 65, size=(n, size, size, 3))
        images = np.clip(base[labels] + noise, 0, 255).astype(np.uint8)
        for i, (label, image) in enumerate(zip(labels, images, strict=True)):
            folder = os.path.join(root, split, f"class_{label}")
            os.makedirs(folder, exist_ok=True)
            Image.fromarray(image).save(os.path.join(folder, f"{i:03d}.png"))
