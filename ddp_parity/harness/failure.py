"""Which side and rank failed first, and the lines of its error that say why (log scraping)."""

from __future__ import annotations

import re

from ddp_parity.harness.launch import Outcome

PEER_FAILURE = re.compile(
    r"connection closed by peer|connection reset|broken pipe|DistBackendError|NCCL communicator was aborted",
    re.IGNORECASE,
)
ERROR_LINE = re.compile(r"error:|\w+Error\b|exitcode\s*:", re.IGNORECASE)
# torchrun's summary of a failed job: the rank it observed failing first, and its exit code (negative:
# killed by that signal). Its "Failures:" list before it also holds the ranks torchrun itself stopped.
FAILURE_ENTRY = re.compile(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)")
SIGNAL_NAME = re.compile(r"Signal\s+\d+\s+\((SIG\w+)\)")


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
    root = next((e for e in errors if not is_peer_failure(e)), None)
    killed = killed_rank(outcome.log_tail)
    if root is None and killed is not None:  # the ranks that wrote a file only lost the one killed
        return killed_report(outcome, *killed)
    root = root or (errors[0] if errors else None)
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


def is_peer_failure(error: dict) -> bool:
    """A rank's error that only says a peer went away (its connection reset, a broken pipe)."""
    return bool(PEER_FAILURE.search(str(error.get("message", "")) + str(error.get("type", ""))))


def killed_rank(log_tail: str) -> tuple[int, int, str] | None:
    """(rank, signal number, signal name) of a rank killed by a signal (a negative exit code) as
    torchrun lists it: its root cause when that was killed; otherwise a rank of its other failures
    killed by SIGKILL, which torchrun never sends first (it stops the survivors with SIGTERM): where
    the killed rank and the peer that lost it are seen in one poll, the peer may be called first. A
    rank killed outright writes no error file of its own."""
    root_at = log_tail.rfind("Root Cause")
    entries = [(m.start() > root_at >= 0, m) for m in FAILURE_ENTRY.finditer(log_tail)]
    for is_root, match in sorted(entries, key=lambda e: not e[0]):
        code = int(match.group(2))
        if code < 0 and (is_root or code == -9):
            rank, signum = int(match.group(1)), -code
            named = SIGNAL_NAME.search(log_tail, match.end(), match.end() + 400)
            return rank, signum, named.group(1) if named else f"signal {signum}"
    return None


def killed_report(outcome: Outcome, rank: int, signum: int, name: str) -> dict:
    """The failure of a side whose rank was killed by a signal: that rank is the root cause; the
    other ranks' broken connections follow from it."""
    peers = sorted({e.get("rank") for e in outcome.errors if e.get("rank") is not None} - {rank})
    lines = [f"rank {rank} was killed by signal {signum} ({name}) (torchrun's root cause); it wrote no error"]
    if peers:
        lines.append(f"rank(s) {', '.join(map(str, peers))} then lost their connection to it (a consequence)")
    return {"side": outcome.side, "rank": rank, "summary": outcome.describe(), "error_lines": lines, "signal": signum}
