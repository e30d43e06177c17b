"""One typed config for both implementations.

The YAML file has the shape LightningCLI reads (`seed_everything`, `trainer:`, `model:`, `data:`),
plus two sections of our own that both sides understand (`threads`, `checkpoint:`). The raw loop
parses it with jsonargparse against the dataclasses below; the Lightning side feeds the `model:`
and `data:` sections to the same dataclasses through its LightningModule and DataModule, so every
key has exactly one definition, one type and one validation.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Optional


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the key."""


def _require(condition: bool, key: str, message: str) -> None:
    if not condition:
        raise ConfigError(f"`{key}` {message}")


@dataclass
class ModelConfig:
    """The network and its optimizer (the `model:` section)."""

    input_dim: int = 32
    """Features per sample; must equal `data.num_features`."""
    hidden_dim: int = 64
    """Width of each hidden layer."""
    num_classes: int = 10
    """Output classes; must equal `data.num_classes`."""
    depth: int = 1
    """Number of hidden Linear+ReLU layers (the tutorial's network has 1)."""
    dropout: float = 0.0
    """Dropout after each hidden layer (0 disables it)."""
    optimizer: Literal["adam", "adamw", "sgd"] = "adam"
    """Optimizer family."""
    lr: float = 1e-3
    """Learning rate."""
    weight_decay: float = 0.0
    """Weight decay passed to the optimizer."""
    momentum: float = 0.0
    """Momentum, for `sgd` only."""
    lr_schedule: Literal["step", "cosine"] | None = None
    """Learning-rate schedule: none, StepLR or CosineAnnealingLR."""
    lr_schedule_interval: Literal["step", "epoch"] = "epoch"
    """Step the schedule after every optimizer step or after every epoch."""
    lr_step_size: int = 1
    """StepLR: intervals between decays; CosineAnnealingLR: T_max in intervals."""
    lr_gamma: float = 0.5
    """StepLR decay factor."""
    init_ulps: int = 0
    """Move every initial weight this many units in the last place, up or down at random (seeded
    apart from training): the rounding-only change of `--tolerance noise`'s weight controls."""
    init_ulps_seed: int = 0
    """Seed of the up-or-down draws of `init_ulps` (each weight control draws its own)."""

    def __post_init__(self) -> None:
        for key in ("input_dim", "hidden_dim", "num_classes", "lr_step_size"):
            _require(getattr(self, key) > 0, f"model.{key}", f"must be positive, got {getattr(self, key)}")
        _require(self.depth >= 0, "model.depth", f"must be 0 or more, got {self.depth}")
        _require(0.0 <= self.dropout < 1.0, "model.dropout", f"must be in [0, 1), got {self.dropout}")
        _require(self.lr > 0, "model.lr", f"must be positive, got {self.lr}")
        _require(self.weight_decay >= 0, "model.weight_decay", f"must be 0 or more, got {self.weight_decay}")
        _require(self.momentum >= 0, "model.momentum", f"must be 0 or more, got {self.momentum}")
        _require(0 < self.lr_gamma <= 1, "model.lr_gamma", f"must be in (0, 1], got {self.lr_gamma}")
        _require(self.init_ulps >= 0, "model.init_ulps", f"must be 0 or more, got {self.init_ulps}")


@dataclass
class DataConfig:
    """The synthetic classification data and its loaders (the `data:` section)."""

    num_samples: int = 2000
    """Training samples."""
    val_samples: int = 0
    """Validation samples (0: no validation)."""
    num_features: int = 32
    """Features per sample."""
    num_classes: int = 10
    """Label classes."""
    data_seed: int = 0
    """Seed of the generator that builds the tensors (the same on every process)."""
    batch_size: int = 32
    """Samples per process per step; the effective batch is batch_size x world size."""
    drop_last: bool = False
    """Drop the tail so every rank gets the same number of full batches."""
    num_workers: int = 0
    """DataLoader worker processes per rank (0: load in the training process). Each iterator's
    workers are seeded from one draw of torch's global RNG, made when the iterator is created."""
    persistent_workers: bool = False
    """Keep the workers alive between epochs (needs `num_workers` > 0): the seed is then drawn once."""

    def __post_init__(self) -> None:
        for key in ("num_samples", "num_features", "num_classes", "batch_size"):
            _require(getattr(self, key) > 0, f"data.{key}", f"must be positive, got {getattr(self, key)}")
        _require(self.val_samples >= 0, "data.val_samples", f"must be 0 or more, got {self.val_samples}")
        _require(self.num_workers >= 0, "data.num_workers", f"must be 0 or more, got {self.num_workers}")
        _require(
            not self.persistent_workers or self.num_workers > 0,
            "data.persistent_workers",
            f"needs `data.num_workers` > 0, got num_workers {self.num_workers}",
        )


