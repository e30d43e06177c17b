"""The pytest plugin of ddp-parity (registered through the `pytest11` entry point, so installing
the package is enough): a `parity` fixture and a `parity` marker.

    @pytest.mark.parity
    def test_same_training(parity):
        parity(cmd_a, cmd_b)          # assert_parity(cmd_a, cmd_b, workdir=<tmp_path>/parity-N, ...)

It does nothing to tests that do not ask for the fixture. When a test that used it fails, the run
directories, report.json and the plot stay where they are (under pytest's tmp_path, which keeps the
latest sessions) and their paths are added to the failure report; `--parity-keep DIR` copies them
to DIR as well (for CI artifacts).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

MARKER = "parity: launches two training runs and compares them (slow: real processes)"


def pytest_addoption(parser) -> None:
    parser.getgroup("ddp-parity").addoption(
        "--parity-keep",
        metavar="DIR",
        default=None,
        help="copy the run directories of a failed parity test to DIR/<test name> (e.g. for CI artifacts)",
    )


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", MARKER)


class ParityRunner:
    """`parity(cmd_a, cmd_b, **kwargs)`: assert_parity with a fresh workdir under the test's tmp_path."""

    def __init__(self, base: Path):
        self.base = base
        self.workdirs: list[Path] = []

    def __call__(self, cmd_a, cmd_b, **kwargs) -> dict:
        __tracebackhide__ = True
        workdir = self.base / f"parity-{len(self.workdirs)}"
        self.workdirs.append(workdir)
        from ddp_parity.testing import assert_parity  # here: a session that never uses it stays light

        return assert_parity(cmd_a, cmd_b, workdir=workdir, **kwargs)


@pytest.fixture
def parity(tmp_path: Path) -> ParityRunner:
    """Call it with two command lists (placeholders `{run_dir}`, `{port}`); returns the report."""
    return ParityRunner(tmp_path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    runner = getattr(item, "funcargs", {}).get("parity")
    report = outcome.get_result()
    if not isinstance(runner, ParityRunner) or not report.failed or not runner.workdirs:
        return
    lines = [str(workdir) for workdir in runner.workdirs]
    keep = item.config.getoption("--parity-keep")
    if keep:
        for workdir in runner.workdirs:
            target = Path(keep) / item.name / workdir.name
            shutil.copytree(workdir, target, dirs_exist_ok=True)
            lines.append(f"copied to {target}")
    report.sections.append(("ddp-parity: kept for inspection", "\n".join(lines)))
