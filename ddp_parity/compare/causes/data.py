"""Causes in the data, read from the first steps' records: the step structure (numbering, counts,
ranks); the samples each rank consumed; the batch tensors built from them. (A resume that replays,
skips or loses state: resume.py.)

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

import json

from ddp_parity.compare import relations
from ddp_parity.compare.causes.base import (
    Cause,
    Context,
    Evidence,
    aligned_records,
    config_values,
    finding,
    fmt,
    recording,
)
from ddp_parity.compare.causes.fed import FED_KINDS, fed_alike
from ddp_parity.compare.causes.hooked import global_rng_drawn, global_rng_equal, global_rng_moved_apart, rng_at
from ddp_parity.compare.causes.implicated import shared_refuted
from ddp_parity.compare.causes.initial_state import init_apart
from ddp_parity.compare.causes.per_step import micro_batch_counts
from ddp_parity.compare.causes.samples import (
    UNRECORDED,
    consumed_later,
    feeding_iterator,
    last_pass,
    other,
    other_loaders_apart,
    pass_epochs,
    pass_epochs_agree,
    remade_at_epoch,
    replayed_from,
    restarted_early,
    sampler_args_apart,
    sampler_differences,
    sampler_epochs_apart,
    samplers_identical,
    samplers_recorded,
    set_epoch_calls,
    skipped_batch,
    step_across_passes,
    step_ends_pass,
    unshuffled_side,
)
from ddp_parity.compare.causes.seed_records import seeds_beside
from ddp_parity.compare.causes.seeds import SAMPLER_SEED, evaluated_ranks_apart, other_generator_finding, seeds_up_to
from ddp_parity.compare.evaluations import validations
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.walk import comparable_samples, identical, records_of, sample_key
from ddp_parity.trace_files import fact_items, read_hook_facts

# ---------------------------------------------------------------------------------------------
# step numbers offset by a constant: a recording, not a training difference


def check_step_offset(ctx: Context) -> Finding | None:
    first = ctx.earliest
    if first is None or first["quantity"] != "numbering":
        return None
    offset = _step_offset(ctx, first["rank"])
    if offset is None:
        return None
    side = "a" if offset > 0 else "b"  # the side whose numbers run ahead
    # the origins as the records show them: 0 vs 1 only where the offset is 1
    origins = "(0 vs 1)" if abs(offset) == 1 else f"{abs(offset)} apart (a step counter carried over, or counted on)"
    facts = (
        f"Every record matches once the steps are aligned, but {ctx.label(side)} numbers them "
        f"{abs(offset)} higher (step {first['step_numbers']['a']} vs {first['step_numbers']['b']} for the "
        f"same optimizer step): the sides count steps from different origins {origins}, not a training "
        "difference."
    )
    evidence = {"step_offset": offset, "step_numbers": ctx.both(*first["step_numbers"].values())}
    return finding(ctx, RECORDED_STEP_OFFSET, first["step"], first["rank"], evidence, facts)


def _step_offset(ctx: Context, rank) -> int | None:
    """a's step - b's step when it is constant and every other value of the records agrees."""
    offset = None
    n = 0
    for ra, rb in zip(records_of(ctx.run("a"), rank), records_of(ctx.run("b"), rank)):
        d = ra["step"] - rb["step"]
        if offset is None:
            offset = d
        if d != offset or d == 0:
            return None
        for key in ("loss", "grad_norm", "lr", "indices", "param_digest"):
            if not identical(ra.get(key), rb.get(key)):
                return None
        n += 1
    return offset if n else None


RECORDED_STEP_OFFSET = recording(
    check_step_offset,
    fix=(
        "Number optimizer steps the same way on both sides: the recorder's `step` is the count of "
        "optimizer steps done, starting at 1 after the first (Lightning's trainer.global_step after the step)"
    ),
    doc="Step numbers offset by a constant with every record equal: the sides count steps from another origin.",
)


# ---------------------------------------------------------------------------------------------
# the step structure: ranks, counts, numbering


def check_structure(ctx: Context) -> Finding | None:
    first = ctx.earliest
    if first is None or first["quantity"] not in ("ranks", "count", "numbering"):
        return None
    return step_count_finding(ctx, first)


def step_count_finding(ctx: Context, f: dict) -> dict:
    walk = ctx.walk
    counts = ctx.both(dict(sorted(walk.counts["a"].items())), dict(sorted(walk.counts["b"].items())))
    evidence = {"steps": counts}
    if walk.unreadable:
        evidence["unreadable_traces"] = walk.unreadable
    desc = "; ".join(f"{side}: " + ", ".join(f"rank {r} {n}" for r, n in c.items()) for side, c in counts.items())
    empty = [ctx.label(s) for s in ("a", "b") if not any(walk.counts[s].values())]
    if empty:
        facts = f"{' and '.join(empty)} recorded no step at all (steps per rank: {desc})."
        return finding(
            ctx,
            STEP_COUNT_EMPTY,
            None if f is None else f.get("step"),
            f and f.get("rank"),
            evidence,
            facts,
            side=" and ".join(empty),
        )
    situation = f["quantity"] if f["quantity"] in STEP_COUNT_WORDS else "count"
    if f["quantity"] == "ranks":
        facts = (
            f"{ctx.label(f['side'])} has no trace for rank {f['rank']}: the runs did not use the same ranks ({desc})."
        )
    elif f["quantity"] == "numbering":
        evidence["step_numbers"] = ctx.both(*f["step_numbers"].values())
        facts = (
            f"After {walk.steps_equal_before} matching step(s) the step numbers part ways on rank {f['rank']} "
            f"({f['step_numbers']['a']} vs {f['step_numbers']['b']}): the sides count optimizer steps differently "
            "(per micro-batch vs per optimizer step, or a step skipped)."
        )
    else:
        facts = f"The runs recorded different numbers of steps ({desc}); step {f['step']} is missing on some rank."
        uneven = [side for side, c in counts.items() if len(set(c.values())) > 1]
        longer = _stops_later(ctx, counts)
        if not uneven and longer is not None:
            side, extra = longer
            evidence["stops_later"] = {"side": ctx.label(side), "extra_steps": extra}
            facts += (
                f" Every step both sides ran matches ({walk.steps_equal_before} on every rank); {ctx.label(side)} ran "
                f"{extra} more at the end on every rank: the sides stop at another step, nothing else."
            )
            return finding(ctx, STEP_COUNT_STOP, f.get("step"), f.get("rank"), evidence, facts, side=ctx.label(side))
        if uneven:
            facts += (
                f" On {' and '.join(uneven)} the ranks themselves disagree, which in DDP means a rank ran more "
                "batches than its peers: its extra step's gradient all-reduce has no partner."
            )
    why, fix = STEP_COUNT_WORDS[situation]
    return finding(ctx, STEP_COUNT, f.get("step"), f.get("rank"), evidence, facts, why=why, fix=fix)


def _stops_later(ctx: Context, counts: dict) -> tuple[str, int] | None:
    """(side, k): every rank of one side ran k more steps than the other's, and every step both ran matched."""
    per_side = [list(c.values()) for c in counts.values()]
    if any(len(set(v)) != 1 for v in per_side) or len(per_side[0]) != len(per_side[1]):
        return None
    n_a, n_b = per_side[0][0], per_side[1][0]
    if n_a == n_b or ctx.walk.steps_equal_before != min(n_a, n_b):  # lock-step positions, every rank
        return None
    side, extra = ("a", n_a - n_b) if n_a > n_b else ("b", n_b - n_a)
    if _ends_on_a_short_batch(ctx.run(side)):
        return None  # a short last batch kept on one side, dropped on the other (drop_last): step_count's own
    return side, extra


def _ends_on_a_short_batch(run) -> bool:
    """Whether rank 0's last step consumed fewer recorded indices than its first."""
    sizes = [len(r["indices"]) for r in records_of(run, 0) if isinstance(r.get("indices"), list)]
    return bool(sizes) and sizes[-1] < sizes[0]


STEP_COUNT_STOP = Cause(
    "step_count.stop",
    check_structure,
    why="The two runs train alike; one goes on longer: its stopping rule counts otherwise (max_steps against a "
    "loop that runs max_iters + 1 iterations, from 0 to max_iters inclusive; max_epochs against max_steps).",
    fix="Stop {side} at the other side's last step, or the other side at {side}'s: the same max_steps (a loop "
    "`while True: ... iter_num += 1; if iter_num > max_iters: break` runs max_iters + 1 steps).",
    doc="Every step both sides ran matches and one side ran more at the end on every rank: another stopping rule.",
)
# step_count's words by what the records show: a rank without a trace and another numbering are no
# matter of sharding, so only a count that differs gets the sampler's words
STEP_COUNT_WORDS = {
    "count": (
        "DistributedSampler pads the dataset so every rank gets ceil(N / world_size) samples (or drops "
        "the tail with drop_last=True) and the DataLoader's drop_last decides whether a short last "
        "batch is a step; max_steps/max_epochs and accumulation leftovers at an epoch's end change the "
        "count too (Lightning #19987, #21808).",
        "Shard with DistributedSampler on both sides (same drop_last for sampler and DataLoader, same "
        "batch size) and stop on the same max_epochs / max_steps.",
    ),
    "ranks": (
        "Every rank of a DDP run records its own trace: a rank without one ran under another world size, "
        "failed before its first record, or wrote elsewhere.",
        "Run both sides with the same world size and a recorder on every rank (its log says why a rank "
        "recorded nothing), then compare again.",
    ),
    "numbering": (
        "The recorder's step is the count of optimizer steps: numbers that part after equal steps count "
        "something else on one side (micro-batches, or a step the other side skipped).",
        "Number the records by optimizer steps on both sides: record() once per optimizer.step(), numbered from "
        "1 (Lightning's trainer.global_step after the step), never per micro-batch.",
    ),
}
STEP_COUNT = Cause(
    "step_count",
    check_structure,
    why="{why}",
    fix="{fix}",
    doc="Steps per rank per side differ, or their numbers part: sharding, drop_last, max_steps, "
    "accumulation leftovers (Lightning #19987, #21808).",
)
STEP_COUNT_EMPTY = Cause(
    "step_count.empty",
    check_structure,
    why="That run failed or was stopped before its first optimizer step finished, so there is nothing to compare yet.",
    fix="Look at {side}'s log for the error (a rank that failed at start-up, a wrong run directory), "
    "fix it and compare again.",
    doc="A side recorded no step at all.",
)


# ---------------------------------------------------------------------------------------------
# the samples


