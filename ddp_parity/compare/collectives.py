"""The program's own collectives in a step's record: which made them, and which reduce a scalar.

The hooks list every collective a step made (a record's `collectives`: op, reduce_op, dtype, shape and the
module that called it). Those the libraries make (Lightning's self.log(sync_dist=True), DDP's own checks) are
not the program's; a program's own scalar reduction is what a loop makes to log a loss over the ranks. Both the
walk (a loss recorded after that reduction) and the causes (compare/causes/hooked.py) read them from here.
"""

from __future__ import annotations

# the callers whose collectives are the libraries', not the program's
LIBRARIES = ("torch", "lightning", "pytorch_lightning", "lightning_fabric", "torchmetrics")
REDUCTIONS = ("all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor")


def made_by_program(entry: dict) -> bool:
    """A collective the program called itself, not a library on its behalf."""
    caller = str(entry.get("caller") or "")
    return not any(caller == lib or caller.startswith(lib + ".") for lib in LIBRARIES)


def own_scalar_reductions(record: dict) -> list[dict]:
    """The program's own reductions of one floating-point number made during a step (since the record before):
    what a loop makes where it reduces its loss over the ranks, to log it or in place before backward."""
    entries = record.get("collectives") if isinstance(record.get("collectives"), list) else []
    return [
        e
        for e in entries
        if isinstance(e, dict)
        and made_by_program(e)
        and e.get("op") in ("all_reduce", "reduce")
        and e.get("of") != "grad"
        and str(e.get("dtype") or "").startswith(("float", "bfloat"))
        and isinstance(e.get("shape"), list)
        and all(n == 1 for n in e["shape"])
    ]
