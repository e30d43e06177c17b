"""The trace: what every run records, in one format for the raw loop, the Lightning callback and
any user's own loop.

A run directory holds:
    meta.json            rank 0: format_version, side, resolved config, world size, backend,
                         device, versions, per-rank determinism facts, and (at the end) the result
                         of the replica check
    trace/rank{r}.jsonl  every rank: one JSON line per optimizer step
    validation.jsonl     rank 0: one line per validation (epoch, step, synced metrics)
    final.safetensors    rank 0: the final parameters (unwrapped from DDP)

Recording never syncs the device per step: loss, gradient norm and indices are kept as tensors
and turned into numbers every `flush_every` steps.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import threading
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ddp_parity.harness.lifeline import watch_parent_if_asked

watch_parent_if_asked()  # a process the harness launched dies with it (a no-op anywhere else)

FORMAT_VERSION = 1
TRACE_DIR = "trace"
META_FILE = "meta.json"
FINAL_PARAMS_FILE = "final.safetensors"
VALIDATION_FILE = "validation.jsonl"
INDEX_LIST_LIMIT = 4096  # longer index lists are stored as a digest plus a count
HEARTBEAT_S = 1.0  # at most one progress write per second: cheap, and enough to see a stall


class TraceFormatError(ValueError):
    """A trace that cannot be read; the message names the file and what is wrong."""


# ---------------------------------------------------------------------------------------------
# small helpers


def write_json_atomic(path: Path, payload: dict) -> None:
    """Write to a temporary file, then rename: a crash never leaves half a file behind."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def digest_indices(indices: list[int]) -> str:
    return hashlib.sha256(json.dumps(indices).encode()).hexdigest()[:16]


