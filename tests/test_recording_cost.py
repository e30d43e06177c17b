"""benchmarks/recording_cost.py: the plain programs it builds from the corpus (their `# parity` lines
taken out by the corpus's own strip, tested in test_programs_hooks.py) and, run end to end on the smallest
program, that it prints its figures (not timed)."""

from __future__ import annotations

import ast
import re

import pytest

from benchmarks import recording_cost
from benchmarks.recording_cost import PROGRAMS, WORKLOADS, plain_folder


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_each_plain_program_is_the_corpus_program_without_its_recorder(name, tmp_path):
    workload = WORKLOADS[name]
    plain = (plain_folder(workload, tmp_path) / workload.script).read_text()
    ast.parse(plain)
    assert ".record(" not in plain and ".finish(" not in plain and ".start(" not in plain
    left = [line for line in plain.splitlines() if re.search(r"\s# parity", line)]
    assert not [line for line in left if re.search(r"\w\.\w+\(|=", line)], left  # a def's header lines only
    assert "ddp_parity" not in plain
    if "# parity" in (PROGRAMS / workload.folder / workload.script).read_text():
        assert plain != (PROGRAMS / workload.folder / workload.script).read_text()


@pytest.mark.slow
def test_the_benchmark_prints_its_figures(capsys, monkeypatch):
    """The smallest program, one round, not timed: every variant ran and the tables are printed."""
    small = recording_cost.Workload(
        "iterable", "iterable", "train.py", ("--epochs=1", "--size=64", "--batch_size=4", "--run_dir={out}/trace")
    )
    monkeypatch.setitem(WORKLOADS, "iterable", small)
    code = recording_cost.main(["--only", "iterable", "--rounds", "1"])
    out = capsys.readouterr().out
    assert code in (0, 1)  # 1: a goal missed, which this test does not time
    for variant in ("recorded", "instrumented"):
        assert any(line.startswith("iterable") and f" {variant} " in line for line in out.splitlines()), out
    assert "per step vs plain" in out and "CPU per step vs plain" in out
    assert "host reads by the recording per step" in out
