"""Like paired with like (issue 46 f): a raw DDP loop wraps only the student in DDP and keeps its
frozen EMA teacher apart; its Lightning port holds both in one LightningModule, which Lightning's
DDP wraps whole. The sides then record other parameter sets: the comparison pairs the parameters
both hold, names those one side holds alone (untrained: a note, never a pass unsaid), and still finds
a slip in what both hold (the teacher's momentum, one student layer's initialisation)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from conftest import PYTHON, REPO, _torchrun_prefix, check_ok, child_env, run_cmd
from hypothesis import given, settings
from hypothesis import strategies as st
from test_comparator import LOSSES, PARAMS, make_run

from ddp_parity import compare_traces
from ddp_parity.compare import pairing
from ddp_parity.compare.causes import hooked
from ddp_parity.compare.comparator import compare_runs, match_keys
from ddp_parity.hooks import recording_env
from ddp_parity.trace import META_FILE

PROGRAMS = REPO / "tests" / "hooks_programs"


def raw(tmp, name: str, *args: str):
    run_dir = tmp / name
    env = recording_env(run_dir, name, child_env())
    env["DDP_PARITY_WATCH_STEP"] = None  # left out of the child (run_cmd starts from os.environ)
    check_ok(run_cmd([*_torchrun_prefix(2), PROGRAMS / "ema_raw.py", *args], env=env))
    return run_dir


def lightning(tmp, name: str, *args: str):
    env = recording_env(tmp / name, name, child_env())
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=_torchrun_prefix(1)[-2].split("=")[1])
    check_ok(run_cmd([PYTHON, PROGRAMS / "ema_lightning.py", *args], env=env))
    return tmp / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The raw loop and its port each save a checkpoint after every step (the port by a ModelCheckpoint, its EMA
    updated in on_train_batch_end: saved before that step's update); `lightning-in-step` updates the EMA in
    optimizer_step, before any callback."""
    tmp = tmp_path_factory.mktemp("unlike-params")
    out = {name: raw(tmp, name, "--slip", name) for name in ("momentum", "init")}
    out["raw"] = raw(tmp, "raw", "--save-dir", str(tmp / "raw-ckpt"))
    out["lightning"] = lightning(tmp, "lightning", "--save-dir", str(tmp / "lightning-ckpt"))
    in_step = ("--save-dir", str(tmp / "in-step-ckpt"), "--ema-in-optimizer-step")
    out["lightning-in-step"] = lightning(tmp, "lightning-in-step", *in_step)
    return out


def _notes(report: dict, kind: str) -> list[str]:
    return [w["message"] for w in report["warnings"] if w["kind"] == kind]


