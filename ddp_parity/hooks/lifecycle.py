"""Start and end of a recording with no line changed.

The recorder starts at the first optimizer step, on every rank alike (a process that never steps an
optimizer, torchrun's agent or a launcher, writes nothing): rank and world come from
torch.distributed as the program set it up, and the device is already the program's. It finishes at
`destroy_process_group` (before the group goes) or at exit: the final parameters of the module that
owns the optimizer's parameters, named as an explicit recorder names them.

A program that records itself (a started TraceRecorder or TraceCallback in the process) is not
recorded twice: the hooks stand down at its first step and write nothing.
"""

from __future__ import annotations

import atexit
import datetime
import functools
import gc
import hashlib
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from ddp_parity.exit_hooks import live_recorders
from ddp_parity.hooks import (
    checkpoints,
    collectives,
    context,
    data,
    evaluation,
    gradients,
    modules,
    optimizer,
    schedule,
    state,
)
from ddp_parity.hooks.state import Recording, guarded
from ddp_parity.record_values import meta_as_json
from ddp_parity.trace import TRACE_DIR, TraceRecorder, sampler_facts, write_json_atomic

PRIVATE_FACT = "_"  # facts the hooks keep for themselves (names by id, the optimizers built): not written


def install_hooks(run_dir: str | os.PathLike, side: str) -> Recording:
    """Make this process's recording and install every hook; each group alone, so one that cannot be
    installed leaves the others working (and says so)."""
    live = state.current = Recording(Path(run_dir), side)
    for name, install in (
        ("optimizer hooks", lambda: optimizer.install(start)),
        ("backward and clipping hooks", gradients.install),
        ("scheduler hooks", schedule.install),
        ("data hooks", data.install),
        ("context hooks", context.install),
        ("collective hooks", collectives.install),
        ("checkpoint hooks", checkpoints.install),
        ("evaluation hooks", evaluation.install),
        ("destroy_process_group hook", _wrap_destroy),
        ("os._exit hook", _wrap_os_exit),
    ):
        try:
            install()
        except Exception as exc:
            live.could_not(name, exc)
    atexit.register(finish_at_exit)  # after trace.py's own: runs before it closes the recorders
    return live


def start(live: Recording, stepped: torch.optim.Optimizer) -> None:
    """The first step of `stepped`: stand down for an explicit recorder, else start ours (a
    collective when a process group exists: every rank steps its first step alike)."""
    context.stop_watching_top_calls()
    explicit = [r for r in live_recorders() if r is not live.recorder]
    if explicit:
        live.standing_down = True
        if live.watch is not None:  # the program's own recorder watches what it watches
            live.watch.detach()
        evaluation.settle(live)  # its global forward hooks go: nothing of ours runs per forward
        print(
            f"ddp-parity record: the program records itself ({explicit[0].run_dir}); the hooks stand down",
            file=sys.stderr,
        )
        return
    candidates = [ref() for ref in live.wrapped_modules + live.root_modules]
    wrappers = [w for w in (ref() for ref in live.wrapped_modules) if w is not None]
    built = {i for _, ids, _ in live.facts.get("_built", []) for group in ids for i in group}
    live.model = modules.model_of(stepped, [m for m in candidates if m is not None], wrappers, built)
    if isinstance(live.model, modules.Wrapped):
        context.wrapped_init_facts(live, live.model)
    _note_lightning_loop(live, [m for m in candidates if m is not None])
    names = modules.names_of(live.model)
    live.facts["_names"] = names
    if live.model is None:
        live.could_not("the model", LookupError("no module seen owns the optimizer's parameters"))
    else:
        context.watch_training_inputs(live)
    recorder = TraceRecorder(
        live.run_dir,
        side=live.side,
        config={},
        extra_meta={
            "recorded_by": "hooks",
            "command": list(sys.argv),
            "device": _device_of(stepped),
            "optimizer_built": optimizer.built_facts(live, names),
        },
    )
    recorder._layer_tails = False  # the grad_norm is clip_grad_norm_'s, its norm_type recorded, or our 2-norm
    live.local.ours = True  # our own collectives and backward-free reads are not the program's
    try:
        recorder.start(facts=_rank_facts(live))
    finally:
        live.local.ours = False
    live.recorder = recorder
    live.pid = os.getpid()  # the process whose recording this is (a forked DataLoader worker inherits it)
    if live.watch is not None:
        recorder.adopt_watch(live.watch)
    for entry in live.unrecorded.values():  # what the hooks could not take before the first step
        recorder.note_unrecorded(entry["what"], entry["why"])
    evaluation.started(live)


@guarded("Lightning's accumulate_grad_batches")
def _note_lightning_loop(live: Recording, candidates: list) -> None:
    facts = modules.lightning_loop_facts(candidates)
    if facts is not None:
        live.note("lightning_loop", facts)


def _rank_facts(live: Recording) -> dict:
    """A fact the hooks did not see is left out (as an explicit recorder leaves out a sampler it was not
    given): the format's rank facts are objects when present, never null."""
    sampler = data.train_sampler(live)
    facts = {"sampler": sampler_facts(sampler) if sampler is not None else None}
    for key in ("init_params_sha256", "init_parameters_sha256", "init_buffers_sha256", "init_parameters_by_name"):
        facts[key] = live.facts.get(key)
    return {key: value for key, value in facts.items() if value is not None}


