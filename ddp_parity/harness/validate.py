"""Everything the harness checks before it launches or writes anything: one line naming the input
and what would be right, exit 2 (see docs/bad-input.md)."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ddp_parity.config import ConfigError, RunConfig, check_world_size, parse_raw_config
from ddp_parity.harness import launch
from ddp_parity.harness.exits import UsageError
from ddp_parity.harness.launch import SIDES, STRATEGIES, is_side, side_parts, strategy_flags
from ddp_parity.harness.program import CONSOLE_SCRIPT
from ddp_parity.trace_files import (
    HEARTBEAT_S,
    TRACE_DIR,
    WATCH_STEP_ENV,
    iter_records,
    load_meta,
    parse_watch_steps,
    trace_ranks,
)

NOISE_FACTOR = 10.0  # compare/noise.py's FACTOR (that module imports torch: not read here)
HARNESS_ONLY_KEYS = ("run_dir", "run-dir", "config")  # the harness sets these per side
CONFIG_SECTIONS = ("trainer", "model", "data", "checkpoint")


def check_tolerances(rtol: float, atol: float) -> None:
    for name, value in (("--rtol", rtol), ("--atol", atol)):
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"{name} {value}: must be a finite number, 0 or more (0: exact)")


# above this no distance could ever leave the envelope (relative distances are at most 1): a factor
# that large is a typo, and its bounds overflow a plot
MAX_NOISE_FACTOR = 1e6


def check_noise_options(args) -> None:
    """--tolerance noise, --noise-control and --noise-factor: what they combine with, refused here.
    `args.tolerance` and `args.noise_factor` are None when not given: resolved here to their defaults."""
    if args.noise_factor is not None:
        if not (math.isfinite(args.noise_factor) and 1 < args.noise_factor <= MAX_NOISE_FACTOR):
            raise UsageError(
                f"--noise-factor {args.noise_factor}: must be a finite number above 1 and at most "
                f"{MAX_NOISE_FACTOR:g} (default {NOISE_FACTOR:g})"
            )
        if args.tolerance != "noise" and not args.noise_control:
            raise UsageError(
                "--noise-factor: only with --tolerance noise (or --noise-control); the exact verdict has no factor"
            )
    if args.noise_control:
        if not args.traces:
            raise UsageError("--noise-control: only with --traces (a launch runs its own controls: --tolerance noise)")
        if args.tolerance == "exact":
            raise UsageError(
                "--tolerance exact with --noise-control: the controls judge the pair against noise; drop one of them"
            )
        args.tolerance = "noise"
    args.tolerance = args.tolerance or "exact"
    args.noise_factor = args.noise_factor or NOISE_FACTOR
    if args.tolerance != "noise":
        return
    if args.rtol or args.atol:
        raise UsageError("--tolerance noise: measures its own tolerance; drop --rtol/--atol")
    if args.traces and not args.noise_control:
        raise UsageError(
            "--tolerance noise with --traces: name the control runs with --noise-control RUN (RUN_A's code run "
            "again under a change of rounding alone)"
        )
    if args.matrix:
        raise UsageError("--tolerance noise: not with --matrix yet; run the row alone with --tolerance noise")


def check_trace_pair(run_a: Path, run_b: Path) -> None:
    """--traces RUN_A RUN_B: two runs (a folder and a link to it are one run), each holding the trace
    of every rank its meta.json counts. A run with a rank's file missing (a host's traces not
    collected) would be compared on the ranks it has, and pass."""
    if run_a.resolve() == run_b.resolve():
        raise UsageError(
            f"--traces {run_a} {run_b}: the same run twice ({run_a.resolve()}); name the two runs to compare"
        )
    for run in (run_a, run_b):
        check_rank_files(run)
    if not any(records_a_step(run) for run in (run_a, run_b)):
        raise UsageError(
            f"--traces {run_a} {run_b}: neither run recorded an optimizer step (every trace/rank*.jsonl is empty); "
            "there is nothing to compare: record each optimizer step (TraceRecorder.record) or check the runs trained"
        )


def records_a_step(run: Path) -> bool:
    """Some rank of the run recorded a step (the first record of each rank's file is read, no more)."""
    return any(next(iter_records(run, rank), None) is not None for rank in trace_ranks(run))


def check_rank_files(run: Path) -> None:
    world = load_meta(run).get("world_size")  # types checked: a world of 0 or -1 is a damaged meta.json
    if world is None:
        return  # an older or hand-written meta.json: the ranks found are all that is known
    ranks = trace_ranks(run)
    missing = [r for r in range(world) if r not in ranks]
    extra = [r for r in ranks if r >= world]
    if missing or extra:
        which = missing or extra
        files = ", ".join(f"rank{r}.jsonl" for r in which[:4])
        files += f" and {len(which) - 4} more" if len(which) > 4 else ""
        problem = "no" if missing else "an unexpected"
        raise UsageError(
            f"{run / TRACE_DIR}: {problem} {files} (meta.json world_size {world}: rank0..rank{world - 1}); "
            "collect every rank's trace files (from every host) into the run directory"
        )


def stall_setting(value: float | None) -> tuple[float | None, bool]:
    """--stall-timeout as (seconds, adaptive): unset adapts to the run, <= 0 is off, below the
    heartbeat interval is refused (a healthy rank could not show progress that often)."""
    if value is None:
        return None, True
    if not math.isfinite(value):
        raise UsageError(f"--stall-timeout {value}: must be a number of seconds (<= 0: off)")
    if value <= 0:
        return None, False
    if value < HEARTBEAT_S:
        raise UsageError(
            f"--stall-timeout {value}: below the heartbeat interval ({HEARTBEAT_S:g} s) every healthy run would "
            f"look stalled; use at least {HEARTBEAT_S:g}, or 0 to turn stall detection off"
        )
    return value, False


def parse_sides(text: str) -> list[str]:
    """--sides A,B[,C]: two or three different sides from raw, lightning, fabric, each optionally with
    a strategy (`raw:fsdp`, named `raw-fsdp` in the report): raw:ddp,raw:fsdp compares DDP with FSDP2."""
    sides = [s.strip().replace(":", "-") for s in text.split(",")]
    unknown = [s for s in sides if not is_side(s)]
    if unknown:
        raise UsageError(
            f"--sides {text}: unknown side {unknown[0].replace('-', ':')!r}; choose from {', '.join(SIDES)}, "
            f"each optionally with :{' or :'.join(STRATEGIES)}"
        )
    if len(set(sides)) != len(sides):
        raise UsageError(f"--sides {text}: a side is named twice; name each of {', '.join(SIDES)} at most once")
    if len(sides) < 2:
        raise UsageError(f"--sides {text}: name at least two sides to compare, e.g. raw,lightning")
    return sides


def check_one_side_options(args, sides: list[str]) -> None:
    """--set-SIDE for a side that is not launched could not take effect: refused, not ignored."""
    for side in SIDES:
        if getattr(args, f"set_{side}", None) and side not in sides:
            raise UsageError(
                f"--set-{side}: {side} is not among the sides ({','.join(sides)}); add it to --sides "
                f"(e.g. --sides {','.join([*sides, side])}) or drop the option"
            )


def check_watch_env() -> None:
    """DDP_PARITY_WATCH_STEP reaches every side through the environment: refused here, not by a
    side after it started."""
    value = os.environ.get(WATCH_STEP_ENV)
    if value is None:
        return
    try:
        parse_watch_steps(value)
    except ValueError as err:
        raise UsageError(f"environment: {err}") from None


# what an installed package does without a checkout (its twins are never packaged): the no-checkout line
WITHOUT_A_CHECKOUT = (
    f"`{CONSOLE_SCRIPT} --traces RUN_A RUN_B`, `{CONSOLE_SCRIPT} slurm`, the plugin "
    "(`from ddp_parity import TraceRecorder, TraceCallback`) and `ddp_parity.testing.assert_parity`"
)


def check_twins_in_checkout() -> None:
    """The twins are files of a source checkout (only ddp_parity is packaged): installed from a wheel,
    there is nothing to launch, and the line says what works without one, before any default config
    or --out is looked at."""
    repo = launch.REPO  # read when called: a test stands a folder without twins in for it
    twins = {f"{launch.RAW_SCRIPT}": launch.RAW_SCRIPT, f"{launch.LIGHTNING_PACKAGE}/": launch.LIGHTNING_PACKAGE}
    missing = [name for name, path in twins.items() if not (repo / path).exists()]
    if missing:
        raise UsageError(
            f"{' and '.join(missing)} not found in {repo}: the twins run from a source checkout of "
            f"ddp-parity (pip install -e CHECKOUT); from an installed package these work: {WITHOUT_A_CHECKOUT}"
        )


def check_side_available(side: str) -> None:
    """A side's module is in this checkout (the Fabric twin is newer than the other two)."""
    from ddp_parity.harness.launch import LIGHTNING_MODULES, REPO

    if side not in LIGHTNING_MODULES:
        return
    module = LIGHTNING_MODULES[side][1]
    base = REPO.joinpath(*module.split("."))
    if not (base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()):
        raise UsageError(f"--sides {side}: `python -m {module}` is not in this checkout ({REPO})")


def to_flags(assignments: list[str], option: str) -> list[str]:
    """`data.batch_size=16` -> ["--data.batch_size", "16"]; keys the harness sets itself are refused."""
    flags = []
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w.-]*", key):
            raise UsageError(f"{option} {item!r}: expected KEY=VALUE with a dotted config key, e.g. data.batch_size=16")
        if key in HARNESS_ONLY_KEYS:
            raise UsageError(
                f"{option} {key}: the harness sets `{key}` itself for each side (use --out for where runs go"
                f"{', --config for the file' if key == 'config' else ''})"
            )
        flags += [f"--{key}", value]
    return flags


