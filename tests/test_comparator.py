"""The comparator on small hand-made traces: no training, no processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ddp_parity import compare_traces
from ddp_parity.compare.comparator import Criterion, compare_runs, match_keys
from ddp_parity.trace import FORMAT_VERSION, TraceFormatError


def make_run(
    path: Path,
    losses: dict[int, list[float]],
    params: dict[str, torch.Tensor],
    indices=None,
    version=FORMAT_VERSION,
    lr: float = 1e-3,
) -> Path:
    """A run directory with `losses[rank][i]` at step i+1 and the given final parameters."""
    (path / "trace").mkdir(parents=True)
    meta = {"format_version": version, "side": path.name, "world_size": len(losses), "config": {}, "ranks": []}
    (path / "meta.json").write_text(json.dumps(meta))
    for rank, per_step in losses.items():
        lines = []
        for i, loss in enumerate(per_step):
            step_indices = indices(rank, i) if indices else [rank * 1000 + i]
            lines.append(
                json.dumps(
                    {
                        "step": i + 1,
                        "epoch": 0,
                        "loss": loss,
                        "lr": lr,
                        "grad_norm": 1.0,
                        "time_s": 0.01,
                        "indices": step_indices,
                    }
                )
            )
        (path / "trace" / f"rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
    save_file(params, str(path / "final.safetensors"))
    return path


PARAMS = {"net.0.weight": torch.arange(6, dtype=torch.float32).reshape(2, 3), "net.0.bias": torch.ones(2)}
LOSSES = {0: [2.0, 1.5, 1.25], 1: [2.5, 1.75, 1.0]}


def test_identical_runs_are_equivalent(tmp_path):
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", LOSSES, {k: v.clone() for k, v in PARAMS.items()})
    result = compare_runs(a, b)
    report = result.to_dict()
    assert report["verdict"] == "equivalent"
    assert report["losses"]["compared"] == 6 and report["losses"]["equal"] == 6
    assert report["params"]["compared"] == 2 and report["params"]["max_abs"] == 0.0
    assert report["first_divergence"] is None


def test_one_ulp_is_a_difference_under_the_exact_criterion(tmp_path):
    bumped = {0: list(LOSSES[0]), 1: list(LOSSES[1])}
    bumped[1][1] = float(torch.nextafter(torch.tensor(1.75), torch.tensor(2.0)))
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", bumped, PARAMS)
    report = compare_runs(a, b).to_dict()
    assert report["verdict"] == "different"
    first = report["first_divergence"]
    assert (first["step"], first["rank"], first["quantity"]) == (2, 1, "loss")
    assert first["a"] == 1.75 and first["b"] == bumped[1][1]
    assert report["losses"]["equal"] == 5
    # the same runs pass a tolerance that admits one float32 ulp
    assert compare_runs(a, b, Criterion(rtol=1e-6)).to_dict()["verdict"] == "equivalent"


def test_first_divergence_is_the_earliest_step_across_ranks_in_causal_order(tmp_path):
    late = {0: [2.0, 1.5, 9.0], 1: list(LOSSES[1])}  # rank 0 differs at step 3
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(
        tmp_path / "b", late, PARAMS, indices=lambda rank, i: [7] if (rank, i) == (1, 1) else [rank * 1000 + i]
    )  # rank 1 at step 2
    first = compare_runs(a, b).to_dict()["first_divergence"]
    assert (first["step"], first["rank"], first["quantity"]) == (2, 1, "samples")


def test_parameter_difference_is_reported_by_tensor_and_element(tmp_path):
    changed = {k: v.clone() for k, v in PARAMS.items()}
    changed["net.0.weight"][1, 2] += 0.5
    report = compare_runs(make_run(tmp_path / "a", LOSSES, PARAMS), make_run(tmp_path / "b", LOSSES, changed)).to_dict()
    assert report["verdict"] == "different"
    assert report["first_divergence"]["quantity"] == "params"
    assert report["first_divergence"]["tensor"] == "net.0.weight" and report["first_divergence"]["element"] == 5
    assert report["params"]["max_abs"] == 0.5
    rows = {row["name"]: row for row in report["params"]["tensors"]}
    assert rows["net.0.bias"]["equal"] and not rows["net.0.weight"]["equal"]


def test_step_count_mismatch_is_named(tmp_path):
    short = {0: LOSSES[0][:2], 1: LOSSES[1]}
    report = compare_runs(make_run(tmp_path / "a", LOSSES, PARAMS), make_run(tmp_path / "b", short, PARAMS)).to_dict()
    assert report["verdict"] == "different"
    assert any("rank 0: 3 steps" in p and "but 2" in p for p in report["problems"])
    assert report["steps"]["steps_a"][0] == 3 and report["steps"]["steps_b"][0] == 2


def test_keys_map_through_module_and_attribute_prefixes(tmp_path):
    raw = {"0.weight": PARAMS["net.0.weight"], "0.bias": PARAMS["net.0.bias"]}
    lightning = {"net.0.weight": PARAMS["net.0.weight"], "net.0.bias": PARAMS["net.0.bias"]}
    ddp = {"module.0.weight": PARAMS["net.0.weight"], "module.0.bias": PARAMS["net.0.bias"]}
    a = make_run(tmp_path / "a", LOSSES, raw)
    assert compare_runs(a, make_run(tmp_path / "b", LOSSES, lightning)).to_dict()["params"]["compared"] == 2
    assert compare_runs(a, make_run(tmp_path / "c", LOSSES, ddp)).to_dict()["verdict"] == "equivalent"


def test_parameter_on_one_side_only_is_reported_by_name(tmp_path):
    extra = {**PARAMS, "net.2.weight": torch.zeros(3)}
    report = compare_runs(make_run(tmp_path / "a", LOSSES, PARAMS), make_run(tmp_path / "b", LOSSES, extra)).to_dict()
    assert report["verdict"] == "different"
    assert report["params"]["only_in"]["b"] == ["net.2.weight"]


def test_match_keys_with_a_user_mapping():
    pairs = match_keys(["encoder.w"], ["body.w"], key_map=lambda k: k.replace("body.", "encoder."))
    assert pairs["encoder.w"] == ("encoder.w", "body.w")


def test_unknown_format_version_is_refused(tmp_path):
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", LOSSES, PARAMS, version=99)
    with pytest.raises(TraceFormatError, match="format_version 99"):
        compare_runs(a, b)


def test_a_line_cut_off_mid_write_is_named(tmp_path):
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", LOSSES, PARAMS)
    trace = b / "trace" / "rank1.jsonl"
    trace.write_text(trace.read_text()[:-20])
    with pytest.raises(TraceFormatError, match=r"malformed trace: .*rank1.jsonl, line 3: cut off or not JSON"):
        compare_runs(a, b)


def test_nan_on_both_sides_counts_as_equal_but_nan_on_one_does_not(tmp_path):
    nan = {0: [float("nan"), 1.5, 1.25], 1: LOSSES[1]}
    a = make_run(tmp_path / "a", nan, PARAMS)
    assert compare_runs(a, make_run(tmp_path / "b", nan, PARAMS)).to_dict()["verdict"] == "equivalent"
    assert compare_runs(a, make_run(tmp_path / "c", LOSSES, PARAMS)).to_dict()["verdict"] == "different"


def test_key_map_options_of_the_command_line(tmp_path):
    from conftest import harness_in_process  # compare/run.py's main in this process: --traces launches nothing

    a = make_run(tmp_path / "a", LOSSES, {"encoder.w": torch.ones(3)})
    b = make_run(tmp_path / "b", LOSSES, {"model.body.w": torch.ones(3)})

    def run(*extra):
        return harness_in_process("--traces", a, b, "--out", tmp_path / "out", "--overwrite", *extra)

    code, stdout, _ = run()
    assert code == 1 and "model.body.w" in stdout  # named: present on one side only
    (tmp_path / "map.json").write_text('{"body.w": "encoder.w"}')
    assert run("--strip-prefix", "model.", "--key-map", str(tmp_path / "map.json"))[0] == 0


def test_validation_is_paired_by_step_not_by_position(tmp_path):
    """Issue 36: raw's evaluation at step 0 (nanoGPT evaluates before training, on rank 0) was held against
    lightning's first one at step 3 and called a numerics difference. Now the step-3 results are compared
    (equal) and the step-0 one is said to be raw's only."""
    a = make_run(tmp_path / "raw", LOSSES, PARAMS)
    b = make_run(tmp_path / "lightning", LOSSES, {k: v.clone() for k, v in PARAMS.items()})
    (a / "validation.jsonl").write_text(
        json.dumps({"epoch": 0, "step": 0, "val_loss": 4.25})
        + "\n"
        + json.dumps({"epoch": 0, "step": 3, "val_loss": 1.5})
        + "\n"
    )
    (b / "validation.jsonl").write_text(json.dumps({"epoch": 0, "step": 3, "val_loss": 1.5}) + "\n")
    result = compare_runs(a, b)
    assert (result.validation.compared, result.validation.equal) == (1, 1)
    assert result.problems == [f"validation at step(s) 0 recorded by {a} only"]
    d = compare_traces(a, b)["diagnosis"]
    assert d["kind"] == "step_count.validation" and f"validation at step(s) 0 recorded by {a} only" in d["explanation"]
    assert "DistributedSampler" not in d["advice"]


