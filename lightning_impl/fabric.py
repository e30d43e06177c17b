"""The Fabric twin: raw/train.py's loop with Lightning Fabric doing what Fabric does (process group,
DDP wrap, sampler injection and set_epoch, no_sync, clipping, precision, checkpoint I/O). It must
match the raw loop and the Trainer bit for bit; read it beside raw/train.py (same order, same names).

Launch (the same config and flags as `python -m lightning_impl fit`):
    python -m lightning_impl.fabric --config configs/default.yaml        # Fabric's own launcher (trainer.devices)
    torchrun --nproc_per_node=2 -m lightning_impl.fabric --config configs/default.yaml
    torchrun --nnodes=2 --node_rank=0 --master_addr=127.0.0.1 --master_port=29500 \
        --nproc_per_node=1 -m lightning_impl.fabric --config configs/default.yaml --trainer.num_nodes 2
Resume from the newest complete checkpoint: --ckpt_path last (or --resume); a torchrun restart
(--max-restarts) resumes by itself.
Where Fabric needs help to match the raw loop, a comment names the Fabric source line (docs/fabric.md).
"""

from __future__ import annotations

import gc
import os
import random
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from lightning.fabric import Fabric
from lightning.fabric.utilities.seed import reset_seed
from torch.utils.data import DataLoader
from tqdm import tqdm

from ddp_parity.config import ConfigError, RunConfig, build_raw_parser, check_world_size, one_line, parse_raw_config
from ddp_parity.data import build_datasets
from ddp_parity.determinism import set_determinism
from ddp_parity.distributed import init_process_group_from_env
from ddp_parity.faults import maybe_inject_fault
from ddp_parity.model import build_loss, build_net, build_optimizer, build_scheduler
from ddp_parity.runs import RUN_DIR_ENV, RunDirError, check_fresh_run_dir, resolve_run_dir, write_error_file
from ddp_parity.trace import TraceRecorder, param_digest, params_sha256, sampler_facts
from ddp_parity.validation import ExactShardSampler, ValidationMetrics

PROG = "python -m lightning_impl.fabric"
SIDE = "fabric"
EXIT_BAD_INPUT = 2

# -----------------------------------------------------------------------------
# distributed setup and teardown


def under_torchrun() -> bool:
    return "LOCAL_WORLD_SIZE" in os.environ and "TORCHELASTIC_RUN_ID" in os.environ


def restarted() -> bool:
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"


def world_shape(cfg: RunConfig) -> tuple[int | str, int]:
    """(devices, num_nodes): the config's, or under torchrun what torchrun started. Like the raw loop,
    the Fabric twin follows torchrun (Fabric itself would refuse a mismatch)."""
    if not under_torchrun():
        return cfg.trainer.devices, cfg.trainer.num_nodes
    local, world = int(os.environ["LOCAL_WORLD_SIZE"]), int(os.environ["WORLD_SIZE"])
    if cfg.trainer.devices != "auto" and cfg.trainer.devices * cfg.trainer.num_nodes != world:
        if os.environ.get("RANK") == "0":
            print(
                f"note: trainer.devices x num_nodes = {cfg.trainer.devices * cfg.trainer.num_nodes}, "
                f"torchrun started {world} processes; the Fabric twin follows torchrun",
                flush=True,
            )
    return local, world // local


def build_fabric(cfg: RunConfig) -> Fabric:
    devices, num_nodes = world_shape(cfg)
    return Fabric(
        accelerator=cfg.trainer.accelerator,
        strategy="ddp",
        devices=devices,
        num_nodes=num_nodes,
        precision=cfg.trainer.precision,
    )


def setup_distributed(fabric: Fabric, cfg: RunConfig) -> None:
    """fabric.launch(): under torchrun it joins the group; otherwise it re-runs this command once per
    extra device (LOCAL_RANK set) and joins with them."""
    if restarted() and "RANK" in os.environ:
        # join the group before Fabric does (it then keeps it): see init_process_group_from_env
        init_process_group_from_env("gloo" if cfg.trainer.accelerator == "cpu" else "nccl")
    fabric.launch()
    os.environ.setdefault("RANK", str(fabric.global_rank))  # error files and faults name the global rank


