"""What `TraceRecorder.record()` and `finish()` take from their arguments, and the JSON each becomes.

The rule (docs/bad-input.md, the recorder): a value of the wrong kind handed to the call itself (a
loss that is None, a string or a vector; a string lr; a keyword that would overwrite a key the
recorder writes) is a misuse, refused here with a TypeError or ValueError naming the argument, before
the recorder changes anything, so the same call with the value mended goes through. What comes from
the user's data (indices a batch carries as strings or floats, an lr an optimizer holds as a
string) is never refused: it is left out of the record and said in meta.json `unrecorded`.
"""

from __future__ import annotations

import json
import math
import numbers
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ddp_parity.fingerprints import StagedDigest, batch_contents, digest_indices, frozen_names, param_digest_names
from ddp_parity.trace_files import MAX_EXACT_INT, as_step, may_hold_surrogates

INDEX_LIST_LIMIT = 4096  # longer index lists are stored as a digest plus a count

# keys of a step record the recorder writes itself: a keyword of record() must not overwrite them
# (`param_digest` and `layers` a loop may pass itself; record() takes them from model= otherwise)
RECORD_KEYS = (
    *("step", "epoch", "attempt", "loss", "lr", "grad_norm", "time_s"),
    *("indices", "indices_digest", "count", "batch_digest", "batch_undigested"),
)
# meta.json keys the recorder writes itself: extra_meta= and finish(**extra_meta) must not overwrite them
META_KEYS = (
    *("format_version", "side", "world_size", "backend", "versions", "config", "ranks", "started"),
    *("finished", "ended", "attempts", "attempt", "resumed_from_step", "optimizer", "layers", "tied"),
    *("unrecorded", "params_sha256", "buffers_sha256", "replicas_identical", "sharded", "sharding"),
    *("param_digest_names", "params_frozen"),
)


def checked_number(name: str, value: Any, required: bool) -> Any:
    """`loss`, `lr` or `grad_norm` as record() keeps it: a real Python number, a numpy scalar or a
    one-element real tensor (kept on its device, detached: no sync); None where it may be absent.
    NaN and infinities are values (recorded); anything else is a misuse of the call."""
    if value is None and not required:
        return None
    if isinstance(value, torch.Tensor):
        if value.numel() == 1 and (value.dtype.is_floating_point or _is_integer_dtype(value.dtype)):
            return value.detach()
        shown = f"a {str(value.dtype).removeprefix('torch.')} tensor of shape {list(value.shape)}"
    elif type(value).__module__ == "numpy" and getattr(value, "size", None) == 1 and not isinstance(value, bool):
        return checked_number(name, value.item(), required)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        return value if isinstance(value, (int, float)) else float(value)
    else:
        shown = f"{value!r:.60} ({type(value).__name__})"
    raise TypeError(
        f"TraceRecorder.record(): {name} must be a real number or a one-element real tensor, got {shown}"
        + ("; pass the step's reduced loss (loss.mean() of a per-sample loss)" if name == "loss" else "")
    )


def number_or_none(value: Any, name: str = "lr") -> tuple[Any, str | None]:
    """(a value the recorder read from the user's objects — an optimizer's lr — as record() keeps it,
    why it is left out (None when it is not)): never raises."""
    try:
        return checked_number(name, value, required=False), None
    except TypeError as exc:
        return None, str(exc).removeprefix("TraceRecorder.record(): ")


def recorded_indices(indices: Any) -> tuple[Any, str | None]:
    """(the indices as the trace keeps them: a flat integer tensor or list, why they are left out):
    an integer tensor or array of any shape is flattened (a collate of [[i], [j]]), one integer is a
    batch of one; strings, floats, booleans or objects are the data's own, not integers: left out
    (`unrecorded`), never refused."""
    if isinstance(indices, torch.Tensor):
        if not _is_integer_dtype(indices.dtype):
            return None, f"a {str(indices.dtype).removeprefix('torch.')} tensor, not integers"
        return indices.detach().reshape(-1), None
    if isinstance(indices, numbers.Integral) and not isinstance(indices, bool):
        return [int(indices)], None
    if type(indices) is list and all(type(value) is int for value in indices):
        return list(indices), None  # a sampler's indices: already what the trace keeps (checked fast, per step)
    if type(indices).__module__ == "numpy" and hasattr(indices, "tolist"):
        indices = indices.tolist()
    if isinstance(indices, (str, bytes, dict)) or not hasattr(indices, "__iter__"):
        return None, f"{type(indices).__name__} {indices!r:.60}, not a sequence of integers"
    flat: list = []
    for value in _flattened(list(indices)):
        if isinstance(value, torch.Tensor) and value.numel() == 1 and _is_integer_dtype(value.dtype):
            flat.append(value.detach().reshape(()))  # turned into a number when written (no sync now)
        elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
            flat.append(int(value))
        else:
            return None, f"holds {type(value).__name__} {value!r:.40}, not integers"
    return flat, None


