"""A run directory without torch: the trace's file layout, its format error, and the readers (meta,
step records, validation, heartbeats) that check every type they read. The comparison, the report and
the harness read runs through this; ddp_parity.trace, the recorder, re-exports all of it.

Importing torch costs the harness seconds; keeping it off the way to the launches lets the
harness import the comparison in the background while the sides train (harness/preload.py).
"""

from __future__ import annotations

import contextlib
import errno
import json
import numbers
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1
TRACE_DIR = "trace"
META_FILE = "meta.json"
FINAL_PARAMS_FILE = "final.safetensors"
# what an lr scheduler writes into a param group for its own use: the value it rescales from, not a
# hyperparameter of the update (one side with a scheduler and one without have the same groups)
SCHEDULER_BOOKKEEPING = ("initial_lr",)
VALIDATION_FILE = "validation.jsonl"
HEARTBEAT_S = 1.0  # at most one progress write per second: cheap, and enough to see a stall
WATCH_STEP_ENV = "DDP_PARITY_WATCH_STEP"  # the module watch's steps, checked by the harness before launch
ALL = "all"


class TraceFormatError(ValueError):
    """A trace that cannot be read; the message names the file and what is wrong."""


def malformed(path, line: int | None, key: str | None, problem: str) -> TraceFormatError:
    """The one error of every reader: `malformed trace: FILE, line N, `KEY`: what is wrong`."""
    where = [str(path)] + ([f"line {line}"] if line is not None else []) + ([f"`{key}`"] if key else [])
    return TraceFormatError(f"malformed trace: {', '.join(where)}: {problem}")


