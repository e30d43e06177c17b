"""The benchmark's probe (benchmarks/recording_cost.py), imported by every Python process of a measured
command, plain, recorded and instrumented alike: it writes, at exit, the time each optimizer step ended
and the process's CPU time then (torch's global step post-hook: the same few microseconds in every
variant), and with DDP_PARITY_COUNT_SYNCS set, how often the recording's code read a tensor's value on
the host, by call site.

A read counted is a call made from a frame of the ddp_parity package (torch's own frames in between
are looked through) of what waits for a device's tensor: item, tolist, numpy, cpu, to("cpu"),
__bool__/__float__/__int__/__index__, nonzero, and torch.cuda/torch.accelerator.synchronize. On a CPU
none of them waits; on an accelerator each would, unless the code reads there only what is on the host
(the recorder's `device.type == "cpu"` branches: docs/benchmarks.md names the sites). Counted apart:
reads inside TraceRecorder.flush (it runs at every step on a CPU, where host values cost nothing to
write, and every `flush_every` steps on an accelerator), and reads before the first step ended or under TraceRecorder's
start, finish or close (once per run).
"""

import atexit
import json
import os
import sys
import time

_OUT = os.environ.get("DDP_PARITY_PROBE_OUT")  # a folder: one file per process that stepped
_COUNT = bool(os.environ.get("DDP_PARITY_COUNT_SYNCS"))
_PACKAGE = os.sep + "ddp_parity" + os.sep
_TORCH = os.sep + "torch" + os.sep
_READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__", "nonzero")

_steps: list[float] = []
_reads = {"in_flush": {}, "start_or_end": {}, "elsewhere": {}}
_ONCE = ("start", "finish", "close")  # TraceRecorder's: once per run, not per step
_state = {"flushing": 0}


def _install_probe() -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    register_optimizer_step_post_hook(lambda *_: _steps.append((time.perf_counter(), time.process_time())))
    if _COUNT:
        _count_reads()
        register_optimizer_step_pre_hook(lambda *_: _count_flushes_apart())
    atexit.register(_write)


def _caller() -> tuple[str, bool] | None:
    """Where the call comes from when it is the recording's code (the first frame outside torch is
    ddp_parity's): ("module.function", whether TraceRecorder's start/finish/close is on the stack)."""
    frame = sys._getframe(2)  # 0: here, 1: the wrapper of the read, 2: the code that reads
    while frame is not None and _TORCH in frame.f_code.co_filename:
        frame = frame.f_back
    if frame is None or _PACKAGE not in frame.f_code.co_filename:
        return None
    site = f"{os.path.basename(frame.f_code.co_filename).removesuffix('.py')}.{frame.f_code.co_name}"
    once = False
    while frame is not None and not once:
        once = frame.f_code.co_filename.endswith(os.sep + "trace.py") and frame.f_code.co_name in _ONCE
        frame = frame.f_back
    return site, once


def _count(name: str, caller: tuple[str, bool]) -> None:
    site, once = caller
    once = once or not _steps  # before the first step ended: the model as given to DDP, the recorder's start
    where = _reads["in_flush" if _state["flushing"] else "start_or_end" if once else "elsewhere"]
    key = f"{name} in {site}"
    where[key] = where.get(key, 0) + 1


def _counted(name, original):
    def read(*args, **kwargs):
        if (caller := _caller()) is not None:
            _count(name, caller)
        return original(*args, **kwargs)

    return read


def _towards_host(name, original):
    def copy(self, *args, **kwargs):
        # a copy to the host names it ("cpu"); a torch.device is the tensor's own, passed on (get_total_norm)
        target = args[0] if args else kwargs.get("device")
        if isinstance(target, str) and target.startswith("cpu") and (caller := _caller()) is not None:
            _count(name, caller)
        return original(self, *args, **kwargs)

    return copy


def _count_reads() -> None:
    import torch

    for name in _READS:
        setattr(torch.Tensor, name, _counted(name, getattr(torch.Tensor, name)))
    torch.Tensor.to = _towards_host("to", torch.Tensor.to)
    torch.cuda.synchronize = _counted("synchronize", torch.cuda.synchronize)
    torch.accelerator.synchronize = _counted("synchronize", torch.accelerator.synchronize)


def _count_flushes_apart() -> None:
    """Once the recorder's module is loaded (by the program, or by the hooks at the first step)."""
    trace = sys.modules.get("ddp_parity.trace")
    if trace is None or getattr(trace.TraceRecorder.flush, "_probed", False):
        return
    flush = trace.TraceRecorder.flush

    def counted_flush(self):
        _state["flushing"] += 1
        try:
            return flush(self)
        finally:
            _state["flushing"] -= 1

    counted_flush._probed = True
    trace.TraceRecorder.flush = counted_flush


def _write() -> None:
    if not _steps or not _OUT:
        return
    rank = os.environ.get("RANK", "0")
    facts = {
        "rank": int(rank),
        "pid": os.getpid(),
        "step_ends": [wall for wall, _ in _steps],
        "step_cpu": [cpu for _, cpu in _steps],
        "reads": _reads if _COUNT else None,
    }
    with open(os.path.join(_OUT, f"probe.rank{rank}.{os.getpid()}.json"), "w") as f:
        json.dump(facts, f)


class _AfterTorchImport:
    """The probe goes in once the program has imported torch (never before: the program may set its
    threads first)."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" and self in sys.meta_path:
            sys.meta_path.remove(self)
            import importlib.util

            spec = importlib.util.find_spec(name)
            exec_module = spec.loader.exec_module

            def exec_then_probe(module):
                exec_module(module)
                _install_probe()

            spec.loader.exec_module = exec_then_probe
            return spec
        return None


if _OUT:
    if "torch" in sys.modules:
        _install_probe()
    else:
        sys.meta_path.insert(0, _AfterTorchImport())
