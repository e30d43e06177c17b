"""Eleventh pass, class `evalrollout`: no-grad forwards in training mode inside the loop counted as evaluations on
one side only, and evaluations that differ at equal weights not warned (ppo and hrnet, issue 46).

A PPO loop runs its policy without gradients, in training mode, between optimizer steps to collect a rollout (no
DataLoader); its Lightning port makes the same forwards inside training_step, where the hooks do not see them. The
tool warned "raw evaluates, lightning on no rank". Now an evaluation is what runs in eval mode or over a DataLoader of
its own; the loop's own no-grad forwards in training mode are compared only with the other side's such forwards, and
said apart (`in_loop`). And where one side evaluates alone at one point (Lightning's sanity check before step 1), an
evaluation both sides made later with other outputs (a validation sampler at another epoch) is warned too, with what
the evaluation's DataLoader recorded.

The traces are made here: a training of `test_diagnosis`'s, with the evaluation records and hooks facts the hooks
write for such loops."""

from __future__ import annotations

import json

from test_diagnosis import make_meta, pair, run_diagnosis

TRAIN_LOADER, EVAL_LOADER = 3, 4  # the `order` of the loaders' `loader_iterators` entries


def group(step: int, rank: int, training: bool, digest: str = "", pending: int | None = None) -> dict:
    """One record of rank{rank}.evaluations.jsonl; its digest a function of what ran unless given."""
    return {"step": step, "micro_batch": 0, "epoch": 0, "forwards": 2, "module": "Net", "role": "model",
            "training": training, "grad_enabled": False, "inference_mode": False, "grads_held": None,
            "pending_batch_of": pending,
            "output_digest": (digest or f"{step:02d}{rank}{int(training)}").ljust(64, "0")}  # fmt: skip


def hooked_pair(tmp_path, evaluations: dict, loaders: dict | None = None):
    """A pair of equal trainings recorded by the hooks, with `evaluations` {side: {rank: records}} and `loaders`
    {side: loader_iterators items} (the facts of a run whose hooks saw no DataLoader but the training's otherwise)."""
    a, b = pair(tmp_path, meta_a=make_meta("raw"), meta_b=make_meta("lightning"))
    for name, run in (("raw", a), ("lightning", b)):
        meta = json.loads(run.joinpath("meta.json").read_text())
        run.joinpath("meta.json").write_text(json.dumps({**meta, "recorded_by": "hooks"}))
        for rank in (0, 1):
            records = evaluations.get(name, {}).get(rank, [])
            if records:
                lines = "".join(json.dumps(r) + "\n" for r in records)
                (run / "trace" / f"rank{rank}.evaluations.jsonl").write_text(lines)
            items = (loaders or {}).get(name, [{"order": TRAIN_LOADER, "trained": True, "batches": 4}])
            facts = {"seeds": [42], "loader_iterators": {"count": len(items), "items": items}}
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))
    return run_diagnosis(a, b)


ROLLOUTS_AFTER = (0, 2, 4)


def rollouts(rank: int, digest: str = "") -> list[dict]:
    return [group(step, rank, training=True, digest=digest and f"{digest}{step}") for step in ROLLOUTS_AFTER]


def test_a_rollout_made_in_the_loop_on_one_side_only_is_no_evaluation(tmp_path):
    """ppo rounds 4-5: raw's rollouts between steps (training mode, no grad, no DataLoader), the port's inside its
    training step (unseen). No `evaluation_differs`; the EQUIVALENT line says they were the loop's own forwards and
    that one side recorded none, never that one side evaluates."""
    report, d = hooked_pair(tmp_path, {"raw": {0: rollouts(0), 1: rollouts(1)}})
    assert report["verdict"] == "equivalent", d
    assert not [w for w in report["warnings"] if w["kind"] in ("evaluation_differs", "loop_forwards_differ")], report
    evaluations = report["evaluations"]
    assert evaluations["recorded"] == [0, 0], evaluations
    assert evaluations["in_loop"] == {"recorded": [6, 0], "compared": 0, "equal": 0}, evaluations
    assert "evaluates" not in d["explanation"], d["explanation"]
    assert "6 group(s) of forwards on raw and 0 on lightning ran the model in training mode" in d["explanation"]
    assert "none on lightning to compare them with" in d["explanation"], d["explanation"]


