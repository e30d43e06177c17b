"""The classes of failure that swav, detr and hifigan's first pass found (docs/programs.md), each on hand-made
traces or a loop of the tests' own: an equal training never given a cause with a fix, what the module watch and
the hooks recorded (a module's type, the mode a step ran in, the lr of every group) read before a mechanism is
guessed, and parameters read as the step's forward used them."""

from __future__ import annotations

from test_diagnosis import INIT, make_meta, pair, run_diagnosis


def test_initial_weights_apart_on_another_rank_than_0_are_no_cause_of_an_equal_training(tmp_path):
    """detr's equal pair: rank 1's initial digest apart across the sides (each rank seeds and builds before DDP
    broadcasts rank 0's weights), rank 0's equal, every step and final tensor equal. The verdict is EQUIVALENT and
    the diagnosis must be the equivalent one, not an `init` cause with "seed identically" beside it."""
    runs = pair(tmp_path, meta_b=make_meta("lightning", init=[INIT, "f" * 64]))
    report, d = run_diagnosis(*runs)
    assert report["verdict"] == "equivalent", d
    assert d["category"] == "equivalent", (d["kind"], d["explanation"], d["advice"])
    assert "other than 0" in d["evidence"]["init_note"], d["evidence"]
