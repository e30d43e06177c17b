"""Module watch: every module call of a few optimizer steps, digested bit for bit, so that a
divergence can be named by module, phase and tensor (`ddp_parity.compare.modules.localise`).

    recorder.watch(model)          # one line: the plain model, before or after wrapping it in DDP

For each watched step this rank writes one line to `trace/rank{r}.modules.jsonl`:

    {"step": 3,
     "calls": [{"name": "encoder.0.dropout", "type": "Dropout", "phase": "forward",
                "input": hex, "output": hex, "buffers": hex (modules with buffers),
                "state": {"training": bool, "arguments": extra_repr(), "grad_enabled": bool,
                          "autocast": "cpu:torch.bfloat16" or
                          null, "input_dtypes": [...], "output_dtypes": [...]}}, ...,
               {"name": "head", "type": "Linear", "phase": "backward",
                "output": hex (gradient arriving at its output), "input": hex or null (gradient
                leaving through its input)}, ...],      # in execution order
     "params_before": {name: hex}, # each parameter as the step's forward first used it: at the first call of
                                   # the module holding it (a loop may change a parameter in place inside a
                                   # wrapper's forward, as Lightning's training_step runs inside DDP's), else
                                   # at the step's first forward call
     "param_grads": {name: hex},   # each .grad at the end of the step's last backward: after DDP's
                                   # all-reduce, before clipping, unscaling and the optimizer
     "params_after": {name: hex}}  # each parameter after the optimizer step

Which steps: DEFAULT_STEPS, or `steps=`; the environment variable DDP_PARITY_WATCH_STEP (a step,
a comma-separated list, `all` or `none`) overrides both, so a step can be replayed by re-running
the same commands.

What keeps training bitwise unchanged: forward pre/post hooks and tensor hooks that only read
(they return None), digests computed on detached tensors from a generator of their own (the
global RNG is never touched), no full backward hooks (they insert autograd nodes and refuse
in-place ops on module outputs). The parameter gradients are read by an autograd callback queued
from inside the backward pass, which runs after DDP's own end-of-backward callback has written the
averaged gradients; so a hand-written loop needs no other line.

No device synchronisation per module: each tensor's digest is a device scalar (a position-weighted
xor of its bits) kept until the trace is flushed. Calls made with gradients disabled from a module
in eval mode (validation) are not recorded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

from ddp_parity.module_hooks import ours
from ddp_parity.sharding import full_tensor
from ddp_parity.trace_files import ALL, WATCH_STEP_ENV, malformed, parse_watch_steps  # noqa: F401  (public here too)

DEFAULT_STEPS = (1, 2)  # most mistakes show at step 1; step 2 catches what the first update sets off
MODULES_SUFFIX = ".modules.jsonl"
AUTOCAST_DEVICES = ("cpu", "cuda")

_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def modules_path(run_dir: str | os.PathLike, rank: int) -> Path:
    return Path(run_dir) / "trace" / f"rank{rank}{MODULES_SUFFIX}"


def resolve_steps(steps: Any = None) -> frozenset[int] | str:
    """The steps to watch: the environment variable if set, else `steps`, else DEFAULT_STEPS."""
    if os.environ.get(WATCH_STEP_ENV) is not None:
        return parse_watch_steps(os.environ[WATCH_STEP_ENV])
    if steps is None:
        return frozenset(DEFAULT_STEPS)
    if steps is True or steps == ALL:
        return ALL
    if isinstance(steps, int):
        steps = [steps]
    steps = frozenset(int(s) for s in steps)
    if steps and min(steps) < 1:
        raise ValueError(f"watch(steps={sorted(steps)}): optimizer steps are numbered from 1")
    return steps


# ---------------------------------------------------------------------------------------------
# digests: exact, position-sensitive, computed on the device without a sync


class Digester:
    """One uint64 device scalar per tensor: xor over elements of (element bits x a fixed odd
    weight per position), wrapping. Equal tensors give equal digests on any rank and either side;
    a change in any element's bits, or a move of an element, changes it (up to a 2^-32 chance)."""

    def __init__(self, seed: int = 0x5EED):
        self._seed = seed
        self._weights: dict[tuple, torch.Tensor] = {}

    def weights(self, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        key = (dtype, device)
        have = self._weights.get(key)
        if have is None or have.numel() < n:
            size = max(n, 2 * have.numel() if have is not None else 1024)
            g = torch.Generator().manual_seed(self._seed)  # never the global RNG
            bits = 8 * torch.empty((), dtype=dtype).element_size()
            low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
            w = torch.randint(low, high, (size,), generator=g, dtype=torch.int64) | 1
            have = w.to(dtype).to(device)
            self._weights[key] = have
        return have[:n]

    def __call__(self, t: torch.Tensor) -> torch.Tensor:
        flat = t.detach().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        if flat.dtype == torch.bool:
            flat = flat.view(torch.uint8)
        if not flat.numel():  # hash_tensor has no value for no elements; the shape is kept beside (_shape_key)
            return torch.zeros((), dtype=torch.uint64, device=flat.device)
        bits = flat.view(_INT_OF_SIZE[flat.element_size()])
        if bits.dtype == torch.uint8:
            bits = bits.to(torch.int32)
        return torch.hash_tensor(bits * self.weights(bits.numel(), bits.dtype, bits.device))


def tensors_in(obj: Any, depth: int = 0):
    """Every tensor in a call's arguments or outputs, in a fixed order."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth > 8:
        return
    elif isinstance(obj, dict):
        for key in obj:
            yield from tensors_in(obj[key], depth + 1)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from tensors_in(value, depth + 1)


def is_stochastic(module: torch.nn.Module) -> bool:
    """A module that draws from the RNG in training: dropout modules, and modules whose own code
    applies a dropout probability (`dropout`, `p`, `drop_prob` > 0, e.g. MultiheadAttention)."""
    if not module.training:
        return False
    if isinstance(module, torch.nn.modules.dropout._DropoutNd):
        return module.p > 0
    return any(
        isinstance(getattr(module, attr, None), float) and getattr(module, attr) > 0
        for attr in ("dropout", "drop_prob", "dropout_p")
    )


def autocast_state() -> str | None:
    """The autocast in force, as "device:dtype" (None when off): a forward's dtype depends on it."""
    for device_type in AUTOCAST_DEVICES:
        if torch.is_autocast_enabled(device_type):
            return f"{device_type}:{torch.get_autocast_dtype(device_type)}"
    return None


def call_state(module: torch.nn.Module, inputs: list[torch.Tensor]) -> dict:
    """What a forward depends on besides its inputs' values and the parameters: the module's mode and
    constructor arguments (its extra_repr), grad mode, autocast, and the input dtypes (the output
    dtypes are added after the call)."""
    return {
        "training": module.training,
        "arguments": module.extra_repr(),  # its constructor arguments: p, eps, momentum, approximate, ...
        "grad_enabled": torch.is_grad_enabled(),
        "autocast": autocast_state(),
        "input_dtypes": _dtypes(inputs),
    }


def _dtypes(tensors: list[torch.Tensor]) -> list[str]:
    return sorted({str(t.dtype) for t in tensors})


def _shape_key(tensors) -> str:
    return ";".join(f"{t.dtype}{tuple(t.shape)}" for t in tensors)


class _Digests:
    """The digests of a group of tensors, kept on the device until resolved."""

    __slots__ = ("shapes", "scalars")

    def __init__(self, tensors: list[torch.Tensor], digest: Digester):
        tensors = [full_tensor(t) for t in tensors]  # a sharded parameter or gradient: its whole tensor
        self.shapes = _shape_key(tensors)
        self.scalars = [digest(t) for t in tensors]

    def add(self, tensors: list[torch.Tensor], digest: Digester) -> None:
        self.shapes += "|" + _shape_key(tensors)
        self.scalars += [digest(t) for t in tensors]


def _hex(shapes: str, values: list[int]) -> str:
    h = hashlib.sha256(shapes.encode())
    h.update(",".join(map(str, values)).encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# the watch


def _held_by_module(model: torch.nn.Module, names: set[str]) -> dict[int, list]:
    """{id(module): [(name, parameter)]}: the parameters each module holds itself, under the names
    `named_parameters` gives them (a tied one under its first name only)."""
    held: dict[int, list] = {}
    for prefix, module in model.named_modules():
        for short, p in module.named_parameters(recurse=False):
            name = f"{prefix}.{short}" if prefix else short
            if name in names:
                held.setdefault(id(module), []).append((name, p))
    return held


def unwrap_parallel(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside a DistributedDataParallel or DataParallel wrapper; any other model as it is
    (a user's model may well have a submodule called `module`)."""
    parallel = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    return model.module if isinstance(model, parallel) else model


class ModuleWatch:
    """Hooks on every submodule of `model` (unwrapped from DDP); see the module docstring.

    `end_step(step)` closes the step in progress (the recorder calls it from `record()`), and
    `flush(run_dir, rank)` writes the closed steps (from the recorder's `flush()`)."""

    def __init__(self, model: torch.nn.Module, steps: Any = None, start_step: int = 0):
        self.model = unwrap_parallel(model)  # never `module.` names
        self.steps = resolve_steps(steps)
        self.digest = Digester()
        self._names = {m: name for name, m in self.model.named_modules()}
        self._params = [(name, p) for name, p in self.model.named_parameters()]
        self._held = _held_by_module(self.model, {name for name, _ in self._params})
        self._used: set[int] = set()  # modules called in the step in progress
        self._handles: list = []
        self._step = start_step + 1  # the optimizer step in progress
        self._calls: list[dict] = []
        self._open: dict[int, list] = {}
        self._param_grads: dict | None = None
        self._params_before: dict | None = None
        self._callback_queued = False
        self._done: list[dict] = []  # closed steps waiting for the flush
        self._trimmed = False
        self._start_step = start_step
        self.failure: str | None = None  # why the watch stopped (a hook of its own raised), for meta.json
        if self._watching_any_from(self._step):
            self._attach()

    # -- which steps -----------------------------------------------------------------------

    def is_watched(self, step: int) -> bool:
        return self.steps == ALL or step in self.steps

    def _watching_any_from(self, step: int) -> bool:
        return self.steps == ALL or any(s >= step for s in self.steps)

    @property
    def active(self) -> bool:
        return bool(self._handles) and self.is_watched(self._step)

    # -- hooks -----------------------------------------------------------------------------

    def _attach(self) -> None:
        before, after = ours(self._guarded(self._before_call)), ours(self._guarded(self._after_call))
        for module in self._names:
            self._handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
            self._handles.append(module.register_forward_hook(after, with_kwargs=True))

    def _guarded(self, hook):
        """A hook of the watch that raises stops the watch (its hooks removed, the step in progress dropped)
        and says why in `failure`, which the recorder notes in meta.json `unrecorded`: the program's own
        call goes on as if nothing watched it."""

        @functools.wraps(hook)
        def run(*args, **kwargs):
            if self.failure is not None:
                return None
            try:
                return hook(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a guest in the user's forward: never end their training
                self._fail(exc)
                return None

        return run

    def _fail(self, exc: Exception) -> None:
        self.failure = f"stopped at step {self._step}: {exc!r:.300}"
        self.detach()
        self._calls, self._param_grads, self._params_before, self._open = [], None, None, {}

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _recording(self, module: torch.nn.Module) -> bool:
        return self.active and (torch.is_grad_enabled() or module.training)

    def _before_call(self, module, args, kwargs):
        stack = self._open.setdefault(id(module), [])
        if not self._recording(module):
            stack.append(None)
            return None
        if self._params_before is None:  # the step's first forward: the weights it starts from
            self._params_before = {name: _Digests([p], self.digest) for name, p in self._params}
        if id(module) not in self._used:  # its own parameters as this call uses them
            self._used.add(id(module))
            for name, p in self._held.get(id(module), ()):
                self._params_before[name] = _Digests([p], self.digest)
        inputs = list(tensors_in((args, kwargs)))
        call = {"name": self._names[module], "type": type(module).__name__, "phase": "forward"}
        if is_stochastic(module):
            call["random"] = True  # draws from the RNG in this call (dropout inside attention, ...)
        call["input"] = _Digests(inputs, self.digest)
        call["state"] = call_state(module, inputs)
        backward = {"name": call["name"], "type": call["type"], "phase": "backward", "output": None, "input": None}
        for t in inputs:
            if t.requires_grad:
                t.register_hook(self._grad_hook(backward, "input"))
        stack.append((call, backward))
        return None

    def _after_call(self, module, args, kwargs, output):
        stack = self._open.get(id(module))
        opened = stack.pop() if stack else None
        if opened is None:
            return None
        call, backward = opened
        outputs = list(tensors_in(output))
        call["output"] = _Digests(outputs, self.digest)
        call["state"]["output_dtypes"] = _dtypes(outputs)
        buffers = [b for b in module.buffers(recurse=False) if isinstance(b, torch.Tensor)]
        if buffers:
            call["buffers"] = _Digests(buffers, self.digest)
        self._calls.append(call)
        for t in outputs:
            if t.requires_grad:
                t.register_hook(self._grad_hook(backward, "output"))
        return None

    def _grad_hook(self, backward: dict, key: str):
        @self._guarded
        def hook(grad):
            if grad is None:
                return None
            if backward["output"] is None and backward["input"] is None:
                self._calls.append(backward)  # in the order gradients reach the modules
            if backward[key] is None:
                backward[key] = _Digests([grad], self.digest)
            else:
                backward[key].add([grad], self.digest)
            self._queue_param_grads()
            return None

        return hook

    def _queue_param_grads(self) -> None:
        """Read `.grad` when this backward pass ends. A callback queued from a callback runs after
        every callback queued during the pass, DDP's (which writes the averaged gradients) included."""
        if self._callback_queued:
            return
        self._callback_queued = True
        engine = torch.autograd.Variable._execution_engine
        read = self._guarded(self._read_param_grads)
        engine.queue_callback(lambda: engine.queue_callback(read))

    def _read_param_grads(self) -> None:
        self._callback_queued = False
        self._param_grads = {name: _Digests([p.grad], self.digest) for name, p in self._params if p.grad is not None}

    # -- steps -----------------------------------------------------------------------------

    def end_step(self, step: int) -> None:
        """The optimizer step `step` is done (called after optimizer.step(), from record())."""
        if self.active and self._calls:
            self._done.append(
                {
                    "step": int(step),
                    "calls": self._calls,
                    "params_before": self._params_before or {},
                    "param_grads": self._param_grads or {},
                    "params_after": {name: _Digests([p], self.digest) for name, p in self._params},
                }
            )
        self._calls, self._param_grads, self._params_before, self._open = [], None, None, {}
        self._used = set()
        self._step = int(step) + 1
        if self._handles and not self._watching_any_from(self._step):
            self.detach()  # nothing left to watch: no hook cost for the rest of the run

    def flush(self, run_dir: str | os.PathLike, rank: int) -> None:
        """Resolve the digests of closed steps (one device sync) and append them to this rank's file."""
        path = modules_path(run_dir, rank)
        if not self._trimmed:
            _drop_steps_after(path, self._start_step)
            self._trimmed = True
        if not self._done:
            return
        groups = [g for record in self._done for g in _groups(record)]
        scalars = [s for g in groups for s in g.scalars]
        values = torch.stack(scalars).view(torch.int64).tolist() if scalars else []
        resolved, at = {}, 0
        for g in groups:
            resolved[id(g)] = _hex(g.shapes, values[at : at + len(g.scalars)])
            at += len(g.scalars)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            for record in self._done:
                f.write(json.dumps(_resolve(record, resolved)) + "\n")
        self._done = []


def _groups(record: dict):
    for call in record["calls"]:
        for key in ("input", "output", "buffers"):
            if isinstance(call.get(key), _Digests):
                yield call[key]
    for key in ("params_before", "param_grads", "params_after"):
        yield from record[key].values()


def _resolve(record: dict, resolved: dict) -> dict:
    def value(v):
        return resolved[id(v)] if isinstance(v, _Digests) else v

    return {
        "step": record["step"],
        "calls": [{k: value(v) for k, v in call.items()} for call in record["calls"]],
        "params_before": {k: value(v) for k, v in record["params_before"].items()},
        "param_grads": {k: value(v) for k, v in record["param_grads"].items()},
        "params_after": {k: value(v) for k, v in record["params_after"].items()},
    }


def _drop_steps_after(path: Path, step: int) -> None:
    """A resumed run records the steps after its checkpoint again: drop what a crash left of them."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            if int(json.loads(line)["step"]) <= step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            continue
    path.write_text("".join(line + "\n" for line in kept))


# ---------------------------------------------------------------------------------------------
# reading


def read_module_trace(run_dir: str | os.PathLike, rank: int) -> dict[int, dict]:
    """{step: record} of one rank's module trace; {} when the run watched nothing."""
    path = modules_path(run_dir, rank)
    if not path.exists():
        return {}
    found = {}
    for lineno, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:  # any bytes: not UTF-8, not JSON, not an object, a step that is no integer
            record = json.loads(line.decode("utf-8"))
            found[int(record["step"])] = record
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
            raise malformed(path, lineno, None, "not a module-watch record (cut off by a crash?)") from None
    return found


def module_trace_ranks(run_dir: str | os.PathLike) -> list[int]:
    folder = Path(run_dir) / "trace"
    return sorted(int(p.name[4 : -len(MODULES_SUFFIX)]) for p in folder.glob(f"rank*{MODULES_SUFFIX}"))
