"""Name the layer: the first module call, in execution order, where two runs' module watches
(ddp_parity/watch.py) part ways, its phase and tensor, and what that points at.

    localise(run_a, run_b, step=None, rank=None) -> dict | None
        {"name", "type", "phase": "forward"|"backward"|"optimizer", "step", "rank",
         "what": "input"|"output"|"buffers"|"grad"|"param_grad", "input_equal", "reading"}
    format_module_finding(d) -> "first difference: step 1 rank 0, forward of ... — ..."
    replay_instruction(step, ...) -> what to run when the divergence lies after the watched steps

The reading: the first module whose inputs are equal and outputs differ is where the difference is
born; a random op there means the random stream differs; a normalisation layer points at its
buffers or mode; another op at its numerics. A first input that differs while the sample indices
are equal means the batch contents differ. Forward equal but a gradient differs: the loss or the
backward. All gradients equal but the parameters after the step differ: clipping or the optimizer.

Names are normalised as the comparator pairs parameter names: no `module.` (DDP), and no leading
attribute on the side that has one more (a LightningModule holding the network as `net`).
Pure Python: reads JSON lines, loads no tensors.
"""

from __future__ import annotations

from collections import Counter

from ddp_parity.compare.batch_inputs import evaluates, trained_names
from ddp_parity.compare.comparator import match_keys, strip_known_prefixes
from ddp_parity.trace_files import ALL, TraceFormatError, iter_records, parse_watch_steps, read_meta
from ddp_parity.watch import WATCH_STEP_ENV, module_trace_ranks, read_module_trace

RANDOM_TYPES = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")
RANDOM_HINTS = ("dropout", "droppath", "drop_path", "stochasticdepth", "noise")
STATE_KEYS = ("training", "arguments", "autocast", "grad_enabled", "output_dtypes", "input_dtypes")
STATEFUL_NORM_PREFIXES = ("BatchNorm", "SyncBatchNorm", "InstanceNorm", "LazyBatchNorm", "LazyInstanceNorm")
NORM_HINTS = ("norm",)
PHASE_ORDER = {"forward": 0, "backward": 1, "optimizer": 2}
ROOT_LABEL = "the model"


# ---------------------------------------------------------------------------------------------
# which steps and ranks can be localised


def watched_steps(run_dir) -> set[int]:
    """Steps this run watched on every rank that has a module trace."""
    steps = None
    for rank in module_trace_ranks(run_dir):
        found = set(read_module_trace(run_dir, rank))
        steps = found if steps is None else steps & found
    return steps or set()


def needs_replay(run_a, run_b, step: int | None) -> bool:
    """The first divergence is at `step`, which neither run's module watch covers."""
    return step is not None and step not in (watched_steps(run_a) & watched_steps(run_b))


# ---------------------------------------------------------------------------------------------
# name normalisation


def name_prefixes(rec_a: dict, rec_b: dict) -> tuple[str, str]:
    """The leading attribute one side's names carry and the other's lack ("net." for a
    LightningModule holding the network), found by pairing parameter names as the comparator does."""
    keys_a = list(rec_a.get("params_after") or rec_a.get("param_grads") or {})
    keys_b = list(rec_b.get("params_after") or rec_b.get("param_grads") or {})
    pairs = match_keys(keys_a, keys_b, None, trained_in(rec_a, rec_b))
    extra = Counter()
    for norm, pair in pairs.items():
        if norm.startswith("__only"):
            continue
        ka, kb = (strip_known_prefixes(k) for k in pair)
        if ka != kb and kb.endswith("." + ka):
            extra[("", kb[: -len(ka)])] += 1
        elif ka != kb and ka.endswith("." + kb):
            extra[(ka[: -len(kb)], "")] += 1
    if not extra:
        return "", ""
    return extra.most_common(1)[0][0]


def trained_in(rec_a: dict, rec_b: dict) -> tuple[set | None, set | None]:
    """The parameters that took a gradient in each side's watched step, the trained ones: a student beside
    its frozen teacher is paired with the other side's student (comparator.match_keys)."""
    return set(rec_a.get("param_grads") or {}) or None, set(rec_b.get("param_grads") or {}) or None


