"""Compare two runs: one walk over their traces (ddp_parity.compare.walk), validation, and the
final parameters tensor by tensor, into a Comparison: the figures, no diagnosis (pipeline.py adds it
and assembles the report; `ddp_parity.compare_traces` does both). The default criterion is bitwise
equality; with tolerances a value passes when |a - b| <= atol + rtol * |b| (b is the second run).
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

import numpy as np
import torch

from ddp_parity.compare import pairing
from ddp_parity.compare.batch_inputs import (
    INPUTS_EQUAL,
    TRAINING_EQUAL,
    inputs_equal_where_digests_part,
    model_inputs_equal,
    not_comparable_note,
)
from ddp_parity.compare.walk import (
    STEP_QUANTITIES,
    Criterion,
    Stats,
    WalkResult,
    records_of,
    walk_runs,
    walk_streams,
)
from ddp_parity.trace_files import (
    FINAL_PARAMS_FILE,
    META_FILE,
    RunFiles,
    TraceFormatError,
    load_meta,
    open_input,
    read_run,
)

__all__ = ["Criterion", "Comparison", "compare_runs", "compare_to_reference", "load_meta", "match_keys"]

# without these a run's setup cannot be checked: such a run is never called equivalent
REQUIRED_META = ("side", "world_size")
# what the training consumed and what it produced, per step: the verdict rests on these (with the final
# parameters); the rest of a step's record is what the loop measured (MEASURED), which a loop may measure
# otherwise (another norm, the mean over ranks, a rate read after scheduler.step()) while training alike
TRAINED = ("samples", "batch", "param_digest")
MEASURED = ("loss", "grad_norm", "lr")
NO_STEP = "neither run recorded an optimizer step (every trace/rank*.jsonl is empty): there is nothing to compare"


def missing_meta(meta: dict | None) -> list[str]:
    return [key for key in REQUIRED_META if key not in (meta or {})]


# ---------------------------------------------------------------------------------------------
# the comparison


@dataclass
class Comparison:
    run_a: str
    run_b: str
    criterion: Criterion
    walk: WalkResult | None = None
    metas: dict = field(default_factory=dict)  # side -> meta.json (None where unreadable)
    meta_errors: dict = field(default_factory=dict)  # side -> why meta.json could not be read
    validation: Stats = field(default_factory=Stats)
    validation_first: dict | None = None
    params: Stats = field(default_factory=Stats)
    param_tensors: list = field(default_factory=list)  # per-tensor rows
    params_only_in: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)  # structural messages (step counts, keys, metadata)
    # what the verdict leaves out and why ({"kind", "message"}: tensors on one side only, narrowed digests)
    notes: list = field(default_factory=list)

    @property
    def quantities(self) -> dict:
        return self.walk.quantities if self.walk else {name: Stats() for name in STEP_QUANTITIES}

    @property
    def curves(self) -> dict:
        return self.walk.curves if self.walk else {}

    @property
    def timing(self) -> dict:
        return self.walk.times if self.walk else {}

    @property
    def steps(self) -> dict:
        return self.walk.steps_summary() if self.walk else {}

    @property
    def all_problems(self) -> list:
        return (self.walk.problems if self.walk else []) + self.problems

    @property
    def first_divergence(self) -> dict | None:
        """The earliest per-step divergence; else a structural problem; else the final parameters."""
        first = self.walk.first if self.walk else None
        if first is not None:
            return {k: v for k, v in first.items() if k != "position"}
        if self.all_problems:
            return {"quantity": "steps", "message": self.all_problems[0]}
        if not self.params.all_equal:
            return {"quantity": "params", **(self.params.first or {})}
        return None

    @property
    def exactly_equal(self) -> bool:
        """Every record, validation figure and final tensor bitwise equal (or within the tolerance)."""
        return (
            not self.all_problems
            and all(s.all_equal for s in self.quantities.values())
            and self.validation.all_equal
            and self.params.all_equal
            and self.params.compared > 0
        )

    @property
    def params_digested(self) -> bool:
        """Both sides recorded the parameter digest at every step compared (record(..., model=model))."""
        # every compared rank-step counted (a loss the recorder left unrecorded is compared at none of them)
        digests, steps = self.quantities.get("param_digest"), self.walk.rank_steps_compared if self.walk else 0
        return bool(digests and steps and digests.compared > 0 and digests.compared == steps)

    @property
    def consumed_and_ended_alike(self) -> bool:
        """No structural problem, the same samples (and batch contents) at every step, the final tensors equal."""
        return (
            not self.all_problems
            and all(self.quantities[q].all_equal for q in TRAINED[:2] if q in self.quantities)
            and self.params.all_equal
            and self.params.compared > 0
        )

    @property
    def buffers_alike(self) -> bool:
        """Every rank's buffers (meta.json `ranks[r].buffers_sha256`) and `replicas_identical` the same on
        both sides: the state beyond the parameters, which the final tensors hold for rank 0 only."""
        metas = [self.metas.get(s) or {} for s in ("a", "b")]
        if metas[0].get("replicas_identical") != metas[1].get("replicas_identical"):
            return False
        # by digest, not by name: a LightningModule holds the network under an attribute (`net.bn...`)
        buffers = [
            [sorted((r.get("buffers_sha256") or {}).values()) for r in m.get("ranks") or [] if isinstance(r, dict)]
            for m in metas
        ]
        return buffers[0] == buffers[1]

    @property
    def training_equal(self) -> bool:
        """The training proved the same: the samples consumed and the parameters (the digest after every
        step and the final tensors) equal, and the buffers. What the loop measured may still differ
        (`measured_differ`)."""
        return (
            self.consumed_and_ended_alike
            and self.params_digested
            and self.quantities["param_digest"].all_equal
            and self.buffers_alike
        )

    @property
    def measured_differ(self) -> list[str]:
        """The measured quantities (loss, gradient norm, lr, validation figures) that differ somewhere."""
        found = [q for q in MEASURED if q in self.quantities and not self.quantities[q].all_equal]
        return found + ([] if self.validation.all_equal else ["validation"])

    @property
    def equivalent(self) -> bool:
        """The verdict: everything equal, or the training proved the same (`training_equal`) with only
        measured quantities differing (the diagnosis says how: a `recording` finding)."""
        return self.exactly_equal or self.training_equal

    def to_dict(self) -> dict:
        """The per-quantity figures (the report's core; pipeline.build_report adds diagnosis, warnings, labels)."""
        quantities = self.quantities
        return {
            "verdict": "equivalent" if self.equivalent else "different",
            "criterion": self.criterion.describe(),
            "first_divergence": self.first_divergence,
            "steps": self.steps,
            "problems": self.all_problems,
            "losses": quantities["loss"].summary() if "loss" in quantities else None,
            "per_step": {k: v.summary() for k, v in quantities.items()},
            "validation": self.validation.summary(),
            "params": {**self.params.summary(), "only_in": self.params_only_in, "tensors": self.param_tensors},
            "timing": self.timing,
            "runs": {"a": self.run_a, "b": self.run_b},
        }


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    criterion: Criterion | None = None,
    key_map: Callable[[str], str] | None = None,
    tolerant: bool = False,
    exact_only: bool = False,
) -> Comparison:
    """Compare two finished runs in one pass over their traces. Raises TraceFormatError for a run
    that cannot be read; `tolerant` (a crashed or stopped run) records what it could not read instead.
    `exact_only`: the per-step float quantities, validation and final parameters left out (what
    rounding moves, judged against noise under --tolerance noise)."""
    result = Comparison(str(run_a), str(run_b), criterion or Criterion())
    runs = {"a": read_run(run_a, tolerant=tolerant), "b": read_run(run_b, tolerant=tolerant)}
    for side, run in runs.items():
        result.metas[side] = run.meta
        if run.meta_error is not None:
            result.meta_errors[side] = str(run.meta_error)
    for run in runs.values():
        lacking = missing_meta(run.meta) if run.meta is not None else []
        if lacking:
            lacks = f"{run.path / META_FILE} lacks {', '.join(lacking)}"
            result.problems.append(f"{lacks}: the run's setup cannot be checked")
    positions = pairing.digest_positions(
        result.metas.get("a"), result.metas.get("b"), digest_pairing(runs["a"], runs["b"], result.metas, key_map)
    )
    if positions is not None:  # the digests sum other parameters: only the shared ones are compared, and said
        names = dict(zip("ab", run_labels(result)))
        note = pairing.narrowed_note(result.metas["a"], result.metas["b"], names, positions)
        result.notes.append({"kind": "narrowed_digests", "message": note})
    walk_args = {
        "tolerant": tolerant,
        "exact_only": exact_only,
        "digest_positions": positions,
        "sketches": sketch_pairing(result.metas, key_map),
        "norm_orders_apart": hooks_norm_orders_apart(result.metas, key_map),
    }
    result.walk = walk_runs(runs["a"], runs["b"], result.criterion, **walk_args)
    if not any(result.walk.counts[side].get(rank) for side in ("a", "b") for rank in result.walk.counts[side]):
        result.problems.append(NO_STEP)  # two empty traces agree on nothing: never equivalent
    if not exact_only:
        compare_validation(runs["a"], runs["b"], result, tolerant)
        compare_params(runs["a"], runs["b"], result, key_map)
    _set_batch_digests_aside(result, runs, walk_args)
    return result


