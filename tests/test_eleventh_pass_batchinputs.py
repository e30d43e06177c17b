"""The eleventh pass, class `batchinputs`: a data finding from batch records that do not digest the same thing.

A loop that feeds its model by hand digests its own micro-batches as its batch, a Lightning port the batches its
DataLoader yields: after a step the two `batch_digest`s may cover other tensors while the model is fed the same
(modded-nanogpt's Muon against its port: every parameter digest, layer sketch, gradient norm and final tensor
bitwise equal, the batch digests apart from step 2 on, and the tool said DIFFERENT, data_order, with an
IterableDataset's base-seed draw that no record showed). The rule now:

1. where the batch digests part but the module watch shows the model received the same inputs at every training
   forward of that step, the digests are not comparable: a recording note (`batch_digests_not_comparable`), and the
   data are not the cause;
2. where the parameter digest, every layer sketch and the gradient norm are equal at every step on every rank and
   the final tensors are equal, the verdict is EQUIVALENT whatever the batch digests say (issue 46 item 1);
3. a model fed other inputs keeps its data finding;
4. never "the same samples" where a side recorded nothing comparable for the step: the data stay a candidate.

The pairs are the tests' own loop (loops_of_our_own.py), one process each, in well under a second.
"""

from __future__ import annotations

from loops_of_our_own import Loop, pair

from ddp_parity import compare_traces

# a loop fed by hand: no indices, its batch digest alone, the model watched at every step
BY_HAND = Loop(record_indices=False, record_batch=True, watch=True)
# the same training, its batch digested with the targets beside the inputs from step 2 on
OTHER_DIGEST = BY_HAND.changed(batch_with_targets_from=2)


def _note(report: dict) -> dict | None:
    return next((w for w in report["warnings"] if w.get("kind") == "batch_digests_not_comparable"), None)


def test_batch_digests_apart_over_equal_model_inputs_are_a_recording_note_and_the_pair_is_equivalent(tmp_path):
    report = compare_traces(*pair(tmp_path, BY_HAND, OTHER_DIGEST))
    d = report["diagnosis"]
    assert report["verdict"] == "equivalent", (d["kind"], d["explanation"])
    assert d["category"] != "data_order" and "consumed other samples" not in d["explanation"], d["explanation"]
    note = _note(report)
    assert note is not None, report["warnings"]
    assert (
        note["step"] == 2
        and "the model received the same inputs at every training forward of step 2" in (note["message"])
    ), note
    assert "not the cause" in note["message"], note


def test_without_a_module_watch_equal_training_throughout_is_equivalent_whatever_the_batch_digests(tmp_path):
    plain = BY_HAND.changed(watch=False)
    report = compare_traces(*pair(tmp_path, plain, plain.changed(batch_with_targets_from=2)))
    d = report["diagnosis"]
    assert report["verdict"] == "equivalent", (d["kind"], d["explanation"])
    note = _note(report)
    assert note is not None and "equal at every step on every rank" in note["message"], report["warnings"]


def test_a_model_fed_other_inputs_keeps_its_data_finding(tmp_path):
    report = compare_traces(*pair(tmp_path, BY_HAND, BY_HAND.changed(order_seed=4)))
    d = report["diagnosis"]
    assert report["verdict"] == "different" and d["category"] == "data_order", (d["kind"], d["explanation"])
    assert _note(report) is None, report["warnings"]


def test_a_loss_apart_where_a_side_recorded_no_comparable_batch_never_says_the_same_samples(tmp_path):
    """One side records the indices, the other its batch digest alone (data the program makes itself): the step's
    samples are not compared, so the loss finding says so and keeps the data among its candidates."""
    with_indices = Loop(record_batch=True)
    report = compare_traces(*pair(tmp_path, with_indices, BY_HAND.changed(watch=False, input_noise=0.5)))
    d = report["diagnosis"]
    assert report["verdict"] == "different", d["explanation"]
    assert "the same samples" not in d["explanation"], d["explanation"]
    assert "records do not compare" in d["explanation"], d["explanation"]
    assert "data" in [c["cause"] for c in d["candidates"]], d["candidates"]
