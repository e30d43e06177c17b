"""The recorder's rule, as properties over generated input (issue 47, docs/bad-input.md "The recorder"):

- whatever comes from the user's data, model or numbers (any dtype and shape, empty and added
  parameters, batches of any structure, NaN, infinities, integers past float's range, indices of
  any kind) is recorded or noted in meta.json `unrecorded`: no call raises, and the run it leaves is
  one the comparison reads without refusal;
- a misuse seen at the call (a loss that is no number, a step that is no integer, a key the recorder
  writes itself) raises there at once, naming the recorder, and changes nothing: the same call mended
  goes through, and the trace holds exactly the mended steps.

One process, no process group; each example is a fresh run directory (a few milliseconds).
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ddp_parity.record_values import META_KEYS, RECORD_KEYS
from ddp_parity.trace import TraceRecorder
from ddp_parity.trace_files import read_run

SETTINGS = settings(
    max_examples=60,
    deadline=5000,  # ms per example: a run is a few ms; the margin is for a loaded machine
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,  # the same examples on every machine: a failure here is reproducible by rerunning
)

REAL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
DTYPES = [*REAL_DTYPES, torch.complex64, torch.int64, torch.int32, torch.uint8, torch.bool]
SPECIAL = [None, math.nan, math.inf, -math.inf, 0.0, -0.0, 1e30]
NOT_UTF8 = "\udcff.png"  # a file name os.fsdecode made of bytes that are not UTF-8: a lone surrogate
HUGE_INTS = [2**53, 2**53 + 1, 2**60 + 1, -(2**63), 2**64, 10**30, 10**400]

shapes = st.lists(st.integers(0, 3), max_size=3).map(tuple)


@st.composite
def tensors(draw, dtypes=DTYPES, shape=shapes) -> torch.Tensor:
    dtype, size, seed = draw(st.sampled_from(dtypes)), draw(shape), draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point or dtype.is_complex:
        t = torch.randn(size, generator=g, dtype=torch.complex64 if dtype.is_complex else torch.float32).to(dtype)
        special = draw(st.sampled_from(SPECIAL))
        if special is not None and t.numel():
            t.view(-1)[0] = special
        return t
    return torch.randint(0, 2 if dtype == torch.bool else 100, size, generator=g).to(dtype)


# ---------------------------------------------------------------------------------------------
# what comes from the user's data and model


def real_numbers():
    """A loss or a norm as a loop may hold it: any float, any int, a one-element tensor of a real dtype, a numpy
    scalar, a Fraction."""
    return st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(),
        st.sampled_from(HUGE_INTS),
        tensors(dtypes=REAL_DTYPES + [torch.int64, torch.int32], shape=st.sampled_from([(), (1,), (1, 1)])),
        st.floats(allow_nan=True, width=32).map(np.float32),
        st.integers(-(2**63), 2**63 - 1).map(np.int64),
        st.fractions(),
    )


def leaves():
    """What a batch may hold besides containers: tensors, text (a lone surrogate too), numbers, bytes,
    None, a generator, an object, a set, a numpy array."""
    return st.one_of(
        tensors(),
        st.text(max_size=6),
        st.sampled_from(["\ud800", NOT_UTF8]),
        st.integers(),
        st.sampled_from(HUGE_INTS),
        st.floats(allow_nan=True),
        st.complex_numbers(),
        st.booleans(),
        st.binary(max_size=6),
        st.none(),
        st.builds(lambda: (i for i in range(3))),
        st.builds(object),
        st.frozensets(st.integers(), max_size=3),
        st.lists(st.integers(0, 9), max_size=4).map(np.array),
    )


batches = st.recursive(
    leaves(),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(["x", "y", "index", "name", NOT_UTF8, 0, 1]), inner, max_size=3),
    ),
    max_leaves=8,
)

indices = st.one_of(
    st.none(),
    st.integers(0, 2**62),
    st.lists(st.integers(0, 10**6), max_size=6),
    st.lists(st.lists(st.integers(0, 99), max_size=3), max_size=3),
    tensors(dtypes=[torch.int64, torch.int32, torch.uint8, torch.float32, torch.bool]),
    st.lists(st.text(max_size=4), min_size=1, max_size=3),
    st.lists(st.floats(allow_nan=True), min_size=1, max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.integers(0, 9), max_size=4).map(np.array),
    st.builds(object),
)

metric_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(),
    st.sampled_from(HUGE_INTS),
    tensors(dtypes=REAL_DTYPES + [torch.int64], shape=st.sampled_from([(), (1,)])),
    st.floats(allow_nan=True).map(np.float64),
)
metric_names = st.one_of(st.text(min_size=1, max_size=8), st.just(NOT_UTF8)).filter(
    lambda n: n not in ("step", "epoch")
)


def circular() -> list:
    loop: list = [1]
    loop.append(loop)
    return loop


extra_values = st.one_of(
    st.integers(),
    st.sampled_from(HUGE_INTS),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.just(NOT_UTF8),
    tensors(shape=st.sampled_from([(), (2,), (0,)])),
    st.builds(object),
    st.builds(circular),
    st.dictionaries(st.text(max_size=3), st.floats(allow_nan=True), max_size=2),
)
extra_names = st.text(min_size=1, max_size=8).filter(
    lambda n: n not in RECORD_KEYS and n not in ("micro_batches", "param_digest", "layers")
)


class Model(torch.nn.Module):
    """A module of generated parameters (any dtype and shape, possibly none) and buffers."""

    def __init__(self, parameters: list[torch.Tensor], buffers: list[torch.Tensor]):
        super().__init__()
        for n, t in enumerate(parameters):
            trainable = t.is_floating_point() or t.is_complex()
            setattr(self, f"p{n}", torch.nn.Parameter(t.clone(), requires_grad=trainable))
        for n, t in enumerate(buffers):
            self.register_buffer(f"b{n}", t.clone())

    def set_gradients(self, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        for q in self.parameters():
            if q.requires_grad:
                q.grad = torch.randn(q.shape, generator=g, dtype=torch.float32).to(q.dtype)


def optimizer_of(model: Model, lr) -> torch.optim.Optimizer | None:
    trainable = [q for q in model.parameters() if q.requires_grad]
    if not trainable:
        return None
    optimizer = torch.optim.SGD(trainable, lr=0.1)
    optimizer.param_groups[0]["lr"] = lr  # what a framework may leave there: a tensor, a string, NaN
    return optimizer


steps = st.fixed_dictionaries(
    {
        "loss": real_numbers(),
        "grad_norm": st.one_of(st.none(), real_numbers()),
        "lr": st.one_of(st.none(), real_numbers()),
        "indices": indices,
        "batch": st.one_of(st.none(), batches),
        "epoch": st.integers(0, 2**63 - 1),
        "gap": st.integers(1, 3),  # the step after the previous one (a loop may record every k-th)
        "extra": st.dictionaries(extra_names, extra_values, max_size=2),
        "micro_batches": st.one_of(st.none(), st.integers(1, 2**62)),
        "validation": st.one_of(st.none(), st.dictionaries(metric_names, metric_values, max_size=3)),
    }
)

runs = st.fixed_dictionaries(
    {
        "config": st.dictionaries(
            st.one_of(st.text(max_size=4), st.just(NOT_UTF8)),
            st.one_of(st.floats(), st.text(max_size=4), st.just(NOT_UTF8)),
            max_size=3,
        ),
        "parameters": st.lists(tensors(), max_size=3),
        "buffers": st.lists(tensors(), max_size=2),
        "added": st.one_of(st.none(), st.tuples(st.integers(1, 3), tensors())),  # (after step k, a parameter)
        "optimizer_lr": st.one_of(st.none(), st.sampled_from([0.1, math.nan, "0.1", torch.tensor(0.1), [0.1]])),
        "steps": st.lists(steps, min_size=1, max_size=4),
    }
)


def one_step(**changed) -> dict:
    plain = dict(loss=0.5, grad_norm=None, lr=None, indices=None, batch=None, epoch=0, gap=1, extra={})
    return {**plain, "micro_batches": None, "validation": None, **changed}


def run_of(*steps: dict, **changed) -> dict:
    return {
        "config": {},
        "parameters": [],
        "buffers": [],
        "added": None,
        "optimizer_lr": None,
        "steps": list(steps),
        **changed,
    }


@SETTINGS
@given(run=runs)
@example(run_of(one_step(loss=10**400), one_step(loss=2**60 + 1), one_step(loss=torch.tensor(2**62))))
@example(
    run_of(one_step(extra={"tokens": 2**60 + 1, "file": NOT_UTF8}, validation={NOT_UTF8: 2**60 + 1, "nan": math.nan}))
)
@example(run_of(one_step(indices=[2**70], batch={NOT_UTF8: object(), "x": torch.ones(0)}), config={NOT_UTF8: NOT_UTF8}))
@example(
    run_of(
        one_step(),
        one_step(),
        parameters=[torch.zeros(0), torch.ones(2, dtype=torch.complex64)],
        added=(1, torch.ones(3)),
    )
)
def test_recording_never_raises_for_what_comes_from_data_and_the_run_reads_back(run):
    model = Model(run["parameters"], run["buffers"])
    optimizer = optimizer_of(model, run["optimizer_lr"]) if run["optimizer_lr"] is not None else None
    with tempfile.TemporaryDirectory() as folder:
        recorder = TraceRecorder(Path(folder) / "run", side="generated", config=run["config"])
        recorder.start()
        step, recorded, validated = 0, [], 0
        for n, s in enumerate(run["steps"], start=1):
            step += s["gap"]
            model.set_gradients(n)
            extra = dict(s["extra"])
            if s["micro_batches"] is not None:
                extra["micro_batches"] = s["micro_batches"]
            recorder.record(
                step,
                s["loss"],
                s["indices"],
                epoch=s["epoch"],
                lr=s["lr"],
                grad_norm=s["grad_norm"],
                batch=s["batch"],
                optimizer=optimizer,
                model=model,
                **extra,
            )
            recorded.append(step)
            if s["validation"] is not None:
                recorder.record_validation(s["epoch"], step, s["validation"])
                validated += 1
            if run["added"] is not None and run["added"][0] == n:
                model.added = torch.nn.Parameter(run["added"][1].clone(), requires_grad=False)
        recorder.finish(model)
        files = read_run(Path(folder) / "run")  # the comparison's reader: every type checked, a refusal raises
        assert [r["step"] for r in files.streams[0]] == recorded
        assert len(files.validation) == validated and files.meta["finished"] is True


# ---------------------------------------------------------------------------------------------
# misuse at the call: raised there, nothing changed


MISUSES = {
    "loss": [
        None,
        "0.5",
        b"1",
        True,
        [1.0],
        {"loss": 1.0},
        torch.ones(2),
        torch.ones(0),
        torch.ones((), dtype=torch.complex64),
        1j,
    ],
    "lr": ["0.1", torch.ones(3), 1j, True],
    "grad_norm": ["1", torch.ones(2), torch.zeros((), dtype=torch.complex64)],
    "step": [1.5, 2.0, True, "3", None, -1, 2**63, "previous"],
    "epoch": [0.5, -1, "0", None],
    "micro_batches": [0, -2, "2", 1.5, True],
    "extra_key": [k for k in RECORD_KEYS if k not in ("step", "epoch", "loss", "lr", "grad_norm", "indices")],
    "metric": ["0.5", True, torch.ones(2), None, 1j],
    "metric_name": ["step", "epoch", 3, None],
    "meta_key": list(META_KEYS),
}


@SETTINGS
@given(kind=st.sampled_from(sorted(MISUSES)), data=st.data(), before=st.integers(0, 2))
def test_a_misuse_raises_at_the_call_and_leaves_the_recorder_as_it_was(kind, data, before):
    bad = data.draw(st.sampled_from(MISUSES[kind]), label="bad value")
    model = torch.nn.Linear(2, 1)
    with tempfile.TemporaryDirectory() as folder:
        recorder = TraceRecorder(Path(folder) / "run", side="misused")
        recorder.start()
        for step in range(1, before + 1):
            recorder.record(step, float(step), [step])
        step = before + 1
        with pytest.raises((TypeError, ValueError)) as raised:
            misuse(recorder, kind, bad, step, model)
        assert "TraceRecorder" in str(raised.value)
        recorder.record(step, 0.5, [step], micro_batches=1)  # the same step, mended
        recorder.record_validation(0, step, {"val_loss": 0.25})
        recorder.finish(model)
        files = read_run(Path(folder) / "run")
        assert [r["step"] for r in files.streams[0]] == list(range(1, step + 1))
        assert files.validation == [{"epoch": 0, "step": step, "val_loss": 0.25}]
        assert "unrecorded" not in files.meta


def misuse(recorder: TraceRecorder, kind: str, bad, step: int, model) -> None:
    if kind in ("loss", "lr", "grad_norm"):
        args = {"loss": 1.0, "lr": None, "grad_norm": None, kind: bad}
        recorder.record(step, args["loss"], lr=args["lr"], grad_norm=args["grad_norm"])
    elif kind == "step":
        recorder.record((step - 1 if step > 1 else -1) if bad == "previous" else bad, 1.0)
    elif kind == "epoch":
        recorder.record(step, 1.0, epoch=bad)
    elif kind == "micro_batches":
        recorder.record(step, 1.0, micro_batches=bad)
    elif kind == "extra_key":
        recorder.record(step, 1.0, **{bad: 1})
    elif kind == "metric":
        recorder.record_validation(0, step, {"val_loss": 0.25, "bad": bad})
    elif kind == "metric_name":
        recorder.record_validation(0, step, {bad: 0.25})
    elif kind == "meta_key":
        recorder.finish(model, **{bad: 1})