def write_json_atomic(path: Path, payload: dict) -> None:
    """Write to a temporary file, then rename: a crash never leaves half a file behind."""
    write_bytes_atomic(path, (json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n").encode())


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """`path` holds `data` whole or is left as it was: written beside it, then renamed over it. A
    write that fails (a full disk, a file-size limit) removes its temporary file before raising."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as err:  # a full disk, a read-only folder: no temporary file left behind
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror, str(path)) from None  # named by the file it was to be
    except BaseException:  # an interrupt: no temporary file left behind
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def read_progress(run_dir: str | os.PathLike) -> dict[int, dict]:
    """Each rank's last heartbeat ({rank: {"step", "epoch", "time"}}); ranks without one are absent."""
    found = {}
    for path in (Path(run_dir) / TRACE_DIR).glob("rank*.progress"):
        try:
            beat = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError):  # a damaged heartbeat is no heartbeat
            continue
        if type(beat) is dict:
            found[int(path.stem[4:])] = beat
    return found


def parse_watch_steps(value: str) -> frozenset[int] | str:
    """`3`, `1,5,9`, `all` or `none` (the value of DDP_PARITY_WATCH_STEP)."""
    text = value.strip().lower()
    if text == ALL:
        return ALL
    if text in ("none", "off", ""):
        return frozenset()
    try:
        steps = frozenset(int(part) for part in text.split(","))
    except ValueError:
        steps = frozenset({0})
    if min(steps) < 1:
        raise ValueError(
            f"{WATCH_STEP_ENV}={value!r}: expected an optimizer step number >= 1, a comma-separated list "
            "of them, `all` or `none`"
        )
    return steps


# ---------------------------------------------------------------------------------------------
# reading: any bytes, any number and any type give one line naming the file, the line and the key

MAX_STEP = 2**63 - 1  # steps are kept in 64-bit arrays
MAX_EXACT_INT = 2**53  # an integer where a number is expected: exact as a float, safe in arithmetic
RECORD_INTS = ("epoch", "attempt", "count")  # optional integer keys of a step record
RECORD_NUMBERS = ("grad_norm", "lr", "time_s")  # optional number keys (null allowed)
RECORD_STRINGS = ("indices_digest", "batch_digest")


def is_number(x) -> bool:
    """A JSON number a comparison can take: a float, or an integer within float's exact range."""
    if type(x) is float:
        return True
    return type(x) is int and -MAX_EXACT_INT <= x <= MAX_EXACT_INT


def _shown(value, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def step_record_problem(rec) -> tuple[str | None, str] | None:
    """(key, what is wrong) of a step record, or None when every key has the type the format says."""
    if type(rec) is not dict:
        return None, f"a step record must be a JSON object, got {_shown(rec)}"
    for key in ("step", "loss"):
        if key not in rec:
            return key, "a step record needs `step` and `loss`"
    step = rec["step"]
    if type(step) is not int or not 0 <= step <= MAX_STEP:
        return "step", f"must be an integer 0..2**63-1, got {_shown(step)}"
    if not is_number(rec["loss"]):
        return "loss", f"must be a number, got {_shown(rec['loss'])}"
    for key in RECORD_NUMBERS:
        value = rec.get(key)
        if value is not None and not is_number(value):
            return key, f"must be a number or null, got {_shown(value)}"
    for key in RECORD_INTS:
        value = rec.get(key)
        if value is not None and (type(value) is not int or not -MAX_STEP <= value <= MAX_STEP):
            return key, f"must be an integer or null, got {_shown(value)}"
    for key in RECORD_STRINGS:
        if key in rec and type(rec[key]) is not str:
            return key, f"must be a string, got {_shown(rec[key])}"
    digest = rec.get("param_digest")
    if digest is not None and not (type(digest) is list and all(is_number(v) for v in digest)):
        return "param_digest", f"must be a list of numbers, got {_shown(digest)}"
    indices = rec.get("indices")
    if indices is not None and not (type(indices) is list and all(type(i) is int for i in indices)):
        return "indices", f"must be a list of integers, got {_shown(indices)}"
    return None


def as_step(value: Any, name: str) -> int:
    """A step or an epoch as recorded: an integer 0..2**63-1 (a one-element integer tensor too).
    A float is refused rather than truncated: 1.5 would silently become step 1."""
    value = python_scalar(value)
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"TraceRecorder: {name} must be an integer, got {value!r} ({type(value).__name__})")
    if not 0 <= int(value) <= MAX_STEP:
        raise ValueError(f"TraceRecorder: {name} must be >= 0, got {int(value)}")
    return int(value)


def checked_metric(name: Any, value: Any) -> float | int:
    """A validation metric as JSON can hold it: a Python int or float (a numpy scalar or a
    one-element tensor becomes one, in its own precision); anything else is a misuse."""
    if not isinstance(name, str) or name in ("epoch", "step"):
        raise ValueError(
            f"TraceRecorder.record_validation(): {name!r} cannot name a metric (use a string, not epoch or step)"
        )
    value = python_scalar(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"TraceRecorder.record_validation(): metric {name!r} must be a number or a one-element tensor, "
            f"got {value!r:.80} ({type(value).__name__})"
        )
    if isinstance(value, numbers.Integral) and abs(int(value)) <= MAX_EXACT_INT:
        return int(value)
    return float(value)


def python_scalar(value: Any) -> Any:
    """A one-element tensor or a numpy scalar as the Python number it holds (`.item()`, its own
    precision); anything else as it is. Duck-typed: this module imports no torch."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (ValueError, RuntimeError, TypeError):  # more than one element
            return value
    return value


def parse_json_text(path, line: int | None, data: bytes):
    """One JSON value from bytes: anything that is not UTF-8 JSON (a stray byte, a line cut off,
    an integer of thousands of digits, nesting too deep) is a malformed trace, never a traceback."""
    try:
        text = data.decode("utf-8")
        value = json.loads(text)
    except UnicodeDecodeError as err:
        byte = err.object[err.start]
        raise malformed(path, line, None, f"not UTF-8 text (byte {byte:#04x} at {err.start})") from None
    except (ValueError, RecursionError):  # JSONDecodeError, an int beyond Python's digit limit, deep nesting
        raise malformed(path, line, None, "cut off or not JSON (was the run killed while writing?)") from None
    if may_hold_surrogates(text) and not _is_text(value):
        raise malformed(path, line, None, "a string holds a lone surrogate escape (\\udXXX): not text")
    return value


def may_hold_surrogates(text: str) -> bool:
    """A \\uD800-\\uDFFF escape: JSON allows a lone one, which no text encoding can write (the
    report, the plot and the page would fail on it). Rare, so looked for before paying for a check."""
    return "\\ud" in text or "\\uD" in text


def _is_text(value) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_meta(run_dir: str | os.PathLike) -> dict:
    check_run_folder(run_dir)
    path = Path(run_dir) / META_FILE
    if not path.exists():
        raise TraceFormatError(f"{path}: no meta.json (is {run_dir} a run directory?)")
    return parse_meta(path, read_input_bytes(path))


# ---------------------------------------------------------------------------------------------
# a run's files as the filesystem gives them: what is not a readable regular file is named, never
# opened (a FIFO would block the reader forever) and never let out as an OSError's traceback

KINDS = {
    stat.S_IFREG: "a file",
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device",
}


def file_kind(mode: int) -> str:
    return KINDS.get(stat.S_IFMT(mode), "a special file")


def check_run_folder(run_dir: str | os.PathLike) -> None:
    """A run directory: a folder (a link to one is one); a file, a symlink loop or nothing there is named."""
    try:
        mode = os.stat(run_dir).st_mode
    except OSError as err:
        raise TraceFormatError(f"{run_dir}: not a run directory ({unreadable_reason(err)})") from None
    if not stat.S_ISDIR(mode):
        raise TraceFormatError(f"{run_dir}: not a run directory (it is {file_kind(mode)}, not a folder)")


def unreadable_reason(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "a symlink loop"
    return err.strerror or str(err)


def check_regular_file(path: Path) -> None:
    """`path` is a regular file (or a link to one): checked before opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        raise TraceFormatError(f"malformed trace: {path}: cannot read it ({unreadable_reason(err)})") from None
    if not stat.S_ISREG(mode):
        raise TraceFormatError(f"malformed trace: {path}: {file_kind(mode)}, not a file")


def read_input_bytes(path: Path) -> bytes:
    """A run's file whole, or TraceFormatError naming it and why it cannot be read."""
    check_regular_file(path)
    try:
        return path.read_bytes()
    except OSError as err:
        raise TraceFormatError(f"malformed trace: {path}: cannot read it ({unreadable_reason(err)})") from None


def open_input(path: Path):
    """A run's file opened for reading in binary, or TraceFormatError naming it and why not."""
    check_regular_file(path)
    try:
        return open(path, "rb")
    except OSError as err:
        raise TraceFormatError(f"malformed trace: {path}: cannot read it ({unreadable_reason(err)})") from None


def parse_meta(path, data: bytes) -> dict:
    """meta.json's bytes as a dict of a format this reader reads."""
    meta = parse_json_text(path, None, data)
    if type(meta) is not dict:
        raise malformed(path, None, None, f"expected a JSON object, got {json_type(meta)}")
    version = meta.get("format_version")
    if version != FORMAT_VERSION or type(version) is not int:
        raise malformed(
            path,
            None,
            "format_version",
            f"trace format_version {_shown(version)} is not supported (this reader reads version {FORMAT_VERSION})",
        )
    return meta


def json_type(value) -> str:
    """How JSON would call a value's type, for messages."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


# meta.json keys and the JSON types they must have when present
META_TYPES = {
    "side": str,
    "world_size": int,
    "config": dict,
    "ranks": list,
    "versions": dict,
    "optimizer": dict,
    "attempts": list,
    "replicas_identical": bool,
    "resumed_from_step": (int, type(None)),
    "tied": dict,
}
RANK_FACTS = ("torch_flags", "arithmetic", "env", "world", "sampler", "buffers_sha256")  # objects when present


def load_meta(run_dir: str | os.PathLike) -> dict:
    """meta.json of a run, its types checked: `malformed trace: FILE, `KEY`: ...` (one line)."""
    meta = read_meta(run_dir)
    check_meta_types(Path(run_dir) / META_FILE, meta)
    return meta


def check_meta_types(path, meta: dict) -> None:
    for key, types in META_TYPES.items():
        if key in meta and not _has_type(meta[key], types):
            raise malformed(path, None, key, f"must be {_type_name(types)}, got {json_type(meta[key])}")
    for r, facts in enumerate(meta.get("ranks") or []):
        if not isinstance(facts, dict):
            raise malformed(path, None, f"ranks[{r}]", f"must be an object, got {json_type(facts)}")
        for key in RANK_FACTS:
            if key in facts and not isinstance(facts[key], dict):
                raise malformed(path, None, f"ranks[{r}].{key}", f"must be an object, got {json_type(facts[key])}")
    for alias, name in (meta.get("tied") or {}).items():  # weight tying: each further name -> the one it shares
        if not isinstance(name, str):
            raise malformed(path, None, f"tied.{alias}", f"must be a parameter's name, got {json_type(name)}")
    check_world_and_ranks(path, meta)


def check_world_and_ranks(path, meta: dict) -> None:
    """A world of at least one process, and one `ranks` entry per process when the list is there
    (an empty list: a hand-written meta.json that does not say). A world of 0 or -1 would let the
    rank files found stand for the run unchecked; a short list leaves a rank's setup unchecked."""
    world = meta.get("world_size")
    if world is not None and world < 1:
        raise malformed(path, None, "world_size", f"must be 1 or more (processes in the run), got {world}")
    ranks = meta.get("ranks")
    if world is not None and ranks and len(ranks) != world:
        raise malformed(
            path, None, "ranks", f"holds {len(ranks)} rank entries, but world_size is {world}: one entry per rank"
        )


def _has_type(value, types) -> bool:
    """JSON types; an integer must also fit in 64 bits (a count, a step, a world size)."""
    types = types if isinstance(types, tuple) else (types,)
    if isinstance(value, bool):
        return bool in types
    if type(value) is int and int in types:
        return -MAX_STEP <= value <= MAX_STEP
    return isinstance(value, types)


def _type_name(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    names = {str: "a string", int: "an integer", dict: "an object", list: "a list", bool: "a boolean"}
    return " or ".join(names.get(t, "null") for t in types)


def trace_ranks(run_dir: str | os.PathLike) -> list[int]:
    """The ranks of a run's trace files `trace/rank{r}.jsonl`; each rank named once (`rank01.jsonl`
    beside `rank1.jsonl` is a copy, not another rank) and each a regular file."""
    folder = Path(run_dir) / TRACE_DIR
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        names = []
    except OSError as err:
        raise TraceFormatError(f"malformed trace: {folder}: cannot read it ({unreadable_reason(err)})") from None
    numbered = [name[4:-6] for name in names if name.startswith("rank") and name.endswith(".jsonl")]
    ranks = sorted(int(digits) for digits in numbered if digits.isdigit())
    odd = [f"rank{d}.jsonl" for d in numbered if d.isdigit() and d != str(int(d))]
    if odd:
        raise TraceFormatError(
            f"malformed trace: {folder / odd[0]}: names rank {int(odd[0][4:-6])} with a leading zero (a copy?); "
            f"each rank's trace is rank{{r}}.jsonl, once"
        )
    if not ranks:
        raise TraceFormatError(f"{folder}: no rank*.jsonl trace files")
    for rank in ranks:
        check_regular_file(folder / f"rank{rank}.jsonl")
    return ranks


def iter_records(run_dir: str | os.PathLike, rank: int, block: int = 256) -> Iterator[dict]:
    """One rank's step records, in order, streamed (memory does not grow with the run), each one's
    types checked (`malformed trace: FILE, line N, `KEY``).

    Lines are parsed `block` at a time as one JSON array: a third less time than one json.loads per
    line, whose fixed cost is most of a short line's. A block that does not parse that way (a blank
    line, a line cut off by a crash, a byte that is not UTF-8) is parsed again line by line, which
    names the line at fault."""
    path = Path(run_dir) / TRACE_DIR / f"rank{rank}.jsonl"
    with open_input(path) as f:
        try:
            yield from parse_records(path, f, block)
        except OSError as err:  # an I/O error part way (a failing disk, a file on a lost mount)
            raise TraceFormatError(f"malformed trace: {path}: cannot read it ({unreadable_reason(err)})") from None


def parse_records(path, lines_in: Iterable[bytes], block: int = 256) -> Iterator[dict]:
    """The step records of a trace's lines (bytes, as a binary file yields them); `path` names it."""
    lines_in = iter(lines_in)
    lineno, last = 0, -1
    while True:
        lines = list(islice(lines_in, block))
        if not lines:
            return
        try:
            text = (b"[" + b",".join(lines) + b"]").decode("utf-8")
            records = None if may_hold_surrogates(text) else json.loads(text)
        except (ValueError, RecursionError):  # not JSON, not UTF-8, too many digits, too deep
            records = None
        if type(records) is not list or len(records) != len(lines):  # line by line: names the bad line
            records = (_parse_line(path, lineno + i, line) for i, line in enumerate(lines, 1))
        for i, record in enumerate(records, 1):
            if record is _BLANK:
                continue
            problem = step_record_problem(record)
            if problem is None and record["step"] <= last:
                problem = (
                    "step",
                    (
                        f"step {record['step']} after step {last}: a rank records each optimizer step once, in order "
                        "(a line repeated or moved by hand or by a copy?)"
                    ),
                )
            if problem is not None:
                raise malformed(path, lineno + i, *problem)
            last = record["step"]
            yield record
        lineno += len(lines)


_BLANK = object()


def _parse_line(path: Path, lineno: int, line: bytes):
    if not line.strip():
        return _BLANK
    return parse_json_text(path, lineno, line)


def read_records(run_dir: str | os.PathLike, rank: int) -> list[dict]:
    return list(iter_records(run_dir, rank))


def validation_record_problem(rec) -> tuple[str | None, str] | None:
    """(key, what is wrong) of a validation line: an object of numbers (`epoch`, `step`: integers)."""
    if type(rec) is not dict:
        return None, f"a validation record must be a JSON object, got {_shown(rec)}"
    for key, value in rec.items():
        if key in ("epoch", "step"):
            if value is not None and (type(value) is not int or not -MAX_STEP <= value <= MAX_STEP):
                return key, f"must be an integer or null, got {_shown(value)}"
        elif not is_number(value):
            return key, f"must be a number, got {_shown(value)}"
    return None


def read_validation(run_dir: str | os.PathLike) -> list[dict]:
    path = Path(run_dir) / VALIDATION_FILE
    if not os.path.lexists(path):
        return []
    return parse_validation(path, read_input_bytes(path))


def parse_validation(path, data: bytes) -> list[dict]:
    """validation.jsonl's bytes as a list of records; `path` names it."""
    found = []
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        record = parse_json_text(path, lineno, line)
        problem = validation_record_problem(record)
        if problem is not None:
            raise malformed(path, lineno, *problem)
        found.append(record)
    return found


# ---------------------------------------------------------------------------------------------
# a resumed attempt's files: what an earlier attempt left, kept up to a step


def truncate_after_step(path: Path, keep_steps_upto: int, only_if_later: bool = False) -> None:
    """Drop records after a step (those a resumed run is about to write again), and any line a
    crash cut off. `only_if_later`: leave the file alone unless a record after the step is there."""
    if not path.exists():
        return
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    kept = [line for line in lines if (step := complete_step(line)) is not None and step <= keep_steps_upto]
    if only_if_later and len(kept) == len(lines):
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)


def complete_step(line: str) -> int | None:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None  # a line cut off by a crash


def last_complete_record(path: Path, tail_bytes: int = 1 << 16) -> dict | None:
    """The last whole record of a trace file (read from its end), None when there is none."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - tail_bytes))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "step" in record:
            return record
    if size > tail_bytes:  # a very long last line (huge index lists): read it all
        for line in reversed(path.read_text(errors="replace").splitlines()):
            if complete_step(line) is not None:
                return json.loads(line)
    return None


# ---------------------------------------------------------------------------------------------
# a run's files read in one place


@dataclass
class RunFiles:
    """What a comparison reads of one run, read once: meta.json (types checked), the rank numbers,
    validation.jsonl, and each rank's records as a stream opened only when first iterated (a huge
    trace is never held). A file that could not be read leaves its error here instead (`*_error`),
    for the reader of that part to raise, or, comparing a crashed run, to report."""

    path: Path
    name: str  # the run as it was given, for messages
    meta: dict | None = None
    meta_error: Exception | None = None
    ranks: list[int] = field(default_factory=list)
    ranks_error: Exception | None = None
    validation: list[dict] = field(default_factory=list)
    validation_error: Exception | None = None
    streams: dict[int, Iterator[dict]] = field(default_factory=dict)


def read_run(run_dir: str | os.PathLike, tolerant: bool = False) -> RunFiles:
    """A run's files (RunFiles). A meta.json that cannot be read raises TraceFormatError (OSError)
    unless `tolerant` (a crashed or stopped run); what is wrong in the other files is kept in the
    value, raised where that file is used."""
    run = RunFiles(Path(run_dir), str(run_dir))
    try:
        run.meta = load_meta(run_dir)
    except (TraceFormatError, OSError) as err:
        if not tolerant:
            raise
        run.meta_error = err
    try:
        run.ranks = trace_ranks(run_dir)
    except (TraceFormatError, OSError) as err:
        run.ranks_error = err
    try:
        run.validation = read_validation(run_dir)
    except (TraceFormatError, OSError) as err:
        run.validation_error = err
    run.streams = {rank: iter_records(run_dir, rank) for rank in run.ranks}
    return run


# rank{r}.hooks.json `checkpoints`: the ops (their last dotted part) that save, as the hooks name them
CHECKPOINT_SAVE_OPS = ("save", "async_save", "save_state_dict")
# rank{r}.evaluations.jsonl `role`: the trained model's evaluation or a copy's (an EMA); older traces: the model's
EVALUATION_MODEL, EVALUATION_COPY = "model", "copy"


def evaluations_path(run_dir, rank: int) -> Path:
    """trace/rank{r}.evaluations.jsonl: the evaluations `ddp-parity record`'s hooks saw on that rank."""
    return Path(run_dir) / TRACE_DIR / f"rank{rank}.evaluations.jsonl"