def test_rollouts_on_both_sides_are_compared_with_each_other(tmp_path):
    """Both sides recorded their rollouts: paired at the same point and compared; those that differ are said as the
    loop's own forwards, never as an evaluation."""
    same = {"raw": {0: rollouts(0), 1: rollouts(1)}, "lightning": {0: rollouts(0), 1: rollouts(1)}}
    report, d = hooked_pair(tmp_path / "same", same)
    assert report["evaluations"]["in_loop"] == {"recorded": [6, 6], "compared": 6, "equal": 6}, report["evaluations"]
    assert "6 of 6 paired at the same point gave the same outputs" in d["explanation"], d["explanation"]
    apart = {"raw": {0: rollouts(0), 1: rollouts(1)}, "lightning": {0: rollouts(0), 1: rollouts(1, digest="ff")}}
    report, d = hooked_pair(tmp_path / "apart", apart)
    said = [w for w in report["warnings"] if w["kind"] in ("evaluation_differs", "loop_forwards_differ")]
    assert [(w["kind"], w["rank"], w["step"]) for w in said] == [("loop_forwards_differ", 1, 0)], said
    assert "no evaluation" in said[0]["message"] and "3 of the points" in said[0]["message"], said


def test_no_grad_forwards_in_training_mode_over_an_evaluation_loader_are_still_an_evaluation(tmp_path):
    """What the class must not swallow: a validation over a DataLoader of its own, model.eval() forgotten on both
    sides, is an evaluation (compared as one), not the loop's own work."""
    loaders = [{"order": TRAIN_LOADER, "trained": True, "batches": 4}]
    loaders += [{"order": EVAL_LOADER + s, "trained": False, "batches": 1, "before_step": s + 1} for s in (4, 8)]
    found = {rank: [group(s, rank, True, pending=EVAL_LOADER + s) for s in (4, 8)] for rank in (0, 1)}
    report, d = hooked_pair(tmp_path, {"raw": found, "lightning": found}, {"raw": loaders, "lightning": loaders})
    assert report["evaluations"]["compared"] == report["evaluations"]["equal"] == 4, report["evaluations"]
    assert report["evaluations"].get("in_loop", {}).get("recorded", [0, 0]) == [0, 0], report["evaluations"]


def validation_loaders(epoch_after_8: int) -> list[dict]:
    """The training loader, and the validation's after steps 0 (Lightning's sanity check), 4 and 8: a shuffled
    DistributedSampler whose epoch is `epoch_after_8` at the last, its indices following its epoch."""
    out = [{"order": TRAIN_LOADER, "trained": True, "batches": 4}]
    for order, (step, epoch) in enumerate(((0, 0), (4, 0), (8, epoch_after_8)), start=EVAL_LOADER):
        sampler = {"class": "DistributedSampler", "shuffle": True, "epoch": epoch, "seed": 0}
        out.append({"order": order, "trained": False, "batches": 1, "before_step": step + 1, "dataset": "Cityscapes",
                    "indices_sha256": f"{epoch}".ljust(64, "0"), "sampler": sampler})  # fmt: skip
    return out


def test_evaluations_that_differ_are_warned_beside_one_side_evaluating_alone(tmp_path):
    """hrnet rounds 3-4: Lightning's sanity check after step 0 (raw none), then both validate after steps 4 and 8;
    Lightning calls set_epoch on the validation sampler, raw never does, so the validation after step 8 ran on other
    samples at equal weights. Both are warned: the sanity check as one side evaluating, the later one with its
    sampler's epoch."""
    evaluations = {
        "raw": {rank: [group(4, rank, False), group(8, rank, False)] for rank in (0, 1)},
        "lightning": {r: [group(0, r, False), group(4, r, False), group(8, r, False, "e1")] for r in (0, 1)},
    }  # fmt: skip
    loaders = {"raw": validation_loaders(0)[:1] + validation_loaders(0)[2:], "lightning": validation_loaders(1)}
    report, d = hooked_pair(tmp_path, evaluations, loaders)
    assert report["verdict"] == "equivalent", d
    said = [w for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert [(w["rank"], w["step"]) for w in said] == [(0, 0), (0, 8), (1, 0), (1, 8)], said
    assert "lightning evaluates after step 0 and the other side records no evaluation there" in said[0]["message"]
    message = said[1]["message"]
    assert "the evaluation after step 8 gave other outputs" in message, message
    assert "its sampler (DistributedSampler, shuffle True) was at epoch 0 on raw and 1 on lightning" in message
    assert "set_epoch" in message, message
    assert report["evaluations"]["compared"] == 4 and report["evaluations"]["equal"] == 2, report["evaluations"]
