"""Issue 46's tenth first pass (timm's train.py, round 4 and slip 1): buffers and final states. Every step matches,
and the final states differ only in buffers (BatchNorm running statistics), beside a second copy of the model one
side registered in its module (an EMA as a LightningModule's submodule). The class: such a difference put on
another cause than the records show, or on one they rule out:

- "something wrote the weights after the last step", read off a digest that sums one of the copy's tensors, where
  every parameter both final states hold is equal: the final states are compared by name first, the copy held
  alone is named (its prefix, its count), and only buffers differing is said as such;
- "as when one side converts BatchNorm to SyncBatchNorm", where neither side's recorded modules are SyncBatchNorm
  and one side's own collectives average tensors of the buffers' shapes between steps (timm's distribute_bn): that
  averaging on one side only is named, with the steps it follows; SyncBatchNorm only where the recorded module
  classes show it on one side.

Each pair is trained by the tests' own loop (tests/loops_of_our_own.py), in process: a BatchNorm1d, the loop's own
averaging of the running statistics recorded as the hooks record collectives.
"""

from __future__ import annotations

from loops_of_our_own import Loop, pair

from ddp_parity import compare_traces

BN = Loop(batchnorm=True, record_collectives=True, watch=True)


def test_statistics_averaged_on_one_side_are_named_from_its_collectives_not_syncbatchnorm(tmp_path):
    """timm's slip 1: one side averages the running statistics over the ranks after step 3 (all_reduce of tensors
    of the buffers' shapes, its own), the other never; neither side's modules are SyncBatchNorm."""
    d = compare_traces(*pair(tmp_path, BN.changed(average_buffers_after=(3,)), BN))["diagnosis"]
    assert d["kind"] == "buffers.averaged", (d["kind"], d["explanation"])
    said = d["explanation"] + d["advice"]
    assert "SyncBatchNorm" not in d["advice"], d["advice"]
    headline = d["explanation"].partition(". ")[0]
    assert headline.startswith("The running statistics are averaged over the ranks on reference only"), headline
    assert "reference's own collectives" in headline and "after step(s) 3" in headline, headline
    assert "all_reduce [8]" in headline and "changed's hold none" in headline, headline
    assert "Neither side's recorded modules are SyncBatchNorm (BatchNorm1d" in d["explanation"], said
    assert "on changed too" in d["advice"] and "or on neither" in d["advice"], d["advice"]
    assert d["evidence"]["averaged"] == {"reference": [3], "changed": []}, d["evidence"]


def test_a_copy_in_the_module_and_statistics_apart_are_not_a_weight_write(tmp_path):
    """timm's round 4: one side registers an EMA of the model in the module it records (its digest sums one of the
    copy's tensors, updated after each step), and the two sides average the running statistics at other points;
    every parameter both final states hold is equal. Never "something wrote the weights after the last step"."""
    a = BN.changed(average_buffers_after=(3,))
    d = compare_traces(*pair(tmp_path, a, a.changed(average_buffers_after=(4,), copy_in_module=True)))["diagnosis"]
    assert d["kind"] == "buffers.statistics", (d["kind"], d["explanation"])
    said = d["explanation"] + d["advice"]
    assert "wrote the weights" not in said and "copy it in" not in d["advice"], said
    assert d["explanation"].startswith("Only buffers differ, 2 running statistic(s)"), d["explanation"]
    assert "every parameter both final states hold is equal (6 of 6)" in d["explanation"], said
    assert "changed's final state also holds 9 tensor(s) under ema.* laid out as the model's" in said, said
    assert "reference after step(s) 3" in said and "changed after step(s) 4" in said, said
    assert "SyncBatchNorm" not in d["advice"], d["advice"]
    assert d["evidence"]["copies_alone"] == {"reference": None, "changed": {"prefix": "ema.", "count": 9}}


def test_syncbatchnorm_is_named_where_the_recorded_module_classes_show_it_on_one_side(tmp_path):
    """The module watch records nn.SyncBatchNorm on one side, BatchNorm1d on the other: that is named (with the
    classes recorded), the statistics apart (there by an averaging the records do not list)."""
    b = BN.changed(sync_batchnorm=True, average_buffers_after=(3,), record_collectives=False)
    d = compare_traces(*pair(tmp_path, BN, b))["diagnosis"]
    assert d["kind"] == "buffers.sync", (d["kind"], d["explanation"])
    assert "The recorded module classes hold SyncBatchNorm on changed only" in d["explanation"], d["explanation"]


def test_statistics_apart_with_nothing_recorded_to_tell_name_the_candidates_and_how_to_tell(tmp_path):
    """Neither the program's collectives nor the module classes recorded (an explicit trace without a watch): the
    candidates are named, each with what would tell it, never one of them as the cause."""
    plain = Loop(batchnorm=True)
    d = compare_traces(*pair(tmp_path, plain.changed(average_buffers_after=(3,)), plain))["diagnosis"]
    assert d["kind"] == "buffers.statistics", (d["kind"], d["explanation"])
    assert "unrecorded" in d["explanation"] and "SyncBatchNorm" in d["explanation"], d["explanation"]
    assert "To tell" in d["explanation"] + d["advice"], d["explanation"] + d["advice"]
    assert "SyncBatchNorm on both sides or on neither (the module classes are unrecorded on" in d["advice"]
