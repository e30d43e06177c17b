"""Causes at a resume, read from the first step after it: a restarted run that replays, skips or loses
the state its snapshot should have restored (the sampler's epoch, the loader's generator, the
optimizer, the RNG).

Each cause is one `Cause` below its check; its place in the causal order is `causes.CAUSES`.
"""

from __future__ import annotations

from ddp_parity.compare.causes.base import (
    Cause,
    Context,
    Words,
    finding,
    fmt,
)
from ddp_parity.compare.findings import Finding
from ddp_parity.compare.walk import comparable_samples, records_of

# ---------------------------------------------------------------------------------------------
# resume


def check_resume(ctx: Context) -> Finding | None:
    """The first divergence at or after a side's resume point: what the resume got wrong."""
    first = ctx.earliest
    side = _resumed_side(ctx, first)
    if side is None:
        return None
    at, name = _resume_step(ctx.meta(side)), ctx.label(side)
    step, rank, q = first.get("step"), first.get("rank"), first["quantity"]
    evidence = {"resumed_side": name, "resumed_from_step": at, "quantity": q}
    shown = _what_the_resume_shows(ctx, first, side, evidence)
    if shown is None:
        return None
    said, key = shown
    resumed_how = f"resumed after step {at}" if at else "was restarted, counting its steps from 0"
    facts = f"{name} {resumed_how}, and the runs part ways at step {step} (rank {rank}), from the resume on: {said}"
    cause, fix = RESUME_WORDS[key]
    return finding(ctx, RESUME, step, rank, evidence, facts, cause=cause.format(at=at), fix=fix)


def _resumed_side(ctx: Context, first: dict | None) -> str | None:
    """The side whose resume the first divergence comes after, if any."""
    if first is None:
        return None
    # a restart counted from step 0: only its first step's weights say anything about the resume
    from_zero_telling = first.get("step") == 1 and first["quantity"] in ("loss", "grad_norm", "batch")
    for side in ("a", "b"):
        at = _resume_step(ctx.meta(side))
        if at is not None and (first.get("step") or 0) > at and (at or from_zero_telling):
            return side
    return None


def _what_the_resume_shows(ctx: Context, first: dict, side: str, evidence: dict) -> tuple[str, str] | None:
    """What the first divergence after the resume shows, as facts, and the RESUME key of its cause."""
    q, rank = first["quantity"], first.get("rank")
    if q == "numbering":
        return f"the step numbers jump ({fmt(first.get('step_numbers'))}).", "numbering"
    if q == "count":
        counts, other = ctx.walk.counts, "b" if side == "a" else "a"
        return (
            f"{ctx.label(side)} records {counts[side].get(rank, 0)} steps on rank {rank} where the other run "
            f"records {counts[other].get(rank, 0)}.",
            "count",
        )
    if q == "samples":
        said, how = _resumed_samples(ctx, first, side, evidence)
        if "epoch_b" in first and first.get("epoch") != first["epoch_b"]:  # the records' epochs, side by side
            evidence["epochs"] = ctx.both(first.get("epoch"), first["epoch_b"])
            said += (
                f" The records at step {first.get('step')} say epoch {first.get('epoch')} vs epoch {first['epoch_b']}."
            )
        return said, how
    if q == "lr":
        return f"the learning rate differs ({first['a']!r} vs {first['b']!r}).", "scheduler"
    if q == "param_digest":
        return (
            "the first update after the resume differs with the same samples, loss, gradient norm and learning rate.",
            "optimizer",
        )
    if q in ("loss", "grad_norm", "batch"):
        return f"with the same samples the {q} differs ({fmt(first['a'])} vs {fmt(first['b'])}).", "model_or_rng"
    return None


def _resumed_samples(ctx: Context, first: dict, side: str, evidence: dict) -> tuple[str, str]:
    """Where the resumed side's samples were consumed before: an epoch replayed, skipped, or its order lost."""
    step, name = first.get("step"), ctx.label(side)
    match = _samples_seen_elsewhere(ctx, side, "b" if side == "a" else "a", first.get("rank"), step)
    if match is None:
        return f"the samples differ ({fmt(first['a'])} vs {fmt(first['b'])}) without repeating others.", "order"
    evidence.update(match)
    seen_at, epoch = match["matches_step"], match.get("matches_epoch")
    if seen_at > step:
        return f"at step {step} {name} consumes the samples of step {seen_at} (epoch {epoch}): it skips ahead.", "skip"
    if match.get("epoch") is not None and match["epoch"] != epoch:
        # the epoch counter went on but the order is an earlier epoch's: the order state was lost
        return (
            f"at step {step} {name} is in epoch {match['epoch']} but consumes the samples the runs consumed at "
            f"step {seen_at} (epoch {epoch}), in the same order: its epoch count was restored, the data order "
            "was not.",
            "order_lost",
        )
    return (
        f"at step {step} {name} consumes the samples the runs consumed at step {seen_at} (epoch {epoch}): it "
        f"trains epoch {epoch} again.",
        "replay",
    )


