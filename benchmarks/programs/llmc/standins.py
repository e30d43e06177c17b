"""Stand-ins for what llm.c's train_gpt2.py imports and this machine lacks (not the authors' code):

- `tiktoken`: `get_encoding("gpt2")` gives a byte-level encoding of 256 tokens (token i is byte i, the last one the
  end-of-text token), with the attributes train_gpt2.py reads: `eot_token`, `max_token_value`, `decode`,
  `decode_bytes` (sampling and the tokenizer file are off in the tiny config; nothing draws a random number);
- `write_data`: token shards in llm.c's .bin format (a header of 256 int32: magic 20240520, version 1, the token count;
  then the tokens as uint16), written under work/data/: two training shards and one validation shard.
"""

from __future__ import annotations

import os

import numpy as np

VOCAB = 256
TRAIN_SHARDS = 2
TRAIN_TOKENS = 300  # a shard: 4 micro-batches of 2 ranks x 2 x 16 tokens; the 16 micro-batches read each shard twice
VAL_TOKENS = 200


class Encoding:
    def __init__(self, n: int = VOCAB):
        self.n_vocab = n
        self.max_token_value = n - 1
        self.eot_token = n - 1

    def decode_bytes(self, tokens: list[int]) -> bytes:
        return bytes(t for t in tokens)

    def decode(self, tokens: list[int]) -> str:
        return self.decode_bytes(tokens).decode("latin-1")

    def encode(self, text: str, allowed_special=()) -> list[int]:
        return list(text.encode("latin-1", errors="replace"))


def get_encoding(name: str) -> Encoding:
    return Encoding()


def write_shard(path: str, tokens: np.ndarray) -> None:
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint16).tobytes())


def write_data(work: str) -> None:
    """A repeating pattern with noise from numpy's RandomState(0), so the loss has something to learn."""
    rng = np.random.RandomState(0)
    folder = os.path.join(work, "data")
    os.makedirs(folder, exist_ok=True)

    def tokens(n: int) -> np.ndarray:
        base = (np.arange(n) * 7) % VOCAB
        noise = rng.randint(0, VOCAB, size=n)
        return np.where(rng.rand(n) < 0.3, noise, base)

    for k in range(TRAIN_SHARDS):
        write_shard(os.path.join(folder, f"llmc_train_{k:06d}.bin"), tokens(TRAIN_TOKENS))
    write_shard(os.path.join(folder, "llmc_val_000000.bin"), tokens(VAL_TOKENS))
