"""Two ranks (torchrun): a model trained by SGD under DDP and an EMA copy of it kept outside DDP, in eval mode,
updated after every step and evaluated (no_grad) on a fixed batch every 2 steps, as ConvNeXt's and DiT's loops keep
one. It knows nothing of any recorder. Each rank seeds seed + rank before building (a seed per rank, as those
programs do): DDP's broadcast makes the replicas equal. The EMA is copied after DDP's wrap (rank 0's weights on every
rank) or, with --ema-before-ddp, before it (each rank's own: rank 1's EMA starts from other weights and the training
is untouched). With --ema-left-in-train-mode, eval() is never called on the EMA (a copy of the model in training
mode, evaluated so, as a copy kept outside the module tree and never switched is). With --snapshots, rank 0 ends by
saving the EMA, the model and a deepcopy of the model made then (as EDM pickles its EMA) and prints each file's
sha256: a recording must leave them as they are without it. With --ema-skips-last-update, the loop leaves the EMA as it
was before the last step (a loop that breaks out before its update at the last step). With --save-dir, rank 0 saves
the model's and the EMA's state_dicts after every 4th step, after the EMA's update, or with --save-before-update before
it (as a Lightning checkpoint callback does, run before the LightningModule's on_train_batch_end).

    torchrun --nproc_per_node=2 tests/hooks_programs/ema_eval.py [--ema-before-ddp] [--ema-left-in-train-mode]
                                                                 [--snapshots] [--ema-skips-last-update]
                                                                 [--save-dir DIR [--save-before-update]]
"""

from __future__ import annotations

import argparse
import copy
import gc
import hashlib
import io
import pickle
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

DECAY = 0.9


def make_ema(model: nn.Module, eval_mode: bool = True) -> nn.Module:
    ema = copy.deepcopy(model).requires_grad_(False)
    return ema.eval() if eval_mode else ema


@torch.no_grad()
def update(ema: nn.Module, model: nn.Module) -> None:
    for e, p in zip(ema.parameters(), model.parameters(), strict=True):
        e.copy_(e * DECAY + p * (1 - DECAY))


def print_snapshots(ema: nn.Module, model: nn.Module) -> None:
    """torch.save (a pickle) of whole modules, and a plain pickle of the EMA (as EDM's snapshot is): the sha256 of
    each file, and of the pickled EMA's tensors with the count of forward hooks it came back with."""
    for name, module in (("ema", ema), ("model", model), ("copy", copy.deepcopy(model))):
        saved = io.BytesIO()
        torch.save(module, saved)
        print(f"{name} saved {hashlib.sha256(saved.getvalue()).hexdigest()}", flush=True)
    # a plain pickle's bytes hold storage addresses (torch's legacy format): its unpickled tensors are what is compared
    back = pickle.loads(pickle.dumps(ema))
    tensors = b"".join(t.numpy().tobytes() for t in back.state_dict().values())
    print(f"ema pickled {hashlib.sha256(tensors).hexdigest()} hooks {len(back._forward_hooks)}", flush=True)


def save(ema: nn.Module, model: nn.Module, step: int, save_dir: Path) -> None:
    torch.save({"model": model.state_dict(), "ema": ema.state_dict()}, save_dir / f"step-{step}.pt")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ema-before-ddp", action="store_true", help="copy each rank's own weights, before the wrap")
    p.add_argument("--ema-left-in-train-mode", action="store_true", help="never call eval() on the EMA")
    p.add_argument("--snapshots", action="store_true", help="rank 0 saves whole modules at the end")
    p.add_argument("--ema-skips-last-update", action="store_true", help="no EMA update after the last step")
    p.add_argument("--save-dir", type=Path, help="rank 0 saves the model and the EMA after every 4th step")
    p.add_argument("--save-before-update", action="store_true", help="the save runs before the EMA's update")
    args = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)  # a seed per rank
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    ema = make_ema(model) if args.ema_before_ddp else None
    ddp = DistributedDataParallel(model)
    if ema is None:
        ema = make_ema(model, eval_mode=not args.ema_left_in_train_mode)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(1 + rank)
    held_out = torch.randn(16, 6, generator=torch.Generator().manual_seed(99))
    for step in range(1, 9):
        x, y = torch.randn(8, 6, generator=data), torch.randint(0, 3, (8,), generator=data)
        loss = nn.functional.cross_entropy(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        saving = args.save_dir is not None and rank == 0 and step % 4 == 0
        if saving and args.save_before_update:
            save(ema, model, step, args.save_dir)
        if not (args.ema_skips_last_update and step == 8):
            update(ema, model)
        if saving and not args.save_before_update:
            save(ema, model, step, args.save_dir)
        if step % 2 == 0:
            with torch.no_grad():
                accuracy = (ema(held_out).argmax(-1) == 0).float().mean().item()
            if rank == 0:
                print(f"step {step} loss {loss.item():.8f} ema {accuracy:.4f}", flush=True)
    if args.snapshots and rank == 0:
        print_snapshots(ema, model)
    del ddp
    gc.collect()  # DDP's reducer goes before the group, never joined at interpreter exit (gloo then aborts)
    dist.barrier()  # no rank leaves while its peer still talks: gloo aborts one that does (SIGABRT)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
