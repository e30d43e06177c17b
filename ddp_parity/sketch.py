"""Per-layer values that let two runs be measured apart, not only found unequal (meta.json `layers`,
trace records' `layers`): for every parameter tensor, each step, its 2-norm, its gradient's 2-norm
and a sketch — its projections on a few fixed random directions.

A direction is sparse (Achlioptas; Li, Hastie and Church's very sparse random projections): ENTRIES
entries of the flattened tensor, drawn with replacement, each with a random sign, scaled by
sqrt(numel / ENTRIES) so that the mean square of the projections estimates the squared norm. The draws
depend only on the tensor's size and how many tensors of that size came before it, never on the run
or the names (a LightningModule's `net.` prefix), so the twins, and two runs of one model, project on
the same directions. A projection is linear: the sketch of a difference of
two runs (or of one step's update) is the difference of their sketches, and its size relative to the
sketch's gives a layer's relative distance without storing weights.

Projections are float64 sums of float32 entries, norms in the tensors' own precision; they are meant
for distances, never for bitwise equality (the per-step digests are for that), so their own last bits
may differ between kernel sets.
"""

from __future__ import annotations

import itertools
import math
import zlib

import torch

from ddp_parity.fingerprints import normalised_name, unwrap
from ddp_parity.sharding import full_tensor, grad_norms, loaded_class

DIRECTIONS = 4
ENTRIES = 512
FLAT_LIMIT = 2**20  # a model of at most this many entries is copied whole to be sampled (a few MiB)
# grad_maxabs and grad_l1 last, in the order they were added: older traces keep their columns
FIELDS = ("norm", "grad_norm", *(f"sketch{k}" for k in range(DIRECTIONS)), "grad_maxabs", "grad_l1")


def sketchable(parameter: torch.Tensor) -> bool:
    """A real floating-point tensor with entries: the others (complex, integer, boolean, empty) have no
    norm and projection of this kind; the recorder notes them in meta.json `unrecorded` and goes on."""
    return parameter.dtype.is_floating_point and parameter.numel() > 0


