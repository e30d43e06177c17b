"""Replay a step the module watch did not cover: when the first divergence (loss, gradients or
parameters, with equal samples) lies after the watched steps, run both sides again with
DDP_PARITY_WATCH_STEP=K into sibling run directories and localise the divergence there.

Where it plugs in (ddp_parity/harness/cli.py, launch_and_compare, after the comparison of the two
launches and the diagnosis):

    step = step_to_replay(report, launches[0].run_dir, launches[1].run_dir)
    if step is not None:
        replay = replay_and_localise(launches[0], launches[1], step, timeout, args.stall_timeout or None)
        report.sections["replay"] = replay
        report.diagnosis.module = replay["module"]

The replayed runs are the same commands with the same config; only the run directory
(`<run_dir>-watch<K>`), the rendezvous port and the one environment variable differ, so they
train bitwise as the original runs did up to step K.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ddp_parity.compare.modules import localise, needs_replay
from ddp_parity.compare.update_replay import replay_update
from ddp_parity.harness.launch import Launch, free_port, run_launches
from ddp_parity.update_dump import DUMP_ENV
from ddp_parity.watch import WATCH_STEP_ENV

# the per-step quantities a module can explain; a divergence in the samples is the data order's
REPLAYABLE = ("loss", "grad_norm", "param_digest")


def step_to_replay(first: dict | None, run_a, run_b, *, under_noise: bool = False) -> int | None:
    """The step to replay: the first divergence is a per-step loss, gradient or parameter
    difference (samples equal: they are compared first) that the module watches do not cover."""
    first = first or {}
    if under_noise:  # a bitwise module watch would name the first rounding, not the cause
        return None
    if first.get("quantity") not in REPLAYABLE or first.get("step") is None:
        return None
    step = int(first["step"])
    return step if needs_replay(run_a, run_b, step) else None


def replay_launch(launch: Launch, step: int) -> Launch:
    """The same commands into `<run_dir>-watch<step>`, on a fresh port, with WATCH_STEP_ENV=step."""
    run_dir = Path(f"{launch.run_dir}-watch{step}")
    port = str(free_port())
    commands = [_retarget(cmd, launch.run_dir, run_dir, port) for cmd in launch.commands]
    # the update of that step dumped too: the replay of the optimizer step proves or refutes an update finding
    env = {**launch.env, WATCH_STEP_ENV: str(step), DUMP_ENV: str(step), "MASTER_PORT": port}
    name = f"{launch.side}-watch{step}"
    return replace(launch, side=name, commands=commands, env=env, run_dir=run_dir,
                   log_path=launch.log_path.with_name(f"{name}.log"))  # fmt: skip


def _retarget(cmd: list[str], old_dir: Path, new_dir: Path, port: str) -> list[str]:
    out = []
    for arg in cmd:
        if arg == str(old_dir):
            arg = str(new_dir)
        elif arg.startswith("--run_dir="):
            arg = f"--run_dir={new_dir}"
        elif arg.startswith("--master_port="):
            arg = f"--master_port={port}"
        out.append(arg)
    return out


def replay_and_localise(
    launch_a: Launch, launch_b: Launch, step: int, timeout: float, stall_seconds: float | None = None, rank: int = 0
) -> dict:
    """Run both sides again watching `step` (both at once) and localise the divergence there; the update of
    that step is dumped and replayed too (rank `rank`'s).

    Returns {"step", "runs": {"a", "b"}, "module": localise(...) or None, "update": replay_update(...) or
    None, "failed": [what failed]}."""
    launches = [replay_launch(launch_a, step), replay_launch(launch_b, step)]
    outcomes = run_launches(launches, timeout, stall_seconds)
    failed = [o.describe() for o in outcomes if not o.ok]
    module = update = None
    if not failed:
        module = localise(launches[0].run_dir, launches[1].run_dir, step=step)
        update = replay_update(launches[0].run_dir, launches[1].run_dir, rank, step)
    return {
        "step": step,
        "runs": {"a": str(launches[0].run_dir), "b": str(launches[1].run_dir)},
        "module": module,
        "update": update,
        "failed": failed,
    }
