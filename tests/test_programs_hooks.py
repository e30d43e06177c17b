"""The corpus recorded with no line changed (issue 45, benchmarks/programs/hooks.py): each program with its
`# parity` lines taken out, against its port without TraceCallback, recorded by `ddp-parity record` and
launched by `compare/run.py --cmd`, must be EQUIVALENT; and recording changes nothing the program does (its
output, exit status and the weights it saves, bitwise).

The stripping is checked on every file of the corpus (fast); the runs are slow: one session fixture launches
each pair once per launcher (about 12 CPU-seconds a pair) and every test reads what it left."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

from benchmarks.programs.corpus import PROGRAMS
from benchmarks.programs.hooks import (
    hooked_commands,
    prepared,
    run_pair_cmd,
    run_pair_recorded,
    strip_parity,
)
from benchmarks.programs.run import HERE, run_side, side_env
from ddp_parity.trace import read_records
from ddp_parity.trace_files import load_meta

CORPUS_FILES = sorted(p for p in HERE.glob("*/*.py") if "parity" in p.read_text())


# ---------------------------------------------------------------------------------------------
# taking the instrumentation out


def test_stripping_takes_statements_whole_arguments_alone_and_puts_back_what_was_written():
    source = (
        "import torch  # parity, as written: import torch, os\n"
        "from ddp_parity import TraceRecorder  # parity\n"
        "def f(a,\n"
        "      recorder,  # parity\n"
        "      b):\n"
        "    recorder.record(\n"
        "        1, a,\n"
        "    )  # parity: one call over three lines\n"
        "    return a + b\n"
        "for i in range(2):\n"
        "    x = i  # parity\n"
        "print(f(1, 2))\n"
    )
    stripped = strip_parity(source)
    assert stripped == (
        "import torch, os\ndef f(a,\n      b):\n    return a + b\nfor i in range(2):\n    pass\nprint(f(1, 2))\n"
    )


def test_a_comment_that_only_mentions_parity_is_kept():
    source = "# the lines marked `# parity` are instrumentation\nx = 1  # no parity here\n"
    assert strip_parity(source) == source


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_corpus_file_stripped_parses_and_never_mentions_the_tool(path):
    stripped = strip_parity(path.read_text())
    ast.parse(stripped)
    code = [line.split("#")[0] for line in stripped.splitlines()]
    assert not any(word in line for line in code for word in ("ddp_parity", "TraceRecorder", "TraceCallback"))
    assert not any("recorder" in line for line in code), path


# ---------------------------------------------------------------------------------------------
# the pairs, recorded by the hooks


@pytest.fixture(scope="session")
def hooked_pairs(tmp_path_factory):
    """Each program's pair under one launcher, run once per session when a test first asks for it:
    (its result, its folder)."""
    root = tmp_path_factory.mktemp("hooked-programs")
    done: dict[tuple[str, str], tuple] = {}

    def pair(name: str, launcher: str):
        if (name, launcher) not in done:
            work = root / launcher / name
            if launcher == "record":  # compare/run.py --traces called in this process: it launches nothing
                done[name, launcher] = run_pair_recorded(PROGRAMS[name], work, in_process=True), work
            else:
                done[name, launcher] = run_pair_cmd(PROGRAMS[name], work), work
        return done[name, launcher]

    return pair


# every program in the suite (Program.suite) under `ddp-parity record`; the two cheapest of the five instrumented
# ones (issue 45's corpus) through `compare/run.py --cmd` too: the launcher is the same for every program, and each
# pair costs about a minute of this suite's budget (`python -m benchmarks.programs --hooks cmd` runs all five)
CMD_PROGRAMS = ("ddp_tutorial", "nanogpt")
PAIRS = [(name, "record") for name, p in PROGRAMS.items() if p.suite]
PAIRS += [(name, "cmd") for name in CMD_PROGRAMS]


@pytest.mark.slow
@pytest.mark.parametrize("name, launcher", PAIRS, ids=[f"{n}-{launcher}" for n, launcher in PAIRS])
def test_a_program_and_its_port_unchanged_are_equivalent_recorded_by_the_hooks(hooked_pairs, name, launcher):
    result, _ = hooked_pairs(name, launcher)
    assert result.failed is None, result.failed
    d = result.diagnosis
    assert result.rc == 0 and "EQUIVALENT" in result.verdict, (
        f"{result.verdict}: {d.get('explanation')} fix: {d.get('advice')}"
    )


@pytest.mark.slow
def test_the_hooks_record_every_step_of_both_sides(hooked_pairs):
    """An EQUIVALENT that rests on something: every rank of both sides recorded each optimizer step with
    its batch and its parameters' digest, nothing left unrecorded, and finished (the final weights)."""
    _, work = hooked_pairs("ddp_tutorial", "record")
    for side in ("raw", "lightning"):
        run = work / side / "trace"
        meta = load_meta(run)
        assert meta["world_size"] == 2 and not meta.get("unrecorded"), meta.get("unrecorded")
        for rank in (0, 1):
            records = read_records(run, rank)
            assert [r["step"] for r in records] == list(range(1, 65)), side  # 2048 samples / 32 / 2 ranks, 2 epochs
            assert all("param_digest" in r and "batch_digest" in r for r in records)
        assert (run / "final.safetensors").exists()


