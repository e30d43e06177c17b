"""The Fabric twin: raw/train.py's loop with Lightning Fabric doing what Fabric does (process group,
DDP wrap, sampler injection and set_epoch, no_sync, clipping, precision, checkpoint I/O). It must
match the raw loop and the Trainer bit for bit.

Launch (the same config and flags as `python -m lightning_impl fit`):
    python -m lightning_impl.fabric --config configs/default.yaml        # Fabric's own launcher (trainer.devices)
    torchrun --nproc_per_node=2 -m lightning_impl.fabric --config configs/default.yaml
    torchrun --nnodes=2 --node_rank=0 --master_addr=127.0.0.1 --master_port=29500 \
        --nproc_per_node=1 -m lightning_impl.fabric --config configs/default.yaml   # node 0 of two
Resume from the newest complete checkpoint: --ckpt_path last (or --resume); a torchrun restart
(--max-restarts) resumes by itself.
Read it beside raw/train.py (same sections, same order, same names) and docs/fabric.md. Where Fabric
needs help to match the raw loop, a comment names the Fabric source line.
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
from lightning.fabric import Fabric
from lightning.fabric.strategies import ModelParallelStrategy
from lightning.fabric.utilities.seed import reset_seed
from torch.utils.data import DataLoader
from tqdm import tqdm

from ddp_parity.checkpoints import SHARDED_SUFFIX, find_checkpoint, list_checkpoints
from ddp_parity.config import ConfigError, build_raw_parser, check_world_size, one_line, parse_raw_config
from ddp_parity.data import build_datasets
from ddp_parity.determinism import rng_state, set_determinism, set_rng_state
from ddp_parity.distributed import check_master_port_free, init_process_group_from_env
from ddp_parity.faults import maybe_inject_fault
from ddp_parity.model import build_loss, build_net, build_optimizer, build_scheduler
from ddp_parity.runs import RUN_DIR_ENV, RunDirError, check_fresh_run_dir, resolve_run_dir, write_error_file
from ddp_parity.sharding import check_fsdp_plan, shard, total_grad_norm
from ddp_parity.trace import TraceRecorder, params_sha256, sampler_facts
from ddp_parity.validation import ExactShardSampler, ValidationMetrics

SIDE = "fabric"  # the trace's side name and the default run folder's prefix
PROG = "python -m lightning_impl.fabric"
loss_fn = build_loss()

# -----------------------------------------------------------------------------
# setup and teardown


def setup(cfg) -> Fabric:
    """fabric.launch(): under torchrun it joins the group from torchrun's environment; otherwise
    Fabric's launcher re-runs this command once per extra device (LOCAL_RANK set) and joins with them."""
    devices, num_nodes = world_shape(cfg)
    fabric = Fabric(
        accelerator=cfg.trainer.accelerator,
        strategy=fsdp_strategy(cfg, devices, num_nodes) if cfg.trainer.strategy == "fsdp" else "ddp",
        devices=devices,
        num_nodes=num_nodes,
        precision=cfg.trainer.precision,
    )
    if restarted() and "RANK" in os.environ:
        # join the group before Fabric does (it then keeps it): see init_process_group_from_env
        init_process_group_from_env("gloo" if cfg.trainer.accelerator == "cpu" else "nccl")
    fabric.launch()
    os.environ.setdefault("RANK", str(fabric.global_rank))  # error files and faults name the global rank
    return fabric


def fsdp_strategy(cfg, devices: int, num_nodes: int) -> ModelParallelStrategy:
    """FSDP2: every process data-parallel; fabric.setup_module calls the plan (the raw loop's
    parallelize: fully_shard per block, then the root) with the data-parallel mesh."""
    return ModelParallelStrategy(
        parallelize_fn=lambda module, mesh: shard(module, cfg.fsdp, mesh=mesh["data_parallel"]),
        data_parallel_size=devices * num_nodes,
        tensor_parallel_size=1,
    )