class LayerSketch:
    """The fixed directions of one model's parameters, and the per-step values they give, in a few
    calls for all the tensors together (a step's fixed cost is the number of torch calls on a small
    model, the passes over the tensors on a large one): for a small model one norm call for the
    parameters, one for the gradients, one gather of the sampled entries; one product and sum for
    every projection. Given
    DTensors it gathers each whole, one at a time (the recorder does not call it for an FSDP2 model
    yet: see trace.py).

    `tails`: the gradients' largest |g| and 1-norm (`grad_maxabs`, `grad_l1`), which prove an infinity
    norm or a 1-norm the program measured (compare/relations.py). Two more passes over the gradients,
    the 1-norm's kernel the slowest of all (a float32 sum with no vector path on a CPU: it must be the
    kernel clip_grad_norm_ uses, whose result it is compared with); without them the fields stop at
    the projections, as in older traces."""

    def __init__(self, named_parameters: list[tuple[str, torch.Tensor]], tails: bool = True):
        """`named_parameters`: sketchable ones (see `sketchable`), at least one."""
        self.names = [name for name, _ in named_parameters]
        self.shapes = [p.shape for _, p in named_parameters]
        self.tails = tails
        self.fields = FIELDS if tails else FIELDS[: FIELDS.index("grad_maxabs")]
        device = named_parameters[0][1].device
        seen: dict[int, int] = {}
        indexes, signs, scales, offset = [], [], [], 0
        for _, p in named_parameters:
            ordinal = seen[p.numel()] = seen.get(p.numel(), -1) + 1
            index, sign = _directions(p.numel(), ordinal)
            indexes.append(index.reshape(-1))
            signs.append(sign)
            scales.append(math.sqrt(p.numel() / ENTRIES))
            offset += p.numel()
        self._indexes = [index.to(device) for index in indexes]
        # a small model's tensors are copied into one and sampled by one gather (the same entries)
        starts = itertools.accumulate([p.numel() for _, p in named_parameters[:-1]], initial=0)
        self._flat_index = (
            torch.cat([index + start for index, start in zip(indexes, starts)]).to(device)
            if offset <= FLAT_LIMIT
            else None
        )
        self._signs = torch.stack(signs).reshape(-1, ENTRIES).to(device)  # (parameters * DIRECTIONS, ENTRIES)
        self._scales = torch.tensor(scales, dtype=torch.float64, device=device)

    def facts(self) -> dict:
        """meta.json `layers`: the parameter names (rows of every record's `layers`) and the fields."""
        return {"names": self.names, "fields": list(self.fields), "directions": DIRECTIONS, "entries": ENTRIES}

    def __call__(self, parameters: list[torch.Tensor], known: dict | None = None) -> torch.Tensor:
        """(parameters x fields) float64 on the parameters' device: no sync until the trace is written.
        A parameter without a gradient gets NaN as its gradient norm, max-abs and 1-norm (the largest |g|
        and the sum of |g|: with each tensor's, the infinity norm or the 1-norm of the gradients is proved,
        compare/relations.py).

        A gradient's 2-norm is taken by the kernel get_total_norm uses (sharding.grad_norms), so that it
        matches the gradient norm a program measures. A small model's tensors are measured by a call for
        all of them (torch._foreach_norm), a large one's gradients one at a time, each measure while the
        gradient is in the cache (a pass over all of them per measure would read them from memory every
        time: half again the time for a 10M-parameter model), the same values. `known`: {id(grad):
        (grad, its version, its 2-norm)} measured before (the gradient norm the optimizer saw,
        sharding.total_grad_norm_parts): a gradient still that tensor, unchanged since, is not measured again."""
        with torch.no_grad():
            # DTensors only where torch.distributed.tensor is loaded (looked up once per call, not per tensor)
            sharded = loaded_class("torch.distributed.tensor", "DTensor") is not None
            params = [full_tensor(p) for p in parameters] if sharded else list(parameters)
            with_grad = [i for i, p in enumerate(parameters) if p.grad is not None]
            grads = [full_tensor(parameters[i].grad) if sharded else parameters[i].grad for i in with_grad]
            if self._flat_index is not None:
                norms = [torch._foreach_norm(params), grad_norms(grads) if grads else []]
                if self.tails:
                    norms += [_largest_abs(grads), torch._foreach_norm(grads, 1)] if grads else [[], []]
                sampled = torch.cat([p.reshape(-1) for p in params]).index_select(0, self._flat_index)
            else:
                norms = [torch._foreach_norm(params), *self._one_by_one(grads, known or {})]
                sampled = torch.stack([p.reshape(-1).index_select(0, i) for p, i in zip(params, self._indexes)])
            columns = [_column(norms[0])] + [self._rows(values, with_grad) for values in norms[1:]]
            # each direction's signed sum of its entries (a product and a sum: a batched matrix product of
            # rows this short costs four times as much on a CPU)
            sampled = sampled.to(torch.float64).reshape(-1, ENTRIES)
            projections = (
                torch.linalg.vecdot(sampled, self._signs).reshape(len(params), DIRECTIONS) * self._scales[:, None]
            )
            tails = [torch.stack(columns[2:], dim=1)] if self.tails else []
            return torch.cat([torch.stack(columns[:2], dim=1), projections, *tails], dim=1)

    def _one_by_one(self, grads: list[torch.Tensor], known: dict) -> list[list[torch.Tensor]]:
        """Each gradient's 2-norm and (`tails`) largest |g| and 1-norm, a gradient at a time."""
        measures = [[], [], []] if self.tails else [[]]
        for grad in grads:
            measures[0].append(_known_norm(known, grad))
            if self.tails:
                low, high = torch.aminmax(grad)
                measures[1].append(torch.maximum(-low, high).abs())  # abs: +0.0 for zeros, as _largest_abs
                # as clip_grad_norm_(norm_type=1) measures each tensor (its kernel's float32 sum), so theirs match
                measures[2].append(torch.linalg.vector_norm(grad, 1))
        return measures

    def _rows(self, values: list[torch.Tensor], with_grad: list[int]) -> torch.Tensor:
        """One value per gradient, in the rows' order; NaN where there is none."""
        if len(with_grad) == len(self.names):
            return _column(values)
        column = torch.full((len(self.names),), math.nan, dtype=torch.float64, device=self._scales.device)
        if with_grad:
            column[with_grad] = _column(values).to(column.device)
        return column