def check_config_file(path: str) -> None:
    """The file exists, is YAML, and its sections are mappings (`trainer: 5` is refused by name)."""
    import yaml

    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"--config {path}: no such file")
    try:
        content = yaml.safe_load(file.read_text())
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"--config {path}: cannot read it ({err})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"--config {path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if content is None:
        raise ConfigError(
            f"--config {path}: the file is empty (no YAML mapping); name a config with trainer:, model:, data: "
            "sections, e.g. configs/default.yaml"
        )
    if not isinstance(content, dict):
        raise ConfigError(f"--config {path}: expected a mapping of sections (trainer:, model:, data:, ...)")
    for section in CONFIG_SECTIONS:
        if section in content and not isinstance(content[section], (dict, type(None))):
            raise ConfigError(
                f"--config {path}: `{section}` must be a mapping of keys (e.g. `{section}: {{key: value}}`), "
                f"got {content[section]!r}"
            )
    if content.get("run_dir") is not None:
        raise ConfigError(f"--config {path}: `run_dir` is set by the harness for each side; remove it (use --out)")


def resolve_config(config: str, flags: list[str]) -> RunConfig:
    check_config_file(config)
    return parse_raw_config(["--config", config, *flags])


def check_accelerator(cfg: RunConfig) -> None:
    """The accelerator asked for exists here; settings the two sides would silently run differently.
    A CPU run is checked without importing torch: its seconds of start-up would delay the launch."""
    if cfg.trainer.accelerator == "cpu":
        check_precision(cfg, on_cpu=True)
        return
    import torch

    if cfg.trainer.accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"`trainer.accelerator` {cfg.trainer.accelerator}: no CUDA device on this machine "
            "(torch.cuda.is_available() is False); use cpu or auto"
        )
    check_precision(cfg, on_cpu=not torch.accelerator.is_available())


