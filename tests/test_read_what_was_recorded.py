"""The classes of failure that swav, detr and hifigan's first pass found (docs/programs.md), each on hand-made
traces or a loop of the tests' own: an equal training never given a cause with a fix, what the module watch and
the hooks recorded (a module's type, the mode a step ran in, the lr of every group) read before a mechanism is
guessed, and parameters read as the step's forward used them."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from loops_of_our_own import Loop
from loops_of_our_own import pair as loop_pair
from test_diagnosis import (
    EPOCHS,
    INIT,
    make_meta,
    make_records,
    pair,
    run_diagnosis,
    trained_apart,
)
from test_diagnosis import (
    STEPS_PER_EPOCH as EPOCH_STEPS,
)

from ddp_parity import compare_traces
from ddp_parity.compare.causes import setup
from ddp_parity.compare.causes.base import Context
from ddp_parity.compare.comparator import compare_runs


def test_initial_weights_apart_on_another_rank_than_0_are_no_cause_of_an_equal_training(tmp_path):
    """detr's equal pair: rank 1's initial digest apart across the sides (each rank seeds and builds before DDP
    broadcasts rank 0's weights), rank 0's equal, every step and final tensor equal. The verdict is EQUIVALENT and
    the diagnosis must be the equivalent one, not an `init` cause with "seed identically" beside it."""
    runs = pair(tmp_path, meta_b=make_meta("lightning", init=[INIT, "f" * 64]))
    report, d = run_diagnosis(*runs)
    assert report["verdict"] == "equivalent", d
    assert d["category"] == "equivalent", (d["kind"], d["explanation"], d["advice"])
    assert "other than 0" in d["evidence"]["init_note"], d["evidence"]


def _evaluated_then_trained_in_eval_mode(records: dict, from_step: int) -> dict:
    """Each step's generator digest as the hooks take it: at the step's first training forward ("forward"), or,
    where none ran (a model left in eval mode), at the update."""
    for recs in records.values():
        for rec in recs:
            rec["rng"] = {"at": "forward", "torch": f"{rec['step']:016x}", "numpy": "0" * 16, "random": "1" * 16}
            if from_step and rec["step"] >= from_step:
                rec["rng"]["at"] = "update"
    return records


def _hooks(run, loader_draws_before_step_1: int, eval_before: int | None) -> None:
    for rank in (0, 1):
        facts = {
            "seeds": {"items": [{"before_step": 1, "order": 0, "seed": 42}]},
            "loader_iterators": {
                "items": [
                    {"before_step": 1, "dataset": "Boxes", "global_draw": True, "order": 1 + i}
                    for i in range(loader_draws_before_step_1)
                ]
                + [{"before_step": 5, "dataset": "Boxes", "global_draw": True, "order": 9}]
            },
            "modes": {"items": [{"before_step": 1, "module": "DistributedDataParallel", "order": 5, "training": True}]},
        }
        if eval_before is not None:
            facts["modes"]["items"].append(
                {"before_step": eval_before, "module": "DistributedDataParallel", "order": 8, "training": False}
            )
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))


def test_a_step_run_with_no_training_forward_is_named_before_loader_draws_the_generator_digest_refutes(tmp_path):
    """detr's slip: raw's evaluate() leaves the model in eval mode and its second epoch (steps 5..8) trains so; the
    port's sanity check iterated its loader once more before step 1 (under isolate_rng: the generator digests at
    every step's start are equal). The headline is the mode raw ran step 5 in, never the loader draws."""
    records_a = _evaluated_then_trained_in_eval_mode(make_records(), from_step=5)
    records_b = _evaluated_then_trained_in_eval_mode(make_records(), from_step=0)
    for recs in records_a.values():
        for rec in recs:
            if rec["step"] >= 5:
                rec["loss"] += 0.25  # dropout off
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=trained_apart(records_a, 5), records_b=records_b)
    _hooks(a, 1, eval_before=5)
    _hooks(b, 2, eval_before=None)
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("module_state.training_mode", 5), (d["kind"], d["explanation"])
    assert "raw ran step 5 with no forward in training mode" in d["explanation"], d["explanation"]
    assert "eval() on DistributedDataParallel before step 5" in d["explanation"], d["explanation"]
    assert "model.train()" in d["advice"] and "raw" in d["advice"], d["advice"]


