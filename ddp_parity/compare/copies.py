"""The copies of the trained model a run keeps beside it (an EMA), compared step by step: the hooks of
`ddp-parity record` digest each copy they found (its first and last parameter, as `param_digest` does) after every
optimizer step, in the record's `copy_digest`. A copy takes no part in the training, so a copy apart never changes
the verdict; where the training is equal it is a warning (`copy_differs`): the program's EMA, and every snapshot
or sample made from it, differ while the model does not. A step's digest is taken at its optimizer step, before the
update that follows it, so the last update is read from each rank's hooks facts (`copies_final_sha256`, the whole
state of each copy at the end).

A difference at the first step both sides recorded, nothing compared before it, is the copy's start as much as its
update (step 1's digest holds the copy before any update that follows an optimizer step): it is said as either,
with what the records hold of the start, the copy's initial tensors against the trained model's
(`init_parameters_by_name`, where the copy is inside the module the hooks recorded). A save holding a copy is
matched against the copy's own states of the steps before through the copy's digest at the save
(`copies_at_save`, hooks/checkpoints.py): a save one update behind is said as a save before that step's update.
"""

from __future__ import annotations

from ddp_parity.trace_files import TraceFormatError, fact_items, iter_records, read_hook_facts, trace_ranks

KEY = "copy_digest"
AT_SAVE = "copies_at_save"  # a checkpoint item's: the copies' digest (as KEY's) when the save ran

UPDATE_DIFFERS = (
    "its update differs (when it runs against the optimizer step: per micro-batch or per step, before or after a "
    "change made to the weights outside the optimizer, or not after the last step; its decay; the step count its "
    "decay reads). Every snapshot or sample made from it differs too. Fix: update the copy at the same point of each "
    "optimizer step on both sides, from the same weights, with the same decay."
)
START_OR_UPDATE = (
    "that step's digest is the copy before any update that follows an optimizer step, and nothing was compared "
    "before it, so what differs is its start (a copy built by its own construction, its own random draws, instead "
    "of copied from the trained model; or copied from other weights: a rank's own before DDP's broadcast, the model "
    "before a checkpoint was loaded) or an update run before the first optimizer step."
)
START_UNTOLD = (
    " The records hold no copy's start beside the model's on both sides (the copy is in no module the hooks recorded "
    "at the start) to tell which: compare the copy with the trained model before the first step on each side "
    "(torch.equal on each parameter). Every snapshot or sample made from it differs too."
)
START_FIX = (
    " Every snapshot or sample made from it differs too. Fix: make the copy from the trained model's weights on both "
    "sides (copy.deepcopy(model), or ema.load_state_dict(model.state_dict()) once the model is built and its weights "
    "are final, after DDP's broadcast or a checkpoint's load), not by a construction of its own."
)


def copy_differences(run_a, run_b, names) -> list[dict]:
    """Per rank, the first step whose copy digests both sides recorded (the same number of copies) differ."""
    out = []
    for rank in sorted(set(_ranks(run_a)) & set(_ranks(run_b))):
        parted = first_copy_difference(run_a, run_b, rank)
        why = UPDATE_DIFFERS
        if parted is not None:
            step, compared = parted
            where = f"after step {step} on {names[0]} and {names[1]}, equal after the {compared} step(s) before it"
            if compared == 0:  # the first digest compared: the copy's start, or an update before that step
                where = f"at step {step} on {names[0]} and {names[1]}, the first step both recorded"
                why = START_OR_UPDATE + start_words([copy_start(run, rank) for run in (run_a, run_b)], names)
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
                    f"values {where}, while the training is equal: {why}"
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


def first_copy_difference(run_a, run_b, rank) -> tuple[int, int] | None:
    """(the first step whose copy digests both sides recorded differ, how many steps compared equal before it)."""
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


# ---------------------------------------------------------------------------- the copy's start


def copy_start(run, rank) -> dict | None:
    """Where the module the hooks recorded at the start holds a copy of the trained model (parameters in no param
    group laid out as the trained ones under a prefix of their own: `net_g_ema.` beside `net_g.`): {copy, model,
    apart, of}, the two prefixes and how many of the copy's initial tensors differ from the model's
    (`init_parameters_by_name`). None where the records hold no such copy (a copy kept outside that module)."""
    facts = read_hook_facts(run, rank)
    init, trained = facts.get("init_parameters_by_name"), _trained_names(facts)
    if not isinstance(init, dict) or not trained or not trained <= set(init):
        return None
    model = _common_prefix(trained)
    tails = sorted(name[len(model) :] for name in trained)
    for prefix in _copy_prefixes(init, trained, tails):
        apart = sum(init[prefix + tail] != init[model + tail] for tail in tails)
        return {"copy": prefix, "model": model, "apart": apart, "of": len(tails)}
    return None


