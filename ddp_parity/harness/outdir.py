"""The output directory: checked before anything runs, claimed for the run's life, never silently
mixed with older results or another run's.

A run claims its folder exclusively (`DirClaim`: an flock on a lock file inside it, which the kernel
drops when the process ends, even by SIGKILL, so a claim is never stale); a second run on the same
folder is refused with exit 2 before it launches anything. With --overwrite the results already
there are moved aside into a hidden folder under that claim; once the new run has written its
report they are deleted, and if it never gets that far (interrupted, an error) the new files are
removed and the old ones put back. A run killed outright (SIGKILL) cannot do that itself: the next
run that claims the folder does it. Files that are not a run's results (a user's own notes) are
never moved, deleted or counted as results.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import time
from pathlib import Path

from ddp_parity.compare.report import HTML_FILE, PLOT_FILE, REPORT_FILE
from ddp_parity.harness.exits import UsageError
from ddp_parity.harness.launch import REPO

ASIDE_PREFIX = ".overwritten-"  # older results moved aside while a new run writes
DISCARD_PREFIX = ".discarded-"  # older results being deleted after the new run committed
OWN_PREFIXES = (ASIDE_PREFIX, DISCARD_PREFIX, ".probe-")  # what OutDir itself puts in a folder
CLAIM_FILE = ".ddp-parity.lock"
MATRIX_FILE = "matrix.json"
RESULT_FILES = (REPORT_FILE, HTML_FILE, PLOT_FILE, MATRIX_FILE)
RESULT_SUFFIXES = (".log", ".marker")  # each side's log, a fault's marker
RUNS_DIR = REPO / "runs"  # the one place inside the checkout where results may land


def default_out(kind: str = "compare") -> Path:
    """runs/<kind>-<time> of the working directory, or of the checkout when working inside it."""
    here = Path.cwd()
    base = RUNS_DIR if here.is_relative_to(REPO) else here / "runs"
    return base / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_not_in_checkout(out: Path, option: str = "--out") -> None:
    """Results never land among the sources: inside the checkout only under runs/."""
    path = Path(os.path.abspath(out))
    if path.is_relative_to(REPO) and not path.is_relative_to(RUNS_DIR):
        raise UsageError(
            f"{option} {out}: is inside the source checkout {REPO}; results go outside it or under {RUNS_DIR}"
        )


def check_out(out: Path, overwrite: bool, option: str = "--out", everything: bool = False) -> None:
    """Before launching: a directory (or one that can be made) outside the sources, writable,
    holding no results (`everything`: holding nothing, the folder being one run directory)."""
    check_not_in_checkout(out, option)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{option} {out}: exists and is not a directory; name a directory")
    if out.is_dir() and results_in(out, everything) and not overwrite and not interrupted_in(out):  # see OutDir
        raise UsageError(f"{option} {out} already holds results; choose another directory or pass --overwrite")
    ancestor = out
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{option} {out}: {ancestor} is not a directory; name a directory")


def is_result(entry: Path) -> bool:
    """What a run writes into its folder: run directories, the reports, the plot, logs."""
    if entry.name.startswith("."):
        return False
    if entry.is_dir() and not entry.is_symlink():
        return True
    return entry.name in RESULT_FILES or entry.name.endswith(RESULT_SUFFIXES)


def results_in(out: Path, everything: bool = False) -> list[Path]:
    """A run's results in `out`; `everything`: whatever it holds but the claim and what --overwrite moved
    aside (a run directory, every file of which a run wrote, as `ddp-parity record --out` fills)."""
    if everything:
        return [p for p in out.iterdir() if p.name != CLAIM_FILE and not p.name.startswith(OWN_PREFIXES)]
    return [p for p in out.iterdir() if is_result(p)]


def interrupted_in(out: Path) -> list[Path]:
    """What a run killed outright left: results it had moved aside, or was deleting."""
    return [p for p in out.iterdir() if p.name.startswith((ASIDE_PREFIX, DISCARD_PREFIX))]


class DirClaim:
    """`with DirClaim(path, option):` holds `path` for one run (the folder must exist). A second
    claim, from this or any process, raises UsageError naming the holder."""

    def __init__(self, path: Path, option: str = "--out"):
        self.path, self.option = Path(path), option
        self.lock = self.path / CLAIM_FILE
        self.fd: int | None = None

    def __enter__(self) -> DirClaim:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        try:
            fd = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise UsageError(f"{self.option} {self.path}: cannot write there ({err.strerror or err})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino != os.stat(self.lock).st_ino:  # its holder released and removed it meanwhile
                raise BlockingIOError
        except (BlockingIOError, FileNotFoundError):
            os.close(fd)
            raise UsageError(
                f"{self.option} {self.path} is in use by another run ({self._holder()}); wait for it to end "
                "or choose another directory"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}\n".encode())
        self.fd = fd

    def _holder(self) -> str:
        try:
            return self.lock.read_text().strip() or "starting"
        except OSError:
            return "just ended"

    def release(self) -> None:
        if self.fd is None:
            return
        self.lock.unlink(missing_ok=True)  # removed while still held: a waiting claim sees another inode
        os.close(self.fd)
        self.fd = None


def recover_interrupted(out: Path, everything: bool = False) -> None:
    """Finish what a run killed outright left undone (the caller holds the claim, so that run is
    gone): results it had moved aside go back in place of its incomplete ones; older results it was
    deleting after its report are deleted."""
    for entry in interrupted_in(out):
        if entry.name.startswith(DISCARD_PREFIX):
            shutil.rmtree(entry, ignore_errors=True)
    for aside in sorted(p for p in interrupted_in(out) if p.name.startswith(ASIDE_PREFIX)):
        restore_aside(out, aside, everything)
        print(
            f"note: {out} held {aside.name}, results an interrupted --overwrite run had moved aside; "
            "they are back in place of that run's incomplete files",
            file=sys.stderr,
        )


def remove_entry(entry: Path) -> None:
    shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()


def restore_aside(out: Path, aside: Path, everything: bool = False) -> None:
    for entry in results_in(out, everything):
        remove_entry(entry)
    for entry in aside.iterdir():
        os.replace(entry, out / entry.name)
    aside.rmdir()


class OutDir:
    """`with OutDir(path, overwrite) as out:` makes the folder (checking it can be written), claims
    it, and keeps older results until the new run is complete (`out.commit()`)."""

    def __init__(self, path: Path, overwrite: bool, option: str = "--out", everything: bool = False):
        self.path, self.overwrite, self.option = Path(path), overwrite, option
        self.everything = everything  # the folder is one run directory: every entry counts as a result
        self.aside: Path | None = None
        self.committed = False
        self.created = False
        self.claim = DirClaim(self.path, option)

    def __enter__(self) -> Path:
        check_out(self.path, self.overwrite, self.option, self.everything)
        self.created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / f".probe-{os.getpid()}"
            probe.write_text("")
            probe.unlink()
        except OSError as err:
            raise UsageError(f"{self.option} {self.path}: cannot write there ({err.strerror or err})") from None
        self.claim.acquire()
        try:
            self._take_over()
        except BaseException:
            self.claim.release()
            raise
        return self.path

    def _take_over(self) -> None:
        """Under the claim: what an interrupted run left is put right, then the results are checked
        again (another run may have written them since the first check) and moved aside."""
        recover_interrupted(self.path, self.everything)
        old = results_in(self.path, self.everything)
        if old and not self.overwrite:
            raise UsageError(
                f"{self.option} {self.path} already holds results; choose another directory or pass --overwrite"
            )
        if old:
            self.aside = self.path / f"{ASIDE_PREFIX}{os.getpid()}"
            self.aside.mkdir()
            for entry in old:
                os.replace(entry, self.aside / entry.name)

    def commit(self) -> None:
        """The new run's results are complete: the older ones go."""
        self.committed = True

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self._settle(exc_type)
        finally:
            self.claim.release()
            if exc_type is not None and self.created and not any(self.path.iterdir()):
                self.path.rmdir()  # refused before anything was written: leave no empty folder

    def _settle(self, exc_type) -> None:
        if self.aside is None:
            return
        if self.committed:  # renamed first: a kill during the deletion leaves nothing to put back
            discarded = self.aside.with_name(DISCARD_PREFIX + self.aside.name.removeprefix(ASIDE_PREFIX))
            os.replace(self.aside, discarded)
            shutil.rmtree(discarded, ignore_errors=True)
            return
        restore_aside(self.path, self.aside, self.everything)  # the new run never finished: back to the old results