def normalise(name: str, prefix: str) -> str | None:
    """`name` without `module.` and without `prefix` ("net." -> "net" is the root, ""); None for a
    module outside the network the other side watched (e.g. a LightningModule's loss_fn)."""
    name = strip_known_prefixes(name)
    if not prefix:
        return name
    if name == prefix[:-1]:
        return ""
    if name.startswith(prefix):
        return name[len(prefix) :]
    return None


def display(name: str) -> str:
    return name or ROOT_LABEL


# ---------------------------------------------------------------------------------------------
# the walk over one step of one rank


EVALUATION = "evaluation"  # the key's phase of a forward that evaluates: paired only with the other's evaluations


def _keyed_calls(record: dict, prefix: str) -> list[tuple[tuple, dict]]:
    """(phase, normalised name, occurrence) for every call, in execution order; a forward that evaluates
    (under no_grad, or in eval mode where the same module also ran in training mode in this step) keyed
    under EVALUATION, so that training forwards pair with training forwards and evaluations with evaluations."""
    seen: Counter = Counter()
    out = []
    trained = trained_names(record)
    for call in record.get("calls", []):
        name = normalise(call["name"], prefix)
        if name is None:
            continue
        key = (EVALUATION if evaluates(call, trained) else call["phase"], name)
        out.append(((*key, seen[key]), {**call, "name": name}))
        seen[key] += 1
    return out


def _watched_alone(record: dict, prefix: str) -> list[str]:
    """The modules of a side's watch outside the network the other side watched (a LightningModule's
    frozen teacher beside the student): their calls are not compared, and a finding must not say they were."""
    names = {strip_known_prefixes(c["name"]).split(".", 1)[0] for c in record.get("calls", [])}
    return sorted(n for n in names if n and normalise(n, prefix) is None)[:5]


def _state(call: dict) -> dict:
    return call.get("state") if isinstance(call.get("state"), dict) else {}


def comparable_calls(calls_a: list, calls_b: list) -> tuple[list, list]:
    """Both sides' keyed calls without the pairs that stand for modules of another kind (wrappers_of_other_kinds):
    their inputs and outputs are other things, and comparing them would name the batch for what the wrapper adds."""
    apart = wrappers_of_other_kinds(calls_a, calls_b)
    return [kc for kc in calls_a if kc[0][1] not in apart], [kc for kc in calls_b if kc[0][1] not in apart]


def wrappers_of_other_kinds(calls_a: list, calls_b: list) -> set[str]:
    """The normalised names at which the two sides hold modules of another class that hold other modules: a wrapper
    computing the loss around the network (forward(inputs, labels)) against a LightningModule (forward(images)).
    Their arguments and results differ by what each wrapper is, not by the batch; what they share is compared in the
    modules below them, which keep their own names. Two leaves of another class (BatchNorm2d against SyncBatchNorm)
    stay paired: they take the same input, and their class is what the state reading names."""
    types_a, types_b = _module_types(calls_a), _module_types(calls_b)
    parents = _holders(types_a) | _holders(types_b)
    return {name for name in types_a.keys() & types_b.keys() & parents if types_a[name] != types_b[name]}


def _module_types(calls: list) -> dict[str, str]:
    return {key[1]: call.get("type") for key, call in calls}


def _holders(types: dict[str, str]) -> set[str]:
    """The names of the watched modules that hold another watched module ("" holds every other)."""
    return {holder for name in types if name for holder in _ancestors(name)}


def _ancestors(name: str) -> list[str]:
    """The modules that hold `name`: "a.b.c" -> ["", "a", "a.b"]."""
    parts = name.split(".")
    return [""] + [".".join(parts[:i]) for i in range(1, len(parts))]


