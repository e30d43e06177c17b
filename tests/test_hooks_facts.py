"""The facts the hooks take besides the step's numbers (ddp_parity/hooks/rng.py, checkpoints.py,
collectives.py) and what the diagnosis does with them (ddp_parity/compare/causes/hooked.py): programs of
our own (tests/hooks_programs/facts_loop.py, facts_ddp.py), two sides differing by one fact, recorded with
no line changed."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import PYTHON, REPO, _torchrun_prefix, check_ok, child_env, recorded_once, run_cmd
from test_hooks import bitwise_equal

from ddp_parity import compare_traces
from ddp_parity.hooks import recording_env
from ddp_parity.trace import META_FILE, read_records

PROGRAMS = REPO / "tests" / "hooks_programs"


def loop(tmp: Path, name: str, *args: str, record: bool = True):
    """facts_loop.py recorded into tmp/name (or not): (its result, the run directory)."""
    env = recording_env(tmp / name, name, child_env()) if record else child_env()
    return check_ok(run_cmd([PYTHON, PROGRAMS / "facts_loop.py", *map(str, args)], env=env)), tmp / name


def hook_facts(run_dir: Path, rank: int = 0) -> dict:
    return json.loads((run_dir / "trace" / f"rank{rank}.hooks.json").read_text())


@pytest.fixture(scope="module")
def loops(tmp_path_factory):
    """The loop as it is (saving a checkpoint), and four sides that differ from it by one fact."""
    tmp = tmp_path_factory.mktemp("hooks-facts")
    ckpt = tmp / "ckpt.pt"
    runs = {"plain": loop(tmp, "plain", "--save", ckpt)[1]}
    runs["draw"] = loop(tmp, "draw", "--draw-before", 3)[1]
    runs["scaled"] = loop(tmp, "scaled", "--loss-scale-at", 3)[1]
    runs["full"] = loop(tmp, "full", "--resume", ckpt)[1]
    runs["part"] = loop(tmp, "part", "--resume", ckpt, "--restore", "model")[1]
    runs["isolated"] = loop(tmp, "isolated", "--evaluate-isolated")[1]
    return runs


def test_the_generators_state_is_recorded_at_each_steps_start(loops):
    plain, draw = (read_records(loops[name], 0) for name in ("plain", "draw"))
    assert [r["rng"]["at"] for r in plain] == ["forward"] * 4  # the step's first training forward
    assert {"torch", "random"} <= set(plain[0]["rng"]) and all(len(r["rng"]["torch"]) == 16 for r in plain)
    same = [a["rng"]["torch"] == b["rng"]["torch"] for a, b in zip(plain, draw)]
    assert same == [True, True, False, False]  # one number drawn before step 3's forward


def test_where_the_generator_parts_with_the_loss_the_finding_says_so(loops):
    d = compare_traces(loops["plain"], loops["draw"])["diagnosis"]
    assert d["step"] == 3 and d["evidence"]["rng_state"]["differ"] == ["torch"], d
    assert d["evidence"]["rng_state"]["seeds"] == {"plain": [0], "draw": [0]}
    assert "state differs at step 3's start" in d["explanation"] and "agreed at step 2's" in d["explanation"]
    assert d["candidates"][0]["cause"] == "rng"  # a dropout draw: the recorded state first among the candidates


def test_where_the_generator_is_recorded_equal_no_cause_blames_it(loops):
    """The loss parts at step 3 (scaled), the global generator's digests agree there: the random stream
    is not among the candidates (it was, last, before the digests were recorded)."""
    d = compare_traces(loops["plain"], loops["scaled"])["diagnosis"]
    assert d["step"] == 3 and d["candidates"], d
    assert "rng" not in [c["cause"] for c in d["candidates"]]
    assert "rng_state" not in d["evidence"]


def test_a_seed_set_twice_is_no_reseed_where_the_generator_is_recorded_equal(loops, tmp_path):
    """Seeds [0, 0] against [0] before step 1, and the batches part at step 1 because each side draws
    them from a generator of its own seeded otherwise: the global generator's digests agree at step 1's
    start, so the re-seed is not blamed (it was, before the digests were read)."""
    _, twice = loop(tmp_path, "twice", "--seed-twice", "--data-seed", 2)
    d = compare_traces(loops["plain"], twice)["diagnosis"]
    assert (d["step"], d["kind"]) == (1, "data_order.unrecorded"), d
    assert "rng_state" not in d["evidence"] and "global RNG" not in d["advice"]
    # nothing drew between the two seeds: recorded, so the repeat is known inert
    assert [s.get("drawn_since_last_seed") for s in hook_facts(twice)["seeds"]["items"]] == [None, False]


def test_a_draw_that_a_restore_undid_is_recorded_as_undone(loops):
    """An evaluation DataLoader iterated before training with torch's generator put back after it (Lightning's
    isolate_rng around its sanity check): the iterator's state before its draw and the state the restore put back
    are the same digest, so the draw is known undone, and the training is the plain loop's."""
    facts = hook_facts(loops["isolated"])
    iterator = facts["loader_iterators"]["items"][0]
    restore = facts["restores"]["items"][0]
    assert (restore["kind"], restore["generator"]) == ("rng", "torch"), restore
    assert iterator["global_draw"] and iterator["rng_before"] == restore["state"], (iterator, restore)
    # how its workers are seeded besides the base seed: no worker_init_fn, no persistent workers
    assert (iterator["worker_init_fn"], iterator["persistent_workers"]) == (None, False), iterator
    assert iterator["order"] < restore["order"]
    report = compare_traces(loops["plain"], loops["isolated"])
    assert report["verdict"] == "equivalent", report["diagnosis"]["explanation"]


