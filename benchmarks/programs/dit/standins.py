"""Stand-ins for what facebookresearch/DiT's train.py and models.py take from packages not installed here, and for
ImageNet (a download):

- `ImageFolder`: a synthetic 10-class set of 32 RGB PIL images of 40x48 pixels generated from a fixed seed of its own
  (whatever the folder), so `center_crop_arr` resizes and crops as it does ImageNet's.
- `transforms`: the four torchvision transforms train.py composes; `RandomHorizontalFlip` draws one `torch.rand(1)`
  from the global generator per image, as torchvision's does.
- `AutoencoderKL`: diffusers' VAE as train.py uses it: `from_pretrained(name)` (no draw from the global generator:
  diffusers builds the pretrained model on the meta device), `.to(device)`, `.encode(x).latent_dist.sample()`. The
  encoder is a fixed function of the image (an 8x8 patch projection with weights from a seed of its own) to a latent
  of the right shape (4 channels, 1/8 the side); `sample()` draws `torch.randn` of the latent's shape from the global
  generator as diffusers' `DiagonalGaussianDistribution.sample` does (mean + std * noise, the log-variance clamped
  to [-30, 20]). Its parameters require gradients, as the pretrained model's do.
- `PatchEmbed`, `Attention`, `Mlp`: timm's (`timm.models.vision_transformer`), the same layers built in the same
  order (so the same draws at construction), the same forward (attention by `scaled_dot_product_attention`).
"""

from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

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


# ------------------------------------------------------------------------------------------ torchvision.transforms


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class Lambda:
    def __init__(self, lambd):
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.transpose(Image.FLIP_LEFT_RIGHT)
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
    Compose=Compose, Lambda=Lambda, RandomHorizontalFlip=RandomHorizontalFlip, ToTensor=ToTensor, Normalize=Normalize
)

# ------------------------------------------------------------------------------------------- diffusers AutoencoderKL


class DiagonalGaussianDistribution:
    def __init__(self, parameters):
        self.parameters = parameters
        self.mean, self.logvar = torch.chunk(parameters, 2, dim=1)
        self.logvar = torch.clamp(self.logvar, -30.0, 20.0)
        self.std = torch.exp(0.5 * self.logvar)

    def sample(self, generator=None):
        noise = torch.randn(self.mean.shape, generator=generator, device=self.parameters.device, dtype=self.mean.dtype)
        return self.mean + self.std * noise


class AutoencoderKL(nn.Module):
    def __init__(self, latent_channels=4, factor=8):
        super().__init__()
        g = torch.Generator().manual_seed(1234)  # its own: building the pretrained VAE draws nothing global
        fan_in = 3 * factor * factor
        self.factor = factor
        self.weight = nn.Parameter(torch.randn(2 * latent_channels, 3, factor, factor, generator=g) / fan_in**0.5)
        self.bias = nn.Parameter(torch.cat([torch.zeros(latent_channels), torch.full((latent_channels,), -4.0)]))

    @classmethod
    def from_pretrained(cls, name):
        return cls()

    def encode(self, x):
        moments = F.conv2d(x, self.weight, self.bias, stride=self.factor)
        return SimpleNamespace(latent_dist=DiagonalGaussianDistribution(moments))


# ---------------------------------------------------------------------------------- timm.models.vision_transformer


def _pair(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


class PatchEmbed(nn.Module):
    def __init__(
        self, img_size=224, patch_size=16, in_chans=3, embed_dim=768, norm_layer=None, flatten=True, bias=True
    ):
        super().__init__()
        self.img_size, self.patch_size = _pair(img_size), _pair(patch_size)
        self.grid_size = (self.img_size[0] // self.patch_size[0], self.img_size[1] // self.patch_size[1])
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.flatten = flatten
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=self.patch_size, stride=self.patch_size, bias=bias)
        self.norm = norm_layer(embed_dim) if norm_layer else nn.Identity()

    def forward(self, x):
        x = self.proj(x)
        if self.flatten:
            x = x.flatten(2).transpose(1, 2)  # BCHW -> BNC
        return self.norm(x)


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, qk_norm=False, attn_drop=0.0, proj_drop=0.0):
        super().__init__()
        assert dim % num_heads == 0, "dim should be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.q_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim) if qk_norm else nn.Identity()
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        x = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.0)
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU, bias=True, drop=0.0):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features, bias=bias)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop)
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(hidden_features, out_features, bias=bias)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        x = self.drop1(self.act(self.fc1(x)))
        return self.drop2(self.fc2(self.norm(x)))
