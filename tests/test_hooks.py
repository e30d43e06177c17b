"""Recording with no line changed (ddp_parity/hooks, docs/recording.md): programs that never mention
the tool, launched with `recording_env()` as `ddp-parity record` launches them, are recorded in the
trace format the comparison reads; recording changes nothing they print or train; a raw DDP loop
and its Lightning port, both unchanged, compare EQUIVALENT; slips are named as on explicit traces."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from conftest import PYTHON, REPO, _torchrun_prefix, check_ok, child_env, describe, run_cmd

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env
from ddp_parity.trace import META_FILE, read_records
from ddp_parity.trace_files import fact_items, read_hook_facts

PROGRAMS = REPO / "tests" / "hooks_programs"


def raw(tmp: Path, name: str, *args: str, record: bool = True):
    run_dir, weights = tmp / name, tmp / f"{name}.pt"
    env = recording_env(run_dir, name, child_env()) if record else None
    if env is not None:  # the default watched steps, whatever another test left in this process's environment
        env["DDP_PARITY_WATCH_STEP"] = None  # (run_cmd starts from os.environ: a pop here would not reach it)
    cmd = [*_torchrun_prefix(2), PROGRAMS / "raw_loop.py", "--save", weights, *args]
    return check_ok(run_cmd(cmd, env=env)), run_dir, weights


def bitwise_equal(a: Path, b: Path) -> bool:
    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    return sa.keys() == sb.keys() and all(
        sa[k].dtype == sb[k].dtype and sa[k].shape == sb[k].shape and torch.equal(sa[k].view(-1), sb[k].view(-1))
        for k in sa
    )


@pytest.fixture(scope="module")
def raw_runs(tmp_path_factory):
    """The raw loop recorded twice and once not recorded."""
    tmp = tmp_path_factory.mktemp("hooks-raw")
    return {name: raw(tmp, name, record=name != "plain") for name in ("first", "again", "plain")}


def lightning(tmp: Path, *args: str):
    run_dir = tmp / "lightning"
    env = recording_env(run_dir, "lightning", child_env())
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=_torchrun_prefix(1)[-2].split("=")[1])
    return check_ok(run_cmd([PYTHON, PROGRAMS / "lightning_loop.py", *args], env=env)), run_dir


@pytest.fixture(scope="module")
def lightning_run(tmp_path_factory):
    return lightning(tmp_path_factory.mktemp("hooks-lightning"))


@pytest.mark.slow
def test_a_hook_recorded_run_is_a_trace_the_comparison_reads(raw_runs):
    _, run_dir, _ = raw_runs["first"]
    meta = json.loads((run_dir / META_FILE).read_text())
    assert meta["recorded_by"] == "hooks" and meta["world_size"] == 2 and meta["finished"], meta
    records = read_records(run_dir, 1)
    assert [r["step"] for r in records] == list(range(1, 9))  # 128 samples a rank, 32 a batch, 2 epochs
    first = records[0]
    # no largest |g| or 1-norm in the sketch: the grad_norm is clip_grad_norm_'s, its norm_type recorded
    assert meta["layers"]["fields"] == ["norm", "grad_norm", "sketch0", "sketch1", "sketch2", "sketch3"]
    assert all(len(row) == 6 for row in first["layers"])
    assert first["micro_batches"] == 1 and len(first["indices"]) == 32 and first["epoch"] == 0
    assert first["clip_max_norm"] == 0.5 and first["clip_norm_type"] == 2.0 and first["clip_order"] == "param_groups"
    assert [r["lr"] for r in records[:4]] == [0.002, 0.002, 0.002, 0.001]  # StepLR(3, 0.5) after each step
    assert [r["scheduler_steps_before"] for r in records[:3]] == [0, 1, 1]
    assert records[4]["epoch"] == 1
    facts = json.loads((run_dir / "trace" / "rank1.hooks.json").read_text())
    samplers = [s for s in facts["samplers"]["items"] if s["class"] == "DistributedSampler"]
    assert {(s["shuffle"], s["rank"], s["num_replicas"]) for s in samplers} == {(True, 1, 2), (False, 1, 2)}
    assert [e["epoch"] for e in facts["set_epoch"]["items"]] == [0, 1]
    assert facts["optimizer_built"][0]["param_groups"][0]["params"][0] == "features.0.weight"
    assert [s["seed"] for s in facts["seeds"]["items"]] == [42, 42]
    # the model is built between the two seeds: its weights drew from torch's generator before the second
    assert [s.get("drawn_since_last_seed") for s in facts["seeds"]["items"]] == [None, True]
    # the model DDP wraps is watched as recorder.watch(model) watches it: steps 1 and 2, every module call
    watched = [json.loads(line) for line in (run_dir / "trace" / "rank1.modules.jsonl").read_text().splitlines()]
    assert [w["step"] for w in watched] == [1, 2] and watched[0]["calls"][0]["name"] == "features.0", watched[0]


@pytest.mark.slow
def test_the_same_loop_recorded_again_is_equivalent(raw_runs):
    report = compare_traces(raw_runs["first"][1], raw_runs["again"][1])
    assert report["verdict"] == "equivalent", report["diagnosis"]


@pytest.mark.slow
def test_recording_changes_nothing_the_loop_prints_or_trains(raw_runs):
    recorded, _, weights = raw_runs["first"]
    plain, plain_dir, plain_weights = raw_runs["plain"]
    assert recorded.stdout == plain.stdout and "step 8 loss" in plain.stdout
    assert bitwise_equal(weights, plain_weights)
    assert not plain_dir.exists()


@pytest.mark.slow
def test_a_lightning_port_recorded_by_hooks_is_equivalent_to_the_raw_loop(raw_runs, lightning_run):
    report = compare_traces(raw_runs["first"][1], lightning_run[1])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    assert report["per_step"]["grad_norm"]["compared"] == 16 and report["per_step"]["batch"]["equal"] == 16
    records = read_records(lightning_run[1], 0)
    assert records[0]["clip_order"] == "param_groups" and "grad_norm_seen" in records[0]  # clipped in the closure
    # Lightning's closure divides what training_step returned by accumulate_grad_batches (1 here), the raw loop nothing
    assert records[0]["loss_divisors"] == [[1.0]] and read_records(raw_runs["first"][1], 0)[0]["loss_divisors"] == [[]]
    loop = fact_items(read_hook_facts(lightning_run[1], 0), "lightning_loop")
    assert [(i["accumulate_grad_batches"], i["automatic_optimization"]) for i in loop] == [(1, True)], loop
    # each step's generator digest is taken at the network's first call on both sides, after the draw both loops make
    # before it: the raw loop calls DDP's wrapper after the draw, Lightning calls it before training_step
    for rank in (0, 1):
        digests = [
            [(r["rng"]["at"], r["rng"]["torch"]) for r in read_records(run, rank)]
            for run in (raw_runs["first"][1], lightning_run[1])
        ]
        assert digests[0] == digests[1] and digests[0][0][0] == "forward", digests


@pytest.mark.slow
@pytest.mark.parametrize(
    "slip, kind, step, fix",
    [
        ("scheduler_first", "optimizer.lr_ahead", 3, "call scheduler.step() after optimizer.step()"),
        ("clip", "optimizer.clip", 1, "Clip the same way"),
        # the module watch the hooks attach names the module and its mode, with no line of the loop changed
        ("eval", "module_state", 1, "model.train()"),
    ],
)
def test_a_slip_recorded_by_hooks_is_named_as_on_explicit_traces(raw_runs, tmp_path, request, slip, kind, step, fix):
    if slip == "scheduler_first":  # the same loop under `ddp-parity record`, made once for test_record_cli too
        process, slipped = request.getfixturevalue("recorded_scheduler_slip")
        assert process.returncode == 0, describe(process)
    else:
        _, slipped, _ = raw(tmp_path, slip, "--slip", slip)
    d = compare_traces(raw_runs["first"][1], slipped)["diagnosis"]
    assert (d["kind"], d["step"]) == (kind, step), d
    assert fix in d["advice"]
    if slip == "clip":  # the argument itself is in both traces: 0.5 against 1.0
        assert read_records(slipped, 0)[0]["clip_max_norm"] == 1.0


def test_a_hook_that_fails_does_not_stop_training(tmp_path):
    """A parameter of no elements: the per-layer sketch cannot take it; the steps are recorded with the
    sketch of every other layer, meta.json says which was not taken and why, and the program prints and
    saves what it does unrecorded."""
    program = [PYTHON, PROGRAMS / "odd_model.py"]
    recorded = check_ok(run_cmd([*program, tmp_path / "a.pt"], env=recording_env(tmp_path / "odd", "odd", child_env())))
    plain = check_ok(run_cmd([*program, tmp_path / "b.pt"]))
    assert recorded.stdout == plain.stdout and bitwise_equal(tmp_path / "a.pt", tmp_path / "b.pt")
    meta = json.loads((tmp_path / "odd" / META_FILE).read_text())
    assert [(u["what"], u["why"].split(":")[0]) for u in meta["unrecorded"]] == [("layers", "empty")]
    assert meta["finished"]
    records = read_records(tmp_path / "odd", 0)
    assert [r["step"] for r in records] == [1, 2, 3] and all(len(r["layers"]) == 2 for r in records)  # weight, bias
    assert all("param_digest" in r for r in records)  # the model was found without DDP


EXPLICIT = """
import sys, torch
from ddp_parity import TraceRecorder
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
recorder = TraceRecorder(sys.argv[1], side="explicit")
recorder.start()
for step in range(1, 3):
    loss = model(torch.ones(1, 2)).sum()
    loss.backward()
    optimizer.step()
    recorder.record(step, loss, model=model)
