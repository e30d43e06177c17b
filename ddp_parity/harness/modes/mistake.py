"""--mistake: the raw side run with one classic DDP mistake (raw/mistakes.py), to see the diagnosis."""

from __future__ import annotations

import importlib.util
import sys

from ddp_parity.harness.exits import EXIT_EQUIVALENT, UsageError
from ddp_parity.harness.launch import REPO, side_parts


def catalogue() -> dict:
    """The catalogue of raw/mistakes.py (loading it does not import the training script)."""
    spec = importlib.util.spec_from_file_location("raw_mistakes", REPO / "raw" / "mistakes.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.MISTAKES


def print_catalogue() -> int:
    for mistake in catalogue().values():
        print(f"{mistake.name:34s} {mistake.summary} (expect: {mistake.expected})")
    return EXIT_EQUIVALENT


def mistake_overrides(name: str | None, sides: list[str], fault: str | None = None) -> list[str]:
    """The config flags a mistake needs on every side (checked: the mistake exists, raw runs, and a
    mistake that shows only on a restarted run gets its --fault)."""
    if not name:
        return []
    found = catalogue()
    if name not in found:
        raise UsageError(f"--mistake {name!r}: not in the catalogue ({', '.join(found)}); see --mistake list")
    if not any(side_parts(side)[0] == "raw" for side in sides):
        raise UsageError(f"--mistake {name}: the mistake is made on the raw side; include raw in --sides")
    if getattr(found[name], "needs_fault", False) and not fault:
        raise UsageError(
            f"--mistake {name}: it shows only on a crashed-and-resumed run; add --fault RANK:STEP with STEP "
            "after the first checkpoint (e.g. --fault 1:6 with 4 steps per epoch)"
        )
    return list(found[name].overrides)
