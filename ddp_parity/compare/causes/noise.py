"""Causes under measured noise (--tolerance noise, compare/noise.py): the pair within the noise of
its controls, or the step it leaves that noise read in causal order (the loss, the gradients, the
update). `judge_under_noise` makes these findings from the exact diagnosis and the judgement.
"""

from __future__ import annotations

from dataclasses import replace

from ddp_parity.compare import evidence as recorded_evidence
from ddp_parity.compare.causes.base import Cause, unchecked_at, unchecked_sentence
from ddp_parity.compare.causes.undetermined import CANDIDATES
from ddp_parity.compare.findings import Finding

# the explanations of a difference that say "rounding" (a category, or a setup kind that changes only
# how sums round): under --tolerance noise the measured noise decides whether they hold
ROUNDING_FINDINGS = ("numerics", "reduction_order", "undetermined", "config.threads", "config.arithmetic")


def is_rounding(found: Finding, departure: dict | None = None) -> bool:
    """A finding that blames rounding; under noise also one at a step before the pair leaves the
    envelope (until then the pair is only noise apart, whatever the exact checks make of its bits)."""
    if found.category in ROUNDING_FINDINGS or found.kind in ROUNDING_FINDINGS:
        return True
    return departure is not None and found.step is not None and found.step < departure["step"]


def judge_under_noise(
    exact: Finding, judgement: dict, names, within: bool, exact_step, setup=None, hard: bool = False, runs=None
) -> tuple[Finding, dict | None, bool]:
    """The exact comparison's diagnosis, judged against the noise the controls measured. Within the
    noise, the finding is `noise` (the exact finding's setup difference, if any, stays beside it as
    `setup_differs`). Beyond it, an exact finding that blames rounding cannot stand: the finding is
    read in causal order at the step the pair leaves the envelope (`loss.beyond_noise`,
    `gradients.beyond_noise`, `optimizer.beyond_noise`); any other finding (a config, the
    data, the optimizer) keeps its cause, the departure added to its evidence. `hard`: the finding is
    about what no rounding moves (samples, batch, lr): it stands whatever its step. `runs` (a, b):
    the departure's finding says what evidence of its step a side did not record. Returns the
    finding, the divergence its evidence is about (None within the noise) and whether the finding
    was made here (diagnosis.diagnosis_under_noise then holds it to one story, compare/story.py)."""
    worst, departure = judgement["worst"], judgement["departure"]
    first, unchecked = None, []
    values = {"controls": ", ".join(judgement.get("control_labels") or ["?"]), "side": names[0]}
    values["factor"] = judgement["factor"]
    evidence = {"sides": {"a": names[0], "b": names[1]}, "noise": _noise_evidence(judgement)}
    if within:
        kind, step, candidates = "noise", None, []
        values.update(worst=worst.get("quantity"), worst_step=worst.get("step"), ratio=worst["ratio"])
        facts = f"{names[0]} and {names[1]} differ in their last bits from step {exact_step}."
    elif departure is not None and not hard and is_rounding(exact, departure):
        step = departure["step"]
        kind, candidates, quantity = _departure_cause(departure)
        first = {"quantity": quantity, "step": step}  # the divergence the evidence is about
        if runs is not None:
            have = {name: recorded_evidence.recorded(run, step) for name, run in zip(names, runs)}
            unchecked = unchecked_at(first, have)
        where = departure["layer"] or departure["quantity"]
        values.update(where=where, step=step, before="")
        if exact_step is not None and exact_step < step:
            values["before"] = f" Their differences from step {exact_step} to step {step - 1} are rounding."
        facts = (
            f"At step {step} {departure['quantity']} is {departure['distance']:.3g} apart relative, "
            f"{departure['ratio']:.3g} times the bound the noise allows ({departure['bound']:.3g})."
        )
    else:
        return replace(exact, evidence={**exact.evidence, "noise": evidence["noise"]}), None, False
    advice = NOISE_CAUSES[kind]
    explanation = f"{facts} {advice.why.format(**values)}"
    found = Finding(
        kind.split(".")[0],
        kind,
        step,
        explanation=f"{explanation} {unchecked_sentence(unchecked)}" if unchecked else explanation,
        advice=advice.fix.format(**values),
        evidence=evidence,
        candidates=[] if within else candidates,
        unchecked=unchecked,
        setup_differs=setup if within and setup and _named_beside(setup) else None,
    )
    return found, first, True  # the caller checks the story of a finding made here (first: None within the noise)


def _named_beside(found: Finding) -> bool:
    """Within the noise, a finding that names a cause still says it beside the verdict: a setup
    difference, or a way of summing that only changes how the sums round (reduction_order, gradient
    sync on every FSDP2 micro-batch: still an extra reduce-scatter per micro-batch)."""
    return found.category not in ("numerics", "undetermined", "equivalent", "noise")


