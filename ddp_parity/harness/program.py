"""The harness's name as the user started it, said by --help, the error and interrupt lines and the
commands it suggests, so that each can be pasted back: `ddp-parity` (the console script, the one an
installed package has) or `compare/run.py` (the checkout's thin script)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

CONSOLE_SCRIPT = "ddp-parity"  # [project.scripts] in pyproject.toml
CHECKOUT_SCRIPT = "compare/run.py"


def program_name(argv0: str | None = None) -> str:
    """`compare/run.py` when the process was started as the checkout's script (from any directory),
    else `ddp-parity`: the console script, and any caller of the harness's main() in-process."""
    path = Path(os.path.abspath(sys.argv[0] if argv0 is None else argv0))
    return CHECKOUT_SCRIPT if path.parts[-2:] == tuple(Path(CHECKOUT_SCRIPT).parts) else CONSOLE_SCRIPT


def harness_command(argv0: str | None = None) -> str:
    """What to type to run the harness the way it was started: `python compare/run.py` or `ddp-parity`."""
    name = program_name(argv0)
    return f"python {name}" if name == CHECKOUT_SCRIPT else name
