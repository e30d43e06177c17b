"""The recorder is a guest in the user's loop (issue 47): it never raises because of the user's data,
the model's contents or the environment (it records what it can and says in meta.json `unrecorded`
what it could not), and a misuse of its API raises at the call, leaving the recorder usable."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import lightning as L
import pytest
import torch
from conftest import REPO, child_env
from test_recorder_lightning import loader, quiet_trainer

from ddp_parity import TraceCallback
from ddp_parity.hooks import recording_env
from ddp_parity.trace import (
    TraceRecorder,
    batch_fingerprint,
    read_meta,
    read_validation,
)
from ddp_parity.trace_files import read_run


def started(run_dir) -> TraceRecorder:
    recorder = TraceRecorder(run_dir, side="mine")
    recorder.start()
    return recorder


def read_whole(run_dir) -> tuple[dict, list[dict]]:
    """meta.json and rank 0's records as a comparison reads them (types checked: a refusal raises)."""
    run = read_run(run_dir)
    return run.meta, list(run.streams[0])


def unrecorded(meta: dict) -> dict[str, str]:
    return {item["what"]: item["why"] for item in meta.get("unrecorded", [])}


class Holder(torch.nn.Module):
    """A linear layer beside one parameter of any dtype and shape."""

    def __init__(self, odd: torch.Tensor | None):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)
        if odd is not None:
            self.odd = torch.nn.Parameter(odd, requires_grad=odd.is_floating_point() or odd.is_complex())


# ---------------------------------------------------------------------------------------------
# A: models the sketch cannot take


@pytest.mark.parametrize(
    "odd, left_out",
    [
        (torch.randn(3, dtype=torch.complex64), "odd"),
        (torch.zeros(0), "odd"),
        (torch.arange(4), "odd"),
        (torch.zeros(2, dtype=torch.bool), "odd"),
    ],
    ids=["complex", "empty", "integer", "bool"],
)
def test_a_parameter_the_sketch_cannot_take_is_noted_and_the_rest_recorded(tmp_path, odd, left_out):
    model = Holder(odd)
    recorder = started(tmp_path)
    for step in (1, 2):
        recorder.record(step, 1.0, model=model)
    recorder.finish(model)
    meta, records = read_whole(tmp_path)
    assert meta["layers"]["names"] == ["linear.weight", "linear.bias"]
    # the digest sums the first and last parameter (a module's own before its children's), and the first and last
    # trained where those are others (an integer or boolean parameter takes no gradient: linear.weight joins it)
    trained = odd.is_floating_point() or odd.is_complex()
    assert meta["param_digest_names"] == ["odd", "linear.bias"] + ([] if trained else ["linear.weight"])
    assert all(len(r["layers"]) == 2 and len(r["param_digest"]) == len(meta["param_digest_names"]) for r in records)
    assert left_out in unrecorded(meta)["layers"] and meta["finished"]


def test_a_module_with_buffers_only_and_a_parameter_added_mid_run(tmp_path):
    buffers_only = torch.nn.BatchNorm1d(3, affine=False)
    recorder = started(tmp_path / "buffers")
    recorder.record(1, 1.0, model=buffers_only)
    recorder.finish(buffers_only)
    meta, records = read_whole(tmp_path / "buffers")
    assert "layers" not in meta and records[0]["param_digest"] == []

    model = Holder(None)
    recorder = started(tmp_path / "added")
    recorder.record(1, 1.0, model=model)
    model.extra = torch.nn.Parameter(torch.ones(3))
    recorder.record(2, 1.0, model=model)
    recorder.record(3, 1.0, model=model)
    recorder.finish(model)
    meta, records = read_whole(tmp_path / "added")
    assert [len(r["layers"]) for r in records] == [2, 2, 2]  # the rows stay the first step's tensors
    assert "added after the first step" in unrecorded(meta)["layers of extra"]


