"""Float noise told from a bug, against noise measured from the run itself (`--tolerance noise`).

Two correct runs that round differently part from their first step and drift apart with every step
of a non-convex optimisation, so no fixed tolerance serves a whole run. Here a *control* — one side
run again under a change that alters only rounding (another ATen kernel set, initial weights moved by
one ulp) — measures how far rounding carries this model on this data. Every quantity the traces hold
is turned into a per-step relative distance: the loss, the gradient norm, and per layer the parameters
(from their sketches, ddp_parity/sketch.py) and the gradient norm.

A distance at step k is explained by noise if it stays within FACTOR times the larger of
- the controls' own distance at step k (what rounding alone does by this step), and
- how far the pair's parameters already were at step k-1, times the largest ratio the controls show
  between a quantity at one step and their parameters' distance the step before (noise propagates,
  and jumps where a ReLU flips: a pair whose rounding blew up sooner than the controls' may go on
  growing as fast as theirs did, never faster), but never past the farthest the controls drift in
  the whole run.
The first step where a quantity leaves that bound is where the pair is *different*; a bug shows
there, at the step it first acts, because until then the pair's parameters were only noise apart.
The integers a trace holds (sample indices, steps) are still compared exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ddp_parity.compare.comparator import merged_records
from ddp_parity.sketch import relative_distance
from ddp_parity.trace_files import RunFiles, read_run

# how far past the controls' envelope a distance must go to be called a difference
FACTOR = 10.0
# the smallest distance ever required of a pair: float32's machine epsilon, one rounding of a number
FLOOR = 2.0**-23
# the spread below which a first step is not held to the controls' (reproduction): a rounding control
# of our default model is 8e-7 to 1.2e-6 from its side at step 1 (the closest two 3.7e-7 apart), one
# of another script (label smoothing 0.01) 1e-2; a control is refused past FACTOR times this
FIRST_STEP_FLOOR = 1e-6
# the quantity groups plotted and summarised. Per-layer quantities are keyed by the layer's position
# ("param #3", "grad #3"): the twins name a layer differently (net.0.weight, net.net.0.weight) and the
# controls may repeat the other side; reports name it by the pair's first run (`display`)
# (param_digest: the per-step digest's components, for runs without sketches, e.g. FSDP2's)
GROUPS = ("loss", "grad_norm", "param", "grad", "param_digest")


@dataclass
class Distances:
    """Two runs measured apart, step by step: relative distance per quantity (the largest over the
    ranks), and `state`, the largest parameter distance over the layers (the pair's state apart)."""

    steps: list[int]
    series: dict[str, list[float]]
    state: list[float] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # the layers, in the sketches' order

    def display(self, quantity: str) -> tuple[str, str | None]:
        """("param net.0.weight", "net.0.weight") for "param #0"; (quantity, None) for a global one."""
        group, _, position = quantity.partition(" #")
        if not position:
            return quantity, None
        index = int(position)
        name = self.names[index] if index < len(self.names) else f"layer {index}"
        return f"{group} {name}", name

    @cached_property
    def index(self) -> dict[int, int]:
        return {step: k for k, step in enumerate(self.steps)}


def relative(a, b) -> float:
    """|a - b| relative to the larger; 0 for two equal values (two zeros, two infinities), inf for a
    number against a NaN."""
    if a is None or b is None or a == b:
        return 0.0
    if math.isnan(a) or math.isnan(b):
        return 0.0 if math.isnan(a) and math.isnan(b) else math.inf
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if math.isfinite(scale) else math.inf


def as_run(run) -> RunFiles:
    """A run's files: read here where a path is given, as they are where they were read already."""
    return run if isinstance(run, RunFiles) else read_run(run)


def last_records(run: RunFiles, merged: bool = False) -> dict[int, dict[int, dict]]:
    """step -> rank -> record; a step recorded twice (a restart) counts as it was last recorded.
    `merged`: a DDP run's ranks as one process on the global batch records them (rank 0; --reference)."""
    if merged:
        return {record["step"]: {0: record} for record in merged_records(run)}
    if run.ranks_error is not None:
        raise run.ranks_error
    out: dict[int, dict[int, dict]] = {}
    for rank, stream in run.streams.items():
        for record in stream:
            out.setdefault(record["step"], {})[rank] = record
    return out


def layer_names(run) -> list[str]:
    """The recorded layers' names of a run (its files, or its path)."""
    return list((as_run(run).meta.get("layers") or {}).get("names") or [])


def step_quantities(a: dict, b: dict, names: list[str]) -> dict[str, float]:
    """One rank's record of each run, as relative distances."""
    out = {"loss": relative(a.get("loss"), b.get("loss"))}
    if a.get("grad_norm") is not None and b.get("grad_norm") is not None:
        out["grad_norm"] = relative(a["grad_norm"], b["grad_norm"])
    digest_a, digest_b = a.get("param_digest"), b.get("param_digest")
    if isinstance(digest_a, list) and isinstance(digest_b, list) and len(digest_a) == len(digest_b):
        out["param_digest"] = max((relative(x, y) for x, y in zip(digest_a, digest_b)), default=0.0)
    layers_a, layers_b = a.get("layers"), b.get("layers")
    if layers_a and layers_b and len(layers_a) == len(layers_b) == len(names):
        distances = relative_distance(layers_a, layers_b)
        for index, (distance, row_a, row_b) in enumerate(zip(distances, layers_a, layers_b)):
            out[f"param #{index}"] = distance
            out[f"grad #{index}"] = relative(row_a[1], row_b[1])
    return out


def measure(run_a, run_b, merge_a: bool = False) -> Distances:
    """Per step both runs recorded (on the ranks both recorded), each quantity's distance. The state
    is the parameters' largest layer distance, or where no sketch was recorded their digest's.
    `merge_a`: run a is a DDP run measured against a one-process reference (run b)."""
    run_a, run_b = as_run(run_a), as_run(run_b)
    names = layer_names(run_a)
    records_a, records_b = last_records(run_a, merged=merge_a), last_records(run_b)
    steps = sorted(set(records_a) & set(records_b))
    series: dict[str, list[float]] = {}
    for index, step in enumerate(steps):
        per_step: dict[str, float] = {}
        for rank in sorted(set(records_a[step]) & set(records_b[step])):
            for quantity, value in step_quantities(records_a[step][rank], records_b[step][rank], names).items():
                per_step[quantity] = max(value, per_step.get(quantity, 0.0))
        for quantity, value in per_step.items():
            series.setdefault(quantity, [0.0] * len(steps))[index] = value
    params = [values for quantity, values in series.items() if quantity.startswith("param #")]
    params = params or [series[quantity] for quantity in ("param_digest",) if quantity in series]
    state = [max(column) for column in zip(*params)] if params else [0.0] * len(steps)
    return Distances(steps, series, state, names)


def sensitivity(controls: list[Distances]) -> float:
    """The largest ratio the controls show between any quantity's distance at a step and their
    parameters' distance the step before (measured only where that distance is above FLOOR). One
    figure for every quantity: a ReLU whose input sits within rounding of zero flips in one run and
    not the other, a jump that any layer downstream may show, and no control sees every flip."""
    gain = 0.0
    for control in controls:
        for k in range(1, len(control.steps)):
            before = control.state[k - 1]
            if before > FLOOR and control.steps[k] == control.steps[k - 1] + 1:
                gain = max([gain, *(values[k] / before for values in control.series.values())])
    return gain


def envelope(controls: list[Distances], quantity: str, step: int) -> float:
    """The controls' largest distance of a quantity at a step (FLOOR at least)."""
    values = [FLOOR]
    for control in controls:
        if quantity in control.series and step in control.index:
            values.append(control.series[quantity][control.index[step]])
    return max(values)


def judge(pair: Distances, controls: list[Distances], factor: float = FACTOR) -> dict:
    """The pair against the controls: `within_noise` True/False, the first step and quantity past the
    bound (the one furthest past it at that step), the largest ratio to the bound over the run, and
    per group the curves to plot (pair, envelope, bound: each the largest over the group's quantities)."""
    gain = sensitivity(controls)
    # a quantity no control recorded has no measured noise: left unjudged (and said), never held to epsilon
    judged = {q: v for q, v in pair.series.items() if any(q in control.series for control in controls)}
    unjudged = sorted({pair.display(q)[0] for q in pair.series if q not in judged})
    ceiling = {q: max(max(c.series.get(q, [FLOOR])) for c in controls) for q in judged}
    departure, worst = None, {"ratio": 0.0}
    curves = {group: {"steps": pair.steps, "pair": [], "envelope": [], "bound": []} for group in GROUPS}
    for k, step in enumerate(pair.steps):
        # the pair's own distance propagates as noise only while it is noise
        carried = pair.state[k - 1] if k and departure is None else 0.0
        per_group = {group: [0.0, 0.0, 0.0] for group in GROUPS}
        over = []
        for quantity, values in judged.items():
            noise = envelope(controls, quantity, step)
            bound = factor * max(noise, min(gain * carried, ceiling.get(quantity, FLOOR)))
            ratio = values[k] / bound
            if ratio > 1.0:
                over.append((ratio, quantity, values[k], noise, bound))
            if ratio > worst["ratio"] and departure is None:
                worst = {"ratio": ratio, "step": step, "quantity": pair.display(quantity)[0]}
            group = per_group[quantity.split(" ")[0]]
            group[:] = [max(group[0], values[k]), max(group[1], noise), max(group[2], bound)]
        for group, (value, noise, bound) in per_group.items():
            curves[group]["pair"].append(value)
            curves[group]["envelope"].append(noise)
            curves[group]["bound"].append(bound)
        if over and departure is None:
            ratio, quantity, value, noise, bound = max(over)
            shown, layer = pair.display(quantity)
            departure = {"step": step, "quantity": shown, "distance": value, "envelope": noise, "bound": bound}
            departure["ratio"] = ratio
            departure["layer"] = layer
            departure["groups"] = sorted({_group(q) for _, q, *_ in over})  # what left the bound at that step
    present = {group: curve for group, curve in curves.items() if any(g == group for g in map(_group, judged))}
    return {
        "within_noise": departure is None,
        "factor": factor,
        "departure": departure,
        "worst": worst,
        "controls_silent": not any(any(values) for control in controls for values in control.series.values()),
        "unjudged": unjudged,
        "curves": present,
    }


def _group(quantity: str) -> str:
    return quantity.split(" ")[0]


def first_records(run: RunFiles) -> tuple[int | None, dict[int, dict]]:
    """The first step a run recorded and each rank's record of it (None, {} for no step)."""
    if run.ranks_error is not None:
        raise run.ranks_error
    firsts = {rank: next(stream, None) for rank, stream in run.streams.items()}
    firsts = {rank: record for rank, record in firsts.items() if record is not None}
    step = min((record["step"] for record in firsts.values()), default=None)
    return step, {rank: record for rank, record in firsts.items() if record["step"] == step}


def first_step_distance(run_a, run_b) -> float | None:
    """The largest distance of any quantity at the first step, over the ranks; None where the two
    runs did not start at the same step."""
    run_a, run_b = as_run(run_a), as_run(run_b)
    (step_a, a), (step_b, b) = first_records(run_a), first_records(run_b)
    if step_a is None or step_a != step_b:
        return None
    names = layer_names(run_a)
    values = [v for r in sorted(set(a) & set(b)) for v in step_quantities(a[r], b[r], names).values()]
    return max(values, default=0.0)


def reproduction(repeated, controls: list, factor: float = FACTOR) -> list[dict]:
    """Whether each control reproduces the run it repeats: its distance from that run at the first
    step, against how far apart rounding alone puts the closest two of the runs (the side and its
    controls) at that step. Before rounding compounds, a control is a few ulps from its side; one
    recorded from another version of the script is far from it at once, and its envelope would
    swallow a bug. A control farther than `factor` times that spread (FIRST_STEP_FLOOR at least) does not
    reproduce its side; with a single control there is no spread to hold it to (`reproduces` None)."""
    runs = [repeated, *controls]
    apart = {(i, j): first_step_distance(runs[i], runs[j]) for i in range(len(runs)) for j in range(i + 1, len(runs))}
    spread = min((d for d in apart.values() if d is not None), default=None)
    out = []
    for index, control in enumerate(controls, start=1):
        distance = apart[(0, index)]
        reproduces = None
        if len(controls) > 1 and distance is not None and spread is not None:
            reproduces = distance <= factor * max(spread, FIRST_STEP_FLOOR)
        out.append({"path": str(Path(control)), "first_step_distance": distance, "spread": spread,
                    "reproduces": reproduces})  # fmt: skip
    return out


@dataclass
class Controls:
    """The controls (runs of one side again under a change of rounding alone) measured once from the
    run they repeat, to judge every pair (and the reference) against. `setups`: what each control
    varied from that run, and whether it reproduces it at the first step (`reproduction`)."""

    distances: list[Distances]
    paths: list[str]
    factor: float = FACTOR
    setups: list[dict] = field(default_factory=list)

    @classmethod
    def measured(cls, repeated, controls: list, factor: float = FACTOR, varied: list[dict] | None = None) -> Controls:
        """`varied`: per control, the setup keys it changed from `repeated` ({key: [theirs, its]})."""
        setups = reproduction(repeated, controls, factor)
        for setup, keys in zip(setups, varied or [{} for _ in controls]):
            setup["varied"] = keys
        paths = [str(Path(c)) for c in controls]
        return cls([measure(repeated, control) for control in controls], paths, factor, setups)

    def judge(self, run_a, run_b, merge_a: bool = False) -> dict:
        """Run b against run a, judged against the controls' distances: the judgement, with the
        controls' paths and setups (`merge_a`: run a is DDP, run b the one-process reference)."""
        result = judge(measure(run_a, run_b, merge_a), self.distances, self.factor)
        result["controls"] = list(self.paths)
        result["control_setups"] = [dict(setup) for setup in self.setups]
        return result
