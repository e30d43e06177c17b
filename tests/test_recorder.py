"""TraceRecorder as a user's loop drives it: resumes without arithmetic (attempts marked, every step
once), records that reach the disk however the process ends, what record(optimizer=, model=) and
batch= add, the per-rank facts of meta.json, and error files keyed by the global rank."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import signal
import subprocess
import sys
import textwrap
from typing import NamedTuple

import pytest
import torch
from conftest import REPO, child_env

from ddp_parity.distributed import global_rank
from ddp_parity.runs import write_error_file
from ddp_parity.trace import (
    META_FILE,
    TraceRecorder,
    batch_fingerprint,
    param_digest,
    read_meta,
    read_records,
    read_validation,
    sampler_facts,
)


class Item(NamedTuple):
    x: torch.Tensor
    y: torch.Tensor
    index: torch.Tensor


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))


def record_steps(recorder: TraceRecorder, steps, validate_at=()) -> None:
    for step in steps:
        recorder.record(step, torch.tensor(float(step)), torch.tensor([step, step + 100]), epoch=step // 4, lr=0.1)
        if step in validate_at:
            recorder.record_validation(step // 4, step, {"val_loss": step / 10})


def attempt_of(run_dir) -> list[tuple[int, int]]:
    return [(r["step"], r["attempt"]) for r in read_records(run_dir, 0)]


# ---------------------------------------------------------------------------------------------
# resume


def test_declared_resume_keeps_the_earlier_steps_and_marks_the_attempt(tmp_path):
    first = TraceRecorder(tmp_path, side="mine")
    first.start()
    record_steps(first, range(1, 7), validate_at=(4, 6))
    first.close()  # a crash after step 6: the snapshot holds step 4

    second = TraceRecorder(tmp_path, side="mine")
    second.start(resumed_from_step=4)
    record_steps(second, range(5, 9), validate_at=(8,))
    second.finish(tiny_model())

    assert attempt_of(tmp_path) == [(1, 0), (2, 0), (3, 0), (4, 0), (5, 1), (6, 1), (7, 1), (8, 1)]
    assert [v["step"] for v in read_validation(tmp_path)] == [4, 8]  # step 6's is made again (or not) by attempt 1
    meta = read_meta(tmp_path)
    assert [(a["attempt"], a["start_step"]) for a in meta["attempts"]] == [(0, 0), (1, 4)]
    assert all(isinstance(a["time"], float) for a in meta["attempts"])
    assert meta["resumed_from_step"] == 4 and meta["finished"] is True


def test_resume_found_on_disk_needs_no_step_number(tmp_path):
    first = TraceRecorder(tmp_path, side="mine")
    first.start()
    record_steps(first, range(1, 7))
    first.close()

    second = TraceRecorder(tmp_path, side="mine")
    second.start()  # not told: the first record (step 4) says the attempt resumed after step 3
    assert read_meta(tmp_path)["attempts"][-1]["start_step"] is None
    assert [s for s, _ in attempt_of(tmp_path)] == [1, 2, 3, 4, 5, 6]  # nothing dropped before it knows
    record_steps(second, range(4, 8))
    second.close()
    assert attempt_of(tmp_path) == [(1, 0), (2, 0), (3, 0), (4, 1), (5, 1), (6, 1), (7, 1)]
    meta = read_meta(tmp_path)
    assert [(a["attempt"], a["start_step"]) for a in meta["attempts"]] == [(0, 0), (1, 3)]
    assert meta["resumed_from_step"] == 3

    third = TraceRecorder(tmp_path, side="mine")
    third.start()
    record_steps(third, range(1, 3))  # a restart from scratch replaces every earlier step
    third.close()
    assert attempt_of(tmp_path) == [(1, 2), (2, 2)]
    assert [(a["attempt"], a["start_step"]) for a in read_meta(tmp_path)["attempts"]] == [(0, 0), (1, 3), (2, 0)]


def test_keep_steps_upto_still_works_warns_and_must_agree(tmp_path):
    first = TraceRecorder(tmp_path, side="mine")
    first.start()
    record_steps(first, range(1, 5))
    first.close()
    second = TraceRecorder(tmp_path, side="mine")
    with pytest.raises(ValueError, match="disagree"), pytest.warns(DeprecationWarning):
        second.start(keep_steps_upto=2, resumed_from_step=3)
    with pytest.warns(DeprecationWarning, match="resumed_from_step") as caught:
        second.start(keep_steps_upto=2)
    assert caught[0].filename == __file__  # the warning points at the caller's line, not the recorder's
    record_steps(second, [3])
    second.close()
    assert attempt_of(tmp_path) == [(1, 0), (2, 0), (3, 1)]
    assert read_meta(tmp_path)["resumed_from_step"] == 2


def test_an_attempt_that_records_nothing_keeps_the_whole_earlier_trace(tmp_path):
    first = TraceRecorder(tmp_path, side="mine")
    first.start()
    record_steps(first, range(1, 4))
    first.close()
    second = TraceRecorder(tmp_path, side="mine")
    second.start()  # resumed from the final snapshot: nothing left to train
    second.finish(tiny_model())
    assert attempt_of(tmp_path) == [(1, 0), (2, 0), (3, 0)]
    assert read_meta(tmp_path)["attempts"][-1]["start_step"] == 3


def test_a_fresh_run_is_attempt_zero_and_not_resumed(tmp_path):
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    record_steps(recorder, [1])
    recorder.finish(tiny_model())
    meta = read_meta(tmp_path)
    assert [(a["attempt"], a["start_step"]) for a in meta["attempts"]] == [(0, 0)]
    assert meta["resumed_from_step"] is None


def test_record_before_start_is_refused(tmp_path):
    with pytest.raises(RuntimeError, match="start"):
        TraceRecorder(tmp_path, side="mine").record(1, 0.5)


# ---------------------------------------------------------------------------------------------
# the lifecycle and what a step is: misuses refused where they are made, not when the trace is read


def test_nothing_is_recorded_after_finish_and_a_second_finish_changes_nothing(tmp_path):
    model = tiny_model()
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    record_steps(recorder, [1, 2])
    recorder.finish(model)
    meta_before = (tmp_path / META_FILE).read_text()
    with pytest.raises(RuntimeError, match=r"record\(\) after finish\(\)"):
        recorder.record(3, 0.5)
    with pytest.raises(RuntimeError, match=r"record_validation\(\) after finish\(\)"):
        recorder.record_validation(0, 3, {"val_loss": 0.5})
    recorder.finish(model)  # a `finally:` after the normal path
    assert [r["step"] for r in read_records(tmp_path, 0)] == [1, 2] and read_validation(tmp_path) == []
    assert (tmp_path / META_FILE).read_text() == meta_before and recorder.finished


@pytest.mark.parametrize(
    "step, error, words",
    [
        (1.5, TypeError, "step must be an integer, got 1.5"),
        (2.0, TypeError, "step must be an integer, got 2.0"),
        (True, TypeError, "step must be an integer, got True"),
        ("2", TypeError, "step must be an integer, got '2'"),
        (-1, ValueError, "step must be >= 0, got -1"),
        (1, ValueError, "step 1 after step 1: record each optimizer step once, in order"),
    ],
)
def test_a_step_that_is_no_new_optimizer_step_is_refused_where_it_is_recorded(tmp_path, step, error, words):
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    recorder.record(1, 0.5)
    with pytest.raises(error, match=words):
        recorder.record(step, 0.5)
    recorder.record(torch.tensor(2), 0.25)  # an integer tensor is a step
    recorder.close()
    assert [r["step"] for r in read_records(tmp_path, 0)] == [1, 2]


@pytest.mark.parametrize(
    "metrics, words",
    [
        ({"val_acc": "0.5"}, "metric 'val_acc' must be a number or a one-element tensor"),
        ({"val_acc": torch.ones(2)}, "metric 'val_acc' must be a number"),
        ({"val_ok": True}, "metric 'val_ok' must be a number"),
        ({"step": 3}, "'step' cannot name a metric"),
    ],
)
def test_a_validation_value_that_is_no_number_is_refused_where_it_is_recorded(tmp_path, metrics, words):
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    with pytest.raises((TypeError, ValueError), match=words):
        recorder.record_validation(0, 1, metrics)
    recorder.close()
    assert read_validation(tmp_path) == []


def test_a_validation_before_the_first_step_is_step_zero(tmp_path):
    """nanoGPT evaluates at iteration 0, on rank 0, before any optimizer step."""
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    recorder.record_validation(0, 0, {"val_loss": torch.tensor(2.5), "val_acc": 0.125})
    record_steps(recorder, [1, 2], validate_at=[2])
    recorder.finish(tiny_model())
    assert read_validation(tmp_path) == [
        {"epoch": 0, "step": 0, "val_loss": 2.5, "val_acc": 0.125},
        {"epoch": 0, "step": 2, "val_loss": 0.2},
    ]
    assert [r["step"] for r in read_records(tmp_path, 0)] == [1, 2]


class UsersModule(torch.nn.Module):
    """What users' models hold that the tutorial's does not: a frozen embedding, a non-persistent
    buffer, a bf16 parameter, a module's extra state (not a tensor) in its state dict."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.emb = torch.nn.Embedding(3, 2).requires_grad_(False)
        self.register_buffer("cache", torch.ones(2), persistent=False)
        self.scale = torch.nn.Parameter(torch.ones(2, dtype=torch.bfloat16))

    def get_extra_state(self):
        return {"version": 3}

    def set_extra_state(self, state):
        pass


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    extra: dict
    name: str