def test_checkpoints_are_recorded_with_the_kinds_they_hold(loops):
    saved = hook_facts(loops["plain"])["checkpoints"]["items"]
    assert [(c["op"], c["after_step"]) for c in saved] == [("torch.save", 4)]
    assert saved[0]["kinds"] == ["counters", "model", "optimizer", "rng", "scheduler"]
    assert saved[0]["path"].endswith("ckpt.pt")
    part = hook_facts(loops["part"])
    assert [(c["op"], c["after_step"]) for c in part["checkpoints"]["items"]] == [("torch.load", 0)]
    assert [r["kind"] for r in part["restores"]["items"]] == ["model"]
    full = hook_facts(loops["full"])["restores"]["items"]
    assert [r["kind"] for r in full] == ["model", "optimizer", "scheduler", "rng"]
    assert {r["caller"] for r in full} == {"__main__"}


def test_a_resume_that_restores_less_is_named_with_what_it_left_behind(loops):
    report = compare_traces(loops["full"], loops["part"])
    warnings = [w for w in report["warnings"] if w["kind"] == "resume_incomplete"]
    assert len(warnings) == 1 and "part does not restore optimizer, rng, scheduler" in warnings[0]["message"]
    d = report["diagnosis"]
    assert d["evidence"]["resume_restored"]["missing"] == {"part": ["optimizer", "rng", "scheduler"]}
    assert "part did not restore optimizer, rng, scheduler" in d["explanation"]


def test_the_same_resume_on_both_sides_is_equivalent_with_no_warning(loops, tmp_path):
    _, again = loop(tmp_path, "again", "--resume", loops["plain"].parent / "ckpt.pt")
    report = compare_traces(loops["full"], again)
    assert report["verdict"] == "equivalent", report["diagnosis"]
    assert not [w for w in report["warnings"] if w["kind"] in ("resume_incomplete", "checkpoint_ranks")]


def test_recording_the_facts_changes_nothing_and_a_hook_that_fails_says_so(tmp_path):
    """A checkpoint under a key whose lower() raises: what looks inside it fails, the save and the
    training go on, meta.json says what was not taken; the output and weights are bitwise those of the
    loop run unrecorded."""
    args = ("--save", tmp_path / "c.pt", "--odd-save", tmp_path / "odd.pt")
    recorded, run_dir = loop(tmp_path, "rec", *args, "--out", tmp_path / "a.pt")
    plain, _ = loop(tmp_path, "unrec", *args, "--out", tmp_path / "b.pt", record=False)
    assert recorded.stdout == plain.stdout and bitwise_equal(tmp_path / "a.pt", tmp_path / "b.pt")
    meta = json.loads((run_dir / META_FILE).read_text())
    assert [u["what"] for u in meta["unrecorded"]] == ["checkpoints"] and meta["finished"]
    saved = [Path(c["path"]).name for c in hook_facts(run_dir)["checkpoints"]["items"]]
    assert saved == ["c.pt", "a.pt"]  # the saves before and after the odd one


def test_dcp_saves_and_loads_are_recorded_as_one_call_each(tmp_path):
    """torch.distributed.checkpoint saves tensor by tensor through torch.save: one dcp.save is noted, with
    the kinds it was given, and one dcp.load; the model restored after it."""
    run_dir = tmp_path / "dcp"
    cmd = [PYTHON, PROGRAMS / "dcp_loop.py", tmp_path / "ckpt"]
    check_ok(run_cmd(cmd, env=recording_env(run_dir, "dcp", child_env())))
    facts = hook_facts(run_dir)
    calls = [(c["op"], c["path"], c["after_step"], c["kinds"]) for c in facts["checkpoints"]["items"]]
    path = str(tmp_path / "ckpt")
    assert calls == [("dcp.save", path, 2, ["model", "optimizer"]), ("dcp.load", path, 2, ["model"])]
    assert [(r["kind"], r["before_step"]) for r in facts["restores"]["items"]] == [("model", 3)]


