"""`python -m lightning_impl fit --config configs/default.yaml`: LightningCLI over the shared config."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.strategies import ModelParallelStrategy

from ddp_parity.callback import TraceCallback
from ddp_parity.checkpoints import check_lightning_ckpt_path
from ddp_parity.config import (
    CheckpointConfig,
    ConfigError,
    DataConfig,
    FSDPConfig,
    ModelConfig,
    add_shared_arguments,
    check_consistent,
    check_world_size,
)
from ddp_parity.determinism import pin_threads
from ddp_parity.distributed import check_master_port_free, init_process_group_from_env
from ddp_parity.faults import FAULT_ENV, maybe_inject_fault
from ddp_parity.runs import RUN_DIR_ENV, RunDirError, check_fresh_run_dir, resolve_run_dir
from ddp_parity.sharding import check_fsdp_plan
from lightning_impl.module import ParityDataModule, ParityModule

# -----------------------------------------------------------------------------
# setup and teardown: raw/train.py's setup() and main(); the Trainer's DDP strategy does the rest


class ParityCLI(LightningCLI):
    """LightningCLI plus the keys the raw loop reads too (`threads`, `run_dir`, `checkpoint:`),
    and the trace callback on every run."""

    def add_arguments_to_parser(self, parser) -> None:
        add_shared_arguments(parser)

    def _parse_ckpt_path(self) -> None:
        # LightningCLI 2.6 loads --ckpt_path here, before any hook, to read its hyperparameters: a
        # missing or damaged file must be one line, not a traceback on every rank
        subcommand = self.config.get("subcommand")
        try:
            check_lightning_ckpt_path(self.config[subcommand].get("ckpt_path") if subcommand else None)
        except ConfigError as err:
            fail(str(err))
        super()._parse_ckpt_path()

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        try:
            check_consistent(ModelConfig(**config.model), DataConfig(**config.data))
            check_fsdp_plan(ModelConfig(**config.model), fsdp_plan(config.fsdp))
            check_world_size(DataConfig(**config.data), world_size(config.trainer))
        except ConfigError as err:
            fail(str(err))
        # seed_everything already ran (LightningCLI seeds before instantiating, as the raw loop
        # seeds before building Net). Pin threads and export OMP_NUM_THREADS so that Lightning's
        # launcher does not set cpu_count // processes.
        pin_threads(config.threads)
        run_dir = resolve_run_dir(config.run_dir, "lightning")
        os.environ[RUN_DIR_ENV] = str(run_dir)  # Lightning's launcher re-runs us with this environment
        if self.subcommand == "fit" and os.environ.get("LOCAL_RANK", "0") == "0" and not config.get("ckpt_path"):
            try:
                check_fresh_run_dir(run_dir, resuming=restarted())
            except RunDirError as err:
                fail(str(err))
        try:
            check_master_port_free(world_size(config.trainer))
        except ConfigError as err:
            fail(str(err))
        config.trainer.default_root_dir = str(run_dir)
        if restarted() and "RANK" in os.environ:
            # join the group before Lightning does (it then keeps it): see init_process_group_from_env
            init_process_group_from_env("gloo" if config.trainer.accelerator == "cpu" else "nccl")
        last = Path(run_dir) / "checkpoints" / "last.ckpt"
        if self.subcommand == "fit" and restarted() and not config.get("ckpt_path") and last.exists():
            config.ckpt_path = str(last)  # a torchrun restart resumes by itself, as the raw loop does

    def instantiate_trainer(self, **kwargs):
        config = self.config_init[self.subcommand] if self.subcommand else self.config_init
        run_dir = config.trainer.default_root_dir
        ckpt: CheckpointConfig = (
            CheckpointConfig(**vars(config.checkpoint))
            if not isinstance(config.checkpoint, CheckpointConfig)
            else config.checkpoint
        )
        resolved = (self.config[self.subcommand] if self.subcommand else self.config).clone()
        callbacks = list(config.trainer.get("callbacks") or [])
        callbacks += [
            TraceCallback(run_dir, side="lightning", config=resolved.as_dict()),
            build_checkpoint_callback(ckpt, run_dir),
        ]
        if os.environ.get(FAULT_ENV):
            callbacks.append(FaultInjection())
        if config.trainer.get("strategy") == "fsdp":
            kwargs["strategy"] = fsdp_strategy(config.trainer)
            self.model.sharding_plan = fsdp_plan(config.fsdp)  # applied in ParityModule.configure_model
        return super().instantiate_trainer(callbacks=callbacks, **kwargs)


def fsdp_strategy(trainer) -> ModelParallelStrategy:
    """`trainer.strategy: fsdp`: FSDP2 through ModelParallelStrategy (Lightning's FSDPStrategy is FSDP1
    and refuses a CPU), every process data-parallel; the module applies the plan in configure_model."""
    return ModelParallelStrategy(data_parallel_size=world_size(trainer), tensor_parallel_size=1)


def fsdp_plan(section) -> FSDPConfig:
    return section if isinstance(section, FSDPConfig) else FSDPConfig(**vars(section))


def world_size(trainer) -> int:
    """The world this run will have: torchrun's, or trainer.devices x trainer.num_nodes (1 where
    devices is not a count, e.g. "auto" on CPU)."""
    if "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    try:
        devices = int(trainer.devices)
    except (TypeError, ValueError):
        devices = len(trainer.devices) if isinstance(trainer.devices, list) else 1
    return devices * int(trainer.num_nodes or 1)


def fail(message: str) -> None:
    """One line naming the problem, exit code 2 (LightningCLI's parser.error would add the usage)."""
    print(f"python -m lightning_impl: error: {message}", file=sys.stderr)
    sys.exit(2)


def restarted() -> bool:
    return os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"


# -----------------------------------------------------------------------------
# checkpoints: raw/train.py's save_checkpoint, find_checkpoint and load_checkpoint


def build_checkpoint_callback(ckpt: CheckpointConfig, run_dir: str) -> ModelCheckpoint:
    """The raw loop's checkpoint policy in ModelCheckpoint terms: keep the newest `keep_last` by step."""
    return ModelCheckpoint(
        dirpath=os.path.join(run_dir, "checkpoints"),
        filename="step-{step:08d}",
        auto_insert_metric_name=False,
        monitor="step",
        mode="max",
        save_top_k=ckpt.keep_last,
        save_last=True,
        every_n_train_steps=ckpt.every_n_train_steps,
        # Lightning takes one trigger: with a step interval, steps (last.ckpt follows each save)
        every_n_epochs=None if ckpt.every_n_train_steps else ckpt.every_n_epochs,
    )


# -----------------------------------------------------------------------------
# main


def cli_main(args=None) -> ParityCLI:
    return ParityCLI(
        ParityModule,
        ParityDataModule,
        auto_configure_optimizers=False,
        save_config_kwargs={"overwrite": True},
        args=args,
    )


# -----------------------------------------------------------------------------
# fault injection: tests and demos only, out of the training code's sight


class FaultInjection(Callback):
    """Tests and demos only (DDP_PARITY_FAULT=RANK:STEP[:KIND]): crash one rank after one step, once."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        maybe_inject_fault(trainer.global_step, "step")


if __name__ == "__main__":
    cli_main()
    sys.exit(0)