def test_the_recorder_takes_what_a_users_loop_hands_it(tmp_path):
    """numpy scalars and arrays (json.dumps refused them at the flush, inside the user's loop), batches
    of any structure with non-tensor leaves (strings digested by value, an object named as undigested),
    a module's extra state at finish (it raised)."""
    np = pytest.importorskip("numpy")
    model = UsersModule()
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    batch = Batch(torch.arange(4.0), {"mask": [torch.ones(2), None, "text"], 3: object()}, "b")
    recorder.record(
        1,
        np.float32(1.5),
        np.arange(4),
        grad_norm=np.float64(0.25),
        lr=np.float32(0.5),
        batch=batch,
        model=model,
        tokens=np.int64(4096),
    )
    recorder.record(2, 2, [np.int64(7)], batch={"ids": torch.ones(2, dtype=torch.long), "text": ["a", "b"]})
    recorder.record_validation(0, 2, {"val_loss": np.float32(0.75)})
    recorder.finish(model)
    first, second = read_records(tmp_path, 0)
    assert (first["loss"], first["grad_norm"], first["lr"], first["indices"], first["tokens"]) == (
        1.5,
        0.25,
        0.5,
        [0, 1, 2, 3],
        4096,
    )
    # an object cannot be digested by value: no digest of a part of the batch, the part named instead
    assert "batch_digest" not in first and first["batch_undigested"] == ["batch.extra[3]: object"]
    assert second["batch_digest"] == batch_fingerprint({"ids": torch.ones(2, dtype=torch.long), "text": ["a", "b"]})
    assert (second["loss"], second["indices"]) == (2, [7])
    assert read_validation(tmp_path) == [{"epoch": 0, "step": 2, "val_loss": 0.75}]
    meta = read_meta(tmp_path)
    assert meta["finished"] and set(meta["ranks"][0]["buffers_sha256"]) == {"cache"}
    assert [u["what"] for u in meta["unrecorded"]] == ["batch_digest"]


