"""Stand-ins for what facebookresearch/ConvNeXt takes from timm (0.3.2, the version its INSTALL.md pins) and
torchvision, neither installed here, and for ImageNet (a download). Each is the few lines of the library the tiny
config reaches, written after the library's code; what the tiny config leaves off is refused, not imitated:

- timm: `create_model`/`register_model` (a registry), `trunc_normal_` and `DropPath` (timm 0.3.2's: `uniform_` then
  `erfinv_`; a `torch.rand` per sample in training mode), `LabelSmoothingCrossEntropy` and `SoftTargetCrossEntropy`,
  `ModelEma` (timm.utils's V1: a deep copy in eval() mode, every state tensor updated as `ema * decay + (1 - decay) *
  model`), `accuracy`, `get_state_dict`, the ImageNet constants, `create_transform` for training (the crop, which
  main.py replaces by a `RandomCrop` at 32 pixels, a horizontal flip, `ColorJitter` where no auto-augment policy is
  given, `ToTensor`, `Normalize`; auto-augment, random erasing and vertical flips refused) and `Mixup` (refused: the
  tiny config turns it off). timm's optimizers (Nadam, RAdam, ...) are refused: the tiny config trains AdamW, torch's.
- torchvision: `datasets.ImageFolder` a synthetic set of 3x32x32 uint8 images in 10 classes generated from a fixed seed
  of its own (`.../val`: 32 images from seed 1, anything else: 128 from seed 0; no draw from the global generator), and
  the transforms main.py composes. They act on uint8 CHW tensors (the images a PIL decoder would give) and draw from
  torch's global generator in torchvision's order (RandomCrop: the padding, then `torch.randint` for the row and the
  column; RandomHorizontalFlip: one `torch.rand(1)`; ColorJitter: `torch.randperm(4)`, then one `uniform_` per factor);
  the pixels they make are not torchvision's.
"""

import math
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)
IMAGENET_INCEPTION_MEAN = (0.5, 0.5, 0.5)
IMAGENET_INCEPTION_STD = (0.5, 0.5, 0.5)

# timm.models.registry


_MODELS = {}


def register_model(fn):
    _MODELS[fn.__name__] = fn
    return fn


def create_model(model_name, pretrained=False, checkpoint_path="", **kwargs):
    # timm 0.3.2: None-valued keyword arguments are dropped before the entrypoint is called
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    if model_name not in _MODELS:
        raise RuntimeError(f"Unknown model ({model_name})")
    return _MODELS[model_name](pretrained=pretrained, **kwargs)


# timm.models.layers


def _no_grad_trunc_normal_(tensor, mean, std, a, b):
    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    with torch.no_grad():
        lower = norm_cdf((a - mean) / std)
        upper = norm_cdf((b - mean) / std)
        tensor.uniform_(2 * lower - 1, 2 * upper - 1)
        tensor.erfinv_()
        tensor.mul_(std * math.sqrt(2.0))
        tensor.add_(mean)
        tensor.clamp_(min=a, max=b)
        return tensor


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    return _no_grad_trunc_normal_(tensor, mean, std, a, b)


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)  # work with diff dim tensors, not just 2D ConvNets
    random_tensor = keep_prob + torch.rand(shape, dtype=x.dtype, device=x.device)
    random_tensor.floor_()  # binarize
    return x.div(keep_prob) * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob=None):
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


# timm.loss


class LabelSmoothingCrossEntropy(nn.Module):
    def __init__(self, smoothing=0.1):
        super().__init__()
        assert smoothing < 1.0
        self.smoothing = smoothing
        self.confidence = 1.0 - smoothing

    def forward(self, x, target):
        logprobs = F.log_softmax(x, dim=-1)
        nll_loss = -logprobs.gather(dim=-1, index=target.unsqueeze(1))
        nll_loss = nll_loss.squeeze(1)
        smooth_loss = -logprobs.mean(dim=-1)
        loss = self.confidence * nll_loss + self.smoothing * smooth_loss
        return loss.mean()


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x, target):
        loss = torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1)
        return loss.mean()


class Mixup:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("mixup/cutmix are not stood in (the tiny config passes --mixup 0 --cutmix 0)")


# timm.utils


class ModelEma:
    def __init__(self, model, decay=0.9999, device="", resume=""):
        import copy

        self.ema = copy.deepcopy(model)
        self.ema.eval()
        self.decay = decay
        self.device = device
        if device:
            self.ema.to(device=device)
        self.ema_has_module = hasattr(self.ema, "module")
        if resume:
            raise NotImplementedError("resuming an EMA is not stood in")
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        needs_module = hasattr(model, "module") and not self.ema_has_module
        with torch.no_grad():
            msd = model.state_dict()
            for k, ema_v in self.ema.state_dict().items():
                if needs_module:
                    k = "module." + k
                model_v = msd[k].detach()
                if self.device:
                    model_v = model_v.to(device=self.device)
                ema_v.copy_(ema_v * self.decay + (1.0 - self.decay) * model_v)


def unwrap_model(model):
    if isinstance(model, ModelEma):
        return unwrap_model(model.ema)
    return model.module if hasattr(model, "module") else model


def get_state_dict(model, unwrap_fn=unwrap_model):
    return unwrap_fn(model).state_dict()


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:k].reshape(-1).float().sum(0) * 100.0 / batch_size for k in topk]


def _refuse(name):
    class Refused:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError(f"timm's {name} is not stood in (the tiny config trains AdamW)")

    Refused.__name__ = name
    return Refused


