"""Stand-ins for what SLIP imports and this machine lacks (timm, torchvision, ftfy/regex for the tokenizer, wandb,
the image sets, a SyncBatchNorm that runs on CPU): the same layers built in the same order, the same draws from the
same generators, in plain torch, numpy and PIL. Not part of facebookresearch/SLIP."""

from __future__ import annotations

import json
import math
import os
import zlib
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from PIL import Image, ImageEnhance
from torch import nn

# --- timm 0.4.x: VisionTransformer (patch embed, cls token, pos embed, blocks, norm, head), its registry ----------


def trunc_normal_(tensor, std=1.0):
    return nn.init.trunc_normal_(tensor, std=std, a=-2.0, b=2.0)


class PatchEmbed(nn.Module):
    def __init__(self, img_size=224, patch_size=16, in_chans=3, embed_dim=768):
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(0.0)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = self.attn_drop(attn.softmax(dim=-1))
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_features, in_features)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4.0, qkv_bias=True):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads=num_heads, qkv_bias=qkv_bias)
        self.drop_path = nn.Identity()
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x):
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


def _init_vit_weights(module):
    if isinstance(module, nn.Linear):
        trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.zeros_(module.bias)
        nn.init.ones_(module.weight)


class VisionTransformer(nn.Module):
    def __init__(
        self, img_size=224, patch_size=16, in_chans=3, num_classes=1000, embed_dim=768, depth=12, num_heads=12
    ):
        super().__init__()
        self.num_classes = num_classes
        self.num_features = self.embed_dim = embed_dim
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.pos_drop = nn.Dropout(0.0)
        self.blocks = nn.Sequential(*[Block(embed_dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.pre_logits = nn.Identity()
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        trunc_normal_(self.pos_embed, std=0.02)
        trunc_normal_(self.cls_token, std=0.02)
        self.apply(_init_vit_weights)

    def forward_features(self, x):
        x = self.patch_embed(x)
        cls_token = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls_token, x), dim=1)
        x = self.pos_drop(x + self.pos_embed)
        x = self.norm(self.blocks(x))
        return self.pre_logits(x[:, 0])

    def forward(self, x):
        return self.head(self.forward_features(x))


_MODELS = {}


def register_model(fn):
    _MODELS[fn.__name__] = fn
    return fn


def _create_vision_transformer(variant, pretrained=False, **kwargs):
    return VisionTransformer(**kwargs)


def create_model(name, pretrained=False, **kwargs):
    return _MODELS[name](pretrained=pretrained, **kwargs)


timm = SimpleNamespace(
    create_model=create_model,
    models=SimpleNamespace(
        registry=SimpleNamespace(register_model=register_model),
        vision_transformer=SimpleNamespace(_create_vision_transformer=_create_vision_transformer),
    ),
)


# --- nn.SyncBatchNorm: torch's refuses a CPU tensor; the same statistics over every rank, by all_reduce --------


class SyncBatchNorm(nn.BatchNorm1d):
    def forward(self, x):
        if not (self.training and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        count = torch.full((1,), float(x.shape[0]), dtype=x.dtype)
        stats = dist_fn.all_reduce(torch.cat([x.sum(0), (x * x).sum(0), count]))
        c = x.shape[1]
        n = stats[-1]
        mean = stats[:c] / n
        var = stats[c : 2 * c] / n - mean * mean
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
            self.running_mean.mul_(1 - self.momentum).add_(mean.detach(), alpha=self.momentum)
            unbiased = var.detach() * n / (n - 1)
            self.running_var.mul_(1 - self.momentum).add_(unbiased, alpha=self.momentum)
        out = (x - mean) / torch.sqrt(var + self.eps)
        return out * self.weight + self.bias


# --- torchvision.transforms on PIL images, drawing from torch's global generator as torchvision 0.x does --------


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomResizedCrop:
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0)):
        self.size, self.scale, self.ratio = size, scale, ratio

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
        in_ratio = float(width) / float(height)
        if in_ratio < min(self.ratio):
            w, h = width, int(round(width / min(self.ratio)))
        elif in_ratio > max(self.ratio):
            h, w = height, int(round(height * max(self.ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img):
        i, j, h, w = self.get_params(img)
        return img.crop((j, i, j + w, i + h)).resize((self.size, self.size), Image.BILINEAR)


class Resize:
    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        w, h = img.size
        if w <= h:
            ow, oh = self.size, int(self.size * h / w)
        else:
            oh, ow = self.size, int(self.size * w / h)
        return img.resize((ow, oh), Image.BILINEAR)


class CenterCrop:
    def __init__(self, size):
        self.size = size

    def __call__(self, img):
        w, h = img.size
        top, left = int(round((h - self.size) / 2.0)), int(round((w - self.size) / 2.0))
        return img.crop((left, top, left + self.size, top + self.size))


def _adjust_hue(img, hue_factor):
    h, s, v = img.convert("HSV").split()
    np_h = np.array(h, dtype=np.uint8)
    with np.errstate(over="ignore"):
        np_h += np.array(hue_factor * 255).astype(np.uint8)
    return Image.merge("HSV", (Image.fromarray(np_h, "L"), s, v)).convert(img.mode)


class ColorJitter:
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        self.brightness = (max(0, 1 - brightness), 1 + brightness)
        self.contrast = (max(0, 1 - contrast), 1 + contrast)
        self.saturation = (max(0, 1 - saturation), 1 + saturation)
        self.hue = (-hue, hue)

    def __call__(self, img):
        fn_idx = torch.randperm(4)
        b = float(torch.empty(1).uniform_(self.brightness[0], self.brightness[1]))
        c = float(torch.empty(1).uniform_(self.contrast[0], self.contrast[1]))
        s = float(torch.empty(1).uniform_(self.saturation[0], self.saturation[1]))
        h = float(torch.empty(1).uniform_(self.hue[0], self.hue[1]))
        for fn_id in fn_idx:
            if fn_id == 0:
                img = ImageEnhance.Brightness(img).enhance(b)
            elif fn_id == 1:
                img = ImageEnhance.Contrast(img).enhance(c)
            elif fn_id == 2:
                img = ImageEnhance.Color(img).enhance(s)
            else:
                img = _adjust_hue(img, h)
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


class RandomGrayscale:
    def __init__(self, p=0.1):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            gray = np.array(img.convert("L"))
            return Image.fromarray(np.dstack([gray, gray, gray]), "RGB")
        return img


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
        t = torch.from_numpy(arr).view(pic.size[1], pic.size[0], len(pic.getbands()))
        return t.permute((2, 0, 1)).contiguous().float().div(255)


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, tensor):
        mean = torch.as_tensor(self.mean, dtype=tensor.dtype).view(-1, 1, 1)
        std = torch.as_tensor(self.std, dtype=tensor.dtype).view(-1, 1, 1)
        return tensor.sub(mean).div(std)


transforms = SimpleNamespace(
    Compose=Compose,
    RandomResizedCrop=RandomResizedCrop,
    Resize=Resize,
    CenterCrop=CenterCrop,
    ColorJitter=ColorJitter,
    RandomApply=RandomApply,
    RandomGrayscale=RandomGrayscale,
    RandomHorizontalFlip=RandomHorizontalFlip,
    ToTensor=ToTensor,
    Normalize=Normalize,
)


class ImageFolder(torch.utils.data.Dataset):
    """torchvision.datasets.ImageFolder: classes from the sorted folder names, files sorted in each."""

    def __init__(self, root, transform=None):
        self.classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.samples = [
            (os.path.join(root, c, f), k)
            for k, c in enumerate(self.classes)
            for f in sorted(os.listdir(os.path.join(root, c)))
        ]
        self.transform = transform

    def __getitem__(self, index):
        path, target = self.samples[index]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        return (self.transform(img) if self.transform is not None else img), target

    def __len__(self):
        return len(self.samples)


# --- tokenizer.SimpleTokenizer (BPE over ftfy/regex): each word to an id by CRC32, a small vocabulary -----------

VOCAB_SIZE = 64  # sot = 62, eot = 63: the highest id, as in CLIP's vocabulary (encode_text takes the argmax)


class SimpleTokenizer:
    def encode(self, text):
        return [1 + zlib.crc32(w.encode()) % (VOCAB_SIZE - 3) for w in text.lower().split()]

    def __call__(self, texts, context_length=8):
        if isinstance(texts, str):
            texts = [texts]
        all_tokens = [[VOCAB_SIZE - 2] + self.encode(text) + [VOCAB_SIZE - 1] for text in texts]
        result = torch.zeros(len(all_tokens), context_length, dtype=torch.long)
        for i, tokens in enumerate(all_tokens):
            tokens = tokens[:context_length]
            result[i, : len(tokens)] = torch.tensor(tokens)
        if len(result) == 1:
            return result[0]
        return result


# --- the data: a CC3M-style metadata file and its images, an ImageNet-style val folder, labels and templates ----

WORDS = "a photo of red blue green dog cat bird tree car house small large on the in with".split()
LABELS = ["dog", "cat", "bird", "tree", "car"]  # five: validate_zeroshot reads top-5 accuracy
TEMPLATES = ["a photo of a {}.", "a picture of the {}."]


def write_data(root: str, n_train: int = 64, n_val_per_class: int = 2, size: int = 16) -> None:
    """Under root: cc3m/NNN.png and cc3m.npy (image_id, captions), imagenet/val/<label>/N.png, labels.json and
    templates.json; every pixel and word drawn from numpy's RandomState(0)."""
    rng = np.random.RandomState(0)
    os.makedirs(os.path.join(root, "cc3m"), exist_ok=True)
    samples = []
    for i in range(n_train):
        Image.fromarray(rng.randint(0, 256, (size, size, 3), dtype=np.uint8), "RGB").save(
            os.path.join(root, "cc3m", f"{i:03d}.png")
        )
        captions = [" ".join(rng.choice(WORDS, size=rng.randint(2, 6))) for _ in range(2)]
        samples.append({"image_id": f"cc3m/{i:03d}.png", "captions": captions})
    np.save(os.path.join(root, "cc3m.npy"), np.array(samples, dtype=object), allow_pickle=True)
    for label in LABELS:
        folder = os.path.join(root, "imagenet", "val", label)
        os.makedirs(folder, exist_ok=True)
        for k in range(n_val_per_class):
            img = rng.randint(0, 256, (size, size, 3), dtype=np.uint8)
            Image.fromarray(img, "RGB").save(os.path.join(folder, f"{k}.png"))
    with open(os.path.join(root, "labels.json"), "w") as f:
        json.dump({"imagenet": LABELS}, f)
    with open(os.path.join(root, "templates.json"), "w") as f:
        json.dump({"imagenet": TEMPLATES}, f)
