"""Hand-written DDP training: the tutorial's script, grown up. The Lightning twin must match it bit for bit.

Launch (CPU: gloo; GPU: NCCL, one process per device):
    torchrun --nproc_per_node=2 raw/train.py --config configs/default.yaml
    python raw/train.py --config configs/default.yaml                     # one plain process, no DDP
    torchrun --nnodes=2 --node_rank=0 --master_addr=127.0.0.1 --master_port=29500 \
        --nproc_per_node=2 raw/train.py --config configs/default.yaml     # node 0 of two (run node 1 too)
Override single keys with LightningCLI's dotted names: --data.batch_size 16 --trainer.max_epochs 1
Resume from the newest complete checkpoint: --resume (or --ckpt_path last); a torchrun restart
(--max-restarts) resumes by itself.
The tutorial's claim, measured: `python raw/train.py --reference` trains one process on the global
batches a DDP run of trainer.devices x trainer.num_nodes ranks sees (compare/run.py --reference).
"""

from __future__ import annotations

import gc
import os
import random
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from tqdm import tqdm

from ddp_parity.config import ConfigError, RunConfig, check_world_size, one_line, parse_raw_config
from ddp_parity.data import build_datasets
from ddp_parity.determinism import set_determinism
from ddp_parity.distributed import init_process_group_from_env
from ddp_parity.faults import maybe_inject_fault
from ddp_parity.model import build_loss, build_net, build_optimizer, build_scheduler
from ddp_parity.runs import RunDirError, check_fresh_run_dir, resolve_run_dir, write_error_file
from ddp_parity.trace import TraceRecorder, param_digest, params_sha256, sampler_facts
from ddp_parity.validation import ExactShardSampler, ValidationMetrics

EXIT_BAD_INPUT = 2

# -----------------------------------------------------------------------------
# distributed setup and teardown


@dataclass
class Dist:
    ddp: bool
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def master(self) -> bool:
        return self.rank == 0


def pick_device(accelerator: str, local_rank: int) -> torch.device:
    """CPU, or this process's accelerator device bound by local rank (torch.accelerator: CUDA, XPU, ...)."""
    if accelerator == "cpu" or not torch.accelerator.is_available():
        if accelerator in ("gpu", "cuda"):
            raise ConfigError(f"`trainer.accelerator` is {accelerator!r} but torch finds no accelerator")
        return torch.device("cpu")
    torch.accelerator.set_device_index(local_rank)
    return torch.device(torch.accelerator.current_accelerator().type, local_rank)


def setup_distributed(accelerator: str) -> Dist:
    """torchrun provides RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT; without them: one plain process."""
    if "RANK" not in os.environ:
        return Dist(False, 0, 0, 1, pick_device(accelerator, 0))
    rank, local_rank, world_size = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    device = pick_device(accelerator, local_rank)  # bind the device before the process group (NCCL needs it)
    backend = dist.get_default_backend_for_device(device)  # nccl on CUDA, gloo on CPU
    init_process_group_from_env(backend)
    return Dist(True, rank, local_rank, world_size, device)


def cleanup_distributed(d: Dist, t: Training | None) -> None:
    """Drop the DDP wrapper first, then the process group. DDP's Reducer holds the group; freed
    last (at interpreter exit, GIL held) it joins gloo's worker threads while one of them waits for
    the GIL to free a finished collective's tensors: a hang at exit, about one run in three here.
    Destroyed through destroy_process_group, the group is released without the GIL."""
    if t is not None:
        t.ddp_model = None
        gc.collect()
    if d.ddp and dist.is_initialized():
        dist.destroy_process_group()


def print0(d: Dist, *args) -> None:
    if d.master:
        print(*args, flush=True)


# -----------------------------------------------------------------------------
# data


def build_train_loader(cfg: RunConfig, train_set, world_size: int, rank: int):
    """DistributedSampler splits the data across ranks (no shuffle=True on the DataLoader: the
    sampler shuffles, seeded like Lightning's injected one). One process uses the same sampler with
    one replica, so its order is what torchrun --nproc_per_node=1 sees."""
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=cfg.seed_everything)
    return DataLoader(train_set, batch_size=cfg.data.batch_size, sampler=sampler, drop_last=cfg.data.drop_last), sampler