Adafactor, Adahessian, AdamP, Lookahead = (_refuse(n) for n in ("Adafactor", "Adahessian", "AdamP", "Lookahead"))
Nadam, NovoGrad, NvNovoGrad, RAdam = (_refuse(n) for n in ("Nadam", "NovoGrad", "NvNovoGrad", "RAdam"))
RMSpropTF, SGDP = (_refuse(n) for n in ("RMSpropTF", "SGDP"))

# torchvision.datasets


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root, transform=None, num_classes=10, size=None, side=32):
        val = str(root).rstrip("/").endswith("val")
        size = size if size is not None else (32 if val else 128)
        g = torch.Generator().manual_seed(1 if val else 0)
        self.images = torch.randint(0, 256, (size, 3, side, side), generator=g, dtype=torch.uint8)
        self.targets = [i % num_classes for i in range(size)]
        self.classes = [f"class{c}" for c in range(num_classes)]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img, target = self.images[index], self.targets[index]
        return (self.transform(img) if self.transform is not None else img), target


def CIFAR100(*args, **kwargs):
    raise NotImplementedError("CIFAR100 is a download: the tiny config reads the synthetic image folder")


datasets = SimpleNamespace(ImageFolder=ImageFolder, CIFAR100=CIFAR100)

# torchvision.transforms (on uint8 CHW tensors)


class InterpolationMode:
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomCrop:
    def __init__(self, size, padding=None):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.padding = padding

    def __call__(self, img):
        if self.padding is not None:
            img = F.pad(img, (self.padding,) * 4, value=0)
        height, width = img.shape[-2:]
        th, tw = self.size
        i = torch.randint(0, height - th + 1, size=(1,)).item()
        j = torch.randint(0, width - tw + 1, size=(1,)).item()
        return img[..., i : i + th, j : j + tw]


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        return img.flip(-1) if torch.rand(1) < self.p else img


def _blend(img1, img2, ratio):
    bound = 255.0 if img1.dtype == torch.uint8 else 1.0
    return (ratio * img1 + (1.0 - ratio) * img2).clamp(0, bound).to(img1.dtype)


def _grayscale(img):
    r, g, b = img.unbind(dim=-3)
    return (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype).unsqueeze(dim=-3)


class ColorJitter:
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        self.brightness = self._range(brightness)
        self.contrast = self._range(contrast)
        self.saturation = self._range(saturation)
        if hue:
            raise NotImplementedError("hue jitter is not stood in")

    @staticmethod
    def _range(value):
        return None if not value else (max(0.0, 1 - value), 1 + value)

    def __call__(self, img):
        fn_idx = torch.randperm(4)
        factors = [None if r is None else float(torch.empty(1).uniform_(r[0], r[1])) for r in self._ranges()]
        for fn_id in fn_idx.tolist():
            if fn_id == 0 and factors[0] is not None:
                img = _blend(img, torch.zeros_like(img), factors[0])
            elif fn_id == 1 and factors[1] is not None:
                mean = torch.mean(_grayscale(img).to(torch.float32), dim=(-3, -2, -1), keepdim=True)
                img = _blend(img, mean, factors[1])
            elif fn_id == 2 and factors[2] is not None:
                img = _blend(img, _grayscale(img), factors[2])
        return img

    def _ranges(self):
        return self.brightness, self.contrast, self.saturation


class ToTensor:
    def __call__(self, img):
        return img.to(torch.float32).div(255)


class Normalize:
    def __init__(self, mean, std):
        self.mean = torch.as_tensor(mean, dtype=torch.float32)[:, None, None]
        self.std = torch.as_tensor(std, dtype=torch.float32)[:, None, None]

    def __call__(self, img):
        return (img - self.mean) / self.std


class _Refused:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} is not stood in: the tiny config trains at 32 pixels")


class Resize(_Refused):
    pass


class CenterCrop(_Refused):
    pass


class RandomResizedCropAndInterpolation:
    """timm's first training transform; main.py replaces it by a RandomCrop at 32 pixels, so it never runs here."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation="bilinear"):
        self.size = size

    def __call__(self, img):
        raise NotImplementedError("RandomResizedCropAndInterpolation is not stood in (input_size > 32)")


transforms = SimpleNamespace(
    Compose=Compose,
    RandomCrop=RandomCrop,
    RandomHorizontalFlip=RandomHorizontalFlip,
    ColorJitter=ColorJitter,
    ToTensor=ToTensor,
    Normalize=Normalize,
    Resize=Resize,
    CenterCrop=CenterCrop,
    InterpolationMode=InterpolationMode,
)

# timm.data.create_transform (training: transforms_imagenet_train, timm's order)


def create_transform(
    input_size,
    is_training=False,
    color_jitter=0.4,
    auto_augment=None,
    interpolation="bilinear",
    re_prob=0.0,
    re_mode="const",
    re_count=1,
    mean=IMAGENET_DEFAULT_MEAN,
    std=IMAGENET_DEFAULT_STD,
    hflip=0.5,
    vflip=0.0,
):
    if not is_training:
        raise NotImplementedError("timm's evaluation transform is not stood in (datasets.py builds its own)")
    if auto_augment:
        raise NotImplementedError("auto-augment policies are not stood in (the tiny config passes --aa '')")
    if re_prob > 0.0:
        raise NotImplementedError("random erasing is not stood in (the tiny config passes --reprob 0)")
    if vflip > 0.0:
        raise NotImplementedError("vertical flips are not stood in")
    tfl = [RandomResizedCropAndInterpolation(input_size, interpolation=interpolation)]
    if hflip > 0.0:
        tfl += [RandomHorizontalFlip(p=hflip)]
    if color_jitter is not None:
        color_jitter = (float(color_jitter),) * 3
        tfl += [ColorJitter(*color_jitter)]
    tfl += [ToTensor(), Normalize(mean=mean, std=std)]
    return Compose(tfl)
