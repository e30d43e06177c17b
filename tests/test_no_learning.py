"""Issue 46, the `no_learning` warning checked against the records: every gradient norm zero says "nothing
trains" only where the parameter digests never change; where they move (weight decay on zero gradients) the
warning says they move by what is no gradient. The loss's constant value is said where it never changes (the
DDP tutorial's cross-entropy over one output column is -0.0 at every step). Pairs trained by the tests' own
loop (tests/loops_of_our_own.py), the loss backpropagated × 0."""

from __future__ import annotations

from loops_of_our_own import Loop, pair

from ddp_parity import compare_traces

NO_GRADIENT = Loop(loss_scale=0.0)


def _no_learning(report: dict) -> list[str]:
    return [w["message"] for w in report["warnings"] if w["kind"] == "no_learning"]


def test_zero_gradients_with_parameters_moving_by_weight_decay_never_say_nothing_trains(tmp_path):
    decayed = NO_GRADIENT.changed(weight_decay=0.1)
    report = compare_traces(*pair(tmp_path, decayed, decayed))
    assert report["verdict"] == "equivalent", report["diagnosis"]
    messages = _no_learning(report)
    assert len(messages) == 2, report["warnings"]
    for message in messages:
        assert "every recorded gradient norm is zero" in message, message
        assert "nothing trains" not in message and "their digest changes" in message, message
        assert "weight decay" in message, message


def test_zero_gradients_with_parameters_unchanged_say_nothing_trains_and_why_the_records_show(tmp_path):
    report = compare_traces(*pair(tmp_path, NO_GRADIENT, NO_GRADIENT))
    messages = _no_learning(report)
    assert len(messages) == 2, report["warnings"]
    for message in messages:
        assert "the parameters after every step are those after the first" in message, message
        assert "nothing trains" in message, message
        assert "the loss is" not in message, message  # it changes from batch to batch: not said constant
