"""Like paired with like: which of the two sides' parameters are the same parameters, when the
modules the sides recorded hold other sets. A raw loop records the student DDP wraps; its Lightning
port records the LightningModule, which holds the student and a frozen EMA teacher (or a loss module
with parameters, an unused head). The parameters both hold under one name (after the wrapper and
attribute prefixes, comparator.match_keys) are compared; those one side holds alone are named, and
told apart by what the records say of them: trained by that side's optimizer (a real difference: a
setup one), or untrained (requires_grad False, or in no param group), which changes the training
only through what both sides hold (the loss, the shared parameters), where it is compared.

The per-step `param_digest` sums a side's first and last parameter (meta.json `param_digest_names`):
where the sides' digests cover other parameters, only the elements that name the same parameter are
compared, and the report says which were left out (`narrowed_digests`)."""

from __future__ import annotations

from collections.abc import Iterator

from ddp_parity.fingerprints import unowned_parameter_shape


def recorded_optimizer_names(meta: dict | None) -> set[str] | None:
    """The names of the parameters in the optimizer a side's steps record (meta.json `optimizer`, named), None
    unknown."""
    optimizer = (meta or {}).get("optimizer")
    if not isinstance(optimizer, dict) or not optimizer.get("named"):
        return None
    groups = optimizer.get("param_groups")
    return _group_names(groups) if isinstance(groups, list) else None


def optimizer_names(meta: dict | None) -> set[str] | None:
    """The names of the parameters a side's optimizers train: the recorded one's, and every other optimizer's the
    hooks saw built (`optimizer_built`: a GAN's generator is in the optimizer not recorded), None unknown."""
    names = recorded_optimizer_names(meta)
    built = (meta or {}).get("optimizer_built")
    for other in built if names is not None and isinstance(built, list) else []:
        if isinstance(other, dict) and other.get("named") and isinstance(other.get("param_groups"), list):
            names |= _group_names(other["param_groups"])
    return names


def _group_names(groups: list) -> set[str]:
    return {p for g in groups if isinstance(g, dict) for p in g.get("params") or [] if isinstance(p, str)}


def param_order(optimizer) -> list[str]:
    """The parameters of a recorded optimizer (meta.json `optimizer`) in its param groups' order: the order its
    step iterates them, and the order the hooks sum the gradient norm in where no clip measured it."""
    if not isinstance(optimizer, dict):
        return []
    return [str(n) for g in optimizer.get("param_groups") or [] if isinstance(g, dict) for n in g.get("params") or []]


def parameter_names(meta: dict | None) -> set[str] | None:
    """The names a side's records call parameters (the sketch's rows, the frozen ones), None unknown."""
    meta = meta or {}
    layers = meta.get("layers") if isinstance(meta.get("layers"), dict) else {}
    frozen = meta.get("params_frozen")
    if not isinstance(frozen, list):
        return None  # an older trace: what is frozen was not recorded
    return {n for n in [*(layers.get("names") or []), *frozen] if isinstance(n, str)}


def untrained_alone(names: list[str], meta: dict | None) -> tuple[list[str], list[str]]:
    """(the parameters among `names` no optimizer of that side trains, the rest): a name is untrained
    where the records show it is a parameter that requires no gradient or that no param group holds.
    A buffer, or a name the records cannot place, is in the rest (a tensor one side holds alone that
    the records cannot prove untrained stays a difference)."""
    trained, params = optimizer_names(meta), parameter_names(meta)
    frozen = set((meta or {}).get("params_frozen") or [])
    if trained is None or params is None:
        return [], list(names)
    untrained = [n for n in names if n in frozen or (n in params and n not in trained)]
    return untrained, [n for n in names if n not in untrained]


def buffers_alone(names: list[str], meta: dict | None) -> tuple[list[str], list[str]]:
    """(the names among `names` that side's records prove are no parameter: buffers, such as a loss module's
    running center or a queue the other side keeps outside its recorded model; the rest). Nothing is proved
    where the records do not list the side's parameters (an older trace)."""
    layers = (meta or {}).get("layers")
    params = parameter_names(meta)
    if params is None or not isinstance(layers, dict) or not isinstance(layers.get("names"), list):
        return [], list(names)  # the frozen ones alone do not list every parameter
    params |= optimizer_names(meta) or set()
    return [n for n in names if n not in params], [n for n in names if n in params]


def unowned_elsewhere(names: list[str], shapes: dict, other: dict | None) -> tuple[list[str], list[str]]:
    """(the tensors among `names`, held by this side alone, that the other side's optimizer trains outside the
    model that side recorded: one each of its optimizer's parameters named by place and shape, not by the
    model, `unowned_parameter_name`, of the same shape; the rest). That side's recording holds a part of what
    it trains, and these tensors are unrecorded there, not missing from its training."""
    free: dict[tuple, int] = {}
    for name in _all_optimizer_params(other):
        shape = unowned_parameter_shape(name)
        if shape is not None:
            free[shape] = free.get(shape, 0) + 1
    matched = []
    for name in names:
        shape = shapes.get(name)
        if free.get(shape, 0) > 0:
            free[shape] -= 1
            matched.append(name)
    return matched, [n for n in names if n not in matched]


def _all_optimizer_params(meta: dict | None) -> list[str]:
    """Every parameter name of a side's optimizers (the recorded one's and the built ones', one list each:
    the recorded optimizer is among the built ones), from the fullest of those lists."""
    meta = meta or {}
    lists = [param_order(meta.get("optimizer"))]
    built = meta.get("optimizer_built")
    lists += [param_order(o) for o in built] if isinstance(built, list) else []
    return max(lists, key=len)


