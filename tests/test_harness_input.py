"""Bad input to the harness: one line naming the input and what would be right, exit 2, before
anything is launched or written (docs/bad-input.md lists every row). Run in-process: each case
is refused long before a launch could happen, and a launch would leave its output folder behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import DEFAULT_CONFIG, assert_one_line_error, harness_in_process

from ddp_parity.config import ConfigError, parse_raw_config
from ddp_parity.harness.validate import total_steps


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


CASES = {
    # flags on their own
    "atol-nan": (["--atol", "nan"], ["--atol", "finite"]),
    "rtol-negative": (["--rtol", "-1"], ["--rtol"]),
    "stall-below-heartbeat": (["--stall-timeout", "0.5"], ["--stall-timeout", "heartbeat"]),
    "side-twice": (["--sides", "raw,raw"], ["--sides", "twice"]),
    "side-unknown": (["--sides", "raw,jax"], ["--sides", "jax"]),
    "one-side": (["--sides", "raw"], ["--sides", "two"]),
    "nproc-zero": (["--nproc", "0"], ["--nproc"]),
    # against the run
    "fault-rank-outside": (["--fault", "5:10"], ["--fault", "rank 5", "ranks 0..1"]),
    "fault-after-last-step": (["--fault", "1:100000"], ["--fault", "steps 1..96"]),
    "fault-step-zero": (["--fault", "0:0"], ["--fault", "step 0"]),
    "fault-malformed": (["--fault", "one:two"], ["--fault", "RANK:STEP"]),
    "world-larger-than-data": (["--nproc", "3", "--set", "data.num_samples=2"], ["data.num_samples", "world size (3)"]),
    "harness-only-key": (["--set", "run_dir=/tmp/elsewhere"], ["--set run_dir", "--out"]),
    "harness-only-key-one-side": (["--set-lightning", "run_dir=/tmp/x"], ["--set-lightning run_dir"]),
    "key-map-missing": (["--key-map", "/nonexistent/map.json"], ["--key-map", "/nonexistent/map.json"]),
    "mistake-without-raw": (["--mistake", "no-set-epoch", "--sides", "lightning,fabric"], ["--mistake", "raw"]),
    "mistake-unknown": (["--mistake", "nope"], ["--mistake", "catalogue"]),
    # config keys and files
    "key-unknown": (["--set", "data.bogus=1"], ["data.bogus"]),
    "value-invalid": (["--set", "data.batch_size=-4"], ["data.batch_size"]),
    "set-without-equals": (["--set", "nonsense"], ["KEY=VALUE"]),
    "config-missing": (["--config", "/nonexistent.yaml"], ["/nonexistent.yaml"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_flag_is_one_line_exit_2_and_nothing_written(name, tmp_path):
    args, words = CASES[name]
    out = tmp_path / "out"
    code, _, stderr = harness_in_process("--out", out, *args)
    assert_one_line_error(code, stderr, *words)
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_an_accelerator_this_machine_lacks_is_refused_before_launch(tmp_path):
    code, _, stderr = harness_in_process("--out", tmp_path / "out", "--set", "trainer.accelerator=gpu")
    assert_one_line_error(code, stderr, "trainer.accelerator", "cpu")
    assert not (tmp_path / "out").exists()


def test_a_key_map_that_is_not_an_object_is_refused(tmp_path):
    for text, word in (("[1, 2]", "JSON object"), ("{not json", "not valid JSON"), ('{"a": 1}', "JSON object")):
        key_map = write(tmp_path / "map.json", text)
        code, _, stderr = harness_in_process("--out", tmp_path / "out", "--key-map", key_map)
        assert_one_line_error(code, stderr, "--key-map", word)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "section, value", [("trainer", "5"), ("model", "[1, 2]"), ("data", "hello"), ("checkpoint", "3.5")]
)
def test_a_config_section_of_the_wrong_type_is_named(tmp_path, section, value):
    config = write(tmp_path / "bad.yaml", DEFAULT_CONFIG.read_text() + f"\n{section}: {value}\n")
    code, _, stderr = harness_in_process("--out", tmp_path / "out", "--config", config)
    assert_one_line_error(code, stderr, f"`{section}`", "mapping")
    assert not (tmp_path / "out").exists()


def test_a_config_that_sets_run_dir_is_refused(tmp_path):
    config = write(tmp_path / "bad.yaml", DEFAULT_CONFIG.read_text() + "\nrun_dir: /tmp/somewhere\n")
    code, _, stderr = harness_in_process("--out", tmp_path / "out", "--config", config)
    assert_one_line_error(code, stderr, "run_dir", "--out")


def test_out_that_is_a_file_or_unwritable_is_refused(tmp_path):
    a_file = write(tmp_path / "file", "keep")
    for out, word in ((a_file, "not a directory"), (a_file / "below", "not a directory"), ("/proc/1/x", "cannot")):
        code, _, stderr = harness_in_process("--out", out)
        assert_one_line_error(code, stderr, "--out", word)
    assert a_file.read_text() == "keep"


def test_traces_never_write_beside_the_runs_or_over_results(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    write(out / "report.json", '{"keep": true}')
    from test_comparator import LOSSES, PARAMS, make_run

    for side in "ab":  # two runs: the inputs are checked before --out, and --out is what is tested here
        make_run(tmp_path / side, LOSSES, PARAMS)
    code, _, stderr = harness_in_process("--traces", tmp_path / "a", tmp_path / "b", "--out", out)
    assert_one_line_error(code, stderr, "--out", "--overwrite")
    assert (out / "report.json").read_text() == '{"keep": true}'


MATRIX_CASES = {
    "nproc-zero": ("- {name: a, nproc: 0}", "`nproc`"),
    "nproc-negative": ("- {name: a, nproc: -1}", "`nproc`"),
    "nproc-text": ("- {name: a, nproc: abc}", "`nproc`"),
    "nnodes-bool": ("- {name: a, nnodes: true}", "`nnodes`"),
    "set-a-list": ("- {name: a, set: [1, 2]}", "`set`"),
    "set-value-a-list": ("- {name: a, set: {data.batch_size: [1]}}", "data.batch_size"),
    "unknown-key": ("- {name: a, nprocs: 2}", "unknown key"),
    "unknown-side": ("- {name: a, sides: 'raw:ddp,raw:zero'}", "unknown side 'raw:zero'"),
    "bad-launcher": ("- {name: a, lightning_launcher: mpi}", "lightning_launcher"),
    "no-name": ("- {nproc: 2}", "`name`"),
    "not-a-list": ("name: a", "list"),
    "bad-value": ("- {name: a, set: {data.batch_size: -4}}", "data.batch_size"),
    "world-too-large": ("- {name: a, nproc: 3, set: {data.num_samples: 2}}", "data.num_samples"),
}


@pytest.mark.parametrize("name", list(MATRIX_CASES))
def test_bad_matrix_entry_is_refused_before_any_entry_runs(name, tmp_path):
    text, word = MATRIX_CASES[name]
    matrix = write(tmp_path / "matrix.yaml", "- {name: fine}\n" + text + "\n" if text.startswith("-") else text)
    code, _, stderr = harness_in_process("--matrix", matrix, "--out", tmp_path / "out")
    assert_one_line_error(code, stderr, word)
    assert not (tmp_path / "out").exists()


def test_steps_of_a_run_match_what_the_loop_makes():
    """The figure behind the fault check and the progress total: 2000 samples over 2 ranks in
    batches of 32 is 32 steps per epoch (the harness test sees 2 x 3 x 32 rank-steps)."""
    cfg = parse_raw_config(["--config", str(DEFAULT_CONFIG)])
    assert total_steps(cfg, 2) == 96
    small = parse_raw_config(["--config", str(DEFAULT_CONFIG), "--data.num_samples", "256", "--data.drop_last", "true"])
    assert total_steps(small, 3) == 3 * (86 // 32)


def test_config_error_is_a_value_error():  # the CLI catches ConfigError among its one-line errors
    assert issubclass(ConfigError, ValueError)


def test_good_inputs_pass_the_checks(tmp_path):
    """The checks refuse only what is wrong: a valid key map and a valid matrix pass them."""
    from ddp_parity.harness.comparing import build_key_map
    from ddp_parity.harness.modes.matrix import load_matrix

    key_map = build_key_map(["net."], str(write(tmp_path / "map.json", json.dumps({"a": "b"}))))
    assert key_map("net.a") == "b" and key_map("c") == "c"
    entries = load_matrix(str(write(tmp_path / "m.yaml", "- {name: a, nproc: 2, set: {data.batch_size: 16}}\n")))
    assert entries[0]["nproc"] == 2