def world_shape(cfg) -> tuple[int | str, int]:
    """(devices, num_nodes): the config's, or under torchrun what torchrun started. The twin follows
    torchrun, as the raw loop does (Fabric itself would refuse a mismatch)."""
    if "LOCAL_WORLD_SIZE" not in os.environ or "TORCHELASTIC_RUN_ID" not in os.environ:
        return cfg.trainer.devices, cfg.trainer.num_nodes
    local, world = int(os.environ["LOCAL_WORLD_SIZE"]), int(os.environ["WORLD_SIZE"])
    configured = cfg.trainer.devices * cfg.trainer.num_nodes if cfg.trainer.devices != "auto" else world
    if configured != world and os.environ.get("RANK") == "0":
        print(f"note: trainer.devices x num_nodes = {configured}, torchrun started {world}: torchrun wins", flush=True)
    return local, world // local


def restarted() -> bool:
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"


def cleanup() -> None:
    """Free the DDP wrapper first (the caller has dropped it), then the process group: raw/train.py's
    cleanup says why (a hang at exit). Fabric keeps both until the interpreter exits."""
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()


# -----------------------------------------------------------------------------
# data


def build_loaders(cfg, fabric: Fabric):
    """shuffle=True asks Fabric to replace the RandomSampler with DistributedSampler(shuffle=True,
    seed=PL_GLOBAL_SEED) (lightning/fabric/fabric.py:1177, _get_distributed_sampler): the raw loop's
    sampler, seeded from seed_everything. Validation keeps its ExactShardSampler (no padding)."""
    train_set, val_set = build_datasets(cfg.data)
    workers = {"num_workers": cfg.data.num_workers, "persistent_workers": cfg.data.persistent_workers}
    loader = DataLoader(
        train_set, batch_size=cfg.data.batch_size, shuffle=True, drop_last=cfg.data.drop_last, **workers
    )
    train_loader = fabric.setup_dataloaders(loader)
    val_loader = None
    if val_set is not None:
        val_sampler = ExactShardSampler(val_set, fabric.world_size, fabric.global_rank)
        val_loader = fabric.setup_dataloaders(
            DataLoader(val_set, batch_size=cfg.data.batch_size, sampler=val_sampler, **workers),
            use_distributed_sampler=False,
        )
    return train_loader, train_loader.sampler, val_loader


def batch_loss(model, batch) -> torch.Tensor:
    # Fabric's wrapper runs the forward under autocast and hands back float32 logits; CPU autocast runs
    # cross_entropy in float32 anyway, so this is the raw loop's number (docs/fabric.md)
    return loss_fn(model(batch.x), batch.y)


# -----------------------------------------------------------------------------
# checkpoints: fabric.save (rank 0 writes), a rename makes them complete, fabric.load restores in place


def resume_iterator(loader, epoch: int, skip: int, rng: dict | None):
    """The epoch's batches from batch `skip` on.

    Fabric's loader calls set_epoch(n) with n = the number of times it has been iterated
    (lightning/fabric/wrappers.py:320): the epoch only in a process that started at epoch 0. A resumed
    process counts from 0 again and would replay epoch 0's order: start the count at this epoch (in
    a run that was not resumed it already is).
    Fabric's loader is a generator: the DataLoader iterator, and the seed it draws from torch's RNG,
    are made at the first next(), not at iter(). A checkpoint taken at an epoch's end holds the state
    before that draw (restored first); one taken mid-epoch, the state after it (restored after skipping)."""
    loader._num_iter_calls = epoch
    if rng is not None and skip == 0:
        set_rng_state(rng)
    batches = iter(loader)
    for _ in range(skip):  # mid-epoch resume: skip what was already trained
        next(batches)
    if rng is not None and skip > 0:
        set_rng_state(rng)
    return batches


