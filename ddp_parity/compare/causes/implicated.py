"""What a recorded fact can and cannot explain, judged from the records alone:

- a value whose text holds a memory address (a function, any object recorded by its repr: `<function f at
  0x7f...>`) differs between any two processes; it is compared by its stable identity, the text without the
  address (a function's qualified name), never as a difference of addresses;
- a setup fact that cannot act on the first divergence is not its cause: an optimizer fact (its class, its
  param groups) where the runs part before any update (a batch, a loss or a gradient at the first step);
  a cuDNN flag where every rank ran on a CPU;
- ranks that record the same indices at a step consumed the same samples only where their batch digests,
  where recorded, agree (per-rank datasets record positions in their own partition).
"""

from __future__ import annotations

import re

from ddp_parity.compare.causes.base import Context
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.walk import records_of

ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable(value):
    """`value` with every memory address taken out of its text (`<function f at 0x7f..>` -> `<function f>`)."""
    if isinstance(value, str):
        return ADDRESS.sub("", value)
    if isinstance(value, list | tuple):
        return [stable(v) for v in value]
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items()}
    return value


def holds_address(value) -> bool:
    return stable(value) != value


# the quantities recorded before the optimizer's update of a step: at the first step none of them can
# depend on the optimizer
BEFORE_UPDATE = ("samples", "batch", "loss", "grad_norm")
# the configuration keys that act only on a CUDA device
CUDA_ONLY_FLAGS = ("cudnn_benchmark", "cudnn_deterministic", "allow_tf32_cudnn", "allow_tf32_matmul")


def before_any_update(ctx: Context) -> dict | None:
    """The first divergence where it precedes every update: at the first compared step, in what is
    computed before the optimizer steps. None otherwise."""
    first = ctx.earliest
    if not first or ctx.walk is None or ctx.walk.steps_equal_before != 0 or first.get("quantity") not in BEFORE_UPDATE:
        return None
    meta = ctx.meta("a")
    if meta.get("resumed_from") or ctx.meta("b").get("resumed_from"):
        return None  # a resumed run updated before its first record
    return first


def _devices(meta: dict) -> set[str]:
    out = {str(meta["device"])} if meta.get("device") else set()
    ranks = meta.get("ranks")
    for r in ranks if isinstance(ranks, list) else []:
        if isinstance(r, dict) and r.get("device"):
            out.add(str(r["device"]))
    return out


def cpu_only(ctx: Context) -> bool:
    """Every recorded device of both sides is a CPU (and each side recorded one)."""
    devices = [_devices(ctx.meta(s)) for s in ("a", "b")]
    return all(devices) and all(d.split(":")[0] == "cpu" for ds in devices for d in ds)


def cannot_explain(ctx: Context, found: Finding) -> str | None:
    """Why `found`, a setup finding, cannot be the cause of this comparison's first divergence (a sentence),
    or None where it may be."""
    first = before_any_update(ctx)
    if found.category == "param_groups" and first is not None:
        return (
            f"the optimizer's setup differs ({found.headline}), but the runs part at step {first.get('step')} in "
            f"the {first.get('quantity')}, before any optimizer update: that difference cannot explain it"
        )
    if found.kind == "config.torch_flags" and cpu_only(ctx):
        keys = list((found.evidence.get("values") or {}).keys())
        if keys and all(k.rsplit(".", 1)[-1] in CUDA_ONLY_FLAGS for k in keys):
            flags = ", ".join(k.rsplit(".", 1)[-1] for k in keys)
            return f"{flags} differ(s), but every rank of both runs ran on a CPU, where these flags act on nothing"
    return None


def shared_refuted(ctx: Context, side: str, ranks: list[int], step) -> bool:
    """Whether the ranks' recorded batch digests at `step` differ although their indices agree: the indices
    are then positions in each rank's own dataset, not the same samples."""
    digests = set()
    for r in ranks:
        record = next((rec for rec in records_of(ctx.run(side), r) if rec.get("step") == step), None)
        digest = record.get("batch_digest") if record else None
        if digest is None:
            return False  # unrecorded on a rank: the indices are all there is
        digests.add(str(digest))
    return len(digests) > 1
