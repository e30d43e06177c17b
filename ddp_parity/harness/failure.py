"""Which side and rank failed first, and the lines of its error that say why (log scraping)."""

from __future__ import annotations

import re

from ddp_parity.harness.launch import Outcome

PEER_FAILURE = re.compile(
    r"connection closed by peer|connection reset|broken pipe|DistBackendError|NCCL communicator was aborted",
    re.IGNORECASE,
)
ERROR_LINE = re.compile(r"error:|\w+Error\b|exitcode\s*:", re.IGNORECASE)


def failure_report(outcome: Outcome) -> dict:
    """The root error of a failed side: a rank's error file that is not a peer's broken connection,
    the stall the watcher saw, or the error lines of the log when no rank wrote a file."""
    if outcome.stall:
        return {
            "side": outcome.side,
            "rank": None,
            "summary": outcome.describe(),
            "stall": outcome.stall,
            "error_lines": [],
        }
    errors = outcome.errors
    root = next(
        (e for e in errors if not PEER_FAILURE.search(e.get("message", "") + e.get("type", ""))),
        errors[0] if errors else None,
    )
    if root is not None:
        lines = [f"{root['type']}: {root['message']}"] + root.get("traceback", "").strip().splitlines()[-6:]
        return {"side": outcome.side, "rank": root["rank"], "summary": outcome.describe(), "error_lines": lines}
    # no error file (the rank died before it knew its run directory, or was killed): the log
    rank = None
    match = re.search(r"Root Cause.*?rank\s*:\s*(\d+)", outcome.log_tail, re.DOTALL)
    if match:
        rank = int(match.group(1))
    said = [
        line
        for line in outcome.log_tail.splitlines()
        if ERROR_LINE.search(line) and not line.lstrip().startswith(("File ", "raise ", "torch.distributed.elastic"))
    ]
    return {
        "side": outcome.side,
        "rank": rank,
        "summary": outcome.describe(),
        "error_lines": list(dict.fromkeys(said))[-6:] or outcome.log_tail.splitlines()[-12:],
    }