def first_difference(rec_a: dict, rec_b: dict) -> dict | None:
    """The first call of run A's execution order whose digests differ from run B's matching call,
    then the parameter gradients, then the parameters after the step. With `position` for ordering."""
    prefix_a, prefix_b = name_prefixes(rec_a, rec_b)
    calls_a, calls_b = comparable_calls(_keyed_calls(rec_a, prefix_a), _keyed_calls(rec_b, prefix_b))
    calls_b = dict(calls_b)
    trained = trained_in(rec_a, rec_b)
    before = _first_differing(rec_a.get("params_before") or {}, rec_b.get("params_before") or {}, trained)
    if before is not None:  # the step starts from other weights: nothing in it is the cause
        return {**_param_finding(before, calls_a, "forward", "params", -1), "type": "Parameter"}
    for position, (key, a) in enumerate(calls_a):
        b = calls_b.get(key)
        if b is None:
            continue
        found = _compare_call(a, b)
        if found is not None:
            alone = _watched_alone(rec_a, prefix_a) + _watched_alone(rec_b, prefix_b)
            extra = {"watched_one_side": alone} if alone else {}
            return {**found, "position": position, "context": _context(calls_a, position, calls_b), **extra}
    grads_a, grads_b = rec_a.get("param_grads", {}), rec_b.get("param_grads", {})
    pairs = match_keys(list(grads_a), list(grads_b), None)
    # a parameter with a .grad on one side only: frozen (requires_grad=False) or unused on the other
    one_sided = [(name, prefix_a) for name in pairs.pop("__only_a__")] + [
        (name, prefix_b) for name in pairs.pop("__only_b__")
    ]
    for norm, (ka, kb) in pairs.items():
        if grads_a[ka] != grads_b[kb]:
            return _param_finding(norm, calls_a, "backward", "param_grad", len(calls_a))
    grads_compared = len(pairs)  # every one equal: what the optimizer finding below may say of the gradients
    if one_sided and grads_a and grads_b:
        name, prefix = one_sided[0]
        return _param_finding(normalise(name, prefix) or name, calls_a, "backward", "param_grad", len(calls_a))
    pairs = match_keys(list(rec_a.get("params_after", {})), list(rec_b.get("params_after", {})), None, trained)
    for norm, pair in pairs.items():
        if norm.startswith("__only"):
            continue
        ka, kb = pair
        if rec_a["params_after"][ka] != rec_b["params_after"][kb]:
            found = _param_finding(norm, calls_a, "optimizer", "output", len(calls_a) + 1)
            return {**found, "grads_compared": grads_compared}
    return None


def params_differing_before(run_a, run_b, step: int, rank) -> tuple[list[str], int] | None:
    """(the parameters whose digest differs as `step`'s forward first used them, how many were compared) from
    the module watches' `params_before`, or None where a side did not watch that step on that rank."""
    recs = [read_module_trace(run, rank).get(step) for run in (run_a, run_b)]
    if any(r is None or not r.get("params_before") for r in recs):
        return None
    before_a, before_b = recs[0]["params_before"], recs[1]["params_before"]
    pairs = match_keys(list(before_a), list(before_b), None, trained_in(*recs))
    pairs.pop("__only_a__"), pairs.pop("__only_b__")
    return [norm for norm, (ka, kb) in pairs.items() if before_a[ka] != before_b[kb]], len(pairs)


def _first_differing(digests_a: dict, digests_b: dict, trained=(None, None)) -> str | None:
    pairs = match_keys(list(digests_a), list(digests_b), None, trained)
    pairs.pop("__only_a__"), pairs.pop("__only_b__")
    return next((norm for norm, (ka, kb) in pairs.items() if digests_a[ka] != digests_b[kb]), None)


