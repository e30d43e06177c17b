"""Live progress of every launch: one line per side (phase, epoch, step of total, elapsed, rate,
ETA, latest loss), read from the heartbeats the ranks write. In a terminal the lines update in
place (rich); when stdout is not a terminal (CI logs, pipes) a plain line per side every few
seconds. A side that fails or stalls is shown the moment the watcher sees it."""

from __future__ import annotations

import sys
import time

PLAIN_EVERY_S = 5.0  # seconds between plain lines when stdout is not a terminal


def make_progress(quiet: bool, totals: dict[str, int | None] | None = None):
    """None when --quiet; otherwise the live display for a terminal or the plain one for a log."""
    if quiet:
        return None
    return LiveProgress(totals) if sys.stdout.isatty() else PlainProgress(totals)


class SideState:
    """What one side's heartbeats say, summarised across its ranks."""

    def __init__(self, total: int | None):
        self.total = total
        self.step = 0
        self.epoch = None
        self.phase = "starting"
        self.loss = None
        self.elapsed = 0.0
        self.first: tuple[float, int] | None = None  # (elapsed, step) at the first step seen

    def take_beats(self, beats: dict[int, dict], elapsed: float) -> None:
        self.elapsed = elapsed
        if not beats:
            return
        steps = [b.get("step") for b in beats.values() if isinstance(b.get("step"), int)]
        self.step = min(steps) if steps else 0  # the slowest rank's step
        epochs = [b.get("epoch") for b in beats.values() if isinstance(b.get("epoch"), int)]
        self.epoch = min(epochs) if epochs else None
        phases = sorted({str(b.get("phase") or "?") for b in beats.values()})
        self.phase = "/".join(phases)
        lead = beats.get(0) or next(iter(beats.values()))
        self.loss = lead.get("loss") if lead.get("loss") is not None else self.loss
        total = lead.get("total_steps")
        if isinstance(total, int) and total > 0:
            self.total = total
        if self.first is None and self.step > 0:
            self.first = (elapsed, self.step)

    def rate(self) -> float | None:
        if self.first is None or self.elapsed <= self.first[0] or self.step <= self.first[1]:
            return None
        return (self.step - self.first[1]) / (self.elapsed - self.first[0])

    def eta(self) -> float | None:
        rate = self.rate()
        if rate is None or not self.total:
            return None
        return max(self.total - self.step, 0) / rate

    def line(self, side: str) -> str:
        total = f"/{self.total}" if self.total else ""
        epoch = f"epoch {self.epoch} " if self.epoch is not None else ""
        rate, eta = self.rate(), self.eta()
        return (
            f"[{side}] {self.phase:10s} {epoch}step {self.step}{total}  {self.elapsed:.0f} s"
            + (f"  {rate:.2f} step/s" if rate else "")
            + (f"  eta {eta:.0f} s" if eta is not None else "")
            + (f"  loss {self.loss:.4f}" if isinstance(self.loss, (int, float)) else "")
        )


class PlainProgress:
    """Plain lines for logs: every PLAIN_EVERY_S per running side, and at once when a side ends badly."""

    def __init__(self, totals: dict | None = None):
        self.totals = totals or {}
        self.states: dict[str, SideState] = {}
        self.printed: dict[str, float] = {}

    def start(self, side: str) -> None:
        self.states[side] = SideState(self.totals.get(side))
        self.printed[side] = time.monotonic()

    def show_beats(self, side: str, beats: dict, elapsed: float, outcome=None) -> None:
        state = self.states.setdefault(side, SideState(self.totals.get(side)))
        state.take_beats(beats, elapsed)
        now = time.monotonic()
        if now - self.printed.get(side, 0.0) >= PLAIN_EVERY_S:
            self.printed[side] = now
            print(state.line(side), flush=True)

    def end(self, side: str, outcome) -> None:
        if not outcome.ok:
            print(f"[{side}] FAILED: {outcome.describe()}", flush=True)

    def close(self) -> None:
        pass


class LiveProgress(PlainProgress):
    """rich's progress bars, one per side, updated in place."""

    def __init__(self, totals: dict | None = None):
        super().__init__(totals)
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bars = Progress(
            TextColumn("[bold]{task.description:10s}"),
            TextColumn("{task.fields[phase]:12s}"),
            BarColumn(),
            TextColumn("{task.fields[where]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[speed]}"),
            TextColumn("{task.fields[loss]}"),
            refresh_per_second=4,
        )
        self.tasks: dict[str, int] = {}
        self.started = False

    def start(self, side: str) -> None:
        super().start(side)
        if not self.started:
            self.bars.start()
            self.started = True
        self.tasks[side] = self.bars.add_task(
            side, total=self.totals.get(side), phase="starting", where="", speed="", loss=""
        )

    def show_beats(self, side: str, beats: dict, elapsed: float, outcome=None) -> None:
        state = self.states.setdefault(side, SideState(self.totals.get(side)))
        state.take_beats(beats, elapsed)
        if side not in self.tasks:
            return
        rate, eta = state.rate(), state.eta()
        self.bars.update(
            self.tasks[side],
            completed=state.step,
            total=state.total,
            phase=state.phase,
            where=(f"epoch {state.epoch} " if state.epoch is not None else "")
            + f"step {state.step}/{state.total or '?'}",
            speed=(f"{rate:.2f} step/s" if rate else "") + (f" eta {eta:.0f} s" if eta is not None else ""),
            loss=f"loss {state.loss:.4f}" if isinstance(state.loss, (int, float)) else "",
        )

    def end(self, side: str, outcome) -> None:
        if side in self.tasks:
            phase = "done" if outcome.ok else "[red]FAILED" if not outcome.stall else "[red]STALLED"
            self.bars.update(self.tasks[side], phase=phase)
        if not outcome.ok:
            from rich.text import Text

            self.bars.console.print(Text(f"[{side}] FAILED: {outcome.describe()}", style="red"))

    def close(self) -> None:
        if self.started:
            self.bars.stop()
            self.started = False
