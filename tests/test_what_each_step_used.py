"""The classes of failure that dino, mae and improved-diffusion's first pass found (docs/programs.md), each on
hand-made traces of the tests' own: what each step used against what was built (the param groups as each step
ran, a construction value every step overwrote alike, a hyperparameter apart in the steps' own groups), samples
never called equal where a side recorded none, a clip call on one side only compared by the gradients each
optimizer saw, no generator difference beside a loss exactly k x the other's, and a collective one side makes at
every step not said where the training stayed equal after it."""

from __future__ import annotations

import json

from test_diagnosis import INIT, make_meta, make_records, pair, run_diagnosis, trained_apart

from ddp_parity.compare.causes import seeds
from ddp_parity.compare.causes.base import Context
from ddp_parity.compare.comparator import compare_runs

NAMES = ["net.0.weight", "net.0.bias"]


def built(lr: float) -> list[dict]:
    """meta.optimizer_built as the hooks write it: two groups, decayed weights and undecayed biases."""
    groups = [
        {"params": NAMES[:1], "lr": lr, "weight_decay": 0.04, "eps": 1e-8},
        {"params": NAMES[1:], "lr": lr, "weight_decay": 0.0, "eps": 1e-8},
    ]
    return [{"class": "AdamW", "named": True, "stepped": True, "param_groups": groups}]


def with_groups(records: dict, weight_decay_of_group_1=lambda step: 0.0) -> dict:
    """Each step's groups as the loop set them before the step: a warmup lr and a weight-decay schedule."""
    for recs in records.values():
        for rec in recs:
            lr = 0.001 * min(1.0, (rec["step"] - 1) / 2)
            rec["lr"] = lr
            rec["param_groups"] = [
                {"lr": lr, "weight_decay": 0.04 + 0.01 * rec["step"], "eps": 1e-8},
                {"lr": lr, "weight_decay": weight_decay_of_group_1(rec["step"]), "eps": 1e-8},
            ]
    return records


def metas(lr_a: float, lr_b: float) -> dict:
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["optimizer_built"], meta_b["optimizer_built"] = built(lr_a), built(lr_b)
    return {"meta_a": meta_a, "meta_b": meta_b}


def test_an_lr_built_otherwise_that_every_step_overwrites_alike_is_no_difference(tmp_path):
    """Built with lr 0.001 on one side and 0.000625 on the other, every step's groups equal: EQUIVALENT, no
    param-group warning (the construction value never reached an update)."""
    report, d = run_diagnosis(
        *pair(
            tmp_path,
            records_a=with_groups(make_records()),
            records_b=with_groups(make_records()),
            **metas(0.001, 0.000625),
        )
    )
    assert report["verdict"] == "equivalent", d["explanation"]
    assert "param groups differ" not in d["explanation"] and not d["setup_differs"], d


def test_a_weight_decay_apart_in_the_groups_each_step_used_is_named_by_group_and_step(tmp_path):
    """Group 1 decayed on one side only, from step 1 (where the warmup's lr is 0, so the parameters part at step
    2): named as the steps' own groups, group 1, from step 1, whatever the construction says."""
    records_a = trained_apart(with_groups(make_records(), lambda step: 0.04), from_step=2)
    _, d = run_diagnosis(
        *pair(tmp_path, records_a=records_a, records_b=with_groups(make_records()), **metas(0.001, 0.001))
    )
    assert (d["kind"], d["step"]) == ("optimizer.hyperparameters", 2), (d["kind"], d["explanation"])
    assert d["evidence"]["groups_step"] == 1 and d["evidence"]["groups"][0]["key"] == "weight_decay", d["evidence"]
    assert "param group 1 (1 parameter(s): net.0.bias): weight_decay 0.04 vs 0" in d["explanation"], d["explanation"]
    assert "param group 1 the same weight_decay" in d["advice"], d["advice"]