@pytest.mark.slow
def test_a_port_holding_the_frozen_teacher_too_is_equivalent_and_says_so(runs):
    meta = json.loads((runs["lightning"] / META_FILE).read_text())
    assert meta["params_frozen"] == ["teacher.1.weight", "teacher.1.bias", "teacher.3.weight", "teacher.3.bias"]
    report = compare_traces(runs["raw"], runs["lightning"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    [alone] = _notes(report, "one_side_only")
    assert "4 parameter(s) on lightning only, untrained (requires_grad False and in no param group)" in alone
    assert "teacher.1.weight" in alone and "teacher.3.bias" in alone
    assert "their own values are not" in alone  # an EMA's values are never said to be compared
    # the digests' last parameter is the teacher's there; the student's last trained one is digested beside it
    [narrowed] = _notes(report, "narrowed_digests")
    assert "compared on 1.weight, 3.bias only" in narrowed, narrowed
    assert len(report["params"]["tensors"]) == 4  # the student's tensors, paired under `student.`
    assert report["per_step"]["param_digest"]["compared"] == 16
    d = report["diagnosis"]  # the initial states are compared on the student's parameters too
    assert d["kind"] == "equivalent" and "initial weights differ" not in d["explanation"], d
    assert (
        "other parameter sets: the weights, the digest and the final parameters are those both hold"
        in (d["explanation"])
    )
    assert "the 4 parameters both hold (init_parameters_by_name) are equal" in d["evidence"]["init_note"], d


@pytest.mark.slow
def test_an_ema_saved_before_its_update_is_said_though_the_training_is_equal(runs):
    """Issue 46's class 7 (DiT's port saved its EMA one update behind): the training is bitwise equal, so the verdict
    is EQUIVALENT, and the checkpoints both sides saved after the same step are compared by the tensors they hold:
    the teacher's differ, named on both sides with the step whose values the port's hold; the student's and the
    optimizer's are equal. Nothing of this is in any step record."""
    report = compare_traces(runs["raw"], runs["lightning"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    [said] = [w for w in report["warnings"] if w["kind"] == "checkpoint_contents"]
    found = said["evidence"]
    assert (found["step"], found["rank"]) == (1, 0), found
    assert found["apart"] == [
        ["ema.1.bias", "ema.1.weight", "ema.3.bias", "ema.3.weight"],
        [f"state_dict.teacher.{n}" for n in ("1.bias", "1.weight", "3.bias", "3.weight")],
    ], found
    assert found["held"] == 4 + 4 * 3, found  # the student's 4 tensors; AdamW's step, exp_avg, exp_avg_sq for each
    assert found["held_after"] == [2, None], found  # raw saved nothing after step 0 for the port's to match
    assert found["paths"][0].endswith("raw-ckpt/step-1.pt"), found["paths"]
    assert found["paths"][1].startswith("<BytesIO for ") and found["paths"][1].endswith("step=1.ckpt>"), found
    message = said["message"]
    assert "raw's ema.* (4 tensor(s)) and lightning's state_dict.teacher.* (4 tensor(s))" in message, message
    assert "raw's ema.* (4 tensor(s)) after step 1 hold what lightning saved after step 2" in message, message
    assert "lightning saves them 1 step(s) behind" in message and "update it in optimizer_step" in message, message


@pytest.mark.slow
def test_an_ema_saved_after_its_update_on_both_sides_says_nothing_of_checkpoints(runs):
    report = compare_traces(runs["raw"], runs["lightning-in-step"])
    assert report["verdict"] == "equivalent", report["diagnosis"]
    assert not [w for w in report["warnings"] if w["kind"] == "checkpoint_contents"], report["warnings"]
    saves = json.loads((runs["lightning-in-step"] / "trace" / "rank0.hooks.json").read_text())["checkpoints"]
    contents = [c["contents"] for c in saves["items"] if "contents" in c]
    held = [[k for k in c if k.startswith(("state_dict.", "optimizer_states."))] for c in contents]
    assert len(held) == 8 and all(len(h) == 8 + 4 * 3 for h in held), held  # a tensor per step of the 8 steps


@pytest.mark.slow
@pytest.mark.parametrize("slip, step", [("momentum", 2), ("init", 1)])
def test_a_slip_in_what_both_sides_hold_is_still_found(runs, slip, step):
    report = compare_traces(runs[slip], runs["lightning"])
    assert report["verdict"] == "different", report["diagnosis"]
    assert report["first_divergence"]["step"] == step, report["first_divergence"]
    d = report["diagnosis"]
    if slip == "momentum":  # the student's initial weights are equal: never blamed on them
        assert d["category"] != "init" and "initial weights differ" not in d["explanation"], d
        # the teacher's calls were watched on the port's side only: never said to be equal
        assert "every module call of the forward pass is equal" not in d["explanation"], d["explanation"]
    else:  # one student layer differs from the start, in what both sides hold
        assert d["category"] == "init", d


def test_a_second_attribute_is_paired_by_what_the_optimizers_train():
    """Student and teacher hold the same names: the attribute whose keys the optimizer trains on both
    sides is the one paired; with no optimizer known, the pairing is ambiguous and nothing is dropped."""
    raw_keys, port = ["0.w", "0.b"], ["student.0.w", "student.0.b", "teacher.0.w", "teacher.0.b"]
    trained = ({"0.w", "0.b"}, {"student.0.w", "student.0.b"})
    pairs = match_keys(raw_keys, port, None, trained)
    assert pairs["0.w"] == ("0.w", "student.0.w") and pairs["__only_b__"] == ["teacher.0.b", "teacher.0.w"]
    assert match_keys(port, raw_keys, None, trained[::-1])["student.0.b"] == ("student.0.b", "0.b")
    assert match_keys(raw_keys, port, None)["__only_a__"] == ["0.b", "0.w"]  # ambiguous: unpaired, named
    # a head only one attribute holds decides by the count of keys paired
    pairs = match_keys(["0.w", "head.w"], ["net.0.w", "net.head.w", "loss.w"], None)
    assert pairs["head.w"] == ("head.w", "net.head.w") and pairs["__only_b__"] == ["loss.w"]


def _with_meta(run, **facts):
    meta = json.loads((run / META_FILE).read_text())
    (run / META_FILE).write_text(json.dumps({**meta, **facts}))
    return run


def _optimizer(names):
    return {"class": "SGD", "named": True, "param_groups": [{"params": names, "lr": 0.1}]}


def test_a_tensor_held_alone_is_a_note_only_where_the_records_prove_it_untrained(tmp_path):
    names = sorted(PARAMS)
    a = _with_meta(make_run(tmp_path / "a", LOSSES, PARAMS), optimizer=_optimizer(names), params_frozen=[])
    extra = {**PARAMS, "head.weight": torch.zeros(3)}
    untrained = _with_meta(
        make_run(tmp_path / "b", LOSSES, extra), optimizer=_optimizer(names), params_frozen=["head.weight"]
    )
    result = compare_runs(a, untrained)
    assert result.equivalent and not result.problems
    assert [n["kind"] for n in result.notes] == ["one_side_only"] and "head.weight" in result.notes[0]["message"]
    trained = _with_meta(
        make_run(tmp_path / "c", LOSSES, extra), optimizer=_optimizer([*names, "head.weight"]), params_frozen=[]
    )
    result = compare_runs(a, trained)  # trained on one side only: a setup difference, named
    assert not result.equivalent and "head.weight in that side's optimizer" in result.problems[0]
    older = make_run(tmp_path / "d", LOSSES, extra)  # an older trace: nothing proves it untrained
    assert not compare_runs(a, older).equivalent


def test_a_digest_narrowed_to_a_frozen_parameter_compares_nothing():
    """The digests' shared parameter is a frozen positional embedding (DiT's, a ViT's), the other element each
    side's own (a port's LightningModule holds an EMA copy too): equal after every step whatever the training
    did, so it is not kept; the per-step parameter digest is then said not compared, never equal."""
    meta_a = {"param_digest_names": ["pos_embed", "final.weight"], "params_frozen": ["pos_embed"]}
    meta_b = {"param_digest_names": ["model.pos_embed", "ema.final.weight"], "params_frozen": ["model.pos_embed"]}
    common = {"b:model.pos_embed": "pos_embed", "a:final.weight": "final.weight"}
    assert pairing.digest_positions(meta_a, meta_b, common) == []
    note = pairing.narrowed_note(meta_a, meta_b, {"a": "raw", "b": "lightning"}, [])
    assert "not compared at all" in note and "trains" in note
    trained = {**meta_b, "params_frozen": []}  # where it is trained on both sides, the shared element is kept
    assert pairing.digest_positions({**meta_a, "params_frozen": []}, trained, common) == [(0, 0)]


def test_saved_tensors_are_paired_by_the_ending_of_their_names_and_one_side_only_is_neither():
    """What checkpoint_contents reads: a tensor is held where one of the other side's tensors whose names end as its
    does in the most dotted parts holds its values; apart where none does; neither where no name ends alike (a
    callback's state, an RNG state one side saves alone)."""
    raw = {"model.1.weight": "s", "ema.1.weight": "e8", "optimizer.state.0.exp_avg": "m", "rng": "r"}
    port = {
        "state_dict.student.1.weight": "s",
        "state_dict.teacher.1.weight": "e7",
        "optimizer_states.0.state.0.exp_avg": "m",
        "callbacks.best_model_score": "b",
    }
    assert hooked._apart(raw, port) == (["ema.1.weight"], 2)
    assert hooked._apart(port, raw) == (["state_dict.teacher.1.weight"], 2)
    paired = hooked.counterparts(raw, port)
    assert paired["ema.1.weight"] == ["state_dict.student.1.weight", "state_dict.teacher.1.weight"], paired
    # a module one side saves alone ends like the other's tensors only in `weight`: paired with nothing
    assert hooked._apart({**port, "state_dict.vae.weight": "v"}, raw) == (["state_dict.teacher.1.weight"], 2)
    earlier = {7: ("step-7.pt", {**raw, "ema.1.weight": "e7"}), 8: ("step-8.pt", raw)}
    assert hooked._held_after(["state_dict.teacher.1.weight"], port, earlier, 8) == 7
    assert hooked._held_after(["state_dict.teacher.1.weight"], {"state_dict.teacher.1.weight": "x"}, earlier, 8) is None
    assert hooked._summary(["state_dict.teacher.1.bias", "state_dict.teacher.1.weight"]) == (
        "state_dict.teacher.1.* (2 tensor(s))"
    )


def test_what_a_save_holds_is_read_from_odd_objects_without_raising():
    """A save's tensors by key path from objects a program may hand torch.save: a module saved whole, a tuple, a
    dict holding itself, tensors that cannot be digested by their bytes (meta, sparse, nested), left out."""
    from ddp_parity.hooks.checkpoints import contents_of

    looping: dict = {"w": torch.ones(2)}
    looping["self"] = looping
    with warnings.catch_warnings():  # "the PyTorch API of nested tensors is in prototype stage"
        warnings.simplefilter("ignore")
        strided_nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    saved = {
        "model": torch.nn.Linear(2, 1),
        "pair": (torch.zeros(1), [torch.arange(3)]),
        "loop": looping,
        "meta": torch.empty(3, device="meta"),
        "sparse": torch.eye(2).to_sparse(),
        "nested": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged),
        "strided_nested": strided_nested,
        "complex": torch.ones(2, dtype=torch.complex64),
        "bf16": torch.ones(2, dtype=torch.bfloat16),
    }
    contents = contents_of(saved)
    for name in ("model.weight", "model.bias", "pair.0", "pair.1.0", "loop.w", "complex", "bf16"):
        assert len(contents[name]) == 16, (name, contents)
    assert not {"meta", "sparse", "nested", "strided_nested", "loop.self.w"} & set(contents), (
        contents
    )  # the loop walked once
    assert contents["pair.0"] != contents["bf16"]


def _leaves(value, path: str = ""):
    """(key path, tensor) for each tensor of a tree of dicts, lists and tuples, as a save's contents name them."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}.{i}" if path else str(i))


_TENSORS = st.builds(
    lambda shape, dtype, seed: torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype),
    st.lists(st.integers(0, 3), max_size=3).map(tuple),
    st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.uint8]),
    st.integers(0, 2**16),
)
_TREES = st.recursive(
    _TENSORS | st.integers() | st.text(max_size=4) | st.none(),
    lambda inner: (
        st.dictionaries(st.text("abc", min_size=1, max_size=3), inner, max_size=4)
        | st.dictionaries(st.integers(0, 9), inner, max_size=4)  # an optimizer's state: int keys (never 1 and "1")
        | st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_TREES)
def test_every_tensor_a_save_holds_is_digested_under_its_key_path(tree):
    """Whatever a program saves (dicts with int or str keys, lists, tuples, tensors of any dtype and shape, scalars):
    contents_of never raises and holds exactly the tensors of the tree, each by its dtype, shape and bytes."""
    from ddp_parity.fingerprints import sha256_of
    from ddp_parity.hooks.checkpoints import contents_of

    expected = {path: sha256_of([t])[:16] for path, t in _leaves(tree)}
    assert contents_of(tree) == expected


def test_a_buffer_held_alone_is_a_note_where_the_records_list_the_parameters(tmp_path):
    """A loss module's running center that the port's LightningModule holds and the raw loop keeps outside its
    DDP-wrapped model (dino's DINOLoss): the records list every parameter, so it is a buffer, said as a note beside
    an equal training; a trace that lists no parameters cannot prove it, and it stays a difference."""
    names = sorted(PARAMS)
    facts = {"optimizer": _optimizer(names), "params_frozen": [], "layers": {"names": names}}
    a = _with_meta(make_run(tmp_path / "a", LOSSES, PARAMS), **facts)
    extra = {**PARAMS, "loss.center": torch.zeros(3)}
    held = _with_meta(make_run(tmp_path / "b", LOSSES, extra), **facts)
    result = compare_runs(a, held)
    assert result.equivalent and not result.problems, result.problems
    notes = [n["message"] for n in result.notes if n["kind"] == "one_side_only"]
    assert len(notes) == 1 and "1 buffer(s) on" in notes[0] and "loss.center" in notes[0], notes
    unlisted = _with_meta(make_run(tmp_path / "c", LOSSES, extra), optimizer=_optimizer(names), params_frozen=[])
    assert not compare_runs(a, unlisted).equivalent  # no layer names: the records cannot place it


def _saves(tmp_path, name: str, saves: list[tuple[int, str, dict]]):
    """A run whose rank 0 saved `saves` [(after_step, path, contents)], as the hooks write them."""
    trace = tmp_path / name / "trace"
    trace.mkdir(parents=True)
    (trace / "rank0.jsonl").write_text("")
    items = [{"op": "torch.save", "after_step": s, "path": p, "contents": c} for s, p, c in saves]
    (trace / "rank0.hooks.json").write_text(json.dumps({"checkpoints": {"items": items}}))
    return tmp_path / name


def test_a_steps_saves_to_several_files_are_compared_as_one_and_the_save_steps_side_by_side(tmp_path):
    """improved-diffusion saves the model, each EMA and the optimizer to files of their own after a step; its port
    saves one checkpoint holding the model and the EMAs. Each of the port's tensors is paired with every file's
    alike and held where one holds its values (no warning where all are held: the comparison of a port's EMA with
    the model file alone said "apart" on an equal pair); an EMA one update behind is still apart. The steps after
    which each side saved are said side by side where they differ."""
    model, ema = {"out.weight": "m1"}, {"out.weight": "e1"}
    raw_saves = [(1, "/r/model000001.pt", model), (1, "/r/ema_0.9_000001.pt", ema), (4, "/r/model000004.pt", model)]
    raw = _saves(tmp_path, "raw", raw_saves)
    port = {"state_dict.model.out.weight": "m1", "state_dict.ema.0.out.weight": "e1"}
    equal = _saves(tmp_path, "port", [(1, "/p/step=1.ckpt", port), (3, "/p/step=3.ckpt", port)])
    assert hooked.checkpoint_contents_apart(raw, equal, equal_through=4) is None
    behind = {**port, "state_dict.ema.0.out.weight": "e0"}
    late = _saves(tmp_path, "late", [(1, "/p/step=1.ckpt", behind)])
    found = hooked.checkpoint_contents_apart(raw, late, equal_through=4)
    assert found["apart"] == [["ema_0_9_000001.out.weight"], ["state_dict.ema.0.out.weight"]], found
    assert found["held"] == 1, found  # the model's tensor, held by the model file
    warnings = hooked.hook_warnings(raw, equal, ("raw", "lightning"), equal_through=4)
    [steps] = [w for w in warnings if w["kind"] == "checkpoint_steps"]
    assert steps["evidence"] == {"rank": 0, "steps": [[1, 4], [1, 3]]}, steps
    assert "raw alone after step(s) 4; lightning alone after step(s) 3" in steps["message"], steps["message"]
    alike = _saves(tmp_path, "alike", [(1, "/p/a.ckpt", port), (4, "/p/b.ckpt", port)])
    assert not [w for w in hooked.hook_warnings(raw, alike, ("raw", "lightning")) if w["kind"] == "checkpoint_steps"]


def test_saves_to_file_objects_are_named_by_their_files_in_key_paths_and_words(tmp_path):
    """improved_diffusion saves through file objects (`with bf.BlobFile(path, "wb") as f: th.save(state, f)`), which
    the hooks record as `<BufferedWriter PATH for NAME>`, and Lightning through a buffer its caller writes (`<BytesIO
    for PATH>`). The tensors of each file are keyed by the file's name (`ema_0_9_000001.out.weight`, never
    `ema_0_9_000001_pt_for_ema_0_9_000001.out.weight`), and the warning names the files, not the objects."""
    assert hooked.saved_file("<BufferedWriter /r/model000001.pt for model000001.pt>") == "/r/model000001.pt"
    assert hooked.saved_file("<BytesIO for /p/epoch=0-step=1.ckpt>") == "/p/epoch=0-step=1.ckpt"
    assert hooked.saved_file("<BytesIO>") == "<BytesIO>" and hooked.saved_file("/r/a.pt") == "/r/a.pt"
    model, ema = {"out.weight": "m1"}, {"out.weight": "e1"}
    objects = [
        (1, "<BufferedWriter /r/model000001.pt for model000001.pt>", model),
        (1, "<BufferedWriter /r/ema_0.9_000001.pt for ema_0.9_000001.pt>", ema),
    ]
    raw = _saves(tmp_path, "raw", objects)
    behind = {"state_dict.model.out.weight": "m1", "state_dict.ema.0.out.weight": "e0"}
    late = _saves(tmp_path, "late", [(1, "<BytesIO for /p/epoch=0-step=1.ckpt>", behind)])
    found = hooked.checkpoint_contents_apart(raw, late, equal_through=4)
    assert found["apart"] == [["ema_0_9_000001.out.weight"], ["state_dict.ema.0.out.weight"]], found
    words = hooked.checkpoint_contents_words(found, ("raw", "lightning"))
    assert "(raw: /r/model000001.pt; /r/ema_0.9_000001.pt; lightning: /p/epoch=0-step=1.ckpt)" in words, words
    # StyleGAN2's slip (an EMA with another decay): no side's values are the other's of another save, so nothing says
    # they were saved at another moment; the state itself is said to differ, never "save it at the same moment"
    assert found["held_after"] == [None, None], found
    assert "save that state at the same moment" not in words, words
    assert "the state itself differs: a copy kept beside the model (an EMA) updated otherwise" in words, words


def test_a_save_after_the_last_equal_step_with_another_optimizer_stepped_since_is_not_compared(tmp_path):
    """StyleGAN2's slip 2 (the generator's Adam with other betas): the counted steps are the discriminator's, equal
    through step 2; the generator's optimizer stepped after step 2, then the checkpoint was saved. Its generator
    tensors differ because the training differs, which no record of step 2 covers: "a difference in what was saved,
    not in what trained" was false. A save at the last equal step is compared only where no other optimizer stepped
    after it."""
    raw = _saves(tmp_path, "raw", [(2, "/r/000000.pt", {"g.w": "g1", "d.w": "d1"})])
    port = _saves(tmp_path, "port", [(2, "/p/000000.pt", {"g.w": "g2", "d.w": "d1"})])
    assert hooked.checkpoint_contents_apart(raw, port, equal_through=2)["apart"] == [["g.w"], ["g.w"]]
    facts = json.loads((port / "trace" / "rank0.hooks.json").read_text())
    facts["other_optimizers"] = {"0": {"class": "Adam", "built": 0, "steps": 1, "after_steps": [2]}}
    (port / "trace" / "rank0.hooks.json").write_text(json.dumps(facts))
    assert hooked.checkpoint_contents_apart(raw, port, equal_through=2) is None
    assert hooked.checkpoint_contents_apart(raw, port, equal_through=3)["apart"] == [["g.w"], ["g.w"]]
