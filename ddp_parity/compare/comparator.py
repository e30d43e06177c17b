"""Compare two runs from their traces: same steps, same samples, then losses (and the other
per-step figures), validation, and final parameters tensor by tensor.

Usable on any two run directories (`compare_runs(a, b)`); `compare/run.py` is the command line.
The default criterion is bitwise equality; with tolerances a value passes when
|a - b| <= atol + rtol * |b| (b is the second run).
"""

from __future__ import annotations

import json
import math
import struct
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

import numpy as np
import torch

from ddp_parity.trace import FINAL_PARAMS_FILE, TraceFormatError, iter_records, read_meta, read_validation, trace_ranks

# per-step quantities in causal order: what a step consumed, what it computed, what it applied
STEP_QUANTITIES = ("samples", "loss", "grad_norm", "lr", "param_digest")


@dataclass
class Criterion:
    rtol: float = 0.0
    atol: float = 0.0

    @property
    def exact(self) -> bool:
        return self.rtol == 0.0 and self.atol == 0.0

    def describe(self):
        return "exact" if self.exact else {"rtol": self.rtol, "atol": self.atol}

    def passes(self, a: float, b: float) -> bool:
        if self.exact:
            return a == b or (math.isnan(a) and math.isnan(b))
        return abs(a - b) <= self.atol + self.rtol * abs(b)


@dataclass
class Stats:
    """How one quantity compared: counts and the largest differences."""

    compared: int = 0
    equal: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    first: dict | None = None

    def add(self, a: float, b: float, criterion: Criterion, where: dict) -> bool:
        self.compared += 1
        ok = criterion.passes(a, b)
        self.equal += ok
        diff = abs(a - b) if not (math.isnan(a) or math.isnan(b)) else math.inf
        self.max_abs = max(self.max_abs, diff)
        rel = diff / abs(b) if b != 0 else (0.0 if diff == 0 else math.inf)
        self.max_rel = max(self.max_rel, rel)
        if not ok and self.first is None:
            self.first = {**where, "a": a, "b": b}
        return ok

    def add_tensor(
        self, a: torch.Tensor, b: torch.Tensor, criterion: Criterion, name: str, chunk: int = 1 << 22
    ) -> None:
        """Compare two tensors in chunks, so extra memory stays a few chunks, not a tensor copy."""
        self.add_chunks(zip(a.reshape(-1).split(chunk), b.reshape(-1).split(chunk)), criterion, name)

    def add_chunks(self, chunks: Iterable[tuple[torch.Tensor, torch.Tensor]], criterion: Criterion, name: str) -> None:
        """Compare one pair of tensors given as consecutive flat chunks of equal lengths."""
        self.compared += 1
        ok, max_abs, max_rel, first, start = True, 0.0, 0.0, None, 0
        for ca, cb in chunks:
            if not (criterion.exact and torch.equal(ca, cb)):  # equal: the common case, and the cheapest
                da, db = ca.double(), cb.double()
                diff = (da - db).abs()
                bad = ~(diff <= criterion.atol + criterion.rtol * db.abs()) if not criterion.exact else ca != cb
                diff = torch.where(torch.isnan(da) & torch.isnan(db), torch.zeros_like(diff), diff)
                rel = torch.where(diff == 0, torch.zeros_like(diff), diff / db.abs())
                max_abs = max(max_abs, diff.max().item())
                max_rel = max(max_rel, rel.max().item())
                if bool(bad.any()):
                    ok = False
                    if first is None:
                        at = int(bad.nonzero()[0])
                        first = {"tensor": name, "element": start + at, "a": ca[at].item(), "b": cb[at].item()}
                del da, db, diff, bad, rel
            start += ca.numel()
        self.equal += ok
        self.max_abs, self.max_rel = max(self.max_abs, max_abs), max(self.max_rel, max_rel)
        if not ok and self.first is None:
            self.first = first

    def merge(self, other: Stats) -> None:
        self.compared += other.compared
        self.equal += other.equal
        self.max_abs, self.max_rel = max(self.max_abs, other.max_abs), max(self.max_rel, other.max_rel)
        self.first = self.first or other.first

    @property
    def all_equal(self) -> bool:
        return self.equal == self.compared

    def summary(self) -> dict:
        return {
            "compared": self.compared,
            "equal": self.equal,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "first_divergence": self.first,
        }