class GlobalBatchLoader:
    """--reference: one process steps the N per-rank loaders of a DDP run together, so each step
    trains on the global batch DDP sees (the union of the ranks' batches)."""

    def __init__(self, cfg: RunConfig, train_set, world_size: int):
        self.loaders, self.samplers = zip(
            *(build_train_loader(cfg, train_set, world_size, r) for r in range(world_size))
        )

    def __iter__(self):
        return (list(per_rank) for per_rank in zip(*self.loaders))

    def __len__(self) -> int:
        return len(self.loaders[0])

    def set_epoch(self, epoch: int) -> None:
        for sampler in self.samplers:
            sampler.set_epoch(epoch)


def build_loaders(cfg: RunConfig, d: Dist, reference_world_size: int | None = None):
    train_set, val_set = build_datasets(cfg.data)
    if reference_world_size:
        train_loader = sampler = GlobalBatchLoader(cfg, train_set, reference_world_size)
    else:
        train_loader, sampler = build_train_loader(cfg, train_set, d.world_size, d.rank)
    val_loader = None
    if val_set is not None:
        val_loader = DataLoader(
            val_set, batch_size=cfg.data.batch_size, sampler=ExactShardSampler(val_set, d.world_size, d.rank)
        )
    return train_loader, sampler, val_loader


# -----------------------------------------------------------------------------
# model, optimizer, precision


@dataclass
class Training:
    model: torch.nn.Module  # the plain network (what checkpoints hold)
    ddp_model: torch.nn.Module  # what the loop calls: DDP-wrapped, or the network itself
    optimizer: torch.optim.Optimizer
    scheduler: object
    scaler: torch.amp.GradScaler | None
    autocast_dtype: torch.dtype | None
    init_params_sha256: str  # this rank's weights as built, before DDP's broadcast


def build_training(cfg: RunConfig, d: Dist) -> Training:
    model = build_net(cfg.model).to(d.device)
    init_digest = params_sha256(model)
    # DDP broadcasts rank 0's parameters at construction, so every replica starts identical
    device_ids = [d.local_rank] if d.device.type == "cuda" else None
    ddp_model = DDP(model, device_ids=device_ids) if d.ddp else model
    optimizer = build_optimizer(model.parameters(), cfg.model)
    scheduler = build_scheduler(optimizer, cfg.model)
    precision = cfg.trainer.precision
    autocast_dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(d.device.type) if precision == "16-mixed" else None
    return Training(model, ddp_model, optimizer, scheduler, scaler, autocast_dtype, init_digest)


def autocast(t: Training, d: Dist):
    # cache_enabled=False: Lightning's MixedPrecision does the same (same numbers, no cast cache)
    return (
        torch.autocast(d.device.type, dtype=t.autocast_dtype, cache_enabled=False)
        if t.autocast_dtype
        else nullcontext()
    )


# -----------------------------------------------------------------------------
# checkpoints: rank 0 writes atomically, everyone waits, everyone loads with map_location


@dataclass
class Progress:
    epoch: int = 0  # the epoch in progress
    batches_done: int = 0  # micro-batches of that epoch already trained
    global_step: int = 0  # optimizer steps taken


def rng_state() -> dict:
    """Every generator's state as plain lists and ints: gathers between ranks and loads with weights_only."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state().tolist(),
        "python": random.getstate(),
        "numpy": [name, keys.tolist(), pos, has_gauss, cached],
        "cuda": [s.tolist() for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    if state["cuda"]:
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def checkpoint_dir(run_dir: Path) -> Path:
    return run_dir / "checkpoints"


def save_checkpoint(
    cfg: RunConfig, d: Dist, t: Training, progress: Progress, run_dir: Path, recorder: TraceRecorder
) -> None:
    """Everything that decides what comes next, every rank's RNG included; rank 0 writes."""
    recorder.flush()  # the trace up to this step is on disk before the checkpoint that resumes after it
    states = [rng_state()]
    if d.ddp:
        states = [None] * d.world_size
        dist.all_gather_object(states, rng_state())
    if d.master:
        payload = {
            "model": t.model.state_dict(),
            "optimizer": t.optimizer.state_dict(),
            "scheduler": t.scheduler.state_dict() if t.scheduler else None,
            "scaler": t.scaler.state_dict() if t.scaler else None,
            "progress": vars(progress).copy(),
            "sampler": {"seed": cfg.seed_everything, "epoch": progress.epoch},
            "world_size": d.world_size,
            "rng": states,
        }
        folder = checkpoint_dir(run_dir)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"step-{progress.global_step:08d}.pt"
        tmp = folder / f".{path.name}.tmp"
        torch.save(payload, tmp)
        maybe_inject_fault(progress.global_step, "checkpoint-write")
        os.replace(tmp, path)  # a crash before this line leaves the previous checkpoint the newest
        prune_checkpoints(folder, cfg.checkpoint.keep_last)
    if d.ddp:
        dist.barrier()  # nobody runs ahead (or resumes) before the checkpoint is on disk


