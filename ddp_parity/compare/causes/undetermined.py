"""No single cause: the finding a check of the loss, the gradients or the update reports when no
one cause's evidence holds. It says what is known, ranks the candidates, and says what would tell
them apart (and, `undetermined.unrecorded`, the record-call change for what a side did not record).
"""

from __future__ import annotations

from ddp_parity.compare.causes.base import Cause, Context, Evidence, finding, samples_said
from ddp_parity.compare.causes.fed import inputs_apart, rounding_refused
from ddp_parity.compare.causes.hooked import global_rng_equal, global_rng_parts
from ddp_parity.compare.evidence import HOOKS_KIND
from ddp_parity.compare.findings import Finding

# each cause a divergence can have, as the ranked candidates of an undetermined finding say it:
# (the cause, what would tell it apart from the others)
CANDIDATES = {
    "data": (
        "the data the step consumed (the samples, or the tensors made of them: not recorded alike on both sides "
        "at this step)",
        "record the step's batch alike on both sides (indices=, or batch= of the same tensors: its batch_digest is "
        "compared), or watch the model at this step (its first module's input is compared)",
    ),
    "data_pipeline": (
        "the batch contents (random augmentation, DataLoader worker seeding, transforms)",
        "record batch=batch on both sides (its batch_digest is compared), or watch the model (its first "
        "module's input is compared)",
    ),
    "rng": (
        "the random stream (a dropout mask drawn from another RNG state)",
        "watch the model: a random layer (Dropout) whose output differs with equal input is the random stream",
    ),
    "rng_drawn_before": (
        "a tensor the loss uses drawn from torch's generator before the step (the generators stand apart at its "
        "start, yet nothing drew inside it: no dropout mask or noise differs)",
        "watch the model: with every module call equal, the loss's own arguments (weights, targets drawn before the "
        "step) or its function are what differ",
    ),
    "module_state": (
        "a module in another mode (eval mode left on after validation, autocast, dtype)",
        "watch the model with this version: each call's training flag, autocast and dtypes are compared",
    ),
    "loss": (
        "the loss function or its arguments (label smoothing, class weights, reduction)",
        "watch the model: equal module outputs with a different loss are the loss function",
    ),
    "numerics": (
        "a module that computes differently from equal inputs (its constructor arguments, its kernel)",
        "watch the model: the first module whose output differs with equal input is named",
    ),
    "gradients": (
        "the scaling or reduction of the gradients (accumulation without loss division, no_sync, averaging over ranks)",
        "watch the model: equal module gradients with different parameter .grad are the reduction",
    ),
    "param_groups": (
        "the optimizer's param groups (weight decay or lr on some parameters only)",
        "record optimizer=optimizer on both sides: the param groups are compared before any step",
    ),
    "reduction_order": (
        "clipping over the parameters in another order (model.parameters() vs the optimizer's groups)",
        "record optimizer=optimizer on both sides: equal param groups leave the order as the cause",
    ),
    "optimizer": (
        "the optimizer's update (its state, settings outside the param groups, zero_grad, clipping on one side)",
        "watch the model: the parameters after the step are compared one by one",
    ),
    "norm": (
        "the gradient norm measured otherwise from the same gradients (norm_type, a subset of the parameters)",
        "pass model= to record() before zero_grad on both sides: each parameter's gradient norm is then recorded",
    ),
    "measured": (
        "only what was measured differs (the loss, gradient norm, lr or validation measured otherwise), the "
        "training being the same",
        "record model=model on both sides: equal parameters after every step prove the training the same",
    ),
    "earlier_update": (
        "an earlier optimizer step that already differed (the parameters after each step were not recorded)",
        "record model=model on both sides: the parameters after every step are then compared",
    ),
}

# what a candidate means, and what tells it apart, where both sides recorded the parameters after every step (the
# digest sums a few tensors) or were recorded by the hooks of `ddp-parity record` (which take the optimizer as built,
# the norm clip_grad_norm_ used and the parameters after every step themselves: no record() argument to add)
DIGESTED_EARLIER_UPDATE = (
    "an earlier optimizer step that already differed in a parameter the digest does not sum (param_digest sums the "
    "first and last tensors; the module watch compares each parameter as a step's forward uses it)"
)
HOOKS_TELLS_APART = {
    "param_groups": "the hooks compare the optimizer as built (its param groups, parameter by parameter): equal "
    "there, the groups a step used are the loop's own settings, recorded each step (param_groups)",
    "reduction_order": "the hooks record the parameter order clip_grad_norm_ summed in (clip_order) beside the "
    "optimizer as built",
    "norm": "the hooks record clip_grad_norm_'s norm_type and max_norm and the norm the optimizer saw (grad_norm_seen)",
    "measured": "the hooks record the parameters after every step (param_digest): equal there and at the end, "
    "the training is the same",
    "earlier_update": "DDP_PARITY_WATCH_STEP={step} in both ddp-parity record commands' environment: the module "
    "watch compares each parameter as that step's forward uses it",
}


