"""ddp_parity.testing and its pytest plugin: parity as a test in a user's own suite.

The slow tests run the byo_model example's two real launch commands (torchrun + the raw loop, a
plain Lightning Trainer under its own launcher), the way a user's CI would: the example's own test
file must pass, a bent side must fail with the diagnosis as the message, a crashing side must be
named with its rank and error, and no process may outlive any of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from conftest import DEFAULT_CONFIG, REPO, child_env

from ddp_parity.harness.launch import kill_tree
from ddp_parity.testing import (
    ParityUsageError,
    RunFailed,
    assert_parity,
    processes_started,
)

EXAMPLE = REPO / "examples" / "byo_model"
SMALL = ["--epochs", "1", "--num_samples", "256", "--val_samples", "64"]


def torchrun(nproc: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--master_port={port}"]


def raw(nproc: int) -> list[str]:
    return [*torchrun(nproc), str(EXAMPLE / "train_raw.py"), "--run_dir", "{run_dir}", *SMALL]


def lightning(devices: int) -> list[str]:
    script = str(EXAMPLE / "train_lightning.py")
    return [sys.executable, script, "--run_dir", "{run_dir}", "--devices", str(devices), *SMALL]


TORCHRUN, RAW, LIGHTNING = torchrun(2), raw(2), lightning(2)


# ---------------------------------------------------------------------------------------------
# fast: arguments, the plugin's registration


@pytest.mark.parametrize(
    "cmd_a, kwargs, says",
    [
        ("python train.py --run_dir {run_dir}", {}, "cmd_a must be a non-empty list of strings"),
        ([], {}, "cmd_a must be a non-empty list"),
        (["python", "train.py"], {}, "cmd_a must contain {run_dir}"),
        (["python", "train.py", "--run_dir={run_dir}"], {"rtol": -1e-6}, "rtol must be a number >= 0"),
        (["python", "train.py", "--run_dir={run_dir}"], {"timeout": 0}, "timeout must be a positive number"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(tmp_path, cmd_a, kwargs, says):
    workdir = tmp_path / "w"
    with pytest.raises(ParityUsageError, match=says.replace("{", r"\{").replace("}", r"\}")) as err:
        assert_parity(cmd_a, ["python", "b.py", "{run_dir}"], workdir=workdir, **kwargs)
    assert err.value.exit_code == 2
    assert not workdir.exists()


def test_a_workdir_that_holds_runs_is_refused_and_kept(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "meta.json").write_text("{}")
    with pytest.raises(ParityUsageError, match="already holds results"):
        assert_parity(["x", "{run_dir}"], ["y", "{run_dir}"], workdir=tmp_path)
    assert (tmp_path / "a" / "meta.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]


def test_processes_started_reads_the_launch_flags():
    assert processes_started(RAW) == 2
    assert processes_started(LIGHTNING) == 2
    assert processes_started(["python", "-m", "lightning_impl", "fit", "--trainer.devices", "4"]) == 4
    assert processes_started(["torchrun", "--nproc-per-node", "3", "t.py"]) == 3
    assert processes_started(["python", "train.py", "--run_dir", "x"]) == 1


def test_the_plugin_is_registered_and_loaded(pytestconfig, request):
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("ddp_parity") == "ddp_parity.pytest_plugin"
    assert pytestconfig.pluginmanager.has_plugin("ddp_parity")
    assert any(line.startswith("parity:") for line in pytestconfig.getini("markers"))
    runner = request.getfixturevalue("parity")
    assert callable(runner) and runner.workdirs == []  # nothing launched until it is called


# ---------------------------------------------------------------------------------------------
# slow: real runs


def run_pytest(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m pytest ARGS` in a session of its own; its whole process tree is killed after."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=child_env(),
        text=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        kill_tree(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def rank_pids(run_dir: Path) -> list[int]:
    meta = json.loads((run_dir / "meta.json").read_text())
    return [facts["pid"] for facts in meta["ranks"]]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper is dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_the_example_parity_test_passes(tmp_path):
    """examples/byo_model/test_parity.py, run as its owner would: it passes, and it compared something."""
    result = run_pytest(["-q", str(EXAMPLE / "test_parity.py"), "--basetemp", str(tmp_path / "bt")], cwd=REPO)
    assert result.returncode == 0, result.stdout[-6000:]
    assert "1 passed" in result.stdout
    (report_path,) = (tmp_path / "bt").rglob("report.json")
    report = json.loads(report_path.read_text())
    assert report["verdict"] == "equivalent" and report["criterion"] == "exact"
    assert report["losses"]["compared"] == report["losses"]["equal"] == 8  # 4 steps x 2 ranks
    assert report["params"]["compared"] == report["params"]["equal"] > 0
    assert report["diagnosis"]["category"] == "equivalent"
    assert Path(report["plot"]).is_file()
    for side in ("a", "b"):
        assert not any(alive(pid) for pid in rank_pids(report_path.parent / side))


BENT_TEST = """
import sys
import pytest

