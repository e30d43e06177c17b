"""Ninth pass, class copies: a copy of the trained model kept beside it (an EMA) compared wrongly.

- A saved copy one update behind (a Lightning ModelCheckpoint saving in its on_train_batch_end, before the
  LightningModule's own on_train_batch_end updates the EMA) was matched only against the other side's checkpoints;
  where the other side saved after no step before, the words offered "another state" or "a copy changed between its
  update and the save". The hooks now digest the copies at each save (`copies_at_save`, as a step's `copy_digest`),
  matched with the copy's own states of the steps before: a save one update behind is said as a save before that
  step's update, on the side that makes it. Where no digest at the save was recorded, both causes are named, with how
  to tell them apart.
- A copy apart at the first step both recorded (nothing compared before it) was said to be updated otherwise ("Fix:
  update the copy at the same point"), where its start differed (a copy built by a construction of its own instead of
  copied from the model). That step's digest is the copy before any update: its start or an update before the first
  step, and where the records hold the copy's initial tensors beside the model's (`init_parameters_by_name`), the
  start is named when they differ.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import REPO, _torchrun_prefix, check_ok, child_env, recorded_once, run_cmd

from ddp_parity import compare_traces
from ddp_parity.compare.causes import hooked
from ddp_parity.compare.copies import copy_differences
from ddp_parity.hooks import recording_env
from ddp_parity.hooks.checkpoints import contents_of
from ddp_parity.trace_files import read_hook_facts, read_records

NAMES = ("raw", "lightning")


def _run(tmp_path, name: str, copy_digests: list[list[float]], facts: dict):
    """A run whose rank 0 recorded steps 1.. with these copy digests (each taken before its step's update) and these
    hooks facts."""
    trace = tmp_path / name / "trace"
    trace.mkdir(parents=True)
    records = [{"step": s, "loss": 1.0, "copy_digest": d} for s, d in enumerate(copy_digests, start=1)]
    (trace / "rank0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (trace / "rank0.hooks.json").write_text(json.dumps(facts))
    return tmp_path / name


def _module(value: float) -> torch.nn.Module:
    module = torch.nn.Linear(3, 2)
    with torch.no_grad():
        for p in module.parameters():
            p.fill_(value)
    return module


def _save(step: int, path: str, contents: dict, at_save: list[float] | None) -> dict:
    item = {"op": "torch.save", "after_step": step, "path": path, "contents": contents}
    if at_save is not None:
        item["copies_at_save"] = at_save
    return {"checkpoints": {"items": [item]}}


# the copy's state after step k (k = 0: its start), the same on both sides: a step k's digest is STATES[k - 1]
STATES = [[float(k), 0.5 * k] for k in range(6)]


def _saved_one_update_behind(tmp_path, at_save: bool):
    """Both sides train alike and their copies are equal at every step; after step 4 raw saves its copy as updated
    after step 4, lightning as it was after step 3 (its save runs before that step's update)."""
    model = _module(0.1)
    raw_save = contents_of({"model": model, "ema": _module(0.4)})
    port_save = contents_of({"state_dict": {"model": model, "ema": _module(0.3)}})
    raw = _run(tmp_path, "raw", STATES[:5], _save(4, "/r/step-4.pt", raw_save, STATES[4] if at_save else None))
    port_facts = _save(4, "<BytesIO for /p/step=4.ckpt>", port_save, STATES[3] if at_save else None)
    return raw, _run(tmp_path, "lightning", STATES[:5], port_facts)


def test_a_copy_saved_before_its_update_is_matched_with_its_own_state_of_the_step_before(tmp_path):
    found = hooked.checkpoint_contents_apart(*_saved_one_update_behind(tmp_path, at_save=True), equal_through=4)
    words = hooked.checkpoint_contents_words(found, NAMES)
    assert "lightning saves its copy of the model (the EMA the hooks found) 1 update(s) behind" in words, words
    assert "the copy held its state after step 3" in words and "raw's held its state after step 4" in words, words
    assert "runs before the copy's update of step 4" in words, words
    assert "ModelCheckpoint's save" in words, words  # lightning's layout: why its save runs first
    assert "changed between its update and the save" not in words and "another state" not in words, words
    assert found["copies_equal"] and found["copies_behind"] == [0, 1], found


def test_without_a_digest_at_the_save_both_causes_are_named_and_how_to_tell_them_apart(tmp_path):
    found = hooked.checkpoint_contents_apart(*_saved_one_update_behind(tmp_path, at_save=False), equal_through=4)
    words = hooked.checkpoint_contents_words(found, NAMES)
    assert "one side saves the copy before its update of step 4" in words, words
    assert "or it saves another state under names that end alike" in words, words
    assert "compare each side's saved tensors with its copy after step 4 and after step 3" in words, words
    assert "Where one side is Lightning" in words, words
    assert "updated otherwise" not in words, words  # the copies are recorded equal: never said to differ
    assert found["copies_equal"] and found["copies_behind"] == [None, None], found


def _init_facts(copy_start_like_model: bool | None) -> dict:
    """The hooks facts of a module holding the trained `model` and, unless None, its copy `ema` beside it, whose
    initial weight is the model's or its own."""
    init = {"model.weight": "w0", "model.bias": "b0"}
    if copy_start_like_model is not None:
        init |= {"ema.weight": "w0" if copy_start_like_model else "w-own", "ema.bias": "b0"}
    built = [{"class": "SGD", "named": True, "param_groups": [{"params": ["model.weight", "model.bias"]}]}]
    return {"init_parameters_by_name": init, "optimizer_built": built}


def _apart_from_the_first_step(tmp_path, port_copy_like_model: bool | None, first_apart: int = 1):
    """raw's copy is kept outside the module the hooks recorded (no start recorded); the port's inside it. Their
    digests part at `first_apart`."""
    port_states = [s if k + 1 < first_apart else [s[0] + 10.0, s[1]] for k, s in enumerate(STATES[:5])]
    model = _module(0.1)
    raw_facts = {"init_parameters_by_name": {"weight": "w0", "bias": "b0"}}
    raw_facts["optimizer_built"] = [{"param_groups": [{"params": ["weight", "bias"]}]}]
    raw_facts |= _save(4, "/r/step-4.pt", contents_of({"model": model, "ema": _module(0.4)}), None)
    port_facts = _init_facts(port_copy_like_model)
    port_facts |= _save(4, "/p/step=4.ckpt", contents_of({"state_dict": {"model": model, "ema": _module(0.3)}}), None)
    return _run(tmp_path, "raw", STATES[:5], raw_facts), _run(tmp_path, "lightning", port_states, port_facts)


def test_a_copy_apart_at_the_first_step_is_said_by_its_start_where_the_records_hold_it(tmp_path):
    runs = _apart_from_the_first_step(tmp_path, port_copy_like_model=False)
    [said] = copy_differences(*runs, NAMES)
    assert said["step"] == 1, said
    message = said["message"]
    assert "at step 1 on raw and lightning, the first step both recorded" in message, message
    assert "lightning's copy (ema.*) holds other values than the model (model.*) in 1 of its 2 tensor(s)" in message
    assert "built by a construction of its own, not copied from the trained model" in message, message
    assert "raw's is in no module the hooks recorded at the start" in message, message  # said unrecorded, not equal
    assert "its update differs" not in message and "update the copy at the same point" not in message, message
    found = hooked.checkpoint_contents_apart(*runs, equal_through=4)
    words = hooked.checkpoint_contents_words(found, NAMES)
    assert "differ from step 1 on, the first step both recorded" in words, words
    assert "built by a construction of its own" in words, words
    assert "the same decay and update point" not in words, words


def test_a_copy_apart_at_the_first_step_with_no_start_recorded_names_start_and_update(tmp_path):
    [said] = copy_differences(*_apart_from_the_first_step(tmp_path, port_copy_like_model=None), NAMES)
    message = said["message"]
    assert "so what differs is its start" in message and "or an update run before the first optimizer step" in message
    assert "compare the copy with the trained model before the first step on each side" in message, message
    assert "its update differs" not in message, message


def test_a_copy_apart_after_steps_compared_equal_is_still_said_by_its_update(tmp_path):
    runs = _apart_from_the_first_step(tmp_path, port_copy_like_model=True, first_apart=3)
    [said] = copy_differences(*runs, NAMES)
    assert said["step"] == 3 and "equal after the 2 step(s) before it" in said["message"], said
    assert "its update differs" in said["message"], said
    words = hooked.checkpoint_contents_words(hooked.checkpoint_contents_apart(*runs, equal_through=4), NAMES)
    assert "equal at the 2 step(s) compared before step 3" in words and "the same decay and update point" in words


# ---------------------------------------------------------------------------- recorded by the hooks

PROGRAM = REPO / "tests" / "hooks_programs" / "ema_eval.py"


@pytest.mark.slow
def test_the_hooks_digest_the_copy_at_a_save_as_at_a_step(tmp_path, tmp_path_factory):
    """ema_eval.py saves its EMA after steps 4 and 8, after the EMA's update or before it: the copy's digest at the
    save is, bitwise, the copy_digest of the next step or of the same step, and the comparison says which side saves
    one update behind. The run that saves after the update is test_hooks_copies.py's "after" (made once per
    session)."""
    (tmp_path / "before-ckpt").mkdir()
    command = [*_torchrun_prefix(2), PROGRAM, "--save-dir", str(tmp_path / "before-ckpt"), "--save-before-update"]
    check_ok(run_cmd(command, env=recording_env(tmp_path / "before", "before", child_env())))
    runs = {"after": recorded_once(tmp_path_factory, "after", "ema_eval.py", "--save-dir", "{out}")[0]}
    runs["before"] = tmp_path / "before"
    digests = {r["step"]: r["copy_digest"] for r in read_records(runs["before"], 0)}
    saves = read_hook_facts(runs["before"], 0)["checkpoints"]["items"]
    assert [(s["after_step"], s["copies_at_save"]) for s in saves] == [(4, digests[4]), (8, digests[8])], saves
    report = compare_traces(runs["after"], runs["before"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    [said] = [w for w in report["warnings"] if w["kind"] == "checkpoint_contents"]
    assert said["evidence"]["copies_behind"] == [0, 1], said["evidence"]
    assert "before saves its copy of the model (the EMA the hooks found) 1 update(s) behind" in said["message"]