def _compare_call(a: dict, b: dict) -> dict | None:
    base = {"name": a["name"], "type": a["type"], "phase": a["phase"]}
    if a["phase"] == "forward":
        if a.get("input") != b.get("input"):
            return {**base, "what": "input", "input_equal": False}
        changed = a.get("output") != b.get("output") or a.get("buffers") != b.get("buffers")
        state = state_differences(a, b)
        if a.get("type") != b.get("type") and a.get("type") and b.get("type"):
            state = {"type": [a["type"], b["type"]], **state}  # another class (BatchNorm2d vs SyncBatchNorm)
        if changed and state:
            # the module computed another result from the same input because it ran in another mode
            # (training flag, autocast, dtype): that, not its numerics or a random stream, is the cause
            return {**base, "what": "state", "input_equal": True, "state": state}
        if a.get("output") != b.get("output"):
            return {**base, "what": "output", "input_equal": True, "random": bool(a.get("random") or b.get("random"))}
        if a.get("buffers") != b.get("buffers"):
            return {**base, "what": "buffers", "input_equal": True}
        return None
    # backward: "output" is the gradient arriving at the module's output, "input" the one leaving it
    if (a.get("input") is None) != (b.get("input") is None) and a.get("output") == b.get("output"):
        return None  # its input needs no gradient on one side (a layer before it frozen): the param grads say so
    if a.get("output") != b.get("output"):
        return {**base, "what": "grad", "input_equal": False}
    if a.get("input") != b.get("input"):
        return {**base, "what": "grad", "input_equal": True}
    return None


def state_differences(a: dict, b: dict) -> dict:
    """{state key: [a's value, b's value]} for what a forward depends on besides its input (the watch's
    `state`: training, grad mode, autocast, dtypes); {} when equal or not recorded on a side."""
    sa, sb = a.get("state"), b.get("state")
    if not (isinstance(sa, dict) and isinstance(sb, dict)):
        return {}
    return {key: [sa.get(key), sb.get(key)] for key in STATE_KEYS if key in sa and key in sb and sa[key] != sb[key]}


def has_state(run_dir) -> bool | None:
    """Whether a run's module watch records each call's state (None: no module watch at all)."""
    for rank in module_trace_ranks(run_dir):
        for record in read_module_trace(run_dir, rank).values():
            calls = record.get("calls") or []
            if calls:
                return any("state" in call for call in calls)
    return None


def recorded_module_types(run_dir) -> set[str] | None:
    """The classes of every module the run's module watch saw called (any watched step, any rank): what says
    whether a side's norm layers are SyncBatchNorm. None where it watched nothing (no class is known)."""
    types = None
    try:
        for rank in module_trace_ranks(run_dir):
            for record in read_module_trace(run_dir, rank).values():
                found = {call.get("type") for call in record.get("calls") or [] if isinstance(call, dict)}
                types = (types or set()) | {t for t in found if isinstance(t, str)}
    except (TraceFormatError, OSError):  # a watch cut off by a crash: its classes are not known whole
        return None
    return types


def _context(calls_a: list, position: int, calls_b: dict) -> dict:
    """What the reading needs: is this the first call of its pass, is the outermost call's input
    different too, and does the module contain submodules called before it in this pass."""
    (phase, name, _), _call = calls_a[position]
    start = position
    while start > 0 and calls_a[start - 1][0][0] == phase:
        start -= 1
    end = position
    while end + 1 < len(calls_a) and calls_a[end + 1][0][0] == phase:
        end += 1
    context = {"first_of_pass": position == start, "has_children": False, "outer_input_differs": False}
    context["has_children"] = any(
        key[1].startswith(name + ".") or (name == "" and key[1] != "") for key, _ in calls_a[start:position]
    )
    if phase == "forward":
        outer_key, outer = min(calls_a[start : end + 1], key=lambda kc: _depth(kc[0][1]))
        other = calls_b.get(outer_key)
        context["outer_input_differs"] = other is not None and other.get("input") != outer.get("input")
    return context


def _depth(name: str) -> int:
    return 0 if name == "" else name.count(".") + 1


