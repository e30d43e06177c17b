"""A hostile but honest user: paths given from elsewhere, values meant to break generated shell,
two runs on one folder, damaged traces, options that cannot take effect (docs/bad-input.md).
Fast tier: in-process, nothing is trained; the generated sbatch scripts run under bash with stub
srun/scontrol."""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import DEFAULT_CONFIG, REPO, assert_one_line_error, harness_in_process
from test_comparator import LOSSES, PARAMS, make_run

from ddp_parity.compare.walk import Criterion, walk_streams
from ddp_parity.config import ConfigError
from ddp_parity.harness.cli import parse_args
from ddp_parity.harness.exits import UsageError
from ddp_parity.harness.modes import default
from ddp_parity.harness.outdir import ASIDE_PREFIX, DirClaim, OutDir
from ddp_parity.harness.slurm import main as slurm_main
from ddp_parity.testing import ParityUsageError, assert_parity
from ddp_parity.trace import TraceFormatError, parse_meta, parse_records, parse_validation, read_validation
from ddp_parity.watch import modules_path, read_module_trace


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


# ---------------------------------------------------------------------------------------------
# paths: resolved against the user's working directory, never into the checkout


def test_a_relative_out_is_the_users_folder_not_the_checkouts(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    args = parse_args(["--out", "myrun", "--config", os.path.relpath(DEFAULT_CONFIG, elsewhere)])
    assert args.out == str(elsewhere / "myrun")  # the sides run in the checkout: a relative path would land there
    assert args.config == str(DEFAULT_CONFIG)
    launches = default.build_launches(args, default.prepare(args), Path(args.out))
    for launch in launches:
        run_dir = launch.command[launch.command.index("--run_dir") + 1]
        assert Path(run_dir) == elsewhere / "myrun" / launch.side and launch.log_path.parent == elsewhere / "myrun"


def test_a_relative_checkpoint_in_set_is_the_users_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = parse_args(["--set", "ckpt_path=my.ckpt", "--set-raw", "ckpt_path=last", "--set", "data.batch_size=8"])
    assert args.overrides == [f"ckpt_path={tmp_path / 'my.ckpt'}", "data.batch_size=8"]
    assert args.set_raw == ["ckpt_path=last"]


def test_the_default_out_is_under_runs_of_the_users_folder_or_of_the_checkout(tmp_path, monkeypatch):
    from ddp_parity.harness.outdir import RUNS_DIR, check_out, default_out

    monkeypatch.chdir(tmp_path)
    assert default_out().parent == tmp_path / "runs"
    monkeypatch.chdir(REPO / "docs")  # inside the checkout: its runs/, never docs/runs
    assert default_out().parent == RUNS_DIR
    check_out(default_out(), overwrite=False)


@pytest.mark.parametrize("out", [".", "raw", "ddp_parity/results", "lightning"])
def test_out_inside_the_checkout_is_refused_unless_under_runs(out, monkeypatch):
    monkeypatch.chdir(REPO)
    before = sorted(p.name for p in REPO.iterdir())
    code, _, stderr = harness_in_process("--out", out)
    assert_one_line_error(code, stderr, "--out", "inside the source checkout", "runs")
    assert sorted(p.name for p in REPO.iterdir()) == before


def test_out_under_the_checkouts_runs_folder_is_allowed(tmp_path):
    from ddp_parity.harness.outdir import RUNS_DIR, check_out

    check_out(RUNS_DIR / "some-run", overwrite=False)  # no error


# ---------------------------------------------------------------------------------------------
# generated shell: every value inert

HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "x; touch PWNED",
    "x && touch PWNED #",
    "x | touch PWNED",
    "a b  c",
    "it's",
    'say "hi"',
    "*",
    "$HOME",
    "${IFS}touch${IFS}PWNED",
    "\\",
]
STUBS = {
    "srun": '#!/bin/bash\nprintf "%s\\0" "$@" > "$SRUN_ARGS"\n',
    "scontrol": "#!/bin/bash\necho node1\n",
}