def test_gradients_another_optimizer_leaves_in_place_are_no_frozen_parameters(tmp_path):
    """hifigan's slip (its schedulers stepped per batch): a GAN steps its discriminators' optimizer (the recorded
    steps), then its generator's. The hooks watch the program's first DDP wrapper (the generator, its names without
    `gen.`) on raw and the whole LightningModule on the port. At the discriminators' step the generator's gradients
    are there on both sides, the discriminators' unwatched on raw: no parameter both watches hold has a gradient on
    one side only, so nothing is `frozen` (it was said of every discriminator parameter, "raw computes no gradient
    for them"); nor of a gradient the recorded optimizer does not step (the generator's, left in place on one side
    by its own optimizer)."""
    names = ["gen.g.weight", "gen.g.bias", "disc.d.weight", "disc.d.bias"]
    optimizer = {"class": "AdamW", "named": True, "param_groups": [{"params": names[2:], "lr": 0.001}]}
    metas = []
    for side in ("raw", "lightning"):
        meta = make_meta(side)
        meta["recorded_by"], meta["optimizer"] = "hooks", optimizer
        meta["layers"] = {"names": names, "fields": ["norm", "grad_norm", "sketch0", "sketch1", "sketch2", "sketch3"]}
        metas.append(meta)
    records_b = make_records()
    for recs in records_b.values():
        for rec in recs:
            rec["lr"] = 0.001 * 0.9 ** (rec["step"] - 1)  # a scheduler stepped every step, the other side's per epoch
    for lightning_grads in (names, names[:1] + names[2:]):  # every gradient; one of the generator's cleared
        where = tmp_path / str(len(lightning_grads))
        a, b = pair(where, meta_a=metas[0], meta_b=metas[1], records_b=trained_apart(copy.deepcopy(records_b), 2))
        watched = {a: (["g.weight", "g.bias"], ["g.weight", "g.bias"]), b: (names, lightning_grads)}
        for run, (held, with_grad) in watched.items():
            for rank in (0, 1):
                line = {
                    "step": 2,
                    "calls": [{"name": "g", "type": "Linear", "phase": "forward", "input": "i", "output": "o"}],
                    "params_before": {n: "p-" + n.rsplit(".", 1)[-1] for n in held},
                    "param_grads": {n: "g-" + n.rsplit(".", 1)[-1] for n in with_grad},
                    "params_after": {n: "q-" + n.rsplit(".", 1)[-1] for n in held},
                }
                (run / "trace" / f"rank{rank}.modules.jsonl").write_text(json.dumps(line) + "\n")
        _, d = run_diagnosis(a, b)
        assert d["kind"] != "frozen", (len(lightning_grads), d["explanation"])


def test_a_discriminator_left_out_of_the_optimizer_is_named_not_other_initial_weights(tmp_path):
    """hifigan's slip (the multi-period discriminator left out of the discriminators' optimizer). Raw's hooks
    record its first DDP wrapper's initial weights (the generator) and its optimizer's parameters by their own
    module's names; the port's the whole LightningModule. Every initial weight both hold is equal, so not `init`
    ("the initial weights differ ... seed identically"); the optimizers as constructed hold 2 parameters on the
    port that raw's does not, every one of raw's being the port's: that is the finding, with the side to change."""
    gen = {"conv.weight": "1" * 16, "conv.bias": "2" * 16}
    mpd, msd = {"mpd.p.weight": "3" * 16, "mpd.p.bias": "4" * 16}, {"msd.d.weight": "5" * 16, "msd.d.bias": "6" * 16}

    def built(names):
        return [
            {"class": "AdamW", "named": True, "stepped": False, "param_groups": [{"params": ["g0"], "lr": 2e-4}]},
            {"class": "AdamW", "named": True, "stepped": True, "param_groups": [{"params": names, "lr": 2e-4}]},
        ]

    meta_a, meta_b = make_meta("raw", init="a" * 64), make_meta("lightning", init="b" * 64)
    meta_a["optimizer_built"] = built(["d.weight", "d.bias"])  # msd's, named by its own module
    meta_b["optimizer_built"] = built([*mpd, *msd])
    for meta, by_name in ((meta_a, gen), (meta_b, {**{f"generator.{k}": v for k, v in gen.items()}, **mpd, **msd})):
        meta["recorded_by"], meta["params_frozen"] = "hooks", []
        for facts in meta["ranks"]:
            facts["init_parameters_by_name"], facts["init_buffers_sha256"] = by_name, {}
            facts["init_parameters_sha256"] = facts["init_params_sha256"]
    records_b = make_records()
    for recs in records_b.values():
        for rec in recs:
            rec["loss"] += 0.1 if rec["step"] >= 3 else 0.0
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_b=trained_apart(records_b, 2))
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    assert d["evidence"]["optimizer_params_alone"] == {"lightning": sorted(mpd)}, d["evidence"]
    assert d["advice"].startswith("On raw, give the optimizer the same parameters as on lightning"), d["advice"]
    ctx = Context(compare_runs(a, b), ("raw", "lightning"))
    assert setup.check_init(ctx) is None  # every initial weight both hold is equal
    assert "the initial states cover other parameters" in ctx.cache["init_note"], ctx.cache


