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
WATCH_STEP_ENV = "DDP_PARITY_WATCH_STEP"  # the module watch's steps, checked by the harness before launch
ALL = "all"


class TraceFormatError(ValueError):
    """A trace that cannot be read; the message names the file and what is wrong."""


def malformed(path, line: int | None, key: str | None, problem: str) -> TraceFormatError:
    """The one error of every reader: `malformed trace: FILE, line N, `KEY`: what is wrong`."""
    where = [str(path)] + ([f"line {line}"] if line is not None else []) + ([f"`{key}`"] if key else [])
    return TraceFormatError(f"malformed trace: {', '.join(where)}: {problem}")


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
            beat = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError):  # a damaged heartbeat is no heartbeat
            continue
        if type(beat) is dict:
            found[int(path.stem[4:])] = beat
    return found


def parse_watch_steps(value: str) -> frozenset[int] | str:
    """`3`, `1,5,9`, `all` or `none` (the value of DDP_PARITY_WATCH_STEP)."""
    text = value.strip().lower()
    if text == ALL:
        return ALL
    if text in ("none", "off", ""):
        return frozenset()
    try:
        steps = frozenset(int(part) for part in text.split(","))
    except ValueError:
        steps = frozenset({0})
    if min(steps) < 1:
        raise ValueError(
            f"{WATCH_STEP_ENV}={value!r}: expected an optimizer step number >= 1, a comma-separated list "
            "of them, `all` or `none`"
        )
    return steps
