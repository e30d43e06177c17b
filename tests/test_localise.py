"""localise() on hand-made module traces: each reading of issue 13, name normalisation across a
DDP side and a LightningModule side, step/rank order, and the replay helpers. No processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_parity.compare.modules import format_module_finding, localise, needs_replay, replay_instruction
from ddp_parity.harness.replay import step_to_replay
from ddp_parity.update_dump import DUMP_ENV
from ddp_parity.watch import WATCH_STEP_ENV


def fwd(name, type_, inp, out, **extra):
    return {"name": name, "type": type_, "phase": "forward", "input": inp, "output": out, **extra}


def bwd(name, type_, grad_out, grad_in):
    return {"name": name, "type": type_, "phase": "backward", "output": grad_out, "input": grad_in}


def step_record(step=1, prefix="", **changes):
    """A two-layer network's step (linear -> dropout -> bn -> head), names under `prefix`;
    `changes` replaces digests: {"<phase>:<name>:<key>": value} or param_grads/params_after dicts."""
    p = prefix
    calls = [
        fwd(f"{p}fc", "Linear", "x", "h1"),
        fwd(f"{p}drop", "Dropout", "h1", "h2", random=True),
        fwd(f"{p}bn", "BatchNorm1d", "h2", "h3", buffers="b1"),
        fwd(f"{p}head", "Linear", "h3", "y"),
        fwd(p[:-1] if p else "", "Net", "x", "y"),
        bwd(p[:-1] if p else "", "Net", "gy", "gx"),
        bwd(f"{p}head", "Linear", "gy", "g3"),
        bwd(f"{p}bn", "BatchNorm1d", "g3", "g2"),
        bwd(f"{p}drop", "Dropout", "g2", "g1"),
        bwd(f"{p}fc", "Linear", "g1", None),
    ]
    for key, value in changes.items():
        if key in ("param_grads", "params_after"):
            continue
        phase, name, field = key.split(":")
        for call in calls:
            if call["phase"] == phase and call["name"] == p + name:
                call[field] = value
    params = [f"{p}fc.weight", f"{p}fc.bias", f"{p}bn.weight", f"{p}head.weight"]
    return {
        "step": step,
        "calls": calls,
        "param_grads": {**{k: "g-" + k[len(p) :] for k in params}, **changes.get("param_grads", {})},
        "params_after": {**{k: "p-" + k[len(p) :] for k in params}, **changes.get("params_after", {})},
    }


def write_run(path: Path, per_rank: dict[int, list[dict]]) -> Path:
    (path / "trace").mkdir(parents=True)
    for rank, records in per_rank.items():
        with open(path / "trace" / f"rank{rank}.modules.jsonl", "w") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
    return path


def pair(tmp_path, records_a, records_b, ranks=(0,)):
    a = write_run(tmp_path / "a", {r: records_a for r in ranks})
    b = write_run(tmp_path / "b", {r: records_b for r in ranks})
    return a, b


def test_equal_traces_give_none(tmp_path):
    a, b = pair(tmp_path, [step_record(1), step_record(2)], [step_record(1), step_record(2)])
    assert localise(a, b) is None


@pytest.mark.parametrize(
    "change, expected, reading_word",
    [
        ({"forward:drop:output": "other"}, ("drop", "Dropout", "forward", "output", True), "random stream"),
        ({"forward:bn:buffers": "other"}, ("bn", "BatchNorm1d", "forward", "buffers", True), "running statistics"),
        ({"forward:bn:output": "other"}, ("bn", "BatchNorm1d", "forward", "output", True), "buffers or its mode"),
        ({"forward:head:output": "other"}, ("head", "Linear", "forward", "output", True), "numerics"),
        ({"forward:fc:input": "x2", "forward::input": "x2"}, ("fc", "Linear", "forward", "input", False), "batch"),
        ({"forward:head:input": "h3b"}, ("head", "Linear", "forward", "input", False), "between modules"),
        ({"backward::output": "gy2"}, ("", "Net", "backward", "grad", False), "loss"),
        ({"backward:bn:input": "g2b"}, ("bn", "BatchNorm1d", "backward", "grad", True), "backward"),
        ({"param_grads": {"fc.bias": "x"}}, ("fc.bias", "Linear", "backward", "param_grad", True), "accumulation"),
        ({"params_after": {"head.weight": "x"}}, ("head.weight", "optimizer", "optimizer", "output", True), "clip"),
    ],
)
def test_each_reading(tmp_path, change, expected, reading_word):
    a, b = pair(tmp_path, [step_record(1)], [step_record(1, **change)])
    d = localise(a, b)
    assert (d["name"], d["type"], d["phase"], d["what"], d["input_equal"]) == expected
    assert (d["step"], d["rank"]) == (1, 0)
    assert reading_word in d["reading"]


def test_first_in_execution_order_wins(tmp_path):
    # the dropout's output and the head's output both differ: the dropout ran first
    changed = step_record(1, **{"forward:drop:output": "o", "forward:head:output": "o"})
    a, b = pair(tmp_path, [step_record(1)], [changed])
    assert localise(a, b)["name"] == "drop"


def test_earliest_step_then_phase_then_rank(tmp_path):
    a = write_run(tmp_path / "a", {0: [step_record(1), step_record(2)], 1: [step_record(1), step_record(2)]})
    b = write_run(
        tmp_path / "b",
        {
            0: [step_record(1, params_after={"fc.bias": "x"}), step_record(2, **{"forward:fc:output": "o"})],
            1: [step_record(1, **{"forward:head:output": "o"}), step_record(2)],
        },
    )
    d = localise(a, b)
    assert (d["step"], d["rank"], d["name"], d["phase"]) == (1, 1, "head", "forward")
    assert localise(a, b, rank=0)["phase"] == "optimizer"
    assert localise(a, b, step=2)["name"] == "fc"


def test_names_normalised_across_ddp_and_a_lightning_attribute(tmp_path):
    """Raw: the plain network watched (no prefix); a `module.` slipped in on one call. Lightning:
    the LightningModule watched, the network under `net.`, and a loss_fn module the raw side lacks."""
    raw = step_record(1)
    raw["calls"][0]["name"] = "module.fc"
    lightning = step_record(1, prefix="net.", **{"forward:drop:output": "other"})
    lightning["calls"].insert(5, fwd("loss_fn", "CrossEntropyLoss", "y", "loss"))
    a, b = pair(tmp_path, [raw], [lightning])
    d = localise(a, b)
    assert (d["name"], d["type"], d["what"]) == ("drop", "Dropout", "output")
    d_rev = localise(b, a)
    assert (d_rev["name"], d_rev["what"]) == ("drop", "output")


def test_root_is_named_the_model_in_the_line(tmp_path):
    a, b = pair(tmp_path, [step_record(1)], [step_record(1, **{"backward::output": "g"})])
    line = format_module_finding(localise(a, b))
    assert line.startswith("first difference: step 1 rank 0, backward of the model (Net): incoming gradient differs")


def test_format_module_finding_line(tmp_path):
    a, b = pair(tmp_path, [step_record(3, prefix="encoder.layers.0.")], [step_record(3, prefix="encoder.layers.0.")])
    b_rec = step_record(3, prefix="encoder.layers.0.", **{"forward:drop:output": "z"})
    write_run(tmp_path / "c", {0: [b_rec]})
    line = format_module_finding(localise(a, tmp_path / "c"))
    assert line == (
        "first difference: step 3 rank 0, forward of encoder.layers.0.drop (Dropout): inputs equal, outputs differ"
        " — the random stream differs at this layer (seeding: re-seed after building the model as Lightning does,"
        " or per-rank/worker seeds)"
    )
    assert format_module_finding(None).startswith("first difference: not inside")


def test_replay_helpers(tmp_path):
    a, b = pair(tmp_path, [step_record(1), step_record(2)], [step_record(1), step_record(2)])
    assert not needs_replay(a, b, 2)
    assert needs_replay(a, b, 7)
    assert step_to_replay({"quantity": "loss", "step": 7, "rank": 0}, a, b) == 7
    assert step_to_replay({"quantity": "loss", "step": 7, "rank": 0}, a, b, under_noise=True) is None
    assert step_to_replay({"quantity": "loss", "step": 2, "rank": 0}, a, b) is None
    assert step_to_replay({"quantity": "samples", "step": 7}, a, b) is None
    text = replay_instruction(7, a, b, harness="ddp-parity")
    assert f"{WATCH_STEP_ENV}=7" in text and "then: ddp-parity --traces" in text
    assert localise(a, b, step=7) is None  # not watched: nothing to say, never a guess


def test_replay_launch_is_the_same_command_watching_one_step(tmp_path):
    from ddp_parity.harness.launch import build_launch
    from ddp_parity.harness.replay import replay_launch

    for side in ("raw", "lightning"):
        launch = build_launch(side, "configs/default.yaml", 2, ["--trainer.max_epochs", "1"], tmp_path, 1)
        replay = replay_launch(launch, 7)
        assert replay.run_dir == Path(f"{launch.run_dir}-watch7")
        assert replay.env[WATCH_STEP_ENV] == "7" and replay.env["MASTER_PORT"] != launch.env["MASTER_PORT"]
        assert replay.env[DUMP_ENV] == "7"  # the update of the step dumped for its replay (issue 46 item 5)
        assert str(launch.run_dir) not in replay.command and str(replay.run_dir) in replay.command
        unchanged = [a for a in launch.command if a != str(launch.run_dir) and not a.startswith("--master_port")]
        assert [
            a for a in replay.command if a != str(replay.run_dir) and not a.startswith("--master_port")
        ] == unchanged
        assert replay.log_path.name == f"{side}-watch7.log"
