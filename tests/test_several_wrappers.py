"""Issue 46's class 3, seen on a public program (I-JEPA: a context encoder, a predictor and a target encoder, each
given to DDP on its own, one optimizer): the hooks recorded one of the three wrapped modules, so an equal pair
against a port holding the three in one module was DIFFERENT, headlined "the initial weights differ".

Now the model of such a side is every module it gave DDP, held as one and named as the program's variables name
them (ddp_parity/hooks/modules.py `Wrapped`), its initial state theirs together before each broadcast. The
two-rank program (tests/hooks_programs/wrappers_ddp.py) is recorded by the hooks with no line changed, under
torchrun on gloo.
"""

from __future__ import annotations

import json

import pytest
import torch
from conftest import PYTHON, REPO, _torchrun_prefix, check_ok, child_env, run_cmd

from ddp_parity import compare_traces
from ddp_parity.hooks import modules, recording_env
from ddp_parity.trace import read_records
from ddp_parity.trace_files import read_evaluations

PROGRAM = REPO / "tests" / "hooks_programs" / "wrappers_ddp.py"
VARIANTS = {"one": (), "wrappers": ("--wrappers",), "wrappers-lr": ("--wrappers", "--lr", "0.2")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("several-wrappers")
    for name, args in VARIANTS.items():
        check_ok(run_cmd([*_torchrun_prefix(2), PROGRAM, *args], env=recording_env(tmp / name, name, child_env())))
    return {name: tmp / name for name in VARIANTS}


def rank_facts(run) -> list[dict]:
    return json.loads((run / "meta.json").read_text())["ranks"]


@pytest.mark.slow
def test_three_ddp_wrappers_against_one_module_holding_them_are_equivalent(runs):
    """Every step, the initial state and all six final tensors (encoder, predictor, target encoder) compared and
    equal: no "initial weights differ", no parameter "trained on one side only"."""
    report = compare_traces(runs["one"], runs["wrappers"])
    assert report["verdict"] == "equivalent", (report["diagnosis"]["kind"], report["diagnosis"]["explanation"])
    assert report["params"]["compared"] == report["params"]["equal"] == 6, report["params"]
    one, wrappers = rank_facts(runs["one"]), rank_facts(runs["wrappers"])
    for rank in (0, 1):  # hashed as one module holding the three in the order they were wrapped
        assert one[rank]["init_params_sha256"] == wrappers[rank]["init_params_sha256"]
        assert one[rank]["init_parameters_by_name"] == wrappers[rank]["init_parameters_by_name"]
    # the frozen target encoder, a copy of the encoder run in training mode, is treated alike on both sides whether
    # it is part of one wrapped module or wrapped on its own: no evaluation on one side only
    assert not [
        w for w in report["warnings"] if w["kind"] in ("narrowed_digests", "one_side_only", "evaluation_differs")
    ]


@pytest.mark.slow
def test_a_target_encoder_run_in_training_mode_is_never_an_evaluation(runs):
    """The frozen target encoder's forwards (no_grad, training mode) compute the step's targets, before the step's
    own forward: not an evaluation, on either side, the first step's included (recorded as one before the copies
    were known, it made I-JEPA's raw side 'evaluate after step 0' where its port did not)."""
    for name in ("one", "wrappers"):
        assert read_evaluations(runs[name]) == {}, (name, read_evaluations(runs[name]))


@pytest.mark.slow
def test_the_wrapped_modules_are_named_by_the_programs_variables(runs):
    names = sorted(rank_facts(runs["wrappers"])[0]["init_parameters_by_name"])
    assert names == [
        "encoder.0.bias",
        "encoder.0.weight",
        "predictor.bias",
        "predictor.weight",
        "target_encoder.0.bias",
        "target_encoder.0.weight",
    ]


@pytest.mark.slow
def test_an_lr_slip_on_the_side_of_several_wrappers_is_named_with_every_trained_parameter(runs):
    d = compare_traces(runs["one"], runs["wrappers-lr"])["diagnosis"]
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    assert "lr: 0.1 vs 0.2" in d["explanation"] and "predictor.weight" in d["explanation"], d["explanation"]


class Holder:
    def __init__(self, model):
        self.model = model


def test_a_part_no_variable_names_is_named_by_its_place_and_an_attribute_names_one():
    """One optimizer over two modules (no DDP here: model_of reads the modules given as wrappers): one named by
    an attribute of an object a frame holds (a trainer's `self.model`), the other by its place."""
    torch.manual_seed(0)
    holder = Holder(torch.nn.Linear(2, 2))
    nameless = [torch.nn.Linear(2, 1)]  # a module held by a list alone: no variable names it
    optimizer = torch.optim.SGD([*holder.model.parameters(), *nameless[0].parameters()], lr=0.1)
    model = modules.model_of(optimizer, [holder.model], [holder.model, nameless[0]])
    assert isinstance(model, modules.Wrapped)
    assert list(model._modules) == ["model", "ddp1"]


def test_a_module_owning_every_parameter_stays_the_model():
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    assert modules.model_of(optimizer, [net], [net[0], net]) is net


GAN_LOOP = REPO / "tests" / "hooks_programs" / "gan_loop.py"


@pytest.fixture(scope="module")
def gan_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gan")
    out = {}
    for name, args in (
        ("plain", ()),
        ("again", ()),
        ("skip-last-g", ("--skip-last-g",)),
        ("g-betas", ("--g-beta2", "0.9")),
        ("evaluated", ("--evaluate-after-g", "1")),
    ):
        env = recording_env(tmp / name, name, child_env())
        out[name] = check_ok(run_cmd([PYTHON, GAN_LOOP, tmp / f"{name}.store", *args], env=env)).stdout.splitlines()
    return {name: tmp / name for name in out} | {"stdout": out}


def _weights_lines(stdout: list[str]) -> list[str]:
    return [line for line in stdout if line.startswith(("generator ", "discriminator "))]


@pytest.mark.slow
def test_a_counted_step_is_its_own_optimizers_phase_not_the_other_optimizers_before_it(gan_runs):
    """vits' loop (the seventh first pass): the generator's backward after the discriminator's step was taken as the
    next step's first micro-batch (two micro-batches a step, the loss the sum of both networks'), and the next step's
    generator digests were taken at the generator phase's first forward, before whatever the loop did between the
    iterations. A step of another optimizer ends what the counted step gathers: its loss is the discriminator's."""
    printed = [float(line.split()[-1]) for line in gan_runs["stdout"]["plain"] if line.startswith("iteration ")]
    records = read_records(gan_runs["plain"], 0)
    assert [r["micro_batches"] for r in records] == [1] * len(printed), records
    assert [r["loss"] for r in records] == printed, ([r["loss"] for r in records], printed)


@pytest.mark.slow
def test_an_evaluation_between_two_iterations_of_a_gan_is_named_where_it_drew(gan_runs):
    """vits' round 5: raw evaluated on rank 0 after its first iteration (an eval loader's iterator and the
    inference's noise draw from the global generator). The step after it was said to start at the generator phase
    before the evaluation, its digests equal, and the tool advised re-seeding after building the model."""
    report = compare_traces(gan_runs["plain"], gan_runs["evaluated"])
    d = report["diagnosis"]
    assert (d["kind"], d["step"]) == ("rng.loader_draws", 3), (d["kind"], d["explanation"])
    assert "evaluated's rank 0 iterated TensorDataset before step 3 for an evaluation" in d["explanation"], d
    assert "restore the generator's state after an evaluation" in d["advice"], d["advice"]


@pytest.mark.slow
def test_a_gans_two_networks_are_both_the_model_and_equal_twice(gan_runs):
    """StyleGAN2's loop: the generator and the discriminator each given to DDP, each with its optimizer, the
    discriminator's stepping first. The hooks counted its steps and took it alone for the model, so the generator's
    final weights were never compared. Both networks are the model now: eight final tensors, equal twice."""
    report = compare_traces(gan_runs["plain"], gan_runs["again"])
    assert report["verdict"] == "equivalent", (report["diagnosis"]["kind"], report["diagnosis"]["explanation"])
    assert report["params"]["compared"] == report["params"]["equal"] == 8, report["params"]


@pytest.mark.slow
def test_a_generator_step_missing_at_the_end_is_different_and_named(gan_runs):
    """The loop leaves before its last generator step: the discriminator trains exactly alike (the program's own
    hashes), the generator ends one update behind. It was EQUIVALENT (the discriminator alone compared); now it is
    DIFFERENT, and the diagnosis names the generator's optimizer and where its steps part."""
    plain, skipped = (_weights_lines(gan_runs["stdout"][name]) for name in ("plain", "skip-last-g"))
    assert plain[1] == skipped[1] and plain[0] != skipped[0], (plain, skipped)  # discriminator equal, generator not
    report = compare_traces(gan_runs["plain"], gan_runs["skip-last-g"])
    assert report["verdict"] == "different"
    d = report["diagnosis"]
    assert (d["kind"], d["step"]) == ("optimizer.other_steps", 4), (d["kind"], d["explanation"])
    assert "the optimizer Adam (built 1st, over generator.0.weight" in d["explanation"], d["explanation"]
    assert (
        "stepped 4 time(s) on plain and 3 on skip-last-g; its step 4 came after step 4 on plain and none"
        in (d["explanation"])
    ), d["explanation"]
    assert d["advice"].startswith("Step the Adam optimizer at the same points on both sides"), d["advice"]


@pytest.mark.slow
def test_the_generators_optimizer_built_otherwise_is_its_param_groups(gan_runs):
    """StyleGAN2's slip: the generator's Adam built with other betas. Only the optimizer whose steps are counted (the
    discriminator's) was compared as constructed, so "the optimizer's param groups" were said equal and the finding
    was undetermined. Every optimizer built is compared now, paired by the parameters it holds."""
    report = compare_traces(gan_runs["plain"], gan_runs["g-betas"])
    d = report["diagnosis"]
    assert d["kind"] == "param_groups", (d["kind"], d["explanation"])
    assert d["explanation"].startswith("The Adam optimizer over generator.0.weight, generator.0.bias"), d["explanation"]
    assert "betas: [0.0, 0.99] vs [0.0, 0.9] for generator.0.weight" in d["explanation"], d["explanation"]
    assert "the same betas on both sides" in d["advice"], d["advice"]
