"""assert_parity against real processes: two calls on one workdir, and a command that daemonises.
The commands are tiny Python processes that copy a hand-made run (no training)."""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import threading

import pytest
from conftest import check_ok, run_raw
from test_comparator import LOSSES, PARAMS, make_run

from ddp_parity.testing import ParityUsageError, RunFailed, assert_parity

pytestmark = pytest.mark.slow

# copy a prepared run into {run_dir}; with a FIFO first, only once something is written into it
COPY_RUN = "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])"
COPY_AFTER_FIFO = "import shutil, sys; open(sys.argv[3]).read(); shutil.copytree(sys.argv[1], sys.argv[2])"
# fork twice, the daemon in a process group of its own (out of reach of a group kill); the command
# exits 1 once the daemon has said its pid
DAEMONISE = """
import os, sys, time
read, write = os.pipe()
if os.fork() == 0:
    os.setpgid(0, 0)
    if os.fork() == 0:
        os.write(write, str(os.getpid()).encode())
        time.sleep(600)
    os._exit(0)
os.close(write)
open(sys.argv[1], "w").write(os.read(read, 32).decode())
sys.exit(1)
"""


def test_two_calls_on_one_workdir_the_second_is_refused_and_the_first_unmixed(tmp_path):
    source = make_run(tmp_path / "source", LOSSES, PARAMS)
    fifo, workdir = tmp_path / "go", tmp_path / "work"
    os.mkfifo(fifo)
    first: dict = {}

    def first_call():
        try:
            first["report"] = assert_parity(
                [sys.executable, "-c", COPY_AFTER_FIFO, str(source), "{run_dir}", str(fifo)],
                [sys.executable, "-c", COPY_RUN, str(source), "{run_dir}"],
                workdir=workdir,
                parallel=True,
            )
        except BaseException as err:
            first["error"] = err
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # let the writer below go on

    thread = threading.Thread(target=first_call)
    thread.start()
    with open(fifo, "w"):  # returns once the first call's command is running, its workdir claimed
        with pytest.raises(ParityUsageError, match="in use by another run") as err:
            assert_parity(
                [sys.executable, "-c", COPY_RUN, str(source), "{run_dir}"],
                [sys.executable, "-c", COPY_RUN, str(source), "{run_dir}"],
                workdir=workdir,
            )
    thread.join(timeout=120)
    assert err.value.exit_code == 2
    assert "error" not in first, first.get("error")
    assert first["report"]["verdict"] == "equivalent"
    for rank in (0, 1):
        steps = [json.loads(line)["step"] for line in (workdir / "a" / "trace" / f"rank{rank}.jsonl").open()]
        assert steps == [1, 2, 3]  # one run's records, not two runs' mixed


def test_what_a_command_daemonised_is_gone_when_assert_parity_raises(tmp_path):
    pid_file = tmp_path / "daemon.pid"
    with pytest.raises(RunFailed):
        assert_parity(
            [sys.executable, "-c", DAEMONISE, str(pid_file), "{run_dir}"],
            [sys.executable, "-c", "pass", "{run_dir}"],
            workdir=tmp_path / "work",
            parallel=False,
        )
    pid = int(pid_file.read_text())
    try:
        exited = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # gone and reaped
    try:
        dead = select.select([exited], [], [], 30)[0]  # readable once the process has ended
        if not dead:
            os.kill(pid, signal.SIGKILL)  # leave nothing behind, then fail
        assert dead, f"the daemon {pid} survived assert_parity"
    finally:
        os.close(exited)


def test_a_damaged_sharded_checkpoint_is_one_line_and_the_ranks_error_file(tmp_path):
    """Before: a cut-off DCP shard printed DCP's CheckpointException (a BaseException, past the
    `except Exception` that gives a damaged .pt its one line) with every rank's traceback, about 190
    lines a rank, and no error file. One rank under torchrun: FSDP2 and DCP at their smallest."""
    run = tmp_path / "run"
    small = ["--trainer.strategy", "fsdp", "--data.num_samples", "64", "--data.val_samples", "0"]
    check_ok(run_raw(tmp_path, 1, *small, "--trainer.max_epochs", "1", run_dir=run))
    shard = next((run / "checkpoints").glob("step-*.dcp/__0_0.distcp"))
    shard.write_bytes(shard.read_bytes()[:100])
    result = run_raw(tmp_path, 1, *small, "--trainer.max_epochs", "2", "--resume", run_dir=run)
    printed = result.stdout + result.stderr
    lines = [line for line in printed.splitlines() if line.startswith("raw/train.py: error:")]
    assert result.returncode != 0 and len(lines) == 1, printed[-3000:]
    assert "cannot be loaded" in lines[0] and shard.parent.name in lines[0] and "EOFError" in lines[0]
    assert "CheckpointException" not in printed and "[rank0]: Traceback" not in printed
    error = json.loads((run / "errors" / "rank0.json").read_text())
    assert "cannot be loaded" in error["message"] and error["phase"] == "resume"