class ModelSketch:
    """A model's LayerSketch followed through the run: the rows are its sketchable parameters at the
    first step (the others noted as unrecorded); a parameter added later is left out of the rows, one
    removed or reshaped ends the sketch (the rows would no longer be the same tensors). `note(what,
    why)` says what is unrecorded (TraceRecorder.note_unrecorded)."""

    def __init__(self, sketch: LayerSketch, note):
        self.sketch, self._note = sketch, note
        self._ids: list[int] = []  # the model's parameters (identities) when the rows were placed
        self._rows: list[int] = []  # for each row, the parameter's position among them
        self._ended = False

    @classmethod
    def of(cls, model: torch.nn.Module, note, tails: bool = True) -> ModelSketch | None:
        named = [(normalised_name(n), p) for n, p in unwrap(model).named_parameters()]
        left_out = [name for name, p in named if not sketchable(p)]
        if left_out:
            shown = ", ".join(left_out[:8]) + (f" and {len(left_out) - 8} more" if len(left_out) > 8 else "")
            note("layers", f"{shown}: not real floating point, or empty; no norm or sketch")
        kept = [(name, p) for name, p in named if sketchable(p)]
        return cls(LayerSketch(kept, tails), note) if kept else None

    def facts(self) -> dict:
        return self.sketch.facts()

    def values(self, model: torch.nn.Module, step: int | None, known: dict | None = None) -> torch.Tensor | None:
        """This step's rows (LayerSketch.__call__), None once the sketch has ended."""
        if self._ended:
            return None
        params = list(unwrap(model).parameters())
        if [id(p) for p in params] != self._ids and not self._place_rows(model, params, step):
            return None
        return self.sketch([params[row] for row in self._rows], known)

    def _place_rows(self, model: torch.nn.Module, params: list[torch.Tensor], step: int | None) -> bool:
        """Find the rows' parameters among the model's now (by name); False when one is gone or reshaped."""
        position = {normalised_name(n): i for i, (n, _) in enumerate(unwrap(model).named_parameters())}
        rows = [position.get(name) for name in self.sketch.names]
        gone = [
            name
            for name, row, shape in zip(self.sketch.names, rows, self.sketch.shapes)
            if row is None or params[row].shape != shape
        ]
        if gone:
            self._note(f"layers after step {step}", f"{', '.join(gone[:8])} removed or reshaped: no more rows")
            self._ended = True
            return False
        if self._ids:  # not the first placing: a parameter the rows do not have was added
            names = set(self.sketch.names)
            added = [name for name, i in position.items() if name not in names and sketchable(params[i])]
            if added:
                self._note(f"layers of {', '.join(added[:8])}", f"added after the first step (seen at step {step})")
        self._ids, self._rows = [id(p) for p in params], rows
        return True


def _as_is(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _known_norm(known: dict, grad: torch.Tensor) -> torch.Tensor:
    """The gradient's 2-norm: as measured before where it is the same tensor, unchanged (its version)."""
    seen = known.get(id(grad))
    if seen is not None and seen[0] is grad and not grad.is_inference() and seen[1] == grad._version:
        return seen[2]
    return grad_norms([grad])[0]


def _column(values: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(values).to(torch.float64)


def _largest_abs(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """max |g| of each, exactly (+0.0 for zeros), by two calls for all: a copy of a small model's |g|."""
    return torch._foreach_max(torch._foreach_abs(grads))


def _directions(numel: int, ordinal: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(zlib.crc32(f"{numel}:{ordinal}".encode()))
    index = torch.randint(numel, (DIRECTIONS, ENTRIES), generator=generator)
    signs = torch.randint(0, 2, (DIRECTIONS, ENTRIES), generator=generator).to(torch.float64) * 2 - 1
    return index, signs


def relative_distance(a: list[list[float]], b: list[list[float]]) -> list[float]:
    """Per layer, the estimated ||a - b|| / ||a|| of two runs' parameters at one step, from two
    records' `layers` rows (the sketch fields only)."""
    first = FIELDS.index("sketch0")
    out = []
    for row_a, row_b in zip(a, b, strict=True):
        sketch_a, sketch_b = row_a[first : first + DIRECTIONS], row_b[first : first + DIRECTIONS]
        diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(sketch_a, sketch_b)) / DIRECTIONS)
        out.append(diff / row_a[0] if row_a[0] else math.inf if diff else 0.0)
    return out
