"""Stand-ins for what the KAIR training path imports but this environment lacks (not KAIR's code):

- `cv2` (OpenCV): the calls `utils/utils_image.py` makes, read and written through PIL with the same results for the
  8-bit grayscale and RGB PNGs used here (cv2.imread gives BGR, so the RGB image is reversed to BGR as OpenCV does).
- `torchvision`: imported by `models/loss.py` for its VGG perceptual loss only, which the plain model with an L1 loss
  never builds; any use raises.
- `write_images`: the tiny data set, grayscale PNGs drawn from numpy's generator with a fixed seed (the `prepare`
  step of the corpus), in place of BSD400 / BSD68.
"""

from __future__ import annotations

import os
import types

import numpy as np
from PIL import Image


def _imread(path, flags=1):
    img = Image.open(path)
    if flags == 0:  # cv2.IMREAD_GRAYSCALE
        return np.array(img.convert("L"))
    arr = np.array(img)  # cv2.IMREAD_UNCHANGED: a grayscale file stays HxW
    if arr.ndim == 3:
        arr = np.ascontiguousarray(arr[:, :, ::-1])  # RGB -> BGR as OpenCV reads
    return arr


def _cvtColor(img, code):
    if code == COLOR_GRAY2RGB:
        return np.stack([img, img, img], axis=2)
    if code in (COLOR_BGR2RGB, COLOR_RGB2BGR):
        return np.ascontiguousarray(img[:, :, ::-1])
    raise NotImplementedError(f"cv2 stand-in: cvtColor code {code}")


def _imwrite(path, img):
    img = np.asarray(img)
    if img.ndim == 3:
        img = img[:, :, ::-1]  # BGR -> RGB for PIL
    Image.fromarray(np.ascontiguousarray(img)).save(path)
    return True


IMREAD_GRAYSCALE, IMREAD_UNCHANGED = 0, -1
COLOR_GRAY2RGB, COLOR_BGR2RGB, COLOR_RGB2BGR = 8, 4, 4

cv2 = types.SimpleNamespace(
    imread=_imread,
    imwrite=_imwrite,
    cvtColor=_cvtColor,
    IMREAD_GRAYSCALE=IMREAD_GRAYSCALE,
    IMREAD_UNCHANGED=IMREAD_UNCHANGED,
    COLOR_GRAY2RGB=COLOR_GRAY2RGB,
    COLOR_BGR2RGB=COLOR_BGR2RGB,
    COLOR_RGB2BGR=COLOR_RGB2BGR,
)


class _Missing:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        raise NotImplementedError(f"{self._name}.{attr}: not installed here (only the VGG perceptual loss uses it)")


torchvision = _Missing("torchvision")


def write_images(root: str, n_train: int = 16, n_test: int = 2, size: int = 24, seed: int = 0) -> None:
    """Grayscale PNGs, size x size, smooth shapes plus texture, under ROOT/trainH and ROOT/testH."""
    rng = np.random.RandomState(seed)
    for folder, n in (("trainH", n_train), ("testH", n_test)):
        os.makedirs(os.path.join(root, folder), exist_ok=True)
        for i in range(n):
            yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
            cx, cy, r = rng.uniform(4, size - 4), rng.uniform(4, size - 4), rng.uniform(3, size / 2)
            img = 60.0 + 120.0 * ((xx - cx) ** 2 + (yy - cy) ** 2 < r * r) + rng.normal(0, 20, (size, size))
            img = np.clip(img, 0, 255).astype(np.uint8)
            Image.fromarray(img).save(os.path.join(root, folder, f"{i:03d}.png"))