def prune_checkpoints(folder: Path, keep_last: int) -> None:
    if keep_last == -1:
        return
    for old in sorted(folder.glob("step-*.pt"))[:-keep_last]:
        old.unlink()


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint: only renamed files count, never a leftover .tmp."""
    found = sorted(checkpoint_dir(run_dir).glob("step-*.pt"))
    return found[-1] if found else None


def load_checkpoint(path: Path, d: Dist, t: Training) -> tuple[Progress, dict]:
    try:
        # weights_only: a checkpoint is data, never code; map_location: onto this process's device
        payload = torch.load(path, map_location=d.device, weights_only=True)
        t.model.load_state_dict(payload["model"])
        t.optimizer.load_state_dict(payload["optimizer"])
    except Exception as err:  # corrupt, truncated, pickled objects, another model's shape
        raise ConfigError(f"checkpoint {path} cannot be loaded: {one_line(str(err))[:400]}") from None
    if t.scheduler and payload["scheduler"]:
        t.scheduler.load_state_dict(payload["scheduler"])
    if t.scaler and payload["scaler"]:
        t.scaler.load_state_dict(payload["scaler"])
    if payload["world_size"] != d.world_size:
        raise ConfigError(
            f"checkpoint {path} was written by {payload['world_size']} processes, "
            f"this run has {d.world_size}: the data split would differ"
        )
    return Progress(**payload["progress"]), payload["rng"][d.rank]


def resume_point(cfg: RunConfig, resume: bool, run_dir: Path) -> Path | None:
    if cfg.ckpt_path not in (None, "last"):
        path = Path(cfg.ckpt_path)
        if not path.is_file():
            raise ConfigError(f"`ckpt_path` {path} does not exist")
        return path
    if not (resume or cfg.ckpt_path == "last"):
        return None
    found = latest_checkpoint(run_dir)
    if found is None and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
        raise ConfigError(f"--resume: no checkpoint in {checkpoint_dir(run_dir)}")
    return found  # a torchrun restart before the first checkpoint starts over


# -----------------------------------------------------------------------------
# the training loop


@dataclass
class StepInputs:
    """What one optimizer step consumed, for the trace."""

    loss: torch.Tensor | None = None
    indices: list = None


def train_one_epoch(
    cfg: RunConfig,
    d: Dist,
    t: Training,
    loader,
    progress: Progress,
    recorder: TraceRecorder,
    run_dir: Path,
    rng_to_restore: dict | None,
) -> None:
    loss_fn, k = build_loss(), cfg.trainer.accumulate_grad_batches
    # creating the iterator draws a seed from torch's RNG, as in Lightning. A checkpoint taken at an
    # epoch's end holds the state before that draw; one taken mid-epoch, the state after it.
    if rng_to_restore is not None and progress.batches_done == 0:
        set_rng_state(rng_to_restore)
    batches = iter(loader)
    if rng_to_restore is not None and progress.batches_done > 0:
        set_rng_state(rng_to_restore)
    for _ in range(progress.batches_done):  # mid-epoch resume: skip what was already trained
        next(batches)
    bar = tqdm(
        total=len(loader),
        initial=progress.batches_done,
        desc=f"epoch {progress.epoch}",
        disable=not (d.master and cfg.trainer.enable_progress_bar),
        leave=False,
    )
    step = StepInputs()
    for batch_idx, batch in enumerate(batches, start=progress.batches_done):
        last_micro = (batch_idx + 1) % k == 0 or batch_idx + 1 == len(loader)  # Lightning steps on the final batch too
        if batch_idx % k == 0:
            t.optimizer.zero_grad(set_to_none=True)
            step = StepInputs(indices=[])
        # all but the last micro-batch skip DDP's all-reduce; gradients accumulate locally
        with t.ddp_model.no_sync() if d.ddp and not last_micro else nullcontext():
            with autocast(t, d):
                loss = batch_loss(t, d, batch, loss_fn) / k  # divided by k always, as Lightning does
            (t.scaler.scale(loss) if t.scaler else loss).backward()
        step.loss = loss.detach() if step.loss is None else step.loss + loss.detach()
        step.indices.append(torch.cat([b.index for b in batch]) if isinstance(batch, list) else batch.index)
        progress.batches_done = batch_idx + 1
        bar.update(1)
        if last_micro:
            optimizer_step(cfg, d, t, progress, step, recorder)
            maybe_inject_fault(progress.global_step, "step")
            if progress.batches_done == len(loader):
                step_scheduler(cfg, t, "epoch")  # before validation, as Lightning does
            elif step_checkpoint_due(cfg, progress):  # the epoch's last step is saved at epoch end
                save_checkpoint(cfg, d, t, progress, run_dir, recorder)
    bar.close()


def batch_loss(t: Training, d: Dist, batch, loss_fn) -> torch.Tensor:
    """The loss of one batch. For --reference the batch is every rank's batch, and the loss is the
    mean of the ranks' mean losses: its gradient is what DDP's all-reduce averages."""
    if isinstance(batch, list):
        return sum(batch_loss(t, d, b, loss_fn) for b in batch) / len(batch)
    return loss_fn(t.ddp_model(batch.x.to(d.device)), batch.y.to(d.device))


def optimizer_step(
    cfg: RunConfig, d: Dist, t: Training, progress: Progress, step: StepInputs, recorder: TraceRecorder
) -> None:
    if t.scaler:
        t.scaler.unscale_(t.optimizer)  # clip and measure true gradients, not scaled ones
    params = [p for group in t.optimizer.param_groups for p in group["params"]]
    grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    lr = t.optimizer.param_groups[0]["lr"]
    if cfg.trainer.gradient_clip_val is not None:
        torch.nn.utils.clip_grad_norm_(params, cfg.trainer.gradient_clip_val)
    if t.scaler:
        t.scaler.step(t.optimizer)
        t.scaler.update()
    else:
        t.optimizer.step()
    progress.global_step += 1
    step_scheduler(cfg, t, "step")
    recorder.record(
        progress.global_step,
        step.loss,
        torch.cat(step.indices),
        epoch=progress.epoch,
        lr=lr,
        grad_norm=grad_norm,
        param_digest=param_digest(t.model),
    )


def step_checkpoint_due(cfg: RunConfig, progress: Progress) -> bool:
    n = cfg.checkpoint.every_n_train_steps
    return bool(n) and progress.global_step % n == 0


def epoch_checkpoint_due(cfg: RunConfig, progress: Progress) -> bool:
    n = cfg.checkpoint.every_n_epochs
    return (bool(n) and (progress.epoch + 1) % n == 0) or step_checkpoint_due(cfg, progress)


def step_scheduler(cfg: RunConfig, t: Training, interval: str) -> None:
    if t.scheduler is not None and cfg.model.lr_schedule_interval == interval:
        t.scheduler.step()


@torch.no_grad()
def validate(cfg: RunConfig, d: Dist, t: Training, loader, epoch: int, step: int, recorder: TraceRecorder) -> dict:
    t.model.eval()
    metrics = ValidationMetrics(cfg.model.num_classes).to(d.device)
    for batch in loader:
        x, y = batch.x.to(d.device), batch.y.to(d.device)
        with autocast(t, d):
            logits = t.model(x)  # no DDP forward: evaluation needs no gradient sync
        metrics.update(logits, y)
    result = metrics.compute()  # synced across ranks by torchmetrics
    t.model.train()
    recorder.record_validation(epoch, step, result)
    return result


def train(
    cfg: RunConfig,
    d: Dist,
    t: Training,
    loaders: tuple,
    run_dir: Path,
    start: Progress,
    rng: dict | None,
    recorder: TraceRecorder,
) -> None:
    train_loader, sampler, val_loader = loaders
    progress = start
    for epoch in range(start.epoch, cfg.trainer.max_epochs):
        if progress.batches_done >= len(train_loader):  # resumed from an epoch-end checkpoint
            progress = Progress(epoch + 1, 0, progress.global_step)
            continue
        progress.epoch = epoch
        sampler.set_epoch(epoch)  # without it every epoch repeats the same order (the tutorial's warning)
        train_one_epoch(cfg, d, t, train_loader, progress, recorder, run_dir, rng)
        rng = None
        if val_loader is not None and (epoch + 1) % cfg.trainer.check_val_every_n_epoch == 0:
            result = validate(cfg, d, t, val_loader, epoch, progress.global_step, recorder)
            print0(
                d,
                f"epoch {epoch} val_loss {result['val_loss']:.4f} val_acc {result['val_acc']:.4f} "
                f"({result['val_count']} samples)",
            )
        print0(d, f"epoch {epoch} step {progress.global_step} loss {recorder.last_loss():.4f}")
        if epoch_checkpoint_due(cfg, progress):
            save_checkpoint(cfg, d, t, progress, run_dir, recorder)
        progress = Progress(epoch + 1, 0, progress.global_step)


# -----------------------------------------------------------------------------
# main


def reference_world_size(cfg: RunConfig, d: Dist) -> int:
    """--reference emulates the DDP run the config describes: trainer.devices x trainer.num_nodes ranks."""
    if d.ddp:
        raise ConfigError("--reference runs as one plain process: start it with python, not torchrun")
    if cfg.trainer.devices == "auto":
        raise ConfigError("--reference needs `trainer.devices` as a number (the world size to emulate)")
    return cfg.trainer.devices * cfg.trainer.num_nodes


def prepare(cfg: RunConfig, d: Dist, resume: bool, reference: int | None):
    check_world_size(cfg.data, d.world_size)
    if cfg.trainer.devices != "auto" and d.ddp and cfg.trainer.devices * cfg.trainer.num_nodes != d.world_size:
        print0(
            d,
            f"note: trainer.devices x num_nodes = {cfg.trainer.devices * cfg.trainer.num_nodes}, "
            f"torchrun started {d.world_size} processes; the raw loop follows torchrun",
        )
    run_dir = resolve_run_dir(cfg.run_dir, "reference" if reference else "raw")
    restarted = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"
    ckpt = resume_point(cfg, resume or restarted, run_dir)
    check_fresh_run_dir(run_dir, resuming=ckpt is not None or restarted)
    t = build_training(cfg, d)
    # Lightning re-seeds (reset_seed) when its DDP strategy sets up, after the model's init drew from
    # the RNG; the same here, or dropout masks differ from the first step
    set_determinism(cfg.seed_everything, cfg.threads, cfg.trainer.deterministic)
    progress, rng = Progress(), None
    if ckpt is not None:
        progress, rng = load_checkpoint(ckpt, d, t)
        print0(d, f"resuming from {ckpt} (epoch {progress.epoch}, step {progress.global_step})")
    if d.master:
        run_dir.mkdir(parents=True, exist_ok=True)
    if d.ddp:
        dist.barrier()
    recorder = TraceRecorder(
        run_dir,
        side="reference" if reference else "raw",
        config=cfg.to_dict(),
        extra_meta={
            "device": str(d.device),
            "resumed_from": str(ckpt) if ckpt else None,
            "reference_world_size": reference,
        },
    )
    loaders = build_loaders(cfg, d, reference)
    sampler = loaders[1].samplers[0] if reference else loaders[1]
    recorder.start(
        facts={"init_params_sha256": t.init_params_sha256, "sampler": sampler_facts(sampler)},
        keep_steps_upto=progress.global_step if ckpt else None,
    )
    recorder.watch(t.model, start_step=progress.global_step)  # module watch (docs/localisation.md)
    return run_dir, t, loaders, progress, rng, recorder


def main(argv: list[str]) -> int:
    resume, reference = "--resume" in argv, "--reference" in argv
    try:
        cfg = parse_raw_config([a for a in argv if a not in ("--resume", "--reference")])
    except ConfigError as err:
        print(f"raw/train.py: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    set_determinism(cfg.seed_everything, cfg.threads, cfg.trainer.deterministic)
    try:
        d = setup_distributed(cfg.trainer.accelerator)
    except ConfigError as err:
        print(f"raw/train.py: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    t = None
    try:
        try:
            reference = reference_world_size(cfg, d) if reference else None
            run_dir, t, loaders, progress, rng, recorder = prepare(cfg, d, resume, reference)
        except (ConfigError, RunDirError) as err:
            print(f"raw/train.py: error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        print0(
            d,
            f"world_size {d.world_size}, device {d.device}, backend "
            f"{dist.get_backend() if d.ddp else 'none'}, effective batch "
            f"{cfg.data.batch_size * d.world_size * cfg.trainer.accumulate_grad_batches}, run_dir {run_dir}",
        )
        started = time.perf_counter()
        try:
            train(cfg, d, t, loaders, run_dir, progress, rng, recorder)
        except BaseException as err:  # let the harness know which rank failed and why
            recorder.close()
            write_error_file(run_dir, err)
            raise
        recorder.finish(t.model, train_seconds=time.perf_counter() - started)
        print0(d, f"done: {recorder.meta.get('params_sha256', '')[:16]} in {run_dir}")
        return 0
    finally:
        cleanup_distributed(d, t)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
