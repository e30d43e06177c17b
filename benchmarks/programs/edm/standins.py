"""Stand-ins for what NVlabs/edm's training path imports and this machine lacks (click, psutil, the image
files), written for the corpus's tiny CPU run. Not part of the authors' code."""

from __future__ import annotations

import os
import resource

import numpy as np
from training.dataset import Dataset

NUM_IMAGES = 32  # the synthetic image set: 32 RGB images of 8 x 8 pixels, uint8
RESOLUTION = 8
IMAGE_SEED = 123  # drawn in-process from this fixed seed, the same on every rank and on both sides


class ClickException(Exception):
    """click.ClickException: an error train.py reports to the user."""


class click:  # noqa: N801 - the name train.py uses
    ClickException = ClickException


class _MemoryInfo:
    def __init__(self, rss: int):
        self.rss = rss


class _Process:
    def __init__(self, pid: int):
        self.pid = pid

    def memory_info(self) -> _MemoryInfo:
        return _MemoryInfo(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


class psutil:  # noqa: N801 - the name training_loop.py uses
    Process = _Process


def synthetic_images(num_images: int = NUM_IMAGES, resolution: int = RESOLUTION) -> np.ndarray:
    """The image set, NCHW uint8: smooth random blobs (a low-resolution draw upsampled) plus a little noise."""
    rnd = np.random.RandomState(IMAGE_SEED)
    low = rnd.randint(0, 256, size=[num_images, 3, 2, 2]).astype(np.float64)
    images = np.kron(low, np.ones([1, 1, resolution // 2, resolution // 2]))
    images += rnd.normal(0, 16, size=images.shape)
    return np.clip(np.rint(images), 0, 255).astype(np.uint8)


class SyntheticImageFolderDataset(Dataset):
    """training.dataset.ImageFolderDataset with the reading swapped: the images are generated in-process from a
    fixed seed instead of read from a directory or zip; `path` only names the set. The base class (max_size,
    xflip, labels, caching) is the authors' Dataset, unchanged."""

    def __init__(self, path, resolution=None, use_pyspng=True, **super_kwargs):
        self._path = path
        self._images = synthetic_images()
        name = os.path.splitext(os.path.basename(self._path))[0]
        raw_shape = list(self._images.shape)
        if resolution is not None and (raw_shape[2] != resolution or raw_shape[3] != resolution):
            raise OSError("Image files do not match the specified resolution")
        super().__init__(name=name, raw_shape=raw_shape, **super_kwargs)

    def _load_raw_image(self, raw_idx):
        return self._images[raw_idx].copy()

    def _load_raw_labels(self):
        return None  # no dataset.json: unconditional


def drop_forward_hooks(module):
    """Not a stand-in: a workaround (edm round 2). Under `ddp-parity record` the hooks leave a forward hook that is a
    local function on the EMA copy, and pickling the snapshot then raises (Can't pickle local object
    '_hook_copy.<locals>.after_copy_forward'). The authors' modules register no hook of their own that outlives a
    call (print_module_summary removes its own), so the pickled snapshot is the same without them."""
    for m in module.modules():
        m._forward_hooks.clear()
        m._forward_pre_hooks.clear()
    return module
