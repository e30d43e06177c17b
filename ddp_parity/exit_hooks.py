"""A recorder's records reach the disk however the process ends: atexit covers a normal exit and an
uncaught exception (which also gets its error file), SIGTERM/SIGINT handlers flush and then do what
was there before (a framework's handler, Python's KeyboardInterrupt, or the default: die by the
signal, so a launcher sees the same exit).

The recorder is reached through weak references only: a hook left in sys.excepthook's chain never
keeps a run alive. At exit every live recorder is closed, which stops and joins its heartbeat thread
before the interpreter tears down (a daemon thread still running then is ended where it stands)."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable

_LIVE_RECORDERS: weakref.WeakSet = weakref.WeakSet()


def install_exit_hooks(recorder, handle_signals: bool) -> list[Callable[[], None]]:
    """Hook `recorder` (its record_error, close and flush) into the process's end; returns what
    undoes it (for remove_exit_hooks). Signal handlers only from the main thread."""
    _LIVE_RECORDERS.add(recorder)
    previous_hook = sys.excepthook
    ref = weakref.ref(recorder)

    def excepthook(exc_type, exc, tb):
        if (live := ref()) is not None:
            if not issubclass(exc_type, KeyboardInterrupt):
                live.record_error(exc)
            live.close()
        previous_hook(exc_type, exc, tb)

    sys.excepthook = excepthook
    restores = [lambda: setattr(sys, "excepthook", previous_hook) if sys.excepthook is excepthook else None]
    if not handle_signals or threading.current_thread() is not threading.main_thread():
        return restores
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(signum)
        handler = _flushing_handler(ref, previous)
        signal.signal(signum, handler)
        restores.append(
            lambda s=signum, h=handler, p=previous: signal.signal(s, p) if signal.getsignal(s) is h else None
        )
    return restores


def _flushing_handler(ref, previous):
    def on_signal(signum, frame):
        try:
            if (live := ref()) is not None:
                live.flush()
        except Exception:
            pass
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:  # the default action: die by this signal, as without us
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return on_signal


def remove_exit_hooks(recorder, restores: list[Callable[[], None]]) -> list[Callable[[], None]]:
    """Undo install_exit_hooks; returns what is left to undo (signal handlers can only be changed
    from the main thread: from another they stay, harmless)."""
    _LIVE_RECORDERS.discard(recorder)
    if threading.current_thread() is not threading.main_thread():
        return restores
    for restore in reversed(restores):
        restore()
    return []


@atexit.register
def _close_recorders_at_exit() -> None:
    for recorder in list(_LIVE_RECORDERS):
        try:
            recorder.close()
        except Exception:
            pass