@dataclass
class Comparison:
    run_a: str
    run_b: str
    criterion: Criterion
    steps: dict = field(default_factory=dict)  # structure: ranks, step counts, mismatch
    quantities: dict = field(default_factory=dict)  # name -> Stats
    validation: Stats = field(default_factory=Stats)
    params: Stats = field(default_factory=Stats)
    param_tensors: list = field(default_factory=list)  # per-tensor rows
    params_only_in: dict = field(default_factory=dict)
    first_divergence: dict | None = None
    curves: dict = field(default_factory=dict)  # for the plot: step -> mean loss per side
    timing: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)  # structural messages (step counts, keys)

    @property
    def equivalent(self) -> bool:
        return (
            not self.problems
            and all(s.all_equal for s in self.quantities.values())
            and self.validation.all_equal
            and self.params.all_equal
            and self.params.compared > 0
        )

    def to_dict(self) -> dict:
        return {
            "verdict": "equivalent" if self.equivalent else "different",
            "criterion": self.criterion.describe(),
            "first_divergence": self.first_divergence,
            "steps": self.steps,
            "problems": self.problems,
            "losses": self.quantities["loss"].summary() if "loss" in self.quantities else None,
            "per_step": {k: v.summary() for k, v in self.quantities.items()},
            "validation": self.validation.summary(),
            "params": {**self.params.summary(), "only_in": self.params_only_in, "tensors": self.param_tensors},
            "timing": self.timing,
            "runs": {"a": self.run_a, "b": self.run_b},
        }


# ---------------------------------------------------------------------------------------------


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    criterion: Criterion = Criterion(),
    key_map: Callable[[str], str] | None = None,
) -> Comparison:
    """Compare two finished runs; raises TraceFormatError for a run that cannot be read."""
    read_meta(run_a), read_meta(run_b)  # refuses unknown format versions first
    result = Comparison(str(run_a), str(run_b), criterion)
    result.quantities = {name: Stats() for name in STEP_QUANTITIES}
    compare_steps(run_a, run_b, result)
    compare_validation(run_a, run_b, result)
    compare_params(run_a, run_b, result, key_map)
    if result.first_divergence is None and result.problems:
        result.first_divergence = {"quantity": "steps", "message": result.problems[0]}
    if result.first_divergence is None and not result.params.all_equal:
        result.first_divergence = {"quantity": "params", **(result.params.first or {})}
    return result


def compare_steps(run_a, run_b, result: Comparison) -> None:
    ranks_a, ranks_b = trace_ranks(run_a), trace_ranks(run_b)
    result.steps = {"ranks_a": ranks_a, "ranks_b": ranks_b, "steps_a": {}, "steps_b": {}}
    if ranks_a != ranks_b:
        result.problems.append(f"the runs have different ranks: {ranks_a} vs {ranks_b}")
    sums = {"a": LossSums(), "b": LossSums()}
    times: dict[str, array] = {"a": array("d"), "b": array("d")}
    fast = result.criterion.exact  # under the exact criterion equal records need one dict comparison
    earliest: dict | None = None
    for rank in sorted(set(ranks_a) & set(ranks_b)):
        count_a = count_b = 0
        equal_counts = dict.fromkeys(STEP_QUANTITIES, 0)
        for rec_a, rec_b in zip_longest(iter_records(run_a, rank), iter_records(run_b, rank)):
            for side, rec, position in (("a", rec_a, count_a), ("b", rec_b, count_b)):
                if rec is not None:
                    sums[side].add(position, rec["step"], rec["loss"])
                    time_s = rec.pop("time_s", None)  # wall time: summarised, never compared
                    if rank == 0 and time_s is not None:
                        times[side].append(time_s)
            count_a += rec_a is not None
            count_b += rec_b is not None
            if rec_a is None or rec_b is None:
                continue
            if rec_a["step"] != rec_b["step"]:
                result.problems.append(f"rank {rank}: step numbers part ways: {rec_a['step']} vs {rec_b['step']}")
                break
            if fast and rec_a == rec_b:  # every field equal (a NaN never is: it takes the full path)
                equal_counts["samples"] += 1
                for name in STEP_QUANTITIES[1:]:
                    equal_counts[name] += rec_a.get(name) is not None
                continue
            divergence = compare_step(rec_a, rec_b, rank, result)
            if divergence and (earliest is None or divergence["step"] < earliest["step"]):
                earliest = divergence
        for name, n in equal_counts.items():
            result.quantities[name].compared += n
            result.quantities[name].equal += n
        result.steps["steps_a"][rank], result.steps["steps_b"][rank] = count_a, count_b
        if count_a != count_b:
            result.problems.append(f"rank {rank}: {count_a} steps in {run_a} but {count_b} in {run_b}")
    result.first_divergence = earliest
    result.curves = {side: per.means() for side, per in sums.items()}
    result.timing = {"a": step_time_summary(times["a"]), "b": step_time_summary(times["b"])}


