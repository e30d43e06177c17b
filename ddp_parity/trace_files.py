"""The trace's file layout, its format error and the heartbeat reader: what the harness needs
while the runs train, without torch (ddp_parity.trace, the recorder, re-exports all of it).

Importing torch costs the harness seconds; keeping it off the way to the launches lets the
harness import the comparison in the background while the sides train (harness/preload.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FORMAT_VERSION = 1
TRACE_DIR = "trace"
META_FILE = "meta.json"
FINAL_PARAMS_FILE = "final.safetensors"
VALIDATION_FILE = "validation.jsonl"
HEARTBEAT_S = 1.0  # at most one progress write per second: cheap, and enough to see a stall


class TraceFormatError(ValueError):
    """A trace that cannot be read; the message names the file and what is wrong."""


def write_json_atomic(path: Path, payload: dict) -> None:
    """Write to a temporary file, then rename: a crash never leaves half a file behind."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def read_progress(run_dir: str | os.PathLike) -> dict[int, dict]:
    """Each rank's last heartbeat ({rank: {"step", "epoch", "time"}}); ranks without one are absent."""
    found = {}
    for path in (Path(run_dir) / TRACE_DIR).glob("rank*.progress"):
        try:
            found[int(path.stem[4:])] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return found
