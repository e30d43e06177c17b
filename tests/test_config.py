"""The shared config: parsing, dotted overrides, validation errors that name the key, and the CLI's
exit code 2 with a one-line error."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from conftest import DEFAULT_CONFIG, run_raw

from ddp_parity.config import ConfigError, TrainerConfig, parse_raw_config

DEFAULT = str(DEFAULT_CONFIG)


def parse(*overrides: str):
    return parse_raw_config(["--config", DEFAULT, *overrides])


def config_error(argv: list[str]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_raw_config(argv)
    message = str(info.value)
    assert "\n" not in message, f"not one line: {message!r}"
    return message


def write_config_with(tmp_path: Path, section: str, line: str, name: str = "bad.yaml") -> Path:
    """The default config with one extra line at the end of `section:`."""
    lines = DEFAULT_CONFIG.read_text().splitlines()
    start = lines.index(f"{section}:")
    end = start + 1
    while end < len(lines) and (lines[end].startswith(" ") or not lines[end].strip()):
        end += 1
    lines.insert(end, f"  {line}")
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


# -- parsing ------------------------------------------------------------------------------


def test_default_config_has_the_tutorial_values():
    cfg = parse_raw_config(["--config", DEFAULT])
    assert cfg.data.batch_size == 32
    assert cfg.model.lr == 1e-3
    assert cfg.trainer.max_epochs == 3
    assert cfg.model.optimizer == "adam"
    assert cfg.data.num_samples == 2000
    # the tutorial network and data shapes, and a pinned seed
    assert (cfg.model.input_dim, cfg.model.hidden_dim, cfg.model.num_classes, cfg.model.depth) == (32, 64, 10, 1)
    assert cfg.data.num_features == 32 and cfg.data.num_classes == 10
    assert cfg.seed_everything == 42 and cfg.threads == 1
    assert cfg.trainer.accelerator == "cpu" and cfg.trainer.devices == 2 and cfg.trainer.strategy == "ddp"


def test_dotted_override_wins_over_the_file():
    cfg = parse("--data.batch_size", "16")
    assert cfg.data.batch_size == 16
    assert cfg.model.lr == 1e-3 and cfg.data.num_samples == 2000  # nothing else moved
    cfg = parse("--trainer.max_epochs", "1", "--model.lr", "0.01", "--model.optimizer", "sgd")
    assert (cfg.trainer.max_epochs, cfg.model.lr, cfg.model.optimizer) == (1, 0.01, "sgd")


def test_an_override_before_the_file_loses_to_it():
    # jsonargparse applies arguments in order: a --config after an override replaces the value
    cfg = parse_raw_config(["--data.batch_size", "16", "--config", DEFAULT])
    assert cfg.data.batch_size == 32


# -- errors that name the key -------------------------------------------------------------


def test_unknown_dotted_key_is_named():
    message = config_error(["--config", DEFAULT, "--data.bogus", "1"])
    assert "data.bogus" in message


def test_unknown_key_in_a_yaml_file_is_named(tmp_path):
    bad = write_config_with(tmp_path, "data", "bogus_key: 3")
    message = config_error(["--config", str(bad)])
    assert "bogus_key" in message and "data" in message


def test_unknown_key_in_the_trainer_section_is_named(tmp_path):
    bad = write_config_with(tmp_path, "trainer", "max_epoch: 5")  # a typo of max_epochs
    message = config_error(["--config", str(bad)])
    assert "max_epoch" in message and "trainer" in message


@pytest.mark.parametrize("argv", [["--data.batch_size", "-4"], ["--data.batch_size=-4"]])
def test_negative_batch_size_is_named(argv):
    message = config_error(["--config", DEFAULT, *argv])
    assert "data.batch_size" in message and "-4" in message


def test_zero_batch_size_is_named():
    message = config_error(["--config", DEFAULT, "--data.batch_size", "0"])
    assert "data.batch_size" in message


@pytest.mark.parametrize(
    "key,value",
    [
        ("data.batch_size", "abc"),
        ("trainer.max_epochs", "1.5"),
        ("model.lr", "fast"),
        ("data.drop_last", "maybe"),
        ("data.num_workers", "two"),
        ("data.persistent_workers", "sometimes"),
        ("model.optimizer", "lion"),
    ],
)
def test_wrong_type_is_named(key, value):
    message = config_error(["--config", DEFAULT, f"--{key}", value])
    assert key in message


@pytest.mark.parametrize("value", ["0", "-0.001"])
def test_non_positive_lr_is_named(value):
    message = config_error(["--config", DEFAULT, f"--model.lr={value}"])
    assert "model.lr" in message


def test_missing_config_file_is_named(tmp_path):
    missing = tmp_path / "nope.yaml"
    message = config_error(["--config", str(missing)])
    assert "config" in message and str(missing) in message


def test_input_dim_must_match_num_features():
    message = config_error(["--config", DEFAULT, "--model.input_dim", "16"])
    assert "model.input_dim" in message and "data.num_features" in message
    # and the other way round: the data side changed alone
    message = config_error(["--config", DEFAULT, "--data.num_features", "8"])
    assert "model.input_dim" in message and "data.num_features" in message


def test_num_classes_must_match():
    message = config_error(["--config", DEFAULT, "--data.num_classes", "3"])
    assert "model.num_classes" in message and "data.num_classes" in message


def test_workers_default_to_none_and_are_overridable():
    cfg = parse()
    assert cfg.data.num_workers == 0 and cfg.data.persistent_workers is False
    cfg = parse("--data.num_workers", "2", "--data.persistent_workers", "true")
    assert cfg.data.num_workers == 2 and cfg.data.persistent_workers is True


def test_negative_num_workers_is_named():
    message = config_error(["--config", DEFAULT, "--data.num_workers", "-1"])
    assert "data.num_workers" in message and "-1" in message


def test_persistent_workers_without_workers_is_named():
    message = config_error(["--config", DEFAULT, "--data.persistent_workers", "true"])
    assert "data.persistent_workers" in message and "data.num_workers" in message


def test_the_lightning_datamodule_refuses_the_same_bad_workers():
    from lightning_impl.module import ParityDataModule

    with pytest.raises(ConfigError, match="data.persistent_workers"):
        ParityDataModule(num_workers=0, persistent_workers=True)
    assert ParityDataModule(num_workers=2, persistent_workers=True).config.num_workers == 2


# -- the command line ---------------------------------------------------------------------


def assert_one_line_error(result, *needles: str) -> str:
    assert result.returncode == 2, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, f"stderr is not one line:\n{result.stderr}"
    line = lines[0]
    assert line.startswith("raw/train.py: error:"), line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


def test_cli_unknown_key_in_file_exits_2(tmp_path):
    bad = write_config_with(tmp_path, "data", "bogus_key: 3")
    run_dir = tmp_path / "r"
    result = run_raw(tmp_path, None, config=bad, run_dir=run_dir, timeout=120)
    assert_one_line_error(result, "bogus_key")
    assert not run_dir.exists()


def test_cli_negative_batch_size_exits_2(tmp_path):
    run_dir = tmp_path / "r"
    result = run_raw(tmp_path, None, "--data.batch_size", "-3", run_dir=run_dir, timeout=120)
    assert_one_line_error(result, "data.batch_size")
    assert not run_dir.exists()


def test_cli_missing_config_file_exits_2(tmp_path):
    run_dir = tmp_path / "r"
    missing = tmp_path / "missing.yaml"
    result = run_raw(tmp_path, None, config=missing, run_dir=run_dir, timeout=120)
    assert_one_line_error(result, str(missing))
    assert not run_dir.exists()


# -- the trainer section speaks Lightning's language -------------------------------------


def test_every_trainer_key_is_a_lightning_trainer_parameter():
    import lightning

    parameters = inspect.signature(lightning.Trainer.__init__).parameters
    fields = [f.name for f in dataclasses.fields(TrainerConfig)]
    assert fields, "TrainerConfig has no fields"
    for name in fields:
        assert name in parameters, f"trainer.{name} is not a lightning.Trainer argument"
        assert parameters[name].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY), name