def _departure_cause(departure: dict) -> tuple[str, list[dict], str]:
    """The cause of a departure read in causal order at its step, everything before being noise: a
    loss that leaves comes from the forward pass or the loss (its function, a module's settings, the
    batch); a gradient that leaves with the loss inside, from what happens between the loss and the
    gradients; parameters that leave with both inside, from the update."""
    groups = set(departure.get("groups") or [])
    if "loss" in groups:
        kind, causes, quantity = "loss.beyond_noise", ["loss", "module_state", "data_pipeline"], "loss"
    elif groups & {"grad", "grad_norm"}:
        kind, causes, quantity = "gradients.beyond_noise", ["gradients", "loss"], "grad_norm"
    else:
        kind, causes, quantity = "optimizer.beyond_noise", ["optimizer", "param_groups"], "param_digest"
    candidates = [
        {"cause": c, "category": c, "what": CANDIDATES[c][0], "tells_apart": CANDIDATES[c][1]} for c in causes
    ]
    return kind, candidates, quantity


def _noise_evidence(judgement: dict) -> dict:
    return {key: judgement[key] for key in ("factor", "departure", "worst", "controls") if key in judgement}


NOISE = Cause(
    "noise",
    judge_under_noise,
    why="The controls ({controls}) ran {side} again under a change of rounding alone; every per-step "
    "quantity of the pair stayed within {factor:g} times how far they drifted (the largest: {worst} "
    "at step {worst_step}, {ratio:.2g} of its bound). The runs differ as much as rounding makes "
    "correct code differ, no more.",
    fix="Nothing to fix: the runs are equivalent within the measured noise. For a bitwise verdict, run "
    "both sides under the same arithmetic (threads, ATen capability, BLAS path, world size).",
    doc="Every quantity of the pair within the factor of its controls' envelope (runs of one side under "
    "changes of rounding alone): EQUIVALENT WITHIN NOISE.",
)
LOSS_BEYOND_NOISE = Cause(
    "loss.beyond_noise",
    judge_under_noise,
    why="Rounding alone does not explain it: the controls ({controls}: {side} run again under a change "
    "of rounding alone) stay within that bound, and until then the pair's parameters were no further "
    "apart than rounding carries them, so the loss was computed differently at that step: the loss "
    "function or its arguments, a module's settings (a dropout p, train or eval mode), or the batch "
    "itself.{before}",
    fix="Compare what step {step} computes on the two sides, in this order: the loss and its arguments "
    "(label smoothing, class weights, reduction), the modules' settings and mode, the batch contents; "
    "watching the model (DDP_PARITY_WATCH_STEP={step}) compares each module's output.",
    doc="The loss leaves the envelope at step k, every exact finding being rounding: the loss, a "
    "module's settings, the batch.",
)
GRADIENTS_BEYOND_NOISE = Cause(
    "gradients.beyond_noise",
    judge_under_noise,
    why="Rounding alone does not explain it: the controls ({controls}: {side} run again under a change "
    "of rounding alone) stay within that bound and the loss is within it too, so what happens between "
    "the loss and the optimizer step differs at that step: a loss scaled before backward, "
    "accumulation, averaging over ranks, a frozen or unused parameter, clipping on one side (the "
    "per-layer gradient norms are read after it; a gradient norm taken before it stays inside), or "
    "the batch (one sample fewer moves the gradients before the loss).{before}",
    fix="Look at what step {step} does between loss and optimizer step on each side, in {where} first: "
    "loss scaling and accumulation, DDP's averaging (no extra division by world size), requires_grad, "
    "gradient clipping; record batch=batch so the batch contents are compared exactly.",
    doc="The gradients leave the envelope with the loss inside: scaling, accumulation, averaging, clipping.",
)
OPTIMIZER_BEYOND_NOISE = Cause(
    "optimizer.beyond_noise",
    judge_under_noise,
    why="Rounding alone does not explain it: the controls ({controls}: {side} run again under a change "
    "of rounding alone) stay within that bound, and the loss and the gradients are within it too, so "
    "the update differs at that step: the optimizer's settings (lr, weight decay, momentum or betas of "
    "a group), its state, or gradient clipping on one side.{before}",
    fix="Compare the optimizer's settings and what touches the gradients after their norm is taken "
    "(clipping) on the two sides from step {step} on, for {where} first; record optimizer=optimizer "
    "so the param groups are compared before any step.",
    doc="The parameters leave the envelope with the loss and the gradients inside: the update.",
)
NOISE_CAUSES = {c.kind: c for c in (NOISE, LOSS_BEYOND_NOISE, GRADIENTS_BEYOND_NOISE, OPTIMIZER_BEYOND_NOISE)}
