"""`python -m benchmarks.programs --keep DIR`: DIR is checked before any program runs (one line, exit 2, nothing
written), a relative DIR is taken from the user's working directory, and the corpus runs from any working
directory (issue 47 M)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, assert_one_line_error, main_in_process

from benchmarks.programs import __main__ as programs
from benchmarks.programs.run import PairResult


def run_main(*args) -> tuple[int, str, str]:
    return main_in_process(programs.main, *args)


@pytest.fixture
def launched(monkeypatch):
    """The folders the corpus would run its pairs in, taken instead of running them (the launches are the slow
    tier's: tests/test_programs.py)."""
    works: list[Path] = []

    def take(program, work, in_process=False):
        works.append(work)
        return PairResult(program, 0, "verdict: EQUIVALENT (not run)")

    monkeypatch.setattr(programs, "run_pair", take)
    return works


def test_a_relative_keep_is_the_users_folder_not_one_nested_below_it(tmp_path, monkeypatch, launched):
    monkeypatch.chdir(tmp_path)
    code, _, stderr = run_main("--only", "iterable", "--keep", "kept")
    assert code == 0, stderr
    assert launched == [tmp_path / "kept" / "iterable"]  # absolute: each program runs with its folder as cwd


@pytest.mark.parametrize(
    "keep, words",
    [
        (lambda tmp: REPO / "programs-here", ["--keep", "inside the source checkout"]),
        (lambda tmp: tmp / "file", ["--keep", "not a directory"]),
        (lambda tmp: tmp / "file" / "below", ["--keep", "not a directory"]),
        (lambda tmp: Path("/proc/ddp-parity-keep"), ["--keep", "cannot write there"]),
        (lambda tmp: tmp / "taken", ["--keep", "already exist", "nothing is overwritten"]),
    ],
    ids=["checkout", "file", "below-a-file", "proc", "taken"],
)
def test_a_bad_keep_is_one_line_exit_2_and_nothing_runs(tmp_path, keep, words, launched):
    (tmp_path / "file").write_text("mine")
    (tmp_path / "taken" / "iterable").mkdir(parents=True)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, _, stderr = run_main("--only", "iterable", "--keep", keep(tmp_path))
    assert_one_line_error(code, stderr, *words)
    assert launched == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert not (REPO / "programs-here").exists()


@pytest.mark.slow
def test_the_corpus_runs_from_any_folder_and_keeps_a_relative_folder_there(tmp_path):
    """`python -m benchmarks.programs --keep kept` from a folder outside the checkout (the checkout on PYTHONPATH):
    the pair runs, compare/run.py compares it, and the runs are in ./kept/<name>, not nested inside it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.programs", "--only", "iterable", "--keep", "kept"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "iterable: verdict: EQUIVALENT" in proc.stdout
    kept = tmp_path / "kept" / "iterable"
    assert (kept / "raw" / "trace" / "meta.json").exists() and (kept / "compare" / "report.json").exists()
    assert not (kept / "kept").exists()