# ---------------------------------------------------------------------------------------------
# batch digests that digest other things on the two sides


def _set_batch_digests_aside(result: Comparison, runs: dict, walk_args: dict) -> None:
    """Where the first divergence is the batch digests but the records deny the data differ, walk again without
    them and say so in a recording note. The records deny it where the module watch shows the model received the
    same inputs at every training forward of that step on every rank whose digests part (the digests then cover
    other things: a loop that feeds its model by hand against a DataLoader's port), or, without such a watch,
    where the training is the same throughout without them (batch_inputs.TRAINING_EQUAL): equal parameters after
    every step cannot have come from other data."""
    first = result.walk.first_trained  # the training's first divergence (a loss measured otherwise passed over)
    if first is None or first.get("quantity") not in ("samples", "batch") or not isinstance(first.get("step"), int):
        return
    ranks = _batch_digests_parting(runs, first["step"])
    if not ranks:
        return  # the samples part by their indices: a data finding rests on those
    paths = (runs["a"].path, runs["b"].path)
    if inputs_equal_where_digests_part(*paths, first["step"], ranks):
        why = INPUTS_EQUAL.format(step=first["step"])
    elif any(model_inputs_equal(*paths, first["step"], r) is False for r in ranks):
        return  # the model's inputs differ too: the data finding stands
    else:
        why = None
    fresh = {s: read_run(runs[s].path, tolerant=walk_args["tolerant"]) for s in "ab"}  # the first walk read them
    walk = walk_runs(fresh["a"], fresh["b"], result.criterion, batch_digests=False, **walk_args)
    if why is None and not _trained_alike_throughout(result, walk):
        return
    result.walk = walk
    names = dict(zip("ab", run_labels(result)))
    result.notes.append(not_comparable_note(first["step"], ranks, (names["a"], names["b"]), why or TRAINING_EQUAL))