def _device_of(stepped: torch.optim.Optimizer) -> str | None:
    for group in stepped.param_groups:
        for p in group["params"]:
            return str(p.device)
    return None


def _wrap_destroy() -> None:
    original = dist.destroy_process_group

    @functools.wraps(original)
    def destroy_process_group(*args, **kwargs):
        if not args and kwargs.get("group") is None:  # the default group: the run's end
            if _finish_with_a_collective():
                # the program's own barrier before destroy_process_group is no longer its last collective:
                # the trace's came after it, so the ranks meet again before any of them tears gloo down
                _meet_at_the_end()
            # as ddp_parity.destroy_process_group: a DDP wrapper the program dropped but a reference cycle
            # still holds keeps gloo's threads alive to interpreter exit, where they abort the process
            gc.collect()
        return original(*args, **kwargs)

    dist.destroy_process_group = destroy_process_group


def _wrap_os_exit() -> None:
    """A rank started by fork (multiprocessing's Process: pycls's launcher and many others) ends by os._exit, where
    no atexit handler runs: the recording ends there instead. Only in the process that started it: a DataLoader
    worker forked from a rank inherits the recording and ends by os._exit too."""
    original = os._exit

    @functools.wraps(original)
    def _exit(code):
        live = state.current
        try:
            if live is not None and live.recorder is not None and live.pid == os.getpid():
                finish_at_exit()
        finally:  # the process ends whatever the recording's end did
            original(code)

    os._exit = _exit


def finish_at_exit() -> None:
    """The end of a program that never destroyed its process group: the trace is finished (its replica check is
    a collective), then, where that ran, every rank waits for the others and the group goes. A rank that left
    while its peer was still in the last collective aborted that peer's process under gloo (SIGABRT at
    interpreter exit: StyleGAN2's loop, about one recorded run in ten), where the program alone, whose last
    collective comes long before its exit, did not."""
    if _finish_with_a_collective():
        _meet_at_the_end()
        _destroy_at_exit()


def _finish_with_a_collective() -> bool:
    """finish(), and whether this call ran the trace's collective (the replica check at the end)."""
    live = state.current
    open_before = live is not None and live.recorder is not None and live.recorder._ended is None
    finish()
    return open_before and live.recorder._ended == "finish()"


def _gloo_group_of_several() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1 and dist.get_backend() == "gloo"


@guarded("the ranks' meeting at the end")
def _meet_at_the_end() -> None:
    """Under gloo, a barrier with a deadline (a peer gone is said, never waited for): no rank tears its group
    down while a peer is still in the trace's last collective (a SIGABRT of one rank at its exit)."""
    if _gloo_group_of_several():
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=EXIT_BARRIER_S))


@guarded("the process group at exit")
def _destroy_at_exit() -> None:
    if _gloo_group_of_several():
        dist.destroy_process_group()


EXIT_BARRIER_S = 60  # how long a rank at exit waits for its peers to reach theirs


@guarded("the end of the recording")
def finish() -> None:
    """Write this rank's hook facts and finish the trace (final parameters, replica check), once.
    A trace an uncaught exception already closed keeps what it has: no collective at a failing exit."""
    live = state.current
    if live is None or live.recorder is None or live.standing_down:
        return
    recorder = live.recorder
    evaluation.close(live)
    evaluation.write(live)
    _note_final_copies(live)
    if recorder._ended is None:
        grouped = recorder.world_size == 1 or (dist.is_available() and dist.is_initialized())
        if live.model is not None and grouped:
            live.local.ours = True
            try:
                recorder.finish(live.model)
            finally:
                live.local.ours = False
        else:
            recorder.note_unrecorded("final.safetensors", "no model, or the process group was gone at the end")
            recorder.close()
            recorder._write_meta()
    write_facts(live)


@guarded("the copies' state at the end")
def _note_final_copies(live: Recording) -> None:
    """The sha256 of each copy of the trained model (an EMA) at the end: the step records digest a copy at the
    optimizer step, before the update that follows it, so a last update is seen here only. Each rank's own
    tensors (a shard's local part): no collective at the end."""
    copies = live.live_copies()
    if copies:
        live.facts["copies_final_sha256"] = [_local_state_sha256(copy) for copy in copies]
        live.facts["copies_final_after_step"] = live.steps


def _local_state_sha256(module: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for tensor in module.state_dict().values():
        if isinstance(tensor, torch.Tensor):
            local = getattr(tensor, "_local_tensor", tensor).detach().cpu().contiguous()
            h.update(local.view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def write_facts(live: Recording) -> None:
    """trace/rank{r}.hooks.json: what this rank's hooks saw besides the step records."""
    recorder = live.recorder
    checkpoints.resolve(live)  # a state_dict saved or loaded before the model was known: the model's?
    facts = {k: v for k, v in live.facts.items() if not k.startswith(PRIVATE_FACT)}
    if (after := collectives.after_last_step(live)) is not None:
        facts["collectives_after_last_step"] = after
    facts["optimizer_built"] = recorder.meta.get("optimizer_built")
    if (end := optimizer.lr_at_end(live)) is not None:
        facts["lr_at_end"] = end
    facts["steps"] = live.steps
    facts["unrecorded"] = list(live.unrecorded.values())
    path = live.run_dir / TRACE_DIR / f"rank{recorder.rank}.hooks.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, meta_as_json(facts, live.recorder.note_unrecorded))  # names that are not UTF-8 escaped
