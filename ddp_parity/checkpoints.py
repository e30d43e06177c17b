"""Checks on a checkpoint path before a run starts: one line naming the flag, nothing written first.

`python -m lightning_impl fit --ckpt_path X` calls `check_lightning_ckpt_path(X)` before the
Trainer is built (Lightning itself fails on every rank with a traceback, after writing its config
and error files into the run directory)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from ddp_parity.config import ConfigError

SHARDED_SUFFIX = ".dcp"  # raw FSDP2 checkpoints: a torch.distributed.checkpoint folder, one shard per rank
TRAIN_STATE_FILE = "train_state.pt"  # in a sharded checkpoint's folder: progress, RNG, schedule (rank 0)

# the names Lightning resolves itself rather than reading a file
LIGHTNING_CKPT_NAMES = ("last", "best", "hpc", "registry")


def check_lightning_ckpt_path(path: str | None) -> None:
    """None, a name Lightning resolves (`last`, ...), or a readable checkpoint file; else ConfigError."""
    if path is None or path in LIGHTNING_CKPT_NAMES or path.startswith("registry:"):
        return
    file = Path(path)
    what = "name a checkpoint file a run wrote (a .ckpt under its checkpoints/), or `last`"
    if not file.exists():
        raise ConfigError(f"--ckpt_path {path}: no such file; {what}")
    if file.is_dir():
        raise ConfigError(f"--ckpt_path {path}: is a directory; {what}")
    problem = checkpoint_problem(file)
    if problem:
        raise ConfigError(f"--ckpt_path {path}: not a readable checkpoint ({problem}); {what}")


def checkpoint_problem(file: Path) -> str | None:
    """Why a file is not a checkpoint torch.save wrote (its zip format), or None. Reads the archive's
    checksums, not its tensors: a truncated or overwritten file is caught without unpickling it."""
    try:
        if not zipfile.is_zipfile(file):
            return "not a torch.save archive: cut off, or not a checkpoint at all"
        with zipfile.ZipFile(file) as archive:
            bad = archive.testzip()
            if bad is not None:
                return f"{bad} fails its checksum: the file is damaged"
            if not any(name.endswith("data.pkl") for name in archive.namelist()):
                return "no data.pkl inside: not written by torch.save"
    except (OSError, zipfile.BadZipFile, EOFError) as err:
        return str(err) or type(err).__name__
    return None


def find_checkpoint(cfg, resume: bool, run_dir: Path) -> Path | None:
    """`--ckpt_path FILE`, or with --resume / --ckpt_path last / a torchrun restart the newest complete
    checkpoint: only renamed files count, never a leftover .tmp."""
    if cfg.ckpt_path not in (None, "last"):
        if not (Path(cfg.ckpt_path).is_file() or is_sharded_checkpoint(Path(cfg.ckpt_path))):
            raise ConfigError(f"`ckpt_path` {cfg.ckpt_path} does not exist")
        return Path(cfg.ckpt_path)
    if not (resume or cfg.ckpt_path == "last"):
        return None
    found = list_checkpoints(run_dir / "checkpoints")
    if not found and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":  # not a torchrun restart
        raise ConfigError(f"--resume: no checkpoint in {run_dir / 'checkpoints'}")
    return found[-1] if found else None  # a torchrun restart before the first checkpoint starts over


def list_checkpoints(folder: Path) -> list[Path]:
    """A run's complete checkpoints, oldest first: `step-N.pt` files (DDP) and `step-N.dcp` folders
    (FSDP2); never a leftover `.tmp`, which is hidden and not yet renamed."""
    found = [p for p in folder.glob("step-*.pt") if p.is_file()]
    found += [p for p in folder.glob(f"step-*{SHARDED_SUFFIX}") if is_sharded_checkpoint(p)]
    return sorted(found, key=lambda p: p.name)


def is_sharded_checkpoint(path: Path) -> bool:
    """A folder torch.distributed.checkpoint wrote (its `.metadata` is written last; the folder is
    renamed into place only after every rank has written)."""
    return path.is_dir() and (path / ".metadata").is_file()