def _resume_step(meta: dict) -> int | None:
    step = meta.get("resumed_from_step")
    if isinstance(step, int) and not isinstance(step, bool) and step > 0:
        return step
    attempts = meta.get("attempts") or []
    starts = [a.get("start_step") for a in attempts if isinstance(a, dict) and isinstance(a.get("start_step"), int)]
    # a restart counted from step 0 is still a resume: a loop that derives its step from a snapshot's
    # epoch index (the tutorial's `epochs_run` = 0 after epoch 0) loads trained weights "at step 0"
    return max(starts) if len(starts) > 1 and max(starts) >= 0 else None


def _samples_seen_elsewhere(ctx: Context, side: str, other: str, rank, step) -> dict | None:
    """Where else the resumed side's samples at `step` were consumed (by the other run)."""
    target = None
    for rec in records_of(ctx.run(side), rank):
        if rec["step"] == step:
            target = rec
            break
    if target is None:
        return None
    for rec in records_of(ctx.run(other), rank):
        if rec["step"] != step:
            a, b = comparable_samples(target, rec)
            if a is not None and a == b:
                return {"matches_step": rec["step"], "matches_epoch": rec.get("epoch"), "epoch": target.get("epoch")}
    return None


# what a resume got wrong, by what the first step after it shows: the cause and the fix the `resume`
# kind fills in ({at}: the step the run resumed after)
RESUME_WORDS = {
    "numbering": Words(
        "The resumed loop restarts its step counter at another value than the steps done.",
        "Restore the global step from the checkpoint and continue counting from it.",
    ),
    "count": Words(
        "The resumed run trains another number of steps than remained: it resumed at the wrong step or epoch.",
        "Store the steps and epochs *done* with the checkpoint and resume right after them.",
    ),
    "order_lost": Words(
        "The resumed run rebuilt its DataLoader or sampler without the state that decides the order: a "
        "DataLoader generator seeded afresh, a sampler without set_epoch(restored epoch), workers "
        "re-seeded from the start (Lightning #21938: workers replaying an epoch after a resume).",
        "Restore the data order with the checkpoint: save and load the DataLoader's generator state "
        "(generator.get_state()/set_state()) or call sampler.set_epoch(restored epoch) before iterating.",
    ),
    "replay": Words(
        "The checkpoint stores the epoch that was running (or just finished) and the loop restarts "
        "at that index, so the finished epoch is replayed.",
        "Save the number of epochs *done* (epoch + 1 after an epoch ends) and resume from it.",
    ),
    "skip": Words(
        "The loop resumes past the point the checkpoint was taken: an epoch or steps are skipped.",
        "Resume at the first step not done: the epoch and step stored with the checkpoint.",
    ),
    "order": Words(
        "The sampler's order after the restart differs: its epoch (set_epoch) or RNG state was not restored.",
        "Call sampler.set_epoch(epoch) with the restored epoch and restore the RNG states from the checkpoint.",
    ),
    "scheduler": Words(
        "The learning-rate scheduler starts again from its initial state: its state was not restored.",
        "Save scheduler.state_dict() with the checkpoint and load it on resume.",
    ),
    "optimizer": Words(
        "An optimizer whose state (Adam's moments, momentum buffers) starts empty updates differently from "
        "the same gradients: the optimizer state was not restored.",
        "Save optimizer.state_dict() with the checkpoint and load it on resume.",
    ),
    "model_or_rng": Words(
        "The weights or the random stream the resumed run starts from are not those the other run had after "
        "step {at}: the model state or the RNG state was not restored, or comes from another step (a snapshot "
        "that stores the index of the epoch just finished, resumed at that index, trains that epoch again "
        "from weights that already learned it).",
        "Resume right after the snapshot: save the epochs and steps *done* (epoch + 1 after an epoch ends) "
        "with the model state and the torch/numpy/random RNG states, and load them all.",
    ),
}

RESUME = Cause(
    "resume",
    check_resume,
    why="{cause}",
    fix="{fix} In general: save and load model, optimizer, scheduler, scaler and RNG state with the "
    "checkpoint, as raw/train.py does.",
    doc="The first divergence comes after a side's resume (`resumed_from_step`, `meta.attempts`): an epoch "
    "replayed or skipped, the data order, the optimizer, scheduler, model or RNG state not restored.",
)
