"""The corpus recorded with no line changed (issue 45): each program with its `# parity` lines taken out, run
under `ddp-parity record` or through `compare/run.py --cmd`, as a user with an unported program would.

How the lines are marked, in every program of the corpus:
- `# parity` (with or without words after a colon): the statement that ends on this line is instrumentation and
  goes, every line of it (a line in an argument list, `callbacks=[TraceCallback(...)],`, goes alone);
- `# parity, as written: CODE`: the line was changed for the instrumentation; CODE is the line as its authors
  wrote it (a signature without the recorder, torch's own `destroy_process_group`).

`# teardown, not recording`: a line the programs need on gloo, recorded or not, and so kept: the DDP wrapper
dropped before `destroy_process_group` (nanoGPT as written keeps it alive and aborts at exit about one run
in twenty, plain or recorded alike: 1 of 20 plain, 0 of 20 recorded, two pairs at once on 2 cores).

A block left empty gets a `pass`. The program's own arguments that name its trace (`--run_dir={out}/trace`)
are left out of its command: the hooks record into the run directory the launcher gives.
"""

from __future__ import annotations

import ast
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
import tokenize
from pathlib import Path

from benchmarks.programs.run import (
    CHECKOUT,
    HERE,
    NPROC,
    TIMEOUT_S,
    PairResult,
    Program,
    compare,
    compare_cli_here,
    run_side,
    side_env,
)
from ddp_parity.harness.launch import free_port, torchrun_args
from ddp_parity.trace_files import META_FILE

MARK = re.compile(r"#\s*parity\b(?P<rest>.*)$")
AS_WRITTEN = re.compile(r"^\s*,\s*as written:\s?(?P<code>.*)$")
TRACE_ARG = "{out}/trace"  # an argument naming the explicit recorder's run directory


def marked_lines(source: str) -> dict[int, str | None]:
    """Line number -> None (instrumentation: the statement ending there goes) or the line as written."""
    marks: dict[int, str | None] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        mark = MARK.match(tok.string)
        if mark is None:
            continue
        written = AS_WRITTEN.match(mark.group("rest"))
        marks[tok.start[0]] = written.group("code") if written else None
    return marks


def simple_statements(tree: ast.AST) -> dict[int, ast.stmt]:
    """Each statement that holds no block of its own, by the line it ends on (the innermost wins)."""
    ends: dict[int, ast.stmt] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not any(
            isinstance(getattr(node, f, None), list) and getattr(node, f) for f in ("body", "orelse", "finalbody")
        ):
            ends[node.end_lineno] = node
    return ends


def strip_parity(source: str) -> str:
    """`source` with its instrumentation taken out (see the module's docstring); it still parses."""
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    ends = simple_statements(tree)
    removed: set[int] = set()  # 1-based line numbers
    replaced: dict[int, str] = {}
    for line, written in marked_lines(source).items():
        if written is not None:
            indent = re.match(r"\s*", lines[line - 1]).group(0)
            replaced[line] = indent + written.strip() + "\n"
        elif line in ends and ends[line].lineno <= line:
            removed.update(range(ends[line].lineno, line + 1))
        else:  # a line inside a call or a signature: an argument of its own
            removed.add(line)
    emptied = empty_blocks(tree, removed)
    out = []
    for number, text in enumerate(lines, start=1):
        if number in emptied:
            out.append(re.match(r"\s*", text).group(0) + "pass\n")
        elif number in replaced:
            out.append(replaced[number])
        elif number not in removed:
            out.append(text)
    stripped = "".join(out)
    ast.parse(stripped)  # a marking that leaves broken code is caught here, not in a rank's log
    return stripped


def empty_blocks(tree: ast.AST, removed: set[int]) -> set[int]:
    """The first line of each block whose every statement is removed: a `pass` goes there."""
    firsts = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            if all(set(range(s.lineno, s.end_lineno + 1)) <= removed for s in body):
                firsts.add(body[0].lineno)
    return firsts


