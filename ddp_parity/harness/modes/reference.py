"""--reference: one plain process trained on the global batches DDP sees; each side measured against it."""

from __future__ import annotations

from pathlib import Path

from ddp_parity.compare.findings import EQUIVALENT, criterion_in_words
from ddp_parity.compare.report import noise_line
from ddp_parity.harness.comparing import REFERENCE_TOLERANCE, compare_against_reference, describe_criterion


def reference_report(out: Path, rtol: float, atol: float, sides: list[str], noise=None) -> dict:
    """Each side against the reference: within REFERENCE_TOLERANCE (or --rtol/--atol), or under
    --tolerance noise against the noise the controls measured (`noise`: compare.noise.Controls)."""
    if noise is None:
        rtol, atol = (rtol, atol) if (rtol or atol) else REFERENCE_TOLERANCE
    against = {side: compare_against_reference(out / side, out / "reference", rtol, atol, noise) for side in sides}
    criterion = describe_criterion(rtol, atol) if noise is None else "noise"
    return {"criterion": criterion, "run": str(out / "reference"), "against": against}


def format_reference(ref: dict) -> str:
    crit = ref["criterion"]
    if crit == "noise":
        lines = ["reference (one process on the global batches; against the measured noise):"]
    else:
        lines = [f"reference (one process on the global batches; {criterion_in_words(crit)}):"]
    for side, r in ref["against"].items():
        loss, params = r["per_step"]["loss"], r["params"]
        lines.append(
            f"  {side:9s} vs reference: {r['verdict']}; samples equal {r['per_step']['samples']['equal']}/"
            f"{r['per_step']['samples']['compared']} steps; loss max abs {loss['max_abs']:.3g} "
            f"max rel {loss['max_rel']:.3g}; params max abs {params['max_abs']:.3g}; "
            f"validation max rel {r['validation']['max_rel']:.3g}"
        )
        if r.get("noise"):
            lines.append(f"  {' ' * 9}  {noise_line(r['noise']).strip()}")
    return "\n".join(lines)


def all_equivalent(ref: dict) -> bool:
    return all(r["verdict"] in EQUIVALENT for r in ref["against"].values())
