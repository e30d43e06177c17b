"""Two ranks (torchrun): a two-tower contrastive loop (CLIP's loss on a tiny scale): each step takes 8 pairs a rank in
2 micro-batches, embeds both towers, all-gathers every rank's features (no gradient through the others', the rank's
own put back in its slot) and computes a symmetric cross-entropy over the similarity matrix; one backward per
micro-batch, one optimizer step. It knows nothing of any recorder. --accumulate picks how the micro-batches meet:

    cached   (default) every micro-batch's features first under no_grad, then each micro-batch again with gradients,
             its loss computed against the cached features of the other (8 rows a rank gathered)
    alone    each micro-batch's loss over its own features (4 rows a rank gathered), halved: what a Trainer's
             accumulate_grad_batches does to the loop above
    local    as cached, the loss built with a world of 1: nothing gathered

    torchrun --nproc_per_node=2 tests/hooks_programs/contrastive_ddp.py [--accumulate cached|alone|local]
"""

from __future__ import annotations

import argparse
import gc

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

MICRO, MICRO_BATCHES, STEPS = 4, 2, 2


class Towers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.image, self.text = nn.Linear(6, 4), nn.Linear(5, 4)

    def forward(self, image, text):
        return F.normalize(self.image(image), dim=-1), F.normalize(self.text(text), dim=-1)


def gathered(features: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Every rank's features, this rank's own (with its gradient) in its slot."""
    if world == 1:
        return features
    slots = [torch.zeros_like(features) for _ in range(world)]
    dist.all_gather(slots, features.detach())
    slots[rank] = features
    return torch.cat(slots)


def contrastive_loss(image, text, rank: int, world: int) -> torch.Tensor:
    image, text = gathered(image, rank, world), gathered(text, rank, world)
    logits = 10.0 * image @ text.T
    labels = torch.arange(len(logits))
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def train_step(model, micro_batches, mode: str, rank: int, world: int) -> None:
    loss_world = 1 if mode == "local" else world
    if mode == "alone":
        for image, text in micro_batches:
            (contrastive_loss(*model(image, text), rank, loss_world) / len(micro_batches)).backward()
        return
    with torch.no_grad():
        cached = [model(image, text) for image, text in micro_batches]
    for j, (image, text) in enumerate(micro_batches):
        fresh = model(image, text)
        images = torch.cat([c[0] for c in cached[:j]] + [fresh[0]] + [c[0] for c in cached[j + 1 :]])
        texts = torch.cat([c[1] for c in cached[:j]] + [fresh[1]] + [c[1] for c in cached[j + 1 :]])
        contrastive_loss(images, texts, rank, loss_world).backward()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--accumulate", choices=("cached", "alone", "local"), default="cached")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(Towers())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(1)
    size = MICRO * MICRO_BATCHES * STEPS * world
    data = TensorDataset(torch.randn(size, 6, generator=g), torch.randn(size, 5, generator=g))
    loader = DataLoader(data, batch_size=MICRO, sampler=DistributedSampler(data, shuffle=False))
    batches = iter(loader)
    for _ in range(STEPS):
        micro_batches = [next(batches) for _ in range(MICRO_BATCHES)]
        train_step(model, micro_batches, args.accumulate, rank, world)
        optimizer.step()
        optimizer.zero_grad()
    del model  # DDP's reducer goes before the group, never joined at interpreter exit (gloo then aborts)
    gc.collect()
    dist.barrier()  # no rank leaves while its peer still talks: gloo aborts one that does (SIGABRT)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
