"""Hand-written DDP training: the tutorial's script, grown up. The Lightning twin must match it bit for bit.

Launch (CPU: gloo; GPU: NCCL, one process per device):
    torchrun --nproc_per_node=2 raw/train.py --config configs/default.yaml
    python raw/train.py --config configs/default.yaml                     # one plain process, no DDP
    torchrun --nnodes=2 --node_rank=0 --master_addr=127.0.0.1 --master_port=29500 \
        --nproc_per_node=2 raw/train.py --config configs/default.yaml     # node 0 of two (run node 1 too)
Override single keys with LightningCLI's dotted names: --data.batch_size 16 --trainer.max_epochs 1
Resume from the newest complete checkpoint: --resume (or --ckpt_path last); a torchrun restart
(--max-restarts) resumes by itself.
Read it beside lightning_impl/module.py (same order, same names) and docs/how-parity-works.md.
raw/reference.py and raw/mistakes.py bend this script from outside; it never imports them.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import time
import traceback
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from tqdm import tqdm

from ddp_parity.checkpoints import SHARDED_SUFFIX, TRAIN_STATE_FILE, find_checkpoint, list_checkpoints
from ddp_parity.config import ConfigError, check_world_size, one_line, parse_raw_config
from ddp_parity.data import build_datasets
from ddp_parity.determinism import rng_state, set_determinism, set_rng_state
from ddp_parity.distributed import init_process_group_from_env
from ddp_parity.faults import maybe_inject_fault
from ddp_parity.model import build_loss, build_net, build_optimizer, build_scheduler
from ddp_parity.runs import RunDirError, check_fresh_run_dir, resolve_run_dir, write_error_file
from ddp_parity.sharding import check_fsdp_plan, is_sharded, shard, total_grad_norm
from ddp_parity.trace import TraceRecorder, params_sha256, sampler_facts
from ddp_parity.validation import ExactShardSampler, ValidationMetrics

SIDE = "raw"  # the trace's side name and the default run folder's prefix
# no tqdm monitor thread: a thread keeps the sys.excepthook of its creation, here the recorder's, and
# with it the recorder and the model it watches, alive until the interpreter ends. An FSDP2 model
# (its DTensors, device mesh and last collectives) freed then, after destroy_process_group and with
# gloo's threads still winding down, aborted a rank that had finished ("terminate called without an
# active exception", about one run in three at world 3). Freed in cleanup() instead.
tqdm.monitor_interval = 0
REST_STATE = ("scheduler", "scaler")  # saved beside the model and the optimizer
loss_fn = build_loss()

# -----------------------------------------------------------------------------
# setup and teardown


def setup(accelerator: str):
    """torchrun sets RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT; without them: one plain process."""
    if "RANK" not in os.environ:
        return False, 0, 0, 1, pick_device(accelerator, 0)
    rank, local_rank, world_size = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    device = pick_device(accelerator, local_rank)  # bind the device before the process group (NCCL needs it)
    init_process_group_from_env(dist.get_default_backend_for_device(device))  # nccl on CUDA, gloo on CPU
    return True, rank, local_rank, world_size, device


def pick_device(accelerator: str, local_rank: int) -> torch.device:
    """CPU, or this process's accelerator device bound by local rank (torch.accelerator: CUDA, XPU, ...)."""
    if accelerator == "cpu" or not torch.accelerator.is_available():
        if accelerator in ("gpu", "cuda"):
            raise ConfigError(f"`trainer.accelerator` is {accelerator!r} but torch finds no accelerator")
        return torch.device("cpu")
    torch.accelerator.set_device_index(local_rank)
    return torch.device(torch.accelerator.current_accelerator().type, local_rank)


def cleanup() -> None:
    """Free the DDP wrapper first (the caller has dropped it), then the process group. DDP's Reducer
    holds the group; freed last (at interpreter exit, GIL held) it joins gloo's worker threads while
    one of them waits for the GIL to free a finished collective's tensors: a hang at exit, about one
    run in three here. Destroyed through destroy_process_group, the group is released without the GIL."""
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


def print0(*args) -> None:
    if int(os.environ.get("RANK", "0")) == 0:
        print(*args, flush=True)


# -----------------------------------------------------------------------------
# data


