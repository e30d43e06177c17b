"""A rank's heartbeat: the progress file (`trace/rank{r}.progress`) a watcher reads — the harness's
stall detection and live progress — written by a background thread every HEARTBEAT_S.

It says the latest step, the phase, and two measures of work: `work` (ticked by every step, phase
change and tick()) and `cpu_s` (CPU time of the thread that trains). It keeps beating while the
training thread is blocked in a collective (c10d waits release the GIL): a rank whose step, work and
CPU time all stand still is waiting, one whose CPU time moves is busy (a long validation, a
checkpoint of a large model)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ddp_parity.trace_files import HEARTBEAT_S


class Heartbeat:
    """`latest()` gives what the recorder knows of the run: step, epoch, loss and total_steps."""

    def __init__(self, latest: Callable[[], dict]):
        self.phase = "startup"
        self.work = 0
        self._latest = latest
        self._path: Path | None = None
        self._cpu_clock: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, path: Path) -> None:
        """Beat into `path` from now on; the calling thread is the one whose CPU time is measured."""
        self._path = path
        try:  # the CPU clock of the thread that trains: it moves while that thread computes, not while it waits
            self._cpu_clock = time.pthread_getcpuclockid(threading.get_ident())
        except (AttributeError, OSError):
            self._cpu_clock = None
        self.write()
        self._thread = threading.Thread(target=self._beat, name="trace-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.write()

    def write(self) -> None:
        """One beat, written atomically (a watcher never reads half a file)."""
        if self._path is None:
            return
        beat = {**self._latest(), "phase": self.phase, "work": self.work, "cpu_s": self._training_cpu_s()}
        beat.update(time=time.time(), pid=os.getpid())
        tmp = self._path.with_name(self._path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(beat))
            os.replace(tmp, self._path)
        except OSError:  # the run directory went away (a test cleaning up), or a full disk: nothing to watch
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass

    def set_phase(self, phase: str) -> None:
        if phase != self.phase:
            self.phase = phase
            self.work += 1

    def tick(self) -> None:
        self.work += 1

    def stepped(self) -> None:
        """A step was recorded: work, and the first one turns "startup" into "train" (a loop that never
        names its phases still shows it)."""
        self.work += 1
        if self.phase == "startup":
            self.phase = "train"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * HEARTBEAT_S)  # its last write lands before any later one

    def _training_cpu_s(self) -> float:
        """CPU seconds of the training thread (the process's, where the platform cannot tell threads apart)."""
        if self._cpu_clock is not None:
            try:
                return time.clock_gettime(self._cpu_clock)
            except OSError:
                self._cpu_clock = None
        return time.process_time()