RAW = {raw!r}
LIGHTNING = {lightning!r}


@pytest.mark.parity
def test_bent_learning_rate(parity):
    parity(RAW + ["--lr", "0.003"], LIGHTNING)
"""


@pytest.mark.slow
def test_a_bent_side_fails_with_the_diagnosis_and_leaves_nothing_running(tmp_path):
    """A user's suite (outside this checkout) whose raw side trains with another learning rate."""
    suite = tmp_path / "suite"
    suite.mkdir()
    # one process a side: a config difference is diagnosed alike at any world size, and the example's
    # test above runs the plugin at world 2 (Lightning's child rank reaped too); this one is about the
    # message. The raw loop's config holds Lightning's devices too (its world comes from torchrun).
    bent_raw = [*raw(1), "--devices", "1"]
    (suite / "test_bent.py").write_text(BENT_TEST.format(raw=bent_raw, lightning=lightning(1)))
    keep = tmp_path / "artifacts"
    result = run_pytest(["-q", "test_bent.py", "--basetemp", str(tmp_path / "bt"), "--parity-keep", str(keep)], suite)
    out = result.stdout
    assert result.returncode == 1, out[-6000:]
    assert "RunsDiffer: the two runs do not train the same" in out
    assert "verdict: DIFFERENT (exact" in out
    assert "first divergence: lr at step 1 rank 0: 0.003 vs 0.002" in out
    assert "diagnosis: config (before any step)" in out
    assert "config.lr: 0.003 vs 0.002" in out  # the evidence
    assert "fix: Give both sides the same value of lr" in out
    assert "ddp-parity: kept for inspection" in out  # the plugin's section, and the copy for CI
    kept = keep / "test_bent_learning_rate" / "parity-0"
    report = json.loads((kept / "report.json").read_text())
    assert report["verdict"] == "different" and report["diagnosis"]["category"] == "config"
    assert (kept / "loss_curves.png").is_file() and str(kept) in out
    for side in ("a", "b"):
        pids = rank_pids(kept / side)
        assert len(pids) == 1 and not any(alive(pid) for pid in pids), pids


@pytest.mark.slow
def test_a_crashing_side_is_named_with_its_rank_and_error(tmp_path):
    """The project's raw loop, rank 1 raising after step 1: RunFailed (exit code 3) says which
    side, which rank and what it raised; the other side is not started; nothing is left running."""
    tiny = ["--config", str(DEFAULT_CONFIG), "--run_dir", "{run_dir}", "--trainer.max_epochs", "1"]
    tiny += ["--data.num_samples", "128", "--trainer.enable_progress_bar", "false"]
    fault = ["env", "DDP_PARITY_FAULT=1:1:raise", f"DDP_PARITY_FAULT_MARKER={tmp_path / 'fired'}"]
    crashing = [*fault, *TORCHRUN, str(REPO / "raw" / "train.py"), *tiny]
    lightning = [sys.executable, "-m", "lightning_impl", "fit", *tiny]
    with pytest.raises(RunFailed) as err:
        assert_parity(crashing, lightning, workdir=tmp_path / "w", parallel=False, cwd=REPO)
    message = str(err.value)
    assert err.value.exit_code == 3
    assert message.startswith("run a failed on rank 1: exit code 1 (run b was not started)"), message
    assert "(run b was not started)" in message
    assert "InjectedFault: injected fault: rank 1 raises after step 1" in message
    assert f"report: {tmp_path / 'w' / 'report.json'}" in message
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    assert report["verdict"] == "failed" and report["failure"]["side"] == "a" and report["failure"]["rank"] == 1
    assert report["not_run"] == ["b"] and list(report["commands"]) == ["a", "b"]  # beside the harness's keys
    assert report["diagnosis"]["category"] == "crash" and report["diagnosis"]["rank"] == 1
    assert not (tmp_path / "w" / "b").exists()
    assert not any(alive(pid) for pid in rank_pids(tmp_path / "w" / "a"))
    assert os.path.exists(tmp_path / "fired")


@pytest.mark.parametrize("parallel", [False, True])
def test_a_command_that_records_nothing_is_a_failed_run_naming_it(tmp_path, parallel):
    """Exit code 0 but no trace where {run_dir} pointed: RunFailed (exit code 3), not a comparison."""
    quiet = [sys.executable, "-c", "import sys; sys.exit(0)", "{run_dir}"]
    with pytest.raises(RunFailed) as err:
        assert_parity(quiet, quiet, workdir=tmp_path, parallel=parallel)
    message = str(err.value)
    assert err.value.exit_code == 3
    assert message.startswith("run a failed: exit code 0, but its trace cannot be read"), message
    assert str(tmp_path / "a") in message and "did the command write its trace into the {run_dir}" in message
    assert json.loads((tmp_path / "report.json").read_text())["verdict"] == "failed"
