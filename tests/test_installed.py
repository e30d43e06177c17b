"""The harness as the user started it: its name (`ddp-parity`, the console script, or
`compare/run.py`, the checkout's script) in --help, the error and interrupt lines."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO, harness_in_process

from ddp_parity.harness import cli
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