@dataclass
class TrainerConfig:
    """The `trainer:` keys the raw loop honours, named and typed as Lightning's Trainer has them.

    Keys marked Lightning-only are accepted so that one file serves both sides; the raw loop
    ignores them.
    """

    accelerator: Literal["auto", "cpu", "gpu", "cuda"] = "auto"
    """Where to train: `auto` takes torch.accelerator's device when there is one, else CPU."""
    devices: int | Literal["auto"] = "auto"
    """Processes per node. The raw loop takes its world size from torchrun and checks it against this."""
    num_nodes: int = 1
    """Nodes (torchrun --nnodes)."""
    strategy: Literal["ddp", "fsdp"] = "ddp"
    """`ddp`: DistributedDataParallel replicates the model; `fsdp`: FSDP2 (`fully_shard`) shards it
    by the plan in the `fsdp:` section (Lightning: ModelParallelStrategy + configure_model)."""
    max_epochs: int = 3
    """Epochs to train."""
    precision: Literal["32-true", "32", "bf16-mixed", "16-mixed"] = "32-true"
    """Numeric precision: fp32, or autocast to bf16/fp16 (fp16 with a GradScaler, CUDA only)."""
    accumulate_grad_batches: int = 1
    """Micro-batches per optimizer step."""
    gradient_clip_val: float | None = None
    """Clip the global gradient norm to this value (None: no clipping)."""
    deterministic: bool = True
    """torch.use_deterministic_algorithms and the cuDNN/cuBLAS settings that go with it."""
    num_sanity_val_steps: int = 0
    """Lightning-only: sanity validation batches before training (0 keeps both sides alike)."""
    check_val_every_n_epoch: int = 1
    """Validate every n epochs (when there is validation data)."""
    logger: bool = False
    """Lightning-only: the raw loop writes its own trace and no logger files."""
    enable_progress_bar: bool = True
    """Progress bar on rank 0."""
    enable_model_summary: bool = False
    """Lightning-only."""

    def __post_init__(self) -> None:
        if self.devices != "auto":
            _require(self.devices > 0, "trainer.devices", f"must be positive or 'auto', got {self.devices}")
        for key in ("num_nodes", "max_epochs", "accumulate_grad_batches", "check_val_every_n_epoch"):
            _require(getattr(self, key) > 0, f"trainer.{key}", f"must be positive, got {getattr(self, key)}")
        if self.gradient_clip_val is not None:
            _require(
                self.gradient_clip_val > 0,
                "trainer.gradient_clip_val",
                f"must be positive or null, got {self.gradient_clip_val}",
            )
        _require(
            self.strategy != "fsdp" or self.precision in ("32-true", "32"),
            "trainer.precision",
            f"must be 32-true with `trainer.strategy` fsdp, got {self.precision}: "
            "FSDP2 takes mixed precision from `fsdp.param_dtype` / `fsdp.reduce_dtype`",
        )
        _require(
            self.num_sanity_val_steps == 0,
            "trainer.num_sanity_val_steps",
            "must be 0: sanity validation runs only on the Lightning side and would break parity",
        )


@dataclass
class CheckpointConfig:
    """When checkpoints are written and how many are kept (the `checkpoint:` section)."""

    every_n_train_steps: int | None = None
    """Save after every n optimizer steps (None: only at epoch ends)."""
    every_n_epochs: int | None = 1
    """Save at the end of every n epochs (None: never at epoch ends)."""
    keep_last: int = 2
    """Keep the newest k checkpoints (-1: keep all)."""

    def __post_init__(self) -> None:
        for key in ("every_n_train_steps", "every_n_epochs"):
            value = getattr(self, key)
            _require(value is None or value > 0, f"checkpoint.{key}", f"must be positive or null, got {value}")
        _require(
            self.keep_last == -1 or self.keep_last > 0,
            "checkpoint.keep_last",
            f"must be positive or -1, got {self.keep_last}",
        )


FSDP_DTYPES = ("float32", "bfloat16")