def save_checkpoint(cfg, fabric: Fabric, run_dir: Path, stateful: dict, progress: dict, recorder) -> None:
    """Everything that decides what comes next, every rank's RNG included; rank 0 writes."""
    recorder.set_phase("checkpoint")
    recorder.flush()  # the trace up to this step is on disk before the checkpoint that resumes after it
    rng = [rng_state()]
    if fabric.world_size > 1:  # fabric.all_gather takes tensors only
        rng = [None] * fabric.world_size
        dist.all_gather_object(rng, rng_state())
    payload = {**stateful, "progress": progress, "world_size": len(rng), "rng": rng}
    payload["sampler"] = {"seed": cfg.seed_everything, "epoch": progress["epoch"]}
    folder = run_dir / "checkpoints"
    suffix = SHARDED_SUFFIX if cfg.trainer.strategy == "fsdp" else ".pt"
    path = folder / f"step-{progress['global_step']:08d}{suffix}"
    tmp = folder / f".{path.name}.tmp"
    # fabric.save turns modules, optimizers and schedulers into state dicts and writes on rank 0 (then
    # waits for everyone); under FSDP2 every rank writes its shard into a folder (DCP). Its write is
    # atomic by itself, but the name must appear after the fault hook, as in the raw loop: a hidden
    # name, then the rename
    fabric.save(tmp, payload)
    if fabric.is_global_zero:
        maybe_inject_fault(progress["global_step"], "checkpoint-write")
        os.replace(tmp, path)  # a crash before this line leaves the previous checkpoint the newest
        if cfg.checkpoint.keep_last != -1:
            for old in list_checkpoints(folder)[: -cfg.checkpoint.keep_last]:
                shutil.rmtree(old) if old.is_dir() else old.unlink()
    fabric.barrier()  # nobody runs ahead (or resumes) before the checkpoint is on disk
    recorder.set_phase("train")


def load_checkpoint(fabric: Fabric, path: Path, stateful: dict) -> tuple[dict, list]:
    try:
        # weights_only: a checkpoint is data, never code. fabric.load restores the stateful objects in
        # place (onto their device) and hands back the rest
        rest = fabric.load(path, stateful, weights_only=True)
    except Exception as err:  # corrupt, truncated, pickled objects, another model's shape
        raise ConfigError(f"checkpoint {path} cannot be loaded: {one_line(str(err))[:400]}") from None
    if rest["world_size"] != fabric.world_size:
        raise ConfigError(
            f"checkpoint {path} was written by {rest['world_size']} processes, "
            f"this run has {fabric.world_size}: the data split would differ"
        )
    return rest["progress"], rest["rng"]


# -----------------------------------------------------------------------------
# training


