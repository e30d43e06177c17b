"""The comparison's imports (torch, numpy, matplotlib: seconds of start-up), made in a background
thread while the sides train, so that none of them waits between the last launch and the verdict.

The launch path itself imports none of them (ddp_parity.trace_files, not ddp_parity.trace). A
module both threads import is imported once: the main thread waits on the module's import lock.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading

from ddp_parity.compare.report import load_pyplot

# what the default mode uses once the sides have ended (its own imports of them are where they are used)
COMPARISON_MODULES = (
    "ddp_parity.harness.comparing",
    "ddp_parity.harness.replay",
    "ddp_parity.harness.modes.fault",
    "ddp_parity.harness.modes.reference",
)


def yield_the_cores_to_the_ranks() -> None:
    """Lower this thread alone to the lowest priority (Linux schedules threads one by one): where the
    ranks need every core, the imports take only what they leave idle instead of slowing them."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux: the imports just run alongside
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def import_comparison() -> None:
    """Import every module of the comparison, and pyplot with its backend. An import that fails
    here fails again, with its own traceback, where the main thread imports it."""
    yield_the_cores_to_the_ranks()
    try:
        for name in COMPARISON_MODULES:
            importlib.import_module(name)
        load_pyplot()
    except Exception:  # the main thread imports it again and reports it there
        pass


@contextlib.contextmanager
def importing_comparison():
    """Run the block while the comparison is imported in the background; on leaving (normally or
    not) wait for the imports to end, so that none is left half done when the process exits."""
    thread = threading.Thread(target=import_comparison, name="ddp-parity-import", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