@dataclass
class FSDPConfig:
    """The sharding plan both twins apply when `trainer.strategy` is fsdp (the `fsdp:` section)."""

    wrap: list[str] | None = None
    """Modules (names inside the network, e.g. `net.0`) that each get their own `fully_shard`
    before the root does; null: every Linear layer. The root takes whatever is left."""
    reshard_after_forward: bool = True
    """Free the gathered parameters after each module's forward (gathered again for backward)."""
    param_dtype: Literal["float32", "bfloat16"] = "float32"
    """MixedPrecisionPolicy.param_dtype: the dtype forward and backward compute in."""
    reduce_dtype: Literal["float32", "bfloat16"] = "float32"
    """MixedPrecisionPolicy.reduce_dtype: the dtype gradients are reduce-scattered in."""

    def __post_init__(self) -> None:
        if self.wrap is not None:
            _require(
                all(isinstance(n, str) and n for n in self.wrap),
                "fsdp.wrap",
                f"must be a list of module names or null, got {self.wrap}",
            )
        for key in ("param_dtype", "reduce_dtype"):
            value = getattr(self, key)
            _require(value in FSDP_DTYPES, f"fsdp.{key}", f"must be one of {FSDP_DTYPES}, got {value!r}")


def check_consistent(model: ModelConfig, data: DataConfig) -> None:
    """Cross-section checks that neither section can make alone."""
    _require(
        model.input_dim == data.num_features,
        "model.input_dim",
        f"({model.input_dim}) must equal data.num_features ({data.num_features})",
    )
    _require(
        model.num_classes == data.num_classes,
        "model.num_classes",
        f"({model.num_classes}) must equal data.num_classes ({data.num_classes})",
    )


def check_world_size(data: DataConfig, world_size: int) -> None:
    """Every rank must get at least one sample (DistributedSampler would otherwise pad from nothing)."""
    _require(
        data.num_samples >= world_size,
        "data.num_samples",
        f"({data.num_samples}) must be at least the world size ({world_size})",
    )


def as_dict(config) -> dict:
    return dataclasses.asdict(config)


# ---------------------------------------------------------------------------------------------
# parsing: the raw loop's parser; the Lightning CLI adds the same shared keys to its own


@dataclass
class RunConfig:
    """The whole resolved config of a raw run."""

    seed_everything: int
    threads: int
    run_dir: str | None
    ckpt_path: str | None
    trainer: TrainerConfig
    model: ModelConfig
    data: DataConfig
    checkpoint: CheckpointConfig
    fsdp: FSDPConfig

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def add_shared_arguments(parser) -> None:
    """Keys both sides read that are not Trainer, model or data keys."""
    from jsonargparse.typing import PositiveInt

    parser.add_argument(
        "--threads",
        type=PositiveInt,
        default=1,
        help="Threads per process (torch.set_num_threads and OMP_NUM_THREADS).",
    )
    parser.add_argument(
        "--run_dir",
        "--run-dir",
        type=Optional[str],  # noqa: UP045 (jsonargparse reads the annotation object)
        default=None,
        help="Where this run writes its trace, checkpoints and final parameters (default: a new folder under runs/).",
    )
    parser.add_class_arguments(CheckpointConfig, "checkpoint")
    parser.add_class_arguments(FSDPConfig, "fsdp")


def build_raw_parser():
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(
        prog="raw/train.py",
        exit_on_error=False,
        allow_abbrev=False,  # `--run_di` must never be taken for `--run_dir`: keys match exactly, as in LightningCLI
        description="Hand-written DDP training; reads the same config as the Lightning twin.",
    )
    parser.add_argument("--config", action=ActionConfigFile, help="The YAML config (LightningCLI's shape).")
    parser.add_argument(
        "--seed_everything", type=int, default=42, help="Seed for random, numpy, torch and the DistributedSampler."
    )
    parser.add_argument(
        "--ckpt_path",
        type=Optional[str],  # noqa: UP045 (jsonargparse reads the annotation object)
        default=None,
        help="`last` (same as --resume) or a checkpoint file to resume from.",
    )
    add_shared_arguments(parser)
    parser.add_class_arguments(TrainerConfig, "trainer")
    parser.add_class_arguments(ModelConfig, "model")
    parser.add_class_arguments(DataConfig, "data")
    return parser


def parse_raw_config(argv: list[str]) -> RunConfig:
    """Parse and validate; every failure is a ConfigError with one line naming the key."""
    from jsonargparse import ArgumentError

    parser = build_raw_parser()
    try:
        namespace = parser.parse_args(argv)
        init = parser.instantiate(namespace)
    except ArgumentError as err:
        raise ConfigError(one_line(str(err))) from None
    except (TypeError, ValueError) as err:
        raise ConfigError(one_line(str(err))) from None
    check_consistent(init.model, init.data)
    return RunConfig(
        seed_everything=init.seed_everything,
        threads=init.threads,
        run_dir=init.run_dir,
        ckpt_path=init.ckpt_path,
        trainer=init.trainer,
        model=init.model,
        data=init.data,
        checkpoint=init.checkpoint,
        fsdp=init.fsdp,
    )


def one_line(message: str) -> str:
    return " ".join(part.strip() for part in message.splitlines() if part.strip())