# ---------------------------------------------------------------------------------------------
# recording changes nothing the program does


# print() writes its text and its newline in two writes, so two ranks printing at once join their lines in the
# log they share ("[GPU1] ... Steps: 32[GPU0] ... Steps: 32", then an empty line): each message is split out where
# it starts, the program's two kinds of message being the only ones that start so.
MESSAGE_START = re.compile(r"(?=\[GPU\d+\] |Epoch \d+ \| Training)")


def program_lines(log: Path) -> list[str]:
    """The program's own prints in a side's log, in an order that does not depend on which rank printed
    first (torchrun's and the recorder's own lines left out)."""
    ours = ("compare/run.py record:", "ddp-parity record:")
    return sorted(
        message
        for line in log.read_text().splitlines()
        if not line.startswith(ours)
        for message in MESSAGE_START.split(line)
        if message.startswith(("[GPU", "Epoch "))
    )


def test_the_programs_prints_are_read_whole_where_two_ranks_joined_them(tmp_path):
    """A CI run's log held "[GPU1] Epoch 0 | Batchsize: 32 | Steps: 32[GPU0] Epoch 0 | Batchsize: 32 | Steps: 32"
    and an empty line: both ranks' messages, each whole."""
    log = tmp_path / "raw.log"
    joined = "[GPU1] Epoch 0 | Batchsize: 32 | Steps: 32[GPU0] Epoch 0 | Batchsize: 32 | Steps: 32"
    log.write_text(
        f"{joined}\n\nEpoch 0 | Training snapshot saved at snapshot.pt\n[GPU1] Epoch 1 | Batchsize: 32 | Steps: 32\n"
    )
    assert program_lines(log) == [
        "Epoch 0 | Training snapshot saved at snapshot.pt",
        "[GPU0] Epoch 0 | Batchsize: 32 | Steps: 32",
        "[GPU1] Epoch 0 | Batchsize: 32 | Steps: 32",
        "[GPU1] Epoch 1 | Batchsize: 32 | Steps: 32",
    ]


# The program as written calls torch's destroy_process_group while a reference cycle still holds its DDP
# wrapper; gloo's threads are then joined at interpreter exit and a rank that had finished its work aborts
# ("terminate called without an active exception", about one run in four of two ranks on two cores). The
# recorded run never does (the hooks collect before the group goes: ddp_parity.destroy_process_group), so
# only the plain run is launched again, and only for that abort, after every line and the snapshot were out.
TEARDOWN_TRIES = 4
TEARDOWN_ABORT = "terminate called without an active exception"


def aborted_at_gloo_teardown(log: Path) -> bool:
    return TEARDOWN_ABORT in log.read_text(errors="replace")


@pytest.mark.slow
def test_recording_changes_neither_output_nor_exit_status_nor_the_saved_weights(hooked_pairs, tmp_path):
    """ddp_tutorial's loop run plain and under `ddp-parity record`: the same exit status (0), the same prints,
    and the snapshot it saves each epoch (rank 0's model state) bitwise the same tensors."""
    result, recorded = hooked_pairs("ddp_tutorial", "record")
    assert result.failed is None, result.failed
    program = PROGRAMS["ddp_tutorial"]
    for attempt in range(TEARDOWN_TRIES):
        # a new folder each time: the program resumes from a snapshot an aborted try left behind
        plain = tmp_path / f"plain-{attempt}"
        source = prepared(program, plain)
        rc = run_side(hooked_commands(program, source, plain, prefix="")["raw"], side_env(), plain, plain / "raw.log")
        if not (rc != 0 and aborted_at_gloo_teardown(plain / "raw.log")):
            break
    assert rc == 0, (plain / "raw.log").read_text()[-2000:]
    lines = program_lines(plain / "raw.log")
    assert lines and lines == program_lines(recorded / "raw.log")
    saved = torch.load(plain / "snapshot.pt")
    again = torch.load(recorded / "snapshot.pt")
    assert saved["EPOCHS_RUN"] == again["EPOCHS_RUN"] == 1
    assert saved["MODEL_STATE"].keys() == again["MODEL_STATE"].keys()
    for key, tensor in saved["MODEL_STATE"].items():
        other = again["MODEL_STATE"][key]
        assert tensor.dtype == other.dtype and torch.equal(tensor.view(torch.uint8), other.view(torch.uint8)), key