def build_loaders(cfg, rank: int, world_size: int):
    """DistributedSampler splits the data across ranks (no shuffle=True on the DataLoader: the sampler
    shuffles, seeded like Lightning's injected one). One process uses the same sampler with one
    replica, so its order is what torchrun --nproc_per_node=1 sees. Validation shards without padding."""
    train_set, val_set = build_datasets(cfg.data)
    workers = {"num_workers": cfg.data.num_workers, "persistent_workers": cfg.data.persistent_workers}
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=cfg.seed_everything)
    train_loader = DataLoader(
        train_set, batch_size=cfg.data.batch_size, sampler=sampler, drop_last=cfg.data.drop_last, **workers
    )
    val_loader = None
    if val_set is not None:
        val_sampler = ExactShardSampler(val_set, world_size, rank)
        val_loader = DataLoader(val_set, batch_size=cfg.data.batch_size, sampler=val_sampler, **workers)
    return train_loader, sampler, val_loader


def parallelize(model, cfg, device):
    """DDP replicates: it broadcasts rank 0's parameters at construction, so every replica starts
    identical, and all-reduces gradients in backward. FSDP2 shards: fully_shard per block, then the
    root, turns each parameter into a DTensor holding this rank's slice (no broadcast: every rank built
    the same weights from the same seed); forward all-gathers a block's parameters, backward
    reduce-scatters its gradients. The optimizer must be built after this, over the DTensors."""
    if cfg.trainer.strategy == "fsdp":
        return shard(model, cfg.fsdp)  # the model itself, now an FSDPModule
    return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)


def gradient_sync(model, sync: bool):
    """All but the last micro-batch of an accumulation keep their gradients local: DDP's no_sync()
    skips the all-reduce; FSDP2's set_requires_gradient_sync(False) skips the reduce-scatter."""
    if is_sharded(model):
        model.set_requires_gradient_sync(sync)
        return nullcontext()
    return model.no_sync() if isinstance(model, DDP) and not sync else nullcontext()


def batch_loss(model, batch, device) -> torch.Tensor:
    return loss_fn(model(batch.x.to(device)), batch.y.to(device))


# -----------------------------------------------------------------------------
# checkpoints: rank 0 writes atomically, everyone waits, everyone loads with map_location


def resume_iterator(loader, skip: int, rng: dict | None):
    """The epoch's batches from batch `skip` on. Creating the iterator draws a seed from torch's RNG,
    as in Lightning. A checkpoint taken at an epoch's end holds the state before that draw; one taken
    mid-epoch, the state after it. Without a checkpoint (rng None) this is iter(loader)."""
    if rng is not None and skip == 0:
        set_rng_state(rng)
    batches = iter(loader)
    if rng is not None and skip > 0:
        set_rng_state(rng)
    for _ in range(skip):  # mid-epoch resume: skip what was already trained
        next(batches)
    return batches


def save_checkpoint(cfg, run_dir: Path, stateful: dict, progress: dict, recorder: TraceRecorder) -> None:
    """Everything that decides what comes next, every rank's RNG included. DDP: rank 0 writes one
    file (every replica holds the same weights). FSDP2: every rank writes its shard (DCP)."""
    recorder.set_phase("checkpoint")
    recorder.flush()  # the trace up to this step is on disk before the checkpoint that resumes after it
    rng = [rng_state()]
    if dist.is_initialized():
        rng = [None] * dist.get_world_size()
        dist.all_gather_object(rng, rng_state())
    payload = {name: obj.state_dict() if obj else None for name, obj in stateful.items() if name in REST_STATE}
    payload |= {"progress": progress, "world_size": len(rng), "rng": rng}
    payload["sampler"] = {"seed": cfg.seed_everything, "epoch": progress["epoch"]}
    folder = run_dir / "checkpoints"
    if is_sharded(stateful["model"]):
        save_sharded_checkpoint(folder, stateful, payload, cfg.checkpoint.keep_last)
    elif not dist.is_initialized() or dist.get_rank() == 0:
        payload |= {"model": stateful["model"].state_dict(), "optimizer": stateful["optimizer"].state_dict()}
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"step-{progress['global_step']:08d}.pt"
        tmp = folder / f".{path.name}.tmp"
        torch.save(payload, tmp)
        maybe_inject_fault(progress["global_step"], "checkpoint-write")
        os.replace(tmp, path)  # a crash before this line leaves the previous checkpoint the newest
        prune_checkpoints(folder, cfg.checkpoint.keep_last)
    if dist.is_initialized():
        dist.barrier()  # nobody runs ahead (or resumes) before the checkpoint is on disk
    recorder.set_phase("train")


