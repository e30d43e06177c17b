"""The comparison's side of issue 47: damaged input is one line and exit 2, never a traceback or a
verdict; a verdict never rests on zero items of a kind unsaid; the tool's own failure (an output it
cannot write) is exit 4 with no verdict printed and no temporary file left; a rank killed by a signal
is the one blamed. Fast tier but for the torchrun test (slow): hand-made runs, nothing trained."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, assert_one_line_error, harness_in_process, main_in_process
from safetensors.torch import save_file
from test_comparator import LOSSES, PARAMS, make_run

from ddp_parity.harness.exits import EXIT_TOOL_FAILED


def run_pair(tmp_path: Path, params_b=PARAMS) -> tuple[Path, Path]:
    return make_run(tmp_path / "a", LOSSES, PARAMS), make_run(tmp_path / "b", LOSSES, params_b)


def traces(a, b, tmp_path: Path, *more) -> tuple[int, str, str]:
    return harness_in_process("--traces", a, b, "--out", tmp_path / "report", *more)


def edit_meta(run: Path, **changes) -> None:
    meta = json.loads((run / "meta.json").read_text())
    (run / "meta.json").write_text(json.dumps({**meta, **changes}))


def no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text, text


# ---------------------------------------------------------------------------------------------
# B: what crashed with a traceback and exit 1 (the code of DIFFERENT)


def test_complex_final_tensors_are_compared_by_their_parts(tmp_path):
    """Before: a complex tensor in final.safetensors ended the comparison with a traceback, exit 1."""
    z = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    a, b = run_pair(tmp_path, params_b={**PARAMS, "z": z})
    save_file({**PARAMS, "z": z}, str(a / "final.safetensors"))
    code, out, err = traces(a, b, tmp_path)
    assert code == 0 and "verdict: EQUIVALENT" in out, out + err
    save_file({**PARAMS, "z": z * 1j}, str(b / "final.safetensors"))
    code, out, err = harness_in_process("--traces", a, b, "--out", tmp_path / "r2")
    assert code == 1 and "verdict: DIFFERENT" in out, out + err
    no_traceback(out, err)


def damage(kind: str, a: Path, tmp_path: Path) -> Path:
    """Damage run `a` one way; returns the folder to name as RUN_A."""
    if kind == "symlink loop":
        loop = tmp_path / "loop"
        loop.symlink_to(loop)
        return loop
    if kind == "run folder a file":
        (tmp_path / "file").write_text("not a run")
        return tmp_path / "file"
    if kind == "rank file a folder":
        (a / "trace" / "rank1.jsonl").unlink()
        (a / "trace" / "rank1.jsonl").mkdir()
    if kind == "random bytes as final.safetensors":
        (a / "final.safetensors").write_bytes(os.urandom(4096))
    if kind == "a repeated step line":
        lines = (a / "trace" / "rank0.jsonl").read_text().splitlines(keepends=True)
        (a / "trace" / "rank0.jsonl").write_text("".join(lines[:2] + lines[1:]))
    if kind == "rank01 beside rank1":
        (a / "trace" / "rank01.jsonl").write_bytes((a / "trace" / "rank1.jsonl").read_bytes())
    if kind == "world_size 0":
        edit_meta(a, world_size=0)
    if kind == "world_size -1":
        edit_meta(a, world_size=-1)
    if kind == "a short ranks list":
        edit_meta(a, ranks=[{"rank": 0}])
    if kind == "meta.tied a list":
        edit_meta(a, tied=["fc.weight"])
    if kind == "meta.tied to a number":
        edit_meta(a, tied={"head.weight": 3})
    return a


DAMAGE = {  # what the one line names
    "symlink loop": "symlink loop",
    "run folder a file": "not a run directory",
    "rank file a folder": "rank1.jsonl",
    "random bytes as final.safetensors": "final.safetensors",
    "a repeated step line": "rank0.jsonl",
    "rank01 beside rank1": "rank01.jsonl",
    "world_size 0": "world_size",
    "world_size -1": "world_size",
    "a short ranks list": "ranks",
    "meta.tied a list": "tied",
    "meta.tied to a number": "tied.head.weight",
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damaged_input_is_one_line_and_exit_2_never_a_verdict(kind, tmp_path):
    """Before (B, J): tracebacks with exit 1; a repeated step line read as "count optimizer steps
    differently", rank01 beside rank1 as "step 1 missing", world_size 0 or -1 EQUIVALENT, a short
    ranks list accepted, a meta.tied that is no object of names read as no ties."""
    a, b = run_pair(tmp_path)
    run_a = damage(kind, a, tmp_path)
    code, out, err = traces(run_a, b, tmp_path)
    assert_one_line_error(code, err, DAMAGE[kind])
    assert "verdict" not in out
    no_traceback(out, err)
    assert not (tmp_path / "report").exists()


def test_a_fifo_as_a_rank_file_is_named_not_waited_on(tmp_path):
    """Before: a FIFO as rank1.jsonl hung the comparison (open() waits for a writer)."""
    a, b = run_pair(tmp_path)
    (a / "trace" / "rank1.jsonl").unlink()
    os.mkfifo(a / "trace" / "rank1.jsonl")
    cmd = [sys.executable, str(REPO / "compare" / "run.py"), "--traces", str(a), str(b), "--out", str(tmp_path / "o")]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert_one_line_error(result.returncode, result.stderr, "rank1.jsonl", "FIFO")


# ---------------------------------------------------------------------------------------------
# F: a verdict never rests on zero items of a kind, unsaid


def test_two_runs_that_recorded_no_step_are_refused_not_equivalent(tmp_path):
    """Before: two runs with 0 steps were EQUIVALENT."""
    a, b = make_run(tmp_path / "a", {0: [], 1: []}, PARAMS), make_run(tmp_path / "b", {0: [], 1: []}, PARAMS)
    code, out, err = traces(a, b, tmp_path)
    assert_one_line_error(code, err, "neither run recorded an optimizer step")
    assert "EQUIVALENT" not in out


def warnings_of(tmp_path: Path) -> dict:
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    return {w.get("items"): w["message"] for w in report["warnings"] if w["kind"] == "nothing_compared"}


def test_final_tensors_that_pair_by_no_name_are_said_unchecked(tmp_path):
    a, b = run_pair(tmp_path, params_b={"y": torch.ones(2)})
    save_file({"x": torch.ones(2)}, str(a / "final.safetensors"))
    code, out, err = traces(a, b, tmp_path)
    assert code == 1 and "no final tensor was compared" in out, out + err
    assert "final parameters are unchecked" in warnings_of(tmp_path)["final_params"]


def test_validation_recorded_but_paired_by_no_figure_is_said_unchecked(tmp_path):
    a, b = run_pair(tmp_path)
    (a / "validation.jsonl").write_text(json.dumps({"epoch": 0, "step": 3, "val_loss": 1.0}) + "\n")
    (b / "validation.jsonl").write_text(json.dumps({"epoch": 0, "step": 2, "val/loss": 1.0}) + "\n")
    code, out, err = traces(a, b, tmp_path)
    assert code == 1 and "no validation figure was compared" in out, out + err
    assert "validation is unchecked" in warnings_of(tmp_path)["validation"]
    # neither run validated: the table says so, no warning (validation is optional to record)
    (a / "validation.jsonl").unlink(), (b / "validation.jsonl").unlink()
    assert harness_in_process("--traces", a, b, "--out", tmp_path / "r2")[0] == 0


# ---------------------------------------------------------------------------------------------
# C: outputs on a full disk, under a name that is not UTF-8


def compare_cli(a, b, out, limit: int | None = None) -> subprocess.CompletedProcess:
    """compare/run.py --traces in a process of its own; `limit`: the largest file it may write (a
    full disk as the writes meet it: EFBIG, SIGXFSZ ignored as a shell's ulimit -f leaves it)."""

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    cmd = [sys.executable, "-B", str(REPO / "compare" / "run.py"), "--traces", a, b, "--out", out]
    return subprocess.run(
        [os.fsencode(str(c)) if isinstance(c, str) else c for c in cmd],
        capture_output=True,
        timeout=300,
        preexec_fn=limited if limit else None,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )


def test_a_full_disk_is_exit_4_with_no_verdict_said_and_no_temporary_file_left(tmp_path):
    """Before: the verdict was printed, then a traceback and exit 1; .tmp files were left behind."""
    a, b = run_pair(tmp_path)
    out = tmp_path / "report"
    result = compare_cli(str(a), str(b), str(out), limit=600)
    stdout, stderr = result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
    assert result.returncode == EXIT_TOOL_FAILED, stdout + stderr
    assert "verdict" not in stdout.lower() and "no verdict" in stderr
    assert len(stderr.strip().splitlines()) == 1 and "File too large" in stderr, stderr
    no_traceback(stdout, stderr)
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


def test_paths_that_are_not_utf8_are_compared_and_written(tmp_path):
    """Before: a run or --out named in another encoding gave a traceback (UnicodeEncodeError) after the
    verdict was printed."""
    root = os.fsencode(str(tmp_path)) + b"/caf\xe9"
    os.mkdir(root)
    a, b = run_pair(Path(os.fsdecode(root)))
    out = os.fsencode(str(a.parent)) + b"/r\xe9port"
    result = compare_cli(os.fsencode(str(a)), os.fsencode(str(b)), out)
    stdout, stderr = result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
    assert result.returncode == 0 and "verdict: EQUIVALENT" in stdout, stdout + stderr
    no_traceback(stdout, stderr)
    assert sorted(os.listdir(out)) == [b"loss_curves.png", b"report.html", b"report.json"]


# ---------------------------------------------------------------------------------------------
# N and the minor ones: causes --write, causes --bogus, bugs --keep


def test_causes_write_with_its_markers_reversed_is_one_line_and_the_file_untouched(tmp_path):
    """Before: an IndexError traceback."""
    from ddp_parity.compare.causes import KINDS_TABLE_END, KINDS_TABLE_START
    from ddp_parity.compare.causes.__main__ import main

    page = tmp_path / "diagnosis.md"
    text = f"# kinds\n\n{KINDS_TABLE_END}\nold\n{KINDS_TABLE_START}\n"
    page.write_text(text)
    code, out, err = main_in_process(main, "--write", page)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "reverse order" in err, err
    assert page.read_text() == text
    code, _, err = main_in_process(main, "--bogus")  # before: ignored, the table printed, exit 0
    assert code == 2 and "--bogus" in err.strip().splitlines()[-1]


def test_bugs_keep_refuses_a_folder_that_holds_a_case_folder(tmp_path):
    """Before: `python -m benchmarks.bugs --keep DIR` wrote the cases' runs into DIR's old case folders."""
    from benchmarks.bugs.__main__ import main

    (tmp_path / "case00").mkdir()
    code, _, err = main_in_process(main, "--keep", tmp_path, "--only", "clean twins (mlp)")
    assert code == 2 and "case00 already exist" in err.strip().splitlines()[-1], err
    assert list((tmp_path / "case00").iterdir()) == []


# ---------------------------------------------------------------------------------------------
# L: a rank killed outright is the root cause, not the peer that lost its connection to it

KILLED = """
import os, signal, sys
from pathlib import Path
import torch, torch.distributed as dist
from ddp_parity.runs import write_error_file
dist.init_process_group("gloo")
rank = dist.get_rank()
if rank == 0:  # stays until it sees its peer gone, however soon torchrun stops it: its error file is sure
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
try:
    dist.barrier()
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    for _ in range(1000):
        dist.all_reduce(torch.ones(1))
except Exception as err:
    write_error_file(Path(sys.argv[1]), err)
    raise
"""


@pytest.mark.slow
def test_after_a_kill_9_of_rank_1_the_summary_names_rank_1s_sigkill(tmp_path):
    """Before: rank 0's "Connection reset by peer" was named the failure; torchrun's own root cause
    is rank 1, exit code -9 (SIGKILL), which wrote no error file."""
    from ddp_parity.harness.failure import failure_report
    from ddp_parity.harness.launch import Outcome, free_port, read_error_files

    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1"]
    cmd += ["--master_port", str(free_port()), str(script), str(tmp_path)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode != 0
    errors = read_error_files(tmp_path)
    assert [e["rank"] for e in errors] == [0], errors  # only the survivor wrote one: its peer is gone
    outcome = Outcome("raw", result.returncode, 1.0, errors=errors, log_tail=result.stdout + result.stderr)
    failure = failure_report(outcome)
    assert failure["rank"] == 1 and "SIGKILL" in failure["error_lines"][0], failure
    assert "rank(s) 0" in failure["error_lines"][1] and "consequence" in failure["error_lines"][1]


TORCHRUN_PEER_FIRST = """Failures:
[1]:
  time      : 2026-12-04_15:00:00
  host      : vm
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 12)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 12
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_15:00:00
  host      : vm
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 11)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
"""


def test_a_killed_rank_seen_in_the_same_poll_as_its_peer_is_still_the_one_blamed():
    """torchrun's summary (its format, as it prints it) when the killed rank and the peer that lost it
    exit within one poll: the peer may be its "first observed failure". SIGKILL, which torchrun never
    sends first, still names the killed rank; a SIGTERM (torchrun stopping a survivor) does not."""
    from ddp_parity.harness.failure import failure_report
    from ddp_parity.harness.launch import Outcome

    peer = {"rank": 0, "type": "RuntimeError", "message": "Connection reset by peer", "time": 1.0}
    failure = failure_report(Outcome("raw", 1, 1.0, errors=[peer], log_tail=TORCHRUN_PEER_FIRST))
    assert failure["rank"] == 1 and "SIGKILL" in failure["error_lines"][0], failure
    stopped = TORCHRUN_PEER_FIRST.replace("-9 (pid", "-15 (pid").replace("9 (SIGKILL)", "15 (SIGTERM)")
    assert failure_report(Outcome("raw", 1, 1.0, errors=[peer], log_tail=stopped))["rank"] == 0