def test_a_module_of_another_class_with_equal_input_is_named_by_its_class(tmp_path):
    """swav's slip (SyncBatchNorm left out on raw): the module watch's first call apart is a norm layer whose input
    is equal and whose output differs, BatchNorm1d on one side and SyncBatchNorm on the other, every state it records
    equal. The watch recorded both classes: that is the finding, with the conversion as its fix."""
    from test_localise import step_record

    records_b = make_records()
    for recs in records_b.values():
        for rec in recs:
            rec["loss"] += 0.5
    a, b = pair(tmp_path, records_b=trained_apart(records_b, 1))
    changed = {"forward:bn:output": "other", "forward:bn:type": "SyncBatchNorm", "forward:head:input": "other"}
    for run, record in ((a, step_record(1)), (b, step_record(1, **changed))):
        for rank in (0, 1):
            (run / "trace" / f"rank{rank}.modules.jsonl").write_text(json.dumps(record) + "\n")
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("module_state", 1), (d["kind"], d["explanation"])
    assert "type=BatchNorm1d" in d["explanation"] and "SyncBatchNorm" in d["explanation"], d["explanation"]
    assert "Build bn as the same class on both sides (BatchNorm1d vs SyncBatchNorm)" in d["advice"], d["advice"]


def test_a_checkpoint_saved_from_the_ddp_wrapper_on_one_side_is_said(tmp_path):
    """hifigan's slip (the generator saved as generator.state_dict(), its DDP wrapper): the training and every saved
    value equal, raw's save holds each tensor under `module.`. Said as a checkpoint_keys warning with the fix, beside
    EQUIVALENT; nothing said where both sides save the bare model's keys."""
    for wrapped in (True, False):
        a, b = pair(tmp_path / str(wrapped))
        for run, prefix in ((a, "generator.module." if wrapped else "generator."), (b, "generator.")):
            for rank in (0, 1):
                contents = {f"{prefix}conv.weight": "1" * 16, f"{prefix}conv.bias": "2" * 16, "steps": "3" * 16}
                save = {"op": "torch.save", "after_step": 3, "order": 1, "path": "cp/g_00000003", "contents": contents}
                facts = {"checkpoints": {"items": [save] if rank == 0 else []}}
                (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))
        report, _ = run_diagnosis(a, b)
        said = [w for w in report["warnings"] if w["kind"] == "checkpoint_keys"]
        assert report["verdict"] == "equivalent"
        assert bool(said) == wrapped, said
        if wrapped:
            assert "raw saved the state_dict() of its DistributedDataParallel wrapper" in said[0]["message"], said
            assert "(generator.module.conv.bias against generator.conv.bias)" in said[0]["message"], said
            # LoRA's reader maps `module.*` (and its strict=False drops the bare keys): either side may be the one
            # to change, as the program's own reader of the files decides; never only "unwrap on raw"
            assert "those the program's own reader of these files expects" in said[0]["message"], said
            assert "model.module.state_dict() on raw, or," in said[0]["message"], said
            assert "lightning's state under `module.`" in said[0]["message"], said


def test_an_evaluation_one_side_records_alone_is_never_said_to_be_missing_on_the_other(tmp_path):
    """hifigan's equal pair: the port evaluates its generator by calling it inside its LightningModule (a part of
    the model the steps train, which the hooks do not see as an evaluation). The warning says what the records hold
    ("records no evaluation there", and what is seen), never "the other side does not evaluate there"."""
    a, b = pair(tmp_path)
    for rank in (0, 1):
        evaluation = {"step": 1, "micro_batch": 0, "epoch": 0, "forwards": 1, "output_digest": "0" * 64}
        (a / "trace" / f"rank{rank}.evaluations.jsonl").write_text(json.dumps(evaluation) + "\n")
    report, _ = run_diagnosis(a, b)
    said = [w["message"] for w in report["warnings"] if w["kind"] == "evaluation_differs"]
    assert said and all("the other side records no evaluation there" in m for m in said), said
    assert not any("does not evaluate" in m or "the other side's ranks gave other ones" in m for m in said), said