def cleanup_distributed(t: Training | None) -> None:
    """Drop the DDP wrapper first, then the process group (raw/train.py says why: a hang at exit).
    Fabric keeps both until the interpreter exits."""
    if t is not None:
        t.fabric_model = None
        gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def check_port_free(cfg: RunConfig) -> None:
    """Fabric's own launcher makes this process the rendezvous server on MASTER_PORT; a port in use
    would fail deep inside it. Say so first (torchrun checks its own port)."""
    devices = cfg.trainer.devices if isinstance(cfg.trainer.devices, int) else 1
    if "LOCAL_RANK" in os.environ or devices * cfg.trainer.num_nodes < 2:
        return
    addr, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "0") or 0)
    if not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((addr, port))
        except OSError:
            raise ConfigError(
                f"MASTER_PORT {port} on {addr} is already in use: choose a free port (compare/run.py picks one)"
            ) from None


# -----------------------------------------------------------------------------
# data


def build_loaders(cfg: RunConfig, fabric: Fabric):
    """shuffle=True asks Fabric to replace the RandomSampler with DistributedSampler(shuffle=True,
    seed=PL_GLOBAL_SEED) (lightning/fabric/fabric.py, _get_distributed_sampler): the raw loop's sampler,
    seeded from seed_everything. Fabric's loader also calls set_epoch on every iteration (wrappers.py)."""
    train_set, val_set = build_datasets(cfg.data)
    workers = loader_workers(cfg)
    loader = DataLoader(
        train_set, batch_size=cfg.data.batch_size, shuffle=True, drop_last=cfg.data.drop_last, **workers
    )
    train_loader = fabric.setup_dataloaders(loader)
    val_loader = None
    if val_set is not None:
        sampler = ExactShardSampler(val_set, fabric.world_size, fabric.global_rank)
        # a DistributedSampler already: Fabric keeps it (no padded, double-counted samples)
        val_loader = fabric.setup_dataloaders(
            DataLoader(val_set, batch_size=cfg.data.batch_size, sampler=sampler, **workers),
            use_distributed_sampler=False,
        )
    return train_loader, train_loader.sampler, val_loader


def loader_workers(cfg: RunConfig) -> dict:
    """`data.num_workers` / `data.persistent_workers`, for a config that has them (they arrive with
    the raw loop's rewrite; an older config has neither, and the loaders run in this process)."""
    keys = ("num_workers", "persistent_workers")
    return {key: getattr(cfg.data, key) for key in keys if hasattr(cfg.data, key)}


def start_sampler_epoch_at(loader, epoch: int) -> None:
    """Fabric's loader sets the sampler's epoch to the number of times it has been iterated
    (lightning/fabric/wrappers.py:320, `_set_sampler_epoch(self._dataloader, self._num_iter_calls)`):
    that is the epoch only in a process that started at epoch 0. A resumed process counts from 0
    again and would replay epoch 0's order; start its count at the epoch it trains. (A no-op in a
    run that was not resumed: the count already equals the epoch.)"""
    loader._num_iter_calls = epoch


# -----------------------------------------------------------------------------
# model, optimizer, precision


@dataclass
class Training:
    model: torch.nn.Module  # the plain network (what checkpoints hold)
    fabric_model: torch.nn.Module  # what the loop calls: Fabric's wrapper around DDP around the network
    optimizer: torch.optim.Optimizer  # Fabric's wrapper: step() goes through the precision plugin
    scheduler: object
    init_params_sha256: str  # this rank's weights as built, before DDP's broadcast


def build_training(cfg: RunConfig, fabric: Fabric) -> Training:
    model = build_net(cfg.model)
    init_digest = params_sha256(model)
    optimizer = build_optimizer(model.parameters(), cfg.model)
    scheduler = build_scheduler(optimizer, cfg.model)
    # moves to the device and wraps in DDP, which broadcasts rank 0's parameters
    fabric_model, fabric_optimizer = fabric.setup(model, optimizer)
    return Training(model, fabric_model, fabric_optimizer, scheduler, init_digest)


# -----------------------------------------------------------------------------
# checkpoints: fabric.save (rank 0 writes), a rename makes them complete, fabric.load restores in place


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


def stateful(t: Training, fabric: Fabric) -> dict:
    """What fabric.save turns into state dicts and fabric.load restores in place."""
    state = {"model": t.fabric_model, "optimizer": t.optimizer, "scaler": fabric.strategy.precision}
    if t.scheduler is not None:
        state["scheduler"] = t.scheduler
    return state