def batch_fingerprint(batch: Any) -> torch.Tensor | str:
    """A digest of a batch that carries no indices: sha256 of its CPU tensors' bytes, or, for
    tensors on an accelerator, their float64 sums and abs-sums kept on the device (no sync)."""
    tensors = list(_tensors_in(batch))
    if all(t.device.type == "cpu" for t in tensors):
        h = hashlib.sha256()
        for t in tensors:
            h.update(t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        return h.hexdigest()[:16]
    return torch.stack([s for t in tensors for s in (t.detach().double().sum(), t.detach().double().abs().sum())])


def _tensors_in(obj: Any) -> Iterator[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors_in(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _tensors_in(value)


def batch_indices(batch: Any) -> torch.Tensor | None:
    """The dataset indices a batch carries: a `.index` field (our `Sample`) or an `"index"` key."""
    if isinstance(batch, dict):
        found = batch.get("index", batch.get("indices"))
    else:
        found = getattr(batch, "index", None)
    return found if isinstance(found, torch.Tensor) else None


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside a DistributedDataParallel wrapper (checkpoints never carry `module.`)."""
    return model.module if hasattr(model, "module") and isinstance(model.module, torch.nn.Module) else model


def params_sha256(model: torch.nn.Module) -> str:
    """sha256 of the parameters' and buffers' bytes in registration order; names are left out so that a plain
    network and the LightningModule holding it (`net.` + its names) hash alike."""
    h = hashlib.sha256()
    for tensor in unwrap(model).state_dict().values():  # buffers too (BatchNorm's running stats)
        h.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def param_digest(model: torch.nn.Module) -> torch.Tensor:
    """A cheap per-step fingerprint of the parameters: float64 sums of the first and the last
    parameter tensors, kept on the device (no sync) until the trace is flushed."""
    params = [p for p in unwrap(model).parameters()]
    # sum(dtype=float64) casts inside the reduction (no float64 copy); bitwise equal to .double().sum() here
    return torch.stack([params[0].detach().sum(dtype=torch.float64), params[-1].detach().sum(dtype=torch.float64)])


def sampler_facts(sampler) -> dict:
    """What decides a DistributedSampler's order: its class, seed, shuffle, drop_last and shard."""
    facts = {"class": type(sampler).__name__, "num_samples": len(sampler)}
    for key in ("seed", "shuffle", "drop_last", "num_replicas", "rank"):
        if hasattr(sampler, key):
            facts[key] = getattr(sampler, key)
    return facts


def versions() -> dict:
    facts = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import lightning

        facts["lightning"] = lightning.__version__
    except ImportError:
        facts["lightning"] = None
    return facts


def _rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# ---------------------------------------------------------------------------------------------
# writing


class TraceRecorder:
    """Records one rank's trace. Use from any training loop:

    recorder = TraceRecorder(run_dir, side="my-loop", config=cfg_dict)
    recorder.start()                      # after init_process_group, on every rank
    for ...:                              # after each optimizer step:
        recorder.record(step, loss, batch_indices, epoch=epoch, lr=lr, grad_norm=norm)
    recorder.finish(model)                # every rank; rank 0 writes final params and meta
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        side: str,
        config: dict | None = None,
        extra_meta: dict | None = None,
        flush_every: int = 100,
    ):
        self.run_dir = Path(run_dir)
        self.side = side
        self.config = config or {}
        self.extra_meta = dict(extra_meta or {})
        self.flush_every = flush_every
        self.rank, self.world_size = _rank_and_world()
        self._pending: list[dict] = []
        self._last_time: float | None = None
        self._last_flushed_loss = float("nan")
        self._latest: tuple[int, int] | None = None
        self._phase = "startup"
        self._work = 0  # ticks of progress of any kind, for the heartbeat
        self._latest_loss: Any = None
        self._cpu_clock: int | None = None  # the training thread's CPU clock (set by start())
        self.total_steps: int | None = None  # optimizer steps the run will make, when the loop knows
        self._stop_beating = threading.Event()
        self._file = None
        self.meta: dict = {}

    @property
    def trace_path(self) -> Path:
        return self.run_dir / TRACE_DIR / f"rank{self.rank}.jsonl"

    def start(self, facts: dict | None = None, keep_steps_upto: int | None = None) -> None:
        """Open this rank's trace and (rank 0) write meta.json with every rank's facts.

        A collective when a process group exists. `keep_steps_upto` resumes an existing trace:
        records after that step (made before a crash) are dropped, since they are about to be
        recorded again.
        """
        self.rank, self.world_size = _rank_and_world()
        rank_facts = {
            "rank": self.rank,
            "pid": os.getpid(),
            "host": platform.node(),
            "threads": torch.get_num_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            **(facts or {}),
        }
        all_facts = [rank_facts]
        if self.world_size > 1:
            all_facts = [None] * self.world_size
            dist.all_gather_object(all_facts, rank_facts)
        self.trace_path.parent.mkdir(parents=True, exist_ok=True)
        for path in (self.trace_path, self.run_dir / VALIDATION_FILE):
            if path == self.trace_path or self.rank == 0:
                _keep_steps_upto(path, keep_steps_upto or 0)
        self._file = open(self.trace_path, "a")
        self._start_heartbeat()
        self.meta = {
            "format_version": FORMAT_VERSION,
            "side": self.side,
            "world_size": self.world_size,
            "backend": dist.get_backend() if self.world_size > 1 or dist.is_initialized() else None,
            "versions": versions(),
            "config": self.config,
            "ranks": all_facts,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "finished": False,
            **self.extra_meta,
        }
        if self.rank == 0:
            write_json_atomic(self.run_dir / META_FILE, self.meta)
        self._last_time = time.perf_counter()

    def record(
        self,
        step: int,
        loss: torch.Tensor | float,
        indices: Any = None,
        *,
        epoch: int = 0,
        lr: float | None = None,
        grad_norm: torch.Tensor | float | None = None,
        batch: Any = None,
        **extra: Any,
    ) -> None:
        """One optimizer step. Tensors are kept as they are (no sync) until the next flush."""
        now = time.perf_counter()
        entry = {
            "step": int(step),
            "epoch": int(epoch),
            "loss": _detach(loss),
            "lr": lr,
            "grad_norm": _detach(grad_norm),
            "time_s": now - self._last_time if self._last_time else None,
        }
        self._last_time = now
        if indices is not None:
            entry["indices"] = indices.detach() if isinstance(indices, torch.Tensor) else list(indices)
        elif batch is not None:
            entry["batch_digest"] = batch_fingerprint(batch)
        entry.update({k: _detach(v) for k, v in extra.items()})
        self._pending.append(entry)
        self._latest = (int(step), int(epoch))
        self._latest_loss = entry["loss"]
        self._work += 1
        if self._phase == "startup":
            self._phase = "train"  # the first recorded step: a loop that never names its phases still shows it
        if len(self._pending) >= self.flush_every:
            self.flush()

    def _start_heartbeat(self) -> None:
        try:  # the CPU clock of the thread that trains: it moves while that thread computes, not while it waits
            self._cpu_clock = time.pthread_getcpuclockid(threading.get_ident())
        except (AttributeError, OSError):
            self._cpu_clock = None
        self._write_heartbeat()
        self._beating = threading.Thread(target=self._heartbeat, name="trace-heartbeat", daemon=True)
        self._beating.start()

    def _heartbeat(self) -> None:
        """Progress for a watcher (the harness's stall detection and live progress), written by a
        background thread every HEARTBEAT_S: the latest step, the phase, and two measures of work,
        `work` (ticked by every step, phase change and tick()) and `cpu_s` (CPU time of the thread
        that trains). It keeps beating while the training thread is blocked in a collective (c10d
        waits release the GIL): a rank whose step, work and CPU time all stand still is waiting,
        one whose CPU time moves is busy (a long validation, a checkpoint of a large model)."""
        while not self._stop_beating.wait(HEARTBEAT_S):
            self._write_heartbeat()

    def _write_heartbeat(self) -> None:
        step, epoch = self._latest or (None, None)
        beat = {
            "step": step,
            "epoch": epoch,
            "phase": self._phase,
            "work": self._work,
            "cpu_s": self._training_cpu_s(),
            "time": time.time(),
            "loss": self._heartbeat_loss(),
            "total_steps": self.total_steps,
            "pid": os.getpid(),
        }
        tmp = self.progress_path.with_name(self.progress_path.name + ".tmp")
        try:
            tmp.write_text(json.dumps(beat))
            os.replace(tmp, self.progress_path)
        except OSError:
            pass  # the run directory went away (a test cleaning up): nothing to watch

    def _training_cpu_s(self) -> float:
        """CPU seconds of the training thread (the process's, where the platform cannot tell threads apart)."""
        if self._cpu_clock is not None:
            try:
                return time.clock_gettime(self._cpu_clock)
            except OSError:
                self._cpu_clock = None
        return time.process_time()

    def _heartbeat_loss(self) -> float | None:
        """The latest loss without a device sync: a CPU value as it is, otherwise the last flushed one."""
        loss = self._latest_loss
        if isinstance(loss, torch.Tensor) and loss.device.type == "cpu" and loss.numel() == 1:
            loss = loss.item()
        if not isinstance(loss, (int, float)):
            loss = self._last_flushed_loss
        return float(loss) if loss == loss and abs(loss) != float("inf") else None

    def set_phase(self, phase: str) -> None:
        """Tell the heartbeat what this rank is doing now: "train", "validation", "checkpoint", ...
        (a watcher tells a long phase from a hang by it)."""
        if phase != self._phase:
            self._phase = phase
            self._work += 1

    def tick(self) -> None:
        """Count a unit of work that is not an optimizer step (a validation batch, a file written):
        the watcher sees the rank is busy."""
        self._work += 1

    def _stop_heartbeat(self) -> None:
        self._stop_beating.set()
        beating = getattr(self, "_beating", None)
        if beating is not None and beating is not threading.current_thread():
            beating.join(timeout=2 * HEARTBEAT_S)  # its last write lands before any later one

    @property
    def progress_path(self) -> Path:
        return self.run_dir / TRACE_DIR / f"rank{self.rank}.progress"

    def record_validation(self, epoch: int, step: int, metrics: dict) -> None:
        """Rank 0 appends one validation result (already synced across ranks)."""
        if self.rank == 0:
            with open(self.run_dir / VALIDATION_FILE, "a") as f:
                f.write(json.dumps({"epoch": int(epoch), "step": int(step), **metrics}) + "\n")

    def last_loss(self) -> float:
        """The latest recorded loss (a device sync: call it per epoch, not per step)."""
        self.flush()
        return self._last_flushed_loss

    def flush(self) -> None:
        if not self._pending or self._file is None:
            return
        lines = [json.dumps(_to_json(entry)) for entry in self._pending]
        self._last_flushed_loss = json.loads(lines[-1])["loss"]
        self._file.write("\n".join(lines) + "\n")
        self._file.flush()
        self._pending.clear()

    def finish(self, model: torch.nn.Module, **extra_meta: Any) -> None:
        """Flush, check every replica holds the same parameters, and (rank 0) write the final
        parameters and the completed meta.json. A collective when a process group exists."""
        from safetensors.torch import save_file

        self.close()
        self.set_phase("finished")
        if self.progress_path.parent.is_dir():
            self._write_heartbeat()
        digest = params_sha256(model)
        digests = [digest]
        if self.world_size > 1:
            digests = [None] * self.world_size
            dist.all_gather_object(digests, digest)
        if self.rank != 0:
            return
        state = {k: v.detach().cpu().contiguous() for k, v in unwrap(model).state_dict().items()}
        tmp = self.run_dir / f".{FINAL_PARAMS_FILE}.tmp"
        save_file(state, str(tmp))
        os.replace(tmp, self.run_dir / FINAL_PARAMS_FILE)
        self.meta.update(
            {
                "finished": True,
                "ended": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "params_sha256": digest,
                "replicas_identical": len(set(digests)) == 1,
                **extra_meta,
            }
        )
        write_json_atomic(self.run_dir / META_FILE, self.meta)

    def close(self) -> None:
        """Flush what was recorded (on an error path), without the collectives of finish()."""
        self._stop_heartbeat()
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None


def _detach(value: Any) -> Any:
    return value.detach() if isinstance(value, torch.Tensor) else value


def _to_json(entry: dict) -> dict:
    out = {}
    for key, value in entry.items():
        if isinstance(value, torch.Tensor):
            value = value.float().item() if value.numel() == 1 and key != "indices" else value.tolist()
            if key == "batch_digest":
                value = ",".join(repr(v) for v in value)
        if key == "indices":
            if len(value) > INDEX_LIST_LIMIT:
                out["indices_digest"], out["count"] = digest_indices(value), len(value)
                continue
        out[key] = value
    return out


def _keep_steps_upto(path: Path, keep_steps_upto: int) -> None:
    """Drop records after a step (those a resumed run is about to write again)."""
    if not path.exists():
        return
    kept = [
        line
        for line in path.read_text().splitlines()
        if line.strip() and _complete_step(line) is not None and _complete_step(line) <= keep_steps_upto
    ]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)


def _complete_step(line: str) -> int | None:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None  # a line cut off by a crash


# ---------------------------------------------------------------------------------------------
# reading


def read_meta(run_dir: str | os.PathLike) -> dict:
    path = Path(run_dir) / META_FILE
    if not path.is_file():
        raise TraceFormatError(f"{path}: no meta.json (is {run_dir} a run directory?)")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise TraceFormatError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise TraceFormatError(
            f"{path}: trace format_version {version!r} is not supported (this reader reads version {FORMAT_VERSION})"
        )
    return meta


def trace_ranks(run_dir: str | os.PathLike) -> list[int]:
    folder = Path(run_dir) / TRACE_DIR
    ranks = sorted(int(p.stem[4:]) for p in folder.glob("rank*.jsonl") if p.stem[4:].isdigit())
    if not ranks:
        raise TraceFormatError(f"{folder}: no rank*.jsonl trace files")
    return ranks


def iter_records(run_dir: str | os.PathLike, rank: int, block: int = 256) -> Iterator[dict]:
    """One rank's step records, in order, streamed (memory does not grow with the run).

    Lines are parsed `block` at a time as one JSON array: a third less time than one json.loads per
    line, whose fixed cost is most of a short line's. A block that does not parse that way (a blank
    line, a line cut off by a crash) is parsed again line by line, which names the line at fault."""
    path = Path(run_dir) / TRACE_DIR / f"rank{rank}.jsonl"
    with open(path) as f:
        lineno = 0
        while True:
            lines = list(islice(f, block))
            if not lines:
                return
            try:
                records = json.loads("[" + ",".join(lines) + "]")
            except json.JSONDecodeError:
                records = None
            if records is None or len(records) != len(lines):  # line by line: a bad line raises when reached
                records = (_parse_line(path, lineno + i, line) for i, line in enumerate(lines, 1))
            for i, record in enumerate(records, 1):
                if record is _BLANK:
                    continue
                if type(record) is not dict or "step" not in record or "loss" not in record:
                    raise TraceFormatError(f"{path}:{lineno + i}: a step record needs `step` and `loss`")
                yield record
            lineno += len(lines)


_BLANK = object()


def _parse_line(path: Path, lineno: int, line: str):
    if not line.strip():
        return _BLANK
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        raise TraceFormatError(
            f"{path}:{lineno}: line cut off or not JSON (was the run killed while writing?)"
        ) from None


def read_records(run_dir: str | os.PathLike, rank: int) -> list[dict]:
    return list(iter_records(run_dir, rank))


def read_progress(run_dir: str | os.PathLike) -> dict[int, dict]:
    """Each rank's last heartbeat ({rank: {"step", "epoch", "time"}}); ranks without one are absent."""
    found = {}
    for path in (Path(run_dir) / TRACE_DIR).glob("rank*.progress"):
        try:
            found[int(path.stem[4:])] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return found


def read_validation(run_dir: str | os.PathLike) -> list[dict]:
    path = Path(run_dir) / VALIDATION_FILE
    if not path.exists():
        return []
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError:
        raise TraceFormatError(f"{path}: a line is cut off or not JSON") from None