def test_an_lr_built_apart_and_used_apart_after_a_warmup_from_zero_is_dated_from_the_step_it_parts(tmp_path):
    """Built with half the lr on one side, the lr set by hand each step from a warmup at 0: the steps' groups
    part at step 2, and the finding says so instead of "from the first step on" (mae's effective batch slip)."""
    records_b = with_groups(make_records())
    for recs in records_b.values():
        for rec in recs:
            rec["lr"] /= 2
            for group in rec["param_groups"]:
                group["lr"] /= 2
    records_a = trained_apart(with_groups(make_records()), from_step=2)
    _, d = run_diagnosis(*pair(tmp_path, records_a=records_a, records_b=records_b, **metas(0.001, 0.0005)))
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    assert "from step 2 on (the first step whose recorded lr differs" in d["explanation"], d["explanation"]
    assert "from the first step on" not in d["explanation"], d["explanation"]


def test_a_parameter_in_another_group_is_named_though_each_groups_values_were_alike_at_every_step(tmp_path):
    """The seventh first pass (SLIP's slip 3: the `p.ndim < 2` test dropped from the weight-decay split): every
    step's groups held the same values on both sides, group by group, and a bias sat in the decayed group on one
    side only. The records hold each group's values, not its members: the tool took weight_decay as set alike at
    every step and said the param groups were equal."""
    names = ["net.0.weight", "net.0.bias", "net.2.weight"]

    def split(decayed: list[str]) -> list[dict]:
        groups = [
            {"params": decayed, "lr": 0.001, "weight_decay": 0.04, "eps": 1e-8},
            {"params": [n for n in names if n not in decayed], "lr": 0.001, "weight_decay": 0.0, "eps": 1e-8},
        ]
        return [{"class": "AdamW", "named": True, "stepped": True, "param_groups": groups}]

    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["optimizer_built"] = split(["net.0.weight", "net.0.bias", "net.2.weight"][:2])
    meta_b["optimizer_built"] = split(["net.0.weight"])
    records_a = trained_apart(with_groups(make_records()), from_step=2)
    _, d = run_diagnosis(
        *pair(tmp_path, records_a=records_a, records_b=with_groups(make_records()), meta_a=meta_a, meta_b=meta_b)
    )
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    # the settings as step 1 ran (group 0's weight decay 0.05 there): what the optimizer applied, per parameter
    assert "weight_decay: 0.05 vs 0.0 from step 1 for net.0.bias." in d["explanation"], d["explanation"]
    # the same members on both sides: the construction value every step overwrote alike is still no difference
    meta_b["optimizer_built"] = split(["net.0.weight", "net.0.bias"])
    meta_b["optimizer_built"][0]["param_groups"][0]["weight_decay"] = 0.03
    report, d = run_diagnosis(
        *pair(
            tmp_path / "members",
            records_a=with_groups(make_records()),
            records_b=with_groups(make_records()),
            meta_a=meta_a,
            meta_b=meta_b,
        )
    )
    assert report["verdict"] == "equivalent" and "param groups differ" not in d["explanation"], d["explanation"]