def stub_bin(folder: Path) -> Path:
    folder.mkdir()
    for name, text in STUBS.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_sbatch_scripts_run_under_bash_keep_every_hostile_value_inert(tmp_path, value):
    """The value in every option that reaches a script; the scripts run under bash with stub
    srun/scontrol: no file appears, and srun receives the value as one literal argument."""
    safe = value.replace("/", "_")
    world = tmp_path / "world"
    repo, out = world / f"repo {safe}", world / f"out {safe}"
    repo.mkdir(parents=True)
    config = world / f"config {safe}.yaml"
    shutil.copy(DEFAULT_CONFIG, config)
    argv = ["--nodes", "2", "--devices", "2", "--out", str(out), "--config", str(config), "--repo", str(repo)]
    argv += [f"--python={value}", f"--time={value}", f"--sbatch={value}", f"--set=ckpt_path={value}"]
    assert slurm_main(argv) == 0
    stubs, record = stub_bin(tmp_path / "bin"), tmp_path / "srun.args"
    env = {"PATH": f"{stubs}:/usr/bin:/bin", "SRUN_ARGS": str(record), "SLURM_JOB_NODELIST": "node1"}
    env |= {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "HOME": str(tmp_path / "nohome")}
    for side in ("raw", "lightning"):
        before = files_under(world)
        script = out / f"{side}.sbatch"
        done = subprocess.run(["bash", str(script)], cwd=world, env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert files_under(world) == before, f"{side}.sbatch made {files_under(world) - before}"
        args = record.read_bytes().split(b"\0")[:-1]
        assert value.encode() in args and args[args.index(b"--ckpt_path") + 1] == value.encode()
        assert str(out / side).encode() in args


@pytest.mark.parametrize("option", ["--time", "--sbatch", "--python", "--repo", "--setup", "--set"])
@pytest.mark.parametrize("char", ["\n", "\r", "\0"], ids=["newline", "cr", "nul"])
def test_a_value_that_is_not_one_line_is_refused_before_writing(tmp_path, capsys, option, char):
    value = f"ckpt_path=x{char}touch PWNED" if option == "--set" else f"x{char}touch PWNED"
    code = slurm_main(["--nodes", "1", "--devices", "1", "--out", str(tmp_path / "out"), option, value])
    err = capsys.readouterr().err
    assert code == 2 and option in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------
# one run per output folder


def results_folder(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text('{"old": true}')
    return out


def test_a_second_overwrite_run_on_a_claimed_folder_is_refused_before_launching(tmp_path):
    out = results_folder(tmp_path)
    with DirClaim(out):  # the first run, holding its folder
        code, stdout, stderr = harness_in_process("--out", out, "--overwrite", "--quiet")
    assert_one_line_error(code, stderr, "--out", "in use by another run", f"pid {os.getpid()}")
    assert "[raw]" not in stdout  # nothing launched
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]
    assert (out / "report.json").read_text() == '{"old": true}'


def test_a_workdir_assert_parity_cannot_write_is_its_usage_error(tmp_path):
    workdir = tmp_path / "read-only"
    workdir.mkdir()
    workdir.chmod(0o500)
    try:
        if os.access(workdir, os.W_OK):
            pytest.skip("running as a user whom permissions do not stop (root)")
        with pytest.raises(ParityUsageError, match="cannot write there"):
            assert_parity(["python", "{run_dir}"], ["python", "{run_dir}"], workdir=workdir)
    finally:
        workdir.chmod(0o700)


def test_a_claim_is_held_against_any_other_claim_and_released_after(tmp_path):
    with DirClaim(tmp_path, "workdir"):
        with pytest.raises(UsageError, match="in use by another run"):
            DirClaim(tmp_path, "workdir").__enter__()
    with DirClaim(tmp_path):  # free again
        pass
    assert list(tmp_path.iterdir()) == []  # and the lock file gone


def test_two_assert_parity_calls_on_one_workdir_the_second_is_refused(tmp_path):
    with DirClaim(tmp_path, "workdir"):  # a first call, running
        with pytest.raises(ParityUsageError, match="in use by another run") as err:
            assert_parity(["python", "{run_dir}"], ["python", "{run_dir}"], workdir=tmp_path)
    assert err.value.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no a.log, no run folder


@pytest.mark.parametrize("program", ["no-such-program-29", "./no-such-script.py"])
def test_assert_parity_with_a_missing_program_raises_its_usage_error_and_writes_nothing(tmp_path, program):
    workdir = tmp_path / "work"
    with pytest.raises(ParityUsageError, match=f"cmd_b: cannot run '{program}'") as err:
        assert_parity(["python", "-c", "pass", "{run_dir}"], [program, "{run_dir}"], workdir=workdir, cwd=tmp_path)
    assert err.value.exit_code == 2
    assert not workdir.exists() or list(workdir.iterdir()) == []


def test_assert_parity_with_a_program_the_system_will_not_start_removes_what_the_start_wrote(tmp_path):
    script = tmp_path / "no-shebang.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    workdir = tmp_path / "work"
    with pytest.raises(ParityUsageError, match="cannot start .*no-shebang.sh: Exec format error") as err:
        assert_parity([str(script), "{run_dir}"], [str(script), "{run_dir}"], workdir=workdir, parallel=False)
    assert err.value.exit_code == 2 and list(workdir.iterdir()) == []


def test_overwrite_leaves_a_users_own_file_alone(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    od = OutDir(out, overwrite=True)
    with od as path:
        assert od.aside is None  # not results: nothing moved aside
        (path / "report.json").write_text("new")
        od.commit()
    assert (out / "notes.txt").read_text() == "mine"
    with OutDir(tmp_path / "other", overwrite=False):  # and a folder holding only it is not "holding results"
        pass
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "notes.txt").write_text("mine")
    with OutDir(tmp_path / "only", overwrite=False):
        pass
    assert (tmp_path / "only" / "notes.txt").read_text() == "mine"


def test_results_a_killed_overwrite_run_moved_aside_are_put_back(tmp_path, capsys):
    out = tmp_path / "out"
    (out / f"{ASIDE_PREFIX}99999").mkdir(parents=True)  # a run SIGKILLed between moving aside and committing
    (out / f"{ASIDE_PREFIX}99999" / "report.json").write_text("complete, older")
    (out / "raw.log").write_text("the killed run's, incomplete")
    od = OutDir(out, overwrite=True)
    with od as path:
        assert sorted(p.name for p in path.iterdir() if not p.name.startswith(".")) == []
        (path / "report.json").write_text("new")
        od.commit()
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]
    assert (out / "report.json").read_text() == "new"
    assert "interrupted --overwrite run" in capsys.readouterr().err
    (out / f"{ASIDE_PREFIX}5").mkdir()
    (out / f"{ASIDE_PREFIX}5" / "report.json").write_text("older")
    with pytest.raises(UsageError, match="already holds results"):  # put back, then counted as results
        with OutDir(out, overwrite=False):
            pass
    assert sorted(p.name for p in out.iterdir()) == ["report.json"] and (out / "report.json").read_text() == "older"