def test_a_parameter_without_a_gradient_at_one_step_on_one_side_is_named_from_the_layer_rows(tmp_path):
    """swav's slip (its prototypes' .grad set to None one iteration longer on raw): at step 4 raw's layer row for the
    prototypes holds no gradient norm (NaN: no .grad as the optimizer stepped), the port's one; no module watch holds
    step 4. That parameter, at that step, is the finding, with the .grad set to None among its mechanisms."""
    names = ["net.0.weight", "prototypes.weight"]
    metas = []
    for side in ("raw", "lightning"):
        meta = make_meta(side)
        meta["recorded_by"] = "hooks"
        meta["layers"] = {"names": names, "fields": ["norm", "grad_norm", "sketch0", "sketch1", "sketch2", "sketch3"]}
        metas.append(meta)
    records = make_records(), make_records()
    for i, side in enumerate(records):
        for recs in side.values():
            for rec in recs:
                frozen = rec["step"] <= (4 if i == 0 else 3)
                rec["layers"] = [[1.0, 0.5, 0, 0, 0, 0], [2.0, float("nan") if frozen else 0.25, 0, 0, 0, 0]]
                if i == 0 and rec["step"] == 4:
                    rec["grad_norm"] -= 0.0625  # the total without the prototypes' gradient
    a, b = pair(
        tmp_path, meta_a=metas[0], meta_b=metas[1], records_a=trained_apart(records[0], 4), records_b=records[1]
    )
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("frozen", 4), (d["kind"], d["explanation"])
    assert "prototypes.weight get(s) a gradient on lightning and none on raw at step 4" in d["explanation"], d
    assert "set their .grad to None at the same iterations on both sides" in d["advice"], d["advice"]


def test_a_schedule_that_starts_again_at_each_epoch_is_named(tmp_path):
    """swav's slip (its lr array indexed by the iteration within the epoch): the rates part at the second epoch's
    first step, where raw's rates repeat its first epoch's and the port's go on decaying. Named as a restart, with
    the global step as its fix, never a generic "build and step the same schedule"."""
    records_a, records_b = make_records(), make_records()
    for records, restart in ((records_a, True), (records_b, False)):
        for recs in records.values():
            for i, rec in enumerate(recs):
                index = i % 4 if restart else i  # make_records: 4 steps an epoch
                rec["lr"] = 0.3 + 0.1 * index if index < 4 else 0.6 * 0.8 ** (index - 3)
    _, d = run_diagnosis(*pair(tmp_path, records_a=trained_apart(records_a, 5), records_b=records_b))
    assert (d["kind"], d["step"]) == ("optimizer.lr_restart", 5), (d["kind"], d["explanation"])
    assert "raw's schedule starts again at each epoch" in d["explanation"], d["explanation"]
    assert d["advice"].startswith("On raw, compute each step's lr from the global step"), d["advice"]


def test_one_sample_a_step_on_one_side_names_the_batch_sampler_lightning_does_not_carry_over(tmp_path):
    """detr's round 1: the port's DataLoader(batch_sampler=BatchSampler(RandomSampler, 2)), re-created by Lightning
    for its DistributedSampler with batch_size 1. The finding gives that mechanism beside the global batch divided by
    the world size (which the port does not do), and its fix."""
    records_b = make_records()
    for recs in records_b.values():
        for rec in recs:
            rec["indices"] = rec["indices"][:1]
    _, d = run_diagnosis(*pair(tmp_path, records_b=records_b))
    assert (d["kind"], d["step"]) == ("data_order.batch_size", 1), (d["kind"], d["explanation"])
    assert "lightning takes 1 sample a step, a DataLoader's default batch_size" in d["explanation"], d["explanation"]
    assert "where lightning's DataLoader is given batch_sampler=, give it batch_size= and drop_last=" in d["advice"]


def test_an_lr_apart_in_one_group_is_never_said_to_be_apart_in_every_group(tmp_path):
    """detr's slip (the backbone's group lost its own lr): group 1's lr is 10 × on raw, group 0's equal. The words
    say which parameters' lr is k ×, never "in every group"."""

    def built(backbone_lr):
        groups = [{"params": ["net.0.weight"], "lr": 1e-4}, {"params": ["net.0.bias"], "lr": backbone_lr}]
        return [{"class": "AdamW", "named": True, "stepped": True, "param_groups": groups}]

    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["optimizer_built"], meta_b["optimizer_built"] = built(1e-4), built(1e-5)
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    _, d = run_diagnosis(*pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=trained_apart(make_records(), 1)))
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    assert "raw's lr is 10 × lightning's for the 1 parameter(s) whose lr differs" in d["explanation"], d["explanation"]
    assert "in every group" not in d["explanation"], d["explanation"]


