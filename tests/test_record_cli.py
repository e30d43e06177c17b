"""`ddp-parity record --out RUN -- COMMAND` and `compare/run.py --cmd A --cmd B`: a user's own commands,
run as they are with the recording switched on (ddp_parity.hooks).

Bad input is refused with one line, exit 2, before anything is written or launched (in-process: each is
refused long before a launch could happen). The exit status of `record` is the command's, a signal to
`record` reaches the command, and --cmd turns a command that crashed or recorded nothing into a failed
run (exit 3), never into a verdict."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, assert_one_line_error, harness_in_process

from ddp_parity.hooks import RECORD_ENV, SIDE_ENV
from ddp_parity.trace import read_records

PY = sys.executable


def record(*args) -> tuple[int, str, str]:
    return harness_in_process("record", *args)


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


# ---------------------------------------------------------------------------------------------
# record: bad input


@pytest.fixture
def inputs(tmp_path):
    """A folder of the program's data and a script, as a command names them."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.bin").write_bytes(b"\0" * 8)
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    return data, script


def test_no_command_is_refused(tmp_path):
    for argv in (["--out", tmp_path / "run"], ["--out", tmp_path / "run", "--"]):
        code, _, stderr = record(*argv)
        assert_one_line_error(code, stderr, "no command", "--")
    assert not (tmp_path / "run").exists()


def test_a_command_not_found_is_refused_before_anything_is_written(tmp_path):
    for program, words in (
        ("no-such-program-xyz", ["'no-such-program-xyz'", "PATH"]),
        ("./missing.sh", ["'./missing.sh'", "no such file"]),
        (str(tmp_path), ["not an executable file"]),  # a folder
    ):
        code, _, stderr = record("--out", tmp_path / "run", "--", program, "--flag")
        assert_one_line_error(code, stderr, "COMMAND", *words)
    assert not (tmp_path / "run").exists()


def test_out_inside_the_checkout_is_refused(tmp_path):
    out = REPO / "record-here"
    code, _, stderr = record("--out", out, "--", PY, "-c", "pass")
    assert_one_line_error(code, stderr, "--out", "inside the source checkout")
    assert not out.exists()


def test_out_inside_or_holding_an_input_is_refused(tmp_path, inputs):
    data, script = inputs
    holder = tmp_path / "holder"
    holder.mkdir()
    (holder / "x.py").write_text("")
    before = tree(tmp_path)
    cases = [
        (data / "run", [PY, script, "--data", data], "lies inside"),
        (data / "run", [PY, script, f"--data={data}"], "lies inside"),  # --key=value names it too
        (data, [PY, script, "--data", data], "is"),
        (holder, [PY, holder / "x.py"], "holds"),  # --overwrite would move the script aside
    ]
    for out, command, word in cases:
        code, _, stderr = record("--out", out, "--overwrite", "--", *command)
        assert_one_line_error(code, stderr, "--out", word, "the command names")
    assert tree(tmp_path) == before


def test_out_holding_anything_is_refused_without_overwrite(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "meta.json").write_text("{}")  # a file of an earlier recording, not only folders and reports
    code, _, stderr = record("--out", out, "--", PY, "-c", "pass")
    assert_one_line_error(code, stderr, "--out", "already holds results", "--overwrite")
    assert tree(out) == ["meta.json"]


def test_out_that_is_a_file_is_refused(tmp_path):
    out = tmp_path / "file"
    out.write_text("mine")
    code, _, stderr = record("--out", out, "--", PY, "-c", "pass")
    assert_one_line_error(code, stderr, "--out", "not a directory")
    assert out.read_text() == "mine"


# ---------------------------------------------------------------------------------------------
# record: the command's exit status, environment and signals


def test_the_exit_status_is_the_commands(tmp_path):
    code, _, stderr = record("--out", tmp_path / "r7", "--", PY, "-c", "import sys; sys.exit(7)")
    assert code == 7, stderr
    code, _, _ = record("--out", tmp_path / "r0", "--", PY, "-c", "pass")
    assert code == 0
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    code, _, _ = record("--out", tmp_path / "r9", "--", PY, "-c", kill)
    assert code == 128 + signal.SIGKILL


