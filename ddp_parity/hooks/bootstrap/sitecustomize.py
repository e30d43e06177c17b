"""Imported by every Python process started under `ddp-parity record` (this folder is first on PYTHONPATH).

It runs the environment's own sitecustomize, if there is one, then installs the hooks. It must never
stop the program from starting: whatever fails here is said on stderr and the program runs unrecorded.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _run_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if entry and os.path.abspath(entry) == here:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry or "."])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


try:
    _run_shadowed_sitecustomize()
except Exception as exc:  # the environment's own sitecustomize failing is not ours to stop the program for
    print(f"ddp-parity record: the environment's sitecustomize failed: {exc!r}", file=sys.stderr)

try:
    from ddp_parity.hooks import install

    install()
except Exception as exc:
    print(f"ddp-parity record: hooks not installed, the program runs unrecorded: {exc!r}", file=sys.stderr)