def partial_model_note(side_name: str, other_name: str, names: list[str], shapes: dict, path: str) -> str:
    """The `one_side_only` note for tensors `other_name`'s optimizer trains outside the model it recorded."""
    shown = ", ".join(f"{n} {list(shapes[n])}" for n in names[:6]) + (
        f" and {len(names) - 6} more" if len(names) > 6 else ""
    )
    under = f" (its final tensors are {side_name}'s under `{path}`: they were paired so)" if path else ""
    return (
        f"{other_name} recorded a part of the model its optimizer trains{under}: its optimizer also trains "
        f"{len(names)} tensor(s) the recorded module does not own, named by shape in its meta.json `optimizer_built`, "
        f"the shapes of {len(names)} on {side_name} only: {shown}. They are unrecorded on {other_name}, not compared; "
        f"to compare them, record on {other_name} the module that owns every parameter its optimizer trains (the "
        "module whose parameters() built it: the one an explicit recorder's steps and finish() are given)"
    )


def buffers_note(side_name: str, names: list[str]) -> str:
    """The `one_side_only` note for buffers one final state holds alone."""
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return (
        f"{len(names)} buffer(s) on {side_name} only, no parameter: {shown}. They were not compared (the other side "
        "keeps them outside the model it records, or not at all); what they change (a loss's running center, a "
        "queue, a BatchNorm statistic used in training) is compared in what both sides hold (losses, the shared "
        "parameters), and a checkpoint's copy of them in its contents"
    )


def alone_note(side_name: str, names: list[str], meta: dict | None) -> str:
    """The `one_side_only` note: how many, which, and what the records say of them (frozen, in no param group)."""
    frozen, trained = set((meta or {}).get("params_frozen") or []), optimizer_names(meta) or set()
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    said = [_said_of(n, frozen, trained) for n in names]
    how = said[0] if len(set(said)) == 1 else "requires_grad False, or in no param group of its optimizer"
    return (
        f"{len(names)} parameter(s) on {side_name} only, untrained ({how}): {shown}. They were not compared; "
        "what they change in the training (a teacher's targets, a loss module's weights) is compared in what both "
        "sides hold (losses, the shared parameters), but their own values are not: an EMA copy kept there and "
        "saved is compared only where a checkpoint both sides save holds it (its contents)"
    )


def _said_of(name: str, frozen: set, trained: set) -> str:
    if name in frozen:
        return "requires_grad False" if name in trained else "requires_grad False and in no param group"
    return "in no param group"


def digest_positions(meta_a: dict | None, meta_b: dict | None, common: dict[str, str]) -> list[tuple[int, int]] | None:
    """[(position in a's param_digest, position in b's)] that digest the same parameter, None where both
    digest the same parameters in the same order or a side did not say which (older traces: compared
    whole). `common`: {name on a side ("a:" / "b:" + name): the name the final states' pairing gives it}."""
    names_a, names_b = ((m or {}).get("param_digest_names") for m in (meta_a, meta_b))
    if not isinstance(names_a, list) or not isinstance(names_b, list) or not names_a or not names_b:
        return None
    mapped_a = [common.get(f"a:{n}", n) for n in names_a]  # a name the final states do not pair: as it is
    mapped_b = [common.get(f"b:{n}", n) for n in names_b]
    if mapped_a == mapped_b:
        return None
    shared = [(i, j) for i, n in enumerate(mapped_a) for j, m in enumerate(mapped_b) if n == m]
    # a parameter no optimizer trains (a frozen positional embedding) is equal after every step whatever the
    # training did: a digest narrowed to it alone would prove nothing about the step, so it is not kept
    return [(i, j) for i, j in shared if _trained(names_a[i], meta_a) and _trained(names_b[j], meta_b)]


def _trained(name: str, meta: dict | None) -> bool:
    """False where the records show no optimizer trains it: frozen (whether or not the optimizer's names are
    known), or a parameter no param group holds."""
    return name not in ((meta or {}).get("params_frozen") or []) and not untrained_alone([name], meta)[0]


def narrowed(streams: dict, positions: list[tuple[int, int]]) -> dict:
    """Each side's records with `param_digest` cut to the elements that digest a shared parameter
    (none left: the key goes, and the digest counts as unrecorded)."""
    picks = {"a": [i for i, _ in positions], "b": [j for _, j in positions]}
    return {side: {r: _narrowed(it, picks[side]) for r, it in per.items()} for side, per in streams.items()}


def _narrowed(records, keep: list[int]) -> Iterator[dict]:
    for record in records:
        digest = record.get("param_digest")
        if isinstance(digest, list):
            record = {k: v for k, v in record.items() if k != "param_digest"}
            if keep:
                record["param_digest"] = [digest[i] for i in keep if i < len(digest)]
        yield record


def narrowed_note(meta_a: dict, meta_b: dict, names: dict, positions: list[tuple[int, int]]) -> str:
    kept = [meta_a["param_digest_names"][i] for i, _ in positions]
    said = (
        f"compared on {', '.join(kept)} only"
        if kept
        else "not compared at all (no parameter both digests hold is one an optimizer trains)"
    )
    return (
        f"param_digest sums other parameters on the two sides ({names['a']}: {meta_a['param_digest_names']}; "
        f"{names['b']}: {meta_b['param_digest_names']}; the recorded modules hold other parameter sets): the "
        f"per-step parameter digest was {said}. The verdict rests on fewer parameter facts per step; the final "
        "tensors both sides hold are compared whole"
    )
