"""Token shards in the program's own format (a header of 256 int32: magic 20240520, version 1, token count; then
the tokens as uint16), written under work/data/fineweb10B/ where train_gpt2.py's defaults look for them."""

import os

import numpy as np

VOCAB = 64
TRAIN_SHARDS = 2
TRAIN_TOKENS = 300  # a shard; the run's 8 steps read 1056 tokens: each shard about twice ("epochs")
VAL_TOKENS = 200


def write_shard(path: str, tokens: np.ndarray) -> None:
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint16).tobytes())


def write_data(work: str) -> None:
    """A repeating pattern with noise from numpy's RandomState(0), so the loss has something to learn."""
    rng = np.random.RandomState(0)
    folder = os.path.join(work, "data", "fineweb10B")
    os.makedirs(folder, exist_ok=True)

    def tokens(n: int) -> np.ndarray:
        base = (np.arange(n) * 7) % VOCAB
        noise = rng.randint(0, VOCAB, size=n)
        return np.where(rng.rand(n) < 0.3, noise, base)

    for k in range(TRAIN_SHARDS):
        write_shard(os.path.join(folder, f"fineweb_train_{k + 1:06d}.bin"), tokens(TRAIN_TOKENS))
    write_shard(os.path.join(folder, "fineweb_val_000000.bin"), tokens(VAL_TOKENS))