# ---------------------------------------------------------------------------------------------
# options that cannot take effect: refused before launch


def prepared(*argv: str):
    return default.prepare(parse_args([*argv]))


def test_set_for_a_side_that_is_not_launched_is_refused():
    with pytest.raises(UsageError, match="--set-fabric: fabric is not among the sides"):
        prepared("--set-fabric", "data.batch_size=16")
    with pytest.raises(UsageError, match="--set-raw: raw is not among the sides"):
        prepared("--sides", "lightning,fabric", "--set-raw", "data.batch_size=16")
    code, _, stderr = harness_in_process("--set-fabric", "data.batch_size=16")
    assert_one_line_error(code, stderr, "--set-fabric", "--sides")


@pytest.mark.parametrize("key", ["run_di", "data.batch_siz", "trainer.max_epoch"])
def test_an_abbreviated_key_is_refused_on_every_side_before_launch(key):
    for option in ("--set", "--set-raw", "--set-lightning"):
        with pytest.raises(ConfigError, match=f"--{key}"):
            prepared(option, f"{key}=4")
    code, _, stderr = harness_in_process("--set", f"{key}=4")
    assert_one_line_error(code, stderr, f"--{key}")


@pytest.mark.parametrize("value", ["abc", "0", "-3", "1,x", "2.5"])
def test_a_watch_step_that_is_not_a_step_is_refused_before_launch(monkeypatch, value):
    monkeypatch.setenv("DDP_PARITY_WATCH_STEP", value)
    code, stdout, stderr = harness_in_process("--quiet")
    assert_one_line_error(code, stderr, "DDP_PARITY_WATCH_STEP", repr(value))
    assert "[raw]" not in stdout