def save_sharded_checkpoint(folder: Path, stateful: dict, payload: dict, keep_last: int) -> None:
    """torch.distributed.checkpoint: every rank writes its shards of the weights and the optimizer
    state into one folder (rank 0 adds the rest of the payload); the folder is renamed into place
    once every rank has written, so, as with a file, a crash leaves the previous one the newest.
    DCP is imported here, as where it loads: a DDP process never pays its half second of import."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    step = payload["progress"]["global_step"]
    path = folder / f"step-{step:08d}{SHARDED_SUFFIX}"
    tmp = folder / f".{path.name}.tmp"
    # get_state_dict: DTensor shards keyed by parameter name (the optimizer's by name too, not by id)
    model_state, optimizer_state = get_state_dict(stateful["model"], stateful["optimizer"])
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=tmp)
    if dist.get_rank() == 0:
        torch.save(payload, tmp / TRAIN_STATE_FILE)
    maybe_inject_fault(step, "checkpoint-write")
    dist.barrier()  # every rank's shard is on disk
    if dist.get_rank() == 0:
        os.replace(tmp, path)
        prune_checkpoints(folder, keep_last)


def prune_checkpoints(folder: Path, keep_last: int) -> None:
    if keep_last == -1:
        return
    for old in list_checkpoints(folder)[:-keep_last]:
        shutil.rmtree(old) if old.is_dir() else old.unlink()


def load_checkpoint(path: Path, stateful: dict, device: torch.device, world_size: int) -> tuple[dict, list]:
    try:
        if path.is_dir():  # FSDP2: each rank reads the shards it now holds (DCP reshards by name)
            payload = load_sharded_checkpoint(path, stateful, device)
        else:
            # weights_only: a checkpoint is data, never code; map_location: onto this process's device
            payload = torch.load(path, map_location=device, weights_only=True)
            stateful["model"].load_state_dict(payload["model"])
            stateful["optimizer"].load_state_dict(payload["optimizer"])
    except Exception as err:  # corrupt, truncated, pickled objects, another model's shape
        raise ConfigError(f"checkpoint {path} cannot be loaded: {one_line(str(err))[:400]}") from None
    for name in REST_STATE:
        if stateful[name] and payload[name]:
            stateful[name].load_state_dict(payload[name])
    if payload["world_size"] != world_size:
        raise ConfigError(
            f"checkpoint {path} was written by {payload['world_size']} processes, "
            f"this run has {world_size}: the data split would differ"
        )
    return payload["progress"], payload["rng"]


def load_sharded_checkpoint(path: Path, stateful: dict, device: torch.device) -> dict:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model, optimizer = stateful["model"], stateful["optimizer"]
    model_state, optimizer_state = get_state_dict(model, optimizer)  # the shapes to read into
    state = {"model": model_state, "optimizer": optimizer_state}
    try:
        dcp.load(state, checkpoint_id=path)
    except dcp.api.CheckpointException as err:  # a BaseException, its str every rank's whole traceback
        raise ValueError(checkpoint_failures(err)) from None
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    return torch.load(path / TRAIN_STATE_FILE, map_location=device, weights_only=True)


def checkpoint_failures(err) -> str:
    """DCP's failure in one line: which ranks failed, and the first one's exception."""
    failures = err.failures
    exc = next(iter(failures.values()))[0]
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"ranks {', '.join(map(str, failures))} failed to read it; rank {next(iter(failures))}: {what}"


# -----------------------------------------------------------------------------
# training


def train(cfg, resume: bool, rank: int, world_size: int, device: torch.device) -> int:
    ddp = dist.is_initialized()
    check_world_size(cfg.data, world_size)
    configured = cfg.trainer.devices * cfg.trainer.num_nodes if cfg.trainer.devices != "auto" else world_size
    if ddp and configured != world_size:
        print0(f"note: trainer.devices x num_nodes = {configured}, torchrun started {world_size}: torchrun wins")
    run_dir = resolve_run_dir(cfg.run_dir, SIDE)
    restarted = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"
    ckpt_path = find_checkpoint(cfg, resume or restarted, run_dir)
    check_fresh_run_dir(run_dir, resuming=ckpt_path is not None or restarted)

    # model, optimizer, precision
    model = build_net(cfg.model).to(device)
    init_params_sha256 = params_sha256(model)  # this rank's weights as built, before DDP's broadcast
    ddp_model = parallelize(model, cfg, device) if ddp else model
    optimizer = build_optimizer(model.parameters(), cfg.model)  # FSDP2: after fully_shard, over the shards
    scheduler = build_scheduler(optimizer, cfg.model)
    autocast_dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(cfg.trainer.precision)
    # cache_enabled=False: Lightning's MixedPrecision does the same (same numbers, no cast cache)
    autocast = (
        partial(torch.autocast, device.type, autocast_dtype, cache_enabled=False) if autocast_dtype else nullcontext
    )
    scaler = torch.amp.GradScaler(device.type) if cfg.trainer.precision == "16-mixed" else None
    # Lightning re-seeds (reset_seed) when its DDP strategy sets up, after the model's init drew from
    # the RNG; the same here, or dropout masks differ from the first step
    set_determinism(cfg.seed_everything, cfg.threads, cfg.trainer.deterministic)

    # resume: the checkpoint's progress, and this rank's RNG state to restore at the loop's first iterator
    stateful = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "scaler": scaler}
    start, rng = {"epoch": 0, "batches_done": 0, "global_step": 0}, None
    if ckpt_path is not None:
        try:
            start, rng_states = load_checkpoint(ckpt_path, stateful, device, world_size)
        except ConfigError as err:  # the harness reads why from the rank's error file, not its log
            write_error_file(run_dir, err, rank=rank, phase="resume")
            raise
        rng = rng_states[rank]
        print0(f"resuming from {ckpt_path} (epoch {start['epoch']}, step {start['global_step']})")
    if rank == 0:
        run_dir.mkdir(parents=True, exist_ok=True)
    if ddp:
        dist.barrier()

    train_loader, sampler, val_loader = build_loaders(cfg, rank, world_size)
    extra_meta = {"device": str(device), "resumed_from": str(ckpt_path) if ckpt_path else None}
    recorder = TraceRecorder(run_dir, side=SIDE, config=cfg.to_dict(), extra_meta=extra_meta)
    recorder.start(
        facts={"init_params_sha256": init_params_sha256, "sampler": sampler_facts(sampler)},
        resumed_from_step=start["global_step"] if ckpt_path else None,
    )
    recorder.watch(model, start_step=start["global_step"])  # module watch (docs/localisation.md)
    k, clip = cfg.trainer.accumulate_grad_batches, cfg.trainer.gradient_clip_val
    every_n_steps, every_n_epochs = cfg.checkpoint.every_n_train_steps, cfg.checkpoint.every_n_epochs
    print0(
        f"world_size {world_size}, device {device}, backend {dist.get_backend() if ddp else 'none'}, "
        f"effective batch {cfg.data.batch_size * world_size * k}, run_dir {run_dir}"
    )

    # -----------------------------------------------------------------------------
    # the training loop
    started, global_step, skip = time.perf_counter(), start["global_step"], start["batches_done"]
    try:
        for epoch in range(start["epoch"], cfg.trainer.max_epochs):
            if skip >= len(train_loader):  # resumed from this epoch's end-of-epoch checkpoint
                skip = 0
                continue
            recorder.set_phase("train")
            sampler.set_epoch(epoch)  # without it every epoch repeats the same order (the tutorial's warning)
            batches, rng = resume_iterator(train_loader, skip, rng), None
            quiet = not (rank == 0 and cfg.trainer.enable_progress_bar)
            batches = tqdm(batches, f"epoch {epoch}", len(train_loader), leave=False, disable=quiet, initial=skip)
            for batch_idx, batch in enumerate(batches, start=skip):
                # Lightning steps on the epoch's final batch too, with a shorter accumulation
                last_micro = (batch_idx + 1) % k == 0 or batch_idx + 1 == len(train_loader)
                if batch_idx % k == 0:
                    optimizer.zero_grad(set_to_none=True)
                    step_losses, step_indices, step_batches = [], [], []
                # all but the last micro-batch skip the gradient reduction; gradients accumulate locally
                with gradient_sync(ddp_model, sync=last_micro):
                    with autocast():
                        loss = batch_loss(ddp_model, batch, device) / k  # divided by k always, as Lightning does
                    (scaler.scale(loss) if scaler else loss).backward()
                step_losses.append(loss.detach())
                step_indices.append(batch.index)
                step_batches.append(batch)
                if not last_micro:
                    continue
                if scaler:
                    scaler.unscale_(optimizer)  # clip and measure true gradients, not scaled ones
                params = [p for group in optimizer.param_groups for p in group["params"]]
                grad_norm = total_grad_norm([p.grad for p in params if p.grad is not None])  # FSDP2: full grads
                lr = optimizer.param_groups[0]["lr"]
                if clip is not None:
                    torch.nn.utils.clip_grad_norm_(params, clip)  # FSDP2: over DTensors, its norm across ranks
                if scaler:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                global_step += 1
                if scheduler and cfg.model.lr_schedule_interval == "step":
                    scheduler.step()
                step_loss = sum(step_losses)  # in order, as TraceCallback sums them (0 + a is a)
                recorder.record(
                    global_step, step_loss, torch.cat(step_indices), epoch=epoch, lr=lr, grad_norm=grad_norm,
                    batch=step_batches, optimizer=optimizer, model=model,
                )  # fmt: skip
                maybe_inject_fault(global_step, "step")
                if every_n_steps and global_step % every_n_steps == 0 and batch_idx + 1 < len(train_loader):
                    progress = {"epoch": epoch, "batches_done": batch_idx + 1, "global_step": global_step}
                    save_checkpoint(cfg, run_dir, stateful, progress, recorder)  # the epoch's last: below
            skip = 0
            if scheduler and cfg.model.lr_schedule_interval == "epoch":
                scheduler.step()  # before validation, as Lightning does
            if val_loader is not None and (epoch + 1) % cfg.trainer.check_val_every_n_epoch == 0:
                recorder.set_phase("validation")
                result = validate(model, val_loader, device, autocast, cfg.model.num_classes)
                recorder.record_validation(epoch, global_step, result)
                print0(f"epoch {epoch} val_loss {result['val_loss']:.4f} val_acc {result['val_acc']:.4f} "
                       f"({result['val_count']} samples)")  # fmt: skip
            print0(f"epoch {epoch} step {global_step} loss {recorder.last_loss():.4f}")
            epoch_due = every_n_epochs and (epoch + 1) % every_n_epochs == 0
            if epoch_due or (every_n_steps and global_step % every_n_steps == 0):
                progress = {"epoch": epoch, "batches_done": len(train_loader), "global_step": global_step}
                save_checkpoint(cfg, run_dir, stateful, progress, recorder)
    except BaseException as err:  # let the harness know which rank failed, where and why
        recorder.close()
        recorder.record_error(err)
        raise
    recorder.finish(model, train_seconds=time.perf_counter() - started)
    print0(f"done: {recorder.meta.get('params_sha256', '')[:16]} in {run_dir}")
    return 0


# -----------------------------------------------------------------------------
# validation


@torch.no_grad()
def validate(model, loader, device, autocast, num_classes: int) -> dict:
    model.eval()
    metrics = ValidationMetrics(num_classes).to(device)
    for batch in loader:
        with autocast():
            logits = model(batch.x.to(device))  # no DDP forward: evaluation needs no gradient sync
        metrics.update(logits, batch.y.to(device))
    model.train()
    return metrics.compute()  # synced across ranks by torchmetrics


# -----------------------------------------------------------------------------
# main


def fail(err: Exception) -> int:
    print(f"raw/train.py: error: {err}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    resume = "--resume" in argv
    try:
        cfg = parse_raw_config([a for a in argv if a != "--resume"])
        check_fsdp_plan(cfg.model, cfg.fsdp)
        set_determinism(cfg.seed_everything, cfg.threads, cfg.trainer.deterministic)
        ddp, rank, local_rank, world_size, device = setup(cfg.trainer.accelerator)
    except ConfigError as err:
        return fail(err)
    try:
        return train(cfg, resume, rank, world_size, device)
    except (ConfigError, RunDirError) as err:  # a checkpoint, a run directory: found before training
        return fail(err)
    except BaseException as err:
        traceback.clear_frames(err.__traceback__)  # drops train()'s DDP wrapper before cleanup() (see there)
        raise
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