def _flattened(values: list) -> list:
    out = []
    for value in values:
        if isinstance(value, (list, tuple)):
            out.extend(_flattened(list(value)))
        elif isinstance(value, torch.Tensor) and value.numel() != 1 and _is_integer_dtype(value.dtype):
            out.extend(value.reshape(-1).unbind())
        else:
            out.append(value)
    return out


def _is_integer_dtype(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool


def checked_extras(extra: dict) -> dict:
    """record()'s further keywords (each becomes a record key): none may be a key the recorder writes
    itself; `micro_batches` must be a whole number of 1 or more."""
    for key in extra:
        if key in RECORD_KEYS:
            raise ValueError(
                f"TraceRecorder.record(): {key}= names a key the recorder writes itself; "
                "pass it by its own argument, or record your value under another name"
            )
    if "micro_batches" in extra:
        count = as_step(extra["micro_batches"], "micro_batches")
        if count < 1:
            raise ValueError(f"TraceRecorder.record(): micro_batches must be 1 or more, got {count}")
        extra["micro_batches"] = count
    return {key: value.detach() if isinstance(value, torch.Tensor) else value for key, value in extra.items()}


def check_json(call: str, facts: Any) -> None:
    """config= / extra_meta=: a mapping meta.json can hold (objects are written as their str)."""
    try:
        json.dumps(facts, default=str, sort_keys=True)
        if not isinstance(facts, dict):
            raise TypeError(f"a {type(facts).__name__}, not a mapping")
    except (TypeError, ValueError, RecursionError) as exc:
        raise TypeError(
            f"TraceRecorder{call}: cannot be written to meta.json ({exc}); give a mapping of names to plain "
            "values (numbers, strings, lists, mappings with string keys)"
        ) from None


def check_meta_keys(call: str, extra_meta: dict) -> None:
    """extra_meta= / finish(**extra_meta): none may overwrite a key the recorder writes itself."""
    taken = sorted(key for key in extra_meta if key in META_KEYS)
    if taken:
        raise ValueError(
            f"TraceRecorder{call}: {', '.join(taken)} names a meta.json key the recorder writes itself; "
            "record your fact under another name"
        )


# ---------------------------------------------------------------------------------------------
# what record() takes from the user's objects: never raises; `note(what, why)` says what it could not
# take (TraceRecorder.note_unrecorded: meta.json `unrecorded`)

Note = Callable[[str, str], None]


def taken(note: Note, what: str, take, *args):
    """`take(*args)`, or None when the user's object does not let it (noted)."""
    try:
        return take(*args)
    except Exception as exc:  # noqa: BLE001 - a guest in the user's loop: record what can be taken
        note(what, f"{exc!r:.300}")
        return None


def note_parameter_sets(meta: dict, model: torch.nn.Module, note: Note, final: bool = False) -> None:
    """What pairs like with like when two sides record other parameter sets (compare/pairing.py): meta.json
    `param_digest_names` once (the parameters `param_digest` sums, its first and last), and at `final`
    `params_frozen` (those no gradient trains: a frozen teacher held on one side only is told apart by it)."""
    if final:
        meta["params_frozen"] = taken(note, "params_frozen", frozen_names, model) or []
    elif "param_digest_names" not in meta:
        names = taken(note, "param_digest_names", param_digest_names, model)
        if names is not None:
            meta["param_digest_names"] = names


def optimizer_lr(optimizer, note: Note) -> Any:
    """The lr of the optimizer's param group 0 (the one this step used, before the scheduler steps)."""
    lr, why = taken(note, "lr", lambda: number_or_none(optimizer.param_groups[0]["lr"])) or (None, None)
    if why:
        note("lr", f"the optimizer's param group 0 holds {why}")
    return lr


def take_indices(entry: dict, indices: Any, note: Note) -> None:
    kept, why = recorded_indices(indices)
    if why is None:
        entry["indices"] = kept
    else:
        note("indices", f"from step {entry['step']}: {why}; batch_digest stands in where recorded")


def take_batch(entry: dict, batch: Any, note: Note) -> None:
    """`batch_digest`, or where a part of the batch cannot be digested by value, `batch_undigested`
    (those parts) and no digest: a digest of a part of the batch must never make two batches equal."""
    digest, undigested = taken(note, "batch_digest", batch_contents, batch) or (None, [])
    if undigested:
        entry["batch_undigested"] = undigested[:16]
        shown = ", ".join(undigested[:4])
        note("batch_digest", f"from step {entry['step']}: {shown} cannot be digested by value (see batch_undigested)")
    elif digest is not None:
        entry["batch_digest"] = digest


def host_number(value: Any) -> float | int | None:
    """A loss the heartbeat may show without a device sync: a number, or a CPU tensor's value (read on
    the training thread, so that the heartbeat's thread never calls into torch)."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.device.type == "cpu" else None
    return value


def beyond_exact(value: Any) -> bool:
    """An integer a float would round (the format's numbers are exact up to 2**53)."""
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_EXACT_INT


# ---------------------------------------------------------------------------------------------
# as JSON


def on_device(entry: dict) -> bool:
    return any(
        isinstance(v, StagedDigest) or (isinstance(v, torch.Tensor) and v.device.type != "cpu") for v in entry.values()
    )


def to_json(entry: dict, note: Note) -> dict:
    """A pending record as JSON values: tensors as numbers (one device sync per flush), indices as
    integers (a long list as its digest and count), numbers the reader takes as exact: an integer
    loss, lr or gradient norm past 2**53 is written as the nearest float, past float's range as NaN,
    and noted (`note(what, why)`), never raised."""
    out = {}
    for key, value in entry.items():
        if isinstance(value, StagedDigest):
            value = value.hexdigest()
        elif isinstance(value, torch.Tensor):
            value = value.item() if value.numel() == 1 and key != "indices" else value.tolist()
        elif hasattr(value, "tolist"):  # a numpy scalar or array: Python numbers JSON can hold
            value = value.tolist()
        if key == "indices":
            value = [i.tolist() if hasattr(i, "tolist") else i for i in value]
            if len(value) > INDEX_LIST_LIMIT:
                out["indices_digest"], out["count"] = digest_indices(value), len(value)
                continue
        elif key in ("loss", "lr", "grad_norm") and type(value) is int and abs(value) > MAX_EXACT_INT:
            value = _as_float(key, value, entry.get("step"), note)
        out[key] = value
    return out


def _as_float(key: str, value: int, step: Any, note: Note) -> float:
    """An integer the format cannot hold exactly (its numbers are floats, exact up to 2**53)."""
    try:
        rounded, why = float(value), "an integer beyond 2**53, written as the nearest float"
    except OverflowError:
        rounded, why = math.nan, "an integer beyond float's range, written as NaN"
    note(key, f"from step {step}: {why}")
    return rounded


def json_line(record: dict, note: Note) -> str:
    """One record as a line; a value of the user's that JSON cannot hold at all (a circular
    structure) is left out and noted, never raised (other objects are written as their repr)."""
    try:
        text = json.dumps(record, default=repr)
    except (ValueError, TypeError, RecursionError) as exc:
        for key in list(record):
            try:
                json.dumps(record[key], default=repr)
            except (ValueError, TypeError, RecursionError):
                note(f"record key {key!r}", f"{exc!r:.200}")
                del record[key]
        text = json.dumps(record, default=repr)
    return plain_text(text, note, "strings of the trace", f"from step {record.get('step')}: ") + "\n"


def plain_text(text: str, note: Note, what: str, where: str = "") -> str:
    """JSON `text` as the reader takes it: a string holding a lone surrogate (a name decoded from bytes
    that were not UTF-8, as os.fsdecode does) is no text a reader may accept; it is written with each
    such surrogate as the six characters of its escape, and noted. Rare: looked for before paying."""
    if not may_hold_surrogates(text):
        return text
    value, changed = _without_surrogates(json.loads(text))
    if changed:
        note(what, f"{where}strings holding lone surrogates (not UTF-8 text), written with them escaped as \\udXXX")
    return json.dumps(value)


def _without_surrogates(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8"), True
        return value, False
    if isinstance(value, dict):
        pairs = [(_without_surrogates(k), _without_surrogates(v)) for k, v in value.items()]
        return {k: v for (k, _), (v, _) in pairs}, any(ck or cv for (_, ck), (_, cv) in pairs)
    if isinstance(value, list):
        items = [_without_surrogates(v) for v in value]
        return [v for v, _ in items], any(c for _, c in items)
    return value, False


def records_as_json(pending: list[dict], note: Note) -> list[dict]:
    """The pending records as JSON values; one whose values cannot be read (a tensor that fails to give
    its number) is noted and left out, never kept to fail every later flush."""
    out = []
    for entry in pending:
        try:
            out.append(to_json(entry, note))
        except Exception as exc:  # noqa: BLE001 - a guest in the user's loop: say what was not recorded
            note("step records", f"from step {entry.get('step')}: {exc!r:.300}")
    return out


def meta_as_json(meta: dict, note: Note) -> dict:
    """meta.json's facts as the reader takes them: a path or a name of the user's that is not UTF-8
    text is written escaped (`plain_text`), and noted."""
    text = json.dumps(meta, default=str)
    return json.loads(plain_text(text, note, "strings of meta.json")) if may_hold_surrogates(text) else meta


def text_of(value: str) -> str:
    """A string as the reader takes it: lone surrogates written as their escapes."""
    return _without_surrogates(value)[0]


# ---------------------------------------------------------------------------------------------
# start()'s arguments


def resume_step(keep_steps_upto: int | None, resumed_from_step: int | None) -> int | None:
    """start()'s resume step from its two names: the older one warns, and the two must agree."""
    if keep_steps_upto is None:
        return resumed_from_step
    warnings.warn(
        "TraceRecorder.start(keep_steps_upto=...) is deprecated; pass resumed_from_step=... (same meaning)",
        DeprecationWarning,
        stacklevel=3,
    )
    if resumed_from_step is not None and keep_steps_upto != resumed_from_step:
        raise ValueError(
            f"start(): keep_steps_upto={keep_steps_upto} and resumed_from_step={resumed_from_step} disagree; "
            "pass resumed_from_step only"
        )
    return keep_steps_upto