def _trained_names(facts: dict) -> set[str]:
    """The parameter names in the param groups of the optimizers the hooks saw built."""
    built = facts.get("optimizer_built")
    groups = (
        [g for o in built if isinstance(o, dict) for g in o.get("param_groups") or []]
        if isinstance(built, list)
        else []
    )
    return {n for g in groups if isinstance(g, dict) for n in g.get("params") or [] if isinstance(n, str)}


def _common_prefix(names: set[str]) -> str:
    """The dotted beginning every name shares (`net_g.`), never a whole name."""
    parts = [name.split(".")[:-1] for name in names]
    common = []
    for column in zip(*parts):
        if len(set(column)) > 1:
            break
        common.append(column[0])
    return "".join(part + "." for part in common)


def _copy_prefixes(init: dict, trained: set[str], tails: list[str]) -> list[str]:
    """The prefixes under which every trained tail is held by a parameter in no param group. Found from one tail
    (the first), so that a model of many tensors is read once."""
    anchor = tails[0]
    found = []
    for name in init:
        if name in trained or not name.endswith("." + anchor):
            continue
        prefix = name[: -len(anchor)]
        if all(prefix + tail in init and prefix + tail not in trained for tail in tails):
            found.append(prefix)
    return sorted(found)


def start_words(starts: list[dict | None], names) -> str:
    """What the records hold of the copies' start (each side's `copy_start`): a copy whose initial tensors differ
    from the model's is named (built by its own construction); copies both holding the model's leave the update
    before the first step; none recorded on a side leaves both, and how to tell them apart."""
    built = [i for i in (0, 1) if starts[i] is not None and starts[i]["apart"]]
    if built:
        said = "; ".join(
            f"{names[i]}'s copy ({starts[i]['copy']}*) holds other values than the model ({starts[i]['model']}*) in "
            f"{starts[i]['apart']} of its {starts[i]['of']} tensor(s)"
            for i in built
        )
        alike = [names[i] for i in (0, 1) if starts[i] is not None and not starts[i]["apart"]]
        unseen = [names[i] for i in (0, 1) if starts[i] is None]
        held = f"; {alike[0]}'s holds the model's" if alike else ""
        held += f"; {unseen[0]}'s is in no module the hooks recorded at the start" if unseen else ""
        return (
            f" The records tell the start (init_parameters_by_name, the tensors at the start): {said}{held}. The "
            f"start differs: the copy on {' and '.join(names[i] for i in built)} is built by a construction of its "
            f"own, not copied from the trained model." + START_FIX
        )
    if all(start is not None for start in starts):
        return (
            " Both sides' copies hold the trained model's values at the start (init_parameters_by_name), and the "
            "models are equal: the copy changed before the first optimizer step on one side (an update run before "
            "it, or the copy made again after the start was recorded). Every snapshot or sample made from it "
            "differs too."
        )
    return START_UNTOLD


# ---------------------------------------------------------------------------- the copy at a save


def saved_behind(run, rank, step: int) -> int | None:
    """How many updates behind its copies were when this side saved after `step`: n where their digest at the save
    (`copies_at_save`) is their state after step `step - n` (the copy_digest of step `step - n + 1`, taken before
    that step's update), 0 where it is their state after `step`; None where the save recorded none or matches none
    of the states recorded."""
    saves = fact_items(read_hook_facts(run, rank), "checkpoints")
    at_save = [c[AT_SAVE] for c in saves if c.get("after_step") == step and isinstance(c.get(AT_SAVE), list)]
    if not at_save:
        return None
    try:
        states = {r.get("step"): r.get(KEY) for r in iter_records(run, rank) if isinstance(r.get(KEY), list)}
    except (TraceFormatError, OSError):
        return None
    if states.get(step + 1) == at_save[0]:
        return 0
    return next((n for n in range(1, step + 1) if states.get(step - n + 1) == at_save[0]), None)
