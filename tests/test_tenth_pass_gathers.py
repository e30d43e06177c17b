"""The class openclip's first pass found (docs/programs.md, issue 46's tenth pass): the program's own collectives
apart, read as seeds or as a generic loss-argument list. A loss computed over features all-gathered from every rank
(a contrastive loss) is computed over another batch where the port gathers otherwise: each micro-batch alone under
accumulate_grad_batches against the step's micro-batches together (the program caching the others' features), or
nothing at all (the loss built without the group's world size). The records show it: the same samples fed, the loss
apart first, and the program's own gathers of that step apart in shape, count or presence. The tool read a
generator's state apart at that step as a re-seed ("build the model after the last seed") or listed label smoothing,
class weights and reductions, the gathers only as an aside. Now the headline names the gathers, side by side, with
the mechanism the records point at; a generator apart there is said beside them, never ahead.

Hand-made traces shaped as the hooks of `ddp-parity record` write them (no processes, no training), and one pair
of a contrastive loop of our own (tests/hooks_programs/contrastive_ddp.py) recorded by the hooks (slow)."""

from __future__ import annotations

import json

import pytest
from conftest import REPO, _torchrun_prefix, check_ok, child_env, run_cmd
from test_diagnosis import BATCH, make_meta, make_records, pair, run_diagnosis, trained_apart

from ddp_parity import compare_traces
from ddp_parity.compare.causes import forward
from ddp_parity.compare.causes.base import Context
from ddp_parity.compare.comparator import compare_runs
from ddp_parity.hooks import recording_env

FEATURES = 16


def gather(rows: int, tensors: int = 2, caller: str = "contrastive.loss") -> dict:
    """One all_gather of the program's own (a list of `tensors`, each [rows, FEATURES]), as the hooks record it."""
    shape = [rows, FEATURES] if rows else []
    return {"op": "all_gather", "caller": caller, "dtype": "float32", "shape": shape, "tensors": tensors}


def lightning_own() -> list[dict]:
    """What Lightning's loop makes beside the program's own at every step (its checks): never the program's."""
    return [
        {"op": "broadcast", "caller": "lightning.pytorch.loops.training_epoch_loop", "dtype": "int64", "shape": [1]}
    ]


def hooked(records: dict, gathers, rng: str, loss_from: int | None = None) -> dict:
    """Records as the hooks write them for a contrastive loop: equal batch digests, 2 micro-batches a step, the
    generators' digests taken at the first training forward, and `gathers(step)` as the step's collectives; from
    step `loss_from` on, this side's loss is another."""
    for rank, recs in records.items():
        for rec in recs:
            rec["batch_digest"] = f"{rank}{rec['step']:03d}" * 16
            rec["micro_batches"] = 2
            rec["rng"] = {"at": "forward", "torch": rng * 16}
            rec["collectives"] = gathers(rec["step"])
            rec["collectives_count"] = len(rec["collectives"])
            if loss_from is not None and rec["step"] >= loss_from:
                rec["loss"] += 4.0
    return records


def reseeded(run, times: int) -> None:
    """The seeds the hooks saw before step 1: the same value, `times` times, something drawn between (a model
    built between two seeds): the re-seed the old diagnosis named."""
    for rank in (0, 1):
        items = [{"before_step": 1, "order": i, "seed": 0, "drawn_since_last_seed": i > 0} for i in range(times)]
        (run / "trace" / f"rank{rank}.hooks.json").write_text(json.dumps({"seeds": {"count": times, "items": items}}))


def contrastive_pair(tmp_path, gathers_a, gathers_b, *, loss_from: int = 1, apart_from: int = 1):
    meta_a, meta_b = make_meta("raw"), make_meta("lightning")
    meta_a["recorded_by"] = meta_b["recorded_by"] = "hooks"
    records_a = trained_apart(hooked(make_records(), gathers_a, "aa"), apart_from)
    records_b = hooked(make_records(), gathers_b, "bb", loss_from)
    a, b = pair(tmp_path, meta_a=meta_a, meta_b=meta_b, records_a=records_a, records_b=records_b)
    reseeded(a, 1)
    reseeded(b, 2)
    return a, b


def the_step(micro: int):
    """Each of 2 micro-batches' losses gathered at every step: of the step's BATCH samples (the others' features
    cached) where `micro` is BATCH, of one micro-batch's where it is BATCH // 2; none where it is 0."""
    return lambda step: [gather(micro) for _ in range(4)] if micro else []


