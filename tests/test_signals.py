"""Nothing keeps running once the harness has gone: SIGINT, SIGTERM and SIGHUP stop every process it
started and exit 128+n; SIGKILL of the harness takes its launches with it (parent-death signal on
torchrun and Lightning's first process, a watchdog in their children). Checked by process id."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import PYTHON, REPO, child_env

from ddp_parity.harness.exits import Interrupted, restore_signals, stop_on_signals
from ddp_parity.harness.launch import descendants, kill_tree
from ddp_parity.trace_files import read_progress

GONE_WITHIN_S = 30.0
SIDES = ("raw", "lightning")  # the harness's run folders under --out


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    pause = threading.Event()
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        pause.wait(0.1)  # polling /proc: these processes are not our children, waitpid cannot see them
    return [pid for pid in pids if alive(pid)]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_each_stop_signal_raises_the_interrupt_that_stops_the_launches(signum):
    """The harness's handlers: each of SIGINT, SIGTERM and SIGHUP unwinds as Interrupted (the
    KeyboardInterrupt the launcher answers by killing every process tree) with exit code 128 + n."""
    previous = stop_on_signals()
    try:
        with pytest.raises(Interrupted) as raised:
            os.kill(os.getpid(), signum)
            threading.Event().wait(5)  # the handler runs at the next bytecode; this never waits out
    finally:
        restore_signals(previous)
    assert isinstance(raised.value, KeyboardInterrupt) and raised.value.exit_code == 128 + signum


def start_training_harness(out: Path) -> tuple[subprocess.Popen, list[int]]:
    """The harness with both sides training (a long run); returns it and every process under it,
    once both sides' heartbeats show a step (so torchrun's workers and Lightning's ranks exist)."""
    proc = subprocess.Popen(
        [PYTHON, "compare/run.py", "--out", str(out), "--parallel", "--stall-timeout", "300"]
        + ["--set", "trainer.max_epochs=300", "--set", "data.num_samples=2000"],
        cwd=REPO,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    training = wait_until_training(proc, out, SIDES, seconds=400)
    if training != set(SIDES):
        kill_tree(proc.pid)  # a test that failed must not leave its run behind
        _, stderr = proc.communicate()
        pytest.fail(f"sides training: {sorted(training)}, harness exit {proc.returncode}\n{stderr[-3000:]}")
    pids = descendants(proc.pid)
    assert len(pids) >= 4, pids  # torchrun + 2 workers, Lightning's 2 ranks
    return proc, pids


def wait_until_training(proc: subprocess.Popen, out: Path, sides: tuple[str, ...], seconds: float) -> set[str]:
    """The sides whose ranks have taken a step, once all have (or the harness ended, or `seconds`
    passed). Read from the ranks' heartbeats (once a second), not the harness's progress lines (every
    5 s): the sides train flat out meanwhile, and every second of it is CPU the suite pays for. A DDP
    step needs every rank of its side, so one rank's step says they all exist."""
    deadline = time.monotonic() + seconds
    pause = threading.Event()
    training: set[str] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        training = {side for side in sides if stepped(out / side)}
        if training == set(sides):
            break
        pause.wait(0.1)  # polling files: nothing signals a heartbeat written
    return training


def stepped(run_dir: Path) -> bool:
    return any((beat.get("step") or 0) > 0 for beat in read_progress(run_dir).values())


# SIGINT, SIGTERM and SIGHUP take one path (one handler raises Interrupted, the launcher kills every
# tree it started): one of them on a real run, the mapping of all three checked in process below.
# SIGKILL takes another (the parent-death signal and the children's watchdog): a real run too.
@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_no_process_of_the_run_outlives_the_harness(tmp_path, signum):
    out = tmp_path / "out"
    proc, pids = start_training_harness(out)
    try:
        os.kill(proc.pid, signum)
        _, stderr = proc.communicate(timeout=120)
        if signum == signal.SIGKILL:
            assert proc.returncode == -signal.SIGKILL
        else:
            assert proc.returncode == 128 + signum, stderr
            assert "interrupted" in stderr and "stopped" in stderr
        assert wait_until_gone(pids, GONE_WITHIN_S) == [], f"still running after {GONE_WITHIN_S} s"
    finally:
        for pid in pids:  # only if the test failed: never leave them behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
