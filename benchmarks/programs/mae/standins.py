"""Stand-ins for what facebookresearch/mae's pre-training takes from packages not installed here, and for ImageNet (a
download):

- `datasets.ImageFolder`: a synthetic 10-class set of 64 RGB PIL images of 40x40 pixels generated from a fixed seed of
  its own (whatever the folder it is given).
- `transforms`: the four torchvision transforms main_pretrain.py composes, on PIL images, drawing their randomness
  from torch's global generator as torchvision's do: `RandomResizedCrop` draws its scale, its log-ratio and its corner
  as torchvision's `get_params` does (up to 10 tries, then the central crop) and resizes with the interpolation it is
  given (3: PIL's bicubic); `RandomHorizontalFlip` draws one `torch.rand(1)` per image.
- timm 0.3.2's `PatchEmbed`, `Block` (with its `Attention` and `Mlp`) from `timm.models.vision_transformer`: the same
  layers built in the same order (so the same draws at construction), the same forward (attention written out as
  timm's: q @ k^T * scale, softmax, @ v); and `optim_factory.add_weight_decay` as timm 0.3.2's (frozen parameters
  skipped; 1-d tensors, biases and skip_list without weight decay, that group first).
- `SummaryWriter`: torch.utils.tensorboard's needs the tensorboard package (not installed); tensorboardX's writes the
  same event files, its `logdir` also named `log_dir` as torch's.
"""

import math
from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image, ImageOps
from tensorboardX import SummaryWriter as _TensorboardXWriter
from torch import nn

SIZE = 64  # images in the synthetic set: 2 ranks x batch 8 x 4 iterations an epoch
SIDE = 40  # pixels a side, cropped to --input_size by RandomResizedCrop

# --------------------------------------------------------------------------------------------------- data (ImageNet)


class ImageFolder(torch.utils.data.Dataset):
    def __init__(self, root=None, transform=None, target_transform=None):
        g = torch.Generator().manual_seed(0)
        pixels = torch.randint(0, 256, (SIZE, SIDE, SIDE, 3), generator=g, dtype=torch.uint8).numpy()
        self.root = root
        self.samples = [(Image.fromarray(pixels[i]), i % 10) for i in range(SIZE)]
        self.classes = [str(c) for c in range(10)]
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

    def __repr__(self):
        return f"Dataset ImageFolder (synthetic)\n    Number of datapoints: {len(self)}\n    Root location: {self.root}"


datasets = SimpleNamespace(ImageFolder=ImageFolder)

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
    ToTensor=ToTensor,
    Normalize=Normalize,
)

# ---------------------------------------------------------------------------- timm 0.3.2 models.vision_transformer


def _pair(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


class PatchEmbed(nn.Module):
    def __init__(self, img_size=224, patch_size=16, in_chans=3, embed_dim=768):
        super().__init__()
        img_size, patch_size = _pair(img_size), _pair(patch_size)
        self.img_size, self.patch_size = img_size, patch_size
        self.num_patches = (img_size[1] // patch_size[1]) * (img_size[0] // patch_size[0])
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU, drop=0.0):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, qk_scale=None, attn_drop=0.0, proj_drop=0.0):
        super().__init__()
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = qk_scale or head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = self.attn_drop(attn.softmax(dim=-1))
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class Block(nn.Module):
    def __init__(
        self,
        dim,
        num_heads,
        mlp_ratio=4.0,
        qkv_bias=False,
        qk_scale=None,
        drop=0.0,
        attn_drop=0.0,
        drop_path=0.0,
        act_layer=nn.GELU,
        norm_layer=nn.LayerNorm,
    ):
        super().__init__()
        assert drop_path == 0.0, "DropPath is not stood in for (MAE pre-training uses none)"
        self.norm1 = norm_layer(dim)
        self.attn = Attention(
            dim, num_heads=num_heads, qkv_bias=qkv_bias, qk_scale=qk_scale, attn_drop=attn_drop, proj_drop=drop
        )
        self.drop_path = nn.Identity()
        self.norm2 = norm_layer(dim)
        self.mlp = Mlp(in_features=dim, hidden_features=int(dim * mlp_ratio), act_layer=act_layer, drop=drop)

    def forward(self, x):
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


# -------------------------------------------------------------------------------------- timm 0.3.2 optim_factory


def add_weight_decay(model, weight_decay=1e-5, skip_list=()):
    decay = []
    no_decay = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue  # frozen weights
        if len(param.shape) == 1 or name.endswith(".bias") or name in skip_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": weight_decay}]


optim_factory = SimpleNamespace(add_weight_decay=add_weight_decay)


# ---------------------------------------------------------------------------------- torch.utils.tensorboard


class SummaryWriter(_TensorboardXWriter):
    def __init__(self, log_dir=None, **kwargs):
        super().__init__(logdir=log_dir, **kwargs)

    @property
    def log_dir(self):
        return self.logdir
