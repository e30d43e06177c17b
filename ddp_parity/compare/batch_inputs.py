"""Whether two runs' batch digests digest the same thing: the module watch's inputs of the model beside them.

A record's `batch_digest` is a digest of what the loop handed the recorder as its batch, taken where each side
takes it: a loop that feeds its model by hand digests its own micro-batches, a Lightning port the batches its
DataLoader yields; after the first step the two may cover other tensors whatever the model consumed. The module
watch records the input of every module call of a watched step: where the model received the same inputs at every
training forward of the step while the batch digests differ, the digests are not comparable, and the data are not
the cause (`batch_digests_set_aside`). Pure Python: reads JSON lines, loads no tensors.

    training_forward(call, trained) -> bool
    model_inputs(record) -> [input digest of each training forward of the step] | None
    model_inputs_equal(run_a, run_b, step, rank) -> bool | None
"""

from __future__ import annotations

from ddp_parity.watch import module_trace_ranks, read_module_trace

NOT_COMPARABLE = "batch_digests_not_comparable"  # the note's kind (a recording note: no training difference)


def _state(call: dict) -> dict:
    return call.get("state") if isinstance(call.get("state"), dict) else {}


def trained_names(record: dict) -> set[str]:
    """The modules a watched step ran in training mode."""
    return {c.get("name") for c in record.get("calls", []) if c.get("phase") == "forward" and _state(c).get("training")}


def evaluates(call: dict, trained: set[str]) -> bool:
    """A forward call that evaluates: under no_grad, or in eval mode where the same module also ran in training mode
    in this step (an evaluation inside the step's record, never its training)."""
    state = _state(call)
    return call.get("phase") == "forward" and (
        state.get("grad_enabled") is False or (state.get("training") is False and call.get("name") in trained)
    )


def model_inputs(record: dict) -> list | None:
    """The input digest of every training forward of a watched step, in order: the inputs of the module the step's
    first training forward called (the one the batch reaches), one per forward; None where nothing was watched."""
    trained = trained_names(record)
    forwards = [c for c in record.get("calls", []) if c.get("phase") == "forward" and not evaluates(c, trained)]
    if not forwards:
        return None
    entry = forwards[0].get("name")  # the outermost module watched: the model, or its first layer
    return [c.get("input") for c in forwards if c.get("name") == entry]


def model_inputs_equal(run_a, run_b, step: int, rank) -> bool | None:
    """Whether the model received the same inputs at `step` on `rank` on both sides, at every training forward of
    the step (as many forwards, each input equal): what a batch digest stands for. None where a side did not watch
    that step there, or recorded no input digest."""
    inputs = []
    for run in (run_a, run_b):
        record = read_module_trace(run, rank).get(step)
        found = model_inputs(record) if record is not None else None
        if found is None or None in found:
            return None
        inputs.append(found)
    return inputs[0] == inputs[1]


def inputs_equal_where_digests_part(run_a, run_b, step: int, ranks) -> bool:
    """Every rank that watched `step` on both sides fed the model equal inputs there, and `ranks` (those whose batch
    digests part at that step) were all watched: the batch digests part over the same inputs."""
    watched = set(module_trace_ranks(run_a)) & set(module_trace_ranks(run_b))
    if not ranks or not set(ranks) <= watched:
        return False
    return all(model_inputs_equal(run_a, run_b, step, r) is not False for r in watched) and all(
        model_inputs_equal(run_a, run_b, step, r) for r in ranks
    )


def not_comparable_note(step: int, ranks, names, why: str) -> dict:
    """The recording note said where the batch digests were set aside: what the records show, and what it means."""
    said = ", ".join(map(str, sorted(ranks, key=str)))
    return {
        "kind": NOT_COMPARABLE,
        "step": step,
        "ranks": sorted(ranks, key=str),
        "message": (
            f"the per-step batch digests of {names[0]} and {names[1]} differ from step {step} on (rank(s) {said}), "
            f"but {why}: the two sides digest other things as their batch (a loop that feeds its model by hand "
            "digests its own micro-batches, a DataLoader's port the batches it yields), so the digests are not "
            "compared and the data are not the cause there; the samples are compared by what the model received"
        ),
    }


INPUTS_EQUAL = "the model received the same inputs at every training forward of step {step} (the module watch)"
TRAINING_EQUAL = (
    "the parameter digest, every layer's sketch and the gradient norm are equal at every step on every rank and the "
    "final parameters are equal"
)
