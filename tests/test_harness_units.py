"""The harness's parts that need no launch: liveness (busy versus blocked), the output folder with
--overwrite, the checkpoint-path check, the heartbeat a real TraceRecorder writes, progress lines."""

from __future__ import annotations

import json
import threading
import time
import zipfile

import pytest
import torch

from ddp_parity.checkpoints import check_lightning_ckpt_path
from ddp_parity.config import ConfigError
from ddp_parity.harness.exits import UsageError
from ddp_parity.harness.liveness import DEFAULT_STALL_S, Liveness
from ddp_parity.harness.outdir import OutDir
from ddp_parity.harness.progress import PlainProgress, SideState
from ddp_parity.trace import TraceRecorder, read_progress


def beat(t: float, step=3, phase="train", work=5, cpu=1.0, **extra) -> dict:
    return {"step": step, "epoch": 0, "phase": phase, "work": work, "cpu_s": cpu, "time": t, **extra}


# ---------------------------------------------------------------------------------------------
# liveness


def test_a_rank_whose_training_thread_computes_is_busy_not_stalled():
    """A long validation: step, phase and work stand still, CPU time moves: never a stall."""
    watch = Liveness(3.0)
    for second in range(60):
        assert watch.observe({0: beat(second, cpu=0.5 * second), 1: beat(second, cpu=1.0)}, float(second)) is None


def test_ranks_that_all_wait_stall_after_the_timeout_and_say_where():
    watch = Liveness(3.0)
    assert watch.observe({0: beat(0, cpu=1.0), 1: beat(0, step=4, phase="validation")}, 0.0) is None
    stall = None
    for second in range(1, 10):
        stall = stall or watch.observe({0: beat(second, cpu=1.0), 1: beat(second, step=4, phase="validation")}, second)
    assert stall is not None and stall["seconds"] > 3.0
    assert stall["ranks"] == {0: 3, 1: 4} and stall["phases"] == {0: "train", 1: "validation"}


