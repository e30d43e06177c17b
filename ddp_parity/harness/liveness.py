"""Busy or blocked: when a side has stopped making progress of any kind.

Each rank's heartbeat (ddp_parity.trace, once a second) carries its step, its phase, a work
counter (ticked by every step, phase change and validation batch) and the CPU time of its
training thread. A rank makes progress when any of the first three moves, or when its training
thread used CPU between two heartbeats: a long validation, the write of a large checkpoint or a
slow first step keep that thread computing, while a rank blocked in a collective its peers never
join sleeps in the wait. A side stalls only when none of its ranks made progress for the timeout.
"""

from __future__ import annotations

DEFAULT_STALL_S = 20.0  # the floor of the adaptive timeout
ADAPT_FACTOR = 5.0  # the adaptive timeout is at least this many times the longest quiet spell seen
BUSY_CPU_FRACTION = 0.02  # CPU time per wall second above which a training thread counts as working


class Liveness:
    """Watches one side's heartbeats; `observe` returns the stall (a dict) once there is one."""

    def __init__(self, timeout: float | None, adaptive: bool = False):
        self.fixed = timeout
        self.adaptive = adaptive
        self.seen: dict[int, dict] = {}  # rank -> its previous heartbeat
        self.last_progress: float | None = None
        self.longest_quiet = 0.0  # the longest spell without progress that ended in progress

    def timeout(self) -> float | None:
        if self.adaptive:
            return max(DEFAULT_STALL_S, ADAPT_FACTOR * self.longest_quiet)
        return self.fixed

    def observe(self, beats: dict[int, dict], now: float) -> dict | None:
        progressed = any(self._rank_progressed(rank, beat) for rank, beat in beats.items())
        if progressed or self.last_progress is None and beats:
            if self.last_progress is not None:
                self.longest_quiet = max(self.longest_quiet, now - self.last_progress)
            self.last_progress = now
        if beats and all(beat.get("phase") == "finished" for beat in beats.values()):
            return None  # every rank is done (finish() is a collective); the processes are exiting
        limit = self.timeout()
        if not beats or limit is None or self.last_progress is None or now - self.last_progress <= limit:
            return None
        return {
            "ranks": {rank: beat.get("step") for rank, beat in sorted(beats.items())},
            "phases": {rank: beat.get("phase") for rank, beat in sorted(beats.items())},
            "seconds": now - self.last_progress,
            "timeout": limit,
            "adaptive": self.adaptive,
        }

    def _rank_progressed(self, rank: int, beat: dict) -> bool:
        before = self.seen.get(rank)
        if before is not None and beat.get("time") == before.get("time"):
            return False  # the same heartbeat read again
        self.seen[rank] = beat
        if before is None:
            return True
        if any(beat.get(key) != before.get(key) for key in ("step", "phase", "work")):
            return True
        return _busy(before, beat)


def _busy(before: dict, beat: dict) -> bool:
    """The training thread used CPU between two heartbeats (it computes, it does not wait)."""
    try:
        cpu = float(beat["cpu_s"]) - float(before["cpu_s"])
        wall = float(beat["time"]) - float(before["time"])
    except (KeyError, TypeError, ValueError):
        return False  # an older heartbeat without CPU time: steps and phases only
    return wall > 0 and cpu >= BUSY_CPU_FRACTION * wall
