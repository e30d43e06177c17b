"""A finder that follows one module's first import: the hooks go in right after torch's, numpy.random's seed is
wrapped right after numpy.random's. Nothing of ddp-parity is imported here, and no torch: the bootstrap imports it
before the program's own first line."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys


class AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when the module `name` is first imported, it lets the import run as it would and
    calls `then(module)` right after the module has executed, before the importer can bind a name from it (torch:
    the hooks installed; numpy.random: its seed wrapped)."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # once: the real finders answer, we only follow
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then(module):
            exec_module(module)
            self.then(module)

        spec.loader.exec_module = exec_then
        return spec