def test_batches_apart_where_one_side_recorded_no_indices_are_never_called_the_same_samples(tmp_path):
    """improved-diffusion feeds its loop from its own generator (`while True: yield from loader`), so its side
    records a batch digest and no indices: its samples are not compared, so they are never said equal, nor counted
    equal in the table (nor is worker seeding blamed). Where the other side's batch digests are compared beside its
    indices and differ, the samplers both sides built are set side by side."""

    def fed_by_a_generator(records):
        for recs in records.values():
            for rec in recs:
                del rec["indices"]
                rec["batch_digest"] = "aa" * 32
        return records

    def with_batches(records):
        for recs in records.values():
            for rec in recs:
                rec["batch_digest"] = "bb" * 32
        return records

    report, d = run_diagnosis(
        *pair(
            tmp_path,
            records_a=trained_apart(fed_by_a_generator(make_records())),
            records_b=with_batches(make_records()),
        )
    )
    assert report["per_step"]["samples"]["equal"] == 0, report["per_step"]["samples"]
    assert "consumed samples the records do not compare (raw recorded no indices)" in d["explanation"], d["explanation"]
    assert "same samples" not in d["explanation"] and "indices are equal" not in d["explanation"], d["explanation"]
    _, d = run_diagnosis(
        *pair(
            tmp_path / "other way",
            records_a=trained_apart(with_batches(make_records())),
            records_b=fed_by_a_generator(make_records()),
        )
    )
    assert (d["kind"], d["step"]) == ("data_order.indices_unrecorded", 1), (d["kind"], d["explanation"])
    assert "lightning recorded no sample indices" in d["explanation"], d["explanation"]
    assert "The samplers recorded on rank 0: raw: DistributedSampler(" in d["explanation"], d["explanation"]
    assert "worker_init_fn" not in d["advice"], d["advice"]
    measured = fed_by_a_generator(make_records())  # only the loss measured otherwise: the training proved equal
    for recs in measured.values():
        for rec in recs:
            rec["loss"] += 0.5
    report, d = run_diagnosis(*pair(tmp_path / "measured", records_a=measured, records_b=with_batches(make_records())))
    assert report["verdict"] == "equivalent", d["explanation"]
    assert "the samples at every step" not in d["explanation"].lower(), d["explanation"]
    assert "the samples were not compared" in d["explanation"], d["explanation"]


def test_a_clip_call_on_one_side_only_compares_the_gradients_each_optimizer_saw(tmp_path):
    """dino clips each parameter's gradient by its own code; its port calls clip_grad_norm_(3.0). The recorded
    norms are taken at other moments (the port's before its clip, raw's as its optimizer saw them), so they are
    never "another norm of the same gradients": the norms each optimizer saw are set side by side, and the advice
    is to treat the gradients alike between backward and the step, on the side that clips otherwise."""
    records_a, records_b = make_records(), make_records()
    for recs in records_b.values():
        for rec in recs:
            rec.update(grad_norm=900.0, clip_max_norm=3.0, clip_norm_type=2.0, grad_norm_seen=3.0)
    for recs in records_a.values():
        for rec in recs:
            rec["grad_norm"] = 15.0
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    _, d = run_diagnosis(
        *pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=trained_apart(records_a), records_b=records_b)
    )
    assert (d["kind"], d["step"]) == ("optimizer.clip", 1), (d["kind"], d["explanation"])
    assert d["evidence"]["grad_norm_seen"] == {"lightning": 3.0, "raw": 15.0}, d["evidence"]
    assert "1-norm" not in d["explanation"] and "raw called none" in d["explanation"], d["explanation"]
    assert "do the same on lightning" in d["advice"] and "configure_gradient_clipping" in d["advice"], d["advice"]


def test_a_loss_exactly_k_times_never_has_generators_apart_beside_it(tmp_path):
    """improved-diffusion draws its timesteps and noise between its batch and its DDP call, its port inside the
    LightningModule's forward: the hooks' generator digests, taken at each side's first training forward, are
    apart though every draw is the same. A loss exactly 2 x the other's proves the same draws, so no generator
    difference is said beside it."""
    records_a, records_b = make_records(), make_records()
    for records, digest in ((records_a, "aa"), (records_b, "bb")):
        for recs in records.values():
            for rec in recs:
                rec["rng"] = {"at": "forward", "torch": digest * 8}
                rec["micro_batches"] = 2
    for recs in records_a.values():
        for rec in recs:
            rec["loss"] *= 2
            rec["grad_norm"] *= 2
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    _, d = run_diagnosis(
        *pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=trained_apart(records_a), records_b=records_b)
    )
    assert d["kind"] == "loss.factor", (d["kind"], d["explanation"])
    assert "random generators' state differs" not in d["explanation"], d["explanation"]


def _quiet(records: dict) -> dict:
    """Records whose steps made no collective of the program's own."""
    for recs in records.values():
        for rec in recs:
            rec["collectives"] = []
    return records