def _batch_digests_parting(runs: dict, step: int) -> list:
    """The ranks whose records at `step` both hold a batch digest, and other ones."""
    ranks = []
    for rank in sorted(set(runs["a"].ranks) & set(runs["b"].ranks), key=str):
        pair = [next((r for r in records_of(runs[s].path, rank) if r.get("step") == step), None) for s in "ab"]
        digests = [r.get("batch_digest") if r is not None else None for r in pair]
        if None not in digests and digests[0] != digests[1]:
            ranks.append(rank)
    return ranks


def _trained_alike_throughout(result: Comparison, walk: WalkResult) -> bool:
    """Without the batch digests, the training is the same at every step on every rank and at the end: the
    parameter digest, every layer's sketch and the gradient norm equal wherever recorded, none missing, no step
    apart, the final parameters equal (issue 46: such a pair is equivalent, whatever the batch digests say)."""
    quantities = walk.quantities
    digests, losses, norms = (quantities.get(q) for q in ("param_digest", "loss", "grad_norm"))
    return (
        walk.first_trained is None
        and walk.structure is None
        and walk.layers_parted is None
        and walk.sketches is not None
        and not walk.problems
        and digests is not None
        and losses is not None
        and digests.compared == losses.compared > 0
        and digests.all_equal
        and norms is not None
        and norms.compared == losses.compared
        and norms.all_equal
        and result.params.compared > 0
        and result.params.all_equal
    )


