"""Like paired with like (issue 46 f): a raw DDP loop wraps only the student in DDP and keeps its
frozen EMA teacher apart; its Lightning port holds both in one LightningModule, which Lightning's
DDP wraps whole. The sides then record other parameter sets: the comparison pairs the parameters
both hold, names those one side holds alone (untrained: a note, never a pass unsaid), and still finds
a slip in what both hold (the teacher's momentum, one student layer's initialisation)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import PYTHON, REPO, _torchrun_prefix, check_ok, child_env, run_cmd
from test_comparator import LOSSES, PARAMS, make_run

from ddp_parity import compare_traces
from ddp_parity.compare import pairing
from ddp_parity.compare.comparator import compare_runs, match_keys
from ddp_parity.hooks import recording_env
from ddp_parity.trace import META_FILE

PROGRAMS = REPO / "tests" / "hooks_programs"


def raw(tmp, name: str, *args: str):
    run_dir = tmp / name
    env = recording_env(run_dir, name, child_env())
    env["DDP_PARITY_WATCH_STEP"] = None  # left out of the child (run_cmd starts from os.environ)
    check_ok(run_cmd([*_torchrun_prefix(2), PROGRAMS / "ema_raw.py", *args], env=env))
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unlike-params")
    out = {name: raw(tmp, name, *(["--slip", name] if name != "raw" else [])) for name in ("raw", "momentum", "init")}
    env = recording_env(tmp / "lightning", "lightning", child_env())
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=_torchrun_prefix(1)[-2].split("=")[1])
    check_ok(run_cmd([PYTHON, PROGRAMS / "ema_lightning.py"], env=env))
    out["lightning"] = tmp / "lightning"
    return out


def _notes(report: dict, kind: str) -> list[str]:
    return [w["message"] for w in report["warnings"] if w["kind"] == kind]


@pytest.mark.slow
def test_a_port_holding_the_frozen_teacher_too_is_equivalent_and_says_so(runs):
    meta = json.loads((runs["lightning"] / META_FILE).read_text())
    assert meta["params_frozen"] == ["teacher.1.weight", "teacher.1.bias", "teacher.3.weight", "teacher.3.bias"]
    report = compare_traces(runs["raw"], runs["lightning"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    [alone] = _notes(report, "one_side_only")
    assert "4 parameter(s) on lightning only, untrained (requires_grad False and in no param group)" in alone
    assert "teacher.1.weight" in alone and "teacher.3.bias" in alone
    [narrowed] = _notes(report, "narrowed_digests")  # the digests' last parameter is the teacher's there
    assert "compared on 1.weight only" in narrowed, narrowed
    assert len(report["params"]["tensors"]) == 4  # the student's tensors, paired under `student.`
    assert report["per_step"]["param_digest"]["compared"] == 16
    d = report["diagnosis"]  # the initial states are compared on the student's parameters too
    assert d["kind"] == "equivalent" and "initial weights differ" not in d["explanation"], d
    assert (
        "other parameter sets: the weights, the digest and the final parameters are those both hold"
        in (d["explanation"])
    )
    assert "the 4 parameters both hold (init_parameters_by_name) are equal" in d["evidence"]["init_note"], d


@pytest.mark.slow
@pytest.mark.parametrize("slip, step", [("momentum", 2), ("init", 1)])
def test_a_slip_in_what_both_sides_hold_is_still_found(runs, slip, step):
    report = compare_traces(runs[slip], runs["lightning"])
    assert report["verdict"] == "different", report["diagnosis"]
    assert report["first_divergence"]["step"] == step, report["first_divergence"]
    d = report["diagnosis"]
    if slip == "momentum":  # the student's initial weights are equal: never blamed on them
        assert d["category"] != "init" and "initial weights differ" not in d["explanation"], d
        # the teacher's calls were watched on the port's side only: never said to be equal
        assert "every module call of the forward pass is equal" not in d["explanation"], d["explanation"]
    else:  # one student layer differs from the start, in what both sides hold
        assert d["category"] == "init", d


def test_a_second_attribute_is_paired_by_what_the_optimizers_train():
    """Student and teacher hold the same names: the attribute whose keys the optimizer trains on both
    sides is the one paired; with no optimizer known, the pairing is ambiguous and nothing is dropped."""
    raw_keys, port = ["0.w", "0.b"], ["student.0.w", "student.0.b", "teacher.0.w", "teacher.0.b"]
    trained = ({"0.w", "0.b"}, {"student.0.w", "student.0.b"})
    pairs = match_keys(raw_keys, port, None, trained)
    assert pairs["0.w"] == ("0.w", "student.0.w") and pairs["__only_b__"] == ["teacher.0.b", "teacher.0.w"]
    assert match_keys(port, raw_keys, None, trained[::-1])["student.0.b"] == ("student.0.b", "0.b")
    assert match_keys(raw_keys, port, None)["__only_a__"] == ["0.b", "0.w"]  # ambiguous: unpaired, named
    # a head only one attribute holds decides by the count of keys paired
    pairs = match_keys(["0.w", "head.w"], ["net.0.w", "net.head.w", "loss.w"], None)
    assert pairs["head.w"] == ("head.w", "net.head.w") and pairs["__only_b__"] == ["loss.w"]


def _with_meta(run, **facts):
    meta = json.loads((run / META_FILE).read_text())
    (run / META_FILE).write_text(json.dumps({**meta, **facts}))
    return run


def _optimizer(names):
    return {"class": "SGD", "named": True, "param_groups": [{"params": names, "lr": 0.1}]}


def test_a_tensor_held_alone_is_a_note_only_where_the_records_prove_it_untrained(tmp_path):
    names = sorted(PARAMS)
    a = _with_meta(make_run(tmp_path / "a", LOSSES, PARAMS), optimizer=_optimizer(names), params_frozen=[])
    extra = {**PARAMS, "head.weight": torch.zeros(3)}
    untrained = _with_meta(
        make_run(tmp_path / "b", LOSSES, extra), optimizer=_optimizer(names), params_frozen=["head.weight"]
    )
    result = compare_runs(a, untrained)
    assert result.equivalent and not result.problems
    assert [n["kind"] for n in result.notes] == ["one_side_only"] and "head.weight" in result.notes[0]["message"]
    trained = _with_meta(
        make_run(tmp_path / "c", LOSSES, extra), optimizer=_optimizer([*names, "head.weight"]), params_frozen=[]
    )
    result = compare_runs(a, trained)  # trained on one side only: a setup difference, named
    assert not result.equivalent and "head.weight in that side's optimizer" in result.problems[0]
    older = make_run(tmp_path / "d", LOSSES, extra)  # an older trace: nothing proves it untrained
    assert not compare_runs(a, older).equivalent


def test_a_digest_narrowed_to_a_frozen_parameter_compares_nothing():
    """The digests' shared parameter is a frozen positional embedding (DiT's, a ViT's), the other element each
    side's own (a port's LightningModule holds an EMA copy too): equal after every step whatever the training
    did, so it is not kept; the per-step parameter digest is then said not compared, never equal."""
    meta_a = {"param_digest_names": ["pos_embed", "final.weight"], "params_frozen": ["pos_embed"]}
    meta_b = {"param_digest_names": ["model.pos_embed", "ema.final.weight"], "params_frozen": ["model.pos_embed"]}
    common = {"b:model.pos_embed": "pos_embed", "a:final.weight": "final.weight"}
    assert pairing.digest_positions(meta_a, meta_b, common) == []
    note = pairing.narrowed_note(meta_a, meta_b, {"a": "raw", "b": "lightning"}, [])
    assert "not compared at all" in note and "trains" in note
    trained = {**meta_b, "params_frozen": []}  # where it is trained on both sides, the shared element is kept
    assert pairing.digest_positions({**meta_a, "params_frozen": []}, trained, common) == [(0, 0)]
