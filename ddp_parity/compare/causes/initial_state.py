"""The initial state as `ddp-parity record` takes it when the program builds DDP (meta.json
ranks[r]): `init_params_sha256` covers the parameters and the buffers, `init_parameters_sha256` the
parameters alone and `init_buffers_sha256` each buffer by name. Two initial states apart only by
buffers one side holds (a feature table kept with register_buffer), with the parameters and every
buffer both hold equal, are not "other initial weights": the names of the state differ, which the
final state shows again (`step_count.state_names`)."""

from __future__ import annotations

from ddp_parity.compare import pairing
from ddp_parity.compare.causes.base import Context
from ddp_parity.compare.comparator import match_keys


def init_finding(ctx: Context) -> dict | None:
    """{across, within, rank0_differs, rank}: the ranks whose initial state differs across the sides, whether
    a side's ranks built different ones, and the rank to name; None where nothing differs, or where the
    states differ only by buffers held on one side (`init_note` then says so beside a later finding)."""
    if "init" in ctx.cache:
        return ctx.cache["init"]
    init_a, init_b = init_digests(ctx.meta("a")), init_digests(ctx.meta("b"))
    across = [r for r in sorted(set(init_a) & set(init_b)) if init_a[r] and init_b[r] and init_a[r] != init_b[r]]
    names = {r: said for r in across if (said := apart_by_names_only(ctx, r)) is not None}
    if names:
        ctx.cache["init_note"] = names[min(names)]
        across = [r for r in across if r not in names]
    within = {side: len({d for d in init.values() if d}) > 1 for side, init in (("a", init_a), ("b", init_b))}
    result = None
    if across or any(within.values()):
        rank = (
            across[0]
            if across
            else next(
                r
                for init in (init_a, init_b)
                if len(set(init.values())) > 1
                for r in sorted(init)
                if init[r] != init.get(0)
            )
        )
        result = {"across": across, "within": within, "rank0_differs": 0 in across, "rank": rank}
    ctx.cache["init"] = result
    return result


def init_digests(meta: dict) -> dict:
    return {f.get("rank", r): f.get("init_params_sha256") for r, f in enumerate(meta.get("ranks") or [])}


def init_apart(ctx: Context, rank) -> bool | None:
    """Whether `rank`'s recorded init digests differ across the sides; None where a side recorded none."""
    digests = [init_digests(ctx.meta(s)).get(rank) for s in ("a", "b")]
    if None in digests:
        return None
    # apart only by what one side holds alone (a frozen EMA copy, a buffer): the weights both hold are equal
    return digests[0] != digests[1] and apart_by_names_only(ctx, rank) is None


def apart_by_names_only(ctx: Context, rank) -> str | None:
    """The note where rank's initial states differ only by tensors one side holds: buffers, or parameters
    its records prove untrained (a frozen EMA teacher beside the student); None where a parameter or a
    buffer both hold differs, or a side did not record them."""
    facts = [_rank_facts(ctx.meta(s), rank) for s in ("a", "b")]
    params = [f.get("init_parameters_sha256") for f in facts]
    buffers = [f.get("init_buffers_sha256") for f in facts]
    if params[0] is None or not all(isinstance(b, dict) for b in buffers):
        return None
    common = set(buffers[0]) & set(buffers[1])
    if any(buffers[0][name] != buffers[1][name] for name in common):
        return None
    if params[0] != params[1]:
        return _apart_by_untrained_parameters(ctx, [f.get("init_parameters_by_name") for f in facts])
    only = {s: sorted(set(b) - common) for s, b in zip(("a", "b"), buffers)}
    said = "; ".join(f"{only[s][:5]} on {ctx.label(s)} only" for s in ("a", "b") if only[s])
    return NOTE.format(names=said) if said else None


def _apart_by_untrained_parameters(ctx: Context, by_name: list) -> str | None:
    """NOTE_PARAMETERS where every parameter both initial states hold (paired by name as the final
    states are) is equal and those one side holds alone are untrained by its records, NOTE_COVERED where some
    of them are trained (the sides recorded other modules); None where a parameter both hold differs."""
    if not all(isinstance(d, dict) for d in by_name):
        return None  # an older trace, or a program's own recorder: the parameters are not known by name
    metas = ctx.meta("a"), ctx.meta("b")
    trained = pairing.optimizer_names(metas[0]), pairing.optimizer_names(metas[1])
    pairs = match_keys(list(by_name[0]), list(by_name[1]), None, trained)
    only = {"a": pairs.pop("__only_a__"), "b": pairs.pop("__only_b__")}
    if not pairs or any(by_name[0][ka] != by_name[1][kb] for ka, kb in pairs.values()):
        return None
    said = "; ".join(f"{only[s][:5]} on {ctx.label(s)} only" for s in ("a", "b") if only[s])
    if any(pairing.untrained_alone(only[s], m)[1] for s, m in zip(("a", "b"), metas)):
        # one side's records cover parameters the other's do not (a program of several DDP wrappers records
        # its first at construction, a LightningModule whole): no weight both hold differs
        return NOTE_COVERED.format(names=said, count=len(pairs))
    return NOTE_PARAMETERS.format(names=said, count=len(pairs))


def _rank_facts(meta: dict, rank) -> dict:
    ranks = meta.get("ranks") if isinstance(meta, dict) else None
    found = next((f for i, f in enumerate(ranks or []) if isinstance(f, dict) and f.get("rank", i) == rank), None)
    return found or {}


NOTE_PARAMETERS = (
    "init_params_sha256 differs, but only by parameters one side holds untrained ({names}); the {count} "
    "parameters both hold (init_parameters_by_name) are equal: the modules recorded differ, not the weights"
)
NOTE_COVERED = (
    "init_params_sha256 differs, but the initial states cover other parameters ({names}); the {count} parameters "
    "both hold (init_parameters_by_name) are equal: what each side recorded differs, not the weights both hold"
)
NOTE = (
    "init_params_sha256 differs, but only by buffers one side holds ({names}); the initial parameters "
    "(init_parameters_sha256) and every buffer both hold are equal: the state's names differ, not the weights"
)