def compare_validation(run_a: RunFiles, run_b: RunFiles, result: Comparison, tolerant: bool = False) -> None:
    for run in (run_a, run_b):
        if run.validation_error is not None:
            if not tolerant or not isinstance(run.validation_error, TraceFormatError):
                raise run.validation_error
            return
    val_a, val_b = run_a.validation, run_b.validation
    # paired by the step they validated at, never by position: an evaluation at step 0 on one side only
    # must not be held against the other side's first one at step 20
    by_step_a, by_step_b = _validation_by_step(val_a), _validation_by_step(val_b)
    for run, steps in (
        (run_a.name, [s for s in by_step_a if s not in by_step_b]),
        (run_b.name, [s for s in by_step_b if s not in by_step_a]),
    ):
        if steps:
            result.problems.append(f"validation at step(s) {', '.join(map(str, steps))} recorded by {run} only")
    for step, recs_a in by_step_a.items():
        recs_b = by_step_b.get(step, [])
        if recs_b and len(recs_a) != len(recs_b):
            result.problems.append(
                f"{len(recs_a)} validation results at step {step} in {run_a.name} but {len(recs_b)} in {run_b.name}"
            )
        for rec_a, rec_b in zip(recs_a, recs_b):
            _compare_validation_pair(rec_a, rec_b, result)


def _validation_by_step(records: list[dict]) -> dict:
    """{step: that step's validation records, in the order written}."""
    by_step: dict = {}
    for record in records:
        by_step.setdefault(record.get("step"), []).append(record)
    return by_step


def _compare_validation_pair(rec_a: dict, rec_b: dict, result: Comparison) -> None:
    for key in sorted(set(rec_a) | set(rec_b)):
        if key in ("epoch", "step"):
            continue
        if key not in rec_a or key not in rec_b:
            result.problems.append(f"validation metric {key!r} is recorded by one run only")
            continue
        where = {"epoch": rec_a.get("epoch"), "step": rec_a.get("step"), "metric": key}
        result.validation.add(rec_a[key], rec_b[key], result.criterion, where)


# ---------------------------------------------------------------------------------------------
# final parameters, streamed one tensor at a time from memory-mapped safetensors


def strip_known_prefixes(key: str) -> str:
    return key[len("module.") :] if key.startswith("module.") else key


def match_keys(
    keys_a: list[str],
    keys_b: list[str],
    key_map: Callable[[str], str] | None,
    trained: tuple[set[str] | None, set[str] | None] = (None, None),
) -> dict[str, str]:
    """Pair keys of run A with keys of run B: after `module.` and a user mapping, and, where the
    sets still differ, after dropping one leading component on the side that has one more (a
    LightningModule holds the network as an attribute: `net.` + the raw key). Where that side holds
    several attributes (a student and its EMA teacher), the one whose keys pair the most is dropped;
    of equals, the one whose keys in that side's optimizer (`trained`: each side's optimizer's names,
    None unknown) are the other side's; still equal, none (the pairing is ambiguous: the keys stay
    unpaired and are named)."""
    norm_a = {(key_map or strip_known_prefixes)(k): k for k in keys_a}
    norm_b = {(key_map or strip_known_prefixes)(k): k for k in keys_b}
    if set(norm_a) != set(norm_b):
        for shorter, longer, held in ((norm_a, norm_b, trained[::-1]), (norm_b, norm_a, trained)):
            prefixes = {k.split(".", 1)[0] for k in longer if "." in k}
            if len(prefixes) == 1:
                prefix = prefixes.pop() + "."
                stripped = {k[len(prefix) :]: v for k, v in longer.items()}
                if set(stripped) & set(shorter) and len(set(stripped) & set(shorter)) >= len(
                    set(longer) & set(shorter)
                ):
                    longer.clear()
                    longer.update(stripped)
                    break
            elif len(prefixes) > 1:
                stripped = _one_attribute_dropped(shorter, longer, sorted(prefixes), held)
                if stripped is not None:
                    longer.clear()
                    longer.update(stripped)
                    break
        else:
            _pair_under_one_path(norm_a, norm_b)
    return {norm_a[k]: (norm_a[k], norm_b[k]) for k in norm_a if k in norm_b} | {
        "__only_a__": sorted(norm_a[k] for k in norm_a if k not in norm_b),
        "__only_b__": sorted(norm_b[k] for k in norm_b if k not in norm_a),
    }


def _pair_under_one_path(norm_a: dict, norm_b: dict) -> None:
    """Where one side's every key is the other's under one module path (`0.weight` is `agent.network.0.weight`:
    one side recorded a submodule of the other's model), that path dropped from the other side's keys under it, the
    rest kept whole; nothing changed where no path, or more than one, pairs every key of the side with fewer."""
    for shorter, longer in ((norm_a, norm_b), (norm_b, norm_a)):
        if not shorter or len(shorter) >= len(longer):
            continue
        anchor = min(shorter)
        paths = {k[: -len(anchor)] for k in longer if k.endswith("." + anchor)}
        fitting = [p for p in paths if all(p + k in longer for k in shorter)]
        if len(fitting) == 1:
            path = fitting[0]
            renamed = {
                (k[len(path) :] if k.startswith(path) and k[len(path) :] in shorter else k): v
                for k, v in longer.items()
            }
            if len(renamed) == len(longer):  # no key of the rest takes a name a stripped one has
                longer.clear()
                longer.update(renamed)
            return


