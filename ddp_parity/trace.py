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

import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ddp_parity.determinism import arithmetic_facts, torch_flags, versions
from ddp_parity.distributed import launch_env, world_facts
from ddp_parity.exit_hooks import install_exit_hooks, remove_exit_hooks
from ddp_parity.fingerprints import (  # noqa: F401  (public here too: users' loops import them from the recorder)
    StagedDigest,
    batch_contents,
    batch_fingerprint,
    batch_indices,
    buffers_sha256,
    digest_indices,
    hash_full_state,
    name_param_groups,
    normalised_name,
    optimizer_facts,
    param_digest,
    param_group_ids,
    parameter_names,
    params_sha256,
    sampler_facts,
    tied_names,
    unwrap,
    unwrap_optimizer,
)
from ddp_parity.heartbeat import Heartbeat
from ddp_parity.lifeline import watch_parent_if_asked
from ddp_parity.record_values import (  # noqa: F401  (INDEX_LIST_LIMIT: public here too)
    INDEX_LIST_LIMIT,
    beyond_exact,
    check_json,
    check_meta_keys,
    checked_extras,
    checked_number,
    host_number,
    json_line,
    meta_as_json,
    note_parameter_sets,
    on_device,
    optimizer_lr,
    plain_text,
    records_as_json,
    resume_step,
    take_batch,
    take_indices,
    taken,
    text_of,
    to_json,
)
from ddp_parity.runs import append_whole, write_error_file
from ddp_parity.sharding import is_sharded, sharding_facts
from ddp_parity.sketch import ModelSketch
from ddp_parity.trace_files import (  # noqa: F401  (the layout, the error and the readers: public here too)
    FINAL_PARAMS_FILE,
    FORMAT_VERSION,
    HEARTBEAT_S,
    MAX_EXACT_INT,
    MAX_STEP,
    META_FILE,
    SCHEDULER_BOOKKEEPING,
    TRACE_DIR,
    VALIDATION_FILE,
    WATCH_STEP_ENV,
    TraceFormatError,
    as_step,
    checked_metric,
    is_number,
    iter_records,
    json_type,
    last_complete_record,
    malformed,
    may_hold_surrogates,
    parse_json_text,
    parse_meta,
    parse_records,
    parse_validation,
    python_scalar,
    read_meta,
    read_progress,
    read_records,
    read_validation,
    step_record_problem,
    trace_ranks,
    truncate_after_step,
    validation_record_problem,
    write_json_atomic,
)
from ddp_parity.update_dump import install as install_update_dump
from ddp_parity.watch import ModuleWatch

watch_parent_if_asked()  # a process the harness launched dies with it (a no-op anywhere else)


# ---------------------------------------------------------------------------------------------
# small helpers


def _rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


# ---------------------------------------------------------------------------------------------
# writing


