"""--tolerance noise: the control runs. One side runs again under changes that alter only how its
sums round, and how far each drifts from that side is the noise the pair is judged against
(compare/noise.py): on CPU with ATen's scalar kernels (ATEN_CPU_CAPABILITY=default); anywhere with
its initial weights moved one ulp up or down (model.init_ulps), twice, with different draws."""

from __future__ import annotations

import os
from pathlib import Path

from ddp_parity.harness.launch import Launch, build_launch, side_parts

# name -> (config flags, environment)
WEIGHT_CONTROLS = {
    "ulp-a": (["--model.init_ulps", "1", "--model.init_ulps_seed", "1"], {}),
    "ulp-b": (["--model.init_ulps", "1", "--model.init_ulps_seed", "2"], {}),
}
KERNEL_CONTROL = {"aten-default": ([], {"ATEN_CPU_CAPABILITY": "default"})}
SPARE_CONTROL = {"ulp-c": (["--model.init_ulps", "1", "--model.init_ulps_seed", "3"], {})}


def control_side(args, sides: list[str]) -> str:
    """The side the controls repeat: the first that carries no difference of its own (a --mistake
    runs on raw, --set-SIDE changes one side), else the first."""
    for side in sides:
        name = side_parts(side)[0]
        if not getattr(args, f"set_{name}", None) and not (args.mistake and name == "raw"):
            return side
    return sides[0]


def controls_for(plan) -> dict:
    """ATen's scalar kernels where the side computes on the CPU and does not already use them; else a
    third weight control."""
    on_cpu = plan.cfg.trainer.accelerator == "cpu"
    already_scalar = os.environ.get("ATEN_CPU_CAPABILITY", "").lower() == "default"
    return {**WEIGHT_CONTROLS, **(KERNEL_CONTROL if on_cpu and not already_scalar else SPARE_CONTROL)}


def control_launches(args, plan, out: Path) -> list[Launch]:
    side = control_side(args, plan.sides)
    return [
        build_launch(
            side,
            args.config,
            plan.nproc,
            plan.flags(side) + flags,
            out,
            plan.cfg.threads,
            lightning_launcher=args.lightning_launcher,
            nnodes=plan.nnodes,
            extra_env=env,
            name=f"{side.replace(':', '-')}-control-{name}",
        )
        for name, (flags, env) in controls_for(plan).items()
    ]


def controls_varied(plan) -> list[dict]:
    """What each control of `control_launches` changes, in its order: {config flag or environment: value}
    (report.json `noise.control_setups[].varied`)."""
    return [
        {**{flag.removeprefix("--"): value for flag, value in zip(flags[::2], flags[1::2])}, **env}
        for flags, env in controls_for(plan).values()
    ]
