"""A hand-written DDP loop that knows nothing of any recorder, with gradient accumulation and an
evaluation of its own between micro-batches: batches drawn by hand from the global generator seeded
1337 + rank (as nanoGPT's get_batch draws), two micro-batches a step. Rank 0 prints its losses and the
evaluation's, and saves its final weights (--save).

    torchrun --nproc_per_node=2 tests/hooks_programs/eval_loop.py --save W.pt [--eval STEP:MICRO]
        [--eval-ranks 0] [--eval-seed N] [--eval-from-training] [--zero-before-eval] [--extra-buffer]
        [--sync last|every|never] [--batchnorm] [--eval-per-rank] [--eval-in-train-mode]
        [--head outside|inside] [--eval-grad-on] [--shards] [--data-rank0]

--eval STEP:MICRO evaluates after STEP optimizer steps and MICRO micro-batches of the next (under eval()
and torch.no_grad(), two batches of its own generator seeded --eval-seed, or of the training's global
generator with --eval-from-training); --zero-before-eval drops the accumulated gradients first (as
Lightning does before validating); --extra-buffer keeps a table the model never reads as a buffer. An
--eval of STEPS:0 evaluates after the last step. --batchnorm puts a BatchNorm1d after the first layer;
--eval-per-rank seeds each rank's evaluation batches with --eval-seed + rank (each rank its own share, as
a DistributedSampler over the validation set gives); --eval-in-train-mode leaves out model.eval() (the slip).
--head gives the model a head it holds but its forward does not call (as the annotated Transformer's generator):
DDP wraps a module of the steps holding the model (a LightningModule's place), whose forward calls the model and,
with `inside`, the head too; with `outside` the loop applies the head to DDP's output itself, in training and in
evaluation. --eval-grad-on evaluates in eval() with gradients on (no torch.no_grad).
--sync says which micro-batches' backward DDP all-reduces: the last of each step (the default, as nanoGPT
sets require_backward_grad_sync), every one, or none (a no_sync left on: each rank steps on its own gradients).
--shards reads the training batches from one fixed table instead, each rank its own rows (a loader that shards a
file by rank, as llm.c's does: micro-batch i of rank r at rows (i * world + r) * BATCH); --data-rank0 makes every rank
read rank 0's rows (the slip of a loader given its rank from an environment variable the launcher does not set).
"""

from __future__ import annotations

import argparse
import gc

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS, MICRO, BATCH, EVAL_BATCH, FEATURES = 4, 2, 8, 5, 8


def get_batch(rows: int, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(rows, FEATURES, generator=generator)
    return x, x.sum(dim=1, keepdim=True).sin()


class Headed(torch.nn.Module):
    """A body and a head it holds, its forward the body's alone (the head applied by whoever calls it)."""

    def __init__(self, norm: list):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), *norm, torch.nn.Tanh())
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Steps(torch.nn.Module):
    """What DDP wraps where the model has a head: the model, its forward calling the head too with `inside`."""

    def __init__(self, model: Headed, inside: bool):
        super().__init__()
        self.model, self.inside = model, inside

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x)
        return self.model.head(out) if self.inside else out


def predict(ddp_model: DDP, x: torch.Tensor, head: str | None) -> torch.Tensor:
    out = ddp_model(x)
    return ddp_model.module.model.head(out) if head == "outside" else out


def evaluate(
    ddp_model: DDP, generator: torch.Generator | None, train_mode: bool = False, head: str | None = None,
    grad_on: bool = False,
) -> float:  # fmt: skip
    if not train_mode:
        ddp_model.eval()
    losses = []
    with torch.set_grad_enabled(grad_on):
        for _ in range(2):
            x, y = get_batch(EVAL_BATCH, generator)
            losses.append(torch.nn.functional.mse_loss(predict(ddp_model, x, head), y).item())
    ddp_model.train()
    return sum(losses) / len(losses)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--save", required=True)
    p.add_argument("--eval", default=None, help="STEP:MICRO")
    p.add_argument("--eval-ranks", default="all")
    p.add_argument("--eval-seed", type=int, default=1)
    p.add_argument("--eval-from-training", action="store_true")
    p.add_argument("--zero-before-eval", action="store_true")
    p.add_argument("--extra-buffer", action="store_true")
    p.add_argument("--sync", choices=("last", "every", "never"), default="last")
    p.add_argument("--batchnorm", action="store_true")
    p.add_argument("--eval-per-rank", action="store_true")
    p.add_argument("--eval-in-train-mode", action="store_true")
    p.add_argument("--head", choices=("outside", "inside"), default=None)
    p.add_argument("--eval-grad-on", action="store_true")
    p.add_argument("--shards", action="store_true")
    p.add_argument("--data-rank0", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    norm = [torch.nn.BatchNorm1d(16)] if args.batchnorm else []
    if args.head:
        model = Headed(norm)
    else:
        model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), *norm, torch.nn.Tanh(), torch.nn.Linear(16, 1))
    if args.extra_buffer:
        model.register_buffer("table", torch.arange(4.0))
    ddp_model = DDP(Steps(model, args.head == "inside") if args.head else model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1337 + rank)
    world, data_rank = dist.get_world_size(), 0 if args.data_rank0 else rank
    table = get_batch(STEPS * MICRO * world * BATCH, torch.Generator().manual_seed(5)) if args.shards else None
    at = tuple(int(v) for v in args.eval.split(":")) if args.eval else None
    evaluates = at is not None and args.eval_ranks in ("all", str(rank))

    def evaluate_here(step: int, micro: int) -> None:
        if args.zero_before_eval:
            optimizer.zero_grad(set_to_none=True)
        seed = args.eval_seed + (rank if args.eval_per_rank else 0)
        generator = None if args.eval_from_training else torch.Generator().manual_seed(seed)
        said = evaluate(ddp_model, generator, args.eval_in_train_mode, args.head, args.eval_grad_on)
        if rank == 0:  # rank 0 talks: two ranks' lines on one pipe can interleave
            print(f"eval at {step}:{micro}: {said!r}", flush=True)

    for step in range(STEPS):
        for micro in range(MICRO):
            if evaluates and (step, micro) == at:
                evaluate_here(step, micro)
            if table is not None:
                at_row = ((step * MICRO + micro) * world + data_rank) * BATCH
                x, y = (t[at_row : at_row + BATCH] for t in table)
            else:
                x, y = get_batch(BATCH)
            ddp_model.require_backward_grad_sync = args.sync == "every" or (args.sync == "last" and micro == MICRO - 1)
            loss = torch.nn.functional.mse_loss(predict(ddp_model, x, args.head), y) / MICRO
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if rank == 0:
            print(f"step {step + 1} loss {loss.item()!r}", flush=True)
    if evaluates and at == (STEPS, 0):
        evaluate_here(STEPS, 0)
    if rank == 0:
        torch.save(model.state_dict(), args.save)
    ddp_model = None  # DDP's reducer goes before the group, never joined at interpreter exit (gloo then aborts)
    gc.collect()
    dist.barrier()  # no rank leaves while its peer still talks: gloo aborts one that does (SIGABRT)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
