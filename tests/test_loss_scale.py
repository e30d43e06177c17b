"""Issue 46, a class found on public programs: a loss recorded × GradScaler's scale (a power of two) is a named
recording relation, and never hides where the training parts; on pairs trained by the tests' own loop."""

from __future__ import annotations

from loops_of_our_own import Loop, pair

from ddp_parity import compare_traces
from ddp_parity.compare import relations


def diagnosis(tmp_path, a: Loop, b: Loop) -> dict:
    return compare_traces(*pair(tmp_path, a, b))


def test_a_power_of_two_of_a_loss_scale_is_named_beside_the_counts():
    steps = [1, 2, 3]
    relation = relations.factor_relation(
        "loss", ("a", "b"), steps, [65536.0, 131072.0, 196608.0], [1.0, 2.0, 3.0], {"world_size": 2}
    )
    assert relation.counts == (f"{relations.GRAD_SCALE}=65536",), relation
    assert "2^16" in relation.sentence
    # a factor of 4 is a count's (or nothing's), never a scaler's
    small = relations.factor_relation("loss", ("a", "b"), steps, [4.0, 8.0, 12.0], [1.0, 2.0, 3.0], {})
    assert small.counts == ()


def test_a_loss_recorded_times_the_scale_is_a_recording_note_naming_the_scaler(tmp_path):
    base = Loop()
    report = diagnosis(tmp_path, base, base.changed(loss_times=65536.0))
    d = report["diagnosis"]
    assert report["verdict"] == "equivalent" and d["kind"] == "recording.measured", d["explanation"]
    assert "GradScaler's loss scale (2^16)" in d["explanation"], d["explanation"]
    assert "scaler.scale(loss)" in d["advice"] and "backpropagated" not in d["advice"], d["advice"]


def test_a_loss_recorded_times_the_scale_never_hides_where_the_training_parts(tmp_path):
    """The scaled loss is apart from step 1 with the parameters equal; the lr changes at step 4 and the parameters
    part there: the headline is the lr at step 4, the scaled loss a note beside it with its relation."""
    base = Loop()
    d = diagnosis(tmp_path, base, base.changed(loss_times=65536.0, lr_from=(4, 0.02)))["diagnosis"]
    assert (d["kind"], d["step"]) == ("optimizer.lr", 4), d["explanation"]
    assert d["evidence"]["measured_before"]["step"] == 1
    assert "GradScaler's loss scale (2^16)" in d["explanation"], d["explanation"]
    assert "At step 4 too changed's loss is 65536 × reference's" in d["explanation"], d["explanation"]
