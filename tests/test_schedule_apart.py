"""Issue 46 class a: the lr is a schedule, not a construction fact. A loop that reads its param groups after a
scheduler step (or sets the lr by hand) gets no "param groups differ" headline for slips of the schedule, the
clip norm, the loss scale, freezing, autocast or the sampler seed, and no warning on an equal pair; a slip
that is in the construction (eps) is named by its key, never as a weight-decay split. Pairs trained by the
tests' own loop (tests/loops_of_our_own.py)."""

from __future__ import annotations

import pytest
from loops_of_our_own import Loop, pair

from ddp_parity import compare_traces

SLIPS = {
    "schedule": {"gamma": 0.99},
    "clip norm": {"clip": 0.01},
    "loss scale": {"loss_scale": 2.0},
    "freezing": {"frozen": ("0.bias",)},
    "autocast": {"autocast": True},
    "sampler seed": {"order_seed": 4},
}
READS = {"after a scheduler step": {"schedule": "exp"}, "set by hand": {"lr_read": "by_hand"}}


@pytest.mark.parametrize("read", list(READS))
@pytest.mark.parametrize("slip", list(SLIPS))
def test_a_slip_is_never_headlined_as_param_groups_when_the_groups_are_read_after_the_schedule(tmp_path, read, slip):
    base = Loop(**READS[read])
    # the slipped side hands record() its optimizer at the last step: its groups are read at another point
    # of the schedule, as a callback re-reading them at the end does
    report = compare_traces(*pair(tmp_path, base, base.changed(record_optimizer="last", **SLIPS[slip])))
    d = report["diagnosis"]
    assert report["verdict"] == "different", d
    assert d["category"] != "param_groups" and "param groups differ" not in d["explanation"], d["explanation"]
    assert not any("param groups" in w["message"] for w in report["warnings"]), report["warnings"]


@pytest.mark.parametrize("read", list(READS))
def test_an_equal_pair_whose_groups_are_read_at_other_steps_has_no_warning(tmp_path, read):
    """One side hands record() its optimizer at the first step, the other at the last (as a callback
    re-reading at the end does): the lr in the groups differs, the training does not."""
    base = Loop(**READS[read])
    report = compare_traces(*pair(tmp_path, base, base.changed(record_optimizer="last")))
    assert report["verdict"] == "equivalent" and report["warnings"] == [], report["warnings"]


def test_a_construction_slip_is_named_by_its_key_not_as_a_weight_decay_split(tmp_path):
    base = Loop(optimizer="adamw", schedule="exp")
    d = compare_traces(*pair(tmp_path, base, base.changed(eps=1e-3)))["diagnosis"]
    assert (d["category"], d["evidence"]["differences"]) == ("param_groups", d["evidence"]["differences"])
    assert "eps: 1e-08 vs 0.001" in d["explanation"] and "weight decay" not in d["explanation"], d["explanation"]
    assert "lr:" not in d["explanation"] and "the same eps" in d["advice"]


def test_a_construction_record_is_compared_on_every_key(tmp_path):
    """Where meta.json holds the optimizer as constructed (hooks see the construction), the lr is a
    construction fact too: an lr slip there is a param-group difference."""
    groups = lambda lr: [  # noqa: E731  as the hooks of `ddp-parity record` write it
        {"class": "SGD", "param_groups": [{"params": ["0.weight"], "lr": lr}], "named": True, "stepped": True}
    ]
    a = Loop(extra_meta={"optimizer_built": groups(0.05)})
    b = Loop(lr=0.04, extra_meta={"optimizer_built": groups(0.04)})
    d = compare_traces(*pair(tmp_path, a, b))["diagnosis"]
    assert d["category"] == "param_groups" and "as constructed" in d["explanation"], d["explanation"]
    assert "lr: 0.05 vs 0.04" in d["explanation"]