def read_evaluations(run_dir) -> dict[int, list[dict]]:
    """{rank: its evaluations, in order} from every trace/rank{r}.evaluations.jsonl; {} where the run was
    recorded explicitly (its validation.jsonl says when it validated). A line that is not an object with
    an integer `step` and `micro_batch` is left out: these records only add to what the traces prove."""
    found = {}
    for rank in _evaluation_ranks(run_dir):
        records = []
        try:
            lines = evaluations_path(run_dir, rank).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and all(type(record.get(k)) is int for k in ("step", "micro_batch")):
                records.append(record)
        found[rank] = records
    return found


def _evaluation_ranks(run_dir) -> list[int]:
    ranks = []
    for path in (Path(run_dir) / TRACE_DIR).glob("rank*.evaluations.jsonl"):
        number = path.name[len("rank") : -len(".evaluations.jsonl")]
        if number.isdigit():
            ranks.append(int(number))
    return sorted(ranks)


def read_hook_facts(run_dir, rank: int) -> dict:
    """trace/rank{r}.hooks.json: what `ddp-parity record`'s hooks saw on that rank besides the step
    records (set_epoch calls, schedulers, the optimizer as built); {} where the run was recorded
    explicitly, or the file is unreadable."""
    path = Path(run_dir) / TRACE_DIR / f"rank{rank}.hooks.json"
    try:
        facts = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return facts if isinstance(facts, dict) else {}


def fact_items(facts: dict, key: str) -> list[dict]:
    """The items of a list of facts in a rank's hooks facts ({count, items}): [] where there is none."""
    value = facts.get(key) if isinstance(facts, dict) else None
    items = value.get("items") if isinstance(value, dict) else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
