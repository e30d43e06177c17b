"""Proof by replay of one optimizer update (issue 46, item 5).

    replay_update(run_a, run_b, rank, step) -> dict | None

Both runs dumped what their step `step` consumed (ddp_parity/update_dump.py: the parameters before, the
gradients as the step saw them, the optimizer's state_dict with each group's hyperparameters, the
parameters after). Each side's step is first re-applied offline as it was: it must give that side's own
parameters bitwise, or the replay proves nothing and says so. Then side b's step is re-applied with one
ingredient taken from side a (the gradients, the parameters before, the optimizer state, one
hyperparameter of the groups): the ingredient whose swap gives a's parameters bitwise is the cause.
Where none does alone, that is said. Nothing here runs a program: the dumps are loaded and stepped.
"""

from __future__ import annotations

import copy

import torch

from ddp_parity.update_dump import dump_path

WHOLE = ("grads", "params_before", "state")  # the ingredients other than the groups' hyperparameters


def load_dump(run, rank, step: int) -> dict | None:
    path = dump_path(run, rank, step)
    if not path.is_file():
        return None
    try:
        return torch.load(path, weights_only=False)
    except Exception:  # a damaged dump is no proof: the finding stands on its records
        return None


def apply(dump: dict) -> list[torch.Tensor] | None:
    """The parameters `dump`'s optimizer step gives when re-applied offline, or None where it cannot be."""
    optimizer_class = getattr(torch.optim, dump.get("class") or "", None)
    if optimizer_class is None:
        return None
    params = [t.clone() for t in dump["params_before"]]
    groups, start = [], 0
    for size in dump["group_sizes"]:
        groups.append({"params": params[start : start + size]})
        start += size
    try:
        optimizer = optimizer_class(groups)
        optimizer.load_state_dict(copy.deepcopy(dump["state"]))  # the state and every group's hyperparameters
        for p, g in zip(params, dump["grads"]):
            p.grad = None if g is None else g.clone()
        with torch.no_grad():
            optimizer.step()
    except Exception:
        return None
    return params


def _same(xs, ys) -> bool:
    return xs is not None and len(xs) == len(ys) and all(torch.equal(x, y) for x, y in zip(xs, ys))


def _swapped(b: dict, a: dict, ingredient: str) -> dict:
    out = {**b, "state": copy.deepcopy(b["state"])}
    if ingredient == "state":
        out["state"]["state"] = copy.deepcopy(a["state"]["state"])
    elif ingredient in WHOLE:
        out[ingredient] = a[ingredient]
    else:
        for mine, theirs in zip(out["state"]["param_groups"], a["state"]["param_groups"]):
            mine[ingredient] = theirs.get(ingredient)
    return out


def _ingredients(a: dict, b: dict) -> list[str]:
    """What differs between the two dumps: the whole ingredients, then each group hyperparameter."""
    found = [name for name in WHOLE if name != "state" and not _same(a[name], b[name])]
    if repr(a["state"]["state"]) != repr(b["state"]["state"]):
        found.append("state")
    keys = {k for g in a["state"]["param_groups"] + b["state"]["param_groups"] for k in g if k != "params"}
    for key in sorted(keys):
        pairs = zip(a["state"]["param_groups"], b["state"]["param_groups"])
        if any(repr(ga.get(key)) != repr(gb.get(key)) for ga, gb in pairs):
            found.append(key)
    return found


def replay_update(run_a, run_b, rank, step: int) -> dict | None:
    """{step, rank, reproduced, differing, reconciles}: None where a side dumped no update of `step`."""
    a, b = load_dump(run_a, rank, step), load_dump(run_b, rank, step)
    if a is None or b is None:
        return None
    out = {"step": step, "rank": rank, "reproduced": False, "differing": [], "reconciles": []}
    comparable = a["class"] == b["class"] and a["group_sizes"] == b["group_sizes"]
    comparable = comparable and [t.shape for t in a["params_before"]] == [t.shape for t in b["params_before"]]
    if not comparable:
        out["why"] = "the two optimizers differ in class or in their parameters' groups or shapes"
        return out
    if not (_same(apply(a), a["params_after"]) and _same(apply(b), b["params_after"])):
        out["why"] = "a side's step re-applied offline does not give its own parameters (another kernel)"
        return out
    out["reproduced"] = True
    out["differing"] = _ingredients(a, b)
    out["reconciles"] = [i for i in out["differing"] if _same(apply(_swapped(b, a, i)), a["params_after"])]
    return out


def replay_sentence(replay: dict, names: tuple[str, str]) -> str:
    """The finding's words for a replay: what reconciled the two, or that nothing alone did."""
    a, b = names
    step = replay["step"]
    if not replay["reproduced"]:
        return f"The update of step {step} was dumped on both sides, but cannot be replayed: {replay.get('why')}."
    if replay["reconciles"]:
        swaps = " or ".join(f"{a}'s {i}" for i in replay["reconciles"])
        return f"Replayed: with {swaps}, {b}'s step {step} gives {a}'s parameters bitwise."
    differing = ", ".join(replay["differing"]) or "nothing the dumps hold"
    return (
        f"Replayed step {step}: no single ingredient swapped from {a} into {b}'s step gives {a}'s parameters "
        f"(differing: {differing})."
    )