def test_the_command_runs_with_the_recording_switched_on_and_nothing_else_changed(tmp_path):
    """The run directory and side reach the command (through the environment, as they reach torchrun's
    children); the working directory and the thread count are the user's."""
    out, seen = tmp_path / "run", tmp_path / "seen.json"
    show = (
        f"import json, os, sys; json.dump({{'out': os.environ.get({RECORD_ENV!r}), "
        f"'side': os.environ.get({SIDE_ENV!r}), "
        "'cwd': os.getcwd(), 'omp': os.environ.get('OMP_NUM_THREADS'), "
        f"'bootstrap': 'sitecustomize' in sys.modules}}, open({str(seen)!r}, 'w'))"
    )
    code, _, stderr = record("--out", out, "--side", "mine", "--", PY, "-c", show)
    assert code == 0, stderr
    env = json.loads(seen.read_text())
    assert env == {
        "out": str(out),
        "side": "mine",
        "cwd": os.getcwd(),
        "omp": os.environ.get("OMP_NUM_THREADS"),
        "bootstrap": True,
    }
    assert "holds no trace" in stderr or "holds the trace" in stderr


def test_overwrite_replaces_what_the_run_directory_held(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "meta.json").write_text("{}")
    (out / "trace").mkdir()
    code, _, stderr = record("--out", out, "--overwrite", "--", PY, "-c", "pass")
    assert code == 0, stderr
    assert "meta.json" not in tree(out) and "trace" not in tree(out)  # no old file mixed with the new run


