"""Issue 46 item 5, proof by replay of the update: with DDP_PARITY_DUMP_UPDATE=N each side dumps what its
N-th optimizer step consumed; the diagnosis of an update re-applies side b's step offline with one
ingredient of side a's and says which reconciles them, or that none alone does. On the tests' own loop
(tests/loops_of_our_own.py) and a LightningModule of their own (the closure path). Fails on 9adac1c:
no dump, no replay."""

from __future__ import annotations

import lightning as L
import torch
from loops_of_our_own import Loop, pair
from test_recorder_lightning import Clipped, loader, quiet_trainer

from ddp_parity import TraceCallback, compare_traces
from ddp_parity.update_dump import DUMP_ENV, dump_path


def test_the_ingredient_whose_swap_reconciles_the_update_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv(DUMP_ENV, "1")
    base = Loop(optimizer="adamw")
    d = compare_traces(*pair(tmp_path, base, base.changed(eps=1e-3)))["diagnosis"]
    replay = d["evidence"]["replay"]
    assert (replay["reproduced"], replay["differing"], replay["reconciles"]) == (True, ["eps"], ["eps"]), replay
    assert "Replayed: with reference's eps, changed's step 1 gives reference's parameters bitwise" in d["explanation"]


def test_two_slips_in_one_update_are_said_to_need_more_than_one_swap(tmp_path, monkeypatch):
    monkeypatch.setenv(DUMP_ENV, "1")
    base = Loop(optimizer="adamw")
    d = compare_traces(*pair(tmp_path, base, base.changed(eps=1e-3, weight_decay=0.1)))["diagnosis"]
    replay = d["evidence"]["replay"]
    assert replay["reconciles"] == [] and set(replay["differing"]) == {"eps", "weight_decay"}, replay
    assert "no single ingredient" in d["explanation"]


def test_the_dump_leaves_training_bitwise_the_same(tmp_path, monkeypatch):
    a = pair(tmp_path / "plain", Loop(optimizer="adamw"), Loop(optimizer="adamw"))[0]
    monkeypatch.setenv(DUMP_ENV, "3")
    b = pair(tmp_path / "dumped", Loop(optimizer="adamw"), Loop(optimizer="adamw"))[0]
    assert dump_path(b, 0, 3).is_file() and not dump_path(a, 0, 3).exists()
    assert compare_traces(a, b)["verdict"] == "equivalent"


def test_under_lightnings_closure_the_step_sees_the_clipped_gradients(tmp_path, monkeypatch):
    """Backward runs inside optimizer.step(closure): the gradients are taken after the step, as it saw them
    (clipped by the Trainer), and each side's replay gives its own parameters."""
    monkeypatch.setenv(DUMP_ENV, "2")
    for name, clip in (("a", 0.01), ("b", 0.005)):
        L.seed_everything(0, verbose=False)
        torch.manual_seed(0)
        trainer = quiet_trainer(TraceCallback(str(tmp_path / name), side=name), gradient_clip_val=clip, devices=1)
        trainer.fit(Clipped(), loader())
    d = compare_traces(tmp_path / "a", tmp_path / "b")["diagnosis"]
    assert d["kind"] == "optimizer.clip", d["explanation"]
    replay = d["evidence"].get("replay")
    assert replay is None  # the parameters part at step 1: step 2's dump is no proof of step 1
    monkeypatch.setenv(DUMP_ENV, "1")
    for name, clip in (("a1", 0.01), ("b1", 0.005)):
        torch.manual_seed(0)
        trainer = quiet_trainer(TraceCallback(str(tmp_path / name), side=name), gradient_clip_val=clip, devices=1)
        trainer.fit(Clipped(), loader())
    d = compare_traces(tmp_path / "a1", tmp_path / "b1")["diagnosis"]
    replay = d["evidence"]["replay"]
    assert replay["reproduced"] and replay["reconciles"] == ["grads"], replay