def test_a_collective_one_side_makes_at_every_step_is_not_said_where_the_training_stayed_equal_after_it(tmp_path):
    """A loop that all_reduces its loss for logging at every step, against a port that logs with sync_dist (a
    reduction inside Lightning, not the program's own): the difference is there at steps 1 and 2, after which the
    training stayed equal, so it is not said beside a divergence at step 3; one that is new at step 3 is."""

    def logged(records, extra_at=None):
        for recs in records.values():
            for rec in recs:
                rec["collectives"] = [
                    {
                        "op": "all_reduce",
                        "caller": "__main__",
                        "reduce_op": "SUM",
                        "dtype": "float32",
                        "shape": [],
                        "digest": "0" * 16,
                    }
                ]
                if rec["step"] == extra_at:
                    rec["collectives"].append(
                        {"op": "broadcast", "caller": "__main__", "dtype": "float32", "shape": [8], "digest": "1" * 16}
                    )
        return records

    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    runs = pair(
        tmp_path,
        meta_a=meta_a,
        meta_b=meta_b,
        records_a=trained_apart(logged(make_records()), 3),
        records_b=_quiet(make_records()),
    )
    _, d = run_diagnosis(*runs)
    assert d["step"] == 3 and "collectives" not in d["evidence"], d["explanation"]
    runs = pair(
        tmp_path / "new",
        meta_a=meta_a,
        meta_b=meta_b,
        records_a=trained_apart(logged(make_records(), extra_at=3), 3),
        records_b=_quiet(make_records()),
    )
    _, d = run_diagnosis(*runs)
    assert d["evidence"]["collectives"]["step"] == 3, d["explanation"]
    assert "broadcast float32 [8] x1" in d["explanation"], d["explanation"]
    # DeiT's port: Lightning's self.log(sync_dist=True) all-reduces made on the other side are not "none"
    records_b = make_records()
    for recs in records_b.values():
        for rec in recs:
            rec["collectives"] = [
                {
                    "op": "all_reduce",
                    "caller": "lightning.fabric.utilities.distributed",
                    "reduce_op": "SUM",
                    "dtype": "float32",
                    "shape": [],
                    "digest": "2" * 16,
                }
            ] * 8
    runs = pair(
        tmp_path / "logged",
        meta_a=meta_a,
        meta_b=meta_b,
        records_a=trained_apart(logged(make_records(), extra_at=3), 3),
        records_b=records_b,
    )
    _, d = run_diagnosis(*runs)
    assert "lightning: none of its own, 8 made by the libraries beside them" in d["explanation"], d["explanation"]
    assert "lightning: none." not in d["explanation"], d["explanation"]


def test_an_lr_set_by_hand_one_step_late_against_a_scheduler_is_no_scheduler_count(tmp_path):
    """improved-diffusion anneals its lr by hand; moved after opt.step() it is one step late against its port's
    scheduler. The side that never stepped a scheduler is not told to step one more often: the rates are one
    series shifted by a step, the lr set by hand late, and the fix is where each side sets it."""
    schedule = [0.001 * (1 - i / 10) for i in range(12)]
    records_a, records_b = make_records(), make_records()
    for records, late in ((records_a, 1), (records_b, 0)):
        for recs in records.values():
            for i, rec in enumerate(recs):
                rec["lr"] = schedule[max(i - late, 0)] if late else schedule[i]
                rec["scheduler_steps_before"] = 0 if late or i == 0 else 1
    _, d = run_diagnosis(*pair(tmp_path, records_a=trained_apart(records_a, 2), records_b=records_b))
    assert d["kind"] == "optimizer.lr_shift", (d["kind"], d["explanation"])
    assert "raw recorded no scheduler.step(): it sets its lr by hand, 1 step(s) late" in d["explanation"], d
    assert "step the scheduler" not in d["advice"].lower(), d["advice"]