def check_precision(cfg: RunConfig, on_cpu: bool) -> None:
    if cfg.trainer.precision == "16-mixed" and on_cpu:
        raise ConfigError(
            "`trainer.precision` 16-mixed (fp16 with GradScaler) needs a CUDA device: on CPU Lightning "
            "runs bf16-mixed instead (with only a warning), so the two sides would not run the same "
            "thing; use bf16-mixed on CPU"
        )


def total_steps(cfg: RunConfig, world_size: int) -> int:
    """Optimizer steps each rank makes: DistributedSampler pads to ceil(N / world), the DataLoader
    drops a short last batch with drop_last, and the optimizer also steps on an epoch's last batch."""
    per_rank = math.ceil(cfg.data.num_samples / world_size)
    batches = per_rank // cfg.data.batch_size if cfg.data.drop_last else math.ceil(per_rank / cfg.data.batch_size)
    return cfg.trainer.max_epochs * math.ceil(batches / cfg.trainer.accumulate_grad_batches)


def check_against_network_and_world(configs: list[RunConfig], world_size: int, fault: str | None, steps: int) -> None:
    """The checks that go down to the network, the data and the fault plan, made last and together:
    each config's FSDP plan against the modules of its network (which needs torch), the raw loop's own
    check that every rank gets a sample (Lightning would train with empty ranks), and --fault
    RANK:STEP[:KIND], which must name a rank of the run and a step it makes (a fault that cannot fire
    would test nothing)."""
    for cfg in configs:
        if cfg.fsdp.wrap is not None:  # named modules: checked against the network
            from ddp_parity.sharding import check_fsdp_plan

            check_fsdp_plan(cfg.model, cfg.fsdp)
        check_world_size(cfg.data, world_size)
    if not fault:
        return
    from ddp_parity.faults import parse_fault

    try:
        rank, step, _ = parse_fault(fault)
    except ValueError as err:
        raise UsageError(f"--fault: {err}") from None
    if rank >= world_size:
        raise UsageError(
            f"--fault {fault}: rank {rank} is outside the run (world size {world_size}: ranks 0..{world_size - 1})"
        )
    if not 1 <= step <= steps:
        raise UsageError(f"--fault {fault}: step {step} is outside the run (steps 1..{steps})")


