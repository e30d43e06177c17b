"""What each run recorded that a diagnosis can use, and what the first divergence needs of it.

A check can only separate causes it has the evidence for: batch contents need `batch=` on both
sides, param groups need `optimizer=`, the module and its mode need a module watch of that step.
`recorded(run, step)` says which of these a run holds; `needed(quantity, step)` which of them can
tell the causes of a first divergence in `quantity` apart. What one side lacks is reported as
`unchecked` with the one-line change to the record call (MISSING_EVIDENCE below), never guessed at.

Pure Python: reads meta.json, the first trace record and the module watch's JSON lines.
"""

from __future__ import annotations

from ddp_parity.compare.modules import has_state, watch_asked, watched_steps
from ddp_parity.trace_files import iter_records, read_meta, trace_ranks
from ddp_parity.watch import DEFAULT_STEPS

EVIDENCE_KINDS = ("batch", "optimizer", "param_digest", "watch", "watch_step", "watch_state")

# the evidence that separates the causes of a first divergence in each quantity; param digests and
# param groups matter only after an update (step > 1), when an earlier update may be the cause
NEEDED = {
    "loss": ("batch", "watch", "watch_step", "watch_state"),
    "grad_norm": ("watch", "watch_step", "watch_state"),
    "param_digest": ("optimizer", "watch", "watch_step"),
}
NEEDED_AFTER_AN_UPDATE = ("param_digest", "optimizer")

# evidence a side may not have recorded: what could not be checked without it, and the one-line
# change to the record call that records it ({step}: the first divergence's step)
MISSING_EVIDENCE = {
    "batch": (
        "the batch contents (batch_digest)",
        "recorder.record(step, loss, indices, ..., batch=batch)",
    ),
    "optimizer": (
        "the optimizer's class and param groups, and the parameter order clipping sums in",
        "recorder.record(step, loss, indices, ..., optimizer=optimizer, model=model)",
    ),
    "param_digest": (
        "the parameters after each step (param_digest)",
        "recorder.record(step, loss, indices, ..., model=model)",
    ),
    "watch": (
        "the module and phase where the difference is born, and each module's mode",
        "recorder.watch(model) after recorder.start() (TraceCallback watches by itself)",
    ),
    "watch_step": (
        "the module calls at step {step}, which the module watch did not cover",
        "recorder.watch(model, steps=[{step}]), or DDP_PARITY_WATCH_STEP={step} in both commands' environment",
    ),
    "watch_state": (
        "each module call's training flag, autocast and dtypes (a module watch from an older version)",
        "record again with this version's recorder.watch(model)",
    ),
}


# what a side recorded by the hooks of `ddp-parity record` changes to record it: never a line of the program
HOOKS_MISSING = {
    "watch": "the hooks watch the model a DDP wrapper holds (steps 1 and 2, or DDP_PARITY_WATCH_STEP={step} in the "
    "command's environment); a program that averages without DDP's wrapper is watched only by an explicit "
    "recorder.watch(model)",
    "watch_step": "DDP_PARITY_WATCH_STEP={step} in the environment of both ddp-parity record commands",
}
# what a side recorded by the hooks could not check without a watch: the hooks record each train()/eval() switch
# (hooks.json `modes`, which the diagnosis reads), so a module's mode is never said unrecorded there
HOOKS_NOT_CHECKED = {
    "watch": "the module and phase where the difference is born (the hooks record each train()/eval() switch, not "
    "each module call)",
}
HOOKS_KIND = "recorded_by_hooks"  # not evidence: the mark of a side the hooks recorded
# not evidence: the mark of a hooks-recorded run whose watch covered the step by default (steps 1 and 2) and saw
# no call of the watched module there: a step that never calls it (a GAN's discriminator step, the generator
# wrapped first) is not seen, and no variable would change that
HOOKS_WATCHED_KIND = "hooks_watched"
HOOKS_WATCHED = (
    "the hooks watched step {step} (their default steps 1 and 2) on the first model the program gave DDP, and no "
    "call of it was recorded there: that step does not call that model (a GAN's discriminator step when the "
    "generator was wrapped first), so re-running changes nothing; an explicit recorder.watch(model) on the module "
    "that step calls records it"
)

# not evidence: the mark of a run whose ranks were given DDP_PARITY_WATCH_STEP covering the step, so that
# the change asked of it is never that variable again
WATCH_ASKED_KIND = "watch_asked"
ALREADY_ASKED = (
    "DDP_PARITY_WATCH_STEP covering step {step} was already set there, yet no call of that step was recorded: "
    "call recorder.watch(model) after recorder.start(), on the model that runs the forward (TraceCallback "
    "watches by itself)"
)


def recorded(run, step: int | None) -> set[str]:
    """The evidence kinds `run` holds; the watch kinds are about `step` (None: any watched step)."""
    found = set()
    try:
        meta = read_meta(run)
    except (OSError, ValueError, AttributeError):
        meta = {}
    if isinstance(meta.get("optimizer"), dict):
        found.add("optimizer")
    if meta.get("recorded_by") == "hooks":
        found.add(HOOKS_KIND)
    first = _first_record(run)
    if first is not None and first.get("batch_digest") is not None:
        found.add("batch")
    if digests_every_step(run):
        found.add("param_digest")
    try:
        watched, with_state = watched_steps(run), has_state(run)
    except ValueError:  # a module watch cut off by a crash: no module evidence
        watched, with_state = set(), None
    if watch_asked(run, step) is not None:
        found.add(WATCH_ASKED_KIND)
    elif HOOKS_KIND in found and watched and step in DEFAULT_STEPS:
        found.add(HOOKS_WATCHED_KIND)  # the hooks watched it by default: no variable to set would add a call
    if watched:
        found.add("watch")
        if step is None or step in watched:
            found.add("watch_step")
            if with_state:
                found.add("watch_state")
    return found


def needed(quantity: str | None, step: int | None) -> tuple[str, ...]:
    kinds = NEEDED.get(quantity or "", ())
    if step is not None and step > 1 and quantity in NEEDED:
        kinds += NEEDED_AFTER_AN_UPDATE
    return kinds


def missing(have: dict[str, set[str]], kinds) -> dict[str, list[str]]:
    """{evidence kind: [labels of the sides lacking it]} for the kinds in `kinds`; a watch that is
    absent altogether is said once (as `watch`), not also as its step and its state."""
    out: dict[str, list[str]] = {}
    for kind in kinds:
        lacking = [label for label, found in have.items() if kind not in found]
        if kind in ("watch_step", "watch_state"):
            lacking = [label for label in lacking if "watch" in have[label]]
        if kind == "watch_state":
            lacking = [label for label in lacking if "watch_step" in have[label]]
        if lacking:
            out[kind] = lacking
    return out


def digests_every_step(run) -> bool:
    """Whether `run` recorded the parameter digest at every step of every rank (a null digest, or none, at one
    step is a step whose update cannot be proved: one definition for what is said unrecorded and what the
    story check holds recorded)."""
    try:
        records = [record for rank in trace_ranks(run) for record in iter_records(run, rank)]
    except (OSError, ValueError):
        return False
    return bool(records) and all(record.get("param_digest") is not None for record in records)


def _first_record(run) -> dict | None:
    try:
        for rank in trace_ranks(run):
            for record in iter_records(run, rank):
                return record
    except (OSError, ValueError):
        return None
    return None