def test_what_every_rank_could_not_record_alike_is_said_once_with_its_ranks(tmp_path):
    """detr's batches hold a NestedTensor, which no rank's hooks can digest: each rank notes it alike, and the
    comparison said it twice per side without a rank. Said once per side, naming the ranks."""
    meta_b = make_meta("lightning")
    why = "from step 1: batch[0][0]: NestedTensor cannot be digested by value (see batch_undigested)"
    meta_b["unrecorded"] = [{"rank": r, "what": "batch_digest", "why": why} for r in (0, 1)]
    report, _ = run_diagnosis(*pair(tmp_path, meta_b=meta_b))
    said = [w["message"] for w in report["warnings"] if w["kind"] == "recorder_unrecorded"]
    assert len(said) == 1 and said[0].startswith("lightning (rank(s) 0, 1): the recorder could not record"), said


def test_a_batch_holding_a_container_class_of_the_programs_own_is_digested_by_its_tensors():
    """detr's batches: a NestedTensor (padded images and their mask) beside a list of target dicts. The batch digest
    covers the container's tensors by attribute name, so equal batches digest alike and another mask does not; an
    object holding no tensor stays undigested, by its path."""
    from ddp_parity.fingerprints import batch_contents

    class Padded:  # DETR's NestedTensor, as util/misc.py defines it
        def __init__(self, tensors, mask):
            self.tensors, self.mask = tensors, mask

    images, mask = torch.arange(12.0).reshape(1, 3, 4), torch.zeros(1, 3, 4, dtype=torch.bool)
    targets = [{"boxes": torch.ones(2, 4), "labels": torch.tensor([1, 2])}]
    digests = [batch_contents((Padded(images.clone(), m), targets)) for m in (mask, mask.clone(), ~mask)]
    assert [d[1] for d in digests] == [[], [], []], digests
    assert digests[0][0] == digests[1][0] != digests[2][0]
    assert batch_contents((object(), targets))[1] == ["batch[0]: object"]

    class Hostile:  # an object whose attributes cannot be listed stays a leaf: never an error in the user's step
        @property
        def __dict__(self):
            raise RuntimeError("no attributes")

    assert batch_contents((Hostile(), targets))[1] == ["batch[0]: Hostile"]


def test_samples_apart_by_the_recorded_epochs_are_never_put_on_the_loaders_global_draws(tmp_path):
    """LoRA's loop counts its epochs from 1 (set_epoch(1) first) and its port from 0; the port's sanity check also
    iterated one loader more before step 1. A DistributedSampler draws its order from seed + epoch, never from the
    global generator, so the records' epochs part the samples: data_order.epoch, not rng.loader_draws."""
    shifted = make_records(epochs=EPOCHS + 1)
    per_epoch = len(shifted[0]) // (EPOCHS + 1)
    records_a = {
        rank: [dict(rec, step=rec["step"] - per_epoch) for rec in recs if rec["epoch"] >= 1]
        for rank, recs in shifted.items()
    }
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=records_a, records_b=make_records())
    _hooks(a, 1, eval_before=None)
    _hooks(b, 2, eval_before=None)
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("data_order.epoch", 1), (d["kind"], d["explanation"])
    assert "raw records epoch 1 and lightning epoch 0" in d["explanation"], d["explanation"]


def _batch_apart_at_step_1(tmp_path, lightning_drew_between_its_seeds: bool):
    """KAIR's round: raw builds its EMA network a second time (its weights draw from torch's generator), the port
    deep-copies it; the dataset's random crops and noise then draw other numbers: the batch parts at step 1 at
    equal indices. Both seeded 42 last; the port's DDP setup seeded 42 again, with the model built after it."""
    records = {side: make_records() for side in ("a", "b")}
    for side, per_rank in records.items():
        for recs in per_rank.values():
            for rec in recs:
                rec["batch_digest"] = f"{side if rec['step'] == 1 else 'x'}{rec['step']:015d}"
                torch_state = f"{side if rec['step'] == 1 else 'f'}{rec['step']:015x}"
                rec["rng"] = {"at": "forward", "torch": torch_state, "numpy": "0" * 16, "random": "1" * 16}
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    a, b = pair(
        tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=records["a"], records_b=trained_apart(records["b"], 1)
    )
    _hooks(a, 1, eval_before=None)
    _hooks(b, 1, eval_before=None)
    for rank in (0, 1):
        path = b / "trace" / f"rank{rank}.hooks.json"
        facts = json.loads(path.read_text())
        facts["seeds"]["items"].append(
            {"before_step": 1, "order": 0, "seed": 42, "drawn_since_last_seed": lightning_drew_between_its_seeds}
        )
        path.write_text(json.dumps(facts))
    return run_diagnosis(a, b)[1]