def train(cfg, fabric: Fabric, run_dir: Path, ckpt_path: Path | None) -> int:
    rank, world_size = fabric.global_rank, fabric.world_size
    check_world_size(cfg.data, world_size)

    # model, optimizer, precision
    model = build_net(cfg.model)
    init_params_sha256 = params_sha256(model)  # this rank's weights as built, before DDP's broadcast
    if cfg.trainer.strategy == "fsdp":
        # FSDP2: shard first (the strategy's parallelize_fn), then build the optimizer over the DTensors
        fabric_model = fabric.setup_module(model)
        optimizer = fabric.setup_optimizers(build_optimizer(fabric_model.parameters(), cfg.model))
        scheduler = build_scheduler(optimizer, cfg.model)
    else:
        optimizer = build_optimizer(model.parameters(), cfg.model)
        scheduler = build_scheduler(optimizer, cfg.model)
        # to the device, DDP (which broadcasts rank 0's parameters), the precision plugin around forward and step
        fabric_model, optimizer = fabric.setup(model, optimizer)
    # Lightning's Trainer re-seeds (reset_seed) when its DDP strategy sets up, after the model's init
    # drew from the RNG (lightning/pytorch/strategies/ddp.py:200); Fabric's DDP strategy does not
    # (lightning/fabric/strategies/ddp.py:222, _setup_distributed). The same call here, or dropout
    # masks differ from the first step
    reset_seed()

    # resume: the checkpoint's progress, and this rank's RNG state to restore at the loop's first iterator
    stateful = {"model": fabric_model, "optimizer": optimizer, "scaler": fabric.strategy.precision}
    if scheduler is not None:
        stateful["scheduler"] = scheduler
    start, rng = {"epoch": 0, "batches_done": 0, "global_step": 0}, None
    if ckpt_path is not None:
        start, rng_states = load_checkpoint(fabric, ckpt_path, stateful)
        rng = rng_states[rank]
        fabric.print(f"resuming from {ckpt_path} (epoch {start['epoch']}, step {start['global_step']})")
    if fabric.is_global_zero:
        run_dir.mkdir(parents=True, exist_ok=True)
    fabric.barrier()
    train_loader, sampler, val_loader = build_loaders(cfg, fabric)
    extra_meta = {"device": str(fabric.device), "resumed_from": str(ckpt_path) if ckpt_path else None}
    recorder = TraceRecorder(run_dir, side=SIDE, config=cfg.to_dict(), extra_meta=extra_meta)
    recorder.start(
        facts={"init_params_sha256": init_params_sha256, "sampler": sampler_facts(sampler)},
        resumed_from_step=start["global_step"] if ckpt_path else None,
    )
    k, clip = cfg.trainer.accumulate_grad_batches, cfg.trainer.gradient_clip_val
    every_n_steps, every_n_epochs = cfg.checkpoint.every_n_train_steps, cfg.checkpoint.every_n_epochs
    precision = fabric.strategy.precision
    fabric.print(
        f"world_size {world_size}, device {fabric.device}, backend {dist.get_backend()}, "
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
            # no sampler.set_epoch here: Fabric's loader calls it as it is iterated (see resume_iterator)
            batches, rng = resume_iterator(train_loader, epoch, skip, rng), None
            quiet = not (fabric.is_global_zero and cfg.trainer.enable_progress_bar)
            batches = tqdm(batches, f"epoch {epoch}", len(train_loader), leave=False, disable=quiet, initial=skip)
            for batch_idx, batch in enumerate(batches, start=skip):
                # Lightning steps on the epoch's final batch too, with a shorter accumulation
                last_micro = (batch_idx + 1) % k == 0 or batch_idx + 1 == len(train_loader)
                if batch_idx % k == 0:
                    optimizer.zero_grad(set_to_none=True)
                    step_losses, step_indices, step_batches = [], [], []
                # all but the last micro-batch skip DDP's all-reduce (Fabric calls DDP's no_sync)
                with fabric.no_backward_sync(fabric_model, enabled=not last_micro):
                    loss = batch_loss(fabric_model, batch) / k  # divided by k always, as Lightning does
                    fabric.backward(loss)  # scales the loss when the precision has a GradScaler
                step_losses.append(loss.detach())
                step_indices.append(batch.index)
                step_batches.append(batch)
                if not last_micro:
                    continue
                lr = optimizer.param_groups[0]["lr"]
                if clip is not None and cfg.trainer.strategy != "fsdp":
                    # unscales, clips the optimizer's parameters, returns the norm before clipping (torch's
                    # clip_grad_norm_ is get_total_norm + scaling); error_if_nonfinite=False is torch's
                    # default and the raw loop's (Fabric's is True, lightning/fabric/fabric.py:534)
                    grad_norm = fabric.clip_gradients(fabric_model, optimizer, max_norm=clip, error_if_nonfinite=False)
                else:
                    if getattr(precision, "scaler", None) is not None:
                        precision.unscale_gradients(optimizer)  # measure true gradients, not scaled ones
                    params = [p for group in optimizer.param_groups for p in group["params"]]
                    grad_norm = total_grad_norm([p.grad for p in params if p.grad is not None])  # FSDP2: full grads
                    if clip is not None:  # FSDP2 (no scaler): clip over the DTensors, as the raw loop does
                        fabric.clip_gradients(fabric_model, optimizer, max_norm=clip, error_if_nonfinite=False)
                optimizer.step()  # through the precision plugin: scaler.step + update under 16-mixed
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
                    save_checkpoint(cfg, fabric, run_dir, stateful, progress, recorder)  # the epoch's last: below
            skip = 0
            if scheduler and cfg.model.lr_schedule_interval == "epoch":
                scheduler.step()  # before validation, as Lightning does
            if val_loader is not None and (epoch + 1) % cfg.trainer.check_val_every_n_epoch == 0:
                recorder.set_phase("validation")
                result = validate(fabric_model, val_loader, fabric.device, cfg.model.num_classes)
                recorder.record_validation(epoch, global_step, result)
                fabric.print(f"epoch {epoch} val_loss {result['val_loss']:.4f} val_acc {result['val_acc']:.4f} "
                             f"({result['val_count']} samples)")  # fmt: skip
            fabric.print(f"epoch {epoch} step {global_step} loss {recorder.last_loss():.4f}")
            epoch_due = every_n_epochs and (epoch + 1) % every_n_epochs == 0
            if epoch_due or (every_n_steps and global_step % every_n_steps == 0):
                progress = {"epoch": epoch, "batches_done": len(train_loader), "global_step": global_step}
                save_checkpoint(cfg, fabric, run_dir, stateful, progress, recorder)
    except BaseException as err:  # let the harness know which rank failed and why
        recorder.close()
        write_error_file(run_dir, err)
        raise
    recorder.set_phase("finished")
    recorder.finish(model, train_seconds=time.perf_counter() - started)
    fabric.print(f"done: {recorder.meta.get('params_sha256', '')[:16]} in {run_dir}")
    return 0


# -----------------------------------------------------------------------------
# validation


@torch.no_grad()
def validate(model, loader, device, num_classes: int) -> dict:
    model.eval()
    metrics = ValidationMetrics(num_classes).to(device)
    for batch in loader:
        # Fabric's wrapper: autocast as in training, float32 logits (ValidationMetrics upcasts anyway).
        # A DDP forward without grad syncs nothing for a model without buffers
        metrics.update(model(batch.x), batch.y)
    model.train()
    return metrics.compute()  # synced across ranks by torchmetrics


# -----------------------------------------------------------------------------
# main


def fail(err: Exception) -> int:
    print(f"{PROG}: error: {one_line(str(err))}", file=sys.stderr)
    return 2


def parse_args(argv: list[str]):
    """raw/train.py's parser (same keys, same errors); a leading `fit` is accepted, as
    `python -m lightning_impl fit` takes one."""
    if argv[:1] == ["fit"]:
        argv = argv[1:]
    if "-h" in argv or "--help" in argv:
        parser = build_raw_parser()
        parser.prog = PROG
        parser.print_help()
        sys.exit(0)
    cfg = parse_raw_config([a for a in argv if a != "--resume"])
    check_fsdp_plan(cfg.model, cfg.fsdp)
    return cfg, "--resume" in argv


def check_before_launch(cfg, resume: bool) -> tuple[Path, Path | None]:
    """Every check that can fail on bad input, before Fabric's launcher starts another process."""
    devices, num_nodes = world_shape(cfg)
    if devices != "auto":
        check_world_size(cfg.data, devices * num_nodes)
    check_master_port_free(devices * num_nodes if devices != "auto" else num_nodes)
    run_dir = resolve_run_dir(cfg.run_dir, SIDE)
    os.environ[RUN_DIR_ENV] = str(run_dir)  # Fabric's launcher re-runs us with this environment
    ckpt_path = find_checkpoint(cfg, resume or restarted(), run_dir)
    check_fresh_run_dir(run_dir, resuming=ckpt_path is not None or restarted())
    return run_dir, ckpt_path


def main(argv: list[str]) -> int:
    try:
        cfg, resume = parse_args(argv)
        set_determinism(cfg.seed_everything, cfg.threads, cfg.trainer.deterministic)
        run_dir, ckpt_path = check_before_launch(cfg, resume)
        fabric = setup(cfg)
    except (ConfigError, RunDirError, ValueError) as err:  # Fabric's own argument errors are ValueErrors
        return fail(err)
    try:
        return train(cfg, fabric, run_dir, ckpt_path)
    except (ConfigError, RunDirError) as err:  # a checkpoint that cannot be loaded: found before training
        return fail(err)
    except BaseException as err:
        traceback.clear_frames(err.__traceback__)  # drops train()'s DDP wrapper before cleanup() (see there)
        raise
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
