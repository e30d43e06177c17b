"""Nothing the harness launched outlives it, even when the harness is killed with SIGKILL.

The harness starts each launch with a parent-death signal (`prctl(PR_SET_PDEATHSIG, SIGKILL)`,
set between fork and exec), so torchrun or Lightning's first process dies with it. Their own
children (torchrun's workers, Lightning's re-launched ranks) are one generation further away;
the environment variable below asks each of them, when it imports ddp_parity.trace, to watch its
parent and kill itself the moment the parent is gone (its parent pid changes when it is
re-parented to init or a subreaper).
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading

LIFELINE_ENV = "DDP_PARITY_DIE_WITH_PARENT"
PR_SET_PDEATHSIG = 1
WATCH_S = 0.5


def _find_prctl():
    """libc's prctl, or None (not Linux)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# looked up here, in the parent: between fork and exec the child must not load or look up a symbol
# (another thread of the harness, importing in the background, may hold the dynamic loader's lock)
_PRCTL = _find_prctl()


def set_parent_death_signal() -> None:
    """For `subprocess.Popen(preexec_fn=...)`: SIGKILL this child when its parent dies (Linux).
    Not Linux: the harness still kills every tree it started when it exits normally."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def watch_parent_if_asked() -> None:
    """In a process the harness launched (directly or through torchrun/Lightning): die with the parent."""
    if os.environ.get(LIFELINE_ENV) != "1" or getattr(watch_parent_if_asked, "started", False):
        return
    watch_parent_if_asked.started = True
    parent = os.getppid()
    if parent == 1:  # already orphaned before we looked
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=_watch, args=(parent,), name="ddp-parity-lifeline", daemon=True).start()


def _watch(parent: int) -> None:
    stop = threading.Event()
    while not stop.wait(WATCH_S):
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