def test_the_kinds_in_a_checkpoint_are_told_apart():
    from ddp_parity.hooks.checkpoints import kinds_of

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(model.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)
    lightning_like = {
        "state_dict": model.state_dict(),
        "optimizer_states": [optimizer.state_dict()],
        "lr_schedulers": [scheduler.state_dict()],
        "epoch": 3,
        "global_step": 12,
    }
    assert kinds_of(lightning_like)[0] == {"state_dict", "optimizer", "scheduler", "counters"}
    rng = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    assert kinds_of(rng)[0] == {"rng"} and kinds_of([random.getstate()])[0] == {"rng"}
    assert kinds_of({"scaler": torch.amp.GradScaler("cpu").state_dict() | {"scale": 1.0}})[0] == {"grad_scaler"}
    assert kinds_of(model)[0] == {"model"} and kinds_of(torch.ones(3))[0] == set()
    assert kinds_of({"MODEL_STATE": model.state_dict(), "EPOCHS_RUN": 1})[0] == {"state_dict", "counters"}
    assert kinds_of((torch.ones(3), torch.ones(625)))[0] == set()  # a tuple of tensors: nothing taken for a state


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory):
    """facts_ddp.py three ways: DDP, saved on rank 0 (the run test_ninth_pass_lrstep.py reads too, made once per
    session); the gradients summed by hand; saved on every rank."""
    tmp = tmp_path_factory.mktemp("hooks-facts-ddp")
    runs = {"ddp": recorded_once(tmp_path_factory, "ddp", "facts_ddp.py", "--out", "{out}")[0]}
    for name, args in (("hand", ("--hand-sum",)), ("every", ("--save-every-rank",))):
        out = tmp / f"{name}-out"
        out.mkdir()
        cmd = [*_torchrun_prefix(2), PROGRAMS / "facts_ddp.py", "--out", out, *args]
        check_ok(run_cmd(cmd, env=recording_env(tmp / name, name, child_env())))
        runs[name] = tmp / name
    return runs


@pytest.mark.slow
def test_the_programs_own_collectives_are_recorded_and_shown_where_the_runs_part(two_rank_runs):
    hand = read_records(two_rank_runs["hand"], 1)
    first = hand[0]["collectives"]
    assert [(c["op"], c["reduce_op"], c.get("of"), c["caller"]) for c in first] == [
        ("all_reduce", "SUM", "grad", "__main__")
    ] * 4
    assert [c["shape"] for c in first] == [[8, 6], [8], [3, 8], [3]] and all(len(c["digest"]) == 16 for c in first)
    assert hand[1]["collectives_count"] == 5  # the loss printed after step 1, then the four gradients
    ddp = read_records(two_rank_runs["ddp"], 1)
    assert "collectives" not in ddp[0] and [c.get("of") for c in ddp[1]["collectives"]] == [None]  # DDP's own: unseen
    report = compare_traces(two_rank_runs["ddp"], two_rank_runs["hand"])
    d = report["diagnosis"]
    assert d["evidence"]["collectives"]["step"] == 1 and d["evidence"]["collectives"]["per_step"]["ddp"] == "none"
    assert "all_reduce SUM float32 [8, 6] of gradients x1" in d["explanation"]
    assert report["collectives"]["first_difference"]["step"] == 1
    assert report["collectives"]["sides"]["hand"]["count"] == 14  # 4 a step, 3 loss prints, none a step on ddp


@pytest.mark.slow
def test_a_save_on_every_rank_is_a_note_not_a_difference(two_rank_runs):
    report = compare_traces(two_rank_runs["ddp"], two_rank_runs["every"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    notes = [w["message"] for w in report["warnings"] if w["kind"] == "checkpoint_ranks"]
    assert notes == [
        "a note, not a training difference: torch.save ran on rank(s) [0] on ddp and on rank(s) [0, 1] on every"
    ]
    assert report["collectives"]["first_difference"] is None


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_pythons_generator_in_the_same_state_has_the_same_digest_in_every_process():
    """The digest of Python's `random` is the state's, not the process's: two processes seeded alike agree
    (hash() of the state tuple did not: it holds None, hashed by address before Python 3.12), one number
    drawn more parts them, and so does a cached Gaussian."""
    probe = (
        "import random, sys; from ddp_parity.hooks.rng import digests; random.seed(0); "
        "[random.random() for _ in range(int(sys.argv[1]))]; random.gauss(0, 1) if sys.argv[2] == '1' else None; "
        "print(digests('forward')['random'])"
    )

    def digest(draws: int, gauss: int) -> str:
        return run_cmd([PYTHON, "-c", probe, str(draws), str(gauss)], env=child_env()).stdout.strip()

    same = {digest(0, 0) for _ in range(2)}
    assert len(same) == 1, same
    assert digest(1, 0) not in same and digest(0, 1) not in same