class ComplexModule(L.LightningModule):
    """A real layer and a complex scale: the loss is real, the scale's gradient complex."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.phase = torch.nn.Parameter(torch.ones(1, dtype=torch.complex64))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x) * self.phase.abs(), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def test_a_trainer_fit_with_a_complex_parameter_records_every_step(tmp_path):
    trainer = quiet_trainer(TraceCallback(str(tmp_path)), devices=1)
    trainer.fit(ComplexModule(), loader())
    meta, records = read_whole(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3, 4] and meta["finished"]
    assert meta["layers"]["names"] == ["layer.weight", "layer.bias"] and "phase" in unrecorded(meta)["layers"]


# ---------------------------------------------------------------------------------------------
# D: values handed to record(): misuse raises at the call and poisons nothing; data is recorded or noted


@pytest.mark.parametrize(
    "args, kwargs, error, words",
    [
        ((None,), {}, TypeError, "loss must be a real number"),
        ((torch.ones(3),), {}, TypeError, "float32 tensor of shape [3]"),
        (("0.5",), {}, TypeError, "loss must be a real number"),
        ((torch.ones((), dtype=torch.complex64),), {}, TypeError, "complex64"),
        ((1.0,), {"lr": "0.1"}, TypeError, "lr must be a real number"),
        ((1.0,), {"grad_norm": "1"}, TypeError, "grad_norm must be a real number"),
        ((1.0,), {"grad_norm": torch.ones(2)}, TypeError, "grad_norm must be"),
        ((1.0,), {"micro_batches": 0}, ValueError, "micro_batches must be 1 or more"),
        ((1.0,), {"micro_batches": "2"}, TypeError, "micro_batches must be an integer"),
        ((1.0,), {"attempt": 3}, ValueError, "attempt= names a key the recorder writes itself"),
        ((1.0,), {"batch_digest": "x"}, ValueError, "batch_digest= names a key"),
    ],
    ids=[
        "loss-None",
        "loss-vector",
        "loss-string",
        "loss-complex",
        "lr-string",
        "grad_norm-string",
        "grad_norm-vector",
        "micro_batches-0",
        "micro_batches-string",
        "attempt",
        "batch_digest",
    ],
)
def test_a_misused_call_raises_there_and_the_same_step_mended_goes_through(tmp_path, args, kwargs, error, words):
    recorder = started(tmp_path)
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        recorder.record(1, *args, **kwargs)
    recorder.record(1, 1.0, [0, 1], micro_batches=1)
    recorder.record(2, 2.0, [2, 3])
    recorder.finish(torch.nn.Linear(1, 1))
    meta, records = read_whole(tmp_path)
    assert [(r["step"], r["loss"]) for r in records] == [(1, 1.0), (2, 2.0)] and "unrecorded" not in meta


@pytest.mark.parametrize(
    "indices, kept",
    [
        (5, [5]),
        (torch.tensor(7), [7]),
        (torch.tensor([[1], [2]]), [1, 2]),
        ([[3, 4], [5]], [3, 4, 5]),
        ([torch.tensor(8), 9], [8, 9]),
        (["a.png", "b.png"], None),
        (torch.tensor([1.0, 2.0]), None),
        ([1.5], None),
        (torch.tensor([True]), None),
        ({"i": 1}, None),
    ],
    ids=["int", "0-d", "2-D", "nested", "tensors", "strings", "floats", "float", "bool", "dict"],
)
def test_indices_of_any_kind_are_recorded_as_integers_or_noted(tmp_path, indices, kept):
    recorder = started(tmp_path)
    recorder.record(1, 1.0, indices)
    recorder.record(2, 1.0, indices)
    recorder.finish(torch.nn.Linear(1, 1))
    meta, records = read_whole(tmp_path)
    assert [r.get("indices") for r in records] == [kept, kept]
    assert ("indices" in unrecorded(meta)) == (kept is None)


def test_an_lr_the_optimizer_holds_as_a_string_is_noted_not_written(tmp_path):
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.param_groups[0]["lr"] = "0.1"  # a framework's odd bookkeeping, not the call's argument
    recorder = started(tmp_path)
    recorder.record(1, 1.0, optimizer=optimizer)
    recorder.finish(model)
    meta, records = read_whole(tmp_path)
    assert records[0]["lr"] is None and "'0.1'" in unrecorded(meta)["lr"]


# ---------------------------------------------------------------------------------------------
# E: batch contents that are not tensors


def test_strings_and_numbers_in_a_batch_enter_its_digest_by_value():
    x = torch.ones(2)
    assert batch_fingerprint({"x": x, "name": "a.png"}) != batch_fingerprint({"x": x, "name": "b.png"})
    assert batch_fingerprint({"x": x, "n": 1}) != batch_fingerprint({"x": x, "n": 2})
    assert batch_fingerprint({"x": x, "n": 1}) != batch_fingerprint({"x": x, "n": "1"})
    assert batch_fingerprint([x, "ab", "c"]) != batch_fingerprint([x, "a", "bc"])
    assert batch_fingerprint({"x": x, "name": "a", "index": 3}) == batch_fingerprint({"x": x, "name": "a", "index": 4})


def test_a_batch_part_that_cannot_be_digested_is_named_and_never_compared_equal(tmp_path):
    from ddp_parity import compare_traces

    for side, token in (("a", 1), ("b", 2)):  # the two runs' generators hold different data
        recorder = started(tmp_path / side)
        batch = {"x": torch.ones(2), "stream": (i * token for i in range(3)), "info": object()}
        recorder.record(1, 1.0, [0], batch=batch)
        recorder.finish(torch.nn.Linear(1, 1))
    meta, records = read_whole(tmp_path / "a")
    assert "batch_digest" not in records[0]
    assert records[0]["batch_undigested"] == ["batch['info']: object", "batch['stream']: generator"]
    assert "batch['info']: object" in unrecorded(meta)["batch_digest"]
    report = compare_traces(tmp_path / "a", tmp_path / "b")
    assert "batch" not in report["per_step"]  # nothing calls the batches equal
    assert any(w["kind"] == "recorder_unrecorded" and "batch_digest" in w["message"] for w in report["warnings"])


# ---------------------------------------------------------------------------------------------
# H: param groups are taken once, at the first step


def test_param_groups_are_the_first_steps_and_named_at_finish_without_model(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    recorder = started(tmp_path)
    for step in (1, 2, 3):
        optimizer.step()
        recorder.record(step, 1.0, optimizer=optimizer)  # no model=: the names come at finish
        scheduler.step()
    recorder.finish(model)
    group = read_meta(tmp_path)["optimizer"]["param_groups"][0]
    assert group["lr"] == 0.1  # the first step's, never re-read after the scheduler moved it
    assert group["params"] == ["0.weight", "0.bias", "1.weight", "1.bias"]


# ---------------------------------------------------------------------------------------------
# O and F: TraceCallback


class StringMetric(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        self.last_validation = {"val_loss": 0.25, "note": "fine", "count": 2**60 + 1}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def test_a_string_metric_in_last_validation_leaves_fit_running(tmp_path):
    trainer = quiet_trainer(TraceCallback(str(tmp_path)), devices=1, limit_val_batches=1, num_sanity_val_steps=0)
    trainer.fit(StringMetric(), loader(), loader())
    assert read_validation(tmp_path) == [{"epoch": 0, "step": 4, "val_loss": 0.25}]
    notes = unrecorded(read_meta(tmp_path))
    assert "'fine'" in notes["validation metric 'note'"] and "beyond 2**53" in notes["validation metric 'count'"]


class Manual(L.LightningModule):
    """Manual optimization: two backward passes a step, the loss not returned."""

    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.layer = torch.nn.Linear(4, 1)
        self.losses: list[float] = []

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        optimizer.zero_grad()
        x, y = batch
        first = torch.nn.functional.mse_loss(self.layer(x[:4]), y[:4])
        second = torch.nn.functional.mse_loss(self.layer(x[4:]), y[4:])
        self.manual_backward(first)
        self.manual_backward(second)
        optimizer.step()
        self.losses.append((first.detach() + second.detach()).item())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def test_manual_optimization_under_the_callback_records_every_optimizer_step(tmp_path):
    module = Manual()
    trainer = quiet_trainer(TraceCallback(str(tmp_path)), devices=1)
    trainer.fit(module, loader())
    meta, records = read_whole(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3, 4] and trainer.global_step == 4
    assert [r["loss"] for r in records] == module.losses  # the backwarded losses, summed in order
    assert all(r["grad_norm"] is not None and r["lr"] == 0.01 for r in records)
    assert meta["optimizer"]["param_groups"][0]["params"] == ["layer.weight", "layer.bias"]


# ---------------------------------------------------------------------------------------------
# C: the environment refuses a write


def test_an_unwritable_run_directory_never_raises_into_training(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    recorder = TraceRecorder(tmp_path / "file" / "run", side="mine")  # below a file: nothing can be made there
    recorder.start()
    recorder.record(1, 1.0, [0])
    recorder.record_validation(0, 1, {"val_loss": 0.5})
    recorder.finish(torch.nn.Linear(1, 1))
    assert "could not write" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


FULL_DISK = textwrap.dedent(
    """
    import os, resource, signal, sys
    import torch
    from ddp_parity.runs import write_error_file
    from ddp_parity.trace import TraceRecorder

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as a full disk does
    run_dir, limit = sys.argv[1], int(sys.argv[2])
    recorder = TraceRecorder(run_dir, side="mine")
    recorder.start()  # meta.json fits under the limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    for step in range(1, 101):
        recorder.record(step, float(step), list(range(step, step + 16)))
        recorder.record_validation(0, step, {f"val_loss_{k}": step / 3 for k in range(4)})
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))
    recorder.record_error(RuntimeError("x" * 5000))  # an error file larger than what the disk takes
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    recorder.finish(torch.nn.Linear(1, 1))
    print("trained to the end")
    """
)


def test_a_full_disk_ends_the_trace_at_a_whole_step_and_training_goes_on(tmp_path):
    """Writes past a file-size limit fail (EFBIG), as they do on a full disk (ENOSPC): the recorder let
    the error into the user's loop, and its error file was left with the bytes that fitted."""
    run_dir = tmp_path / "run"
    child = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(run_dir), "8192"],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=REPO,
        timeout=120,
    )
    assert child.returncode == 0 and "trained to the end" in child.stdout, child.stderr[-2000:]
    assert "could not write" in child.stderr
    meta, records = read_whole(run_dir)  # whole lines only: a comparison reads what was written
    assert 10 < len(records) < 100 and [r["step"] for r in records] == list(range(1, len(records) + 1))
    notes = unrecorded(meta)
    assert f"trace/rank0.jsonl from step {len(records) + 1}" in notes
    assert any(what.startswith("validation.jsonl from step") for what in notes)
    assert not (run_dir / "errors").exists() or not list((run_dir / "errors").iterdir())  # no empty or partial file
    assert not [p for p in run_dir.rglob("*") if ".tmp" in p.name]
    assert json.loads((run_dir / "meta.json").read_text())["finished"]