recorder.finish(model)
"""


def test_a_program_that_records_itself_is_not_recorded_twice(tmp_path):
    env = recording_env(tmp_path / "hooks", "hooks", child_env())
    result = check_ok(run_cmd([PYTHON, "-c", EXPLICIT, tmp_path / "explicit"], env=env))
    assert "the hooks stand down" in result.stderr
    assert [r["step"] for r in read_records(tmp_path / "explicit", 0)] == [1, 2]
    assert not (tmp_path / "hooks").exists()


def test_a_process_that_never_steps_an_optimizer_writes_nothing(tmp_path):
    """torchrun's agent and Lightning's launcher import the bootstrap too: without an optimizer step,
    nothing is recorded; and the hooks wait for the program's own `import torch`."""
    env = recording_env(tmp_path / "run", "agent", child_env())
    code = "import sys; print('torch' in sys.modules); import torch; torch.nn.Linear(2, 2)(torch.ones(2))"
    result = check_ok(run_cmd([PYTHON, "-c", code], env=env))
    assert result.stdout.strip() == "False"
    assert not (tmp_path / "run").exists()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((), {"max_norm": 1.0}),
        ((2.0,), {"norm_type": 1.0}),
        ((2.0, float("inf"), True), {"foreach": None}),
        ((), {"max_norm": 1.0, "parameters": "keyword"}),
    ],
)
def test_clipping_arguments_are_named_as_signature_bind_names_them(args, kwargs):
    """The hooks name clip_grad_norm_'s arguments without signature.bind on its usual calls (a tenth of a
    millisecond a step): the same names and values, and the call torch gets is the one the program made,
    its parameters a list read once."""
    import inspect

    from ddp_parity.hooks.gradients import _bound

    net = torch.nn.Linear(3, 2)
    clip = torch.nn.utils.clip_grad.clip_grad_norm_
    signature = inspect.signature(clip)
    if kwargs.get("parameters") == "keyword":
        kwargs = {**kwargs, "parameters": net.parameters()}
        call = (args, kwargs)
    else:
        call = ((net.parameters(), *args), kwargs)
    fast_args, fast_kwargs, arguments = _bound(signature, list(signature.parameters), *call)
    expected = signature.bind(*fast_args, **fast_kwargs)
    assert arguments == expected.arguments
    assert arguments["parameters"] == list(net.parameters()) and isinstance(arguments["parameters"], list)
    assert len(fast_args) == len(call[0]) and fast_kwargs.keys() == call[1].keys()


@pytest.mark.slow
def test_a_scheduler_stepped_by_hand_beside_lightnings_config_is_named_from_the_counts(raw_runs, tmp_path):
    """Issue 46: a hand scheduler step in the LightningModule while lr_scheduler_config steps it too. The hooks count
    every scheduler.step(); the finding reads those counts (2 against 1 per optimizer step), not the lr's shape."""
    _, run_dir = lightning(tmp_path, "--step-scheduler-by-hand")
    d = compare_traces(raw_runs["first"][1], run_dir)["diagnosis"]
    assert d["kind"] == "optimizer.scheduler_steps", d["explanation"]
    assert (
        "first stepped its scheduler 1 time per optimizer step, lightning 2 times per optimizer step"
        in (d["explanation"])
    ), d["explanation"]
    assert d["advice"].startswith("On lightning, step the scheduler as first does"), d["advice"]
