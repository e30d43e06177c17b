"""What the hooks of `ddp-parity record` saw besides the step's numbers, read for the diagnosis:

- the random generators' digests at each step's start (a record's `rng`): where the runs part at step k
  in the samples, the batch or the loss, and the digests differ at step k's start while they agreed at
  step k-1's (or k is 1), the finding says so, with the seeds recorded before step k; where torch's
  global generator is recorded equal at step k's start, no cause blames its state (`global_rng_equal`);
- the program's own collectives (a record's `collectives`): where they differ at or before the step
  the runs part at, the finding shows both sides' (a hand-written gradient all_reduce on one side only,
  another reduce op); the gathers of a step (`gathers_apart`) tell forward.py's `loss.gathered` that a loss was
  computed over another gathered batch;
- the checkpoints and what was restored (rank{r}.hooks.json `checkpoints`, `restores`): a resume where
  one side restores less is said with the kinds missing; a save on every rank against rank 0 only is a
  note; where the training is bitwise equal through a step after which both sides saved, tensors paired by
  their state, then by names that end alike, with other values are said (`checkpoint_contents`): a state kept
  beside the model (an EMA) saved at another moment, which no step record holds; so are a state one side saves
  alone, a file kept from an earlier save beside the current one (a best-so-far file, not a late save), and the
  param groups' or schedulers' saved settings apart.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

from ddp_parity.compare.causes.base import Context
from ddp_parity.compare.causes.initial_state import init_apart, init_digests
from ddp_parity.compare.collectives import REDUCTIONS, made_by_program
from ddp_parity.compare.copies import (
    START_OR_UPDATE,
    copies_equal_after,
    copy_start,
    first_copy_difference,
    saved_behind,
    start_words,
)
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.walk import records_of
from ddp_parity.trace_files import CHECKPOINT_SAVE_OPS, fact_items, read_hook_facts, trace_ranks

GLOBAL = ("torch", "cuda")  # the generators torch's random layers and samplers draw from
RESTORED = ("model", "optimizer", "scheduler", "grad_scaler", "rng")
RNG_QUANTITIES = ("samples", "batch", "loss")


def _rng_by_step(ctx: Context, side: str, rank) -> dict[int, dict]:
    key = ("rng", side, rank)
    if key not in ctx.cache:
        ctx.cache[key] = {
            r["step"]: r["rng"]
            for r in records_of(ctx.run(side), rank)
            if isinstance(r.get("rng"), dict) and isinstance(r.get("step"), int)
        }
    return ctx.cache[key]


def _used(digests: dict[int, dict], name: str) -> bool:
    """A generator the program draws from: its digest changes over the recorded steps."""
    return len({str(d.get(name)) for d in digests.values() if name in d}) > 1


def rng_at(ctx: Context, step, rank) -> dict | None:
    """Both sides' digests at `step`'s start on `rank`, compared: {generators: {name: (a, b)}, differ:
    [names]}; None where a side did not record them there, or took them at another moment."""
    sides = [_rng_by_step(ctx, s, rank) for s in ("a", "b")]
    a, b = (d.get(step) for d in sides)
    if a is None or b is None or a.get("at") != b.get("at"):
        return None
    names = [n for n in a if n != "at" and n in b and (n in GLOBAL or _used(sides[0], n) or _used(sides[1], n))]
    return {"generators": {n: (a[n], b[n]) for n in names}, "differ": [n for n in names if a[n] != b[n]]}


def generator_moves(ctx: Context, step, rank) -> dict[str, tuple[bool, bool]]:
    """{generator: (moved on a, moved on b)} between `step - 1`'s start and `step`'s on `rank`, for each generator
    both sides took at the same moment at both steps and the program draws from (or torch's global one); {} where
    a side did not record them there."""
    sides = [_rng_by_step(ctx, s, rank) for s in ("a", "b")]
    takes = [(d.get(step - 1), d.get(step)) for d in sides]
    if any(x is None for pair in takes for x in pair) or len({x.get("at") for pair in takes for x in pair}) != 1:
        return {}
    names = [n for n in takes[0][1] if n != "at" and all(n in x for pair in takes for x in pair)]
    names = [n for n in names if n in GLOBAL or _used(sides[0], n) or _used(sides[1], n)]
    return {n: tuple(before[n] != now[n] for before, now in takes) for n in names}


def global_rng_equal(ctx: Context, step=None, rank=None) -> bool:
    """torch's global generators (CPU, and CUDA where both recorded it) are recorded equal at the first
    divergence's step start (or `step`'s): no cause may blame their state there."""
    first = ctx.earliest or {}
    step = first.get("step") if step is None else step
    rank = (first.get("rank") if isinstance(first.get("rank"), int) else 0) if rank is None else rank
    try:
        compared = rng_at(ctx, step, rank)
    except (TypeError, ValueError, OSError, AttributeError):  # a run's files unreadable as records, or none
        return False
    return compared is not None and "torch" in compared["generators"] and not set(compared["differ"]) & set(GLOBAL)


def global_rng_moved_apart(ctx: Context, step: int, rank) -> bool:
    """torch's global generator recorded moving otherwise on the two sides up to `step`'s start: apart there after
    agreeing at the step before's (or at step 1, apart since the seeds), or moved on one side only since the step
    before. False where a side did not record it: only a recorded move may be blamed (a loader's base-seed draw)."""
    sides = [_rng_by_step(ctx, s, rank) for s in ("a", "b")]
    now = [d.get(step, {}).get("torch") for d in sides]
    if None in now:
        return False
    if step == 1:
        return now[0] != now[1]
    before = [d.get(step - 1, {}).get("torch") for d in sides]
    if None in before:
        return False
    moved = [b != n for b, n in zip(before, now)]
    return moved[0] != moved[1] or (before[0] == before[1] and now[0] != now[1])


def global_rng_drawn(ctx: Context, side: str, rank) -> bool:
    """torch's global generator recorded moving between `side`'s steps on `rank`: something in its loop draws from
    it (a dataset that draws its samples, a random layer); never said of a side that did not record it."""
    return _used(_rng_by_step(ctx, side, rank), "torch")


def global_rng_drawn_near(ctx: Context, step: int, rank) -> bool:
    """Something drew from torch's global generator around `step` on some side: its digest moved from the step
    before's start to this one's, or from this one's to the next's (a draw inside the step). True where neither side
    recorded the digests, or a side has none at the step before's start (step 1: what was drawn since the seeds is
    unrecorded: nothing is silenced); False where both did and no digest moved there, so no
    draw, however the generators were left before, reached that step's training."""
    sides = [_rng_by_step(ctx, s, rank) for s in ("a", "b")]
    if not any(sides):
        return True
    if any(digests.get(step - 1, {}).get("torch") is None for digests in sides):
        return True  # no digest before this step's start (step 1: what was drawn since the seeds is unrecorded)
    for digests in sides:
        around = [digests.get(k, {}).get("torch") for k in (step - 1, step, step + 1)]
        if any(x is not None and y is not None and x != y for x, y in zip(around, around[1:])):
            return True
    return False


def global_rng_drawn_within(ctx: Context, step: int, rank) -> bool | None:
    """Something drew from torch's global generator inside `step` on some side: its digest moved from that step's
    start to the next's (a dropout mask, noise, a sampled action). False where both sides recorded both digests and
    neither moved: the step's forward and loss drew nothing. None where a digest is unrecorded there."""
    sides = [_rng_by_step(ctx, s, rank) for s in ("a", "b")]
    pairs = [[digests.get(k, {}).get("torch") for k in (step, step + 1)] for digests in sides]
    if any(None in pair for pair in pairs):
        return None
    return any(start != end for start, end in pairs)


def global_rng_parts(ctx: Context) -> bool:
    """The runs part where torch's global generator's digests part (rng_parting)."""
    try:
        parted = rng_parting(ctx)
    except (TypeError, ValueError, OSError, AttributeError):
        return False
    return parted is not None and bool(set(parted[0]["differ"]) & set(GLOBAL))


# the hooks' list of seeds of each generator a digest names (torch.manual_seed's, np.random.seed's, random.seed's)
SEED_LISTS = {"torch": "seeds", "numpy": "numpy_seeds", "random": "random_seeds"}


def seeds_before(ctx: Context, side: str, rank, step, generator: str = "torch") -> list:
    items = fact_items(read_hook_facts(ctx.run(side), rank), SEED_LISTS[generator])
    return [i.get("seed") for i in items if isinstance(i.get("before_step"), int) and i["before_step"] <= step]


def seeds_words(ctx: Context, rank, step, generators) -> str:
    """torch's seeds recorded up to `step` on each side, and those of each other generator in `generators` that the
    hooks record seeds of: "torch's raw [1]; lightning [1]; numpy's raw [0]; lightning [1]"."""
    parts = []
    for name in ("torch", *[g for g in generators if g in SEED_LISTS and g != "torch"]):
        shown = "; ".join(f"{ctx.label(s)} {seeds_before(ctx, s, rank, step, name)}" for s in ("a", "b"))
        parts.append(f"{name}'s {shown}")
    return "; ".join(parts)


def rng_parting(ctx: Context) -> tuple[dict, str] | None:
    """(evidence, sentence) where the runs part at step k in what draws (samples, batch, loss) and the
    generators' digests differ at step k's start while they agreed at step k-1's (or k is 1)."""
    first = ctx.earliest
    if not first or first.get("quantity") not in RNG_QUANTITIES or not isinstance(first.get("step"), int):
        return None
    step, rank = first["step"], first.get("rank") if isinstance(first.get("rank"), int) else 0
    now = rng_at(ctx, step, rank)
    if now is None or not now["differ"]:
        return None
    before = rng_at(ctx, step - 1, rank) if step > 1 else None
    if step > 1 and (before is None or set(before["differ"]) & set(now["differ"])):
        return None  # apart before too (or unrecorded there): not where they parted
    seeds = {ctx.label(s): seeds_before(ctx, s, rank, step) for s in ("a", "b")}
    since = "from the start" if step == 1 else f"while they agreed at step {step - 1}'s"
    shown = "; ".join(f"{n} {now['generators'][n][0]} vs {now['generators'][n][1]}" for n in now["differ"])
    sentence = (
        f"The random generators' state differs at step {step}'s start on rank {rank} (the hooks' digests: {shown}), "
        f"{since}; the seeds recorded before it: {seeds_words(ctx, rank, step, now['differ'])}."
    )
    evidence = {"step": step, "rank": rank, "differ": now["differ"], "generators": now["generators"], "seeds": seeds}
    return evidence, sentence


# ---------------------------------------------------------------------------------------------
# the program's own collectives


def _cut(record: dict) -> bool:
    """Whether the record lists fewer collectives than the step made (the hooks keep the first 32 of a step, a
    library's among them): its own ones are then not all known, and no difference in them can be said."""
    listed = record.get("collectives") if isinstance(record.get("collectives"), list) else []
    count = record.get("collectives_count")
    return isinstance(count, int) and count > len(listed)


def _signature(record: dict) -> Counter:
    entries = record.get("collectives") if isinstance(record.get("collectives"), list) else []
    return Counter(
        (e.get("op"), e.get("reduce_op"), e.get("dtype"), str(e.get("shape")), e.get("of"))
        for e in entries
        if isinstance(e, dict) and made_by_program(e)
    )


def _describe(signature: Counter) -> str:
    if not signature:
        return "none"
    parts = []
    for (op, reduce_op, dtype, shape, of), n in sorted(signature.items(), key=str):
        words = " ".join(str(w) for w in (op, reduce_op, dtype, shape) if w not in (None, "None"))
        parts.append(f"{words}{' of gradients' if of == 'grad' else ''} x{n}")
    return ", ".join(parts)


def _describemade_by_program(record: dict, signature: Counter) -> str:
    """The program's own collectives of a step, and how many the libraries made beside them (Lightning's self.log
    with sync_dist=True all-reduces each value): "none of its own" is never said as "none" where a library's ran."""
    entries = record.get("collectives") if isinstance(record.get("collectives"), list) else []
    libraries = sum(1 for e in entries if isinstance(e, dict) and not made_by_program(e))
    if not libraries:
        return _describe(signature)
    beside = f"{libraries} made by the libraries beside them (Lightning's self.log(sync_dist=True), its own checks)"
    return f"{_describe(signature)}; {beside}" if signature else f"none of its own, {beside}"


def collectives_over_shapes(run, shapes: set[tuple], rank: int = 0) -> dict | None:
    """The program's own reductions over floating-point tensors of these shapes on one rank, no gradient among
    them (the running statistics averaged by hand: timm's distribute_bn all-reduces each one): {after: the steps
    after which they ran (a record's list follows the step before it; the last step's from hooks.json), count,
    ops: each op and shape once, cut: whether a list that holds none of them was cut short (those it left out are
    unknown)}. None where the run recorded no collectives (a trace not recorded by the hooks)."""
    records = list(records_of(run, rank))
    facts = read_hook_facts(run, rank)
    last = facts.get("collectives_after_last_step")
    if not facts and not any("collectives" in r for r in records):  # the hooks list every step's, even none
        return None
    found = {"after": [], "count": 0, "ops": [], "cut": False}
    steps = [(r.get("step", 1) - 1, r) for r in records if isinstance(r.get("step"), int)]
    if isinstance(last, dict) and isinstance(last.get("after_step"), int):
        steps.append((last["after_step"], {"collectives": last.get("items"), "collectives_count": last.get("count")}))
    for after, record in steps:
        entries = record.get("collectives") if isinstance(record.get("collectives"), list) else []
        over = [e for e in entries if isinstance(e, dict) and _over_shapes(e, shapes)]
        if over:
            found["after"].append(after)
            found["count"] += len(over)
            found["ops"] = sorted({*found["ops"], *(f"{e.get('op')} {e.get('shape')}" for e in over)})
        elif _cut(record):
            found["cut"] = True
    return found


def _over_shapes(entry: dict, shapes: set[tuple]) -> bool:
    shape = entry.get("shape") if isinstance(entry.get("shape"), list) else None
    return (
        made_by_program(entry)
        and entry.get("op") in REDUCTIONS  # an average: a broadcast of the buffers is another synchronisation
        and entry.get("of") != "grad"
        and str(entry.get("dtype") or "").startswith(("float", "bfloat"))
        and shape is not None
        and tuple(shape) in shapes
    )


def collectives_parting(ctx: Context) -> tuple[dict, str] | None:
    """The first step at or before the first divergence where the program's own collectives differ, unless the
    same difference came at an earlier step after which the training stayed equal for a step (a logging all_reduce
    that one side makes by hand at every step and Lightning inside self.log), or it is broadcasts made before the
    first step with the initial weights recorded equal on every rank after them (a loop's own broadcast of the
    parameters, which DDP's constructor makes on the other side): the records show it changed nothing."""
    first = ctx.earliest
    if not first or not isinstance(first.get("step"), int):
        return None
    rank = first.get("rank") if isinstance(first.get("rank"), int) else 0
    harmless = []  # differences the training stayed equal after (at a step s with s + 1 before the divergence)
    pairs = zip(records_of(ctx.run("a"), rank), records_of(ctx.run("b"), rank))
    for i, (ra, rb) in enumerate(pairs):
        step = ra.get("step")
        if not isinstance(step, int) or step > first["step"]:
            return None
        if "collectives" not in ra and "collectives" not in rb and not _recorded_hooks(ctx):
            return None
        if _cut(ra) or _cut(rb):
            continue  # a list cut short on either side: which of the program's own are missing is unknown
        sa, sb = _signature(ra), _signature(rb)
        apart = (sa - sb, sb - sa)
        if sa != sb and (apart in harmless or step + 1 < first["step"]):
            harmless.append(apart)  # a logging all_reduce on one side at every step: said nowhere
            continue
        if sa != sb and i == 0 and _broadcasts_only(apart) and _initial_weights_equal(ctx):
            continue  # what they sent is what the initial weights hold, recorded equal after them
        if sa != sb:
            shown = {ctx.label("a"): _describemade_by_program(ra, sa), ctx.label("b"): _describemade_by_program(rb, sb)}
            sentence = (
                f"The program's own collectives differ at step {step} on rank {rank} (those made since the step "
                f"before): " + "; ".join(f"{label}: {text}" for label, text in shown.items()) + "."
            )
            return {"step": step, "rank": rank, "per_step": shown}, sentence
    return None


# the ops whose result holds the other ranks' tensors: what a loss over every rank's features (a contrastive loss,
# CLIP's) gathers before it computes; all_gather takes a list as long as the group, the others one tensor
GATHERS = ("all_gather", "all_gather_into_tensor", "all_to_all", "all_to_all_single")


def gathers_of(record: dict) -> Counter:
    """The program's own gathers of a step (none given the gradients: those average, they feed no loss), as a
    multiset of (op, dtype, shape, tensors): what they carried and how many calls."""
    entries = record.get("collectives") if isinstance(record.get("collectives"), list) else []
    return Counter(
        (e.get("op"), e.get("dtype"), tuple(e["shape"]) if isinstance(e.get("shape"), list) else None, e.get("tensors"))
        for e in entries
        if isinstance(e, dict) and made_by_program(e) and e.get("op") in GATHERS and e.get("of") != "grad"
    )


def gathers_words(gathers: Counter) -> str:
    """ "4 all_gather calls, each of 2 x float32 [8, 16]", or "none of its own"."""
    if not gathers:
        return "no gather of its own"
    parts = []
    for (op, dtype, shape, tensors), n in sorted(gathers.items(), key=str):
        shown = " ".join(str(w) for w in (dtype, list(shape) if shape is not None else None) if w is not None)
        count = f"{tensors} × " if isinstance(tensors, int) else ""
        parts.append(f"{n} {op} call{'s' if n > 1 else ''}, each of {count}{shown}")
    return ", ".join(parts)


def _a_batch(gathers: Counter) -> bool:
    """Whether a gather carries more than one number a tensor: features of samples, not a logged scalar."""
    return any(shape and math.prod(n for n in shape if isinstance(n, int)) > 1 for (_, _, shape, _) in gathers)


def gathers_apart(ctx: Context, step: int, rank: int) -> tuple[Counter, Counter] | None:
    """Both sides' own gathers at `step` on `rank` where they differ in shape, count or presence, one side at least
    gathering a batch (more than one number a tensor): (a's, b's). None where they are equal, a list was cut short
    (which of the program's own ran is unknown), or the same difference came at an earlier step, after which the
    training stayed equal (it changed nothing then, so it cannot be what parts the runs now)."""
    earlier = []
    for ra, rb in zip(records_of(ctx.run("a"), rank), records_of(ctx.run("b"), rank)):
        if _cut(ra) or _cut(rb) or not isinstance(ra.get("step"), int):
            continue
        ga, gb = gathers_of(ra), gathers_of(rb)
        apart = (ga - gb, gb - ga)
        if ra["step"] < step and ga != gb:
            earlier.append(apart)
        if ra["step"] == step:
            if ga == gb or apart in earlier or not (_a_batch(ga) or _a_batch(gb)):
                return None
            return ga, gb
    return None


def gathered_rows(gathers: Counter, world_size) -> set | None:
    """The rows a rank each gather carries (the gathered tensor's first dimension: all_gather's per rank,
    all_gather_into_tensor's output over the world size); None where one is unknown (all_to_all, no shape)."""
    rows = set()
    for op, _, shape, _ in gathers:
        if not shape or op not in ("all_gather", "all_gather_into_tensor"):
            return None
        if op == "all_gather_into_tensor":
            if not isinstance(world_size, int) or world_size < 1:
                return None
            rows.add(shape[0] // world_size)
        else:
            rows.add(shape[0])
    return rows


def _broadcasts_only(apart: tuple[Counter, Counter]) -> bool:
    return all(op == "broadcast" for side in apart for (op, *_) in side)


def _initial_weights_equal(ctx: Context) -> bool:
    """Every rank's initial weights recorded on both sides and equal (or apart only by what one side holds alone)."""
    ranks = [set(init_digests(ctx.meta(s))) for s in ("a", "b")]
    return bool(ranks[0]) and ranks[0] == ranks[1] and all(init_apart(ctx, r) is False for r in ranks[0])


def _recorded_hooks(ctx: Context) -> bool:
    return all((ctx.meta(s) or {}).get("recorded_by") == "hooks" for s in ("a", "b"))


# ---------------------------------------------------------------------------------------------
# how each side averages its gradients over the ranks

# what averaged_by_ddp_alike proves, said where a world-size candidate is left out for it
AVERAGED_BY_DDP_ALIKE = (
    "both sides average the gradients over the ranks by DDP alone (the same DDP arguments on every rank, no "
    "collective of their own over gradients, the same gradient sync at every backward)"
)
DDP_ALIKE_SHORT = (
    "DDP averages alike on both sides, with the same arguments and no collective of their own over gradients"
)
DDP_BOOKKEEPING = ("order", "before_step")  # where a DDP construction came among the facts, not how it averages


def averaged_by_ddp_alike(ctx: Context) -> bool:
    """Both sides recorded by hooks wrap their models in DDP with the same constructor arguments on every rank,
    make no collective over gradients (nor a reduction of more than one number, which could carry them
    flattened) of their own, none of their step records cut short, and sync the same backwards: the averaging
    over the ranks is the same, and a factor of the world size between the gradients is none of its doing.
    False wherever a fact is unrecorded (an explicit trace holds none of them)."""
    if "averaged_by_ddp_alike" not in ctx.cache:
        ranks = sorted(set(trace_ranks(ctx.run("a"))) & set(trace_ranks(ctx.run("b"))))
        ctx.cache["averaged_by_ddp_alike"] = bool(ranks) and all(_averaged_alike_on(ctx, r) for r in ranks)
    return ctx.cache["averaged_by_ddp_alike"]


def _averaged_alike_on(ctx: Context, rank: int) -> bool:
    wrapped = [_ddp_arguments(read_hook_facts(ctx.run(s), rank)) for s in ("a", "b")]
    if not wrapped[0] or wrapped[0] != wrapped[1]:
        return False
    streams = [list(records_of(ctx.run(s), rank)) for s in ("a", "b")]
    if not all(streams) or any(_may_average_by_hand(r) for records in streams for r in records):
        return False
    return all(ra.get("grad_sync") == rb.get("grad_sync") for ra, rb in zip(*streams))


def _ddp_arguments(facts: dict) -> list[dict]:
    return [{k: v for k, v in item.items() if k not in DDP_BOOKKEEPING} for item in fact_items(facts, "ddp")]


def _may_average_by_hand(record: dict) -> bool:
    """A step whose collectives may reduce gradients: one given a .grad (anyone's), a reduction of the program's
    own over more than one number, or a list cut short (which of them ran is unknown)."""
    if _cut(record):
        return True
    entries = record.get("collectives") if isinstance(record.get("collectives"), list) else []
    for e in (e for e in entries if isinstance(e, dict)):
        shape = e.get("shape") if isinstance(e.get("shape"), list) else None
        many = shape is None or math.prod(n for n in shape if isinstance(n, int)) > 1
        if e.get("of") == "grad" or (made_by_program(e) and e.get("op") in REDUCTIONS and many):
            return True
    return False


def collectives_section(run_a, run_b, names) -> dict | None:
    """report.json `collectives`: each side's own collectives per step on rank 0 (where either side
    recorded any), and the first step they differ at; None where none were recorded (or a record holds
    what cannot be read as one)."""
    try:
        return _collectives_section(run_a, run_b, names)
    except (OSError, ValueError, TypeError):
        return None


def _collectives_section(run_a, run_b, names) -> dict | None:
    per_side, first = {}, None
    streams = [list(records_of(run, 0)) for run in (run_a, run_b)]
    if not any("collectives" in r for records in streams for r in records):
        return None
    for name, records in zip(names, streams):
        per_side[name] = {
            "steps_with": sum(1 for r in records if r.get("collectives")),
            "count": sum(r.get("collectives_count", 0) for r in records if isinstance(r.get("collectives_count"), int)),
            "first_step": next((_describe(_signature(r)) for r in records if _signature(r)), "none"),
        }
    for ra, rb in zip(*streams):
        if not (_cut(ra) or _cut(rb)) and _signature(ra) != _signature(rb):
            first = {"step": ra.get("step"), names[0]: _describe(_signature(ra)), names[1]: _describe(_signature(rb))}
            break
    return {"rank": 0, "sides": per_side, "first_difference": first}


# ---------------------------------------------------------------------------------------------
# checkpoints and resumes


def restored(run, rank: int = 0) -> set[str] | None:
    """The kinds a rank restored for a resume (a checkpoint loaded, then training): what it handed back to
    torch after its last load before its steps. None where it loaded no checkpoint before training."""
    facts = read_hook_facts(run, rank)
    steps = facts.get("steps") if isinstance(facts.get("steps"), int) else 0
    loads = [
        c
        for c in fact_items(facts, "checkpoints")
        if str(c.get("op", "")).endswith("load") and isinstance(c.get("after_step"), int) and c["after_step"] < steps
    ]
    if not loads:
        return None
    after = loads[-1]["after_step"]
    return {
        str(r.get("kind"))
        for r in fact_items(facts, "restores")
        if r.get("kind") in RESTORED and r.get("before_step") == after + 1 and not _puts_back(r)
    }


def _puts_back(restore: dict) -> bool:
    """A generator's state set by Lightning's own seed utilities: isolate_rng around the sanity check, the
    launcher's restore in a spawned process; a state it took itself, not a checkpoint's."""
    return restore.get("kind") == "rng" and str(restore.get("caller") or "").endswith("utilities.seed")


def resume_difference(run_a, run_b, names) -> dict | None:
    """{side: missing kinds} where both sides resumed and one restored less."""
    got = [restored(run_a), restored(run_b)]
    if None in got or got[0] == got[1]:
        return None
    missing = {names[i]: sorted(got[1 - i] - got[i]) for i in (0, 1) if got[1 - i] - got[i]}
    return {"restored": {names[0]: sorted(got[0]), names[1]: sorted(got[1])}, "missing": missing}


def _checkpoint_saves(run, rank: int) -> list[dict]:
    """The saves of training state a rank made (torch.save, a DCP save): a save holding none (no model, optimizer,
    scheduler, generator state, state_dict or counters: a dataset's cache of a computed tensor, vits' spectrograms
    saved as each sample is first read) is no checkpoint, whichever rank reads which sample first."""
    return [
        c
        for c in fact_items(read_hook_facts(run, rank), "checkpoints")
        if str(c.get("op", "")).rsplit(".", 1)[-1] in CHECKPOINT_SAVE_OPS and c.get("kinds") != []
    ]


def _saving_ranks(run) -> dict[str, list[int]]:
    """{checkpoint path: the ranks that saved it}."""
    out: dict[str, list[int]] = {}
    for rank in trace_ranks(run):
        for c in _checkpoint_saves(run, rank):
            out.setdefault(str(c.get("op")), [])
            if rank not in out[str(c.get("op"))]:
                out[str(c.get("op"))].append(rank)
    return out


def _saved_files_by_step(run, rank: int) -> dict[int, list[tuple[str, dict[str, str]]]]:
    """{after_step: [(path, {key path: digest})]}: every save after each step whose tensors were digested."""
    saves: dict[int, list[tuple[str, dict]]] = {}
    for c in _checkpoint_saves(run, rank):
        contents, step = c.get("contents"), c.get("after_step")
        if isinstance(contents, dict) and contents:
            if isinstance(step, int) and not isinstance(step, bool):
                saves.setdefault(step, []).append((str(c.get("path")), contents))
    return saves


def _saved_settings(run, rank: int) -> dict[tuple[int, str], dict[str, str]]:
    """{(after_step, path): {key path: the value as JSON}}: the saved state that is no tensor (param groups'
    hyperparameters, schedulers' numbers; hooks/checkpoints.py `settings_of`), of the saves that recorded it."""
    out = {}
    for c in _checkpoint_saves(run, rank):
        settings, step = c.get("settings"), c.get("after_step")
        if isinstance(settings, dict) and settings and isinstance(step, int) and not isinstance(step, bool):
            out[(step, str(c.get("path")))] = {k: json.dumps(v) for k, v in settings.items()}
    return out


def _settings_apart(files: list, settings: list, step: int) -> list[list]:
    """[[a's key path, a's value, b's key path, b's value]] of the settings paired by name (as tensors are) whose
    values differ, in the files compared after `step`; a setting one side saves alone is not said."""
    a, b = (_as_one_save([(p, settings[i].get((step, p), {})) for p, _ in files[i]])[1] for i in (0, 1))
    paired = counterparts(a, b)
    return [[n, json.loads(a[n]), paired[n][0], json.loads(b[paired[n][0]])] for n in _apart(a, b)[0]]


def _as_one_save(files: list[tuple[str, dict[str, str]]]) -> tuple[str, dict[str, str]]:
    """A step's files as one save. Several files (a model, each EMA, the optimizer: improved-diffusion's) have each
    file's key paths under its file's name (`ema_0_9_000006.out.weight`), so that a tensor the other side saves in
    one file is paired with each file's alike and held where any holds its values."""
    if len(files) == 1:
        return files[0]
    merged = {f"{_file_part(path)}.{key}": digest for path, contents in files for key, digest in contents.items()}
    return "; ".join(path for path, _ in files), merged


def _saved_contents(run, rank: int) -> dict[int, tuple[str, dict[str, str]]]:
    """{after_step: (paths, {key path: digest})}: every save after each step whose tensors were digested, as one."""
    return {step: _as_one_save(files) for step, files in _saved_files_by_step(run, rank).items()}


def saved_file(said: str) -> str:
    """The file a recorded save path names (hooks/checkpoints.py): a path as given; a file object by its name
    (`<BufferedWriter /logs/model000006.pt for model000006.pt>`); a buffer by the file its caller then writes
    (`<BytesIO for /logs/epoch=2-step=6.ckpt>`); as recorded where it names none (`<BytesIO>`)."""
    if not (said.startswith("<") and said.endswith(">")):
        return said
    _, _, rest = said[1:-1].partition(" ")  # the object's type first
    if rest.startswith("for "):
        return rest[len("for ") :]
    return rest.partition(" for ")[0] or said


def _saved_files(paths: str) -> str:
    """A save's paths ("; "-joined where a step saved several files), each as the file it names."""
    return "; ".join(saved_file(path) for path in paths.split("; "))


def _file_part(path: str) -> str:
    """A saved file's name as one dotted part of a key path: `ema_0.9_000006.pt` -> `ema_0_9_000006`."""
    name = re.split(r"[\\/]", saved_file(path).strip("<>"))[-1]
    return re.sub(r"\W", "_", name.rsplit(".", 1)[0] if "." in name else name) or "file"


def checkpoint_steps_apart(run_a, run_b) -> dict | None:
    """{rank, steps: [a's, b's]}: the first rank (where either side saved a checkpoint) whose saves followed other
    steps on the two sides; None where they saved after the same steps (or neither saved)."""
    for rank in sorted(set(trace_ranks(run_a)) | set(trace_ranks(run_b))):
        steps = [_save_steps(run, rank) for run in (run_a, run_b)]
        if steps[0] != steps[1]:
            return {"rank": rank, "steps": steps}
    return None


def _save_steps(run, rank: int) -> list[int]:
    """The steps after which `rank` saved a checkpoint (torch.save, a DCP save), each once, in order."""
    out = set()
    for c in _checkpoint_saves(run, rank):
        step = c.get("after_step")
        if isinstance(step, int):
            out.add(step)
    return sorted(out)


def checkpoint_steps_words(found: dict, names) -> str:
    steps = [", ".join(map(str, s)) or "none" for s in found["steps"]]
    only = [sorted(set(found["steps"][i]) - set(found["steps"][1 - i])) for i in (0, 1)]
    said = "; ".join(f"{names[i]} alone after step(s) {', '.join(map(str, only[i]))}" for i in (0, 1) if only[i])
    return (
        f"a difference in when checkpoints are saved, not in what trained: on rank {found['rank']} {names[0]} saved "
        f"after step(s) {steps[0]} and {names[1]} after step(s) {steps[1]} ({said}). A run stopped between them "
        "resumes from another step on each side: save on the same schedule (Lightning's ModelCheckpoint: "
        "every_n_train_steps or every_n_epochs, save_last; a loop's own `if step % N == 0` and its save at the end)"
    )


def _tails(names) -> dict[tuple, list[str]]:
    """Each dotted ending of each name ('1', 'weight'; 'teacher', '1', 'weight'; ...) -> the names ending so."""
    index: dict[tuple, list[str]] = {}
    for name in names:
        parts = tuple(name.split("."))
        for k in range(1, len(parts) + 1):
            index.setdefault(parts[-k:], []).append(name)
    return index


def _ending(name: str, index: dict) -> tuple:
    """The longest dotted ending of `name` that names of `index` end with (empty where none does)."""
    parts = tuple(name.split("."))
    for k in range(len(parts), 0, -1):
        if parts[-k:] in index:
            return parts[-k:]
    return ()


def _best(name: str, index: dict) -> list[str]:
    """The names of `index` ending as `name` does in the most dotted parts (its last part at least)."""
    return index.get(_ending(name, index), [])


# the parts of a saved tensor's key path that a wrapper or a checkpoint's layout adds, not the state it belongs to:
# DDP's `module.`, torch.compile's `_orig_mod.`, Fabric's `_forward_module.`, Lightning's `state_dict.` and the
# LightningModule's attribute `model.` holding the network
LAYOUT_PARTS = frozenset({"module", "_orig_mod", "_forward_module", "state_dict", "model"})
STATE_SUFFIXES = ("_state_dict", "_state")  # `ema_state_dict.`, pycls's `ema_state.`: the state named `ema`


def state_name(name: str) -> str:
    """A saved tensor's key path as the state it belongs to: `ema_state_dict.fc.weight` -> `ema.fc.weight`,
    `state_dict.model.fc.weight` and `state_dict.fc.weight` -> `fc.weight`."""
    kept = []
    for part in name.split("."):
        for suffix in STATE_SUFFIXES:
            if part.endswith(suffix) and len(part) > len(suffix):
                part = part[: -len(suffix)]
                break
        if part not in LAYOUT_PARTS:
            kept.append(part)
    return ".".join(kept)


def _same_state(x: dict[str, str], y: dict[str, str]) -> dict[str, str]:
    """{x's name: y's name} where both name the same state (`state_name`), each the only one of its side to."""
    by_state = [Counter(state_name(n) for n in side) for side in (x, y)]
    y_by_state = {state_name(n): n for n in y}
    return {
        n: y_by_state[s]
        for n in x
        if (s := state_name(n)) in y_by_state and by_state[0][s] == 1 and by_state[1][s] == 1
    }


def _ending_alike(x: dict, y: dict) -> dict[str, list[str]]:
    """{x's name: y's names ending alike with it}: each pair ends alike in the most dotted parts seen from both
    names."""
    index_x, index_y = _tails(x), _tails(y)
    return {name: [o for o in _best(name, index_y) if name in _best(o, index_x)] for name in x}


def counterparts(x: dict[str, str], y: dict[str, str]) -> dict[str, list[str]]:
    """{x's name: y's names paired with it}. First by the state both name (`state_name`: raw's `state_dict.fc.weight`
    with Lightning's `state_dict.model.fc.weight`, never with its `ema_state_dict.fc.weight`); the names left
    then by their ending alike in the most dotted parts seen from both names (`ema.1.weight` with
    `state_dict.teacher.1.weight` and `state_dict.student.1.weight`, each of those ending like it and like
    `model.1.weight` alike). A name that ends like others only in a part every layer has (`weight` against
    `state_dict.vae.weight`, which no name of x ends like better) is paired with nothing."""
    same = _same_state(x, y)
    taken = set(same.values())
    rest_x = {n: v for n, v in x.items() if n not in same}
    rest_y = {n: v for n, v in y.items() if n not in taken}
    paired = _ending_alike(rest_x, rest_y)
    return {name: [same[name]] if name in same else paired[name] for name in x}


def _saved_alone(x: dict[str, str], y: dict[str, str]) -> list[str]:
    """x's tensors that end like y's but have no counterpart, each of y's alike being another state's (raw's
    `ema_state_dict.fc.weight` against Lightning's `state_dict.model.fc.weight`, paired with raw's
    `state_dict.fc.weight`): a copy of a state (an EMA) x saves and y does not. A tensor ending like none of y's
    (an RNG state, a callback's) is not said."""
    paired, alike = counterparts(x, y), _ending_alike(x, y)
    return sorted(n for n in x if not paired[n] and alike[n])


def _apart(x: dict[str, str], y: dict[str, str]) -> tuple[list[str], int]:
    """x's tensors whose values none of their counterparts in y holds, and how many are held. A tensor with no
    counterpart (saved by one side only: callback states, an RNG state, a module the other side leaves out) is
    neither."""
    apart, held = [], 0
    for name, others in counterparts(x, y).items():
        if any(y[o] == x[name] for o in others):
            held += 1
        elif others:
            apart.append(name)
    return sorted(apart), held


def _held_after(names: list[str], x: dict[str, str], saves_y: dict, step: int) -> int | None:
    """The step (nearest `step` first, `step` left out) after which the other side saved every one of `names`'
    values under their counterparts."""
    for other in sorted((s for s in saves_y if s != step), key=lambda s: (abs(s - step), s)):
        y = saves_y[other][1]
        paired = counterparts(x, y)
        if all(any(y[o] == x[n] for o in paired[n]) for n in names):
            return other
    return None


def _other_optimizer_after(run_a, run_b, rank, step) -> bool:
    """An optimizer other than the counted one stepped after step `step` on either side (a GAN's generator after its
    discriminator's step): a save after that step holds an update no record of the step covers."""
    for run in (run_a, run_b):
        others = read_hook_facts(run, rank).get("other_optimizers")
        if isinstance(others, dict) and any(
            step in (entry.get("after_steps") or []) for entry in others.values() if isinstance(entry, dict)
        ):
            return True
    return False


def _holds_all(x: dict[str, str], y: dict[str, str]) -> bool:
    """Every tensor of x paired in y holds its values, and some are paired."""
    apart, held = _apart(x, y)
    return held > 0 and not apart


def _kept_files(files: list[tuple[str, dict]], other: dict[str, str]) -> tuple[list, list]:
    """A side's files saved after one step, split into those compared and those kept from another save: a file
    holding the same key paths as a file of that step which holds the other side's values of the step, while it
    does not (pycls's best-so-far `model.pyth`, beside `model_epoch_0002.pyth`, the current one)."""
    current = [f for f in files if _holds_all(f[1], other)]
    kept = [
        f
        for f in files
        if f not in current
        and any(set(f[1]) == set(c[1]) for c in current)
        and _copies_of_one_save([g for g in files if set(g[1]) == set(f[1])], other)
    ]
    compared = [f for f in files if f not in kept]
    # a file holding what another file of the step holds (pycls's best-so-far file written with the current one)
    # is compared once: kept twice, each copy would be paired with the other side's tensors in turn
    unique = [f for i, f in enumerate(compared) if all(f[1] != g[1] for g in compared[:i])]
    return unique, kept


def _copies_of_one_save(same_keys: list[tuple[str, dict]], other: dict[str, str]) -> bool:
    """Files with the same key paths hold, together, more tensors laid out as each of the other side's than the
    other side saves (pycls's two files each with a model and an EMA, against one checkpoint with one of each): copies
    of one save from different moments. Files that hold a state each the other side holds too (improved-diffusion's
    model file and EMA file, each `out.weight`, against a checkpoint with a model and an EMA) are not."""
    index_y = _tails(other)
    keys = list(same_keys[0][1])
    for key in keys:
        ending = _ending(key, index_y)
        alike_y = index_y.get(ending, [])
        alike_x = [k for k in keys if tuple(k.split("."))[-len(ending) :] == ending] if ending else []
        if alike_y and len(same_keys) * len(alike_x) <= len(alike_y):
            return False
    return True


def _kept_evidence(kept: list, current: list, other_saves: dict, steps_saved: list[int], step: int, saves) -> list:
    """Each kept file: {path, current (the paths of the same keys holding the other side's values), apart (its
    tensors holding other values), held_after (the other side's save step holding them, None where none does),
    written_after (the steps after which its side wrote this path), saves (all steps its side saved after)}."""
    out = []
    for path, contents in kept:
        apart, _ = _apart(contents, other_saves[step][1])
        out.append(
            {
                "path": path,
                "current": [p for p, c in current if set(c) == set(contents)],
                "apart": apart,
                "held_after": _held_after(apart, contents, other_saves, step),
                "written_after": sorted(s for s, files in saves.items() if any(p == path for p, _ in files)),
                "saves": steps_saved,
            }
        )
    return out


def checkpoint_contents_apart(run_a, run_b, equal_through: float) -> dict | None:
    """The first save (by step, then rank) both sides made after the same step on the same rank, the training
    bitwise equal through that step, whose tensors paired hold other values, or that one side saves alone, or with a
    file kept from another save beside the current one: {step, rank, paths, apart: [a's names, b's names], alone:
    [a's, b's], held, held_after: [b's step holding a's, a's holding b's], kept: [a's, b's] (`_kept_evidence`)}."""
    ranks = sorted(set(trace_ranks(run_a)) & set(trace_ranks(run_b)))
    files = {rank: (_saved_files_by_step(run_a, rank), _saved_files_by_step(run_b, rank)) for rank in ranks}
    saves = {rank: tuple({s: _as_one_save(f) for s, f in side.items()} for side in files[rank]) for rank in ranks}
    settings = {rank: (_saved_settings(run_a, rank), _saved_settings(run_b, rank)) for rank in ranks}
    common = sorted({(step, rank) for rank, (a, b) in saves.items() for step in set(a) & set(b)})
    for step, rank in common:
        if step > equal_through or (step == equal_through and _other_optimizer_after(run_a, run_b, rank, step)):
            return None  # what trained after the step the records cover may be in the save
        split = [_kept_files(files[rank][i][step], saves[rank][1 - i][step][1]) for i in (0, 1)]
        (path_a, a), (path_b, b) = (_as_one_save(split[i][0]) for i in (0, 1))
        apart_a, held = _apart(a, b)
        apart_b, _ = _apart(b, a)
        alone = [_saved_alone(a, b), _saved_alone(b, a)]
        kept = [
            _kept_evidence(split[i][1], split[i][0], saves[rank][1 - i], sorted(saves[rank][i]), step, files[rank][i])
            for i in (0, 1)
        ]
        settings_apart = _settings_apart([split[0][0], split[1][0]], settings[rank], step)
        if apart_a or apart_b or alone[0] or alone[1] or kept[0] or kept[1] or settings_apart:
            return {
                "step": step,
                "rank": rank,
                "paths": [path_a, path_b],
                "apart": [apart_a, apart_b],
                "alone": alone,
                "kept": kept,
                "settings_apart": settings_apart,
                "copies_equal": copies_equal_after(run_a, run_b, rank, step),
                "copies_behind": [saved_behind(run, rank, step) for run in (run_a, run_b)],
                "copies_apart_from": first_copy_difference(run_a, run_b, rank),
                "copy_starts": [copy_start(run, rank) for run in (run_a, run_b)],
                "held": held,
                "held_after": [
                    _held_after(apart_a, a, saves[rank][1], step) if apart_a else None,
                    _held_after(apart_b, b, saves[rank][0], step) if apart_b else None,
                ],
            }
    return None


def _summary(names: list[str]) -> str:
    """`state_dict.teacher.* (4 tensors)` where the names share a dotted beginning, else the first three."""
    if len(names) == 1:
        return names[0]
    parts = [n.split(".") for n in names]
    common = []
    for column in zip(*(p[:-1] for p in parts)):
        if len(set(column)) > 1:
            break
        common.append(column[0])
    if common:
        return f"{'.'.join(common)}.* ({len(names)} tensor(s))"
    shown = ", ".join(names[:3])
    return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _looks_lightnings(names: list[str]) -> bool:
    """A Lightning checkpoint's layout: the module's tensors under `state_dict.`, the optimizers' under
    `optimizer_states.`."""
    return any(n.startswith(("state_dict.", "optimizer_states.")) for n in names)


def checkpoint_contents_words(found: dict, names) -> str:
    step, rank = found["step"], found["rank"]
    files = [_saved_files(found["paths"][i]) for i in (0, 1)]
    alone, kept = found.get("alone", [[], []]), found.get("kept", [[], []])
    saves = f"the checkpoints both sides saved after it on rank {rank} ({names[0]}: {files[0]}; {names[1]}: {files[1]})"
    settings = found.get("settings_apart", [])
    if any(found["apart"]) or any(alone) or settings:
        words = (
            "a difference in what was saved, not in what trained: the training is bitwise equal through step "
            f"{step}, yet {saves}"
        )
    else:  # a file kept from an earlier save is all there is: the saves of the step hold the same values
        words = f"a note, not a difference in what was saved: the training is bitwise equal through step {step}, "
        words += f"and {saves}"
    if any(found["apart"]):
        words += _apart_words(found, names)
    elif any(alone) or settings:
        words += f" differ in what they hold; the {found['held']} tensor(s) both hold, paired, are equal."
    else:
        words += f" hold the same values in the {found['held']} tensor(s) paired."
    for i in (0, 1):
        if alone[i]:
            words += _alone_words(_summary(alone[i]), names[i], names[1 - i])
        for file in kept[i]:
            words += _kept_words(file, step, names[i], names[1 - i])
    if settings:
        words += _settings_words(settings, names)
    return words


def _settings_words(settings: list[list], names) -> str:
    """The saved param groups' or schedulers' values apart: a resume restores them, unless the program sets them."""
    shown = "; ".join(f"{names[0]}'s {a} {va!r} against {names[1]}'s {b} {vb!r}" for a, va, b, vb in settings[:3])
    more = f" and {len(settings) - 3} more" if len(settings) > 3 else ""
    return (
        f" The saved state that is no tensor differs: {shown}{more}. A resume that restores these param groups or "
        "schedulers starts from other hyperparameters on each side, unless the program sets them again after loading "
        "(a learning rate set by hand each epoch): save them at the same point of the schedule on both sides (the "
        "scheduler stepped before the save on both or on neither), or check that the resume sets them again."
    )


def _kept_words(file: dict, step: int, side: str, other: str) -> str:
    """A file written with the key paths of the current one, holding another save's values: not a late save."""
    held = (
        f"what {other} saved after step {file['held_after']}"
        if file["held_after"] is not None
        else f"values {other} saved after no step"
    )
    some = (
        f", written only at some of {side}'s saves (after step(s) {', '.join(map(str, file['written_after']))} of its "
        f"saves after {', '.join(map(str, file['saves']))}), as a best-so-far file is"
        if file["written_after"] != file["saves"]
        else ""
    )
    return (
        f" {side}'s {saved_file(file['path'])}, written after step {step} with the key paths of "
        f"{'; '.join(saved_file(p) for p in file['current'])} (which holds {other}'s values of step {step}), holds in "
        f"{_by_first_part(file['apart'])} {held}: a copy kept from an earlier save{some}, not a late save, so it was "
        "not compared; a resume from it starts from those older values."
    )


def _by_first_part(names: list[str]) -> str:
    """`ema_state.* (56) and optimizer_state.* (29) tensor(s)`."""
    counts = Counter(n.split(".")[0] for n in names)
    return " and ".join(f"{part}.* ({count})" for part, count in sorted(counts.items())) + " tensor(s)"


def _alone_words(summary: str, side: str, other: str) -> str:
    return (
        f" {side}'s {summary} is laid out as tensors {other} saves, each of those paired with another state "
        f"{side} saves under its own key path: a state saved on {side} only (a resume of {other} would lose it). "
        f"Where {other} keeps that state too (an EMA), save it in {other}'s checkpoint under the same key (a "
        "LightningModule: in on_save_checkpoint, and restore it in on_load_checkpoint)."
    )


LIGHTNING_SAVES_FIRST = (
    " Lightning runs a callback's on_train_batch_end (ModelCheckpoint's save) before the LightningModule's: "
    "state updated there (an EMA) is saved before that step's update; update it in optimizer_step, after "
    "super().optimizer_step(...), or in the on_train_batch_end of a callback placed before the checkpoint callback."
)


def _behind_words(step: int, behind: list, i: int, names) -> str:
    """Side i saved its copies `behind[i]` updates behind, as its digest at the save matched (copies_at_save)."""
    n = behind[i]
    other = f", where {names[1 - i]}'s held its state after step {step}" if behind[1 - i] == 0 else ""
    return (
        f" A resume from these checkpoints would start from other values. {names[i]} saves its copy of the model "
        f"(the EMA the hooks found) {n} update(s) behind: when it saved after step {step}, the copy held its state "
        f"after step {step - n} (its digest at the save, copies_at_save, is the copy_digest of step {step - n + 1}, "
        f"read before that step's update){other}. Its save runs before the copy's update of step {step}: save the "
        f"copy after its update on {names[i]}, or update it before the save."
    )


def _copies_equal_words(step: int, equal_at_every_step: bool) -> str:
    """The copies recorded equal as updated after the step, no digest at the save: which side saved when is open."""
    equal = f"as updated after step {step}" + (" (and at every step recorded)" if equal_at_every_step else "")
    return (
        " A resume from these checkpoints would start from other values. Neither side's values are the other's "
        f"saved after another step, and the copies of the model the steps record (copy_digest, an EMA's) are equal "
        f"on both sides {equal}: the two saves cannot both hold the copy as updated after step {step}. Either one "
        f"side saves the copy before its update of step {step} (a save that runs before the step's update holds it "
        "one update behind), or it saves another state under names that end alike. The records hold no digest of "
        "the copy at the save (copies_at_save) to tell which: compare each side's saved tensors with its copy after "
        f"step {step} and after step {step - 1}."
    )


def _copies_apart_words(apart_from, starts: list, names) -> str:
    """The copies the steps record differ: from the first step both recorded (the start, or an update before the
    first step: what the records hold of the start said), or after steps equal (the update)."""
    first, compared = apart_from
    if compared == 0:
        return (
            " A resume from these checkpoints would start from other values. The copies of the model the steps "
            f"record (copy_digest, an EMA's) differ from step {first} on, the first step both recorded: "
            + START_OR_UPDATE
            + start_words(starts, names)
        )
    return (
        " A resume from these checkpoints would start from other values. The copies of the model the steps record "
        f"(copy_digest, an EMA's) are equal at the {compared} step(s) compared before step {first} and differ from "
        f"it on (each read before that step's update): the copy's update differs (its decay, the weights it "
        "averages, when its update runs). Make the update the same on both sides: the same decay and update point."
    )


def _apart_words(found: dict, names) -> str:
    """The words on tensors paired and holding other values: whose values lag whose, or the state itself differing."""
    step = found["step"]
    said = [f"{names[i]}'s {_summary(found['apart'][i])}" for i in (0, 1) if found["apart"][i]]
    words = (
        f" hold other values in tensors saved under names that end alike: "
        f"{' and '.join(said)}; the {found['held']} other tensor(s) matched so are equal."
    )
    lagging = []
    for i in (0, 1):
        other = found["held_after"][i]
        if other is not None:
            late = i if other < step else 1 - i
            lagging.append(late)
            words += (
                f" {names[i]}'s {_summary(found['apart'][i])} after step {step} hold what {names[1 - i]} saved after "
                f"step {other}: {names[late]} saves them {abs(step - other)} step(s) behind."
            )
    behind = found.get("copies_behind") or [None, None]
    saved_late = [i for i in (0, 1) if behind[i] and behind[1 - i] != behind[i]]  # saved before its update, alone
    if lagging:
        words += (
            " A resume from these checkpoints would start from other values: save that state at the same moment on "
            "both sides (where one side's values lag, it saves them before it updates them)."
        )
    elif saved_late:
        words += "".join(_behind_words(step, behind, i, names) for i in saved_late)
    elif found.get("copies_equal"):  # the recorded copies agree after the step: at most one save holds them so
        words += _copies_equal_words(step, found.get("copies_apart_from") is None)
    elif found.get("copies_apart_from"):  # the copies the steps record differ: from their start, or an update
        words += _copies_apart_words(found["copies_apart_from"], found.get("copy_starts") or [None, None], names)
    else:  # no side's values are the other's of another step: nothing says when they were saved
        words += (
            " A resume from these checkpoints would start from other values. Neither side's values are the other's "
            "saved after another step, so the state itself differs: a copy kept beside the model (an EMA) updated "
            "otherwise (its decay, the weights it averages, when its update runs), or a state built otherwise. Make "
            "that state the same on both sides (where the copy is an EMA, the same decay and update point)."
        )
    if any(_looks_lightnings(found["apart"][i]) for i in lagging + saved_late):
        words += LIGHTNING_SAVES_FIRST
    elif not lagging and not saved_late and found.get("copies_equal") and any(map(_looks_lightnings, found["apart"])):
        words += " Where one side is Lightning:" + LIGHTNING_SAVES_FIRST  # which side saved first is not recorded
    return words


def hook_warnings(run_a, run_b, names, equal_through: float = -1) -> list[dict]:
    """resume_incomplete, checkpoint_ranks and checkpoint_contents lines (none where a hooks.json holds what cannot
    be read). `equal_through`: the last step through which the training is bitwise equal (saves after later steps
    differ by what trained and are not compared)."""
    try:
        return _hook_warnings(run_a, run_b, names, equal_through)
    except (OSError, ValueError, TypeError, AttributeError):
        return []


def _hook_warnings(run_a, run_b, names, equal_through: float) -> list[dict]:
    out = []
    resume = resume_difference(run_a, run_b, names)
    if resume is not None:
        said = "; ".join(f"{side} does not restore {', '.join(kinds)}" for side, kinds in resume["missing"].items())
        out.append(
            {
                "kind": "resume_incomplete",
                "message": f"both sides resume from a checkpoint, and one restores less: {said} (restored: "
                + "; ".join(f"{s}: {', '.join(k) or 'nothing'}" for s, k in resume["restored"].items())
                + "). A resume that leaves the optimizer's state, the scheduler or the RNG behind trains otherwise "
                "from its first step on: restore them with load_state_dict / set_rng_state as the other side does",
            }
        )
    try:
        ranks = [_saving_ranks(run_a), _saving_ranks(run_b)]
    except OSError:
        return out
    for op in sorted(set(ranks[0]) & set(ranks[1])):
        if sorted(ranks[0][op]) != sorted(ranks[1][op]):
            out.append(
                {
                    "kind": "checkpoint_ranks",
                    "message": f"a note, not a training difference: {op} ran on rank(s) {ranks[0][op]} on {names[0]} "
                    f"and on rank(s) {ranks[1][op]} on {names[1]}",
                }
            )
    when = checkpoint_steps_apart(run_a, run_b)
    if when is not None:
        out.append({"kind": "checkpoint_steps", "message": checkpoint_steps_words(when, names), "evidence": when})
    contents = checkpoint_contents_apart(run_a, run_b, equal_through) if equal_through >= 0 else None
    if contents is not None:
        message = checkpoint_contents_words(contents, names)
        out.append({"kind": "checkpoint_contents", "message": message, "evidence": contents})
    wrapped = checkpoint_wrapper_keys(run_a, run_b)
    if wrapped is not None:
        out.append(
            {"kind": "checkpoint_keys", "message": checkpoint_wrapper_words(wrapped, names), "evidence": wrapped}
        )
    return out


def checkpoint_wrapper_keys(run_a, run_b) -> dict | None:
    """The first save (by step, then rank) both sides made after the same step on the same rank where one side's
    tensors carry a `module` component that the other's same tensors do not (`generator.module.conv.weight`
    against `generator.conv.weight`): a state_dict() of the DistributedDataParallel wrapper on that side.
    {step, rank, side (0 or 1), paths, count, example: [its name, the other's]}."""
    ranks = sorted(set(trace_ranks(run_a)) & set(trace_ranks(run_b)))
    for rank in ranks:
        saves = _saved_contents(run_a, rank), _saved_contents(run_b, rank)
        for step in sorted(set(saves[0]) & set(saves[1])):
            keys = set(saves[0][step][1]), set(saves[1][step][1])
            for side in (0, 1):
                mine, other = keys[side], keys[1 - side]
                unwrapped = {n: _without_module(n) for n in mine if _without_module(n) is not None}
                if unwrapped and all(u in other for u in unwrapped.values()):
                    first = sorted(unwrapped)[0]
                    return {
                        "step": step,
                        "rank": rank,
                        "side": side,
                        "paths": [saves[0][step][0], saves[1][step][0]],
                        "count": len(unwrapped),
                        "example": [first, unwrapped[first]],
                    }
    return None


def _without_module(name: str) -> str | None:
    """`name` with its `module` component dropped (the one a DDP wrapper's state_dict adds), None where it has
    none."""
    parts = name.split(".")
    return ".".join(parts[: parts.index("module")] + parts[parts.index("module") + 1 :]) if "module" in parts else None


def checkpoint_wrapper_words(found: dict, names) -> str:
    side, other = names[found["side"]], names[1 - found["side"]]
    name, plain = found["example"]
    files = _saved_files(found["paths"][found["side"]])
    return (
        f"{side}'s save after step {found['step']} on rank {found['rank']} ({files}) "
        f"holds {found['count']} tensor(s) under a `module.` that {other}'s same save holds without it ({name} against "
        f"{plain}): {side} saved the state_dict() of its DistributedDataParallel wrapper, whose keys all begin with "
        "`module.`, and a model not wrapped in DDP refuses them in load_state_dict(strict=True) (and one loaded with "
        "strict=False silently keeps none of them). Save the same keys on both sides, those the program's own reader "
        f"of these files expects: model.module.state_dict() on {side}, or, where that reader takes the `module.` keys "
        f"(a load into the DDP wrapper, a loader that maps `module.*`), {other}'s state under `module.`"
    )


# findings whose own evidence is the same computation up to an exact factor, so the same random draws: a
# generator digest taken at each side's first training forward (another point of the program where one side
# draws between its batch and its model call, improved-diffusion's timesteps and noise) is not said beside them
SAME_DRAWS_KINDS = ("loss.factor", "gradients.factor")
RNG_STATED_KINDS = ("rng.other_generator",)  # findings that state the generators' digests themselves
COLLECTIVES_STATED_KINDS = ("loss.gathered",)  # findings that state the program's own collectives of the step


def add_hooked_facts(found: Finding, ctx: Context) -> None:
    """The facts above beside the diagnosis, where the runs part (evidence and one sentence each)."""
    for key, read in (("rng_state", rng_parting), ("collectives", collectives_parting)):
        if key == "rng_state" and found.kind in SAME_DRAWS_KINDS:
            continue  # the finding proves the same draws (an exact factor): digests apart were taken at other moments
        if key == "rng_state" and found.kind in RNG_STATED_KINDS:
            continue  # said in the finding's own facts
        if key == "collectives" and found.kind in COLLECTIVES_STATED_KINDS:
            continue  # its headline shows them (report.json `collectives` keeps the libraries' beside them)
        try:
            shown = read(ctx)
        except (OSError, ValueError, TypeError, AttributeError):
            shown = None
        if shown is not None and key not in found.evidence:
            found.evidence[key] = shown[0]
            found.explanation += " " + shown[1]
    try:
        resume = resume_difference(ctx.run("a"), ctx.run("b"), ctx.names) if ctx.earliest else None
    except (OSError, ValueError, TypeError, AttributeError):
        resume = None
    if resume is not None and "resume_restored" not in found.evidence:
        found.evidence["resume_restored"] = resume
        found.explanation += (
            " Both sides resumed from a checkpoint, and one restored less: "
            + "; ".join(f"{side} did not restore {', '.join(kinds)}" for side, kinds in resume["missing"].items())
            + "."
        )
