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

import math
import zlib

import torch

from ddp_parity.fingerprints import normalised_name, unwrap
from ddp_parity.sharding import full_tensor

DIRECTIONS = 4
ENTRIES = 512
# grad_maxabs and grad_l1 last, in the order they were added: older traces keep their columns
FIELDS = ("norm", "grad_norm", *(f"sketch{k}" for k in range(DIRECTIONS)), "grad_maxabs", "grad_l1")


def sketchable(parameter: torch.Tensor) -> bool:
    """A real floating-point tensor with entries: the others (complex, integer, boolean, empty) have no
    norm and projection of this kind; the recorder notes them in meta.json `unrecorded` and goes on."""
    return parameter.dtype.is_floating_point and parameter.numel() > 0


class LayerSketch:
    """The fixed directions of one model's parameters, and the per-step values they give: a gather and
    two norms per tensor, then one batched product for every projection. Given DTensors it gathers
    each whole, one at a time (the recorder does not call it for an FSDP2 model yet: see trace.py)."""

    def __init__(self, named_parameters: list[tuple[str, torch.Tensor]]):
        """`named_parameters`: sketchable ones (see `sketchable`), at least one."""
        self.names = [name for name, _ in named_parameters]
        self.shapes = [p.shape for _, p in named_parameters]
        device = named_parameters[0][1].device
        seen: dict[int, int] = {}
        self._indexes, signs, scales = [], [], []
        for _, p in named_parameters:
            ordinal = seen[p.numel()] = seen.get(p.numel(), -1) + 1
            index, sign = _directions(p.numel(), ordinal)
            self._indexes.append(index.reshape(-1).to(device))
            signs.append(sign)
            scales.append(math.sqrt(p.numel() / ENTRIES))
        # (parameters * DIRECTIONS, ENTRIES, 1): one batched product gives every projection
        self._signs = torch.stack(signs).reshape(-1, ENTRIES, 1).to(device)
        self._scales = torch.tensor(scales, dtype=torch.float64, device=device)

    def facts(self) -> dict:
        """meta.json `layers`: the parameter names (rows of every record's `layers`) and the fields."""
        return {"names": self.names, "fields": list(FIELDS), "directions": DIRECTIONS, "entries": ENTRIES}

    def __call__(self, parameters: list[torch.Tensor]) -> torch.Tensor:
        """(parameters x FIELDS) float64 on the parameters' device: no sync until the trace is written.
        A parameter without a gradient gets NaN as its gradient norm, max-abs and 1-norm (the largest |g|
        and the sum of |g|: with each tensor's, the infinity norm or the 1-norm of the gradients is proved,
        compare/relations.py)."""
        samples, norms, grad_norms, grad_maxabs, grad_l1 = [], [], [], [], []
        for p, index in zip(parameters, self._indexes, strict=True):
            whole = full_tensor(p.detach()).reshape(-1)
            samples.append(whole.index_select(0, index))
            norms.append(torch.linalg.vector_norm(whole))  # a scale for distances: its own precision will do
            if p.grad is None:
                grad_norms.append(torch.full((), math.nan, dtype=whole.dtype, device=whole.device))
                grad_maxabs.append(grad_norms[-1])
                grad_l1.append(grad_norms[-1])
            else:
                grad = full_tensor(p.grad.detach())
                grad_norms.append(torch.linalg.vector_norm(grad))
                grad_maxabs.append(_largest_abs(grad))
                # as clip_grad_norm_(norm_type=1) measures each tensor (its kernel's float32 sum), so theirs match
                grad_l1.append(torch.linalg.vector_norm(grad, 1))
        sampled = torch.stack(samples).to(torch.float64).reshape(-1, 1, ENTRIES)
        projections = torch.bmm(sampled, self._signs).reshape(len(samples), DIRECTIONS) * self._scales[:, None]
        scales = torch.stack([torch.stack(norms), torch.stack(grad_norms)], dim=1).to(torch.float64)
        tails = torch.stack([torch.stack(grad_maxabs), torch.stack(grad_l1)], dim=1).to(torch.float64)
        return torch.cat([scales, projections, tails], dim=1)


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
    def of(cls, model: torch.nn.Module, note) -> ModelSketch | None:
        named = [(normalised_name(n), p) for n, p in unwrap(model).named_parameters()]
        left_out = [name for name, p in named if not sketchable(p)]
        if left_out:
            shown = ", ".join(left_out[:8]) + (f" and {len(left_out) - 8} more" if len(left_out) > 8 else "")
            note("layers", f"{shown}: not real floating point, or empty; no norm or sketch")
        kept = [(name, p) for name, p in named if sketchable(p)]
        return cls(LayerSketch(kept), note) if kept else None

    def facts(self) -> dict:
        return self.sketch.facts()

    def values(self, model: torch.nn.Module, step: int | None) -> torch.Tensor | None:
        """This step's rows (LayerSketch.__call__), None once the sketch has ended."""
        if self._ended:
            return None
        params = list(unwrap(model).parameters())
        if [id(p) for p in params] != self._ids and not self._place_rows(model, params, step):
            return None
        return self.sketch([params[row] for row in self._rows])

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


def _largest_abs(grad: torch.Tensor) -> torch.Tensor:
    """max |g|, exactly, by one pass that allocates nothing (half the time of grad.abs().amax() on CPU)."""
    if not grad.numel():
        return torch.zeros((), dtype=grad.dtype, device=grad.device)
    low, high = torch.aminmax(grad)
    return torch.maximum(-low, high)


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