def _one_attribute_dropped(shorter: dict, longer: dict, prefixes: list[str], held: tuple) -> dict | None:
    """`longer` with the keys under one attribute stripped of it (the others kept whole), the attribute
    whose keys pair the most with `shorter`'s, then whose trained keys are `shorter`'s trained keys
    (`held`: the trained names of the longer side's keys, of the shorter side's); None where no single
    attribute is the best or none pairs more than the keys as they are."""

    def dropped(prefix: str) -> dict:
        cut = prefix + "."
        return {(k[len(cut) :] if k.startswith(cut) else k): v for k, v in longer.items()}

    def score(prefix: str) -> tuple[int, bool]:
        keys = dropped(prefix)
        trained_longer, trained_shorter = held
        same_trained = (
            trained_longer is not None
            and trained_shorter is not None
            and {k for k, v in keys.items() if v in trained_longer} & set(shorter)
            == {k for k, v in shorter.items() if v in trained_shorter}
        )
        return len(set(keys) & set(shorter)), same_trained

    scores = {p: score(p) for p in prefixes}
    best = max(scores.values())
    winners = [p for p, s in scores.items() if s == best]
    if len(winners) != 1 or best[0] <= len(set(longer) & set(shorter)):
        return None
    return dropped(winners[0])


SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
    **{
        name: getattr(torch, attr)
        for name, attr in (
            ("U64", "uint64"), ("U32", "uint32"), ("U16", "uint16"),
            ("F8_E4M3", "float8_e4m3fn"), ("F8_E5M2", "float8_e5m2"),
        )
        if hasattr(torch, attr)
    },
}  # fmt: skip
# a complex tensor is compared as its real and imaginary parts, interleaved as they are stored
COMPLEX_PARTS = {"C64": torch.float32, "C128": torch.float64}


