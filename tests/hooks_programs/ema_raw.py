"""A hand-written DDP self-distillation loop (DINO's shape) that knows nothing of any recorder: a
student wrapped in DDP and trained by AdamW, and a teacher outside DDP, an EMA copy of the student
(requires_grad False, in no optimizer), whose softened outputs are the student's targets. Written to
train bitwise as ema_lightning.py does, whose LightningModule holds both.

    torchrun --nproc_per_node=2 tests/hooks_programs/ema_raw.py [--slip momentum|init] [--save-dir DIR]

With --save-dir, rank 0 saves the student, the teacher and the optimizer after every step (the others wait at a
barrier), the teacher as updated by that step.
"""

from __future__ import annotations

import argparse
import copy
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "byo_model"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from model import Config, build_datasets, build_optimizer, pin_threads, seed_everything  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402

MOMENTUM, TEMPERATURE = 0.9, 0.5
SMALL = dict(run_dir="", epochs=2, num_samples=256, val_samples=64)


def build_student() -> nn.Module:
    """No buffers and no dropout: the teacher is the student's copy, the same network."""
    return nn.Sequential(nn.Flatten(), nn.Linear(256, 32), nn.ReLU(), nn.Linear(32, 10))


def build_teacher(student: nn.Module) -> nn.Module:
    teacher = copy.deepcopy(student)
    teacher.requires_grad_(False)
    return teacher


def distillation_loss(student_out, teacher_out, y) -> torch.Tensor:
    """Cross-entropy to the teacher's softened outputs, plus the labels'."""
    targets = torch.softmax(teacher_out / TEMPERATURE, dim=-1)
    soft = -(targets * torch.log_softmax(student_out / TEMPERATURE, dim=-1)).sum(dim=-1).mean()
    return soft + nn.functional.cross_entropy(student_out, y)


@torch.no_grad()
def ema_update(teacher: nn.Module, student: nn.Module, momentum: float) -> None:
    for t, s in zip(teacher.parameters(), student.parameters()):
        t.mul_(momentum).add_(s.detach(), alpha=1 - momentum)


def save(path: Path, student, teacher, optimizer, step: int, rank: int) -> None:
    if rank == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {"model": student.state_dict(), "ema": teacher.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save({**state, "step": step}, path)
    dist.barrier()  # no rank goes on while the checkpoint is half written


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--slip", choices=["momentum", "init"])
    p.add_argument("--save-dir", type=Path, help="save a checkpoint after every step (rank 0)")
    args = p.parse_args()
    cfg = Config(**SMALL)
    pin_threads(cfg.threads)
    torch.use_deterministic_algorithms(True)
    seed_everything(cfg.seed)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    student = build_student()
    teacher = build_teacher(student)
    if args.slip == "init":  # the slip: one student layer initialised otherwise, after the teacher's copy
        torch.nn.init.zeros_(student[3].bias)
    seed_everything(cfg.seed)  # as Lightning's DDPStrategy.setup_distributed() resets the seed
    ddp_student = DDP(student)
    optimizer = build_optimizer(student.parameters(), cfg)
    momentum = 0.8 if args.slip == "momentum" else MOMENTUM
    train_set, _ = build_datasets(cfg)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed)
    loader = DataLoader(train_set, batch_size=cfg.batch_size, sampler=sampler)
    step = 0
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            with torch.no_grad():
                teacher_out = teacher(batch.x)
            loss = distillation_loss(ddp_student(batch.x), teacher_out, batch.y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            ema_update(teacher, student, momentum)
            step += 1
            if args.save_dir is not None:
                save(args.save_dir / f"step-{step}.pt", student, teacher, optimizer, step, rank)
            if rank == 0:
                print(f"step {step} loss {loss.item():.8f}", flush=True)
    del ddp_student
    gc.collect()
    dist.barrier()  # no rank leaves while its peer still talks: gloo aborts one that does (SIGABRT)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