def test_an_empty_config_is_named_as_empty(tmp_path):
    for text in ("", "# only a comment\n"):
        config = tmp_path / "empty.yaml"
        config.write_text(text)
        code, _, stderr = harness_in_process("--config", config)
        assert_one_line_error(code, stderr, str(config), "empty")


# ---------------------------------------------------------------------------------------------
# damaged traces: one line, exit 2


def run_pair(tmp_path: Path) -> tuple[Path, Path]:
    return make_run(tmp_path / "a", LOSSES, PARAMS), make_run(tmp_path / "b", LOSSES, PARAMS)


def rewrite_record(trace: Path, line: int, **changes) -> None:
    records = [json.loads(text) for text in trace.read_text().splitlines()]
    records[line - 1].update(changes)
    trace.write_text("".join(json.dumps(r) + "\n" for r in records))


def traces_exit(a: Path, b: Path, tmp_path: Path) -> tuple[int, str]:
    code, _, stderr = harness_in_process("--traces", a, b, "--out", tmp_path / "report")
    return code, stderr


@pytest.mark.parametrize("step", [2**63, 2**64 + 5, -1, 10**30])
def test_a_step_beyond_64_bits_is_a_malformed_trace(tmp_path, step):
    a, b = run_pair(tmp_path)
    rewrite_record(b / "trace" / "rank1.jsonl", 2, step=step)
    code, stderr = traces_exit(a, b, tmp_path)
    assert_one_line_error(code, stderr, "malformed trace", "rank1.jsonl, line 2, `step`")


@pytest.mark.parametrize("where", ["trace", "validation"])
def test_a_byte_that_is_not_utf8_is_a_malformed_trace(tmp_path, where):
    a, b = run_pair(tmp_path)
    for run in (a, b):
        (run / "validation.jsonl").write_text('{"epoch": 0, "step": 3, "val_loss": 1.5}\n')
    damaged = b / "trace" / "rank0.jsonl" if where == "trace" else b / "validation.jsonl"
    lines = damaged.read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b'"epoch"', b'"ep\xffoch"')
    damaged.write_bytes(b"".join(lines))
    code, stderr = traces_exit(a, b, tmp_path)
    assert_one_line_error(code, stderr, "malformed trace", f"{damaged.name}, line 1", "not UTF-8")


@pytest.mark.parametrize(
    "key, value", [("loss", 10**400), ("lr", 2**60), ("time_s", "0.1"), ("epoch", 1.5), ("indices", [1, "2"])]
)
def test_a_number_no_comparison_can_take_is_a_malformed_trace(tmp_path, key, value):
    a, b = run_pair(tmp_path)
    rewrite_record(b / "trace" / "rank0.jsonl", 3, **{key: value})
    code, stderr = traces_exit(a, b, tmp_path)
    assert_one_line_error(code, stderr, "malformed trace", f"rank0.jsonl, line 3, `{key}`")


