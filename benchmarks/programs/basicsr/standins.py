"""Stand-ins for what BasicSR imports and this machine lacks (not the authors' code): the few OpenCV calls of its
training and PSNR path (`cv2.imdecode`, `cv2.flip` in place, `cv2.cvtColor`, `cv2.imwrite`), torchvision's `normalize`
and `make_grid`, and names imported at module level but never reached here (the DCN ops, the VGG perceptual loss,
NIQE), each raising if used; `write_data`, the synthetic paired LR/HR images (in place of DIV2K and Set5).

No stand-in draws a random number: BasicSR's random crops and flips draw from Python's `random` in its own
`data/transforms.py`, as with the real OpenCV."""

from __future__ import annotations

import io
import os
import types

import numpy as np
import torch
from PIL import Image

SCALE = 2
N_TRAIN = 8
N_VAL = 2
HR = 24  # HR 24 x 24, LR 12 x 12; gt_size 16 crops 16 x 16 / 8 x 8 patches


def write_data(root: str) -> None:
    """root/{train,val}/{HR,LR}/NNNN.png: RGB images from numpy's RandomState(0) (smooth colour gradients plus a disc
    plus noise), the LR the 2 x 2 box average of the HR (a stand-in for MATLAB's bicubic), names alike in HR and LR
    (`filename_tmpl: '{}'`)."""
    rng = np.random.RandomState(0)
    yy, xx = np.mgrid[0:HR, 0:HR] / (HR - 1.0)
    for split, n in (("train", N_TRAIN), ("val", N_VAL)):
        for sub in ("HR", "LR"):
            os.makedirs(os.path.join(root, split, sub), exist_ok=True)
        for k in range(n):
            a, b, c = rng.uniform(0, 255, size=(3, 3))
            img = (
                a[None, None] * yy[..., None] + b[None, None] * xx[..., None] + c[None, None] * (1 - yy * xx)[..., None]
            )
            cy, cx, r = rng.randint(4, HR - 4), rng.randint(4, HR - 4), rng.randint(3, 7)
            img[(np.mgrid[0:HR, 0:HR][0] - cy) ** 2 + (np.mgrid[0:HR, 0:HR][1] - cx) ** 2 < r * r] = rng.uniform(
                0, 255, 3
            )
            img = img / 3.0 + rng.normal(0, 8, size=img.shape)
            hr = np.clip(img, 0, 255).astype(np.uint8)
            lr = hr.reshape(HR // SCALE, SCALE, HR // SCALE, SCALE, 3).astype(np.float64).mean(axis=(1, 3))
            lr = np.clip(np.round(lr), 0, 255).astype(np.uint8)
            Image.fromarray(hr).save(os.path.join(root, split, "HR", f"{k:04d}.png"))
            Image.fromarray(lr).save(os.path.join(root, split, "LR", f"{k:04d}.png"))


# --- OpenCV ---------------------------------------------------------------------------------------------------------
class _CV2:
    IMREAD_COLOR = 1
    IMREAD_GRAYSCALE = 0
    IMREAD_UNCHANGED = -1
    COLOR_BGR2RGB = 4
    COLOR_RGB2BGR = 4
    INTER_CUBIC = 2

    @staticmethod
    def imdecode(buf, flag):
        """uint8 HWC in BGR order for IMREAD_COLOR (what cv2.imdecode returns), HW for grayscale."""
        img = Image.open(io.BytesIO(np.asarray(buf).tobytes()))
        if flag == 0:
            return np.array(img.convert("L"))
        if flag == 1:
            return np.ascontiguousarray(np.array(img.convert("RGB"))[..., ::-1])
        arr = np.array(img)
        return np.ascontiguousarray(arr[..., ::-1]) if arr.ndim == 3 else arr

    @staticmethod
    def flip(src, code, dst=None):
        """cv2.flip: 1 horizontal, 0 vertical, -1 both; written into dst (in place when dst is src)."""
        out = src[:, ::-1] if code == 1 else src[::-1] if code == 0 else src[::-1, ::-1]
        out = out.copy()
        if dst is None:
            return out
        dst[...] = out
        return dst

    @staticmethod
    def cvtColor(img, code):
        return np.ascontiguousarray(img[..., ::-1])  # BGR <-> RGB: the channels reversed

    @staticmethod
    def imwrite(path, img, params=None):
        arr = img[..., ::-1] if img.ndim == 3 else img
        Image.fromarray(np.ascontiguousarray(arr)).save(path)
        return True

    def __getattr__(self, name):
        raise NotImplementedError(f"cv2.{name} is not stood in for (OpenCV is not installed)")


cv2 = _CV2()


# --- torchvision ----------------------------------------------------------------------------------------------------
def normalize(tensor, mean, std, inplace=False):
    """torchvision.transforms.functional.normalize on a CHW tensor."""
    if not inplace:
        tensor = tensor.clone()
    mean = torch.as_tensor(mean, dtype=tensor.dtype).view(-1, 1, 1)
    std = torch.as_tensor(std, dtype=tensor.dtype).view(-1, 1, 1)
    return tensor.sub_(mean).div_(std)


def make_grid(tensor, nrow=8, padding=2, normalize=False, pad_value=0.0):
    """torchvision.utils.make_grid for what tensor2img hands it (a batch of one image: that image)."""
    if tensor.dim() == 4 and tensor.size(0) == 1:
        return tensor[0]
    raise NotImplementedError("make_grid of more than one image is not stood in for")


torchvision = types.SimpleNamespace(__version__="0.0.0-standin", ops=None)


# --- never reached here ---------------------------------------------------------------------------------------------
class ModulatedDeformConvPack(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("basicsr.ops (CUDA extensions) not copied")


def modulated_deform_conv(*args, **kwargs):
    raise NotImplementedError("basicsr.ops (CUDA extensions) not copied")


class VGGFeatureExtractor(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("the VGG perceptual loss needs torchvision's VGG (not installed)")


def calculate_niqe(*args, **kwargs):
    raise NotImplementedError("NIQE needs scipy (not installed)")