class LossSums:
    """Per step, the loss summed over ranks (for the plot), in flat arrays: 24 bytes a step where a
    dict of lists takes several hundred. Ranks record the same steps in the same order, so record i
    of every rank adds into slot i; a record out of line goes to a dict."""

    def __init__(self):
        self.steps, self.totals, self.counts = array("q"), array("d"), array("q")
        self.other: dict[int, list] = {}

    def add(self, position: int, step: int, loss: float) -> None:
        if position < len(self.steps) and self.steps[position] == step:
            self.totals[position] += loss
            self.counts[position] += 1
        elif position == len(self.steps) and not self.other:
            self.steps.append(step)
            self.totals.append(0.0 + loss)
            self.counts.append(1)
        else:
            entry = self.other.setdefault(step, [0.0, 0])
            entry[0] += loss
            entry[1] += 1

    def means(self, max_points: int = 20_000) -> dict[int, float]:
        """step -> mean loss over ranks, in step order; beyond `max_points` steps every k-th step
        and the last (a plot shows no more, and a dict of a million steps takes a hundred MB)."""
        steps, totals, counts = self.steps, self.totals, self.counts
        if self.other or any(a >= b for a, b in zip(steps, steps[1:])):  # out of line: merge by step
            per: dict[int, list] = {}
            for step, total, n in [*zip(steps, totals, counts), *((k, v[0], v[1]) for k, v in self.other.items())]:
                entry = per.setdefault(step, [0.0, 0])
                entry[0], entry[1] = entry[0] + total, entry[1] + n
            steps = array("q", sorted(per))
            totals = array("d", (per[s][0] for s in steps))
            counts = array("q", (per[s][1] for s in steps))
        stride = max(1, math.ceil(len(steps) / max_points))
        kept = list(range(0, len(steps), stride))
        if steps and kept[-1] != len(steps) - 1:
            kept.append(len(steps) - 1)
        return {steps[i]: totals[i] / counts[i] for i in kept}


def compare_step(rec_a: dict, rec_b: dict, rank: int, result: Comparison) -> dict | None:
    """Compare one step on one rank; return its first divergence in causal order, if any."""
    where = {"step": rec_a["step"], "epoch": rec_a.get("epoch"), "rank": rank}
    first = None
    samples_a, samples_b = sample_key(rec_a), sample_key(rec_b)
    stats = result.quantities["samples"]
    stats.compared += 1
    if samples_a == samples_b:
        stats.equal += 1
    else:
        first = {**where, "quantity": "samples", "a": short(samples_a), "b": short(samples_b)}
        stats.first = stats.first or first
    for name in STEP_QUANTITIES[1:]:
        a, b = rec_a.get(name), rec_b.get(name)
        if a is None or b is None:
            continue
        if isinstance(a, list):  # param_digest: compared element by element, counted once
            worst = max(range(len(a)), key=lambda i: abs(a[i] - b[i])) if len(a) == len(b) and a else 0
            ok = (
                len(a) == len(b)
                and result.quantities[name].add(float(a[worst]), float(b[worst]), result.criterion, where)
                and all(result.criterion.passes(float(x), float(y)) for x, y in zip(a, b))
            )
        else:
            ok = result.quantities[name].add(float(a), float(b), result.criterion, where)
        if not ok and first is None:
            first = {**where, "quantity": name, "a": a, "b": b}
    return first