def _parent(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def _param_finding(param: str, calls_a: list, phase: str, what: str, position: int) -> dict:
    owner = param.rsplit(".", 1)[0] if "." in param else ""
    types = {key[1]: call["type"] for key, call in calls_a}
    return {
        "name": param,
        "type": types.get(owner, "Parameter") if phase == "backward" else "optimizer",
        "phase": phase,
        "what": what,
        "input_equal": True,
        "position": position,
        "context": {},
    }


# ---------------------------------------------------------------------------------------------
# the entry points


def localise(run_a, run_b, step: int | None = None, rank: int | None = None) -> dict | None:
    """The first module difference between two runs' module watches: the earliest watched step,
    then the earliest call in execution order, then the lowest rank. None when the runs watched no
    common step (see needs_replay) or every watched call is equal."""
    ranks = sorted(set(module_trace_ranks(run_a)) & set(module_trace_ranks(run_b)))
    if rank is not None:
        ranks = [r for r in ranks if r == rank]
    traces = {r: (read_module_trace(run_a, r), read_module_trace(run_b, r)) for r in ranks}
    steps = sorted({s for a, b in traces.values() for s in set(a) & set(b)})
    if step is not None:
        steps = [s for s in steps if s == step]
    optimizer_class = _optimizer_class(run_a) or _optimizer_class(run_b)
    for s in steps:
        found = []
        for r in ranks:
            a, b = traces[r]
            if s in a and s in b:
                diff = first_difference(a[s], b[s])
                if diff is not None:
                    found.append({**diff, "step": s, "rank": r})
        if found:
            best = min(found, key=lambda d: (PHASE_ORDER[d["phase"]], d["position"], d["rank"]))
            if best["phase"] == "optimizer" and optimizer_class:
                best["type"] = optimizer_class
            best["reading"] = reading(best, _indices_equal(run_a, run_b, s, best["rank"]))
            best["reading_kind"] = reading_kind(best, _indices_equal(run_a, run_b, s, best["rank"]))
            keys = ("name", "type", "phase", "step", "rank", "what", "input_equal", "reading", "reading_kind", "state")
            keys += ("watched_one_side", "grads_compared")
            return {k: best[k] for k in keys if k in best}
    return None


READINGS = {
    "optimizer": "every gradient is equal at the end of backward but the parameters after the step differ: what "
    "changes .grad after backward (clipping, an all_reduce or a division by hand) or the optimizer "
    "(gradient_clip_val, optimizer hyperparameters, learning rate)",
    "params": "the parameter differs as the step's forward first used it: the initial weights (at the first step) "
    "or an update before this step",
    "param_grad": "every module's gradient is equal but the parameter's accumulated .grad differs: gradient "
    "reduction or accumulation (DDP averaging, no_sync, accumulate_grad_batches, loss division)",
    "loss_grad": "the forward pass is equal but the gradient arriving at the model's output differs: the loss or "
    "its scaling (loss division, accumulation, GradScaler)",
    "between_backward": "the gradient reaching this module differs while the modules before it in the backward "
    "matched: code between modules in the backward (a functional op or a hook)",
    "module_backward": "the gradient reaching this module is equal but the one leaving it differs: this module's "
    "backward (its numerics or a hook on it)",
    "data_order": "the input reaching the model differs and so do the sample indices: the data order",
    "batch": "the input reaching the model already differs while the sample indices are equal: the batch "
    "contents differ (augmentation, worker seeding, transforms, or what the training step does before the model)",
    "between_forward": "its input differs while every module before it matched: code between modules in the "
    "forward of {parent} (a functional op, not a module)",
    "buffers": "inputs and outputs equal but its buffers after the call differ: its running statistics "
    "(momentum, track_running_stats) or the buffers it started with",
    "state": "inputs equal, but the module runs in another mode on the two sides ({state}): that mode decides "
    "its output",
    "random": "the random stream differs at this layer (seeding: re-seed after building the model as Lightning "
    "does, or per-rank/worker seeds)",
    "stateful_norm": "a normalisation layer: its buffers or its mode (train/eval, momentum, track_running_stats)",
    "own_code": "every submodule matched but its output differs: the forward code of {name} between its "
    "submodules (a functional op)",
    "norm": "a normalisation layer's numerics (eps, affine, precision, threads)",
    "numerics": "that op's numerics (precision or autocast, threads, algorithm, deterministic flags)",
}


def reading(d: dict, indices_equal: bool | None = None) -> str:
    """What the first difference points at (issue 13's reading), in one clause."""
    return READINGS[reading_kind(d, indices_equal)].format(
        parent=display(_parent(d["name"])), name=display(d["name"]), state=describe_state(d.get("state") or {})
    )


def describe_state(state: dict) -> str:
    """`training: True vs False; ...` for the differing state keys, in the order of the runs."""
    return "; ".join(f"{key}: {va} vs {vb}" for key, (va, vb) in state.items())


def reading_kind(d: dict, indices_equal: bool | None = None) -> str:
    context, kind = d.get("context", {}), d["type"]
    if d["phase"] == "optimizer":
        return "optimizer"
    if d["what"] == "params":
        return "params"
    if d["what"] == "param_grad":
        return "param_grad"
    if d["phase"] == "backward":
        if not d["input_equal"]:
            return "loss_grad" if context.get("first_of_pass") else "between_backward"
        return "module_backward"
    if d["what"] == "input":
        if context.get("outer_input_differs"):
            return "data_order" if indices_equal is False else "batch"
        return "between_forward"
    if d["what"] == "state":
        return "state"
    if d["what"] == "buffers":
        return "buffers"
    if d.get("random") or _is_random(kind, d["name"]):
        return "random"
    if kind.startswith(STATEFUL_NORM_PREFIXES):
        return "stateful_norm"
    if context.get("has_children"):
        return "own_code"
    if any(h in kind.lower() for h in NORM_HINTS):
        return "norm"
    return "numerics"


def _is_random(kind: str, name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    return kind in RANDOM_TYPES or any(h in kind.lower() or h in last for h in RANDOM_HINTS)


def format_module_finding(d: dict | None) -> str:
    """One line for the summary."""
    if not d:
        return "first difference: not inside a watched module"
    if d["phase"] == "optimizer":
        where = f"optimizer step ({d['type']}) on {d['name']}"
        state = "gradient equal, parameter after the step differs"
    elif d["what"] == "param_grad":
        where = f"gradient of parameter {d['name']}"
        state = "every module gradient equal, accumulated .grad differs"
    else:
        where = f"{d['phase']} of {display(d['name'])} ({d['type']})"
        state = {
            ("forward", "input"): "inputs differ",
            ("forward", "output"): "inputs equal, outputs differ",
            ("forward", "buffers"): "inputs and outputs equal, buffers differ",
            ("forward", "state"): "inputs equal, module state differs, outputs differ",
            ("forward", "params"): "the parameter differs before the step",
            ("backward", "grad"): "incoming gradient equal, outgoing gradient differs"
            if d["input_equal"]
            else "incoming gradient differs",
        }.get((d["phase"], d["what"]), d["what"] + " differs")
    line = f"first difference: step {d['step']} rank {d['rank']}, {where}: {state}"
    return f"{line} — {d['reading']}" if d.get("reading") else line


def watch_asked(run_dir, step: int | None) -> str | None:
    """DDP_PARITY_WATCH_STEP as the run's ranks were given it (meta.json ranks[*].watch_step_env), where it
    covers `step` (None: any value set); None where it was not set or does not cover the step."""
    try:
        ranks = read_meta(run_dir).get("ranks") or []
    except (OSError, ValueError, AttributeError):
        return None
    for facts in ranks:
        value = facts.get("watch_step_env") if isinstance(facts, dict) else None
        if not isinstance(value, str):
            continue
        try:
            steps = parse_watch_steps(value)
        except ValueError:
            continue
        if steps == ALL or step is None or step in steps:
            return value
    return None


# what to say where a run was already recorded with DDP_PARITY_WATCH_STEP covering the step yet holds no
# watch of it: re-running with the same value records the same
WATCH_ASKED = (
    "{runs} already ran with {env}={value}, which covers step {step}, yet no module call of step {step} was "
    "recorded: the watch records only where the loop calls recorder.watch(model) after recorder.start() "
    "(TraceCallback watches by itself), on the model that runs the forward, with the steps numbered as record() "
    "numbers them; re-running with the same variable records the same"
)


def replay_instruction(step: int, run_a=None, run_b=None, *, harness: str) -> str:
    """For --traces users: how to record the module watch at `step`, with their own commands
    (`harness`: the command that compares, as the user started it). Where the runs were already given
    DDP_PARITY_WATCH_STEP covering the step, that is said instead of asking for it again."""
    runs = [str(r) for r in (run_a, run_b) if r is not None]
    asked = [(str(r), watch_asked(r, step)) for r in (run_a, run_b) if r is not None]
    asked = [(r, v) for r, v in asked if v is not None]
    if asked:
        value = asked[0][1]
        names = " and ".join(r for r, _ in asked)
        return WATCH_ASKED.format(runs=names, env=WATCH_STEP_ENV, value=value, step=step) + "."
    where = f" (the runs {' and '.join(runs)} did not watch it)" if runs else ""
    given = [r for r in (run_a, run_b) if r is not None]
    if given and all(_recorded_by_hooks(r) for r in given):
        return _hooks_replay_instruction(step, given, harness)
    return (
        f"the first difference is at step {step}, after the watched steps{where}. Re-run both of your commands "
        f"unchanged with {WATCH_STEP_ENV}={step} in the environment and new run directories, e.g.\n"
        f"    {WATCH_STEP_ENV}={step} torchrun --nproc_per_node=N your_loop.py --run_dir RUN_A_W\n"
        f"    {WATCH_STEP_ENV}={step} python your_lightning_script.py --run_dir RUN_B_W\n"
        f"then: {harness} --traces RUN_A_W RUN_B_W  (needs recorder.watch(model) in the loop; "
        f"TraceCallback watches by itself; add DDP_PARITY_DUMP_UPDATE={step} to have the step's optimizer update "
        "replayed too)"
    )


def _recorded_by_hooks(run) -> bool:
    try:
        return read_meta(run).get("recorded_by") == "hooks"
    except Exception:  # a meta that cannot be read: the explicit recorder's instruction
        return False


def _hooks_replay_instruction(step: int, runs: list, harness: str) -> str:
    """For runs `ddp-parity record` made: the same commands under that variable, and where no step was watched at
    all (a program whose model no DDP wrapper holds), that the variable cannot add a watch there."""
    unwatched = [str(r) for r in runs if not watched_steps(r)]
    if unwatched:
        said = (
            f"no step was watched in {' and '.join(unwatched)}: the hooks watch the model a DDP wrapper holds, and "
            "this program gives none to DDP (it averages the gradients itself), so DDP_PARITY_WATCH_STEP adds "
            "nothing there; an explicit recorder.watch(model) after recorder.start() records the module calls"
        )
        if len(unwatched) == len(runs):
            return f"the first difference is at step {step}; {said}."
    else:
        said = f"step {step} lies after the watched steps (the runs {' and '.join(map(str, runs))} did not watch it)"
    return (
        f"the first difference is at step {step}; {said}. Record both of your commands again, unchanged, with "
        f"{WATCH_STEP_ENV}={step} in the environment and new run directories:\n"
        f"    {WATCH_STEP_ENV}={step} ddp-parity record --out RUN_A_W -- YOUR_COMMAND_A\n"
        f"    {WATCH_STEP_ENV}={step} ddp-parity record --out RUN_B_W -- YOUR_COMMAND_B\n"
        f"then: {harness} --traces RUN_A_W RUN_B_W"
    )


# ---------------------------------------------------------------------------------------------


def _optimizer_class(run_dir) -> str | None:
    try:
        meta = read_meta(run_dir)
    except Exception:  # a meta that cannot be read: the finding stands without the class
        return None
    optimizer = meta.get("optimizer")
    return optimizer.get("class") if isinstance(optimizer, dict) else None


def _indices_equal(run_a, run_b, step: int, rank: int) -> bool | None:
    """Whether both runs consumed the same samples at `step` on `rank` (None if unknown)."""
    try:
        found = {}
        for side, run in (("a", run_a), ("b", run_b)):
            for record in iter_records(run, rank):
                if record["step"] == step:
                    found[side] = record.get("indices", record.get("indices_digest"))
                    break
        if len(found) < 2 or found["a"] is None or found["b"] is None:
            return None
        return found["a"] == found["b"]
    except (OSError, ValueError):
        return None


__all__ = [
    "localise",
    "format_module_finding",
    "replay_instruction",
    "watch_asked",
    "needs_replay",
    "watched_steps",
    "reading",
    "first_difference",
]
