"""The E2E data stood in for: jsonl files of token ids in the format data_utils.FT_Dataset reads
({"context": [...], "completion": [...]} a line), drawn from a fixed seed, under WORK/data."""

from __future__ import annotations

import json
import os
import random

VOCAB = 64  # the tiny card's vocabulary (gpt2_ft.py --model_card gpt2.tiny); 0 is the padding token
N_TRAIN = 62  # not a multiple of the batch (4): FT_Dataset pads the last batch with items drawn from its own rng
N_VALID = 12


def examples(rng: random.Random, n: int) -> list[dict]:
    out = []
    for _ in range(n):
        context = [rng.randrange(1, VOCAB) for _ in range(rng.randint(3, 7))]
        completion = [rng.randrange(1, VOCAB) for _ in range(rng.randint(2, 6))]
        out.append({"context": context, "completion": completion})
    return out


def prepare(work: str) -> None:
    rng = random.Random(0)
    data = os.path.join(work, "data")
    os.makedirs(data, exist_ok=True)
    for name, n in (("train.jsonl", N_TRAIN), ("valid.jsonl", N_VALID)):
        with open(os.path.join(data, name), "w") as f:
            for example in examples(rng, n):
                f.write(json.dumps(example) + "\n")


if __name__ == "__main__":
    import sys

    prepare(sys.argv[1] if len(sys.argv) > 1 else ".")