def check_samples(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "samples":
        return None
    step, rank, epoch = f["step"], f["rank"], f.get("epoch")
    evidence = {"epoch": epoch, "indices": ctx.both(f["a"], f["b"])}
    restarted = restarted_early(ctx, rank, step)
    if restarted is not None:  # before the epochs: a pass cut short parts the epochs and the place in the pass
        return _restarted_early(ctx, f, evidence, restarted)
    counts = micro_batch_counts(ctx, rank, step)
    if counts is not None and counts["a"] != counts["b"]:  # before the epochs: a step that ends in another epoch
        return _accumulation_apart(ctx, f, evidence, counts)  # records the loop's epoch apart, not the sampler's
    remade = remade_at_epoch(ctx, rank, step)
    if remade is not None:  # before the epochs too: a pass begun on one side only parts the epochs the records carry
        return _remade_at_epoch(ctx, f, evidence, remade)
    loop_epochs_apart = "epoch_b" in f and isinstance(epoch, int) and isinstance(f["epoch_b"], int)
    if loop_epochs_apart and pass_epochs_agree(ctx, rank, step) is None:
        return _epochs_apart(ctx, f, evidence)
    skipped = skipped_batch(ctx, rank, step)
    if skipped is not None:
        side, k = skipped
        evidence["skipped_at"] = {"side": ctx.label(side), "step": step, "batches": k}
        facts = (
            f"The samples are equal up to step {step}; from step {step} on, rank {rank} of {ctx.label(side)} consumes "
            f"at each step what the other side consumed {k} step(s) later: {ctx.label(side)} drew {k} batch(es) at "
            f"step {step} without an optimizer step for them."
        )
        return finding(ctx, DATA_SKIPPED, step, rank, evidence, facts, side=ctx.label(side), k=k, step=step)
    repeats = {s: _repeats_first_epoch(ctx.run(s), rank, epoch) for s in ("a", "b")}
    if repeats["a"] != repeats["b"]:
        stuck = "a" if repeats["a"] else "b"
        evidence["repeating_side"] = ctx.label(stuck)
        facts = (
            f"In epoch {epoch} {ctx.label(stuck)} replays its first epoch: from step {step} rank {rank} consumes "
            f"exactly the {_what_was_recorded(ctx.run(stuck), rank)}, in exactly the order, of its first epoch, while "
            f"{ctx.label('b' if stuck == 'a' else 'a')} draws a new permutation."
        )
        return _set_epoch_finding(ctx, step, rank, evidence, facts, stuck)
    stuck_passes = _sampler_epoch_stuck(ctx, rank, step)
    if stuck_passes is not None:
        stuck, epochs = stuck_passes
        evidence["pass_epochs"] = ctx.both(epochs["a"], epochs["b"])
        klass = epochs["class"]
        facts = (
            f"At step {step} rank {rank} consumed other samples. Each pass over the training DataLoader began with its "
            f"sampler ({klass}) at epoch {', '.join(map(str, epochs[stuck]))} on {ctx.label(stuck)}, at "
            f"{', '.join(map(str, epochs[other(stuck)]))} on {ctx.label(other(stuck))} (the hooks' DataLoader "
            f"iterators): {ctx.label(stuck)} never moves its sampler's epoch, so each of its passes replays the "
            "first's order."
        )
        return _set_epoch_finding(ctx, step, rank, evidence, facts, stuck)
    drawn_apart = sampler_epochs_apart(ctx, rank, step)
    if drawn_apart is not None:
        return _pass_epoch_apart(ctx, step, rank, evidence, drawn_apart)
    facts = _samples_apart_said(ctx, f, evidence)
    ahead = _samples_ahead(ctx, rank, step, epoch)
    if ahead is not None:
        evidence["relation"] = ahead.to_json()
        facts += f" {ahead.sentence}"
        return finding(ctx, DATA_AHEAD, step, rank, evidence, facts, side=ahead.side, k=ahead.value)
    unshuffled = unshuffled_side(ctx, rank, epoch)
    if unshuffled is not None:
        side, shape = unshuffled
        evidence["order"] = {ctx.label(side): shape, ctx.label(other(side)): "a permutation"}
        facts += (
            f" In epoch {epoch} {ctx.label(side)}'s rank {rank} takes the samples in {shape}, "
            f"{ctx.label(other(side))}'s in a permutation."
        )
        sampler = sampler_differences(ctx)
        if sampler:
            evidence["sampler_differences"] = sampler
            facts += " The recorded samplers: " + "; ".join(sampler) + "."
        return finding(ctx, DATA_NOT_SHUFFLED, step, rank, evidence, facts, side=ctx.label(side))
    evaluated = _evaluated_before_on_one_side(ctx, rank, step)
    if evaluated is not None:
        side, steps, equal_ranks = evaluated
        evidence["validation_steps_one_side"] = {"side": ctx.label(side), "steps": steps}
        evidence["ranks_equal_throughout"] = equal_ranks
        facts += (
            f" Only rank {rank}'s samples differ: rank(s) {', '.join(map(str, equal_ranks))} consumed the same samples "
            f"at every step on both sides. {ctx.label(side)} validated at step(s) {', '.join(map(str, steps))}, "
            f"before step {step}, and the other side did not."
        )
        values = {"side": ctx.label(side), "rank": rank}
        return finding(ctx, DATA_EVALUATION, step, rank, evidence, facts, **values)
    shared = _shared_across_ranks(ctx, step)
    if shared is not None and shared_refuted(ctx, *shared, step):
        side, ranks = shared  # the same indices, other batches: positions in each rank's own dataset
        evidence["same_positions_other_batches"] = {"side": ctx.label(side), "ranks": ranks}
        facts += (
            f" On {ctx.label(side)}, ranks {' and '.join(map(str, ranks))} recorded the same indices at step {step} "
            "but other batch digests: the indices are positions in each rank's own dataset (a partition), not the "
            "same samples."
        )
        shared = None
    if shared is not None:
        side, ranks = shared
        evidence["shared_by_ranks"] = {"side": ctx.label(side), "ranks": ranks}
        names = " and ".join(str(r) for r in ranks)
        facts += f" On {ctx.label(side)}, ranks {names} consumed the very same samples at step {step}."
        how = SHARD_HOW[_sampling_mechanism(ctx, side)]
        return finding(ctx, DATA_SHARED, step, rank, evidence, facts, side=ctx.label(side), ranks=names, how=how)
    unrecorded = [ctx.label(s) for s in ("a", "b") if not samplers_recorded(ctx, s)]
    if unrecorded:
        # every sentence rests on a record: a side without a sampler record cannot be said to agree
        evidence["sampler_unrecorded"] = unrecorded
        iterable = [s for s in ("a", "b") if _sampling_mechanism(ctx, s) == "iterable"]
        streams = [ctx.label(s) for s in iterable]
        drawn = any(global_rng_drawn(ctx, s, rank) for s in iterable)  # a dataset drawing its samples moves it
        rng_recorded = rng_at(ctx, step, rank) is not None  # unrecorded: the draw stays a possibility, said as one
        if streams and rng_recorded and not (drawn and global_rng_moved_apart(ctx, step, rank)):
            # the base-seed draw is not blamed where the recorded digests show no loop drawing, or no state moved apart
            facts += IDLE_GENERATOR.format(streams=" and ".join(streams), step=step)
        elif streams:
            facts += (
                f" {' and '.join(streams)}'s loader reads an IterableDataset (the recorded sampler is "
                "_InfiniteConstantSampler): each time such a DataLoader is iterated it first draws one number from "
                "the global generator (its workers' base seed), so a dataset that draws its samples from the global "
                "generator starts one draw later than a loop that draws them by hand: give that DataLoader a "
                "generator of its own (DataLoader(..., generator=torch.Generator())) to leave the global one alone."
            )
        recorded = [ctx.label(s) for s in ("a", "b") if samplers_recorded(ctx, s)]
        sampler = sampler_differences(ctx)
        if recorded and sampler:  # the other side's sampler shown, side by side
            evidence["sampler_differences"] = sampler
            facts += " The recorded samplers: " + "; ".join(sampler) + "."
        how = UNRECORDED_HOW["one" if recorded else "none"].format(side=" and ".join(recorded))
        # the global generator advised only where it is recorded apart and something in a loop draws from it
        unrecorded_rng = rng_at(ctx, step, rank) is None  # unknown: the advice stays
        drawing = unrecorded_rng or any(global_rng_drawn(ctx, s, rank) for s in ("a", "b"))
        rng = (
            ""
            if global_rng_equal(ctx) or not drawing
            else " (the global RNG too: build the data and the model in the same order)"
        )
        sides = " and ".join(unrecorded)
        return finding(ctx, DATA_ORDER_UNRECORDED, step, rank, evidence, facts, sides=sides, how=how, global_rng=rng)
    sampler = sampler_differences(ctx)
    if sampler:
        evidence["sampler_differences"] = sampler
        text = "; ".join(sampler) + "." + _epochs_begin_said(ctx, rank, evidence) + _global_generator_too(ctx, rank)
    else:
        text = "they agree, so the DataLoader is built or iterated differently."
    # advice never asks to make equal what both sides recorded equal
    classes = _sampler_classes(ctx)
    own = _own_sampler_class(ctx)
    if samplers_identical(ctx):  # the set_epoch value too, unless the passes' sampler epochs were recorded alike
        fix = DATA_ORDER_FIX["same_epochs" if "pass_epochs" in evidence else "same"]
    elif classes:  # other kinds of sampler: a DistributedSampler is no fix for a loop that samples otherwise
        fix = DATA_ORDER_FIX["kinds"].format(a=ctx.names[0], b=ctx.names[1], class_a=classes[0], class_b=classes[1])
    elif own is not None:  # the same sampler of the program's own, built otherwise: not a DistributedSampler
        fix = DATA_ORDER_FIX["arguments"].format(sampler=own)
    else:
        fix = DATA_ORDER_FIX["differ"]
    return finding(ctx, DATA_ORDER, step, rank, evidence, facts, sampler=text, fix=fix)


def _samples_apart_said(ctx: Context, f: dict, evidence: dict) -> str:
    """The opening facts of a finding of other samples at the first differing step: the samples side by side, the
    loops' epochs where they differ while the samplers' agree, and weights apart that no gradient moved."""
    step, rank, epoch = f["step"], f["rank"], f.get("epoch")
    apart = isinstance(epoch, int) and isinstance(f.get("epoch_b"), int) and f["epoch_b"] != epoch
    facts = (
        f"The first difference is in the data: at step {step}{'' if apart else f' (epoch {epoch})'} rank {rank} "
        f"consumed other samples on {ctx.names[0]} than on {ctx.names[1]} ({fmt(f['a'])} vs {fmt(f['b'])})."
    )
    if apart:
        facts += _loop_epochs_said(ctx, f, evidence)
    if _weights_differ_without_gradients(ctx, rank, step):
        init = init_apart(ctx, rank)
        evidence["initial_weights_differ" if init is not False else "moved_without_gradients"] = True
        facts += (
            f" The parameters differ too after step {step}, the first, though every gradient of it is zero on both "
            f"sides at the same lr: no sample moved them, so {WITHOUT_GRADIENTS[init]}."
        )
    return facts


def _loop_epochs_said(ctx: Context, f: dict, evidence: dict) -> str:
    """The records' epochs apart at the step, said as each loop's own count; beside them the sampler epoch each
    side's pass drew its order at, where the hooks recorded it, and the set_epoch calls: a sampler-epoch difference
    is read from those, never from the loop's `epoch` field alone."""
    step, rank = f["step"], f["rank"]
    evidence["epochs"] = ctx.both(f.get("epoch"), f["epoch_b"])
    facts = (
        f" {ctx.names[0]} records step {step} in epoch {f.get('epoch')} and {ctx.names[1]} in epoch {f['epoch_b']} "
        "(each loop's own epoch count)"
    )
    sampler_epoch = pass_epochs_agree(ctx, rank, step)
    if sampler_epoch is None:
        drawn = {s: pass_epochs(ctx, s, rank, step) for s in ("a", "b")}
        if None in drawn.values():
            return facts + "; the samplers' own epochs were not recorded on both sides."
        last = {s: d[0][-1] for s, d in drawn.items()}
        evidence["pass_epochs_apart"] = ctx.both(last["a"], last["b"])
        return facts + (
            f", and the last pass each side began by step {step} drew its order with its sampler at epoch "
            f"{last['a']} on {ctx.names[0]} and {last['b']} on {ctx.names[1]} (the hooks' DataLoader iterators)."
        )
    evidence["pass_epochs"] = ctx.both(sampler_epoch, sampler_epoch)
    facts += (
        f", while the pass each side trained step {step} from drew its order with its sampler at epoch "
        f"{sampler_epoch} on both sides (the hooks' DataLoader iterators): the samplers' epochs are not apart."
    )
    return facts + _set_epoch_said(ctx, rank, step, evidence, even_none=True)


def _accumulation_apart(ctx: Context, f: dict, evidence: dict, counts: dict) -> Finding:
    """A step accumulated another number of micro-batches on each side: the boundaries differ. Where one side's step
    took the last batch of a pass and the first of the next (an epoch's left-over carried over) and the other's ended
    with the pass (a step at the epoch's last batch), said so from the hooks' iterators, with both ways to match."""
    step, rank = f["step"], f["rank"]
    facts = _samples_apart_said(ctx, f, evidence)
    evidence["micro_batches"] = ctx.both(counts["a"], counts["b"])
    facts += (
        f" At step {step} {ctx.names[0]} stepped its optimizer after {counts['a']} micro-batch(es) and "
        f"{ctx.names[1]} after {counts['b']} (the recorded micro_batches): the accumulation boundaries differ."
    )
    found = _epoch_end_apart(ctx, rank, step)
    if found is None:
        return finding(ctx, DATA_ACCUMULATION, step, rank, evidence, facts + seeds_beside(ctx), **ACCUMULATION["count"])
    carried, ends, across, ended = found
    evidence["epoch_end"] = {
        "carried_over": {"side": ctx.label(carried), **across},
        "stepped_at_end": {"side": ctx.label(ends), **ended},
    }
    facts += (
        f" {ctx.label(carried)}'s step {step} took the last batch of its pass over {across['dataset']} made before "
        f"step {across['made']} (all {across['batches']} of its batches given) and the first of its next pass, made "
        f"before step {step}; {ctx.label(ends)}'s step {step} ended with the last of the {ended['batches']} batches "
        f"of its pass made before step {ended['made']}, its next pass made "
        f"{'before step ' + str(ended['next_made']) if ended['next_made'] is not None else 'never'} (the hooks' "
        "DataLoader iterators)."
    )
    prefix = _prefix_of(ctx, rank, step, ends, carried)
    if prefix is not None:
        evidence["prefix_of"] = {"side": ctx.label(ends), "of": ctx.label(carried), "samples": prefix}
        facts += (
            f" {ctx.label(ends)}'s {prefix[0]} samples at step {step} are the first {prefix[0]} of "
            f"{ctx.label(carried)}'s {prefix[1]}."
        )
    loop_epochs = evidence.get("epochs") or {}
    later = loop_epochs.get(ctx.label(carried), -1) > loop_epochs.get(ctx.label(ends), -1)
    if "pass_epochs" in evidence and later:  # the loops' epochs apart, the samplers' alike (said above)
        facts += (
            f" The epochs apart are the loops' counts ({ctx.label(carried)} records the step in the epoch where it "
            "ends): calling set_epoch alike changes no boundary."
        )
    sides = {"carried": ctx.label(carried), "ends": ctx.label(ends)}
    words = {k: v.format(**sides) for k, v in ACCUMULATION["epoch_end"].items()}
    return finding(ctx, DATA_ACCUMULATION, step, rank, evidence, facts + seeds_beside(ctx), **words)


def _epoch_end_apart(ctx: Context, rank, step) -> tuple[str, str, dict, dict] | None:
    """(the side whose step took batches of two passes, the side whose step ended with its pass, what each did) where
    the hooks' iterators show both at `step`; None otherwise."""
    for carried in ("a", "b"):
        across = step_across_passes(ctx, carried, rank, step)
        ended = step_ends_pass(ctx, other(carried), rank, step) if across is not None else None
        if ended is not None:
            return carried, other(carried), across, ended
    return None


def _prefix_of(ctx: Context, rank, step, short_side: str, long_side: str) -> tuple[int, int] | None:
    """(its count, theirs) where `short_side`'s indices at `step` are the first of `long_side`'s (the same samples,
    fewer of them); None otherwise."""
    pair = next(((ra, rb) for ra, rb in aligned_records(ctx, rank) if ra.get("step") == step), None)
    if pair is None:
        return None
    mine, theirs = (pair[0 if s == "a" else 1].get("indices") for s in (short_side, long_side))
    if not isinstance(mine, list) or not isinstance(theirs, list) or not mine or len(mine) >= len(theirs):
        return None
    return (len(mine), len(theirs)) if theirs[: len(mine)] == mine else None


def _set_epoch_finding(ctx: Context, step, rank, evidence: dict, facts: str, stuck: str) -> Finding:
    """set_epoch in the words the stuck side's sampler allows: a sampler the hooks recorded without set_epoch
    (has_set_epoch false) is never told to call it; it gives each new iterator the order it holds."""
    sampler = _pass_sampler(ctx, stuck, rank, step)
    without = sampler.get("has_set_epoch") is False
    if without:
        evidence["sampler_has_set_epoch"] = {ctx.label(stuck): False}
    values = {"side": ctx.label(stuck), "klass": sampler.get("class", "its sampler")}
    said = {k: v.format(**values) for k, v in SET_EPOCH_WORDS["none" if without else "set_epoch"].items()}
    return finding(ctx, SET_EPOCH, step, rank, evidence, facts, **said)


def _own_sampler_class(ctx: Context) -> str | None:
    """The one sampler class both sides recorded on every rank where it is no DistributedSampler (a sampler of the
    program's own, BasicSR's EnlargedSampler): its fix is its own arguments, not a DistributedSampler's."""
    if not all(samplers_recorded(ctx, s) for s in ("a", "b")):
        return None
    classes = {f["sampler"].get("class") for s in ("a", "b") for f in ctx.meta(s).get("ranks") or []}
    klass = classes.pop() if len(classes) == 1 else None
    return klass if isinstance(klass, str) and klass != "DistributedSampler" else None


def _second_epoch_begins(run, rank) -> tuple[int, int, int] | None:
    """(the first record's step, its epoch, the step whose record first carries another epoch) on `rank`: the
    steps one epoch of the sampler lasted; None where the records never leave their first epoch."""
    first = None
    for record in records_of(run, rank):
        step, epoch = record.get("step"), record.get("epoch")
        if not isinstance(step, int) or not isinstance(epoch, int):
            return None
        if first is None:
            first = (step, epoch)
        elif epoch != first[1]:
            return first[0], first[1], step
    return None


def _epochs_begin_said(ctx: Context, rank, evidence: dict) -> str:
    """Where both sides started at the same epoch and the next begins at other steps (the records' epochs), said
    with the epoch's length in steps on each side: samplers of other lengths show there, whatever their order."""
    begun = {s: _second_epoch_begins(ctx.run(s), rank) for s in ("a", "b")}
    if None in begun.values() or begun["a"][:2] != begun["b"][:2] or begun["a"][2] == begun["b"][2]:
        return ""
    start, epoch = begun["a"][:2]
    evidence["next_epoch_begins"] = ctx.both(begun["a"][2], begun["b"][2])
    lengths = {s: begun[s][2] - start for s in ("a", "b")}
    return (
        f" The records' epochs show the samplers' lengths: epoch {epoch + 1} begins at step {begun['a'][2]} on "
        f"{ctx.names[0]} and at step {begun['b'][2]} on {ctx.names[1]} ({lengths['a']} and {lengths['b']} steps an "
        "epoch)."
    )


def rank_rng_unrecorded(ctx: Context, rank) -> bool:
    try:
        return rng_at(ctx, 1, rank) is None
    except (TypeError, ValueError, OSError, AttributeError):  # a run's files unreadable as records
        return True


def _global_generator_too(ctx: Context, rank) -> str:
    """Where torch's global generator was recorded in another state at step 1's start too, and a side's sampler is
    one the records cannot say draws from it or not (any but a DistributedSampler): both causes named, and how to
    tell them apart. Only at step 1: later, the samples drawn apart move what draws after them."""
    first = ctx.earliest or {}
    if first.get("step") != 1 or rank_rng_unrecorded(ctx, rank) or global_rng_equal(ctx, 1, rank):
        return ""
    ranks = [ctx.meta(s).get("ranks") or [] for s in ("a", "b")]
    classes = {s: (r[rank].get("sampler") or {}).get("class") if rank < len(r) else None for s, r in zip("ab", ranks)}
    unknown = {s: c for s, c in classes.items() if c and c not in OWN_GENERATOR_SAMPLERS}
    if not unknown:
        return ""
    if len(unknown) == 2 and classes["a"] == classes["b"]:
        said = f"the {classes['a']} (both sides') draws"
    else:
        said = " and ".join(f"{ctx.label(s)}'s {c}" for s, c in unknown.items()) + (
            " draw" if len(unknown) > 1 else " draws"
        )
    return GENERATOR_TOO.format(rank=rank, unknown=said)


# samplers whose order never draws from the global generator: a generator of their own, seeded by seed + epoch
OWN_GENERATOR_SAMPLERS = ("DistributedSampler",)
# the second candidate beside other samplers, where torch's global generator was apart at step 1's start too
GENERATOR_TOO = (
    " torch's global generator was in another state too at step 1's start on rank {rank}: a sampler that draws its "
    "order from it (a RandomSampler without generator=) orders otherwise from that alone, one that seeds a generator "
    "of its own (a DistributedSampler, by its seed and epoch) does not, and the records do not say whether {unknown} "
    "from it. To tell them apart, build the same sampler alike on both sides: indices still apart at step 1 are then "
    "the global generator's (what draws from it before step 1), equal ones were the samplers'."
)


def _sampler_classes(ctx: Context) -> tuple[str, str] | None:
    """Each side's sampler class where both recorded one on every rank and the classes differ."""
    if not all(samplers_recorded(ctx, s) for s in ("a", "b")):
        return None
    ranks = [ctx.meta(s).get("ranks") or [] for s in ("a", "b")]
    for fa, fb in zip(*ranks):
        ca, cb = fa["sampler"].get("class"), fb["sampler"].get("class")
        if ca and cb and ca != cb:
            return ca, cb
    return None


def _restarted_early(ctx: Context, f: dict, evidence: dict, found: dict) -> Finding:
    """One side made a new iterator over its training DataLoader before the last one ran out, the other went on: the
    hooks' iterators side by side, then what follows from it (the epochs apart, where the other side drew the same
    samples) and every set_epoch call made up to the step."""
    step, rank, side = f["step"], f["rank"], found["side"]
    mine, theirs, going = ctx.label(side), ctx.label(other(side)), found["other"]
    evidence["restarted"] = {"side": mine, **{k: found[k] for k in ("dataset", "made", "batches", "length", "anew")}}
    evidence["went_on"] = {"side": theirs, **going}
    facts = (
        f"At step {step} rank {rank} consumed other samples: before step {found['anew']} {mine} made a new "
        f"iterator over its training DataLoader ({found['dataset']}) while the one it trained from, made before step "
        f"{found['made']}, had given {found['batches']} of the {found['length']} batches its loader holds (dropped "
        f"with batches left), and {theirs}'s iterator over it, made before step {going['made']}, {_went_on(going)} "
        "(the hooks' DataLoader iterators)."
    )
    facts += _epochs_follow(ctx, f, evidence)
    facts += _set_epoch_said(ctx, rank, step, evidence)
    later = consumed_later(ctx, rank, step, side)
    if later is not None:
        evidence["same_samples_at"] = {mine: step, theirs: later}
        facts += f" {mine}'s samples at step {step} are {theirs}'s at step {later}."
    return finding(ctx, DATA_RESTARTED, step, rank, evidence, facts, side=mine, other=theirs, n=found["batches"])


def _remade_at_epoch(ctx: Context, f: dict, evidence: dict, found: dict) -> Finding:
    """One side made a new iterator over its training DataLoader after a whole pass, the other kept its iterator
    going past its loader's length: the hooks' iterators side by side, whether the new iterator gave its side's own
    earlier samples again (the order restarted), the epochs apart as their consequence, every set_epoch call up to
    the step and whether the sampler has a set_epoch at all."""
    step, rank, side = f["step"], f["rank"], found["side"]
    mine, theirs, kept = ctx.label(side), ctx.label(other(side)), found["other"]
    evidence["remade"] = {"side": mine, **{k: found[k] for k in ("dataset", "made", "batches", "length", "anew")}}
    evidence["kept"] = {"side": theirs, **kept}
    facts = (
        f"At step {step} rank {rank} consumed other samples: before step {found['anew']} {mine} made a new iterator "
        f"over its training DataLoader ({found['dataset']}), the one it trained from (made before step "
        f"{found['made']}) having given the {found['length']} batches its loader holds, while {theirs} kept the "
        f"iterator it made before step {kept['made']}: it {_kept_going(kept)} (the hooks' DataLoader iterators)."
    )
    facts += _order_of_the_new_iterator(ctx, side, rank, found, evidence)
    if found["global_draw"]:  # the generators part at that step too, whatever else drew from them
        evidence["remade"]["global_draw"] = True
        facts += (
            f" Making it drew one number from {mine}'s global generator (its workers' base seed: the loader has no "
            f"generator= of its own); {theirs} made no iterator there to draw it."
        )
    facts += _epochs_follow(ctx, f, evidence, "no set_epoch value puts the two loops' iterators back in step")
    facts += _set_epoch_said(ctx, rank, step, evidence, even_none=True)
    facts += _sampler_set_epoch_said(found["sampler"], evidence)
    return finding(ctx, DATA_REMADE, step, rank, evidence, facts, side=mine, other=theirs)


def _epochs_follow(ctx: Context, f: dict, evidence: dict, why: str | None = None) -> str:
    """The records' epochs apart at the step, said as following from how the iterators were taken (`why`: what
    the reader should know of them); nothing where a side records no epoch."""
    if not ("epoch_b" in f and isinstance(f.get("epoch"), int) and isinstance(f["epoch_b"], int)):
        return ""
    evidence["epochs"] = ctx.both(f["epoch"], f["epoch_b"])
    return (
        f" The epochs apart follow from it{f' ({why})' if why else ''}: at step {f['step']} {ctx.names[0]} records "
        f"epoch {f['epoch']} and {ctx.names[1]} epoch {f['epoch_b']}{_epoch_starts(ctx, f['rank'])}."
    )


def _kept_going(kept: dict) -> str:
    given = f"gave {kept['batches']} batches, past the {kept['length']} its loader holds (len(loader))"
    if kept["anew"] is None:
        return f"{given}, and no new one was made before the run ended"
    return f"{given} before a new one was made before step {kept['anew']}"


def _order_of_the_new_iterator(ctx: Context, side: str, rank, found: dict, evidence: dict) -> str:
    """What the new iterator's samples were: the side's own from its last iterator's start again (the sampler keeps
    its order and restarts it in each iterator), or another order; never "another epoch's" where they repeat."""
    mine, theirs = ctx.label(side), ctx.label(other(side))
    anew, made = found["anew"], found["made"]
    sampler = found["sampler"]
    named = f"{sampler.get('class', 'its sampler')}" + (
        ", given as batch_sampler=" if sampler.get("batch_sampler") else ""
    )
    n = replayed_from(ctx, side, rank, anew, made)
    if n is None:
        return (
            f" {mine}'s samples at step {anew} are not its own at step {made}: its new iterator drew an order of its "
            f"own ({named}), where {theirs}'s iterator went on with the order it held."
        )
    evidence["replayed"] = {"side": mine, "steps": list(range(anew, anew + n)), "as_at": list(range(made, made + n))}
    return (
        f" {mine}'s samples at {_steps(anew, n)} are its own at {_steps(made, n)}: the order restarted, its new "
        f"iterator giving again what its sampler ({named}) gave the last one from its start (the sampler keeps "
        f"its order from one iterator to the next), where {theirs}'s iterator went on past it; not another epoch's "
        "order."
    )


def _steps(first: int, n: int) -> str:
    return f"step {first}" if n == 1 else f"steps {first}-{first + n - 1}"


def _sampler_set_epoch_said(sampler: dict, evidence: dict) -> str:
    """Whether the new iterator's sampler has a set_epoch, as the hooks recorded it (`has_set_epoch`), into the
    evidence and as a sentence: no advice may ask to call a set_epoch the class does not have, and where the records
    do not say, they are said not to."""
    klass = sampler.get("class", "the sampler")
    has = sampler.get("has_set_epoch")
    evidence["sampler_has_set_epoch"] = has if isinstance(has, bool) else "unrecorded"
    if has is False:
        return f" {klass} has no set_epoch (the hooks' record of it): no epoch can be given to it."
    if has is None:
        return f" Whether {klass} has a set_epoch is unrecorded (records older than the hooks' has_set_epoch)."
    return ""


def _went_on(going: dict) -> str:
    given = f"{going['batches']} of its {going['length']}" if going["length"] else f"{going['batches']}"
    if going["anew"] is None:
        return f"went on: it gave {given} batches, and no new one was made before the run ended"
    return f"went on: it gave {given} batches before a new one was made before step {going['anew']}"


def _first_epochs(ctx: Context, rank) -> dict:
    """{a: epoch, b: epoch} of each side's first record on `rank` (None where unrecorded): where each side started."""
    return {s: next(iter(records_of(ctx.run(s), rank)), {}).get("epoch") for s in ("a", "b")}


def _epoch_starts(ctx: Context, rank) -> str:
    """The clause ", both having started at epoch e" where both sides' first records carry the same epoch, else
    "": a side's start is never called another when both started alike."""
    first = _first_epochs(ctx, rank)
    if isinstance(first["a"], int) and first["a"] == first["b"]:
        return f", both having started at epoch {first['a']}"
    return ""


def _set_epoch_said(ctx: Context, rank, step, evidence: dict, even_none: bool = False) -> str:
    """Every set_epoch call both sides made up to `step`, into the evidence and as a sentence; "" where none was
    recorded (unless `even_none`: then said as none on both)."""
    calls = {ctx.label(s): set_epoch_calls(ctx.run(s), rank, step) for s in ("a", "b")}
    if not any(calls.values()) and not even_none:
        return ""
    evidence["set_epoch"] = calls
    said = "; ".join(f"{k}: {v or 'none'}" for k, v in calls.items())
    return f" The set_epoch calls recorded up to step {step}: {said}."


def _epoch_start_clause(ctx: Context, side: str, first: dict) -> str:
    """What the fix says of where the epochs part: `side` starts at another epoch only where the `first` epochs
    ({a, b}: the first records', or the first passes') say so; where both started alike, they came apart later."""
    if not all(isinstance(e, int) for e in first.values()):
        return f"{ctx.label(side)} is at another epoch at this step"
    if first["a"] != first["b"]:
        return f"{ctx.label(side)} starts at another (epoch {first[side]} vs {first[other(side)]})"
    return f"both start at epoch {first['a']}, and {ctx.label(side)}'s moves on at other steps"


def _epochs_apart(ctx: Context, f: dict, evidence: dict) -> Finding:
    """The records of the first differing step carry other epochs and the samplers' epochs were not recorded alike
    (check_samples reaches here only then): each side's sampler set to its own epoch (set_epoch), side by side, with
    the set_epoch calls the hooks saw and the step the other side consumed the same samples at, where one did. Where
    neither side recorded a sampler epoch, the records' epochs are said as the loops' and both readings named."""
    step, rank = f["step"], f["rank"]
    epochs = {"a": f["epoch"], "b": f["epoch_b"]}
    side = "a" if epochs["a"] > epochs["b"] else "b"
    evidence["epochs"] = ctx.both(epochs["a"], epochs["b"])
    facts = (
        f"At step {step} rank {rank} {ctx.names[0]} records epoch {epochs['a']} and {ctx.names[1]} epoch {epochs['b']}"
    )
    if _sampler_epochs_unrecorded(ctx, rank, step):
        evidence["sampler_epochs_unrecorded"] = True
        facts += LOOP_EPOCHS_ALONE
    else:
        facts += ": the sides draw from other epochs of their samplers' order."
    facts += _set_epoch_said(ctx, rank, step, evidence)
    later = consumed_later(ctx, rank, step, side)
    if later is not None:
        evidence["same_samples_at"] = {ctx.label(side): step, ctx.label(other(side)): later}
        facts += f" {ctx.label(side)}'s samples at step {step} are {ctx.label(other(side))}'s at step {later}."
    notes, blamed = _set_epoch_notes(ctx, rank, step)
    side = blamed or side
    start = _epoch_start_clause(ctx, side, _first_epochs(ctx, rank))
    return _epoch_finding(ctx, step, rank, evidence, facts + notes, start=start, epoch=epochs[side])


def _sampler_epochs_unrecorded(ctx: Context, rank, step) -> bool:
    """Neither side recorded a sampler epoch up to `step`: no hooks' DataLoader iterator with its sampler's epoch,
    no set_epoch call. The records' epochs are then the loops' counts alone."""
    return all(pass_epochs(ctx, s, rank, step) is None and not set_epoch_calls(ctx.run(s), rank, step) for s in "ab")


# the records' epochs apart where no sampler epoch was recorded: two readings the records cannot tell apart
LOOP_EPOCHS_ALONE = (
    " (each loop's own epoch count; neither side recorded its sampler's epoch: no DataLoader iterator nor set_epoch "
    "call in the hooks' facts). Where each sampler was set to its loop's epoch, the sides draw from other epochs of "
    "their samplers' order; where a loop only counts its epochs otherwise over the same sampler order (a step "
    "recorded in the epoch where it ends), the records' epochs part alone. The sampler's epoch at each pass, which "
    "`ddp-parity record`'s hooks read, tells them apart."
)


def _pass_epoch_apart(ctx: Context, step, rank, evidence: dict, apart: dict) -> Finding:
    """The records' epochs agree (or say nothing), but the sampler that ordered the step's pass was at another epoch
    as the pass drew its first batch: a set_epoch missing on one side for a sampler Lightning does not set (a batch
    sampler of the program's own), or made after the pass had drawn its order."""
    epochs = {"a": apart["a"], "b": apart["b"]}
    side = "a" if epochs["a"] > epochs["b"] else "b"
    evidence["pass_epochs"] = ctx.both(epochs["a"], epochs["b"])
    facts = (
        f"At step {step} rank {rank} consumed other samples, and the pass over the training DataLoader it trained "
        f"from drew its order with the sampler ({apart['class']}) at epoch {epochs['a']} on {ctx.names[0]} and "
        f"{epochs['b']} on {ctx.names[1]} (the hooks read the epoch where each pass drew its order)."
    )
    facts += _set_epoch_said(ctx, rank, step, evidence, even_none=True)
    notes, blamed = _set_epoch_notes(ctx, rank, step)
    side = blamed or side
    # where each side's first pass drew its order: a record's epoch is the last set_epoch, not always the pass's
    first = {s: (pass_epochs(ctx, s, rank, step) or ([None], ""))[0][0] for s in ("a", "b")}
    start = _epoch_start_clause(ctx, side, first)
    return _epoch_finding(ctx, step, rank, evidence, facts + notes, start=start, epoch=epochs[side])


def _epoch_finding(ctx: Context, step, rank, evidence: dict, facts: str, start: str, epoch) -> Finding:
    """data_order.epoch in the words the samplers allow: set_epoch advised only where no side trained `step` from a
    sampler the hooks recorded without one (has_set_epoch false); there, the passes over the loader named instead,
    since a record's epoch on a side without set_epoch is its pass."""
    samplers = {s: _pass_sampler(ctx, s, rank, step) for s in ("a", "b")}
    without = [s for s in ("a", "b") if samplers[s].get("has_set_epoch") is False]
    values = {"epoch": epoch, "start": start}
    if without:
        evidence["samplers_without_set_epoch"] = [ctx.label(s) for s in without]
        values["sides"] = " and ".join(ctx.label(s) for s in without)
        values["classes"] = " and ".join(sorted({str(samplers[s].get("class")) for s in without}))
    words = DATA_EPOCH_WORDS["passes" if without else "set_epoch"]
    said = {k: v.format(**values) for k, v in words.items()}
    return finding(ctx, DATA_EPOCH, step, rank, evidence, facts, **said)


def _pass_sampler(ctx: Context, side: str, rank, step) -> dict:
    """The sampler of the pass `side` trained `step` from, as the hooks' iterators recorded it ({} if none)."""
    began = last_pass(ctx, side, rank, step) or {}
    return began.get("sampler") if isinstance(began.get("sampler"), dict) else {}


def _set_epoch_notes(ctx: Context, rank, step) -> tuple[str, str | None]:
    """What the records say of how each side's pass got its epoch: a set_epoch made after the pass had drawn its
    order (Lightning makes an epoch's iterator, and draws its first batch, before on_train_epoch_start), and a batch
    sampler of the program's own that no set_epoch reached (Lightning sets the epoch of a DataLoader's `sampler` and
    of its batch sampler's `.sampler`, never of a batch sampler itself); and the side they name, if one."""
    notes, blamed = [], []
    for side in ("a", "b"):
        began = last_pass(ctx, side, rank, step)
        if began is None:
            continue
        calls = fact_items(read_hook_facts(ctx.run(side), rank), "set_epoch")
        late = [c for c in calls if isinstance(c.get("order"), int) and c["order"] > began["order"]]
        sampler = began.get("sampler") or {}
        late = [c for c in late if c.get("before_step") == began.get("before_step")]
        late = [c for c in late if c.get("epoch") != sampler.get("epoch")]  # another value than the pass drew with
        if late or (not calls and sampler.get("batch_sampler")):
            blamed.append(side)
        if late:
            notes.append(
                f" On {ctx.label(side)}, set_epoch({late[0].get('epoch')}) came after that pass had drawn its order "
                "(its DataLoader iterator was made first; Lightning makes an epoch's iterator before "
                "on_train_epoch_start): set the epoch before the iterator is made (where the DataLoader is built, "
                "train_dataloader(), for the first epoch)."
            )
        elif not calls and sampler.get("batch_sampler"):
            advised = NO_SET_EPOCH_NOTE.get(sampler.get("has_set_epoch"), NO_SET_EPOCH_NOTE[None])
            notes.append(
                f" On {ctx.label(side)} no set_epoch reached the {sampler.get('class')}, given as the DataLoader's "
                "batch_sampler: Lightning sets the epoch of a DataLoader's sampler and of its batch sampler's "
                f".sampler, never of a batch sampler itself{advised}."
            )
    return "".join(notes), (blamed[0] if len(blamed) == 1 else None)


# what a note on a batch sampler no set_epoch reached advises, by whether the hooks recorded that it has one: never
# a call its class does not have, and an unrecorded answer said so
NO_SET_EPOCH_NOTE = {
    True: "; call its set_epoch(epoch) yourself before each pass's iterator is made",
    False: "; this one has no set_epoch (the hooks' record of it): its order is its own, which no epoch given "
    "reaches, and a record's epoch there is its side's pass over the loader",
    None: "; if it has a set_epoch (the records do not say), call it yourself before each pass's iterator is made",
}


# what parted parameters no gradient moved, as far as the recorded init digests (init_params_sha256) say
WITHOUT_GRADIENTS = {
    True: "the initial weights differ (init_params_sha256 recorded apart on this rank)",
    False: "an update without gradients (weight decay) moved them apart: the initial weights are equal "
    "(init_params_sha256 recorded alike on this rank)",
    None: "the initial weights differ (or an update without gradients, weight decay, does; the traces hold no "
    "initial digest of both sides to show it directly)",
}


def _weights_differ_without_gradients(ctx: Context, rank, step) -> bool:
    """At the first recorded step: parameter digests that differ across the sides while both sides recorded
    a gradient norm of exactly 0, i.e. parameters the data could not have moved apart."""
    first = next(iter(aligned_records(ctx, rank)), None)
    if first is None or first[0].get("step") != step:
        return False
    ra, rb = first
    zero = all(r.get("grad_norm") == 0 for r in (ra, rb)) and ra.get("lr") == rb.get("lr")
    digests = ra.get("param_digest"), rb.get("param_digest")
    return zero and None not in digests and digests[0] != digests[1]


def _evaluated_before_on_one_side(ctx: Context, rank, step) -> tuple[str, list, list] | None:
    """(side, steps, ranks): one side alone validated before `step`, and every rank but `rank` consumed
    the same samples at every step on both sides (the evaluating rank's draws alone moved)."""
    steps = {s: {v.get("step") for v in validations(ctx.run(s))} for s in ("a", "b")}
    before = {s: sorted(x for x in steps[s] - steps[other(s)] if isinstance(x, int) and x < step) for s in steps}
    sides = [s for s in ("a", "b") if before[s]]
    world = ctx.meta("a").get("world_size")
    if len(sides) != 1 or not isinstance(world, int) or world < 2:
        return None
    equal = [r for r in range(world) if r != rank and _samples_equal_throughout(ctx, r)]
    if len(equal) != world - 1:
        return None
    return sides[0], before[sides[0]], equal


def _samples_equal_throughout(ctx: Context, rank) -> bool:
    pairs = [comparable_samples(ra, rb) for ra, rb in aligned_records(ctx, rank)]
    return bool(pairs) and all(a is not None and identical(a, b) for a, b in pairs)


def _samples_ahead(ctx: Context, rank, step, epoch):
    """relations.shift_relation over the samples rank `rank` consumed from `step` to the end of the
    epoch: one side consuming at each step what the other consumes k steps later."""
    keys_a, keys_b, steps = [], [], []
    for ra, rb in aligned_records(ctx, rank):
        if ra.get("step", 0) < step or ra.get("epoch") != epoch or rb.get("epoch") != epoch:
            continue
        key_a, key_b = comparable_samples(ra, rb)
        if key_a is None:
            return None
        keys_a.append(json.dumps(key_a, sort_keys=True))
        keys_b.append(json.dumps(key_b, sort_keys=True))
        steps.append(ra["step"])
    if len(steps) < 3:  # one pair matched after the shift is no relation yet
        return None
    return relations.shift_relation("samples", ctx.names, steps, keys_a, keys_b)


def _sampling_mechanism(ctx: Context, side: str) -> str:
    """How a side's ranks got their data, as far as its meta.json says: a DistributedSampler, an
    IterableDataset's stream (its loader's sampler is torch's _InfiniteConstantSampler), or unrecorded."""
    if not samplers_recorded(ctx, side):
        return "no_sampler"
    classes = {(r.get("sampler") or {}).get("class") for r in ctx.meta(side).get("ranks") or []}
    return "iterable" if classes == {"_InfiniteConstantSampler"} else "sampler"


def _shared_across_ranks(ctx: Context, step) -> tuple[str, list[int]] | None:
    """The side two of whose ranks consumed the same samples at `step` (the data not split by rank)."""
    for side in ("a", "b"):
        world = ctx.meta(side).get("world_size") or 1
        if not isinstance(world, int) or world < 2:
            continue
        seen: dict[str, list[int]] = {}
        for r in range(world):
            record = next((rec for rec in records_of(ctx.run(side), r) if rec.get("step") == step), None)
            key = sample_key(record) if record else None
            if key is not None:
                seen.setdefault(json.dumps(key, sort_keys=True, default=str), []).append(r)
        ranks = next((rs for rs in seen.values() if len(rs) > 1), None)
        if ranks:
            return side, ranks
    return None


def _what_was_recorded(run, rank) -> str:
    """What a rank's samples were recorded as, for a sentence that claims no more than that."""
    key = next((sample_key(rec) for rec in records_of(run, rank) if sample_key(rec) is not None), None)
    return "batches (by their recorded digests)" if key is not None and key[0] == "batch_digest" else "indices"


def _repeats_first_epoch(run, rank, epoch) -> bool:
    """Whether this rank consumed, in `epoch`, exactly the samples of its first epoch in the same order."""
    first_epoch, first, this = None, [], []
    for rec in records_of(run, rank):
        e = rec.get("epoch")
        if first_epoch is None:
            first_epoch = e
        if e is None or epoch is None or epoch == first_epoch:
            return False
        if e == first_epoch:
            first.append(json.dumps(comparable_samples(rec, rec)[0]))
        elif e == epoch:
            this.append(json.dumps(comparable_samples(rec, rec)[0]))
        elif this:
            break
    if not this or not first:
        return False
    return this == first or (len(this) < len(first) and this == first[: len(this)])


def _sampler_epoch_stuck(ctx: Context, rank, step) -> tuple[str, dict] | None:
    """(the side whose sampler never moved its epoch, {a: epochs, b: epochs, class}) where a side began two passes or
    more all at its first epoch and the other's pass of `step` began at another: set_epoch never called there."""
    found = {s: pass_epochs(ctx, s, rank, step) for s in ("a", "b")}
    if None in found.values() or found["a"][0][-1] == found["b"][0][-1]:
        return None
    for side in ("a", "b"):
        mine, theirs = found[side][0], found[other(side)][0]
        if len(mine) > 1 and len(set(mine)) == 1 and len(set(theirs)) > 1:
            return side, {"a": found["a"][0], "b": found["b"][0], "class": found[side][1]}
    return None


# set_epoch's words: the call advised only where the side's sampler was not recorded without one
SET_EPOCH_WORDS = {
    "set_epoch": {
        "why": "A DistributedSampler (and a sampler of its kind, such as a repeated-augmentation sampler) shuffles "
        "with seed + epoch, and its epoch only changes when set_epoch(epoch) is called; without that call every epoch "
        "replays the first epoch's order. Lightning calls set_epoch on its training DataLoader's sampler each epoch "
        "(the one it injects, or the program's own); a hand-written loop must do it itself.",
        "fix": "On {side}: call sampler.set_epoch(epoch) at the start of every epoch, before iterating the "
        "DataLoader (also after resuming from a checkpoint).",
    },
    "none": {
        "why": "{side}'s sampler ({klass}) has no set_epoch (the hooks' record of it): it keeps its order in itself "
        "and gives each new iterator that order again, so every epoch that makes a new iterator replays the first.",
        "fix": "On {side}: draw each epoch's order anew as the other side does (a sampler whose order moves with each "
        "epoch, such as a DistributedSampler set to it, or {klass} given a way to draw its next order per iterator), "
        "or keep one iterator across the epochs where {klass} draws its next order as an iterator runs on.",
    },
}
SET_EPOCH = Cause(
    "set_epoch",
    check_samples,
    why="{why}",
    fix="{fix}",
    doc="A side's epoch repeats its first epoch's order: `sampler.set_epoch(epoch)` missing (for a sampler recorded "
    "without set_epoch: its order kept from one iterator to the next).",
)
DATA_ORDER = Cause(
    "data_order",
    check_samples,
    why="Since the inputs differ, every later loss and gradient differs as a consequence, not as a cause. "
    "The recorded samplers say where: {sampler}",
    fix="{fix}",
    doc="A rank consumed other sample indices; the recorded samplers compared say where, with each side's epoch "
    "length in steps where the records' epochs show it, and torch's generator apart at step 1 named beside a sampler "
    "the records cannot say draws from it (any but a DistributedSampler), with how to tell the two apart.",
)
DATA_ORDER_FIX = {
    "differ": "Build the same DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=..., "
    "seed=seed, drop_last=...) with the same batch size on both sides; compare meta.json ranks[*].sampler.",
    "kinds": "Sample each rank's data the same way on both sides ({a} draws with a {class_a}, {b} with a "
    "{class_b}): the same sampler class with the same arguments over the same dataset. A loop that gives each rank "
    "its own partition of the data and shuffles it (a RandomSampler over a Subset) is matched by the same "
    "partition and sampler on the other side, not by a DistributedSampler (in Lightning, build the loader yourself "
    "and pass Trainer(use_distributed_sampler=False)); compare meta.json ranks[*].sampler.",
    "arguments": "Build the {sampler} with the same arguments over the same dataset on both sides (those recorded "
    "apart are above: its length decides how many steps an epoch lasts), and call its set_epoch(epoch) alike; "
    "compare meta.json ranks[*].sampler.",
    "same": "The samplers both sides recorded are the same: what differs is how their indices reach the steps. "
    "Check the DataLoader each side iterates (the sampler passed to it, its batch_size and batch_sampler, a "
    "shuffle= or generator= beside the sampler), the set_epoch value, and any batch drawn outside the loader.",
    "same_epochs": "The samplers both sides recorded are the same, and so are their epochs at this step: what "
    "differs is how their indices reach the steps. Check the DataLoader each side iterates (the sampler passed to "
    "it, its batch_size and batch_sampler, a shuffle= or generator= beside the sampler) and any batch drawn outside "
    "the loader.",
}
DATA_EPOCH = Cause(
    "data_order.epoch",
    check_samples,
    why="{why}",
    fix="{fix}",
    doc="The records of the first differing step carry other epochs (set_epoch given another value): named side "
    "by side, with the set_epoch calls recorded and the step the other side drew the same samples; set_epoch "
    "advised only where no side's sampler was recorded without one (`has_set_epoch`).",
)
# data_order.epoch's words (formatted by the check with the epoch, the start, the sides and classes): set_epoch is
# advised only where no side's sampler was recorded without one
DATA_EPOCH_WORDS = {
    "set_epoch": {
        "why": "A DistributedSampler's order is a function of seed + epoch, the epoch being what set_epoch was last "
        "given: the side at epoch {epoch} draws another epoch's permutation at each step.",
        "fix": "Give the samplers the same epoch at each step: call sampler.set_epoch(epoch) on both sides with the "
        "epoch counted alike (from 0, before iterating the DataLoader); {start}.",
    },
    "passes": {
        "why": "The sampler {sides} trained from ({classes}) has no set_epoch (the hooks' record of it): it orders "
        "each pass by its own state, and a record's epoch there is its side's pass over the loader (a new iterator "
        "is the next pass), so the epochs apart are passes begun at other steps.",
        "fix": "Begin the passes over the training loader at the same steps on both sides ({start}): a new iterator "
        "at each of the loop's epochs on both, or one kept across them on both; no set_epoch call reaches a sampler "
        "without one.",
    },
}
DATA_RESTARTED = Cause(
    "data_order.restarted",
    check_samples,
    why="An iterator over a DataLoader yields one pass over its loader's batches; a loop that makes a new one before "
    "the last ran out starts the next pass at its first batch (with the sampler's next epoch, where set_epoch "
    "follows the loop's epochs), while a loop that keeps its iterator takes the rest of the pass. The records do not "
    "say what ended {side}'s pass early: an epoch limit shorter than the loader (Lightning's limit_train_batches, "
    "which makes new iterators at each of its epochs; a loop's steps per epoch) or a `break` out of the pass. The "
    "epochs apart are its consequence: no set_epoch value puts a side back at the same place in its pass.",
    fix="Take the same number of batches from each iterator before a new one is made, on both sides: on {side}, let "
    "each iterator run out as {other}'s does (Lightning: no limit_train_batches below the loader's length, or a "
    "training iterable of your own that keeps its iterators across epochs and makes one anew when it runs out), or "
    "make {other}'s anew after {n} batches as {side} does.",
    doc="A side made a new iterator over its training DataLoader before the last ran out (the hooks' iterators: "
    "fewer `batches` than the loader's `length`), the other went on: the loop's epoch shorter than the loader; the "
    "epochs apart are its consequence.",
)
DATA_REMADE = Cause(
    "data_order.remade",
    check_samples,
    why="A loop that iterates its loader anew at each of its epochs (`for batch in loader`; Lightning's fit loop "
    "does, at every epoch) gives each epoch a new iterator, while a loop that takes len(loader) batches per epoch "
    "from one iterator kept across its epochs (over a sampler that gives more than one pass, an infinite batch "
    "sampler) goes on where the last epoch stopped. A sampler that keeps its order in itself and hands it to each "
    "new iterator from its start (drawing the next only when an iterator runs past its end) makes the new iterator "
    "replay the last pass while the kept one takes the next.",
    fix="Take each epoch's batches the same way on both sides: on {side}, keep one iterator across the loop's epochs "
    "as {other} does (Lightning: a training iterable of your own whose __iter__ hands back the same iterator at "
    "every epoch, from which each epoch takes len(loader) batches), or make {other}'s iterator anew at each of its "
    "epochs as {side} does (`for batch in loader` per epoch), which changes what {other} trains on.",
    doc="A side made a new iterator over its training DataLoader after a whole pass while the other kept one going "
    "past its loader's length (the hooks' iterators: `batches` over `length`): one loop re-iterates its loader each "
    "epoch, the other keeps one iterator across epochs; a new iterator replaying its side's own samples is said to "
    "restart the order, not to draw another epoch's.",
)
DATA_SKIPPED = Cause(
    "data_order.skipped",
    check_samples,
    why="A batch drawn without an optimizer step for it (a training_step returning None, which Lightning skips; a "
    "`continue` after drawing a batch with a non-finite loss) moves every later step of that side {k} batch(es) on.",
    fix="On {side}, step on the batch drawn at step {step} as the other side does, or skip the same batch on the "
    "other side too (draw it and `continue` without optimizer.step()).",
    doc="Samples equal at earlier steps of the epoch, then a side's samples are the other's k steps later: a batch "
    "drawn at that step without an optimizer step.",
)
DATA_NOT_SHUFFLED = Cause(
    "data_order.not_shuffled",
    check_samples,
    why="A DataLoader with shuffle=False (or a DistributedSampler with shuffle=False) takes the samples in "
    "index order; the other side draws a permutation each epoch, so the batches differ from the first step.",
    fix="On {side}, shuffle as the other side does: DataLoader(..., shuffle=True) with the same generator seed, or "
    "DistributedSampler(..., shuffle=True, seed=...) with set_epoch(epoch) each epoch.",
    doc="A side's indices over the epoch follow the identity order or a stride of the world size, the other's a "
    "permutation: not shuffled on that side.",
)
UNRECORDED_HOW = {
    "none": "To compare the samplers, record one on each side: recorder.start(facts={{'sampler': "
    "sampler_facts(sampler)}}) (from ddp_parity.trace import sampler_facts).",
    "one": "{side}'s recorded sampler is the one to match: draw the other side's samples as it does.",
}
SHARD_HOW = {
    "sampler": "shard the data with DistributedSampler(dataset, num_replicas=world_size, rank=rank) (its "
    "num_replicas and rank as recorded in meta.json ranks[*].sampler)",
    "iterable": "its DataLoader reads an IterableDataset (the recorded sampler is _InfiniteConstantSampler), which "
    "every rank iterates whole unless it splits itself: split the stream by rank in __iter__ (skip to rank, "
    "step world_size), or offset the seed it draws with by the rank (nanoGPT: 1337 + rank)",
    "no_sampler": "no sampler was recorded there: if batches are drawn by hand, offset the seed of the generator "
    "that draws them by the rank (nanoGPT: torch.manual_seed(1337 + rank)); if through an IterableDataset, split "
    "its stream by rank; if read from a shard of its own, shard by the process's rank taken from the process group "
    "(torch.distributed.get_rank(); in a LightningModule self.global_rank), not from an environment variable the "
    "launcher may not set",
}
# data_order.accumulation's words by where the boundaries part: a count of its own, or an epoch's end
ACCUMULATION = {
    "count": {
        "why": "An optimizer step accumulates the gradients of the micro-batches since the last one: a side that "
        "steps after another number of micro-batches trains on other batches at that step and at every later one. "
        "A boundary counted from 0 (`step % n == 0`, true at step 0) steps after the first micro-batch alone.",
        "fix": "Step the optimizer after the same micro-batches on both sides: count micro-batches from 1 "
        "(`(step + 1) % n == 0`) where the loop counts from 0, or give the other side the same boundaries "
        "(in a LightningModule, an optimizer_step that runs the closure and steps only at the loop's boundaries).",
    },
    "epoch_end": {
        "why": "An optimizer step accumulates the gradients of the micro-batches since the last one. {carried} "
        "has no boundary at the epoch's end: the micro-batches left over where an epoch's are no multiple of n join "
        "the next epoch's first step (an accumulation counted over each epoch's batches, `(i + 1) % n == 0`, with no "
        "step nor zero_grad when the epoch runs out, does this). {ends} steps at the epoch's last batch, "
        "as Lightning's automatic accumulation (accumulate_grad_batches) does, so its step takes the left-over "
        "alone; every later step takes other batches.",
        "fix": "Step after the same micro-batches on both sides. To keep {carried}'s boundaries: in the "
        "LightningModule, manual optimization (automatic_optimization = False; manual_backward "
        "every micro-batch; optimizer.step() and zero_grad() at `(batch_idx + 1) % n == 0` over each epoch's "
        "batches, nothing at the epoch's end), so the left-over's gradients carry into the next epoch. To keep "
        "{ends}'s: in the loop, step and zero_grad at each epoch's last batch too (`(i + 1) % n == 0 or i + 1 == "
        "len(loader)`); a zero_grad alone there drops the left-over, which matches neither side.",
    },
}
DATA_ACCUMULATION = Cause(
    "data_order.accumulation",
    check_samples,
    why="{why}",
    fix="{fix}",
    doc="A step accumulated another number of micro-batches on each side (recorded `micro_batches`), compared "
    "before the epochs: the accumulation boundaries differ. Where the hooks' iterators show one side's step taking "
    "the last batch of a pass and the first of the next (an epoch's left-over carried over, no step at the epoch's "
    "end) and the other's ending with its pass (Lightning's accumulate_grad_batches steps at an epoch's last "
    "batch), said so, with the fix on either side; the loops' epochs apart there are no sampler epoch.",
)
DATA_EVALUATION = Cause(
    "data_order.evaluation",
    check_samples,
    why="An evaluation that draws its batches from the generator the training draws from (nanoGPT's "
    "estimate_loss calls get_batch, as training does) advances it on the rank that evaluates: that rank's later "
    "training batches are other draws, while the ranks that did not evaluate draw the same as before.",
    fix="Evaluate at the same steps on both sides, drawing from the same generator in the same order (on the "
    "side that did not, an evaluation on rank {rank} where {side} evaluates that draws the same batches), or draw "
    "the evaluation's batches from a generator of its own on both sides.",
    doc="Samples differ on the ranks that validated on one side only (the others equal throughout): the "
    "evaluation drew from the training's generator.",
)
DATA_AHEAD = Cause(
    "data_order.ahead",
    check_samples,
    why="Every step of {side} trains on the batch the other side trains {k} step(s) later: its data was "
    "drawn from before its first counted step, and stays {k} batch(es) ahead for the rest of the epoch.",
    fix="On {side}: draw no batch from the training data outside the steps (a batch taken to look at "
    "shapes, a warm-up or check step drawn from the training iterator or stream, an evaluation that reads "
    "the training generator), or count that batch as a step on both sides.",
    doc="A side's samples at each step are the other side's k steps later: it drew k batches before its first step.",
)
DATA_SHARED = Cause(
    "data_order.shared",
    check_samples,
    why="Two ranks that consume the same data train on one shard twice: the gradients they average carry "
    "half the information, and the other side's ranks each see their own.",
    fix="On {side}: give each rank its own data: {how}.",
    doc="Two ranks of one side consumed the same samples at a step: the data is not split by rank.",
)
# ---------------------------------------------------------------------------------------------
# a rank fed another rank's data, read from what each rank was fed (the module watch's model input, the batch digest,
# the indices) wherever the runs part first: the samples need not be the first record apart (a loop fed by hand
# records no indices, an optimizer that hides the step's batch no digest)


def check_fed_alike(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f.get("step") is None:
        return None
    step = f["step"]
    fed = fed_alike(ctx, step)
    if fed is None:
        return None
    side, rank, other_side = fed["side"], fed["rank"], fed["other_side"]
    own = [r for s, r in fed["same_as"] if s == side]
    theirs = [r for s, r in fed["same_as"] if s == other_side]
    said = []
    if own:
        said.append(f"{ctx.label(side)}'s own rank(s) {', '.join(map(str, own))}")
    if theirs:
        said.append(f"{ctx.label(other_side)}'s rank(s) {', '.join(map(str, theirs))}")
    by = "; ".join(FED_KINDS[k] for k in FED_KINDS if k in fed["by"])
    facts = (
        f"At step {step} rank {rank} of {ctx.label(side)} was fed exactly what {' and '.join(said)} "
        f"{'was' if len(fed['same_as']) == 1 else 'were'} fed, while {ctx.label(other_side)}'s rank {rank} was fed "
        f"other data (compared by {by})."
    )
    if own:
        facts += (
            f" {ctx.label(other_side)} fed its ranks {', '.join(map(str, sorted([rank, *own])))} each their own "
            f"at that step; {ctx.label(side)} fed them the same."
        )
    if (f.get("rank"), f.get("quantity")) != (rank, "samples"):
        facts += (
            f" The first record apart is the {f.get('quantity')} at step {step} rank {f.get('rank')}: under DDP the "
            "gradients every rank averages carry each rank's data, so every rank parts from there."
        )
    evidence = {
        "fed_alike": {
            "side": ctx.label(side),
            "rank": rank,
            "step": step,
            "same_as": [{"side": ctx.label(s), "rank": r} for s, r in fed["same_as"]],
            "by": fed["by"],
        }
    }
    if own:
        evidence["shared_by_ranks"] = {"side": ctx.label(side), "ranks": sorted([rank, *own])}
    return finding(ctx, DATA_FED_ALIKE, step, rank, evidence, facts, side=ctx.label(side), other=ctx.label(other_side))


DATA_FED_ALIKE = Cause(
    "data_order.fed_alike",
    check_fed_alike,
    why="A rank fed another rank's data trains that data twice: the gradients DDP averages carry it twice and miss "
    "the data the rank should have read, so every rank's update parts from {other}'s, whose ranks each read their "
    "own. The records show which rank was fed what, not what gave it that data: a rank taken from an environment "
    "variable the launcher does not set (every process then reads the default, rank 0's data), a sampler built "
    "without num_replicas and rank (or before the process group exists), or a loader that shards by another rank "
    "than the process's.",
    fix="On {side}: give each rank its own data, sharded by the process's own rank as {other} shards it: take the rank "
    "from the process group (torch.distributed.get_rank(); in a LightningModule self.global_rank, and the world size "
    "from self.trainer.world_size), not from an environment variable the launcher may not set; build any "
    "DistributedSampler with num_replicas=world_size and rank=rank; offset a loader's shard by that rank.",
    doc="A rank of one side was fed exactly what another rank was fed (another rank of its side, fed apart on the "
    "other side, or another rank of the other side) while the other side's same rank was fed other data, compared "
    "by the module watch's model input, else the batch digest, else the indices, at the first step apart: a rank "
    "reading another rank's data, whatever quantity parts first.",
    requires=Evidence("a rank fed what another rank was fed", lambda d: bool(d.evidence.get("fed_alike"))),
)


# data_order.unrecorded beside an IterableDataset whose loader's base-seed draw the records do not show
IDLE_GENERATOR = (
    " {streams}'s loader reads an IterableDataset, but the hooks' digests of the global generator do not show a "
    "dataset drawing from it with the two sides' states moved apart up to step {step}'s start: no loader's "
    "base-seed draw is shown to part the samples; the datasets themselves yield other tensors (their order, a batch "
    "repeated or skipped, another offset)."
)
DATA_ORDER_UNRECORDED = Cause(
    "data_order.unrecorded",
    check_samples,
    why="Since the inputs differ, every later loss and gradient differs as a consequence, not as a cause. "
    "{sides} recorded no sampler, so the traces cannot say whether the sampling or what feeds it differs.",
    fix="Make both sides draw the same samples at each step: the same sampler (a DistributedSampler's shuffle, "
    "seed and shard, a DataLoader's shuffle=), or the same generator seeded alike and drawn in the same order"
    "{global_rng}. {how}",
    doc="A rank consumed other samples and a side recorded no sampler: what to make equal, and how to record it. "
    "An IterableDataset's base-seed draw is not offered where the hooks' digests show no loop drawing from the "
    "global generator, or its states not moved apart on the two sides up to the parting step; batch digests over "
    "other things (the model fed the same) never reach it (`batch_digests_not_comparable`).",
)


# ---------------------------------------------------------------------------------------------
# the batch contents


def indices_unrecorded(ctx: Context, rank, step) -> list[str]:
    """The sides that recorded no sample indices at `step` on `rank` (a loop fed by its own generator or
    iterator, which the hooks cannot map to a sampler): where any does, the samples were not compared, and
    equal batches cannot be claimed from them."""
    for ra, rb in aligned_records(ctx, rank):
        if ra.get("step") == step:
            return [s for s, r in zip(("a", "b"), (ra, rb)) if not isinstance(r.get("indices"), list)]
    return []


def _sampler_said(ctx: Context, side: str, rank) -> str:
    ranks = ctx.meta(side).get("ranks") or []
    facts = next((r.get("sampler") for r in ranks if isinstance(r, dict) and r.get("rank") == rank), None)
    if not isinstance(facts, dict) or not facts.get("class"):
        return f"{ctx.label(side)}: none recorded"
    args = ", ".join(f"{k}={v}" for k, v in facts.items() if k not in ("class", "rank"))
    return f"{ctx.label(side)}: {facts['class']}({args})"


def batch_without_indices(ctx: Context, f: dict, evidence: dict, where: str) -> Finding | None:
    """The batches differ at a step where a side recorded no indices: the samples are not said equal; the
    samplers both sides built are set side by side."""
    missing = indices_unrecorded(ctx, f["rank"], f["step"])
    if not missing:
        return None
    sides = " and ".join(ctx.label(s) for s in missing)
    samplers = "; ".join(_sampler_said(ctx, s, f["rank"]) for s in ("a", "b"))
    evidence["indices_unrecorded"] = [ctx.label(s) for s in missing]
    facts = (
        f"{where}, and {sides} recorded no sample indices for its batches (they reach the step through the "
        "program's own generator or iterator, not a DataLoader the hooks tie to a sampler), so which samples each "
        f"side consumed was not compared: the batches differ in their samples, or in what was made of the same "
        f"samples. The samplers recorded on rank {f['rank']}: {samplers}."
    )
    return finding(ctx, DATA_INDICES_UNRECORDED, f["step"], f["rank"], evidence, facts)


def check_batch(ctx: Context) -> Finding | None:
    f = ctx.earliest
    if f is None or f["quantity"] != "batch":
        return None
    where = (
        f"At step {f['step']} rank {f['rank']} the batch tensors differ (batch_digest {str(f['a'])[:16]} vs "
        f"{str(f['b'])[:16]})"
    )
    unrecorded = batch_without_indices(ctx, f, {"batch_digest": ctx.both(f["a"], f["b"])}, where)
    if unrecorded is not None:
        return unrecorded
    workers = config_values(ctx, ("num_workers", "persistent_workers"))
    evidence = {"batch_digest": ctx.both(f["a"], f["b"]), "data_loader": workers}
    facts = (
        f"At step {f['step']} rank {f['rank']} consumed the same sample indices on both sides, but the batch "
        f"tensors differ (batch_digest {str(f['a'])[:16]} vs {str(f['b'])[:16]})."
    )
    if workers:
        facts += f" DataLoader settings: {fmt(workers)}."
    return pipeline_finding(ctx, f, evidence, facts)


def pipeline_finding(ctx: Context, f: dict, evidence: dict, facts: str, in_step: bool = False) -> Finding:
    """data_pipeline: the batch differs at equal indices. Random draws (DataLoader workers seeded otherwise) are
    blamed only where the records show a side's pipeline draws; where they show it draws nothing, a deterministic
    step of the pipeline is named; where they show neither, both are named with what tells them apart. No worker is
    blamed where the hooks recorded every DataLoader at num_workers=0 on both sides. `in_step`: the batch itself is
    equal and the model's first input is not: the step's own handling of it."""
    other = other_generator_finding(ctx, f, evidence, facts) or other_loader_finding(ctx, f, evidence, facts)
    if other is not None:
        return other
    if in_step:
        return finding(ctx, DATA_PIPELINE, f["step"], f["rank"], evidence, facts, **PIPELINE_WORDS["step"])
    if _loaders_in_main_process(ctx, f["rank"]):
        evidence["num_workers"] = ctx.both(0, 0)
        facts += " Every DataLoader both sides iterated ran in the main process (num_workers=0, as the hooks recorded)."
        return finding(ctx, DATA_PIPELINE, f["step"], f["rank"], evidence, facts, **PIPELINE_WORDS["main_process"])
    rank = f["rank"] if isinstance(f["rank"], int) else 0
    shown = {s: pipeline_draws(ctx.run(s), rank) for s in ("a", "b")}
    reading = _pipeline_reading(shown)
    if any(shown.values()):
        evidence["pipeline_draws"] = {ctx.label(s): d for s, d in shown.items() if d is not None}
    facts += "".join(_made_again_words(ctx, s, rank, d) for s, d in shown.items() if d is not None)
    seeding = None
    if reading in ("draws", "undetermined"):  # the readings that would blame the workers' seeding
        seeding = worker_seeding(ctx, rank, f["step"])
        if seeding is not None:
            evidence["worker_seeding"] = seeding
            facts += _worker_seeding_words(ctx, rank, f["step"], seeding)
            reading = _seeding_reading(seeding, reading) or reading
            if reading == "base_seed_moved":  # what may have moved the generator: an evaluation on one side's rank
                facts += evaluated_ranks_apart(ctx, f["step"], evidence)
    named = {
        "silent": " and ".join(ctx.label(s) for s, d in shown.items() if d is None),
        "drawing": " and ".join(ctx.label(s) for s, d in shown.items() if d and d["draws"]),
        "still": " and ".join(ctx.label(s) for s, d in shown.items() if d and not d["draws"]),
        **_settings_words(seeding),
        **_generator_words(ctx, rank, f["step"]),
    }
    words = {k: v.format(**named) for k, v in PIPELINE_WORDS[reading].items()}
    return finding(ctx, DATA_PIPELINE, f["step"], f["rank"], evidence, facts, **words)


def other_loader_finding(ctx: Context, f: dict, evidence: dict, facts: str) -> Finding | None:
    """The samples the step's backward took are equal, but another DataLoader fed the same steps (a labeled loader
    beside an unlabeled one, both read each step) with its sampler built otherwise and its indices apart: that
    sampler, not the pipeline. The sampler seed is sampler_seed's words; another argument is data_order's."""
    pairs = other_loaders_apart(ctx, f["rank"], f["step"])
    if not pairs:
        return None
    ia, ib = pairs[0]
    apart = sampler_args_apart(ia, ib)
    na, nb = ctx.names
    shown = "; ".join(f"{k} {fmt(a)} on {na}, {fmt(b)} on {nb}" for k, (a, b) in apart.items())
    loader = (
        f"{ia.get('dataset')}'s DataLoader (its iterator made before step {ia.get('before_step')}, its batches read "
        f"up to step {min(ia.get('last_batch_before_step'), ib.get('last_batch_before_step'))} with no backward "
        "paired with them: a second loader feeding the steps)"
    )
    facts += (
        f" Those are the samples of the loader the step's backward took; beside it rank {f['rank']} read {loader}, "
        f"whose sampler was built otherwise ({shown}) and whose indices differ (as the hooks recorded)."
    )
    evidence = {
        **evidence,
        "other_loader": {
            "dataset": ia.get("dataset"),
            "before_step": ia.get("before_step"),
            "sampler": ctx.both(ia.get("sampler"), ib.get("sampler")),
            "indices_sha256": ctx.both(ia.get("indices_sha256"), ib.get("indices_sha256")),
        },
    }
    if set(apart) == {"seed"}:
        how = (
            f"Give {ia.get('dataset')}'s DistributedSampler the same seed on both sides (DistributedSampler(..., "
            "seed=...) with one value): every loader that feeds the steps, not only the one the backward's batch "
            "comes from (Lightning seeds a sampler it injects from PL_GLOBAL_SEED)"
        )
        return finding(ctx, SAMPLER_SEED, f["step"], f["rank"], evidence, facts, how=how)
    fix = (
        f"Build {ia.get('dataset')}'s sampler with the same arguments on both sides ({shown}): every loader that "
        "feeds the steps, not only the one the backward's batch comes from."
    )
    return finding(ctx, DATA_ORDER, f["step"], f["rank"], evidence, facts, sampler=f"{loader}: {shown}.", fix=fix)


def _loaders_in_main_process(ctx: Context, rank) -> bool:
    """Both sides' hooks recorded the DataLoader iterators they made, each with num_workers 0."""
    rank = rank if isinstance(rank, int) else 0
    for side in ("a", "b"):
        items = fact_items(read_hook_facts(ctx.run(side), rank), "loader_iterators")
        if not items or any(i.get("num_workers") != 0 for i in items):
            return False
    return True


# ---------------------------------------------------------------------------------------------
# whether a side's data pipeline draws: the same samples made again under other worker seeds.
# PyTorch seeds each DataLoader worker's torch, random and numpy generators from a base seed the iterator draws
# from torch's global generator (or its own generator=); two iterators that drew it from the global generator in
# other states seeded their workers apart. The same indices made into the same tensors under both then drew
# nothing those seeds feed; made into other tensors, something in the pipeline draws.


def _workers_seeded_apart(first: dict, then: dict) -> bool:
    """Two iterators with workers, each drawing its workers' base seed from torch's global generator, found it in
    other states (`rng_before`): their workers were seeded from other base seeds."""
    for it in (first, then):
        workers = it.get("num_workers")
        if it.get("global_draw") is not True or not isinstance(workers, int) or workers <= 0:
            return False
        if not isinstance(it.get("rng_before"), str):
            return False
    return first is not then and first["rng_before"] != then["rng_before"]


def batches_made_again(run, rank) -> list[tuple[dict, dict, dict, dict]]:
    """(earlier record, later record, their iterators) for each step of one side whose batch holds the same sample
    indices, in the same order, as an earlier step's, both with a batch digest, fed by iterators whose workers were
    seeded apart (a sampler replaying its order each epoch, set_epoch never called)."""
    items = fact_items(read_hook_facts(run, rank), "loader_iterators")
    if not items:
        return []
    first_seen: dict[str, dict] = {}
    out = []
    for rec in records_of(run, rank):
        indices, digest = rec.get("indices"), rec.get("batch_digest")
        if not isinstance(indices, list) or not indices or not isinstance(digest, str):
            continue
        earlier = first_seen.setdefault(json.dumps(indices), rec)
        if earlier is rec:
            continue
        fed = feeding_iterator(items, earlier["step"]), feeding_iterator(items, rec["step"])
        if fed[0] is not None and fed[1] is not None and _workers_seeded_apart(*fed):
            out.append((earlier, rec, *fed))
    return out


def pipeline_draws(run, rank) -> dict | None:
    """What one side's records show of whether its data pipeline draws: {draws, steps (the pair shown), made_again
    (batches made again under other worker seeds), apart (of them, made into other tensors), rng_before (the two
    iterators' generator digests)}; None where no batch was made again under other worker seeds. One pair apart
    shows a draw (a random flip may leave a few batches alike); none apart shows none."""
    pairs = batches_made_again(run, rank)
    if not pairs:
        return None
    apart = [p for p in pairs if p[0]["batch_digest"] != p[1]["batch_digest"]]
    earlier, later, fed_earlier, fed_later = (apart or pairs)[0]
    return {
        "draws": bool(apart),
        "steps": [earlier["step"], later["step"]],
        "made_again": len(pairs),
        "apart": len(apart),
        "rng_before": [fed_earlier["rng_before"], fed_later["rng_before"]],
    }


# what seeds a DataLoader's workers besides the base seed, as the hooks note each iterator: the base seed's source
# (the global generator, or the loader's own generator=), the workers, the worker_init_fn, and whether the
# workers outlive an epoch (persistent workers are seeded once, by the first iterator)
WORKER_SEEDING = ("global_draw", "num_workers", "worker_init_fn", "persistent_workers")


def worker_seeding(ctx: Context, rank, step: int) -> dict | None:
    """How the workers of the iterator that fed `step` were seeded on each side: {settings (WORKER_SEEDING, as
    recorded; "unrecorded" where older hooks did not note one), apart (the settings recorded on both sides that
    differ), rng_before (torch's generator before each side's iterator drew its workers' base seed from it, where
    both drew from it)}; None where a side recorded no iterator that fed the step."""
    fed = [feeding_iterator(fact_items(read_hook_facts(ctx.run(s), rank), "loader_iterators"), step) for s in "ab"]
    if None in fed:
        return None
    settings = [{k: it.get(k, UNRECORDED) for k in WORKER_SEEDING} for it in fed]
    pairs = {k: (settings[0][k], settings[1][k]) for k in WORKER_SEEDING}
    states = [it.get("rng_before") if it.get("global_draw") is True else None for it in fed]
    return {
        "settings": ctx.both(*settings),
        "apart": [k for k, (a, b) in pairs.items() if UNRECORDED not in (a, b) and a != b],
        "unrecorded": [k for k, pair in pairs.items() if UNRECORDED in pair],
        "rng_before": ctx.both(*states) if all(isinstance(x, str) for x in states) else None,
    }


def _seeding_reading(seeding: dict, reading: str) -> str | None:
    """The PIPELINE_WORDS the workers' seeding leaves where both sides' workers drew their base seed from the global
    generator (each side with workers): from another state where a side's pipeline is shown to draw
    ("base_seed_moved", whatever else seeds them: its settings are said beside; where no draw is shown, `reading`'s
    two candidates stand), or from the same one with every setting recorded and none apart ("seeded_alike"); None
    otherwise (the seeding words stand: a setting apart, or one unrecorded)."""
    settings = list(seeding["settings"].values())
    if seeding["rng_before"] is None:
        return None
    if not all(isinstance(s["num_workers"], int) and s["num_workers"] > 0 for s in settings):
        return None
    states = list(seeding["rng_before"].values())
    if states[0] != states[1]:  # other base seeds: the workers draw other numbers, whatever else seeds them
        return "base_seed_moved" if reading == "draws" else None
    return None if seeding["apart"] or seeding["unrecorded"] else "seeded_alike"


def _worker_seeding_words(ctx: Context, rank, step: int, seeding: dict) -> str:
    """The settings that seed the workers of the iterator that fed `step`, as recorded, and where its base seed
    came from on each side."""
    a, b = seeding["settings"].values()
    na, nb = ctx.names
    fed = f" The workers of the iterator that fed step {step} on rank {rank}"
    if seeding["apart"]:
        shown = "; ".join(f"{k} {fmt(a[k])} on {na}, {fmt(b[k])} on {nb}" for k in seeding["apart"])
        said = f"{fed} are seeded otherwise: {shown}."
    else:
        alike = ", ".join(f"{k} {fmt(a[k])}" for k in WORKER_SEEDING if k not in seeding["unrecorded"])
        said = f"{fed} are set up alike on both sides ({alike})"
        said += f"; {', '.join(seeding['unrecorded'])} unrecorded." if seeding["unrecorded"] else "."
    if seeding["rng_before"] is not None:
        sa, sb = seeding["rng_before"].values()
        said += (
            f" Their base seed came from torch's global generator at {sa[:16]} on {na} and {sb[:16]} on {nb} "
            f"(the hooks' rng_before){': the same state' if sa == sb else ''}."
        )
    return said


def _generator_words(ctx: Context, rank, step: int) -> dict:
    """base_seed_moved's words on the global generator: where both sides recorded the same seeds up to `step` on
    `rank`, only another draw moved it (seeding alike is no advice: it is alike); else another seed may have."""
    seeds = [seeds_up_to(ctx.run(s), rank, step) for s in "ab"]
    if seeds[0] and seeds[0] == seeds[1]:
        return {
            "moved_by": f"seeded alike ({fmt(seeds[0])} on both sides, as the hooks recorded), something drew from "
            "it otherwise",
            "draw_alike": "Draw from the global generator as often",
        }
    return {
        "moved_by": "it was seeded otherwise (the seeds the hooks recorded differ, or were not recorded), or "
        "something drew from it otherwise",
        "draw_alike": "Seed the global generator alike and draw from it as often",
    }


def _settings_words(seeding: dict | None) -> dict:
    """What base_seed_moved's words add about the workers' other settings, to its source and its fix: those recorded
    apart (seed them alike too), those unrecorded (unknown: alike where they differ), or none apart."""
    if seeding is None:
        return {"settings_said": "", "settings_fix": ""}
    if seeding["apart"]:
        keys = " and ".join(seeding["apart"])
        return {
            "settings_said": f" The workers are seeded otherwise besides ({keys}, as recorded above).",
            "settings_fix": f" Then seed the workers alike too: the same {keys} on both DataLoaders (Lightning's "
            "`seed_everything(seed, workers=True)` installs pl_worker_init_function).",
        }
    if seeding["unrecorded"]:
        keys = " and ".join(seeding["unrecorded"])
        return {
            "settings_said": f" Whether {keys} differ too was not recorded (hooks older than their notes).",
            "settings_fix": f" Where {keys} differ, set them alike too (Lightning's `seed_everything(seed, "
            "workers=True)` installs pl_worker_init_function).",
        }
    return {
        "settings_said": " Seeding the workers otherwise would not change it: their settings are the same.",
        "settings_fix": "",
    }


def _pipeline_reading(shown: dict) -> str:
    """Which PIPELINE_WORDS the sides' pipeline_draws leave: a draw shown on a side; none shown on both sides, or
    on one with the other silent; nothing shown."""
    known = [d for d in shown.values() if d is not None]
    if any(d["draws"] for d in known):  # seeding both alike cannot make a side that draws nothing draw the same
        return "draws_one_side" if not all(d["draws"] for d in known) else "draws"
    if len(known) == 2:
        return "no_draws"
    return "no_draws_one" if known else "undetermined"


def _made_again_words(ctx: Context, side: str, rank, shown: dict) -> str:
    j, k = shown["steps"]
    seeds = f"torch's generator before their iterators: {shown['rng_before'][0][:16]} vs {shown['rng_before'][1][:16]}"
    if shown["draws"]:
        return (
            f" On {ctx.label(side)} rank {rank} the same sample indices made again under other DataLoader worker "
            f"seeds gave another batch ({shown['apart']} of {shown['made_again']} batches made again; steps {j} and "
            f"{k}, {seeds}): its pipeline draws."
        )
    return (
        f" On {ctx.label(side)} rank {rank} every batch made again from the same sample indices under other DataLoader "
        f"worker seeds is the same tensor ({shown['made_again']}; e.g. steps {j} and {k}, {seeds}): its pipeline "
        "draws nothing the worker seeds feed."
    )


PIPELINE_WORDS = {
    "step": {
        "source": "between the batch and the model the step builds another input on one side: a random draw of the "
        "loop's own (a diffusion loss's noise, a mask) from a generator in another state, or a transform applied on "
        "one side only.",
        "fix": "Build the model's input from the batch the same way on both sides: the same draws before the model, "
        "from the same generator state (Lightning: in training_step, as the loop draws them), and the same "
        "transforms (on_after_batch_transfer on one side is a transform the other may not make).",
    },
    "draws": {
        "source": "`__getitem__` or collate draws random numbers (a random augmentation) from a stream that differs "
        "between the sides, typically because DataLoader workers are seeded differently (seed_everything(workers="
        "True) on one side, a worker_init_fn on one side only, a generator passed to one DataLoader, persistent "
        "workers).",
        "fix": "Seed DataLoader workers the same way on both sides: the same worker_init_fn (Lightning's "
        "`seed_everything(seed, workers=True)` installs pl_worker_init_function) and the same `generator=` and "
        "`persistent_workers` on both DataLoaders.",
    },
    "draws_one_side": {
        "source": "{drawing}'s pipeline draws and {still}'s draws nothing the worker seeds feed (as recorded above): "
        "a random transform applied on {drawing} only, or a deterministic step apart beside it; seeding the workers "
        "alike cannot make a side that draws nothing draw the same.",
        "fix": "Make the same tensors of the same samples on both sides: the random augmentation {drawing} applies, "
        "on {still} too (or on neither), with the same arguments, and the same other transforms, dtype and "
        "collate_fn; then seed the DataLoader workers the same way on both sides.",
    },
    "base_seed_moved": {
        "source": "`__getitem__` or collate draws random numbers (a random augmentation) in DataLoader workers "
        "seeded from another base seed: the iterator that fed this step drew it from torch's global generator in "
        "another state (as recorded above): {moved_by} before that iterator on this rank (a DataLoader or an "
        "evaluation iterated on one side only, a model or module built, a random draw of the loop's).{settings_said}",
        "fix": "{draw_alike} before this DataLoader's iterator on both sides (the same loaders and evaluations, on "
        "the same ranks, at the same steps; the hooks' generator digests at each step's start show the step after "
        "which the sides part), or give the training DataLoader a generator of its own, seeded alike on both sides "
        "(DataLoader(..., generator=torch.Generator().manual_seed(seed))), from which its workers' base seed then "
        "comes whatever else draws from the global generator.{settings_fix}",
    },
    "seeded_alike": {
        "source": "the DataLoader workers are set up alike on both sides and drew their base seed from the global "
        "generator in the same state (as recorded above), so they draw the same numbers: what the pipeline does with "
        "them differs (a random transform with other arguments, in another order or on one side only), or a "
        "deterministic step differs (a transform or a normalisation, another dtype, another collate_fn).",
        "fix": "Make the same tensors of the same samples on both sides: the same dataset transforms, random ones "
        "included, with the same arguments and in the same order, and the same dtype and collate_fn; print one "
        "sample of this step on each side to see which field or value range differs.",
    },
    "no_draws": {
        "source": "a deterministic step of the data pipeline differs between the sides: a transform or a "
        "normalisation added or left out, another dtype or value range, another collate_fn, other files read. "
        "Neither side's pipeline draws from the seeds its workers get, so seeding the workers (or the generator "
        "their seeds come from) alike would not change these batches.",
        "fix": "Make the same tensors of the same samples on both sides: the same dataset transforms (a "
        "normalisation, a resize, the conversion to a tensor, and their arguments), dtype and collate_fn; print "
        "one sample of this step on each side to see which field or value range differs.",
    },
    "no_draws_one": {
        "source": "the data pipeline differs between the sides. Where it draws nothing, as recorded above, a "
        "deterministic step differs (a transform or a normalisation added or left out, another dtype, another "
        "collate_fn), or {silent}, whose records show no batch made again under other worker seeds, applies a "
        "random transform the other does not; seeding the workers alike cannot make a side that draws nothing draw "
        "the same.",
        "fix": "Make the same tensors of the same samples on both sides: the same dataset transforms (random ones "
        "included) and their arguments, dtype and collate_fn; print one sample of this step on each side to see "
        "which field or value range differs.",
    },
    "undetermined": {
        "source": "the records cannot tell which of two makes them: (1) `__getitem__` or collate draws random numbers "
        "(a random augmentation) from DataLoader workers seeded otherwise (seed_everything(workers=True) or a "
        "worker_init_fn on one side only, a generator passed to one DataLoader, persistent workers); or (2) a "
        "deterministic step of the pipeline differs (a transform or a normalisation added or left out, another "
        "dtype, another collate_fn). The records show no side making the same sample indices again under workers "
        "seeded apart, which would show whether its pipeline draws.",
        "fix": "Tell them apart, then fix the one found: compare again with the DataLoader workers seeded alike "
        "on both sides (the same `generator=`, a torch.Generator seeded alike, or the same worker_init_fn, as "
        "Lightning's `seed_everything(seed, workers=True)` installs pl_worker_init_function, and the same "
        "`persistent_workers`). Batches that become equal were the workers' draws: seed them alike. Batches still "
        "apart are (2): make the dataset transforms, dtype and collate_fn the same (print one sample of this step on "
        "each side). A side whose sampler gives it the same indices in two epochs (no set_epoch) shows it too: the "
        "same batch_digest there, its pipeline draws nothing.",
    },
    "main_process": {
        "source": "with no DataLoader worker on either side, no worker seeding is involved: `__getitem__`, collate, "
        "or what the loop does to the batch before the model (a transform, a field built otherwise or left None, a "
        "dtype or device move) makes other tensors.",
        "fix": "Build the batch the same way on both sides: the same dataset transforms and collate_fn, and the same "
        "handling of the batch before the model (Lightning's on_before_batch_transfer, on_after_batch_transfer and "
        "training_step; the raw loop's own lines); print one batch of this step on each side to see which field "
        "differs.",
    },
}


DATA_INDICES_UNRECORDED = Cause(
    "data_order.indices_unrecorded",
    check_batch,
    why="Since the inputs differ, every later loss and gradient differs as a consequence. Without indices on both "
    "sides the records cannot tell other samples from the same samples made into other tensors.",
    fix="Make both sides take the same samples at each step and make the same tensors of them: the same split of "
    "the data by rank (a loop that gives each rank its own shard and shuffles it is matched by the same shard and "
    "sampler: in Lightning, your own DataLoader and Trainer(use_distributed_sampler=False)), the same sampler "
    "seeded alike, and random transforms drawn from the same generator state. To compare the samples themselves, "
    "feed the loop through a DataLoader (the hooks then record each batch's indices).",
    doc="The batches differ where a side recorded no sample indices (a loop fed by its own generator): the samples "
    "are not claimed equal; the samplers both sides built are set side by side.",
    requires=Evidence("the side without indices", lambda d: bool(d.evidence.get("indices_unrecorded"))),
)
DATA_PIPELINE = Cause(
    "data_pipeline",
    check_batch,
    why="The indices are the same, so the sampler agrees; the tensors built from them are not: {source}",
    fix="{fix}",
    doc="Equal `indices`, another `batch_digest` (or the watch's first module input). Random transforms from "
    "differently seeded DataLoader workers only where a side's records show its pipeline draws (the same indices "
    "made again under other worker seeds into other tensors); a deterministic step of the pipeline (a transform, "
    "a normalisation, a dtype, a collate) where both sides show it draws nothing (the same tensors again); both, "
    "with what tells them apart, where no side shows either. Where the hooks recorded every DataLoader at "
    "num_workers=0 on both sides, no worker is blamed: the dataset, collate or the loop's handling of the batch. "
    "The workers' seeding is offered only where a setting the hooks note (`global_draw`, `num_workers`, "
    "`worker_init_fn`, `persistent_workers` of the iterator that fed the step) is recorded apart or unrecorded: "
    "where a side draws and the iterators drew their workers' base seed from the global generator in other states "
    "(`rng_before`), that earlier draw is named (the ranks each side evaluated on), with drawing as often or a "
    "generator= of the loader's own as the fix; from the same state, with every setting alike, the pipeline itself.",
    requires=Evidence(
        "batch digests, or the module watch's first input",
        lambda d: "batch_digest" in d.evidence or (d.module or {}).get("reading_kind") == "batch",
    ),
)