# ---------------------------------------------------------------------------------------------
# the minor ones


def test_a_metric_beyond_exact_floats_is_noted_not_rounded(tmp_path):
    recorder = started(tmp_path)
    recorder.record(1, 1.0)
    recorder.record_validation(0, 1, {"tokens": 2**60 + 1, "val_loss": 0.5, "small": 2**53})
    recorder.finish(torch.nn.Linear(1, 1))
    assert read_validation(tmp_path) == [{"epoch": 0, "step": 1, "val_loss": 0.5, "small": 2**53}]
    assert "beyond 2**53" in unrecorded(read_meta(tmp_path))["validation metric 'tokens'"]


def test_start_twice_is_refused_at_the_call_and_finish_still_works(tmp_path):
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    recorder = started(tmp_path)
    recorder.record(1, 1.0, optimizer=optimizer)
    with pytest.raises(RuntimeError, match=r"start\(\): called twice"):
        recorder.start()
    recorder.record(2, 1.0)
    recorder.finish(model)
    meta, records = read_whole(tmp_path)
    assert meta["optimizer"]["param_groups"][0]["params"] == ["weight", "bias"] and len(records) == 2


@pytest.mark.parametrize("key", ["attempt", "attempts", "tied", "finished", "unrecorded"])
def test_a_meta_key_the_recorder_writes_cannot_be_overwritten(tmp_path, key):
    with pytest.raises(ValueError, match=f"{key} names a meta.json key the recorder writes itself"):
        TraceRecorder(tmp_path / "x", side="mine", extra_meta={key: 1})
    recorder = started(tmp_path / "run")
    recorder.record(1, 1.0)
    with pytest.raises(ValueError, match=f"{key} names a meta.json key"):
        recorder.finish(torch.nn.Linear(1, 1), **{key: 5})
    recorder.finish(torch.nn.Linear(1, 1), my_fact=5)
    meta = read_meta(tmp_path / "run")
    assert meta["my_fact"] == 5 and meta["finished"] is True and meta["attempts"][0]["attempt"] == 0


