"""The output directory: checked before anything runs, never silently mixed with older results.

With --overwrite the results already there are moved aside into a hidden folder first; once the new
run has written its report they are deleted, and if it never gets that far (interrupted, an error)
the new files are removed and the old ones put back. The folder holds one run's files, never two.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from ddp_parity.harness.exits import UsageError

ASIDE_PREFIX = ".overwritten-"


def default_out(kind: str = "compare") -> Path:
    return Path("runs") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_out(out: Path, overwrite: bool, option: str = "--out") -> None:
    """Before launching: a directory (or one that can be made) that is writable and holds no results."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{option} {out}: exists and is not a directory; name a directory")
    if out.is_dir() and _results(out) and not overwrite:
        raise UsageError(f"{option} {out} already holds results; choose another directory or pass --overwrite")
    ancestor = out
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{option} {out}: {ancestor} is not a directory; name a directory")


def _results(out: Path) -> list[Path]:
    return [p for p in out.iterdir() if not p.name.startswith(ASIDE_PREFIX)]


class OutDir:
    """`with OutDir(path, overwrite) as out:` makes the folder (checking it can be written) and keeps
    older results until the new run is complete (`out.commit()`)."""

    def __init__(self, path: Path, overwrite: bool, option: str = "--out"):
        self.path, self.overwrite, self.option = Path(path), overwrite, option
        self.aside: Path | None = None
        self.committed = False
        self.created = False

    def __enter__(self) -> Path:
        check_out(self.path, self.overwrite, self.option)
        self.created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / f".probe-{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as err:
            raise UsageError(f"{self.option} {self.path}: cannot write there ({err.strerror or err})") from None
        old = _results(self.path)
        if old:
            self.aside = self.path / f"{ASIDE_PREFIX}{os.getpid()}"
            self.aside.mkdir()
            for entry in old:
                os.replace(entry, self.aside / entry.name)
        return self.path

    def commit(self) -> None:
        """The new run's results are complete: the older ones go."""
        self.committed = True

    def __exit__(self, exc_type, exc, tb) -> None:
        if self.aside is None:
            if exc_type is not None and self.created and not any(self.path.iterdir()):
                self.path.rmdir()  # refused before anything was written: leave no empty folder
            return
        if self.committed:
            shutil.rmtree(self.aside, ignore_errors=True)
            return
        for entry in _results(self.path):  # the new run never finished: back to the old results
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        for entry in self.aside.iterdir():
            os.replace(entry, self.path / entry.name)
        self.aside.rmdir()