def test_a_batch_apart_at_equal_indices_after_the_same_last_seed_names_what_drew_between(tmp_path):
    d = _batch_apart_at_step_1(tmp_path, lightning_drew_between_its_seeds=False)
    assert (d["kind"], d["step"]) == ("rng.drawn_before_step_1", 1), (d["kind"], d["explanation"])
    assert "both sides seeded it last with 42" in d["explanation"], d["explanation"]
    assert "deep-copied on both" in d["advice"] and "worker" not in d["advice"], d["advice"]


def test_a_repeated_seed_that_came_after_a_draw_is_still_the_reseed(tmp_path):
    d = _batch_apart_at_step_1(tmp_path, lightning_drew_between_its_seeds=True)
    assert d["kind"] == "rng.reseed", (d["kind"], d["explanation"])


def test_a_batch_apart_with_every_loader_in_the_main_process_blames_no_worker_seeding(tmp_path):
    """EDM's round: the port left an empty label tensor None, the raw loop kept it: the batches part at equal indices,
    every DataLoader at num_workers=0 on both sides. Worker seeding cannot be it; the batch's making is."""
    records = {side: make_records() for side in ("a", "b")}
    for side, per_rank in records.items():
        for recs in per_rank.values():
            for rec in recs:
                rec["batch_digest"] = f"{side}{rec['step']:015d}"
    a, b = pair(tmp_path, records_a=records["a"], records_b=trained_apart(records["b"], 1))
    for run in (a, b):
        for rank in (0, 1):
            facts = {"loader_iterators": {"items": [{"before_step": 1, "dataset": "Images", "num_workers": 0}]}}
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("data_pipeline", 1), (d["kind"], d["explanation"])
    assert "num_workers=0" in d["explanation"] and "no worker seeding is involved" in d["explanation"]
    assert "worker_init_fn" not in d["advice"] and "collate_fn" in d["advice"], d["advice"]


def test_initial_weights_apart_after_a_loader_drew_between_the_seed_and_the_model_name_that_draw(tmp_path):
    """EDM's loop iterates its DataLoader (one base-seed draw from the global generator) between its seed and the
    network's construction; the port built first. The same seed on both sides: the headline names the recorded draw,
    never another seed."""
    runs = pair(tmp_path, meta_b=make_meta("lightning", init=["e" * 64, "f" * 64]))
    for run, draws in zip(runs, (1, 0)):
        for rank in (0, 1):
            facts = {
                "seeds": {"items": [{"before_step": 1, "order": 1, "seed": 7}]},
                "loader_iterators": {
                    "items": [{"before_step": 1, "dataset": "Images", "global_draw": True, "order": 2}] * draws
                    + [{"before_step": 1, "dataset": "Images", "global_draw": True, "order": 9}]
                },
                "ddp": {"items": [{"before_step": 1, "order": 5}]},
            }
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))
    _, d = run_diagnosis(*runs)
    assert d["kind"] == "init", (d["kind"], d["explanation"])
    headline = d["explanation"].split(". ")[0]
    assert "rank 0 iterated 1 DataLoader(s) drawing from the global generator on raw (Images) and 0 on lightning" in (
        headline
    ), d["explanation"]
    assert d["evidence"]["loader_draws_before_the_model"] == {"raw": ["Images"], "lightning": []}


def test_an_evaluation_loader_iterated_before_another_step_is_named_between_the_steps_it_parts(tmp_path):
    """LoRA's loop evaluates every 6 micro-batches counted across epochs, its port at the 6th batch of each epoch: the
    validation loader's iterator (one draw from the global generator) comes before step 5 on one side and before
    step 6 on the other; the port's sanity check drew once more before step 1 under isolate_rng. As many draws in
    all up to step 5, the generators equal at step 4's start and apart at step 5's: the draw between is named."""
    records = {side: make_records() for side in ("a", "b")}
    for side, per_rank in records.items():
        for recs in per_rank.values():
            for rec in recs:
                apart = side == "a" and rec["step"] == 5
                rec["rng"] = {"at": "forward", "torch": f"{'a' if apart else 'f'}{rec['step']:015x}"}
                if rec["step"] >= 5 and side == "a":
                    rec["loss"] += 1e-4  # dropout drew another mask
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    a, b = pair(
        tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=trained_apart(records["a"], 5), records_b=records["b"]
    )
    for run, draws in ((a, [(1, 1), (5, 2)]), (b, [(1, 1), (1, 2), (6, 3)])):
        for rank in (0, 1):
            facts = {
                "seeds": {"items": [{"before_step": 1, "order": 0, "seed": 42}]},
                "loader_iterators": {
                    "items": [
                        {"before_step": s, "dataset": "Tokens", "global_draw": True, "order": o} for s, o in draws
                    ]
                },
            }
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps(facts))
    _, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("rng.loader_draws", 5), (d["kind"], d["explanation"])
    assert "between step 4 and step 5" in d["explanation"], d["explanation"]
    assert (
        "1 DataLoader(s) drawing from the global generator on raw (Tokens before step 5) and 0 on lightning"
        in (d["explanation"])
    )