# ---------------------------------------------------------------------------------------------
# what reaches the disk


def test_each_step_is_on_disk_as_soon_as_it_is_recorded(tmp_path):
    recorder = TraceRecorder(tmp_path, side="mine", flush_every=1000)
    recorder.start()
    record_steps(recorder, range(1, 4))
    assert [r["step"] for r in read_records(tmp_path, 0)] == [1, 2, 3]  # no flush(), no close()
    recorder.close()


def test_validation_values_are_written_unrounded(tmp_path):
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    value = torch.tensor(1 / 3, dtype=torch.float64)
    recorder.record_validation(0, 1, {"val_loss": value, "val_count": torch.tensor(7)})
    recorder.close()
    (line,) = read_validation(tmp_path)
    assert line["val_loss"] == 1 / 3 and line["val_loss"] != float(torch.tensor(1 / 3, dtype=torch.float32))
    assert line["val_count"] == 7


# ---------------------------------------------------------------------------------------------
# record(optimizer=, model=, batch=)


def test_optimizer_and_model_arguments(tmp_path):
    model = tiny_model()
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    no_decay = [p for n, p in model.named_parameters() if not n.endswith("weight")]
    optimizer = torch.optim.AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}], lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    for step in (1, 2):
        model(torch.randn(4, 3)).pow(2).mean().backward()
        optimizer.step()
        recorder.record(step, torch.tensor(0.5), optimizer=optimizer, model=model)  # before scheduler.step()
        expected_digest = param_digest(model).tolist()
        scheduler.step()
    recorder.finish(model)

    records = read_records(tmp_path, 0)
    assert [r["lr"] for r in records] == [0.01, 0.005]  # the lr each step used
    assert records[-1]["param_digest"] == expected_digest
    facts = read_meta(tmp_path)["optimizer"]
    assert facts["class"] == "AdamW"
    first, second = facts["param_groups"]
    assert first["params"] == ["0.weight", "1.weight", "2.weight"] and second["params"] == [
        "0.bias",
        "1.bias",
        "2.bias",
    ]
    assert first["weight_decay"] == 0.01 and second["weight_decay"] == 0.0
    assert first["lr"] == 0.01  # as at the first step: recorded once
    assert first["betas"] == [0.9, 0.999] and first["eps"] == 1e-8
    # every hyperparameter, and not the scheduler's own bookkeeping (issue 36: a false param_groups finding)
    assert set(first) == set(optimizer.param_groups[0]) - {"initial_lr"}


