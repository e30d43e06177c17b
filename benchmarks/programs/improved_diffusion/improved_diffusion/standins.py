"""Stand-ins for what openai/improved-diffusion takes from packages not installed here, and for its data set (a
download):

- `blobfile` (imported as `bf`): the calls the training loop makes (`BlobFile`, `join`, `dirname`, `basename`,
  `listdir`, `isdir`, `exists`), on local files.
- `write_images(data_dir)`: a synthetic image folder (16 RGB PNG files of 20x24 pixels from a fixed seed of its own,
  two classes named in the files' first part before an underscore, as `load_data(class_cond=True)` reads), so
  `ImageDataset` opens, box-downsamples, resizes and crops them as it does the authors' image sets.

mpi4py is not stood in for: its uses (the ranks, the shards, the rank-0 load) read torch.distributed instead under
torchrun (env://), each changed line marked in the file that had it.
"""

import os
from types import SimpleNamespace

import numpy as np
from PIL import Image

bf = SimpleNamespace(
    BlobFile=open,
    join=os.path.join,
    dirname=os.path.dirname,
    basename=os.path.basename,
    listdir=os.listdir,
    isdir=os.path.isdir,
    exists=os.path.exists,
)


def write_images(data_dir, n=16, height=20, width=24):
    """n PNG files under data_dir (made if missing); the same pixels every time (a generator of their own)."""
    os.makedirs(data_dir, exist_ok=True)
    rng = np.random.default_rng(1234)
    pixels = rng.integers(0, 256, size=(n, height, width, 3), dtype=np.uint8)
    for i, p in enumerate(pixels):
        Image.fromarray(p).save(os.path.join(data_dir, f"class{i % 2}_{i:03d}.png"))
    return data_dir
