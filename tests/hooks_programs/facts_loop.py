"""One process: a small network with dropout trained by SGD with momentum and a StepLR, on batches it
draws by hand. It knows nothing of any recorder. Each flag changes one fact:

    --draw-before K     draws one number from the global generator before step K's forward
    --loss-scale-at K   scales step K's loss by 1.0001 (the loss parts, the generator does not)
    --seed-twice        seeds the global generator twice before building the model (nothing drawn between)
    --data-seed N       seeds the generator of its batches with N (1 by default)
    --eval-left-on K    after step K evaluates in eval mode and never calls model.train() again; its loss is an
                        nn.Module (as Tacotron2's), called on the network's output
    --loss-module       the loss an nn.Module (nn.CrossEntropyLoss) with no evaluation left on, against the loss
                        function the loop calls otherwise
    --evaluate-isolated iterates an evaluation DataLoader before training, the generator's state put back after
                        it (as Lightning's isolate_rng does around its sanity check)
    --save CKPT         after its steps, saves model, optimizer, scheduler, RNG state and step count
    --resume CKPT       first loads CKPT and restores what --restore names (model,optimizer,scheduler,rng)
    --odd-save CKPT     saves a checkpoint under a key that cannot be lowered (its lower() raises)
    --out WEIGHTS       saves its final weights
    --lr-by-hand WHEN   sets the lr by hand (a warm-up of 2 steps, then halved each step; the StepLR never
                        stepped) from its step count: "before" each optimizer.step(), from the steps done, or
                        "after" it, from the count advanced (the first step runs at the lr the SGD was built with)
    --scheduler-never-stepped builds the StepLR as always but never calls its step(): the lr stays 0.1
    --scheduler-at-end  steps the StepLR once, after its last step (as at an epoch's end), never per step

It prints each step's loss.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


class OddKey(str):
    """A key that cannot be lowered: what looks inside a checkpoint must cope."""

    def lower(self):
        raise RuntimeError("an OddKey is not lowered")


def set_rate(optimizer, done: int) -> None:
    """The rate of the step after `done` steps: 0.1 warmed up over 2 steps, then halved each step."""
    for group in optimizer.param_groups:
        group["lr"] = 0.1 * min(1.0, (done + 1) / 2) * 0.5 ** max(0, done - 1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--draw-before", type=int, default=0)
    p.add_argument("--loss-scale-at", type=int, default=0)
    p.add_argument("--save")
    p.add_argument("--resume")
    p.add_argument("--restore", default="model,optimizer,scheduler,rng")
    p.add_argument("--lr-by-hand", choices=("before", "after"))
    p.add_argument("--scheduler-never-stepped", action="store_true")
    p.add_argument("--scheduler-at-end", action="store_true")
    p.add_argument("--seed-twice", action="store_true")
    p.add_argument("--data-seed", type=int, default=1)
    p.add_argument("--odd-save")
    p.add_argument("--out")
    p.add_argument("--evaluate-isolated", action="store_true")
    p.add_argument("--eval-left-on", type=int, default=0)
    p.add_argument("--loss-module", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.seed_twice:
        torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.5), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    start = 0
    if args.resume:
        ckpt = torch.load(args.resume, weights_only=False)
        restore = args.restore.split(",")
        if "model" in restore:
            model.load_state_dict(ckpt["model"])
        if "optimizer" in restore:
            optimizer.load_state_dict(ckpt["optimizer"])
        if "scheduler" in restore:
            scheduler.load_state_dict(ckpt["scheduler"])
        if "rng" in restore:
            torch.set_rng_state(ckpt["rng"])
        start = ckpt["step"]
    if args.evaluate_isolated:
        state = torch.get_rng_state()
        model.eval()
        with torch.no_grad():  # its iterator draws from the global generator
            for (batch,) in torch.utils.data.DataLoader(
                torch.utils.data.TensorDataset(torch.zeros(4, 6)), batch_size=2
            ):
                model(batch)
        model.train()
        torch.set_rng_state(state)
    g = torch.Generator().manual_seed(args.data_seed + start)
    criterion = nn.CrossEntropyLoss() if args.eval_left_on or args.loss_module else nn.functional.cross_entropy
    for step in range(1, args.steps + 1):
        x, y = torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)
        if args.lr_by_hand == "before":
            set_rate(optimizer, step - 1)
        if step == args.draw_before:
            torch.rand(1)  # a draw the other side does not make
        loss = criterion(model(x), y)
        if step == args.loss_scale_at:
            loss = loss * 1.0001
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if args.lr_by_hand == "after":
            set_rate(optimizer, step)
        elif args.lr_by_hand is None and not (args.scheduler_never_stepped or args.scheduler_at_end):
            scheduler.step()
        print(f"step {step} loss {loss.item():.8f}", flush=True)
        if step == args.eval_left_on:  # an evaluation that leaves the model in eval mode (no model.train() after)
            model.eval()
            with torch.no_grad():
                model(torch.zeros(2, 6))
    if args.scheduler_at_end:
        scheduler.step()
    if args.save:
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}
        torch.save({**state, "rng": torch.get_rng_state(), "step": start + args.steps}, args.save)
    if args.odd_save:
        torch.save({OddKey("extra"): 1}, args.odd_save)
    if args.out:
        torch.save(model.state_dict(), args.out)


if __name__ == "__main__":
    main()
