"""A tiny stand-in for nanoGPT's data/shakespeare_char/prepare.py: train.bin, val.bin (uint16 token ids) and
meta.pkl (vocab_size) under DIR/data/<dataset>/, generated from a fixed seed (no download)."""

import os
import pickle

import numpy as np


def prepare(root: str, dataset: str = "tiny_char", vocab_size: int = 65, tokens: int = 4096) -> str:
    data_dir = os.path.join(root, "data", dataset)
    os.makedirs(data_dir, exist_ok=True)
    ids = np.random.default_rng(0).integers(0, vocab_size, size=tokens, dtype=np.uint16)
    n = int(0.9 * len(ids))
    ids[:n].tofile(os.path.join(data_dir, "train.bin"))
    ids[n:].tofile(os.path.join(data_dir, "val.bin"))
    with open(os.path.join(data_dir, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": vocab_size}, f)
    return data_dir