def test_optimizer_without_model_is_named_at_finish(tmp_path):
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    recorder.record(1, 0.5, optimizer=optimizer)
    assert read_meta(tmp_path)["optimizer"]["param_groups"][0]["params"][0] == "group0.param0[4, 3]"
    recorder.finish(model)
    group = read_meta(tmp_path)["optimizer"]["param_groups"][0]
    assert group["params"][0] == "0.weight" and group["momentum"] == 0.9


def test_batch_digest_is_the_contents_without_the_index():
    x, y = torch.arange(6.0).reshape(2, 3), torch.tensor([1, 0])
    digest = batch_fingerprint(Item(x, y, torch.tensor([0, 1])))
    assert isinstance(digest, str) and len(digest) == 64
    assert batch_fingerprint(Item(x, y, torch.tensor([7, 9]))) == digest  # other indices, same contents
    assert batch_fingerprint(Item(x + 1e-6, y, torch.tensor([0, 1]))) != digest  # same indices, other contents
    assert batch_fingerprint([Item(x, y, torch.tensor([0, 1]))]) == digest  # a list of one micro-batch
    assert batch_fingerprint({"y": y, "index": torch.tensor([3]), "x": x}) == batch_fingerprint({"x": x, "y": y})
    assert batch_fingerprint((x, y)) == batch_fingerprint((x, y)) != batch_fingerprint((y, x))


def test_batch_digest_recorded_beside_indices(tmp_path):
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    batch = Item(torch.ones(2, 3), torch.tensor([1, 0]), torch.tensor([4, 5]))
    recorder.record(1, 0.5, batch.index, batch=batch)
    recorder.close()
    (record,) = read_records(tmp_path, 0)
    assert record["indices"] == [4, 5] and record["batch_digest"] == batch_fingerprint(batch)


# ---------------------------------------------------------------------------------------------
# meta.json facts per rank