def stripped_copy(program: Program, dest: Path) -> Path:
    """The program's folder copied to `dest` with every `.py` file's instrumentation taken out."""
    shutil.copytree(HERE / program.folder, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for file in dest.rglob("*.py"):
        text = file.read_text()
        if "parity" in text:
            file.write_text(strip_parity(text))
    return dest


def plain_args(args: list[str], out: Path) -> list[str]:
    """The program's arguments without those naming its explicit trace, {out} filled in."""
    return [a.replace("{out}", str(out)) for a in args if TRACE_ARG not in a]


def hooked_commands(program: Program, source: Path, work: Path, prefix: str) -> dict[str, list[str]]:
    """The two commands as a user types them: raw under torchrun (or, for a program that starts its own
    ranks, under python with a port of its own), the port under Lightning's launcher."""
    if program.raw_launch == "torchrun":
        raw = torchrun_args(NPROC, free_port()) + [str(source / program.raw[0])]
    else:  # under torchrun each of its ranks would start a world of its own on the same port
        port = f"MASTER_PORT={free_port()}"
        raw = ["env", "MASTER_ADDR=127.0.0.1", port, sys.executable, str(source / program.raw[0])]
    lightning = [sys.executable, str(source / program.port[0])]
    return {
        "raw": raw + plain_args(program.raw[1:], work / f"{prefix}raw"),
        "lightning": lightning + plain_args(program.port[1:], work / f"{prefix}lightning"),
    }


# the programs as written end now and then with gloo's abort at exit (a DDP wrapper alive past
# destroy_process_group, docs/plugin.md), plain or recorded alike (nanoGPT: 1 run in 20 either way); their
# traces are whole, and the harness says so ("failed in its teardown, not a difference between the runs")
ABORT_AT_EXIT = "terminate called without an active exception"
TEARDOWN = "failed in its teardown"


def finished_before_teardown(run: Path, log: Path) -> bool:
    """The side's processes aborted at exit after its trace was finished: the run is compared as it is."""
    meta = run / META_FILE
    finished = meta.is_file() and json.loads(meta.read_text()).get("finished") is True
    return finished and ABORT_AT_EXIT in log.read_text(errors="replace")


def record_side(command: list[str], run: Path, work: Path, log: Path, **extra: str) -> int:
    side = log.stem  # raw or lightning, as the instrumented sides name themselves
    record = [sys.executable, str(CHECKOUT / "compare" / "run.py"), "record", "--out", str(run), "--side", side]
    return run_side(record + ["--", *command], side_env(**extra), work, log)


def prepared(program: Program, work: Path) -> Path:
    work.mkdir(parents=True)  # a new folder: a snapshot left by an earlier run would be resumed
    if program.prepare is not None:
        program.prepare(work)
    return stripped_copy(program, work / "source")


def run_pair_recorded(program: Program, work: Path, in_process: bool = False) -> PairResult:
    """Both sides stripped and run under `ddp-parity record` (RUN = work/raw/trace, work/lightning/trace),
    then compared by compare/run.py --traces, as run_pair compares the instrumented ones (with in_process, its
    main called in this process: the tests' way)."""
    started = time.perf_counter()
    source = prepared(program, work)
    commands = hooked_commands(program, source, work, prefix="")
    for side, command in commands.items():
        extra = {} if side == "raw" else {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
        rc = record_side(command, work / side / program.trace, work, work / f"{side}.log", **extra)
        if rc != 0 and not finished_before_teardown(work / side / program.trace, work / f"{side}.log"):
            failed = f"{side} exited {rc}; log: {work / (side + '.log')}"
            return PairResult(program, 3, "FAILED", seconds=time.perf_counter() - started, failed=failed)
    rc, verdict, diagnosis = (compare_cli_here if in_process else compare)(program, work)
    return PairResult(program, rc, verdict, diagnosis, time.perf_counter() - started)


def run_pair_cmd(program: Program, work: Path) -> PairResult:
    """Both sides stripped and launched by `compare/run.py --cmd RAW --cmd PORT --names raw,lightning`
    (in the program's folder of data, one after the other), its verdict and report.json's diagnosis."""
    started = time.perf_counter()
    source = prepared(program, work)  # a folder of its own: a snapshot another run left would be resumed
    commands = hooked_commands(program, source, work, prefix="cmd-")
    out = work / "cmd"
    harness = [sys.executable, str(CHECKOUT / "compare" / "run.py"), "--out", str(out), "--names", "raw,lightning"]
    harness += ["--quiet", "--sequential", "--keep-going"]  # both sides run, a teardown abort of one or not
    harness += [a for key in program.ignore_config for a in ("--ignore-config", key)]
    for command in commands.values():
        harness += ["--cmd", shlex.join(command)]
    proc = subprocess.run(harness, cwd=work, env=side_env(), capture_output=True, text=True, timeout=2 * TIMEOUT_S)
    (work / "cmd.log").write_text(proc.stdout + proc.stderr)
    verdict = next((line for line in proc.stdout.splitlines() if line.startswith("verdict:")), proc.stderr.strip())
    report = out / "report.json"
    diagnosis = json.loads(report.read_text()).get("diagnosis", {}) if report.exists() else {}
    if proc.returncode == 3 and TEARDOWN in proc.stdout:  # what the harness says to do then: compare the traces
        rc, verdict, diagnosis = compare(program, work, [out / side for side in ("raw", "lightning")])
        return PairResult(program, rc, verdict, diagnosis, time.perf_counter() - started)
    failed = None if proc.returncode in (0, 1) else f"--cmd exited {proc.returncode}; log: {work / 'cmd.log'}"
    return PairResult(program, proc.returncode, verdict, diagnosis or {}, time.perf_counter() - started, failed)
