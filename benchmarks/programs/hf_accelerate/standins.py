"""Stand-ins, in plain torch, for what nlp_example.py imports from accelerate, transformers and datasets (none of
them is installed here, and the example would download bert-base-cased and GLUE MRPC): the loop calls them exactly
as it calls the originals.

- `Accelerator`: prepare() wraps the model in DDP and gives each DataLoader a DistributedSampler (the shuffle of
  the original loader, seed 0) whose epoch advances every time the loader is iterated, as accelerate's prepared
  loaders do; backward(), gather(), print(), device, distributed_type.
- `get_linear_schedule_with_warmup`, `set_seed`: as transformers defines them (Apache-2.0, Copyright 2020 The
  HuggingFace Inc. team).
- `AutoModelForSequenceClassification`: a tiny bag-of-embeddings classifier that takes the tokenizer's dict
  (input_ids, attention_mask, labels) and returns `.loss` and `.logits`, as a transformers model does.
- `load_dataset` / `tokenizer.pad`: synthetic sentence pairs already tokenized (variable lengths), padded to the
  longest in the batch into a dict-like BatchEncoding with `.to(device)`.
- `load_metric("glue", "mrpc")`: accuracy from add_batch() / compute().
"""

from __future__ import annotations

import enum
import os
import random
from types import SimpleNamespace

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

VOCAB = 100


class DistributedType(enum.Enum):
    NO = "NO"
    MULTI_CPU = "MULTI_CPU"
    TPU = "TPU"


class _EpochSampler(DistributedSampler):
    """A DistributedSampler whose epoch advances on every pass, as accelerate's prepared loader sets it."""

    def __iter__(self):
        it = super().__iter__()
        self.set_epoch(self.epoch + 1)
        return it


class Accelerator:
    def __init__(self, fp16: bool = False, cpu: bool = False):
        dist.init_process_group("gloo")
        self.device = torch.device("cpu")
        self.distributed_type = DistributedType.MULTI_CPU
        self.is_main_process = dist.get_rank() == 0

    def prepare(self, *objects):
        return tuple(self._prepare_one(o) for o in objects)

    def _prepare_one(self, obj):
        if isinstance(obj, nn.Module):
            return DDP(obj)
        if isinstance(obj, DataLoader):
            shuffle = not isinstance(obj.sampler, torch.utils.data.SequentialSampler)
            sampler = _EpochSampler(obj.dataset, shuffle=shuffle, seed=0)
            return DataLoader(obj.dataset, batch_size=obj.batch_size, sampler=sampler, collate_fn=obj.collate_fn)
        return obj

    def backward(self, loss):
        loss.backward()

    def gather(self, tensor):
        out = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
        dist.all_gather(out, tensor.contiguous())
        return torch.cat(out)

    def print(self, *args):
        if self.is_main_process:
            print(*args)


def set_seed(seed: int):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step: int):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda, last_epoch)


class TinySequenceClassifier(nn.Module):
    def __init__(self, vocab: int = VOCAB, dim: int = 16, num_labels: int = 2):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.pre_classifier = nn.Linear(dim, dim)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, input_ids, attention_mask, labels=None):
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embeddings(input_ids) * mask).sum(1) / mask.sum(1)
        logits = self.classifier(torch.tanh(self.pre_classifier(pooled)))
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SimpleNamespace(loss=loss, logits=logits)


class AutoModelForSequenceClassification:
    @staticmethod
    def from_pretrained(name: str, return_dict: bool = True):
        return TinySequenceClassifier()


class BatchEncoding(dict):
    def to(self, device):
        for k, v in self.items():
            self[k] = v.to(device)
        return self


class Tokenizer:
    pad_token_id = 0

    def pad(self, examples, padding="longest", max_length=None, return_tensors="pt"):
        longest = max_length or max(len(e["input_ids"]) for e in examples)
        ids = torch.zeros(len(examples), longest, dtype=torch.long)
        mask = torch.zeros(len(examples), longest, dtype=torch.long)
        for i, e in enumerate(examples):
            ids[i, : len(e["input_ids"])] = torch.tensor(e["input_ids"])
            mask[i, : len(e["input_ids"])] = 1
        labels = torch.tensor([e["labels"] for e in examples])
        return BatchEncoding(input_ids=ids, attention_mask=mask, labels=labels)


def load_tokenized_mrpc(train: int, validation: int) -> dict:
    """Sentence pairs as token ids (the label: do the two halves share their first token), from a fixed seed."""
    rng = np.random.default_rng(int(os.environ.get("PROGRAM_DATA_SEED", "0")))

    def example():
        a, b = (
            rng.integers(1, VOCAB, size=int(rng.integers(3, 9))),
            rng.integers(1, VOCAB, size=int(rng.integers(3, 9))),
        )
        label = int(rng.random() < 0.5)
        if label:
            b[0] = a[0]
        return {"input_ids": [int(t) for t in np.concatenate([a, b])], "labels": label}

    return {"train": [example() for _ in range(train)], "validation": [example() for _ in range(validation)]}


class AccuracyMetric:
    def __init__(self):
        self.correct, self.total = 0, 0

    def add_batch(self, predictions, references):
        self.correct += int((predictions == references).sum())
        self.total += len(references)

    def compute(self):
        accuracy, self.correct, self.total = self.correct / max(self.total, 1), 0, 0
        return {"accuracy": accuracy}
