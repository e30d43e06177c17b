"""--fault RANK:STEP: every side again under torchrun --max-restarts=1 with one rank killed once;
each crashed-and-restarted run against its uninterrupted twin, and the restarted runs against each other."""

from __future__ import annotations

import itertools
from pathlib import Path

from ddp_parity.compare.findings import EQUIVALENT, Finding
from ddp_parity.faults import FAULT_ENV, MARKER_ENV
from ddp_parity.harness.comparing import compare_brief
from ddp_parity.harness.launch import Launch


def fault_launches(args, plan, out: Path) -> list[Launch]:
    """Every side again under torchrun (Lightning's too: torchrun restarts it) with one restart."""
    return [
        plan.side_launch(
            args,
            side,
            out,
            lightning_launcher="torchrun",
            max_restarts=1,
            name=f"{side}-fault",
            extra_env={FAULT_ENV: args.fault, MARKER_ENV: str(out / f"{side}-fault.marker")},
        )
        for side in plan.sides
    ]


def fault_report(out: Path, fault: str, sides: list[str], rtol: float, atol: float, noise=None) -> dict:
    from ddp_parity.trace_files import read_meta

    pairs = {}
    for side in sides:
        pairs[f"{side} vs {side}-fault"] = pair_report(out, side, f"{side}-fault", rtol, atol, noise)
    for a, b in itertools.combinations(sides, 2):
        pairs[f"{a}-fault vs {b}-fault"] = pair_report(out, f"{a}-fault", f"{b}-fault", rtol, atol, noise)
    resumed = {side: read_meta(out / f"{side}-fault").get("resumed_from") for side in sides}
    fired = {side: (out / f"{side}-fault.marker").exists() for side in sides}
    return {"fault": fault, "fired": fired, "resumed_from": resumed, "pairs": pairs}


def pair_report(out: Path, a: str, b: str, rtol: float, atol: float, noise=None) -> dict:
    """One pair's figures and, when the runs part ways, its diagnosis (a wrong resume is named here:
    the main report compares the uninterrupted runs only)."""
    from ddp_parity.compare.diagnosis import diagnose_failure

    pair = compare_brief(out / a, out / b, rtol, atol, noise)
    if pair["verdict"] not in EQUIVALENT:
        d = diagnose_failure(out / a, out / b, {"rtol": rtol, "atol": atol}, labels=(a, b)).to_json()
        pair["diagnosis"] = {k: d[k] for k in ("category", "step", "rank", "explanation", "advice", "evidence")}
    return pair


def format_fault(fault: dict) -> str:
    from ddp_parity.compare.diagnosis import format_diagnosis

    lines = [f"fault {fault['fault']} (rank:step), each side restarted by torchrun --max-restarts=1:"]
    for side, fired in fault["fired"].items():
        lines.append(
            f"  {side}: crashed: {'yes' if fired else 'NO (the fault never fired: nothing was tested)'}; resumed from "
            f"{fault['resumed_from'][side] or 'the start (no checkpoint yet)'}"
        )
    for name, pair in fault["pairs"].items():
        lines.append(
            f"  {name:30s} {pair['verdict']}; losses equal {pair['losses']['equal']}/"
            f"{pair['losses']['compared']}, params max abs {pair['params']['max_abs']:.3g}"
        )
        if pair.get("diagnosis"):
            lines += ["    " + line for line in format_diagnosis(Finding.from_json(pair["diagnosis"])).splitlines()]
    return "\n".join(lines)


def fault_passed(fault: dict) -> bool:
    """Every side crashed (a fault that never fired tested nothing) and every pair ends equal."""
    return all(fault["fired"].values()) and all(p["verdict"] in EQUIVALENT for p in fault["pairs"].values())


def fault_fired_everywhere(fault: dict) -> bool:
    return all(fault["fired"].values())