def test_a_schedule_ahead_says_the_step_the_training_parts_from_the_digests_both_sides_share(tmp_path):
    """KAIR's port holds its EMA network beside the model, so its per-step digest sums another last parameter (the
    EMA's) than the raw loop's: the digests compared whole differ from step 1 whatever the training does. The
    schedule one step ahead is said with the step the shared digests part at (4), never "the parameters part at
    step 1"."""
    records = {side: make_records() for side in ("a", "b")}
    for side, per_rank in records.items():
        for recs in per_rank.values():
            for rec in recs:
                rec["lr"] = 0.1 if rec["step"] < (4 if side == "a" else 5) else 0.05
                if side == "b":  # the EMA's last parameter between the shared first and last
                    rec["param_digest"] = [rec["param_digest"][0], 7.0 + 0.01 * rec["step"], rec["param_digest"][1]]
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["param_digest_names"] = ["0.weight", "3.bias"]
    meta_b["param_digest_names"] = ["0.weight", "ema.3.bias", "3.bias"]
    a, b = pair(
        tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=trained_apart(records["a"], 4), records_b=records["b"]
    )
    report, d = run_diagnosis(a, b)
    assert d["kind"] == "optimizer.lr_ahead" and d["step"] == 4, (d["kind"], d["explanation"])
    assert "the parameters part at step 4" in d["explanation"], d["explanation"]
    assert d["evidence"]["params_part_at"] == 4


def test_a_first_input_apart_at_an_equal_batch_is_the_steps_handling_of_the_batch(tmp_path):
    """EDM round 9: the loss draws noise before calling the network, so the first module's input differs while the
    batch digests are equal. That was left undetermined, its advice "watch the model" though both sides had watched
    the step, against the report's own module finding. It is data_pipeline: what the step does to the batch before
    the model, with no worker blamed."""
    base = Loop(watch=True, record_batch=True)
    d = compare_traces(*loop_pair(tmp_path, base, base.changed(input_noise=0.01)))["diagnosis"]
    assert (d["kind"], d["step"]) == ("data_pipeline", 1), (d["kind"], d["explanation"])
    assert "The step's batch is the same on both sides (batch_digest)" in d["explanation"], d["explanation"]
    assert "the same draws before the model" in d["advice"] and "worker" not in d["advice"], d["advice"]
    assert "watch the model" not in d["advice"]


@pytest.mark.parametrize("recorded", ["scaled", "unscaled"])
def test_a_loss_factor_from_a_later_step_is_no_count(tmp_path, recorded):
    """StyleGAN2's slip: the R1 term lost its lazy factor (× d_reg_every = 2) at the discriminator's regularization
    steps only. The loss backward ran on is 2 × the other side's from step 3, every step before equal; 2 is also the
    accumulation count, which would scale every step's loss: the finding names a term of that step's loss weighted
    otherwise, never the count (before: "sums its 2 micro-batch losses without dividing", "the training differs
    from the first step"). Recorded as backward's root (the hooks: loss.factor) or before the weight (the gradients'
    factor)."""
    base = Loop(accumulate=2, batch=2, config={"data": {"batch_size": 4}, "trainer": {"accumulate_grad_batches": 2}})
    base = base.changed(record_scaled=recorded == "scaled")
    a, b = loop_pair(tmp_path, base, base.changed(loss_scale=2.0, loss_scale_from=3))
    d = compare_traces(a, b)["diagnosis"]
    kind = "loss.factor" if recorded == "scaled" else "gradients.factor"
    assert (d["kind"], d["step"]) == (kind, 3), (d["kind"], d["explanation"])
    assert "it holds from step 3 only, every step before it equal" in d["explanation"], d["explanation"]
    assert "accumulat" not in d["advice"] and "2 is the" not in d["explanation"], d
    assert "from the first step" not in d["explanation"] and "signature" not in d["explanation"], d["explanation"]
    assert d["advice"].startswith("Give backward the same loss at step 3 on both sides"), d["advice"]