def sample_key(record: dict):
    for key in ("indices", "indices_digest", "batch_digest"):
        if key in record:
            return record[key]
    return None


def short(value, limit: int = 12):
    if isinstance(value, list) and len(value) > limit:
        return value[:limit] + ["..."]
    return value


def step_time_summary(times: array, warmup: int = 5) -> dict:
    kept = np.frombuffer(times, dtype=np.float64) if len(times) else np.empty(0)
    kept = kept[warmup:] if len(kept) > warmup else kept
    if not len(kept):
        return {"median_s": None, "steps": 0}
    middle = len(kept) // 2  # the same element as sorted(kept)[middle], without a list of floats
    return {"median_s": float(np.partition(kept, middle)[middle]), "steps": len(kept)}


def compare_validation(run_a, run_b, result: Comparison) -> None:
    val_a, val_b = read_validation(run_a), read_validation(run_b)
    if len(val_a) != len(val_b):
        result.problems.append(f"{len(val_a)} validation results in {run_a} but {len(val_b)} in {run_b}")
    for rec_a, rec_b in zip(val_a, val_b):
        for key in sorted(set(rec_a) | set(rec_b)):
            if key in ("epoch", "step"):
                continue
            if key not in rec_a or key not in rec_b:
                result.problems.append(f"validation metric {key!r} is recorded by one run only")
                continue
            result.validation.add(
                float(rec_a[key]),
                float(rec_b[key]),
                result.criterion,
                {"epoch": rec_a.get("epoch"), "step": rec_a.get("step"), "metric": key},
            )


# ---------------------------------------------------------------------------------------------
# final parameters, streamed one tensor at a time from memory-mapped safetensors


def strip_known_prefixes(key: str) -> str:
    return key[len("module.") :] if key.startswith("module.") else key


def match_keys(keys_a: list[str], keys_b: list[str], key_map: Callable[[str], str] | None) -> dict[str, str]:
    """Pair keys of run A with keys of run B: after `module.` and a user mapping, and, where the
    sets still differ, after dropping one leading component on the side that has one more (a
    LightningModule holds the network as an attribute: `net.` + the raw key)."""
    norm_a = {(key_map or strip_known_prefixes)(k): k for k in keys_a}
    norm_b = {(key_map or strip_known_prefixes)(k): k for k in keys_b}
    if set(norm_a) != set(norm_b):
        for shorter, longer in ((norm_a, norm_b), (norm_b, norm_a)):
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
    return {norm_a[k]: (norm_a[k], norm_b[k]) for k in norm_a if k in norm_b} | {
        "__only_a__": sorted(norm_a[k] for k in norm_a if k not in norm_b),
        "__only_b__": sorted(norm_b[k] for k in norm_b if k not in norm_a),
    }


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
}


class SafetensorsReader:
    """A safetensors file read a chunk at a time with plain reads into one reused buffer, so a
    comparison holds a few chunks whatever the tensor or file size. (safe_open maps the file and
    every page read stays resident while it is mapped: peak RSS reached both files' size; and
    get_tensor copies each tensor whole.) The format: an 8-byte little-endian header length, a
    JSON header (dtype, shape, data_offsets per tensor), then the data."""

    def __init__(self, path: Path):
        self.path = path
        self.file = open(path, "rb")
        try:
            (length,) = struct.unpack("<Q", self.file.read(8))
            self.header = json.loads(self.file.read(length))
        except (struct.error, ValueError) as err:
            self.file.close()
            raise TraceFormatError(f"{path}: not a safetensors file ({err})") from None
        self.header.pop("__metadata__", None)
        self.data_start = 8 + length

    def keys(self) -> list[str]:
        return list(self.header)

    def dtype_and_shape(self, key: str) -> tuple[object, tuple]:
        info = self.header[key]
        return SAFETENSORS_DTYPES.get(info["dtype"], info["dtype"]), tuple(info["shape"])

    def chunks(self, key: str, chunk: int) -> Iterator[torch.Tensor]:
        dtype, shape = self.dtype_and_shape(key)
        begin, end = self.header[key]["data_offsets"]
        buffer = torch.empty(min(chunk, max(math.prod(shape), 1)), dtype=dtype)
        itemsize = buffer.element_size()
        self.file.seek(self.data_start + begin)
        for offset in range(0, end - begin, chunk * itemsize):
            n = min(chunk * itemsize, end - begin - offset) // itemsize
            view = buffer[:n]
            if self.file.readinto(view.view(torch.uint8).numpy()) != n * itemsize:
                raise TraceFormatError(f"{self.path}: tensor {key} is cut off")
            yield view

    def close(self) -> None:
        self.file.close()


