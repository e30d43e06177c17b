"""The harness as the user started it and as it is installed: its name (`ddp-parity`, the console
script, or `compare/run.py`, the checkout's script) in --help, the error and interrupt lines; and a
package installed without a checkout, which has no twins to launch but compares, writes SLURM
scripts, records and checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PYTHON, REPO, assert_one_line_error, child_env, harness_in_process
from test_html import make_run

from ddp_parity.harness import cli, launch, slurm
from ddp_parity.harness.program import harness_command, program_name

STARTED_AS = [("compare/run.py", "compare/run.py"), ("/venv/bin/ddp-parity", "ddp-parity")]  # (argv[0], name)


def test_program_name_follows_how_the_harness_was_started():
    assert program_name("compare/run.py") == program_name(str(REPO / "compare" / "run.py")) == "compare/run.py"
    assert program_name("/venv/bin/ddp-parity") == program_name("-c") == "ddp-parity"  # also in-process callers
    assert harness_command("compare/run.py") == "python compare/run.py"
    assert harness_command("/venv/bin/ddp-parity") == "ddp-parity"


@pytest.mark.parametrize("argv0,name", STARTED_AS)
def test_help_error_and_interrupt_lines_say_that_name(monkeypatch, capsys, argv0, name):
    monkeypatch.setattr(sys, "argv", [argv0])
    assert cli.build_parser().prog == name
    code, _, err = harness_in_process("--rtol", "nan")  # refused by the parser
    assert err.strip().splitlines()[-1].startswith(f"{name}: error: --rtol nan"), err
    code, _, err = harness_in_process("--config", "/nonexistent.yaml")  # refused by a mode, printed by main
    assert code == 2 and err.strip() == f"{name}: error: --config /nonexistent.yaml: no such file", err
    code, _, err = harness_in_process("slurm", "--nodes", "0", "--devices", "1", "--out", "/tmp/x")
    assert code == 2 and err.startswith(f"{name} slurm: error: --nodes must be positive"), err

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "dispatch", interrupted)
    code, _, err = harness_in_process()
    assert code == 130 and err.startswith(f"{name}: interrupted (signal 2)"), err


LAUNCHING = [[], ["run"], ["--reference"], ["--fault", "1:3"], ["--mistake", "list"], ["--matrix", "m.yaml"]]


@pytest.mark.parametrize("args", LAUNCHING, ids=lambda args: " ".join(args) or "no arguments")
def test_without_a_checkout_every_launching_mode_says_so_in_one_line(monkeypatch, tmp_path, args):
    """An installed package's REPO is site-packages: no twins there. Refused before any config, --out or
    runs/ folder is looked at or made."""
    site = tmp_path / "site-packages"
    (site / "ddp_parity").mkdir(parents=True)
    monkeypatch.setattr(launch, "REPO", site)
    monkeypatch.chdir(tmp_path)
    code, _, err = harness_in_process(*args, "--out", str(tmp_path / "out"))
    assert_one_line_error(code, err, "raw/train.py and lightning_impl/", str(site), "source checkout", "--traces")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site-packages"]


def test_slurm_without_a_checkout_needs_repo(monkeypatch, tmp_path, capsys):
    """Its default --repo (this checkout) would be site-packages: the user names the cluster's checkout."""
    monkeypatch.setattr(slurm, "REPO", tmp_path / "site-packages")
    argv = ["--nodes", "1", "--devices", "1", "--config", str(REPO / "configs" / "default.yaml")]
    assert slurm.main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert_one_line_error(2, capsys.readouterr().err, "--repo", "installed without a checkout")
    assert not (tmp_path / "out").exists()
    assert slurm.main([*argv, "--out", str(tmp_path / "out"), "--repo", "/shared/ddp-parity"]) == 0
    assert "cd /shared/ddp-parity" in (tmp_path / "out" / "raw.sbatch").read_text()


# ---------------------------------------------------------------------------------------------
# a real install


def install_without_checkout(tmp: Path) -> Path:
    """ddp-parity built and installed as a user gets it (a wheel, not editable) into TMP/site: from a
    copy of only what the wheel is built from, so the checkout gets no build/ or egg-info and the
    install cannot lean on files beside it. `pip --target` with this venv's python and setuptools
    (no build isolation, no dependencies: seconds, offline) rather than a fresh venv: the
    dependencies (torch, Lightning) are this venv's, and PYTHONPATH=TMP/site puts the installed copy
    ahead of the editable one, whose finder comes after sys.path."""
    source = tmp / "source"
    shutil.copytree(REPO / "ddp_parity", source / "ddp_parity", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    site = tmp / "site"
    subprocess.run(
        [PYTHON, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(site), str(source)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return site


@pytest.mark.slow
def test_installed_package_without_a_checkout(tmp_path):
    site = install_without_checkout(tmp_path)
    elsewhere = tmp_path / "elsewhere"  # the user's working directory: no checkout in sight
    elsewhere.mkdir()
    env = child_env({"PYTHONPATH": str(site)})

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)

    imports = run(
        PYTHON,
        "-c",
        "import ddp_parity; from ddp_parity import TraceRecorder, TraceCallback; "
        "from ddp_parity.testing import assert_parity; print(ddp_parity.__file__)",
    )
    assert imports.returncode == 0, imports.stderr
    assert Path(imports.stdout.strip()).is_relative_to(site), imports.stdout  # the installed copy, not the checkout

    ddp_parity = str(site / "bin" / "ddp-parity")
    shown = run(ddp_parity, "--help")
    assert shown.returncode == 0 and shown.stdout.startswith("usage: ddp-parity "), shown.stdout + shown.stderr

    refused = run(ddp_parity)
    assert_one_line_error(refused.returncode, refused.stderr, "source checkout", "ddp-parity --traces")
    assert os.listdir(elsewhere) == []

    config = {"seed_everything": 42}
    runs = [make_run(tmp_path / side, side, config) for side in ("mine", "theirs")]
    compared = run(ddp_parity, "--traces", *map(str, runs), "--out", str(tmp_path / "cmp"))
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert (tmp_path / "cmp" / "report.json").is_file()

    sbatch = run(ddp_parity, "slurm", "--help")
    assert sbatch.returncode == 0 and sbatch.stdout.startswith("usage: ddp-parity slurm "), sbatch.stderr
