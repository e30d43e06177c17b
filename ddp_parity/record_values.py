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
import numbers
from collections.abc import Callable
from typing import Any

import torch

from ddp_parity.fingerprints import StagedDigest, batch_contents, digest_indices
from ddp_parity.trace_files import MAX_EXACT_INT, as_step

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


def number_or_none(value: Any) -> tuple[Any, str | None]:
    """(a value the recorder read from the user's objects — an optimizer's lr — as record() keeps it,
    why it is left out (None when it is not)): never raises."""
    try:
        return checked_number("lr", value, required=False), None
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


def to_json(entry: dict) -> dict:
    """A pending record as JSON values: tensors as numbers (one device sync per flush), indices as
    integers (a long list as its digest and count), numbers the reader takes as exact."""
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
            value = float(value)  # an integer loss beyond 2**53: the nearest float, as the format's numbers are
        out[key] = value
    return out


def json_line(record: dict, note: Note) -> str:
    """One record as a line; a value of the user's that JSON cannot hold at all (a circular
    structure) is left out and noted, never raised (other objects are written as their repr)."""
    try:
        return json.dumps(record, default=repr) + "\n"
    except (ValueError, TypeError, RecursionError) as exc:
        for key in list(record):
            try:
                json.dumps(record[key], default=repr)
            except (ValueError, TypeError, RecursionError):
                note(f"record key {key!r}", f"{exc!r:.200}")
                del record[key]
        return json.dumps(record, default=repr) + "\n"