def _candidate_words(ctx: Context, f: dict) -> dict[str, tuple[str, str]]:
    """CANDIDATES as what this pair recorded lets them be said."""
    words = dict(CANDIDATES)
    if ctx.both_have("param_digest"):
        words["earlier_update"] = (DIGESTED_EARLIER_UPDATE, words["earlier_update"][1])
    if ctx.both_have(HOOKS_KIND):
        for cause, tells in HOOKS_TELLS_APART.items():
            words[cause] = (words[cause][0], tells.format(step=f.get("step")))
    return words


# a candidate that is a cause within a category
CANDIDATE_CATEGORY = {"earlier_update": "optimizer", "measured": "recording", "data": "data_order"}


def undetermined(ctx: Context, f: dict, causes: list[str], facts: str, evidence: dict) -> Finding:
    """No single cause: what is known, the candidates ranked, and what would tell them apart."""
    causes = [c for c in dict.fromkeys(causes) if c not in excluded(ctx)]
    if "rng" in causes and global_rng_parts(ctx):  # the generator's state recorded apart where the runs part
        causes = ["rng", *(c for c in causes if c != "rng")]
    if len(causes) < 2 and f.get("quantity") == "grad_norm":  # what equal gradients still leave open
        causes += [c for c in ("norm", "reduction_order") if c not in causes]
    if "reduction_order" in causes and rounding_refused(ctx, f):  # more apart than rounding makes: no order
        causes = [c for c in causes if c != "reduction_order"]
        if inputs_apart(ctx, f.get("step")) and "data" not in causes:  # a rank's inputs differ there: the data first
            causes.insert(0, "data")
        if len(causes) < 2 and "norm" not in causes:
            causes.append("norm")
    unchecked = ctx.unchecked()
    words = _candidate_words(ctx, f)
    ranked = "; ".join(f"({i}) {words[c][0]}" for i, c in enumerate(causes, 1))
    separate = "; ".join(dict.fromkeys(words[c][1] for c in causes)) + "."
    changes = "; ".join(f"on {' and '.join(u['sides'])}, {u['record']}" for u in unchecked)
    cause = UNRECORDED if unchecked else UNDETERMINED
    facts = f"{facts} {_equal_up_to(ctx, f)}"
    result = finding(
        ctx, cause, f["step"], f["rank"], evidence, facts, ranked=ranked, separate=separate, changes=changes
    )
    result.candidates = [
        {
            "cause": c,
            "category": CANDIDATE_CATEGORY.get(c, c),
            "what": words[c][0],
            "tells_apart": words[c][1],
        }
        for c in causes
    ]
    result.unchecked = unchecked
    return result


# the candidates a module watch that found every call, module gradient and .grad of the step equal rules out
EXCLUDED_BY_EQUAL_WATCH = ("numerics", "gradients", "module_state", "rng", "data_pipeline")


def watch_found_all_equal(ctx: Context) -> bool:
    """Both sides watched the first divergence's step with its module state, and the watch found every
    module call, module gradient and parameter .grad of it equal."""
    return ctx.both_have("watch_state") and ctx.cache.get("module") is None


def excluded(ctx: Context) -> tuple[str, ...]:
    """The candidates the recorded evidence already rules out: the story never lists them."""
    out = EXCLUDED_BY_EQUAL_WATCH if watch_found_all_equal(ctx) else ()
    return (*out, "rng") if global_rng_equal(ctx) else out  # the generators recorded equal at the step's start


def _equal_up_to(ctx: Context, f: dict) -> str:
    """What the traces show equal up to the first divergence."""
    equal = ["the configuration", "the initial weights"]
    if ctx.both_have("optimizer"):
        equal.append("the optimizer's param groups")
    equal.append(f"all {ctx.walk.steps_equal_before} earlier step(s)")
    if samples_said(ctx):  # compared at every step: a side fed by its own generator records no indices
        equal.append("this step's samples")
        if ctx.both_have("batch"):
            equal.append("batch contents")
        return f"Equal up to there: {', '.join(equal)}."
    return f"Equal up to there: {', '.join(equal)}; the samples were not compared (a side recorded no indices)."


def earlier_update_candidates(ctx: Context, f: dict) -> list[str]:
    """After an update, an earlier step may already have differed where nothing compared it."""
    if (f.get("step") or 0) <= 1:
        return []
    out = [] if ctx.both_have("param_digest") else ["earlier_update"]
    return out + ([] if ctx.both_have("optimizer") else ["param_groups"])


_UNDETERMINED_WHY = (
    "The recorded evidence does not single out one cause; the candidates, most likely first: {ranked}. "
    "What tells them apart: {separate}"
)

UNDETERMINED = Cause(
    "undetermined",
    undetermined,
    why=_UNDETERMINED_WHY,
    fix="Tell them apart: {separate}",
    doc="A loss, gradient or update difference no single cause's evidence explains: the candidates "
    "ranked, and what tells them apart.",
    requires=Evidence("at least two ranked candidates", lambda d: len(d.candidates) >= 2),
)
UNRECORDED = Cause(
    "undetermined.unrecorded",
    undetermined,
    why=_UNDETERMINED_WHY,
    fix="Record what would tell them apart, then compare again: {changes}.",
    doc="The same, where a side did not record what would tell the candidates apart: the record-call "
    "change for the missing evidence.",
    requires=Evidence(
        "at least two ranked candidates and the evidence a side did not record",
        lambda d: len(d.candidates) >= 2 and bool(d.unchecked),
    ),
)