class TraceRecorder:
    """Records one rank's trace. Use from any training loop (docs/plugin.md):

    recorder = TraceRecorder(run_dir, side="my-loop", config=cfg_dict)
    recorder.start()                      # after init_process_group, on every rank
    for ...:                              # right after optimizer.step(), before scheduler.step():
        recorder.record(step, loss, batch.index, epoch=epoch, grad_norm=norm_before_clipping,
                        batch=batch, optimizer=optimizer, model=model)
    recorder.finish(model)                # every rank; rank 0 writes final params and meta

    Resuming: `recorder.start(resumed_from_step=N)` (N = optimizer steps the snapshot holds) keeps
    the earlier attempt's records up to step N. Without it, a trace an earlier attempt left is kept
    up to the step before this attempt's first record. Records reach the disk at every step (on a
    CPU) or every `flush_every` steps (values on an accelerator, never a device sync per step), and
    always when the process ends: normal exit, an uncaught exception, SIGTERM or SIGINT.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        side: str,
        config: dict | None = None,
        extra_meta: dict | None = None,
        flush_every: int = 100,
        handle_signals: bool = True,
        write_every_step: bool = True,
    ):
        self.run_dir = Path(run_dir)
        self.side = side
        self.config = config or {}
        self.extra_meta = dict(extra_meta or {})
        check_meta_keys("(extra_meta=...)", self.extra_meta)
        check_json("(config=...)", self.config)
        check_json("(extra_meta=...)", self.extra_meta)
        self.flush_every = flush_every
        self.handle_signals = handle_signals
        # host values cost no device sync: write each step as it is recorded, so that even a hard
        # kill (os._exit, SIGKILL) loses at most the step in flight
        self.write_every_step = write_every_step
        self.rank, self.world_size = _rank_and_world()
        self.attempt = 0
        self._pending: list[dict] = []
        self._last_time: float | None = None
        self._last_flushed_loss = float("nan")
        self._latest: tuple[int, int] | None = None
        self._latest_loss: float | None = None  # a CPU loss as a number (the heartbeat thread touches no tensor)
        self.total_steps: int | None = None  # optimizer steps the run will make, when the loop knows
        self._heartbeat = Heartbeat(self._progress_facts)
        self._fd: int | None = None  # this rank's trace, opened once the attempt's resume point is known
        self._started = False
        self._resume_from: int | None = None  # the step this attempt continues after, once known
        self._declared_resume = False
        self._flushing = False
        self._optimizer: torch.optim.Optimizer | None = None
        self._validation_checked = False
        self._ended: str | None = None  # "finish()" or "close()" once the trace is complete
        self._last_step: int | None = None  # the latest step this process recorded
        self._restore_hooks: list = []
        self.meta: dict = {}
        self._unrecorded: list[dict] = []  # meta.json `unrecorded`: what this rank could not take, and why
        self._lost: set[str] = set()  # the files a write failure stopped ("trace", "validation")
        self._optimizer_ids: list[list[int]] = []

    @property
    def trace_path(self) -> Path:
        return self.run_dir / TRACE_DIR / f"rank{self.rank}.jsonl"

    def start(
        self, facts: dict | None = None, keep_steps_upto: int | None = None, *, resumed_from_step: int | None = None
    ) -> None:
        """Open this rank's trace and (rank 0) write meta.json with every rank's facts.

        A collective when a process group exists. `resumed_from_step=N` says this process resumed
        from a snapshot taken after optimizer step N: the records an earlier attempt made after N
        are dropped (they are about to be recorded again), those up to N are kept, and the attempt
        is marked in meta.json `attempts`. Without it, when an earlier attempt left a trace here,
        the step of this attempt's first record decides (a restart from scratch records step 1 and
        replaces everything). `keep_steps_upto` is the older name of `resumed_from_step`: it still
        works (users' loops call start() with it) and warns.
        """
        if self._started:
            raise RuntimeError(
                f"TraceRecorder.start(): called twice (the trace is {'complete' if self._ended else 'open'}); "
                "call start() once per recorder, or record a new run with a new TraceRecorder"
            )
        resume = resume_step(keep_steps_upto, resumed_from_step)
        if resume is not None and int(resume) < 0:
            raise ValueError(f"start(): resumed_from_step must be >= 0 (steps count from 1), got {resume}")
        self.rank, self.world_size = _rank_and_world()
        rank_facts = {
            "rank": self.rank,
            "pid": os.getpid(),
            "host": platform.node(),
            "threads": torch.get_num_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "watch_step_env": os.environ.get(WATCH_STEP_ENV),  # the module watch's steps as asked, if set
            "torch_flags": torch_flags(),
            "arithmetic": arithmetic_facts(),
            "env": launch_env(),
            "world": world_facts(),
            **(facts or {}),
        }
        gathered = [(rank_facts, self._previous_attempt())]
        if self.world_size > 1:
            mine, gathered = gathered[0], [None] * self.world_size
            dist.all_gather_object(gathered, mine)
        all_facts = [f for f, _ in gathered]
        self.attempt = max(previous for _, previous in gathered) + 1
        try:
            self.trace_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a read-only or full disk: training goes on unrecorded, and says so
            self._cannot_write(f"{TRACE_DIR}/", exc, stop="trace")
        self._heartbeat.start(self.progress_path)
        self._declared_resume = resume is not None
        start_step = int(resume) if resume is not None else (0 if self.attempt == 0 else None)
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
            "attempts": self._earlier_attempts() + [self._attempt_entry(start_step)],
            "resumed_from_step": start_step if self.attempt > 0 or self._declared_resume else None,
            **self.extra_meta,
        }
        if start_step is not None:
            self._resume_after(start_step, write_meta=False)
        self._write_meta()
        self._started = True
        self._last_time = time.perf_counter()
        self._restore_hooks = install_exit_hooks(self, self.handle_signals)
        self._update_dump = install_update_dump(self.run_dir, self.rank, self.note_unrecorded)  # its env, if set

    # -- attempts -----------------------------------------------------------------------------

    def _previous_attempt(self) -> int:
        """The latest attempt this rank can see on disk (meta.json, its own trace), -1 when none."""
        found = -1
        try:
            attempts = json.loads((self.run_dir / META_FILE).read_text()).get("attempts") or [{"attempt": 0}]
            found = max(int(a.get("attempt", 0)) for a in attempts)
        except (OSError, ValueError, TypeError, AttributeError):
            pass
        last = last_complete_record(self.trace_path)
        if last is not None:
            found = max(found, int(last.get("attempt", 0)))
        return found

    def _earlier_attempts(self) -> list[dict]:
        """The attempts meta.json already lists (rank 0's view); an older meta.json without the key
        counts as attempt 0 from step 0."""
        if self.attempt == 0 or self.rank != 0:
            return []
        try:
            meta = json.loads((self.run_dir / META_FILE).read_text())
        except (OSError, ValueError):
            return [{"attempt": a, "start_step": None, "time": None} for a in range(self.attempt)]
        return meta.get("attempts") or [{"attempt": 0, "start_step": 0, "time": None, "started": meta.get("started")}]

    def _attempt_entry(self, start_step: int | None) -> dict:
        restarts = os.environ.get("TORCHELASTIC_RESTART_COUNT")
        return {
            "attempt": self.attempt,
            "start_step": start_step,  # None until this attempt's first record says where it resumed
            "time": time.time(),
            "torchelastic_restart_count": int(restarts) if restarts and restarts.isdigit() else None,
        }

    def _resume_after(self, step: int, write_meta: bool = True, validation_upto: int | None = None) -> None:
        """Keep the records up to `step` (this attempt continues after it), open the trace, and
        (rank 0) mark where this attempt started."""
        self._resume_from = int(step)
        try:
            if "trace" not in self._lost:
                truncate_after_step(self.trace_path, self._resume_from)
                self._fd = os.open(self.trace_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            self._cannot_write(f"{TRACE_DIR}/rank{self.rank}.jsonl", exc, stop="trace")
        try:
            if self.rank == 0:
                upto = self._resume_from if validation_upto is None else validation_upto
                truncate_after_step(self.run_dir / VALIDATION_FILE, upto)
        except OSError as exc:
            self._cannot_write(VALIDATION_FILE, exc, stop="validation")
        if self.meta:
            self.meta["attempts"][-1]["start_step"] = self._resume_from
            if self.attempt > 0 or self._declared_resume:
                self.meta["resumed_from_step"] = self._resume_from
            if write_meta:
                self._write_meta()

    def _resolve_start(self, first_step: int, validation_upto: int | None = None) -> None:
        if self._resume_from is None:
            self._resume_after(first_step, validation_upto=validation_upto)

    # -- recording ----------------------------------------------------------------------------

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
        optimizer: torch.optim.Optimizer | None = None,
        model: torch.nn.Module | None = None,
        **extra: Any,
    ) -> None:
        """One optimizer step (`step` counts optimizer steps from 1). Call it right after
        `optimizer.step()` and before `scheduler.step()`.

        `grad_norm`: measured before clipping. `batch`: the step's input batch (or the list of its
        micro-batches), digested as `batch_digest`. `optimizer`: its param group 0's lr is recorded
        when `lr` is not given (the lr this step used, if the scheduler has not stepped yet), and its
        param groups go to meta.json once. `model`: `param_digest` of the parameters as this step
        left them. Tensors are kept as they are (no device sync) until written.
        """
        # every check of the call first: a misuse raises before anything changes, the mended call goes through
        loss = checked_number("loss", loss, required=True)
        lr, grad_norm = checked_number("lr", lr, required=False), checked_number("grad_norm", grad_norm, required=False)
        extra = checked_extras(extra)
        step, epoch = self._checked_step(step, epoch)
        self._resolve_start(step - 1)
        if self._watch is not None:
            self._watch.end_step(step)  # module watch: the step's calls are complete
            if self._watch.failure is not None:
                self.note_unrecorded("module watch", self._watch.failure)
        now = time.perf_counter()
        if lr is None and optimizer is not None:
            lr = optimizer_lr(optimizer, self.note_unrecorded)
        entry = {
            "step": step,
            "epoch": epoch,
            "attempt": self.attempt,
            "loss": loss,
            "lr": lr,
            "grad_norm": grad_norm,
            "time_s": now - self._last_time if self._last_time else None,
        }
        self._last_time = now
        if indices is not None:
            take_indices(entry, indices, self.note_unrecorded)
        if batch is not None:
            take_batch(entry, batch, self.note_unrecorded)
        if model is not None and "param_digest" not in extra:
            extra["param_digest"] = self._taken("param_digest", param_digest, model)
            note_parameter_sets(self.meta, model, self.note_unrecorded)
        if model is not None and "layers" not in extra:
            extra["layers"] = self._taken("layers", self._layer_values, model)
        entry.update({k: v for k, v in extra.items() if v is not None or k not in ("param_digest", "layers")})
        if optimizer is not None and self._optimizer is None:
            self._record_optimizer(optimizer, model)
        self._pending.append(entry)
        self._latest = (step, epoch)
        self._latest_loss = host_number(loss)
        self._heartbeat.stepped()
        if (
            (self.write_every_step and not on_device(entry))
            or len(self._pending) >= self.flush_every
            or self._staged_bytes() > STAGED_BYTES_LIMIT
        ):
            self.flush()

    # -- what the recorder takes from the user's objects: never raises, says what it could not take --

    def note_unrecorded(self, what: str, why: str) -> None:
        """Say in meta.json `unrecorded` what this rank could not record and why (the first time for
        each `what`); training goes on, and the comparison says it is unrecorded instead of judging it."""
        what, why = text_of(what), text_of(why[:500])  # a name of the user's may not be UTF-8 text
        if all(item["what"] != what for item in self._unrecorded):
            self._unrecorded.append({"what": what, "why": why, "rank": self.rank})

    def _taken(self, what: str, take, *args):
        return taken(self.note_unrecorded, what, take, *args)

    @property
    def finished(self) -> bool:
        """finish() has written the complete trace: nothing more can be recorded in it."""
        return self._ended == "finish()"

    def _check_open(self, call: str) -> None:
        if self._ended is not None:
            raise RuntimeError(
                f"TraceRecorder: {call}() after {self._ended}: this trace is complete on disk; "
                f"call {call}() before {self._ended}, or record a new run with a new TraceRecorder"
            )

    def _checked_step(self, step: Any, epoch: Any) -> tuple[int, int]:
        """The step and epoch as integers; a step not after the one recorded before is a misuse
        (steps count optimizer steps, each recorded once)."""
        self._check_open("record")
        if not self._started:
            raise RuntimeError("TraceRecorder: call start() (on every rank) before record()")
        step, epoch = as_step(step, "step"), as_step(epoch, "epoch")
        if self._last_step is not None and step <= self._last_step:
            raise ValueError(
                f"TraceRecorder.record(): step {step} after step {self._last_step}: record each optimizer step "
                "once, in order (steps count optimizer steps from 1, not batches or micro-batches)"
            )
        self._last_step = step
        return step, epoch

    def _record_optimizer(self, optimizer: torch.optim.Optimizer, model: torch.nn.Module | None) -> None:
        """meta.json `optimizer`: class, param groups, hyperparameters, as at the first step (taken once:
        re-read at finish(), a scheduler's lr would be the last step's). Without the model the parameters
        are named at finish(), from the identities kept now."""
        self._optimizer = optimizer
        facts = self._taken("optimizer", optimizer_facts, optimizer, model)
        if facts is not None:
            self.meta["optimizer"], self._optimizer_ids = facts, param_group_ids(optimizer)
            self._write_meta()

    _sketch = None  # the ModelSketch of the model record() is given, made at its first step (False: none)
    _layer_tails = True  # sketch.py `tails`: off where the grad_norm's norm is recorded (the hooks)

    def _layer_values(self, model: torch.nn.Module, known: dict | None = None) -> torch.Tensor | None:
        """Per parameter: norm, gradient norm and sketch (ddp_parity/sketch.py); the names and fields
        go to meta.json `layers` once. None for an FSDP2 model, not sketched yet: a gather per parameter
        and per gradient would double the recorder's collectives (a shard-local sketch with one
        all-reduce is the way there)."""
        if self._sketch is None:
            sketch = None if is_sharded(model) else ModelSketch.of(model, self.note_unrecorded, self._layer_tails)
            self._sketch = sketch or False
            if self._sketch:
                self.meta["layers"] = self._sketch.facts()
                self._write_meta()
        return self._sketch.values(model, self._last_step, known) if self._sketch else None

    def _staged_bytes(self) -> int:
        return sum(e["batch_digest"].nbytes for e in self._pending if isinstance(e.get("batch_digest"), StagedDigest))

    _watch = None  # the ModuleWatch of watch(), if any

    def watch(self, model: torch.nn.Module, steps: Any = None, *, start_step: int = 0):
        """Record every module call of a few optimizer steps (ddp_parity/watch.py, docs/localisation.md):

            recorder.watch(model)   # the plain model, before or after DDP(model); once, before training

        `steps`: optimizer steps to watch (numbered as `record()` numbers them, from 1); default
        watch.DEFAULT_STEPS; the environment variable DDP_PARITY_WATCH_STEP overrides it.
        `start_step`: the step a resumed run starts after. Nothing else in the loop changes: the
        parameter gradients are read at the end of each backward pass, before clipping."""
        if self._watch is not None:
            self._watch.detach()
        self._watch = ModuleWatch(model, steps, start_step=start_step)
        return self._watch

    def adopt_watch(self, watch: ModuleWatch) -> None:
        """Take over a module watch made before this recorder started (the hooks of `ddp-parity record` watch
        the DDP-wrapped model from its wrapping, before the first step starts the recorder)."""
        if self._watch is not None:
            self._watch.detach()
        self._watch = watch

    def _progress_facts(self) -> dict:
        """What the heartbeat says of the run (ddp_parity/heartbeat.py writes it with the phase and work)."""
        step, epoch = self._latest or (None, None)
        total = self.total_steps if type(self.total_steps) is int else None  # a tensor would be read on the thread
        return {"step": step, "epoch": epoch, "loss": self._heartbeat_loss(), "total_steps": total}

    def _heartbeat_loss(self) -> float | None:
        """The latest loss without a device sync: a CPU value as it is, otherwise the last flushed one."""
        loss = self._latest_loss if self._latest_loss is not None else self._last_flushed_loss
        if not isinstance(loss, (int, float)) or isinstance(loss, int) and abs(loss) > MAX_EXACT_INT:
            return None  # an integer a float would round (or cannot hold): the trace says what became of it
        return float(loss) if loss == loss and abs(loss) != float("inf") else None

    def set_phase(self, phase: str) -> None:
        """Tell the heartbeat what this rank is doing now: "train", "validation", "checkpoint", ...
        (a watcher tells a long phase from a hang by it)."""
        self._heartbeat.set_phase(phase)

    def tick(self) -> None:
        """Count a unit of work that is not an optimizer step (a validation batch, a file written):
        the watcher sees the rank is busy."""
        self._heartbeat.tick()

    @property
    def progress_path(self) -> Path:
        return self.run_dir / TRACE_DIR / f"rank{self.rank}.progress"

    def record_validation(self, epoch: int, step: int, metrics: dict) -> None:
        """Rank 0 appends one validation result (already synced across ranks). Values are written
        as given (Python floats, or tensors in their own dtype): pass the figures you computed,
        not a logger's rounded copy. A validation before the first step is `step=0`."""
        self._check_open("record_validation")
        epoch, step = as_step(epoch, "epoch"), as_step(step, "step")
        metrics = dict(metrics)
        beyond = [name for name, value in metrics.items() if beyond_exact(python_scalar(value))]
        metrics = {name: checked_metric(name, value) for name, value in metrics.items() if name not in beyond}
        for name in beyond:  # a float would round it, and the format's numbers are exact only up to 2**53
            self.note_unrecorded(f"validation metric {name!r}", f"an integer beyond 2**53 (first at step {step})")
        if self.rank != 0:
            return
        path = self.run_dir / VALIDATION_FILE
        if self._resume_from is None and self._started:  # nothing recorded yet in this attempt: it resumed at `step`
            self._resolve_start(step, validation_upto=step - 1)
        elif not self._validation_checked and "validation" not in self._lost:
            try:  # this attempt's first validation supersedes any at or after its step
                truncate_after_step(path, step - 1, only_if_later=True)
            except OSError as exc:
                self._cannot_write(VALIDATION_FILE, exc, stop="validation")
        self._validation_checked = True
        if "validation" in self._lost:
            return
        line = plain_text(
            json.dumps({"epoch": epoch, "step": step, **metrics}),
            self.note_unrecorded,
            "metric names",
            f"from step {step}: ",
        )
        line += "\n"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                append_whole(fd, line.encode())
            finally:
                os.close(fd)
        except OSError as exc:
            self._cannot_write(f"{VALIDATION_FILE} from step {step}", exc, stop="validation")

    def last_loss(self) -> float:
        """The latest recorded loss (a device sync: call it per epoch, not per step)."""
        self.flush()
        return self._last_flushed_loss

    def flush(self) -> None:
        """Write what is pending (on an accelerator: one device sync)."""
        if self._watch is not None:
            try:
                self._watch.flush(self.run_dir, self.rank)
            except OSError as exc:  # the module watch ends; the trace goes on
                self._cannot_write(f"{TRACE_DIR}/rank{self.rank}.modules.jsonl", exc)
                self._watch.detach()
                self._watch = None
        if "trace" in self._lost:
            self._pending.clear()  # nothing more reaches this rank's trace: hold nothing
        if not self._pending or self._fd is None or self._flushing:
            return
        self._flushing = True  # a signal arriving now must not write the same lines twice
        try:
            if any(isinstance(e.get("batch_digest"), StagedDigest) for e in self._pending):
                torch.accelerator.synchronize()  # the host copies of the batches are complete
            records = records_as_json(self._pending, self.note_unrecorded)
            self._pending.clear()
            if not records:
                return
            try:
                append_whole(self._fd, "".join(json_line(r, self.note_unrecorded) for r in records).encode())
            except OSError as exc:  # a full disk: the trace ends at the last whole step written, training goes on
                lost = f"{TRACE_DIR}/rank{self.rank}.jsonl from step {records[0]['step']}"
                self._cannot_write(lost, exc, stop="trace")
            self._last_flushed_loss = records[-1]["loss"]
        finally:
            self._flushing = False

    def _cannot_write(self, what: str, exc: BaseException, stop: str | None = None) -> None:
        """A write the environment refused (a full disk, a read-only folder): recording goes on without
        it, said once on stderr and in meta.json `unrecorded` (while meta.json can be written). `stop`:
        the file that is written no more ("trace": a trace with a hole would be misread)."""
        self.note_unrecorded(what, f"{exc!r:.300}")
        if stop is not None:
            self._lost.add(stop)
        if not self._warned_write:
            self._warned_write = True
            print(
                f"ddp-parity: rank {self.rank} could not write {what} in {self.run_dir} ({exc}); training goes on, "
                "and meta.json `unrecorded` says what is missing",
                file=sys.stderr,
            )

    _warned_write = False

    def _write_meta(self) -> None:
        """meta.json (rank 0, atomically) with the `unrecorded` notes so far; a refused write is said, never raised."""
        if self.rank != 0:
            return
        if self._unrecorded:
            self.meta["unrecorded"] = list(self._unrecorded)
        try:
            meta = meta_as_json(self.meta, self.note_unrecorded)
            if self._unrecorded:
                meta["unrecorded"] = list(self._unrecorded)
            write_json_atomic(self.run_dir / META_FILE, meta)
        except OSError as exc:
            self._cannot_write(META_FILE, exc)
        except (TypeError, ValueError, RecursionError) as exc:  # a fact of the user's objects JSON cannot hold
            self.note_unrecorded(META_FILE, f"{exc!r:.300}")

    def record_error(self, exc: BaseException) -> Path | None:
        """errors/rank{r}.json for this rank (the first error is kept), with the last recorded step
        and the phase. Called for an uncaught exception by itself; call it where you catch one."""
        step = self._latest[0] if self._latest else None
        return write_error_file(self.run_dir, exc, rank=self.rank, step=step, phase=self._heartbeat.phase)

    def finish(self, model: torch.nn.Module, **extra_meta: Any) -> None:
        """Flush, check every replica holds the same parameters and buffers, and (rank 0) write the
        final parameters and the completed meta.json. A collective when a process group exists.
        Once is enough: a second call does nothing. `extra_meta`: facts of your own for meta.json (a
        key the recorder writes itself is refused)."""
        from safetensors.torch import save_file

        check_meta_keys(".finish()", extra_meta)
        check_json(".finish()", extra_meta)
        if self._ended == "finish()":
            return  # a second finish() (a `finally:` after the normal path) changes nothing
        if self._resume_from is None and self._started:  # this attempt recorded no step: the earlier trace stands whole
            last = last_complete_record(self.trace_path)
            self._resume_after(int(last["step"]) if last else 0)
        self.close()
        self._ended = "finish()"
        self.set_phase("finished")
        if self.progress_path.parent.is_dir():
            self._heartbeat.write()
        # every rank (under FSDP2 gathering the shards is a collective); rank 0 keeps what it writes
        digest, state = self._taken(FINAL_PARAMS_FILE, hash_full_state, model, self.rank == 0) or (None, {})
        buffers = self._taken("buffers_sha256", buffers_sha256, model)
        gathered = [(digest, buffers, self._unrecorded)]
        if self.world_size > 1:
            gathered = [None] * self.world_size
            dist.all_gather_object(gathered, (digest, buffers, self._unrecorded))
        if self.rank != 0:
            return
        for _, _, notes in gathered[1:]:  # every rank's notes, in meta.json by rank 0
            self._unrecorded += [n for n in notes if n not in self._unrecorded]
        if state:
            self._save_final_params(save_file, state)
        if tied := tied_names(model):
            self.meta["tied"] = tied
        note_parameter_sets(self.meta, model, self.note_unrecorded, final=True)
        for facts, (rank_params, rank_buffers, _) in zip(self.meta["ranks"], gathered):
            facts["params_sha256"], facts["buffers_sha256"] = rank_params, rank_buffers
        if self._optimizer_ids and not self.meta["optimizer"].get("named"):
            self.meta["optimizer"] = name_param_groups(self.meta["optimizer"], self._optimizer_ids, model)
        self.meta.update(
            {
                "finished": True,
                "ended": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "params_sha256": digest,
                "buffers_sha256": buffers,
                # parameters and every buffer (non-persistent ones too) equal on every rank
                "replicas_identical": all(g[:2] == gathered[0][:2] for g in gathered),
                "sharded": is_sharded(unwrap(model)),  # FSDP2: parameters were DTensors (digests of full tensors)
                "sharding": sharding_facts(unwrap(model)),  # each fully_shard module and its policy, or None
                **extra_meta,
            }
        )
        self._write_meta()

    def _save_final_params(self, save_file, state: dict) -> None:
        """final.safetensors, atomically; what cannot be saved (a full disk, a dtype safetensors lacks)
        is noted, never raised, and leaves no temporary file."""
        tmp = self.run_dir / f".{FINAL_PARAMS_FILE}.tmp"
        try:
            save_file(state, str(tmp))
            os.replace(tmp, self.run_dir / FINAL_PARAMS_FILE)
        except Exception as exc:  # noqa: BLE001 - a guest in the user's loop: say what was not recorded
            self.note_unrecorded(FINAL_PARAMS_FILE, f"{exc!r:.300}")
            with contextlib.suppress(OSError):  # the folder itself may be what is missing
                tmp.unlink(missing_ok=True)

    def close(self) -> None:
        """Flush what was recorded (on an error path), without the collectives of finish()."""
        self._heartbeat.stop()
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._restore_hooks = remove_exit_hooks(self, self._restore_hooks)
        if self._started:
            self._ended = self._ended or "close()"
        if self._watch is not None:  # its hooks on the user's model end with the trace
            self._watch.detach()
        if getattr(self, "_update_dump", None) is not None:  # and the step hooks of DDP_PARITY_DUMP_UPDATE
            self._update_dump.remove()


STAGED_BYTES_LIMIT = 256 * 2**20  # host copies of accelerator batches held before a flush writes them
