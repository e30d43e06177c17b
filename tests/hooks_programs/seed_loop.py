"""A loop that seeds the global generator, builds its model, and with --reseed seeds again after the build (as
Lightning's DDP setup re-seeds every rank); its DataLoader shuffles from the global generator. It knows nothing
of any recorder.

With --evals K its samples carry noise from the global generator and it evaluates K times after step 2.
With --seed-twice it seeds once more before the build, nothing drawn between (a seed_everything Lightning's DDP
setup repeats before configure_model builds the model): the same stream, seeds [s, s] recorded where [s] was.
With --seed-first N it seeds N before the seed (the seeds [N, s] where [s] was: the same last seed).
With --loss-times K its backward root is K × the loss (a loss not divided by the accumulation).
With --peek-val it iterates a validation loader once before training (as Lightning's sanity check does): the
iterator draws its base seed from the global generator, so the shuffle after it draws other numbers.
With --draw-weights its loader does not shuffle, and per-sample loss weights are drawn once from the global
generator before the first step (as an RL loop samples its rollout's actions before its updates): nothing draws
between the steps, and what was drawn before step 1 reaches only the loss.
With --no-shuffle its loader keeps the data's order (the iterator still draws its base seed); with
--label-smoothing X its loss smooths the labels (a loss function built otherwise, as class weights left out).
With --grads-by-hand it sets its gradients itself (torch.autograd.grad, assigned to each parameter's .grad, as a
meta-learning loop does): no backward runs, so the hooks record no loss (meta.json `unrecorded`).
With --loss-div K its loss is divided by K before backward (as a loss divided by an accumulation count).
With --ddp it trains its model under DistributedDataParallel in a process group of one rank (so that the hooks'
module watch, which follows the model DDP holds, sees its calls).

    python tests/hooks_programs/seed_loop.py [--reseed] [--seed-twice] [--seed-first N] [--loss-times K]
        [--peek-val] [--draw-weights] [--no-shuffle] [--label-smoothing X] [--grads-by-hand] [--ddp]
        [--loss-div K] [--seed N] [--lr LR] [--evals K]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Noisy(torch.utils.data.Dataset):
    """Each sample with noise drawn from the global generator (a random augmentation)."""

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        x, y = self.data[i]
        return x + 0.01 * torch.randn_like(x), y


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--reseed", action="store_true")
    p.add_argument("--seed-twice", action="store_true")
    p.add_argument("--seed-first", type=int)
    p.add_argument("--loss-times", type=float, default=1.0)
    p.add_argument("--peek-val", action="store_true")
    p.add_argument("--draw-weights", action="store_true")
    p.add_argument("--no-shuffle", action="store_true")
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--grads-by-hand", action="store_true")
    p.add_argument("--ddp", action="store_true")
    p.add_argument("--loss-div", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--evals", type=int, default=0, help="after step 2, iterate an evaluation loader this many times")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.seed_first is not None:
        torch.manual_seed(args.seed_first)
    torch.manual_seed(args.seed)
    if args.seed_twice:
        torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    if args.reseed:
        torch.manual_seed(args.seed)  # after the build: the shuffle below draws from the seed, not after the weights
    if args.ddp:  # one rank, rendezvous through a file: no port to pick
        store = os.path.join(tempfile.mkdtemp(), "store")
        torch.distributed.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
        model = nn.parallel.DistributedDataParallel(model)
    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(32, 6, generator=g), torch.randint(0, 3, (32,), generator=g))
    loader = DataLoader(
        Noisy(data) if args.evals else data, batch_size=4, shuffle=not (args.draw_weights or args.no_shuffle)
    )
    if args.peek_val:
        with torch.no_grad():
            model(next(iter(DataLoader(data, batch_size=8)))[0])
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    batches = iter(loader)  # the iterator draws its base seed here
    weights = torch.rand(32) if args.draw_weights else None  # drawn once, before the first step
    for step, (x, y) in enumerate(batches, start=1):
        if weights is None:
            loss = args.loss_times * nn.functional.cross_entropy(model(x), y, label_smoothing=args.label_smoothing)
        else:
            w = weights[(step - 1) * 4 : step * 4]
            loss = args.loss_times * (w * nn.functional.cross_entropy(model(x), y, reduction="none")).mean()
        if args.loss_div != 1.0:
            loss = loss / args.loss_div
        optimizer.zero_grad()
        if args.grads_by_hand:  # no backward: the gradients computed and set by the loop itself
            params = list(model.parameters())
            for param, grad in zip(params, torch.autograd.grad(loss, params)):
                param.grad = grad
        else:
            loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.8f}", flush=True)
        for _ in range(args.evals if step == 2 else 0):  # each iterator draws its base seed from the global generator
            with torch.no_grad():
                model(next(iter(DataLoader(data, batch_size=8)))[0])
        if step == 4:
            break
    if args.ddp:
        del model, optimizer  # the wrapper freed before its group (ddp_parity.destroy_process_group's rule)
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