# a slow machine's floating-point rate, for the default run timeout only (a safety net: stalls are
# caught by the heartbeats, so this errs long; a healthy big run must never be stopped by it)
SLOW_FLOPS = 2e8


def default_timeout(cfg: RunConfig, steps: int, world_size: int) -> float:
    """Start-up, a per-step allowance, and the arithmetic of training (3 passes) and validation (1)
    over every sample and epoch at a slow machine's rate."""
    width, depth = cfg.model.hidden_dim, cfg.model.depth
    params = cfg.model.input_dim * width + max(depth - 1, 0) * width * width + width * cfg.model.num_classes
    passes = cfg.trainer.max_epochs * (3 * cfg.data.num_samples + cfg.data.val_samples)
    return 120.0 + 0.5 * steps + 2 * params * passes / world_size / SLOW_FLOPS


@dataclass
class Plan:
    """A launch mode's validated inputs: what every side runs and the figures derived from them."""

    cfg: RunConfig
    sides: list[str]
    both: list[str]  # flags for every side
    only: dict[str, list[str]]  # flags for one side
    nproc: int
    nnodes: int
    timeout: float
    total_steps: int
    key_map: object = None
    extra: dict = field(default_factory=dict)
    stall: tuple[float | None, bool] = (None, True)  # --stall-timeout read once: (seconds, adaptive)

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes

    def flags(self, side: str) -> list[str]:
        return self.both + self.only.get(side, [])

    def side_launch(self, args, side: str, out: Path, **options) -> launch.Launch:
        """`side`'s launch under this plan (its config, world, flags, threads; a raw side carries the
        --mistake); `options` as build_launch takes them (launcher, restarts, name, environment)."""
        options.setdefault("lightning_launcher", args.lightning_launcher)
        mistake = args.mistake if side_parts(side)[0] == "raw" else None
        flags, threads = self.flags(side), self.cfg.threads
        return launch.build_launch(
            side, args.config, self.nproc, flags, out, threads, nnodes=self.nnodes, mistake=mistake, **options
        )


def plan_launch(args, mistake_overrides: list[str] | None = None) -> Plan:
    """Validate a launch's inputs, for every side, before anything is launched or written."""
    stall = stall_setting(args.stall_timeout)
    sides = args.sides
    check_one_side_options(args, sides)
    check_watch_env()
    for side in sides:
        check_side_available(side_parts(side)[0])
    both = to_flags(args.overrides, "--set") + list(mistake_overrides or [])
    only = {side: to_flags(getattr(args, f"set_{side}") or [], f"--set-{side}") for side in SIDES}
    for side in sides:  # a side's own strategy, after its --set-SIDE flags (as build_launch orders them)
        only[side] = only[side_parts(side)[0]] + strategy_flags(side)
    configs = [resolve_config(args.config, both)]
    configs += [resolve_config(args.config, both + only[side]) for side in sides if only[side]]
    cfg = configs[0]
    nproc = args.nproc or (cfg.trainer.devices if cfg.trainer.devices != "auto" else 2)
    nnodes = args.nnodes or cfg.trainer.num_nodes
    for side_cfg in configs:
        check_accelerator(side_cfg)
    steps = total_steps(cfg, nproc * nnodes)
    if steps < 1:  # both sides would train nothing, and two empty traces compare as nothing
        raise UsageError(
            f"this config makes no optimizer step ({cfg.data.num_samples} samples over {nproc * nnodes} ranks, "
            f"batch_size {cfg.data.batch_size}, drop_last {cfg.data.drop_last}, max_epochs {cfg.trainer.max_epochs}): "
            "there would be nothing to compare; give each rank at least one full batch"
        )
    key_map = None
    if args.strip_prefix or args.key_map:  # the comparison's module imports torch: only for a map to build
        from ddp_parity.harness.comparing import build_key_map

        key_map = build_key_map(args.strip_prefix, args.key_map)
    timeout = args.timeout or default_timeout(cfg, steps, nproc * nnodes)
    check_against_network_and_world(configs, nproc * nnodes, args.fault, steps)
    return Plan(cfg, sides, both, only, nproc, nnodes, timeout, steps, key_map, stall=stall)