def save_checkpoint(
    cfg: RunConfig, fabric: Fabric, t: Training, progress: Progress, run_dir: Path, recorder: TraceRecorder
) -> None:
    """Everything that decides what comes next, every rank's RNG included; rank 0 writes."""
    recorder.set_phase("checkpoint")
    recorder.flush()  # the trace up to this step is on disk before the checkpoint that resumes after it
    states = [rng_state()]
    if fabric.world_size > 1:  # fabric.all_gather takes tensors only
        states = [None] * fabric.world_size
        dist.all_gather_object(states, rng_state())
    folder = checkpoint_dir(run_dir)
    path = folder / f"step-{progress.global_step:08d}.pt"
    tmp = folder / f".{path.name}.tmp"
    payload = {
        **stateful(t, fabric),
        "progress": vars(progress).copy(),
        "sampler": {"seed": cfg.seed_everything, "epoch": progress.epoch},
        "world_size": fabric.world_size,
        "rng": states,
    }
    # fabric.save writes on rank 0 only (then waits for everyone); its own write is atomic, but the
    # name must appear last, after the fault hook, as in the raw loop: write a hidden name, then rename
    fabric.save(tmp, payload)
    if fabric.is_global_zero:
        maybe_inject_fault(progress.global_step, "checkpoint-write")
        os.replace(tmp, path)  # a crash before this line leaves the previous checkpoint the newest
        prune_checkpoints(folder, cfg.checkpoint.keep_last)
    fabric.barrier()  # nobody runs ahead (or resumes) before the checkpoint is on disk
    recorder.set_phase("train")