def test_a_reseed_is_named_where_the_module_watch_finds_the_batch_apart_and_a_side_records_no_indices(tmp_path):
    """improved-diffusion's round 2: no indices on raw, so the runs part first in the loss; the module watch finds
    the first module's input apart at step 1, and lightning seeded the same value once more before step 1 (its DDP
    setup's re-seed after the model was built). That is the batch parting before any update: rng.reseed."""
    records_a, records_b = make_records(), make_records()
    for recs in records_a.values():
        for rec in recs:
            del rec["indices"]
    for recs in records_b.values():
        for rec in recs:
            rec["loss"] += 0.5
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=trained_apart(records_a), records_b=records_b)
    for run, times in ((a, 1), (b, 2)):
        for rank in (0, 1):
            items = [{"before_step": 1, "order": i, "seed": 0} for i in range(times)]
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps({"seeds": {"items": items}}))
    ctx = Context(compare_runs(a, b), ("raw", "lightning"))
    assert seeds.check_reseed(ctx) is None  # the loss, with nothing saying where it was born
    ctx.cache["module"] = {"reading_kind": "batch", "step": 1, "name": "net.0", "phase": "forward", "type": "Linear"}
    found = seeds.check_reseed(ctx)
    assert found is not None and found.kind == "rng.reseed", found
    assert "in the batch on rank 0 (the first module input, as the module watch found)" in found.explanation


def test_broadcasts_before_the_first_step_with_the_initial_weights_equal_are_not_said(tmp_path):
    """improved_diffusion broadcasts its parameters from rank 0 itself before training (`sync_params`), which its
    port leaves to DDP's constructor (not the program's own collective). With the initial weights recorded equal on
    every rank after them, they changed nothing: not said beside a divergence at step 1 (it was, in every DIFFERENT
    diagnosis of that program). A broadcast there with the initial weights apart is said."""

    def synced(records):
        for recs in _quiet(records).values():
            for rec in recs:
                if rec["step"] == 1:
                    sent = {"op": "broadcast", "caller": "__main__", "dtype": "float32", "shape": [8, 4]}
                    rec["collectives"] = [{**sent, "digest": "1" * 16}]
        return records

    for init_b, said in ((INIT, False), ([INIT, "f" * 64], True)):
        meta_a, meta_b = make_meta("raw"), make_meta("lightning", init=init_b)
        meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
        records_b = _quiet(make_records())
        records_b[0][0]["loss"] += 0.5  # the runs part at step 1, in the loss
        runs = pair(
            tmp_path / str(said),
            meta_a=meta_a,
            meta_b=meta_b,
            records_a=trained_apart(synced(make_records()), 1),
            records_b=records_b,
        )
        _, d = run_diagnosis(*runs)
        assert ("collectives" in d["evidence"]) == said, (said, d["kind"], d["explanation"])


def test_collectives_lists_cut_short_are_not_compared(tmp_path):
    """A loop that all_reduces each of its 40 layers' statistics at every step (a synchronised norm layer of its own)
    against a port making the same calls, where Lightning's own two reductions come first on one side: both lists are
    cut at the hooks' 32, the port's holding two of its own fewer. The program's own collectives are the same on both
    sides, so no difference in them is said; lists not cut that differ still are."""

    def reducing(records, library_first: bool, layers: int = 40):
        for recs in records.values():
            for rec in recs:
                made = [{"op": "all_reduce", "caller": "lightning.fabric.utilities.distributed", "shape": []}] * (
                    2 if library_first else 0
                )
                made += [
                    {"op": "all_reduce", "caller": "stats", "reduce_op": "SUM", "dtype": "float32", "shape": [8 + i]}
                    for i in range(layers)
                ]
                rec["collectives"], rec["collectives_count"] = made[:32], len(made)
        return records

    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    for layers, said in ((40, False), (20, True)):
        runs = pair(
            tmp_path / str(layers),
            meta_a=meta_a,
            meta_b=meta_b,
            records_a=trained_apart(reducing(make_records(), False, layers), 2),
            records_b=reducing(make_records(), True, layers - (0 if layers > 30 else 1)),
        )
        report, d = run_diagnosis(*runs)
        assert ("collectives" in d["evidence"]) == said, (layers, d["kind"], d["explanation"])
        assert (report["collectives"]["first_difference"] is not None) == said, report["collectives"]