class SafetensorsReader:
    """A safetensors file read a chunk at a time with plain reads into one reused buffer, so a
    comparison holds a few chunks whatever the tensor or file size. (safe_open maps the file and
    every page read stays resident while it is mapped: peak RSS reached both files' size; and
    get_tensor copies each tensor whole.) The format: an 8-byte little-endian header length, a
    JSON header (dtype, shape, data_offsets per tensor), then the data. Every entry of the header is
    checked against the file before anything is read: random bytes or a file cut short are named
    (TraceFormatError), never a MemoryError or a read past the end."""

    def __init__(self, path: Path):
        self.path = path
        self.file = open_input(path)
        try:
            self.header, self.data_start = read_safetensors_header(path, self.file)
        except BaseException:
            self.file.close()
            raise

    def keys(self) -> list[str]:
        return list(self.header)

    def dtype_and_shape(self, key: str) -> tuple[object, tuple]:
        info = self.header[key]
        return SAFETENSORS_DTYPES.get(info["dtype"], info["dtype"]), tuple(info["shape"])

    def chunks(self, key: str, chunk: int) -> Iterator[torch.Tensor]:
        info = self.header[key]
        dtype = SAFETENSORS_DTYPES.get(info["dtype"]) or COMPLEX_PARTS[info["dtype"]]
        begin, end = info["data_offsets"]
        itemsize = torch.empty(0, dtype=dtype).element_size()
        buffer = torch.empty(min(chunk, max((end - begin) // itemsize, 1)), dtype=dtype)
        self.file.seek(self.data_start + begin)
        for offset in range(0, end - begin, chunk * itemsize):
            n = min(chunk * itemsize, end - begin - offset) // itemsize
            view = buffer[:n]
            try:
                got = self.file.readinto(view.view(torch.uint8).numpy())
            except OSError as err:
                raise TraceFormatError(f"malformed trace: {self.path}: cannot read it ({err.strerror})") from None
            if got != n * itemsize:
                raise TraceFormatError(f"malformed trace: {self.path}: tensor {key} is cut off")
            yield view

    def close(self) -> None:
        self.file.close()


def read_safetensors_header(path: Path, file) -> tuple[dict, int]:
    """(the header's tensors, where the data starts), each tensor's dtype, shape and offsets checked
    against the file's size."""
    size = os.fstat(file.fileno()).st_size
    try:
        (length,) = struct.unpack("<Q", file.read(8))
        if 8 + length > size:
            raise ValueError(f"a header of {length} bytes in a file of {size}")
        header = json.loads(file.read(length))
    except (struct.error, ValueError, RecursionError) as err:
        raise TraceFormatError(f"malformed trace: {path}: not a safetensors file ({str(err)[:80]})") from None
    except OSError as err:
        raise TraceFormatError(f"malformed trace: {path}: cannot read it ({err.strerror})") from None
    if type(header) is not dict:
        raise TraceFormatError(f"malformed trace: {path}: not a safetensors file (its header is not an object)")
    header.pop("__metadata__", None)
    for key, info in header.items():
        problem = tensor_entry_problem(info, size - 8 - length)
        if problem:
            raise TraceFormatError(f"malformed trace: {path}: tensor {key!r}: {problem}")
    return header, 8 + length


def tensor_entry_problem(info, data_size: int) -> str | None:
    """What is wrong with one header entry, or None: a dtype this reader compares, a shape of
    non-negative integers, offsets inside the data that hold exactly that many elements."""
    if type(info) is not dict:
        return "not a {dtype, shape, data_offsets} entry"
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype not in SAFETENSORS_DTYPES and dtype not in COMPLEX_PARTS:
        known = ", ".join([*SAFETENSORS_DTYPES, *COMPLEX_PARTS])
        return f"dtype {str(dtype)[:20]!r} is not one this reader compares ({known})"
    if type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
        return f"shape must be a list of sizes, got {str(shape)[:40]}"
    if not (type(offsets) is list and len(offsets) == 2 and all(type(n) is int for n in offsets)):
        return f"data_offsets must be [begin, end], got {str(offsets)[:40]}"
    begin, end = offsets
    itemsize = (SAFETENSORS_DTYPES.get(dtype) or COMPLEX_PARTS[dtype]).itemsize * (2 if dtype in COMPLEX_PARTS else 1)
    if not 0 <= begin <= end <= data_size or end - begin != math.prod(shape) * itemsize:
        return f"data_offsets {offsets} do not hold {math.prod(shape)} {dtype} elements in {data_size} bytes of data"
    return None


def compare_params(run_a: RunFiles, run_b: RunFiles, result: Comparison, key_map=None, chunk: int = 1 << 20) -> None:
    path_a, path_b = run_a.path / FINAL_PARAMS_FILE, run_b.path / FINAL_PARAMS_FILE
    missing = [path for path in (path_a, path_b) if not os.path.lexists(path)]
    for path in missing:
        result.problems.append(f"{path}: no final parameters (did the run finish?)")
    if missing:
        return
    fa, fb = SafetensorsReader(path_a), SafetensorsReader(path_b)
    try:
        pairs = match_keys(fa.keys(), fb.keys(), key_map, trained_names(result.metas))
        only_a, only_b = pairs.pop("__only_a__"), pairs.pop("__only_b__")
        result.params_only_in = {"a": only_a, "b": only_b}
        shapes = {k: fa.dtype_and_shape(k)[1] for k in only_a} | {k: fb.dtype_and_shape(k)[1] for k in only_b}
        only = {"a": only_a, "b": only_b}
        _say_one_sided(result, only, {"a": run_a.name, "b": run_b.name}, shapes, _path_dropped(pairs))
        for name, (key_a, key_b) in sorted(pairs.items()):
            (dtype_a, shape_a), (dtype_b, shape_b) = fa.dtype_and_shape(key_a), fb.dtype_and_shape(key_b)
            if shape_a != shape_b or dtype_a != dtype_b:
                result.problems.append(f"parameter {name}: {shape_a} {dtype_a} vs {shape_b} {dtype_b}")
                continue
            stats = Stats()
            stats.add_chunks(zip(fa.chunks(key_a, chunk), fb.chunks(key_b, chunk)), result.criterion, name)
            result.params.merge(stats)
            result.param_tensors.append(
                {
                    "name": name,
                    "shape": list(shape_a),
                    "equal": stats.all_equal,
                    "max_abs": stats.max_abs,
                    "max_rel": stats.max_rel,
                }
            )
    finally:
        fa.close()
        fb.close()


def sketch_pairing(metas: dict, key_map=None) -> dict | None:
    """{"rows": n, "columns": [...]}: the first n rows of both sides' per-step `layers` are the same parameters
    (meta.json `layers` names, paired as the final tensors are, in the same order), sketched with the same fields;
    `columns`, the projections among them. None where no row pairs so.

    Only a leading run of rows in the same positions: a tensor's directions depend on how many tensors of its
    size come before it, so rows after a tensor one side holds alone may project on other directions. Only the
    projections: float64 sums of the same sampled entries, equal wherever the parameters are, while a norm's
    reduction order follows the thread count. They show a layer moved that the per-step digest (the first and
    last tensors only) does not cover."""
    layers = [(metas.get(side) or {}).get("layers") for side in ("a", "b")]
    if not all(isinstance(x, dict) and isinstance(x.get("names"), list) for x in layers):
        return None
    fields = layers[0].get("fields")
    if not isinstance(fields, list) or fields != layers[1].get("fields"):
        return None
    names_a, names_b = layers[0]["names"], layers[1]["names"]
    pairs = match_keys(names_a, names_b, key_map, trained_names(metas))
    rows = 0
    while rows < min(len(names_a), len(names_b)) and pairs.get(names_a[rows]) == (names_a[rows], names_b[rows]):
        rows += 1
    columns = [i for i, f in enumerate(fields) if isinstance(f, str) and f.startswith("sketch")]
    if not rows or not columns:
        return None
    # every tensor's gradient norm, where every row pairs: the gradients both sides' optimizers saw, compared whole
    whole = rows == len(names_a) == len(names_b) and "grad_norm" in fields
    return {"rows": rows, "columns": columns, **({"grad_column": fields.index("grad_norm")} if whole else {})}


def hooks_norm_orders_apart(metas: dict, key_map=None) -> bool:
    """Both sides recorded by the hooks, whose gradient norm (where no clip_grad_norm_ measured it) is their own
    2-norm summed over the optimizer's param groups in order, and the two optimizers hold the same parameters in
    another order (another param-group partition): the same gradients then give norms a few ulps apart."""
    if not all(isinstance(metas.get(s), dict) and metas[s].get("recorded_by") == "hooks" for s in ("a", "b")):
        return False
    orders = [pairing.param_order(metas[s].get("optimizer")) for s in ("a", "b")]
    if not all(orders) or len(orders[0]) != len(orders[1]):
        return False
    pairs = match_keys(orders[0], orders[1], key_map)
    if pairs.get("__only_a__") or pairs.get("__only_b__"):
        return False  # other parameters: not an order alone
    return [pairs[n][1] for n in orders[0] if n in pairs] != orders[1]


def trained_names(metas: dict) -> tuple[set[str] | None, set[str] | None]:
    return pairing.optimizer_names(metas.get("a")), pairing.optimizer_names(metas.get("b"))


def _say_one_sided(result: Comparison, only: dict, names: dict, shapes: dict, path: str) -> None:
    """Tensors one final state holds alone: a note for the parameters that side's records prove
    untrained (a frozen teacher), for the tensors they prove no parameter (a buffer: a loss module's
    center the other side keeps outside its recorded model) and for those the other side's optimizer
    trains outside the module it recorded (a part of its model recorded: unrecorded there), a problem
    for the rest (trained on one side only, or not placed by the records). No note can hide a
    difference: what those tensors change is compared in what both sides hold."""
    rest = {}
    labels = dict(zip("ab", run_labels(result)))
    for side, other in (("a", "b"), ("b", "a")):
        meta = result.metas.get(side)
        label = labels[side]
        untrained, rest[side] = pairing.untrained_alone(only[side], meta)
        buffers, rest[side] = pairing.buffers_alone(rest[side], meta)
        unowned, rest[side] = pairing.unowned_elsewhere(rest[side], shapes, result.metas.get(other))
        if untrained:
            result.notes.append({"kind": "one_side_only", "message": pairing.alone_note(label, untrained, meta)})
        if buffers:
            result.notes.append({"kind": "one_side_only", "message": pairing.buffers_note(label, buffers)})
        if unowned:
            note = pairing.partial_model_note(label, labels[other], unowned, shapes, path)
            result.notes.append({"kind": "one_side_only", "message": note})
    if rest["a"] or rest["b"]:
        trained = [n for s in ("a", "b") for n in rest[s] if n in (pairing.optimizer_names(result.metas.get(s)) or ())]
        why = f" ({', '.join(trained[:5])} in that side's optimizer: trained on one side only)" if trained else ""
        result.problems.append(
            f"parameters on one side only: {rest['a'][:5]} in {names['a']}; {rest['b'][:5]} in {names['b']}{why}"
        )


def _path_dropped(pairs: dict) -> str:
    """The module path one side's final keys were paired under (`agent.network.` where `0.weight` is
    `agent.network.0.weight`), '' where the keys paired as they are or by wrapper and attribute prefixes."""
    for key_a, key_b in pairs.values():
        longer, shorter = (key_a, key_b) if len(key_a) > len(key_b) else (key_b, key_a)
        if longer != shorter and longer.endswith("." + shorter) and longer.count(".") - shorter.count(".") > 1:
            return longer[: -len(shorter)]
    return ""


def digest_pairing(run_a: RunFiles, run_b: RunFiles, metas: dict, key_map=None) -> dict[str, str]:
    """{"a:" / "b:" + a tensor's name: the name the pairing of the final states gives it}, for
    pairing the parameters the per-step digests sum (pairing.digest_positions); empty where a final
    state is missing (names then pair as they are)."""
    paths = [run.path / FINAL_PARAMS_FILE for run in (run_a, run_b)]
    if not all(os.path.lexists(p) for p in paths):
        return {}
    readers = [SafetensorsReader(p) for p in paths]
    try:
        pairs = match_keys(readers[0].keys(), readers[1].keys(), key_map, trained_names(metas))
    finally:
        for reader in readers:
            reader.close()
    pairs.pop("__only_a__"), pairs.pop("__only_b__")
    return {f"{side}:{key}": common for common, keys in pairs.items() for side, key in zip("ab", keys)}


# ---------------------------------------------------------------------------------------------
# the report: built here, once


def run_labels(comparison: Comparison, labels=None) -> tuple[str, str]:
    """The runs' names everywhere in the report: given, else their meta `side`, else (equal or
    missing sides) their directory names."""
    if labels:
        a, b = (str(x) for x in labels)
    else:
        sides = [(comparison.metas.get(s) or {}).get("side") for s in ("a", "b")]
        if all(sides) and sides[0] != sides[1]:
            a, b = sides
        else:
            a, b = Path(comparison.run_a).name or "a", Path(comparison.run_b).name or "b"
    if a == b:
        a, b = f"{a} (a)", f"{b} (b)"
    return a, b


# ---------------------------------------------------------------------------------------------
# a DDP run against its one-process reference (raw/reference.py)


def merged_records(run: RunFiles) -> Iterator[dict]:
    """A DDP run's ranks merged step by step into what one process training on the global batch
    records: indices concatenated in rank order, the loss as the mean of the ranks' losses (summed in
    float32 in rank order, as the reference sums them), rank 0's gradient norm and learning rate, and
    no batch digest."""
    if run.ranks_error is not None:
        raise run.ranks_error
    for records in zip_longest(*run.streams.values()):
        if any(r is None for r in records):
            raise TraceFormatError(f"{run.name}: ranks recorded different numbers of steps")
        total = np.float32(0)
        for record in records:
            total = np.float32(total + np.float32(record["loss"]))
        merged = dict(records[0])
        # a rank's batch digest is of its own shard: the global batch's cannot be rebuilt from them
        # (the merged indices still say which samples the step saw)
        merged.pop("batch_digest", None)
        merged["loss"] = float(np.float32(total / np.float32(len(records))))
        if all("indices" in r for r in records):
            merged["indices"] = [i for r in records for i in r["indices"]]
        yield merged


def one_process_records(run: RunFiles) -> Iterator[dict]:
    """The one-process reference's records (rank 0's)."""
    if run.ranks_error is not None:
        raise run.ranks_error
    if 0 not in run.streams:
        raise TraceFormatError(f"{run.path}: no rank0.jsonl trace file")
    yield from run.streams[0]


def compare_to_reference(
    ddp_run, reference_run, criterion: Criterion, key_map: Callable[[str], str] | None = None
) -> Comparison:
    """Compare a DDP run with the one-process reference. Not bitwise (float sums in another
    order): the report gives the measured differences, the verdict the given tolerance."""
    result = Comparison(str(ddp_run), str(reference_run), criterion)
    ddp, reference = read_run(ddp_run), read_run(reference_run)
    result.metas = {"a": ddp.meta, "b": reference.meta}
    streams = {"a": {"all": merged_records(ddp)}, "b": {"all": one_process_records(reference)}}
    result.walk = walk_streams(streams, criterion, names={"a": str(ddp_run), "b": str(reference_run)})
    compare_validation(ddp, reference, result)
    compare_params(ddp, reference, result, key_map)
    return result
