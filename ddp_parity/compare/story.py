"""One story: a diagnosis whose category, module finding, fix and missing evidence agree.

    story_problems(diagnosis, run_a, run_b, first) -> list[str]   # [] when the story holds

Three rules, each checked against what the runs recorded, not against the diagnosis's own words:

1. The category agrees with the module finding. When the module watch names where the difference is
   born at the diagnosed step, a category about a step's numbers must be the one that stage points
   at (first input differs with equal indices -> the batch; equal input, other mode -> the module's
   state; a random layer -> the random stream; ...). Causes found before any step (configuration,
   param groups, initial weights, ...) may have a module finding as their consequence.
2. A fix only with its evidence. Each cause names what must be in its evidence before it may give
   its fix (`Cause.requires`, beside its check in compare/causes/: a factor of k for accumulation,
   differing thread counts for threads, ...); an `undetermined` finding ranks at least two candidates.
3. Missing evidence is said. Whatever the first divergence needs that a side did not record
   (ddp_parity.compare.evidence) is listed in `unchecked`.
4. No advice against the records (`said_against_records`): never "build the same sampler" where both
   sides recorded the same one, never "record a sampler on each side" where one was recorded, never
   "set DDP_PARITY_WATCH_STEP=N" where a side was already given it, never evidence called unrecorded
   that both sides recorded, and epochs that differ at the first divergence named, both of them.

The test suite sets DDP_PARITY_CHECK_STORY (a file to log to): every diagnosis built while it is set,
in any process, is checked, and a broken story is logged there and raised (see tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import re

from ddp_parity.compare import evidence as recorded_evidence
from ddp_parity.compare.causes import COMPUTATION_READINGS, REQUIRES, UPSTREAM_CATEGORIES
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.modules import watch_asked
from ddp_parity.trace_files import read_meta

STORY_CHECK_ENV = "DDP_PARITY_CHECK_STORY"

# categories that say the training itself was the same: no module may differ under them
SAME_TRAINING = ("equivalent", "recording")

# the module reading at the diagnosed step -> the categories a diagnosis of that step may have
MODULE_CATEGORIES = {
    "batch": ("data_pipeline", "rng"),  # a batch apart at equal indices: its making, or a generator it draws from
    "data_order": ("data_order",),
    "random": ("rng", "undetermined"),
    "state": ("module_state",),
    "loss_grad": ("loss", "gradients", "undetermined"),
    "param_grad": ("gradients",),
    # every .grad equal at the end of backward, the parameters apart after the step: the optimizer, or the
    # gradients changed between the two (an all_reduce by hand, a division of .grad)
    "optimizer": ("optimizer", "reduction_order", "gradients", "undetermined"),
    "params": ("init", "undetermined"),
    **{kind: ("numerics", "undetermined") for kind in COMPUTATION_READINGS},
}


def _module_kind(d: Finding) -> str | None:
    return (d.module or {}).get("reading_kind")


def story_problems(d: Finding, run_a, run_b, first: dict | None) -> list[str]:
    """What in diagnosis `d` contradicts itself or the evidence; `first` is the first divergence."""
    problems = []
    category, kind, module = d.category, d.kind, d.module
    module_kind = _module_kind(d)
    if module and category in SAME_TRAINING:
        problems.append(f"category {category} says the training is the same, but module {module.get('name')} differs")
    elif module_kind and category not in UPSTREAM_CATEGORIES and module.get("step") == d.step:
        allowed = MODULE_CATEGORIES.get(module_kind, ())
        if category not in allowed:
            problems.append(
                f"category {category} contradicts the module finding ({module_kind} at {module.get('name')}: "
                f"{' or '.join(allowed)})"
            )
    required = REQUIRES.get(kind)
    if required is not None and not required.holds(d):
        problems.append(f"{kind} gives its fix without its evidence ({required.says})")
    if category not in UPSTREAM_CATEGORIES and first is not None:
        have = {
            label: recorded_evidence.recorded(run, first.get("step")) for label, run in (("a", run_a), ("b", run_b))
        }
        lacking = recorded_evidence.missing(have, recorded_evidence.needed(first.get("quantity"), first.get("step")))
        said = {u.get("evidence") for u in d.unchecked}
        for missing_kind in sorted(set(lacking) - said):
            problems.append(
                f"missing evidence left unsaid: {missing_kind} (not recorded by side {lacking[missing_kind]})"
            )
    return problems + said_against_records(d, run_a, run_b, first)


# advice that asks to make the samplers equal, or to record one on each side
SAME_SAMPLER = "Build the same DistributedSampler"
RECORD_SAMPLERS = "record one on each side"


def said_against_records(d: Finding, run_a, run_b, first: dict | None) -> list[str]:
    """What diagnosis `d` asks or says that the runs' own records contradict (rule 4)."""
    problems = []
    said = " ".join(
        [d.explanation or "", d.advice or "", *(f"{u.get('not_checked')} {u.get('record')}" for u in d.unchecked)]
    )
    samplers = [_samplers(run) for run in (run_a, run_b)]
    if SAME_SAMPLER in (d.advice or "") and samplers[0] and samplers[0] == samplers[1]:
        problems.append("asks to build the same sampler, but both sides recorded the same one")
    if RECORD_SAMPLERS in (d.advice or "") and any(samplers):
        problems.append("asks to record a sampler on each side, but a side recorded one")
    for step in re.findall(r"DDP_PARITY_WATCH_STEP=(\d+) in", said):
        asked = [str(run) for run in (run_a, run_b) if watch_asked(run, int(step)) is not None]
        if asked:
            problems.append(f"asks for DDP_PARITY_WATCH_STEP={step}, but {' and '.join(asked)} already ran with it")
    step = first.get("step") if first else None
    have = [recorded_evidence.recorded(run, step) for run in (run_a, run_b)]
    for u in d.unchecked:
        if u.get("evidence") in recorded_evidence.EVIDENCE_KINDS and all(u["evidence"] in h for h in have):
            problems.append(f"calls {u['evidence']} unrecorded, but both sides recorded it")
    if first and first.get("quantity") == "samples" and "epoch_b" in first and first.get("epoch") != first["epoch_b"]:
        if not all(f"epoch {e}" in (d.explanation or "") for e in (first.get("epoch"), first["epoch_b"])):
            problems.append(f"the epochs of the first divergence ({first.get('epoch')} vs {first['epoch_b']}) unnamed")
    return problems


def _samplers(run) -> list | None:
    """Every rank's recorded sampler facts, or None where a rank recorded none (or meta.json is unreadable)."""
    try:
        ranks = read_meta(run).get("ranks") or []
    except (OSError, ValueError, AttributeError):
        return None
    found = [facts.get("sampler") if isinstance(facts, dict) else None for facts in ranks]
    return found if found and all(found) else None


def check_story(d: Finding, run_a, run_b, first: dict | None) -> None:
    """Under DDP_PARITY_CHECK_STORY: log a broken story to that file and raise."""
    log = os.environ.get(STORY_CHECK_ENV)
    if not log:
        return
    problems = story_problems(d, run_a, run_b, first)
    if not problems:
        return
    entry = {"runs": [str(run_a), str(run_b)], "category": d.category, "problems": problems}
    with open(log, "a") as f:
        f.write(json.dumps(entry) + "\n")
    raise AssertionError(f"inconsistent diagnosis of {run_a} vs {run_b}: {'; '.join(problems)}")