def test_an_empty_config_is_a_warning_and_never_said_to_match(tmp_path):
    """Issue 36: TraceCallback's default config, when the module does not call save_hyperparameters, is
    empty; the pair got no warning and the diagnosis said the configuration matched."""
    a = make_run(tmp_path / "a", LOSSES, PARAMS)  # make_run records config {}
    b = make_run(tmp_path / "b", LOSSES, {k: v.clone() for k, v in PARAMS.items()})
    report = compare_traces(a, b)
    assert report["verdict"] == "equivalent"
    assert [w["kind"] for w in report["warnings"]] == ["config_unrecorded", "config_unrecorded"]
    assert "configuration (unrecorded on a and b)" in report["diagnosis"]["explanation"]


def test_what_a_recorder_could_not_take_is_said_by_the_comparison(tmp_path):
    """Issue 36: a recorder that could not save final.safetensors notes it in meta.json `unrecorded`
    and training goes on; the comparison names it instead of staying silent."""
    a = make_run(tmp_path / "a", LOSSES, PARAMS)
    b = make_run(tmp_path / "b", LOSSES, {k: v.clone() for k, v in PARAMS.items()})
    meta = json.loads((b / "meta.json").read_text())
    meta["unrecorded"] = [{"what": "final.safetensors", "why": "RuntimeError('disk full')"}]
    (b / "meta.json").write_text(json.dumps(meta))
    report = compare_traces(a, b)
    (warning,) = [w for w in report["warnings"] if w["kind"] == "recorder_unrecorded"]
    assert "could not record final.safetensors (RuntimeError('disk full'))" in warning["message"]
    assert not [w for w in report["warnings"] if w["kind"] == "recorder_unrecorded" and w is not warning]  # b only