def test_a_signal_to_record_reaches_the_command_and_its_status_is_returned(tmp_path):
    """SIGTERM to `record` goes on to the command's process group: the command's own handler runs and
    its exit status (42) is record's, not record's own death by the signal."""
    program = (
        "import signal, sys\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\n"
        "print('ready', flush=True)\n"
        "while True: signal.pause()\n"
    )
    proc = subprocess.Popen(
        [PY, str(REPO / "compare" / "run.py"), "record", "--out", str(tmp_path / "run"), "--", PY, "-c", program],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"  # the command runs, its handler set
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 42, proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------------------------------------
# --cmd: bad input

CMD_A, CMD_B = f"{PY} -c pass", f"{PY} -c 'import sys'"

CMD_CASES = {
    "one-cmd": (["--cmd", CMD_A], ["--cmd", "exactly two", "got 1"]),
    "three-cmds": (["--cmd", CMD_A, "--cmd", CMD_A, "--cmd", CMD_B], ["exactly two", "got 3"]),
    "with-traces": (["--cmd", CMD_A, "--cmd", CMD_B, "--traces", "x", "y"], ["--cmd with --traces"]),
    "with-sides": (["--cmd", CMD_A, "--cmd", CMD_B, "--sides", "raw,lightning"], ["--cmd with --sides"]),
    "with-mistake": (["--cmd", CMD_A, "--cmd", CMD_B, "--mistake", "no-set-epoch"], ["--cmd with --mistake"]),
    "with-set": (["--cmd", CMD_A, "--cmd", CMD_B, "--set", "data.batch_size=4"], ["--cmd with --set"]),
    "with-config": (["--cmd", CMD_A, "--cmd", CMD_B, "--config", "c.yaml"], ["--cmd with --config"]),
    "with-fault": (["--cmd", CMD_A, "--cmd", CMD_B, "--fault", "1:2"], ["--cmd with --fault"]),
    "noise": (["--cmd", CMD_A, "--cmd", CMD_B, "--tolerance", "noise"], ["--tolerance noise", "record"]),
    "not-found": (["--cmd", "no-such-program-xyz train.py", "--cmd", CMD_B], ["'no-such-program-xyz'", "PATH"]),
    "not-a-file": (["--cmd", "./missing.sh --flag", "--cmd", CMD_B], ["--cmd './missing.sh --flag'", "no such file"]),
    "unsplittable": (["--cmd", "python 'train.py", "--cmd", CMD_B], ["--cmd", "cannot be split"]),
    "empty": (["--cmd", "", "--cmd", CMD_B], ["--cmd", "no command"]),
    "names-same": (["--cmd", CMD_A, "--cmd", CMD_B, "--names", "x,x"], ["--names x,x", "two different"]),
    "names-path": (["--cmd", CMD_A, "--cmd", CMD_B, "--names", "../up,b"], ["--names"]),
}


@pytest.mark.parametrize("name", list(CMD_CASES))
def test_a_bad_cmd_is_one_line_exit_2_and_nothing_written(name, tmp_path):
    args, words = CMD_CASES[name]
    out = tmp_path / "out"
    code, _, stderr = harness_in_process("--out", out, *args)
    assert_one_line_error(code, stderr, *words)
    assert not out.exists()


def test_cmd_out_inside_an_input_or_the_checkout_is_refused(tmp_path, inputs):
    data, script = inputs
    for out, word in ((data / "cmp", "lies inside"), (REPO / "cmp-here", "inside the source checkout")):
        code, _, stderr = harness_in_process("--out", out, "--cmd", f"{PY} {script} {data}", "--cmd", CMD_B)
        assert_one_line_error(code, stderr, "--out", word)
        assert not out.exists()


# ---------------------------------------------------------------------------------------------
# --cmd: what is launched, and a run that gives nothing to compare


def test_cmd_commands_that_record_nothing_fail_and_never_pass(tmp_path):
    """Both exit 0 without a trace: a failed run (exit 3) naming the side, its report written."""
    out = tmp_path / "out"
    code, stdout, stderr = harness_in_process("--out", out, "--quiet", "--cmd", CMD_A, "--cmd", CMD_B)
    assert code == 3, stdout + stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "failed" and "cannot be read" in report["failure"]["summary"]
    assert (out / "a.log").exists() and (out / "b.log").exists()


def test_cmd_a_command_that_fails_is_a_failed_run_with_its_log(tmp_path):
    out = tmp_path / "out"
    failing = f"{PY} -c 'import sys; print(\"boom\"); sys.exit(5)'"
    code, stdout, stderr = harness_in_process(
        "--out", out, "--quiet", "--names", "mine,theirs", "--cmd", CMD_A, "--cmd", failing
    )
    assert code == 3, stdout + stderr
    report = json.loads((out / "report.json").read_text())
    assert report["failure"]["summary"] == "theirs: exit code 5"
    assert "boom" in (out / "theirs.log").read_text()


# ---------------------------------------------------------------------------------------------
# end to end, with the hooks: a loop that knows nothing of any recorder, launched as it is

RAW_LOOP = REPO / "tests" / "hooks_programs" / "raw_loop.py"


def torchrun_loop(save: Path, *extra: str) -> list[str]:
    return [PY, "-m", "torch.distributed.run", "--nproc_per_node=2", str(RAW_LOOP), "--save", str(save), *extra]


@pytest.fixture(scope="module")
def cmd_twice(tmp_path_factory):
    """--cmd with the same torchrun loop twice (each its own port, both recorded): (exit code, output, OUT)."""
    work = tmp_path_factory.mktemp("cmd")
    commands = [" ".join(torchrun_loop(work / f"w{i}.pt")) for i in (1, 2)]
    code, stdout, stderr = harness_in_process(
        "--out", work / "out", "--quiet", "--cmd", commands[0], "--cmd", commands[1]
    )
    return code, stdout + stderr, work / "out"


@pytest.fixture(scope="module")
def recorded_slip(recorded_scheduler_slip):
    """`ddp-parity record` of the loop with its scheduler stepped before the optimizer, a process of its own made
    once per session (test_hooks reads the slip it recorded): (exit code, RUN)."""
    process, run = recorded_scheduler_slip
    assert "holds the trace of ranks 0..1" in process.stderr, process.stderr
    return process.returncode, run


@pytest.mark.slow
def test_cmd_the_same_loop_twice_is_equivalent(cmd_twice):
    code, output, out = cmd_twice
    assert code == 0, output
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "equivalent" and report["labels"] == {"a": "a", "b": "b"}
    assert report["per_step"]["loss"]["compared"] == 16  # 8 steps x 2 ranks, all recorded
    assert (out / "report.html").exists() and (out / "loss_curves.png").exists()
    for side in ("a", "b"):
        assert sorted(p.name for p in (out / side / "trace").glob("rank?.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]


@pytest.mark.slow
def test_record_of_a_slipped_loop_differs_from_the_cmd_run_by_its_scheduler(cmd_twice, recorded_slip, tmp_path):
    """The exit status of `record` is the loop's (0), and its trace compares with --cmd's: DIFFERENT (exit 1),
    the scheduler named."""
    code, run = recorded_slip
    assert code == 0
    code, stdout, stderr = harness_in_process("--traces", cmd_twice[2] / "a", run, "--out", tmp_path / "cmp")
    assert code == 1, stdout + stderr
    report = json.loads((tmp_path / "cmp" / "report.json").read_text())
    assert report["verdict"] == "different" and report["first_divergence"]["quantity"] == "lr"
    assert "scheduler.step() after optimizer.step()" in report["diagnosis"]["advice"]


ONE_PROCESS_LOOP = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(12, 4)
batches = {loader}
for batch in batches:
    optimizer.zero_grad()
    model(batch).square().mean().backward()
    optimizer.step()
"""


@pytest.mark.parametrize("loader", ["torch.utils.data.DataLoader(data, batch_size=4)", "data.split(4)"])
def test_one_process_recorded_by_record_is_a_trace_the_comparison_reads(tmp_path, loader):
    """A plain `python` loop, with a DataLoader and with batches of its own (no sampler to record): every
    step is in the trace with its parameters' and its batch's digest, meta.json passes
    the comparison's reading, and nothing is noted unrecorded. (Before: the hooks never started, looking
    for the explicit recorders where trace.py no longer keeps them; then every step was refused for a
    batch_digest= the recorder writes itself; then a run without a loader wrote `sampler: null`.)"""
    from ddp_parity.trace_files import load_meta

    out = tmp_path / "run"
    code, _, stderr = record("--out", out, "--", PY, "-c", ONE_PROCESS_LOOP.format(loader=loader))
    assert code == 0 and "holds the trace of rank 0" in stderr, stderr
    meta = load_meta(out)
    assert not meta.get("unrecorded"), meta["unrecorded"]
    records = read_records(out, 0)
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all("param_digest" in r for r in records)
    assert all("batch_digest" in r for r in records)  # a loader's batch, or the model's training inputs


PASSES_LOOP = """
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.randn(12, 4), batch_size=4, shuffle=True)
for epoch in range(2):
    peek = next(iter(loader))  # an iterator no step trains from (the DDP tutorial's batch-size print)
    for batch in loader:
        optimizer.zero_grad()
        model(batch).square().mean().backward()
        optimizer.step()
"""


def test_a_loop_without_set_epoch_records_the_loaders_pass_as_the_epoch(tmp_path):
    """The hooks know an epoch from set_epoch; a loop that never calls it (the slip that replays the first
    epoch's order) gets the pass over its training loader instead, a peeked batch starting none. (Before:
    epoch 0 at every step, and the replay was named another sampler instead of the missing set_epoch.)"""
    code, _, stderr = record("--out", tmp_path / "run", "--", PY, "-c", PASSES_LOOP)
    assert code == 0, stderr
    assert [r["epoch"] for r in read_records(tmp_path / "run", 0)] == [0, 0, 0, 1, 1, 1]


def test_a_loop_that_draws_its_own_batches_records_them_as_a_loader_would(tmp_path):
    """nanoGPT draws its windows with torch.randint, no DataLoader: the model's training forwards' inputs
    are the step's batch (an evaluation under no_grad is not), digested as a DataLoader's batches of the
    same tensors are. (Before: no batch_digest, and the data of such a loop was unrecorded.)"""
    own = ONE_PROCESS_LOOP.format(loader="data.split(4)").replace(
        "for batch in batches:",
        "for batch in batches:\n    with torch.no_grad():\n        model.eval()(data)\n    model.train()",
    )
    runs = {}
    for name, program in (
        ("own", own),
        ("loader", ONE_PROCESS_LOOP.format(loader="torch.utils.data.DataLoader(data, batch_size=4)")),
    ):
        code, _, stderr = record("--out", tmp_path / name, "--", PY, "-c", program)
        assert code == 0, stderr
        runs[name] = [r.get("batch_digest") for r in read_records(tmp_path / name, 0)]
    assert len(runs["own"]) == 3 and None not in runs["own"]
    assert runs["own"] == runs["loader"]