def test_a_validation_line_that_is_not_an_object_of_numbers_is_named(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for text, key in (("[1]\n", None), ('{"val_loss": "low"}\n', "val_loss"), ('{"step": 2.5}\n', "step")):
        (run / "validation.jsonl").write_text('{"val_loss": 1.0}\n' + text)
        with pytest.raises(TraceFormatError, match="malformed trace: .*validation.jsonl, line 2") as err:
            read_validation(run)
        assert key is None or f"`{key}`" in str(err.value)


@pytest.mark.parametrize("where", ["meta", "trace", "validation"])
def test_a_lone_surrogate_escape_is_a_malformed_trace_and_a_pair_is_text(tmp_path, where):
    """JSON allows "\\ud800" alone; no encoding can write it, so the plot, report.html or report.json
    would fail on it later (a side named so crashed matplotlib)."""
    a, b = run_pair(tmp_path)
    for run in (a, b):
        (run / "validation.jsonl").write_text('{"epoch": 0, "step": 3, "val_loss": 1.5}\n')
    meta = json.loads((a / "meta.json").read_text())
    (a / "meta.json").write_text(json.dumps({**meta, "side": "\ud83d\ude00 a pair is one character"}))
    lone = "\ud800<b>"
    if where == "meta":
        (b / "meta.json").write_text(json.dumps({**meta, "side": lone}))
        damaged = b / "meta.json"
    elif where == "trace":
        rewrite_record(b / "trace" / "rank0.jsonl", 2, batch_digest=lone)
        damaged = b / "trace" / "rank0.jsonl"
    else:
        (b / "validation.jsonl").write_text(json.dumps({"epoch": 0, "step": 3, lone: 1.5}) + "\n")
        damaged = b / "validation.jsonl"
    code, stderr = traces_exit(a, b, tmp_path)
    assert_one_line_error(code, stderr, "malformed trace", str(damaged), "lone surrogate")
    twin = tmp_path / "twin"  # a copy: the same run twice is refused
    shutil.copytree(a, twin)
    assert traces_exit(a, twin, tmp_path / "pair")[0] == 0  # the pair is text


@pytest.mark.parametrize("line", [b'{"step": 1, "x": "\xff"}', b'{"step": 1e999}', b"[1]", b'"step"', b"[" * 5000])
def test_a_damaged_module_watch_line_is_a_malformed_trace(tmp_path, line):
    (tmp_path / "trace").mkdir()
    modules_path(tmp_path, 0).write_bytes(b'{"step": 1}\n' + line + b"\n")
    with pytest.raises(TraceFormatError, match=r"malformed trace: .*rank0.modules.jsonl, line 2: not a module-watch"):
        read_module_trace(tmp_path, 0)


# the fuzz: any bytes, any integer size, any type in any field


VALID = {"step": 3, "epoch": 0, "loss": 1.5, "lr": 0.001, "grad_norm": 2.0, "time_s": 0.01, "indices": [4, 5]}
WILD_VALUES = [
    2**63, 2**63 - 1, -(2**63) - 1, 2**64, 10**20, -1, 0, 2**53 + 1, 1e308, -0.0, True, False, None,
    "", "1", "\ud800", [], [1, [2]], {}, {"a": 1}, 1.5, [1.0, "x"], [2**70],
]  # fmt: skip
RAW_NUMBERS = [b"1e999", b"-1e999", b"9" * 5000, b"NaN", b"Infinity", b"-Infinity", b"1" + b"0" * 400, b"[" * 5000]


def fuzz_cases(rng: random.Random, n: int):
    """n byte strings for a trace file: random bytes, truncations, flipped bytes, wrong types,
    huge and negative numbers, raw number texts JSON allows or Python chokes on."""
    good = "".join(json.dumps({**VALID, "step": s}) + "\n" for s in (1, 2, 3)).encode()
    for i in range(n):
        kind = i % 6
        if kind == 0:
            yield bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80)))
        elif kind == 1:
            yield good[: rng.randrange(len(good))]
        elif kind == 2:
            data = bytearray(good)
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            yield bytes(data)
        elif kind == 3:
            record = dict(VALID)
            record[rng.choice([*VALID, "param_digest", "batch_digest", "count", "attempt"])] = rng.choice(WILD_VALUES)
            if rng.random() < 0.2:
                del record[rng.choice(["step", "loss"])]
            yield json.dumps(record).encode() + b"\n"
        elif kind == 4:
            text = json.dumps({**VALID, "loss": "@@"}).encode()
            yield text.replace(b'"@@"', rng.choice(RAW_NUMBERS)) + b"\n"
        else:
            yield rng.choice([b"[1, 2]\n", b"null\n", b'"step"\n', b"\n\n", b"\xef\xbb\xbf{}\n", b"{}\n"]) + good


def test_fuzz_the_trace_reader_never_raises_anything_but_one_malformed_line():
    """In-process: the bytes go straight to the parsers the file readers use (no file per case)."""
    rng = random.Random(29)
    parsers = {
        "trace": lambda data: list(parse_records("rank0.jsonl", io.BytesIO(data))),
        "validation": lambda data: parse_validation("validation.jsonl", data),
        "meta": lambda data: parse_meta("meta.json", data),
    }
    accepted = refused = 0
    for data in fuzz_cases(rng, 10_000):
        for name, parse in parsers.items():
            try:
                records = parse(data)
            except TraceFormatError as err:
                text = str(err)
                assert "\n" not in text and text.startswith("malformed trace: "), text
                refused += 1
                continue
            accepted += 1
            if name == "trace":  # what the reader lets through, the walk takes
                streams = {"a": {0: iter(records)}, "b": {0: iter(json.loads(json.dumps(records)))}}
                walk_streams(streams, Criterion(), names={"a": "a", "b": "b"})
    assert accepted > 100 and refused > 10_000  # both paths were exercised