def test_a_sampler_whose_epoch_never_moves_is_set_epoch_from_the_loader_iterators(tmp_path):
    """StyleGAN2's endless loader (`sample_data`: `for batch in loader: yield batch`) never calls set_epoch, while
    Lightning does: its second pass replays the first's order. The replay could not be read from the step records
    (steps without a batch between; here, a first epoch whose indices were not recorded), and the finding was a
    generic data_order listing set_epoch among five things to check. The hooks note each DataLoader iterator's
    sampler epoch as the pass begins: [0, 0] against [0, 1] is set_epoch, on the side that never moves it."""
    records = {side: make_records(set_epoch=side == "lightning") for side in ("raw", "lightning")}
    for recs in (r for side in records.values() for r in side.values()):
        for rec in recs:
            if rec["epoch"] == 0:
                rec["indices"] = None  # the first pass's order unrecorded: no replay to read
    a, b = pair(tmp_path, records_a=trained_apart(records["raw"], EPOCH_STEPS + 1), records_b=records["lightning"])
    for run, epochs in ((a, [0, 0]), (b, [0, 1])):
        for rank in (0, 1):
            passes = [
                {
                    "before_step": 1 + i * EPOCH_STEPS,
                    "trained": True,
                    "sampler": {"class": "DistributedSampler", "epoch": e},
                }
                for i, e in enumerate(epochs)
            ]
            (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps({"loader_iterators": {"items": passes}}))
    report, d = run_diagnosis(a, b)
    assert (d["kind"], d["step"]) == ("set_epoch", EPOCH_STEPS + 1), (d["kind"], d["explanation"])
    assert "at epoch 0, 0 on raw, at 0, 1 on lightning" in d["explanation"], d["explanation"]
    assert d["advice"].startswith("On raw: call sampler.set_epoch(epoch)"), d["advice"]


def test_a_rate_set_by_hand_per_epoch_against_per_step_is_said_as_set_by_hand(tmp_path):
    """MoCo v3's slip: its lr, set by hand from `epoch + i / iters_per_epoch`, was computed from the epoch alone. The
    rates start at 0 (a warmup from 0), which the series' shape dropped, so "changes only at epoch boundaries" was
    not seen; and with no scheduler stepped on either side (recorded 0 before every step) the fix spoke of stepping a
    scheduler object and OneCycleLR's total_steps."""
    base = Loop(steps=8, batch=16, lr_read="warmup", record_scheduler_count=True)
    a, b = loop_pair(tmp_path, base.changed(warmup_per_epoch=True), base)
    d = compare_traces(a, b)["diagnosis"]
    assert (d["kind"], d["step"]) == ("optimizer.lr", 2), (d["kind"], d["explanation"])
    assert "reference's rate changes only at epoch boundaries, the other's within an epoch" in d["explanation"], d
    assert "Neither side stepped a scheduler" in d["explanation"], d["explanation"]
    assert d["advice"].startswith("Set the rate at the same points on both sides"), d["advice"]
    assert "total_steps" not in d["advice"] and "scheduler" not in d["advice"], d["advice"]


def test_a_setting_apart_under_a_warmup_from_0_is_dated_from_the_first_rate_above_0(tmp_path):
    """MoCo v3's slip 1b (its LARS built without weight_decay), under a warmup whose step 1 has a rate of 0: the
    param groups apart are said from step 2, the first step with a rate, not "from the first step"; and an optimizer
    that is none of torch's is said to choose itself which of its groups' parameters a setting acts on."""
    base = Loop(lr_read="warmup", record_optimizer="first")
    a, b = loop_pair(tmp_path, base, base.changed(weight_decay=0.01))
    d = compare_traces(a, b)["diagnosis"]
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    assert "from step 2 on (the first whose recorded lr is above 0 on both sides" in d["explanation"], d
    assert "from the first step" not in d["explanation"], d["explanation"]
    assert setup._own_optimizer_words({"class": "SGD"}, "weight_decay") == ""
    assert "LARS is not one of torch's optimizers" in setup._own_optimizer_words({"class": "LARS"}, "weight_decay")


def test_a_step_the_hooks_watched_by_default_is_never_asked_for_again():
    """StyleGAN2's raw side: the hooks watch the first model given to DDP (the generator) at steps 1 and 2 by
    default; step 2, the discriminator's R1 step, never calls it, so no call was recorded there. "Set
    DDP_PARITY_WATCH_STEP=2" would record the same: the unchecked line says why nothing was seen instead."""
    from ddp_parity.compare import evidence
    from ddp_parity.compare.causes.base import unchecked_at

    have = {
        "raw": {"watch", evidence.HOOKS_KIND, evidence.HOOKS_WATCHED_KIND},
        "lightning": {"watch", "watch_step", "watch_state", evidence.HOOKS_KIND},
    }
    [line] = [u for u in unchecked_at({"quantity": "loss", "step": 2}, have) if u["evidence"] == "watch_step"]
    assert line["sides"] == ["raw"], line
    assert line["record"].startswith("the hooks watched step 2 (their default steps 1 and 2)"), line
    assert "DDP_PARITY_WATCH_STEP=2" not in line["record"], line