def prune_checkpoints(folder: Path, keep_last: int) -> None:
    if keep_last == -1:
        return
    for old in sorted(folder.glob("step-*.pt"))[:-keep_last]:
        old.unlink()


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint: only renamed files count, never a leftover .tmp."""
    found = sorted(checkpoint_dir(run_dir).glob("step-*.pt"))
    return found[-1] if found else None


def load_checkpoint(path: Path, fabric: Fabric, t: Training) -> tuple[Progress, dict]:
    try:
        # weights_only: a checkpoint is data, never code; fabric.load restores model, optimizer,
        # scheduler and scaler in place and hands back the rest
        rest = fabric.load(path, stateful(t, fabric), weights_only=True)
    except Exception as err:  # corrupt, truncated, pickled objects, another model's shape
        raise ConfigError(f"checkpoint {path} cannot be loaded: {one_line(str(err))[:400]}") from None
    if rest["world_size"] != fabric.world_size:
        raise ConfigError(
            f"checkpoint {path} was written by {rest['world_size']} processes, "
            f"this run has {fabric.world_size}: the data split would differ"
        )
    return Progress(**rest["progress"]), rest["rng"][fabric.global_rank]


def resume_point(cfg: RunConfig, resume: bool, run_dir: Path) -> Path | None:
    if cfg.ckpt_path not in (None, "last"):
        path = Path(cfg.ckpt_path)
        if not path.is_file():
            raise ConfigError(f"`ckpt_path` {path} does not exist")
        return path
    if not (resume or cfg.ckpt_path == "last"):
        return None
    found = latest_checkpoint(run_dir)
    if found is None and not restarted():
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
    fabric: Fabric,
    t: Training,
    loader,
    progress: Progress,
    recorder: TraceRecorder,
    run_dir: Path,
    rng_to_restore: dict | None,
) -> None:
    loss_fn, k = build_loss(), cfg.trainer.accumulate_grad_batches
    # Fabric's loader is a generator: the DataLoader iterator (and the seed it draws from torch's RNG)
    # is made on the first next(), not by iter(). A checkpoint taken at an epoch's end holds the state
    # before that draw; one taken mid-epoch, the state after it: restored after skipping, then.
    if rng_to_restore is not None and progress.batches_done == 0:
        set_rng_state(rng_to_restore)
    batches = iter(loader)
    for _ in range(progress.batches_done):  # mid-epoch resume: skip what was already trained
        next(batches)
    if rng_to_restore is not None and progress.batches_done > 0:
        set_rng_state(rng_to_restore)
    bar = tqdm(
        total=len(loader),
        initial=progress.batches_done,
        desc=f"epoch {progress.epoch}",
        disable=not (fabric.is_global_zero and cfg.trainer.enable_progress_bar),
        leave=False,
    )
    step = StepInputs()
    for batch_idx, batch in enumerate(batches, start=progress.batches_done):
        last_micro = (batch_idx + 1) % k == 0 or batch_idx + 1 == len(loader)  # Lightning steps on the final batch too
        if batch_idx % k == 0:
            t.optimizer.zero_grad(set_to_none=True)
            step = StepInputs(indices=[])
        # all but the last micro-batch skip DDP's all-reduce (Fabric calls DDP's no_sync)
        with fabric.no_backward_sync(t.fabric_model, enabled=not last_micro):
            # the wrapper runs the forward under autocast and hands back float32 logits (the loss
            # runs in float32 under autocast anyway: the same numbers as the raw loop)
            loss = loss_fn(t.fabric_model(batch.x), batch.y) / k  # divided by k always, as Lightning does
            fabric.backward(loss)  # scales the loss when the precision has a GradScaler
        step.loss = loss.detach() if step.loss is None else step.loss + loss.detach()
        step.indices.append(batch.index)
        progress.batches_done = batch_idx + 1
        bar.update(1)
        if last_micro:
            optimizer_step(cfg, fabric, t, progress, step, recorder)
            maybe_inject_fault(progress.global_step, "step")
            if progress.batches_done == len(loader):
                step_scheduler(cfg, t, "epoch")  # before validation, as Lightning does
            elif step_checkpoint_due(cfg, progress):  # the epoch's last step is saved at epoch end
                save_checkpoint(cfg, fabric, t, progress, run_dir, recorder)
    bar.close()


def optimizer_step(
    cfg: RunConfig, fabric: Fabric, t: Training, progress: Progress, step: StepInputs, recorder: TraceRecorder
) -> None:
    precision = fabric.strategy.precision
    scaler = getattr(precision, "scaler", None)
    if scaler is not None and cfg.trainer.gradient_clip_val is None:
        precision.unscale_gradients(t.optimizer)  # measure true gradients (clip_gradients unscales itself)
    lr = t.optimizer.param_groups[0]["lr"]
    if cfg.trainer.gradient_clip_val is not None:
        # returns the norm before clipping (torch's clip_grad_norm_ is get_total_norm + scaling);
        # error_if_nonfinite=False as torch's default (Fabric's default is True)
        grad_norm = fabric.clip_gradients(
            t.fabric_model, t.optimizer, max_norm=cfg.trainer.gradient_clip_val, error_if_nonfinite=False
        )
    else:
        params = [p for group in t.optimizer.param_groups for p in group["params"]]
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    t.optimizer.step()  # through the precision plugin: scaler.step + update under 16-mixed
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
def validate(cfg: RunConfig, fabric: Fabric, t: Training, loader, epoch: int, step: int, recorder) -> dict:
    recorder.set_phase("validation")
    t.fabric_model.eval()
    metrics = ValidationMetrics(cfg.model.num_classes).to(fabric.device)
    for batch in loader:
        metrics.update(t.fabric_model(batch.x), batch.y)  # autocast inside the wrapper, as in training
    result = metrics.compute()  # synced across ranks by torchmetrics
    t.fabric_model.train()
    recorder.record_validation(epoch, step, result)
    recorder.set_phase("train")
    return result


def train(
    cfg: RunConfig,
    fabric: Fabric,
    t: Training,
    loaders: tuple,
    run_dir: Path,
    start: Progress,
    rng: dict | None,
    recorder: TraceRecorder,
) -> None:
    train_loader, _, val_loader = loaders
    progress = start
    recorder.set_phase("train")
    for epoch in range(start.epoch, cfg.trainer.max_epochs):
        if progress.batches_done >= len(train_loader):  # resumed from an epoch-end checkpoint
            progress = Progress(epoch + 1, 0, progress.global_step)
            continue
        progress.epoch = epoch
        start_sampler_epoch_at(train_loader, epoch)  # Fabric then calls set_epoch(epoch) as it iterates
        train_one_epoch(cfg, fabric, t, train_loader, progress, recorder, run_dir, rng)
        rng = None
        if val_loader is not None and (epoch + 1) % cfg.trainer.check_val_every_n_epoch == 0:
            result = validate(cfg, fabric, t, val_loader, epoch, progress.global_step, recorder)
            fabric.print(
                f"epoch {epoch} val_loss {result['val_loss']:.4f} val_acc {result['val_acc']:.4f} "
                f"({result['val_count']} samples)"
            )
        fabric.print(f"epoch {epoch} step {progress.global_step} loss {recorder.last_loss():.4f}")
        if epoch_checkpoint_due(cfg, progress):
            save_checkpoint(cfg, fabric, t, progress, run_dir, recorder)
        progress = Progress(epoch + 1, 0, progress.global_step)


# -----------------------------------------------------------------------------
# main


def check_before_launch(cfg: RunConfig, resume: bool) -> tuple[Path, Path | None]:
    """Every check that can fail on bad input, before Fabric's launcher starts any other process."""
    devices, num_nodes = world_shape(cfg)
    if devices != "auto":
        check_world_size(cfg.data, devices * num_nodes)
    check_port_free(cfg)
    run_dir = resolve_run_dir(cfg.run_dir, SIDE)
    os.environ[RUN_DIR_ENV] = str(run_dir)  # Fabric's launcher re-runs us with this environment
    ckpt = resume_point(cfg, resume or restarted(), run_dir)
    check_fresh_run_dir(run_dir, resuming=ckpt is not None or restarted())
    return run_dir, ckpt