def test_any_kind_of_progress_resets_the_clock():
    watch = Liveness(3.0)
    for second in range(30):  # the work counter moves every other second: validation batches
        beats = {0: beat(second, work=second // 2)}
        assert watch.observe(beats, float(second)) is None


def test_the_default_timeout_adapts_to_the_slowest_quiet_spell():
    watch = Liveness(None, adaptive=True)
    assert watch.timeout() == DEFAULT_STALL_S
    watch.observe({0: beat(0)}, 0.0)
    watch.observe({0: beat(1, step=4)}, 10.0)  # a 10 s step with no CPU seen (e.g. an I/O wait)
    assert watch.timeout() == 50.0
    assert watch.observe({0: beat(2, step=4)}, 45.0) is None
    assert watch.observe({0: beat(3, step=4)}, 61.0) is not None


def test_finished_ranks_are_never_a_stall_and_off_means_off():
    done = Liveness(2.0)
    off = Liveness(None)
    for second in range(20):
        assert done.observe({0: beat(0, phase="finished"), 1: beat(0, phase="finished")}, float(second)) is None
        assert off.observe({0: beat(0)}, float(second)) is None


# ---------------------------------------------------------------------------------------------
# the output folder


def test_overwrite_keeps_the_old_results_until_the_new_ones_are_complete(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("old")
    (out / "raw").mkdir()
    with pytest.raises(RuntimeError):
        with OutDir(out, overwrite=True) as path:
            assert sorted(p.name for p in path.iterdir() if not p.name.startswith(".")) == []
            (path / "raw.log").write_text("new, half done")
            raise RuntimeError("the launch failed before a report")
    assert sorted(p.name for p in out.iterdir()) == ["raw", "report.json"]
    assert (out / "report.json").read_text() == "old"
    od = OutDir(out, overwrite=True)
    with od as path:
        (path / "report.json").write_text("new")
        od.commit()
    assert sorted(p.name for p in out.iterdir()) == ["report.json"] and (out / "report.json").read_text() == "new"


def test_without_overwrite_results_are_refused(tmp_path):
    (tmp_path / "report.json").write_text("old")
    with pytest.raises(UsageError, match="--overwrite"):
        with OutDir(tmp_path, overwrite=False):
            pass
    assert (tmp_path / "report.json").read_text() == "old"


# ---------------------------------------------------------------------------------------------
# Lightning's --ckpt_path


def test_ckpt_path_errors_name_the_flag(tmp_path):
    good = tmp_path / "good.ckpt"
    torch.save({"state_dict": {"w": torch.ones(3)}, "epoch": 1}, good)
    check_lightning_ckpt_path(str(good))
    for name in ("last", "best", None):
        check_lightning_ckpt_path(name)
    corrupt = tmp_path / "corrupt.ckpt"
    corrupt.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    garbage = tmp_path / "garbage.ckpt"
    garbage.write_bytes(b"not a checkpoint at all")
    flipped = tmp_path / "flipped.ckpt"
    data = bytearray(good.read_bytes())
    with zipfile.ZipFile(good) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith("data.pkl"))
    name_len, extra_len = (
        int.from_bytes(data[info.header_offset + o : info.header_offset + o + 2], "little") for o in (26, 28)
    )
    start = info.header_offset + 30 + name_len + extra_len
    data[start + 2] ^= 0xFF  # a byte inside data.pkl
    flipped.write_bytes(bytes(data))
    cases = {
        tmp_path / "missing.ckpt": "no such file",
        tmp_path: "is a directory",
        corrupt: "not a readable checkpoint",
        garbage: "not a readable checkpoint",
        flipped: "checksum",
    }
    for path, words in cases.items():
        with pytest.raises(ConfigError, match=words) as err:
            check_lightning_ckpt_path(str(path))
        assert str(err.value).startswith(f"--ckpt_path {path}") and "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------
# the heartbeat of a real recorder (one process, no process group)


def test_the_heartbeat_says_phase_work_cpu_loss_and_total(tmp_path):
    recorder = TraceRecorder(tmp_path, side="unit")
    recorder.total_steps = 10
    recorder.start()
    try:
        recorder.record(1, torch.tensor(2.5), [0, 1], epoch=0)
        recorder.set_phase("validation")
        recorder.tick()
        cpu_before = recorder._heartbeat._training_cpu_s()
        deadline = time.thread_time() + 0.3
        while time.thread_time() < deadline:  # the training thread computes
            sum(range(10_000))
        recorder._heartbeat.write()
        found = read_progress(tmp_path)[0]
        assert set(found) >= {"step", "epoch", "phase", "work", "time", "loss", "total_steps", "cpu_s"}
        assert (found["step"], found["epoch"], found["phase"], found["loss"], found["total_steps"]) == (
            1,
            0,
            "validation",
            2.5,
            10,
        )
        assert found["work"] == 3 and found["cpu_s"] >= cpu_before + 0.2
        waiting = threading.Event()
        cpu_before = recorder._heartbeat._training_cpu_s()
        waiting.wait(0.3)  # blocked, as in a collective: the training thread's CPU time stands still
        assert recorder._heartbeat._training_cpu_s() - cpu_before < 0.02
    finally:
        recorder.close()
    assert json.loads((tmp_path / "trace" / "rank0.progress").read_text())["phase"] == "validation"


def test_progress_lines_say_phase_step_rate_eta_and_loss(capsys):
    state = SideState(total=100)
    state.take_beats({0: beat(0, step=10, loss=2.0), 1: beat(0, step=9)}, 5.0)
    state.take_beats({0: beat(1, step=30, loss=1.5, phase="validation"), 1: beat(1, step=30)}, 15.0)
    line = state.line("raw")
    assert "[raw]" in line and "step 30/100" in line and "2.10 step/s" in line and "eta 33 s" in line
    assert "loss 1.5000" in line and "train/validation" in line
    plain = PlainProgress({"raw": 100})
    plain.start("raw")

    class Failed:
        ok, stall = False, None

        def describe(self):
            return "raw: exit code 1"

    plain.end("raw", Failed())
    assert "[raw] FAILED: raw: exit code 1" in capsys.readouterr().out


def test_the_terminal_display_tracks_each_side_and_marks_a_failure():
    from ddp_parity.harness.progress import LiveProgress

    live = LiveProgress({"raw": 100, "lightning": 100})
    try:
        live.start("raw")
        live.start("lightning")
        live.show_beats("raw", {0: beat(1, step=40, loss=1.25)}, 10.0)
        live.show_beats("lightning", {0: beat(1, step=20, phase="validation")}, 10.0)

        class Stalled:
            ok, stall = False, {"ranks": {0: 20}}

            def describe(self):
                return "lightning: stalled"

        live.end("lightning", Stalled())
        tasks = {task.description: task for task in live.bars.tasks}
        assert (tasks["raw"].completed, tasks["raw"].total) == (40, 100)
        assert tasks["raw"].fields["loss"] == "loss 1.2500" and tasks["lightning"].fields["phase"] == "[red]STALLED"
    finally:
        live.close()


def test_heartbeats_of_dead_ranks_are_not_judged():
    """After a crash, before torchrun's restarted ranks beat again, the dead ranks' last heartbeats
    stay on disk: the side is starting up again, not stalled."""
    import os
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    watch = Liveness(2.0)
    for second in range(10):
        beats = {0: beat(0, pid=gone.pid), 1: beat(0, pid=gone.pid)}
        assert watch.observe(beats, float(second)) is None
    mine = {0: beat(0, pid=os.getpid())}
    assert watch.observe(mine, 10.0) is None
    assert watch.observe(mine, 13.0) is not None  # a live rank that stands still is judged


# ---------------------------------------------------------------------------------------------
# ports


def test_rendezvous_ports_are_drawn_below_the_ephemeral_range_never_twice_and_never_in_use():
    """A port from the ephemeral range can be taken by any outgoing connection before torchrun binds it
    (the EADDRINUSE that failed a crash-and-resume launch): the picks stay below the range."""
    import socket

    from ddp_parity.harness.launch import LOWEST_PORT, ephemeral_low, free_port, port_is_free

    picks = [free_port() for _ in range(50)]
    assert all(LOWEST_PORT <= port < ephemeral_low() for port in picks), picks
    assert len(set(picks)) == len(picks)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", picks[0]))
        listener.listen()
        assert not port_is_free(picks[0])
    assert port_is_free(picks[1])
