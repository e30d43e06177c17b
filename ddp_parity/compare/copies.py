"""The copies of the trained model a run keeps beside it (an EMA), compared step by step: the hooks of
`ddp-parity record` digest each copy they found (its first and last parameter, as `param_digest` does) after every
optimizer step, in the record's `copy_digest`. A copy takes no part in the training, so a copy apart never changes
the verdict; where the training is equal it is a warning (`copy_differs`): the program's EMA, and every snapshot
or sample made from it, differ while the model does not. A step's digest is taken at its optimizer step, before the
update that follows it, so the last update is read from each rank's hooks facts (`copies_final_sha256`, the whole
state of each copy at the end).
"""

from __future__ import annotations

from ddp_parity.trace_files import TraceFormatError, iter_records, read_hook_facts, trace_ranks

KEY = "copy_digest"


def copy_differences(run_a, run_b, names) -> list[dict]:
    """Per rank, the first step whose copy digests both sides recorded (the same number of copies) differ."""
    out = []
    for rank in sorted(set(_ranks(run_a)) & set(_ranks(run_b))):
        parted = _first_apart(run_a, run_b, rank)
        if parted is not None:
            step, compared = parted
            where = f"after step {step} on {names[0]} and {names[1]}, equal after the {compared} step(s) before it"
        elif (last := _apart_at_the_end(run_a, run_b, rank)) is not None:
            step = last
            where = (
                f"at the end on {names[0]} and {names[1]}, equal at every optimizer step before (each read before "
                f"the update that follows the step): its update after the last step ({last}) differs"
            )
        else:
            continue
        out.append(
            {
                "kind": "copy_differs",
                "rank": rank,
                "step": step,
                "message": (
                    f"rank {rank}: the copy of the trained model the hooks found (an EMA kept beside it) holds other "
                    f"values {where}, while the training is equal: its update differs (when it runs against the "
                    "optimizer step: per micro-batch or per step, before or after a change made to the weights "
                    "outside the optimizer, or not after the last step; its decay; the step count its decay reads). "
                    "Every snapshot or sample made from it differs too. Fix: update the copy at the same point of "
                    "each optimizer step on both sides, from the same weights, with the same decay."
                ),
            }
        )
    return out


def _apart_at_the_end(run_a, run_b, rank) -> int | None:
    """The last step, where both sides hold as many copies at the end after as many steps and their states differ."""
    ends = [read_hook_facts(run, rank) for run in (run_a, run_b)]
    digests = [facts.get("copies_final_sha256") for facts in ends]
    steps = [facts.get("copies_final_after_step") for facts in ends]
    if not all(isinstance(d, list) for d in digests) or len(digests[0]) != len(digests[1]) or steps[0] != steps[1]:
        return None
    return steps[0] if digests[0] != digests[1] else None


def _ranks(run) -> list[int]:
    try:
        return trace_ranks(run)
    except (TraceFormatError, OSError):
        return []


def _first_apart(run_a, run_b, rank) -> tuple[int, int] | None:
    try:
        by_step = {r.get("step"): r.get(KEY) for r in iter_records(run_b, rank) if isinstance(r.get(KEY), list)}
        if not by_step:
            return None  # no copy recorded on that side: nothing to read on the other
        compared = 0
        for record in iter_records(run_a, rank):
            mine, theirs = record.get(KEY), by_step.get(record.get("step"))
            if not isinstance(mine, list) or not isinstance(theirs, list) or len(mine) != len(theirs):
                continue
            if mine != theirs:
                return record["step"], compared
            compared += 1
    except (TraceFormatError, OSError):
        return None
    return None


def copies_equal_after(run_a, run_b, rank, step: int) -> bool:
    """Both sides recorded the copies as updated after `step`, and alike: step+1's digests (taken before its own
    update, so after step's) or, after the last step, the copies' whole states at the end."""
    try:
        after = [{r.get("step"): r.get(KEY) for r in iter_records(run, rank)} for run in (run_a, run_b)]
    except (TraceFormatError, OSError):
        return False
    mine, theirs = (a.get(step + 1) for a in after)
    if isinstance(mine, list) and isinstance(theirs, list) and mine:
        return mine == theirs
    ends = [read_hook_facts(run, rank) for run in (run_a, run_b)]
    digests = [facts.get("copies_final_sha256") for facts in ends]
    at = [facts.get("copies_final_after_step") for facts in ends]
    return at == [step, step] and isinstance(digests[0], list) and bool(digests[0]) and digests[0] == digests[1]