def prepare(cfg: RunConfig, fabric: Fabric, run_dir: Path, ckpt: Path | None):
    check_world_size(cfg.data, fabric.world_size)
    t = build_training(cfg, fabric)
    # Lightning's Trainer re-seeds (reset_seed) when its DDP strategy sets up, after the model's init
    # drew from the RNG (lightning/pytorch/strategies/ddp.py:200); Fabric's DDP strategy does not
    # (lightning/fabric/strategies/ddp.py, _setup_distributed). The same call here, or dropout masks
    # differ from the first step.
    reset_seed()
    progress, rng = Progress(), None
    if ckpt is not None:
        progress, rng = load_checkpoint(ckpt, fabric, t)
        fabric.print(f"resuming from {ckpt} (epoch {progress.epoch}, step {progress.global_step})")
    if fabric.is_global_zero:
        run_dir.mkdir(parents=True, exist_ok=True)
    fabric.barrier()
    recorder = TraceRecorder(
        run_dir,
        side=SIDE,
        config=cfg.to_dict(),
        extra_meta={
            "device": str(fabric.device),
            "precision": cfg.trainer.precision,
            "resumed_from": str(ckpt) if ckpt else None,
        },
    )
    loaders = build_loaders(cfg, fabric)
    recorder.start(
        facts={"init_params_sha256": t.init_params_sha256, "sampler": sampler_facts(loaders[1])},
        keep_steps_upto=progress.global_step if ckpt else None,
    )
    return t, loaders, progress, rng, recorder


def parse_args(argv: list[str]) -> tuple[RunConfig, bool]:
    """raw/train.py's parser (same keys, same errors); a leading `fit` is accepted, as
    `python -m lightning_impl fit` takes one."""
    if argv[:1] == ["fit"]:
        argv = argv[1:]
    if "-h" in argv or "--help" in argv:
        parser = build_raw_parser()
        parser.prog = PROG
        parser.print_help()
        sys.exit(0)
    resume = "--resume" in argv
    return parse_raw_config([a for a in argv if a != "--resume"]), resume


def main(argv: list[str]) -> int:
    try:
        cfg, resume = parse_args(argv)
    except ConfigError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    set_determinism(cfg.seed_everything, cfg.threads, cfg.trainer.deterministic)
    try:
        run_dir, ckpt = check_before_launch(cfg, resume)
        fabric = build_fabric(cfg)
    except (ConfigError, RunDirError, ValueError) as err:  # Fabric's own argument errors are ValueErrors
        print(f"{PROG}: error: {one_line(str(err))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    setup_distributed(fabric, cfg)
    t = None
    try:
        try:
            t, loaders, progress, rng, recorder = prepare(cfg, fabric, run_dir, ckpt)
        except (ConfigError, RunDirError) as err:
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        fabric.print(
            f"world_size {fabric.world_size}, device {fabric.device}, backend "
            f"{dist.get_backend() if dist.is_initialized() else 'none'}, effective batch "
            f"{cfg.data.batch_size * fabric.world_size * cfg.trainer.accumulate_grad_batches}, run_dir {run_dir}"
        )
        started = time.perf_counter()
        try:
            train(cfg, fabric, t, loaders, run_dir, progress, rng, recorder)
        except BaseException as err:  # let the harness know which rank failed and why
            recorder.close()
            write_error_file(run_dir, err)
            raise
        recorder.set_phase("finished")
        recorder.finish(t.model, train_seconds=time.perf_counter() - started)
        fabric.print(f"done: {recorder.meta.get('params_sha256', '')[:16]} in {run_dir}")
        return 0
    finally:
        cleanup_distributed(t)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