def compare_params(run_a, run_b, result: Comparison, key_map=None, chunk: int = 1 << 20) -> None:
    path_a, path_b = Path(run_a) / FINAL_PARAMS_FILE, Path(run_b) / FINAL_PARAMS_FILE
    for path in (path_a, path_b):
        if not path.is_file():
            result.problems.append(f"{path}: no final parameters (did the run finish?)")
    if result.problems and not (path_a.is_file() and path_b.is_file()):
        return
    fa, fb = SafetensorsReader(path_a), SafetensorsReader(path_b)
    try:
        pairs = match_keys(fa.keys(), fb.keys(), key_map)
        only_a, only_b = pairs.pop("__only_a__"), pairs.pop("__only_b__")
        result.params_only_in = {"a": only_a, "b": only_b}
        if only_a or only_b:
            result.problems.append(f"parameters on one side only: {only_a[:5]} in {run_a}; {only_b[:5]} in {run_b}")
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


# ---------------------------------------------------------------------------------------------
# a DDP run against its one-process reference (raw/train.py --reference)


def merged_records(run_dir) -> Iterator[dict]:
    """A DDP run's ranks merged step by step into what one process training on the global batch
    records: indices concatenated in rank order, the loss as the mean of the ranks' losses (summed in
    float32 in rank order, as the reference sums them), rank 0's gradient norm and learning rate."""
    ranks = trace_ranks(run_dir)
    for records in zip_longest(*(iter_records(run_dir, r) for r in ranks)):
        if any(r is None for r in records):
            raise TraceFormatError(f"{run_dir}: ranks recorded different numbers of steps")
        total = np.float32(0)
        for record in records:
            total = np.float32(total + np.float32(record["loss"]))
        merged = dict(records[0])
        merged["loss"] = float(np.float32(total / np.float32(len(records))))
        if all("indices" in r for r in records):
            merged["indices"] = [i for r in records for i in r["indices"]]
        yield merged


def compare_to_reference(
    ddp_run, reference_run, criterion: Criterion, key_map: Callable[[str], str] | None = None
) -> Comparison:
    """Compare a DDP run with the one-process reference. Not bitwise (float sums in another
    order): the report gives the measured differences, the verdict the given tolerance."""
    read_meta(ddp_run), read_meta(reference_run)
    result = Comparison(str(ddp_run), str(reference_run), criterion)
    result.quantities = {name: Stats() for name in STEP_QUANTITIES}
    earliest = None
    count_a = count_b = 0
    for rec_a, rec_b in zip_longest(merged_records(ddp_run), iter_records(reference_run, 0)):
        count_a += rec_a is not None
        count_b += rec_b is not None
        if rec_a is None or rec_b is None:
            continue
        result.curves.setdefault("a", {})[rec_a["step"]] = rec_a["loss"]
        result.curves.setdefault("b", {})[rec_b["step"]] = rec_b["loss"]
        divergence = compare_step(rec_a, rec_b, "all", result)
        earliest = earliest or divergence
    result.steps = {"steps_a": {"all": count_a}, "steps_b": {"all": count_b}}
    if count_a != count_b:
        result.problems.append(f"{count_a} global steps in {ddp_run} but {count_b} in {reference_run}")
    result.first_divergence = earliest
    compare_validation(ddp_run, reference_run, result)
    compare_params(ddp_run, reference_run, result, key_map)
    if result.first_divergence is None and not result.params.all_equal:
        result.first_divergence = {"quantity": "params", **(result.params.first or {})}
    return result