# ---------------------------------------------------------------------------------------------
# the hooks (recording with no line changed) under the same rule


ODD_LOOP = REPO / "tests" / "hooks_programs" / "odd_loop.py"


def run_odd_loop(run_dir, *args) -> subprocess.CompletedProcess:
    env = child_env() if run_dir is None else recording_env(run_dir, "odd", child_env())
    return subprocess.run(
        [sys.executable, str(ODD_LOOP), *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
    )


def test_the_hooks_record_an_odd_loop_and_change_nothing_of_it(tmp_path):
    """A complex parameter, batches holding names and objects, a tensor lr, a step without backward:
    the program prints the same losses and final weights bit for bit, every step is recorded, and what
    could not be taken is said (the hooks recorded no step at all when they could not start)."""
    plain = run_odd_loop(None)
    recorded = run_odd_loop(tmp_path / "run")
    assert recorded.returncode == plain.returncode == 0, recorded.stderr[-2000:]
    assert recorded.stdout == plain.stdout and "layer.weight" in plain.stdout
    meta, records = read_whole(tmp_path / "run")
    assert [r["step"] for r in records] == [1, 2, 3] and meta["finished"]
    assert [r.get("micro_batches") for r in records] == [1, None, 1]
    assert all(r["lr"] == torch.tensor(0.1).item() for r in records)  # the tensor lr, as its float32 holds it
    assert records[0]["batch_undigested"] == ["batch[0]['source']: object"] and "batch_digest" not in records[0]
    notes = unrecorded(meta)
    assert "phase" in notes["layers"] and "no backward ran" in notes["loss"] and "source" in notes["batch_digest"]


def test_the_hooks_on_a_full_disk_let_the_program_run_as_without_them(tmp_path):
    plain = run_odd_loop(None, "--disk-limit", "3000")
    recorded = run_odd_loop(tmp_path / "run", "--disk-limit", "3000")
    assert recorded.returncode == plain.returncode == 0, recorded.stderr[-2000:]
    assert recorded.stdout == plain.stdout and "could not write" in recorded.stderr
    assert "Traceback" not in recorded.stderr
    assert not [p for p in (tmp_path / "run").rglob("*") if ".tmp" in p.name]


# ---------------------------------------------------------------------------------------------
# numbers and names the format cannot hold as given


def test_an_integer_loss_past_floats_range_is_noted_and_poisons_no_later_step(tmp_path):
    """An int loss of 10**400 failed at the flush, and stayed pending to fail every later call."""
    recorder = started(tmp_path)
    recorder.record(1, 10**400)
    recorder.record(2, 2**60 + 1)
    recorder.record(3, 0.5)
    recorder.finish(torch.nn.Linear(1, 1))
    meta, records = read_whole(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3] and records[1]["loss"] == float(2**60 + 1)
    assert records[0]["loss"] != records[0]["loss"] and records[2]["loss"] == 0.5
    assert "beyond float's range, written as NaN" in unrecorded(meta)["loss"]


def test_names_that_are_not_utf8_text_are_written_escaped_and_the_run_reads_back(tmp_path):
    """A file name os.fsdecode made of bytes that are not UTF-8 holds a lone surrogate: written as it
    was, a reader refused the whole run."""
    name = b"\xff.png".decode("utf-8", "surrogateescape")
    recorder = TraceRecorder(tmp_path, side="mine", config={"data": name})
    recorder.start()
    recorder.record(1, 1.0, batch={"x": torch.ones(2), name: object()}, source=name)
    recorder.record_validation(0, 1, {name: 0.5})
    recorder.finish(torch.nn.Linear(1, 1))
    meta, records = read_whole(tmp_path)
    assert meta["config"] == {"data": "\\udcff.png"} and records[0]["source"] == "\\udcff.png"
    assert read_validation(tmp_path) == [{"epoch": 0, "step": 1, "\\udcff.png": 0.5}]
    assert {"strings of meta.json", "strings of the trace", "metric names"} <= set(unrecorded(meta))


def test_a_config_meta_json_cannot_hold_is_refused_at_construction(tmp_path):
    for config in ({1: "a", "b": 2}, [1, 2]):
        with pytest.raises(TypeError, match=r"TraceRecorder\(config=...\): cannot be written to meta.json"):
            TraceRecorder(tmp_path, side="mine", config=config)
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------
# the end of the process


def test_the_heartbeat_thread_calls_nothing_of_torch(tmp_path):
    """A daemon thread inside a torch call when the interpreter finalizes aborts the process
    ("terminate called without an active exception"): the heartbeat read a CPU loss with .item() on
    its own thread at every beat. What the thread runs is profiled here for any call into torch."""
    recorder = started(tmp_path)
    recorder.record(1, torch.tensor(0.5), torch.arange(4), grad_norm=torch.tensor(1.0))
    recorder.total_steps = torch.tensor(10)  # a loop's own figure, as it holds it
    torch_calls = []

    def profile(frame, event, arg):
        if event == "c_call":
            owner = getattr(arg, "__self__", None)
            module = getattr(arg, "__module__", None) or type(owner).__module__
            if module.startswith("torch"):
                torch_calls.append(arg)

    def beat():
        sys.setprofile(profile)
        try:
            recorder._heartbeat.write()
        finally:
            sys.setprofile(None)

    thread = threading.Thread(target=beat)
    thread.start()
    thread.join()
    recorder.finish(torch.nn.Linear(1, 1))
    assert torch_calls == []
    assert json.loads((tmp_path / "trace" / "rank0.progress").read_text())["total_steps"] is None


def test_a_batch_sampler_yielding_more_than_indices_leaves_the_evaluation_digest_out():
    """The hooks digest the indices each DataLoader iterator yields (an evaluation's samples are compared by them). A
    batch sampler of a program's own may yield other things than indices (pairs of an index and its augmentation's
    parameters): its iterator's digest is then left out (null), never a failure of the DataLoader hooks."""
    import hashlib
    from types import SimpleNamespace

    from ddp_parity.hooks import data

    sampler = SimpleNamespace(epoch=0)
    fact = {"batches": 0, "indices_sha256": "", "sampler": {"class": "DistributedSampler", "epoch": 0}}
    iterator = SimpleNamespace(**{data.PASS: (fact, hashlib.sha256(), sampler)})
    sampler.epoch = 3  # set_epoch after iter(loader), before the first batch: the epoch the order was drawn with
    data._note_indices(iterator, [1, 2])
    assert fact["batches"] == 1 and len(fact["indices_sha256"]) == 64 and fact["sampler"]["epoch"] == 3
    data._note_indices(iterator, [("crop", 3)])
    assert (fact["batches"], fact["indices_sha256"]) == (2, None)
    data._note_indices(iterator, [4, 5])  # once left out, it stays out: the digest no longer covers the pass
    assert (fact["batches"], fact["indices_sha256"]) == (3, None)