# ---------------------------------------------------------------------------------------------
# the runs given to --traces: checked before they are trusted (issue 39)


def test_the_same_run_twice_is_refused_by_path_or_link(tmp_path):
    """Before: `--traces A A` (a typo in a CI script) was EQUIVALENT, exit 0."""
    a, _ = run_pair(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(a)
    for other in (a, link):
        code, stderr = traces_exit(a, other, tmp_path)
        assert_one_line_error(code, stderr, "the same run twice", str(a))
        assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("where", ["both", "b"])
def test_a_rank_file_missing_against_world_size_is_refused(tmp_path, where):
    """Before: rank1.jsonl missing on both sides of a world-2 pair was EQUIVALENT on rank 0 alone
    (a multi-node run whose second host's traces were not collected)."""
    a, b = run_pair(tmp_path)
    for run in (a, b) if where == "both" else (b,):
        (run / "trace" / "rank1.jsonl").unlink()
    code, stderr = traces_exit(a, b, tmp_path)
    assert_one_line_error(code, stderr, "no rank1.jsonl", "world_size 2")


def test_a_world_size_larger_than_the_rank_files_is_refused(tmp_path):
    a, b = run_pair(tmp_path)
    for run in (a, b):
        meta = json.loads((run / "meta.json").read_text())
        (run / "meta.json").write_text(json.dumps({**meta, "world_size": 3}))
    code, stderr = traces_exit(a, b, tmp_path)
    assert_one_line_error(code, stderr, "no rank2.jsonl", "world_size 3")


@pytest.mark.parametrize("out", ["a", ".", "a/report"])  # a/report: inside RUN_A, among its files
def test_out_that_is_or_holds_an_input_run_is_refused_and_the_runs_kept(tmp_path, out):
    """Before: `--out RUN_A --overwrite` gave a misleading error (the runs were kept intact)."""
    a, b = run_pair(tmp_path)
    before = {p: p.read_bytes() for p in files_under(tmp_path) if p.is_file()}
    code, _, stderr = harness_in_process("--traces", a, b, "--out", tmp_path / out, "--overwrite")
    assert_one_line_error(code, stderr, "--out", "the input run", "choose another --out")
    assert {p: p.read_bytes() for p in files_under(tmp_path) if p.is_file()} == before


def test_the_bug_corpus_refuses_a_case_name_it_does_not_have(capsys):
    """Before: `python -m benchmarks.bugs --only NO_SUCH_CASE` printed an empty table, exit 0."""
    from benchmarks.bugs.__main__ import main as bugs_main

    with pytest.raises(SystemExit) as exit_:
        bugs_main(["--only", "NO_SUCH_CASE"])
    assert exit_.value.code == 2
    assert "--only NO_SUCH_CASE: no case's name contains it" in capsys.readouterr().err


def test_a_side_that_crashed_after_it_finished_is_no_difference_of_the_runs(tmp_path):
    """Before: an FSDP2 rank that aborted at exit after meta.json said `finished: true` was diagnosed
    `config`, "give both sides the same trainer.strategy": the one difference the user asked for."""
    from ddp_parity.harness.comparing import failed_report
    from ddp_parity.harness.launch import Outcome

    a, b = run_pair(tmp_path)
    for run, strategy in ((a, "ddp"), (b, "fsdp")):
        meta = json.loads((run / "meta.json").read_text())
        meta |= {"finished": True, "config": {"trainer": {"strategy": strategy}}}
        (run / "meta.json").write_text(json.dumps(meta))
    aborted = Outcome("b", -6, 1.0, log_tail="terminate called without an active exception\nexitcode : -6")
    report = failed_report(aborted, [aborted], {"a": a, "b": b}, "exact", labels=("a", "b"))
    assert report.verdict == "failed" and report.diagnosis is None
    assert report.failure["after_finish"] and "failed in its teardown" in report.failure["summary"]
    (b / "meta.json").write_text(json.dumps({**json.loads((b / "meta.json").read_text()), "finished": False}))
    assert failed_report(aborted, [aborted], {"a": a, "b": b}, "exact").diagnosis is not None  # a crash mid-run