def test_micro_batches_gathered_alone_against_the_step_are_the_headline_not_a_reseed(tmp_path):
    """openclip's round 3: the same batches, the loss apart at step 1, torch's generator apart at the first forward
    and the global seed set once more on lightning; raw gathers 8 rows a rank (the step's two micro-batches, one
    cached), lightning 4 (accumulate_grad_batches: each micro-batch alone). The gathers lead, side by side, with the
    accumulation named; the generator is a second candidate only (no module watch compared the forward)."""
    a, b = contrastive_pair(tmp_path, the_step(BATCH), lambda step: lightning_own() + the_step(BATCH // 2)(step))
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "loss.gathered", (d["kind"], d["explanation"])
    headline = d["explanation"].split(". ")[0]
    assert "computed over another gathered batch" in headline, headline
    assert "raw: 4 all_gather calls, each of 2 × float32 [8, 16]" in headline, headline
    assert "lightning: 4 all_gather calls, each of 2 × float32 [4, 16]" in headline, headline
    assert "equal batch digests" in headline, headline
    assert "raw's gathers carry 8 rows a rank, the step's 8 samples, and lightning's 4" in d["explanation"]
    assert "accumulate_grad_batches" in d["advice"] and "seed" not in d["advice"].lower(), d["advice"]
    assert "second candidate" in d["explanation"] and "DDP_PARITY_WATCH_STEP=1" in d["explanation"]
    assert d["evidence"]["gathers"]["step"] == 1 and "rng_state" in d["evidence"], d["evidence"]
    assert "The program's own collectives differ" not in d["explanation"], d["explanation"]  # said once, above


def test_a_loss_that_gathers_nothing_on_one_side_is_the_headline_not_the_loss_arguments(tmp_path):
    """openclip's slip 1: the port built the loss without the group's rank and world size, so it gathers nothing
    (Lightning's own collectives beside); the old diagnosis listed label smoothing and class weights. The side that
    gathers nothing is named, with the world size as the fix."""
    a, b = contrastive_pair(tmp_path, the_step(BATCH), lambda step: lightning_own())
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "loss.gathered", (d["kind"], d["explanation"])
    assert "lightning: no gather of its own" in d["explanation"].split(". ")[0], d["explanation"]
    assert "lightning gathers nothing of its own there" in d["explanation"], d["explanation"]
    assert "world size" in d["advice"] and "label_smoothing" not in d["advice"], d["advice"]


def test_where_the_watch_finds_the_forward_equal_the_generator_is_not_a_candidate(tmp_path):
    """With the module watch finding every module call equal and the loss's gradient apart (openclip's round 3 had
    it), the generator apart at the forward is said to lead nowhere."""
    a, b = contrastive_pair(tmp_path, the_step(BATCH), the_step(BATCH // 2))
    ctx = Context(compare_runs(a, b), ("raw", "lightning"))
    ctx.cache["module"] = {"reading_kind": "loss_grad", "step": 1, "name": "", "phase": "backward", "type": "Net"}
    found = forward.check_gathered_batch(ctx)
    assert found is not None and found.kind == "loss.gathered", found
    assert "every module call both sides watched is equal" in found.explanation, found.explanation
    assert "second candidate" not in found.explanation, found.explanation
    ctx.cache["module"] = {"reading_kind": "random", "step": 1, "name": "drop", "phase": "forward", "type": "Dropout"}
    assert forward.check_gathered_batch(ctx) is None  # a random layer apart comes before the loss


def test_gathers_the_records_cannot_place_name_both_mechanisms(tmp_path):
    """Gathers apart in the list's length and in rows that are neither the step's samples nor a micro-batch's: both
    mechanisms named, and what tells them apart."""
    a, b = contrastive_pair(tmp_path, lambda step: [gather(BATCH)] * 4, lambda step: [gather(BATCH - 2, tensors=4)] * 4)
    _, d = run_diagnosis(a, b)
    assert d["kind"] == "loss.gathered", (d["kind"], d["explanation"])
    assert "do not tell two mechanisms apart" in d["explanation"], d["explanation"]
    assert "raw [2]; lightning [4]" in d["explanation"] and "raw [8]; lightning [6]" in d["explanation"]


def test_gathers_apart_where_they_cannot_part_the_loss_are_no_headline(tmp_path):
    """Not the gathers: the same difference at the steps before, after which the training stayed equal; gathers of
    one number a tensor (a logged loss); and other batches fed (the samples' own causes come first)."""
    every_step = contrastive_pair(tmp_path / "every", the_step(BATCH), the_step(BATCH // 2), loss_from=3, apart_from=3)
    _, d = run_diagnosis(*every_step)
    assert d["step"] == 3 and d["kind"] != "loss.gathered", (d["kind"], d["explanation"])
    logged = contrastive_pair(tmp_path / "logged", lambda step: [gather(0)], lambda step: [])
    _, d = run_diagnosis(*logged)
    assert d["kind"] != "loss.gathered", (d["kind"], d["explanation"])
    a, b = contrastive_pair(tmp_path / "fed", the_step(BATCH), the_step(BATCH // 2))
    records = [json.loads(line) for line in (b / "trace" / "rank0.jsonl").read_text().splitlines()]
    records[0]["batch_digest"] = "f" * 64
    (b / "trace" / "rank0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    _, d = run_diagnosis(a, b)
    assert d["kind"] != "loss.gathered", (d["kind"], d["explanation"])


@pytest.mark.slow
def test_a_contrastive_loop_recorded_by_the_hooks_names_the_gathered_batch(tmp_path):
    """Our contrastive loop (2 ranks) as the program has it, each micro-batch against the other's cached features,
    and as accumulate_grad_batches makes it, each micro-batch alone: recorded by the hooks with no line changed, the
    diagnosis names the gathers of step 1 side by side and the accumulation, the forward watched equal."""
    for mode in ("cached", "alone"):
        cmd = [*_torchrun_prefix(2), REPO / "tests" / "hooks_programs" / "contrastive_ddp.py", "--accumulate", mode]
        check_ok(run_cmd(cmd, env=recording_env(tmp_path / mode, mode, child_env())))
    d = compare_traces(tmp_path / "cached", tmp_path / "alone")["diagnosis"]
    assert (d["kind"], d["step"]) == ("loss.gathered", 1), (d["kind"], d["explanation"])
    headline = d["explanation"].split(". ")[0]
    assert "cached: 4 all_gather calls, each of 2 × float32 [8, 4]" in headline, headline
    assert "alone: 4 all_gather calls, each of 2 × float32 [4, 4]" in headline, headline
    assert "cached's gathers carry 8 rows a rank, the step's 8 samples, and alone's 4" in d["explanation"]
    assert "port that accumulation by hand on alone" in d["advice"], d["advice"]