def test_rank_facts_and_buffers(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    model = tiny_model()
    model(torch.randn(8, 3))  # training mode: BatchNorm's running stats move
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    recorder.finish(model)
    meta = read_meta(tmp_path)
    (rank,) = meta["ranks"]
    assert rank["torch_flags"]["deterministic_algorithms"] == torch.are_deterministic_algorithms_enabled()
    assert rank["torch_flags"]["num_threads"] == torch.get_num_threads()
    assert rank["torch_flags"]["default_dtype"] == "float32"
    assert rank["env"]["OMP_NUM_THREADS"] == "1" and rank["env"]["SLURM_JOB_ID"] == "42"
    assert "PATH" not in rank["env"]
    assert rank["world"] == {"rank": 0, "local_rank": 0, "world_size": 1, "node_rank": 0}
    assert set(rank["buffers_sha256"]) == {"1.running_mean", "1.running_var", "1.num_batches_tracked"}
    assert rank["buffers_sha256"] == meta["buffers_sha256"]
    assert meta["replicas_identical"] is True
    before = rank["buffers_sha256"]["1.running_mean"]
    model(torch.randn(8, 3))
    from ddp_parity.trace import buffers_sha256

    assert buffers_sha256(model)["1.running_mean"] != before


# ---------------------------------------------------------------------------------------------
# error files


def test_global_rank_under_each_launcher(monkeypatch):
    for key in ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    assert global_rank() == 0  # a plain process
    monkeypatch.setenv("LOCAL_RANK", "1")  # Lightning's own launcher, node 0: no RANK
    assert global_rank() == 1
    monkeypatch.setenv("NODE_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert global_rank() == 3
    monkeypatch.setenv("RANK", "5")  # torchrun
    assert global_rank() == 5


def test_error_file_keyed_by_global_rank_and_first_error_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("LOCAL_RANK", "1")
    path = write_error_file(tmp_path, RuntimeError("injected failure"), step=7, phase="train")
    assert path == tmp_path / "errors" / "rank1.json"
    assert write_error_file(tmp_path, RuntimeError("Connection closed by peer")) is None  # the follow-on
    error = json.loads(path.read_text())
    assert (error["rank"], error["message"], error["step"], error["phase"]) == (1, "injected failure", 7, "train")
    assert error["type"] == "RuntimeError" and "traceback" in error and error["time"] > 0


# ---------------------------------------------------------------------------------------------
# the process ending: a real child process per way of ending

CHILD = """
import os, signal, sys, torch
from ddp_parity.trace import TraceRecorder
how = sys.argv[2]
if how == "chained":
    signal.signal(signal.SIGTERM, lambda s, f: (print("own handler ran", flush=True), sys.exit(3)))
recorder = TraceRecorder(sys.argv[1], side="child", write_every_step=how == "exit-now", flush_every=1000)
recorder.start()
print("lightning loaded:", "lightning" in sys.modules, flush=True)  # the version is read, not imported
recorder.set_phase("train")
for step in range(1, 6):
    recorder.record(step, torch.tensor(step / 10), torch.tensor([step]))
if how == "raise":
    raise ValueError("broken batch")
if how in ("sigterm", "chained"):
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause()
if how == "exit-now":
    os._exit(1)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "how, returncode",
    [("normal", 0), ("raise", 1), ("sigterm", -signal.SIGTERM), ("chained", 3), ("exit-now", 1)],
)
def test_records_reach_the_disk_however_the_process_ends(tmp_path, how, returncode):
    """Records held in memory (write_every_step=False) are written at exit, on an uncaught exception
    and on SIGTERM, whose default or earlier handler still decides how the process ends; with the
    default per-step writes even os._exit loses nothing already recorded."""
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(run_dir), how],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == returncode, proc.stderr
    assert [r["step"] for r in read_records(run_dir, 0)] == [1, 2, 3, 4, 5]
    assert "lightning loaded: False" in proc.stdout  # a loop without Lightning does not pay its import
    errors = list((run_dir / "errors").glob("*.json"))
    if how == "raise":
        error = json.loads((run_dir / "errors" / "rank0.json").read_text())
        assert (error["type"], error["message"], error["step"], error["phase"]) == (
            "ValueError",
            "broken batch",
            5,
            "train",
        )
        assert "ValueError: broken batch" in proc.stderr  # Python's own report still printed
    else:
        assert errors == []  # a signal or an exit is not an error of the training
    if how == "chained":
        assert "own handler ran" in proc.stdout
    meta = json.loads((run_dir / META_FILE).read_text())
    assert meta["versions"]["lightning"] == importlib.metadata.version("lightning")


def test_a_frameworks_optimizer_wrapper_records_the_torch_optimizer_class():
    """Fabric hands back its own wrapper (FabricAdam): the update is Adam's, so the class compared is Adam."""
    from lightning.fabric import Fabric

    from ddp_parity.trace import optimizer_facts

    model = torch.nn.Linear(3, 2)
    fabric = Fabric(accelerator="cpu", devices=1)
    wrapped_model, wrapped = fabric.setup(model, torch.optim.Adam(model.parameters(), lr=0.1))
    assert type(wrapped).__name__ != "Adam"
    facts = optimizer_facts(wrapped, model)
    assert facts["class"] == "Adam" and facts["param_groups"][0]["params"] == ["weight", "bias"]


class Tied(torch.nn.Module):
    """nanoGPT's weight tying: the token embedding and the output head are one parameter."""

    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(8, 4)
        self.lm_head = torch.nn.Linear(4, 8, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx):
        return self.lm_head(self.wte(idx))


def test_tied_weights_are_recorded_and_finish_never_raises(tmp_path):
    """Before: finish() raised safetensors' RuntimeError on the tied weights (shared storage), after the
    user's whole training, leaving meta.json unfinished."""
    from safetensors.torch import load_file

    model = Tied()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    recorder = TraceRecorder(tmp_path, side="mine")
    recorder.start()
    loss = model(torch.tensor([1, 2, 3])).logsumexp(-1).mean()
    loss.backward()
    optimizer.step()
    recorder.record(1, loss, optimizer=optimizer, model=model)
    recorder.finish(model)

    meta = read_meta(tmp_path)
    assert meta["finished"] is True and meta["tied"] == {"lm_head.weight": "wte.weight"}
    assert "unrecorded" not in meta
    final = load_file(str(tmp_path / "final.safetensors"))
    assert torch.equal(final["wte.weight"], model.lm_head.weight) and torch.equal(
        final["lm_head.weight"], final["wte.weight"]
    )


def test_a_sampler_without_len_is_recorded_without_raising():
    """Before: sampler_facts called len() on an IterableDataset's _InfiniteConstantSampler: TypeError in
    TraceCallback.on_train_start, before any step."""

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(4))

    sampler = torch.utils.data.DataLoader(Stream(), batch_size=2).sampler
    facts = sampler_facts(sampler)
    assert facts == {"class": "_InfiniteConstantSampler", "num_samples": None}
