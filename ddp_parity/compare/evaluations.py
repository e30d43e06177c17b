"""The evaluations a run recorded: validation.jsonl (an explicit recorder's validations, with the
figures the program computed) and trace/rank{r}.evaluations.jsonl (the forwards `ddp-parity record`'s
hooks saw under eval() or without gradients, with a digest of their outputs). The causes that ask when
a side validated read both; the hooks' digests are compared here, with no figure the program computes.
An evaluation of a copy of the trained model (`role` `copy`: an EMA) is compared with the other side's
copies only, and is no validation of the model. Forwards in training mode with gradients off inside a step (a
feature-caching pass) are part of the training, not an evaluation: left out of everything here (`step_parts`). So are
such forwards between steps that no evaluation DataLoader fed (a rollout, a teacher's targets: `loop_forwards`),
compared with the other side's only: an evaluation runs in eval mode or over a DataLoader of its own.
"""

from __future__ import annotations

from ddp_parity.trace_files import (
    EVALUATION_COPY,
    EVALUATION_MODEL,
    TraceFormatError,
    fact_items,
    read_evaluations,
    read_hook_facts,
    read_meta,
    read_records,
    read_validation,
)


def validations(run) -> list[dict]:
    """Every validation or evaluation the run recorded, each with its `step` (optimizer steps done
    before it); a hook-recorded one also with its `rank`, `micro_batch` and `grads_held`."""
    try:
        found = list(read_validation(run))
    except (TraceFormatError, OSError):
        found = []
    for rank, records in evaluations_of(run).items():
        found += [{**record, "rank": rank} for record in records if _role(record) == MODEL]
    return found


MODEL, COPY = EVALUATION_MODEL, EVALUATION_COPY


def _role(record: dict) -> str:
    return COPY if record.get("role") == COPY else MODEL


def _of_role(found: dict[int, list[dict]], role: str) -> dict[int, list[dict]]:
    return {rank: [r for r in records if _role(r) == role] for rank, records in found.items()}


def evaluations_of(run, found: dict[int, list[dict]] | None = None) -> dict[int, list[dict]]:
    """{rank: the hooks' evaluations}, less the forwards that were part of a training step (`step_parts`)."""
    found = read_evaluations(run) if found is None else found
    parts = step_parts(run, found)
    return {
        rank: [r for r in records if not any(r is p for p in parts.get(rank, []))] for rank, records in found.items()
    }


def step_parts(run, found: dict[int, list[dict]] | None = None) -> dict[int, list[dict]]:
    """{rank: the hooks' records that were part of a training step, not an evaluation}: the model's forwards in
    training mode with gradients off that ran on a step's batch before its backward (a feature-caching pass, as
    open_clip's --accum-freq runs: every micro-batch's features computed without gradients, then each micro-batch
    re-run with them against the cached others). The hooks say so (`pending_batch_of`: the DataLoader iterator that
    yielded last held a batch no backward had taken, and a step trained from it); records that do not say (written
    before the hooks did) are taken as such where they recur at every step. Paired with the other side's
    validation, they would make a mode difference of work no evaluation did."""
    found = read_evaluations(run) if found is None else found
    out = {}
    for rank, records in found.items():
        candidates = [r for r in records if _no_grad_training_forwards(r)]
        if not candidates:  # the usual case: the hooks' facts are not read
            continue
        trained = _trained_iterators(run, rank)
        parts = [r for r in candidates if "pending_batch_of" in r and r["pending_batch_of"] in trained]
        unsaid = [r for r in candidates if "pending_batch_of" not in r]
        if unsaid and _recur_at_every_step(unsaid, records):
            parts += unsaid
        if parts:
            out[rank] = parts
    return out


def _no_grad_training_forwards(record: dict) -> bool:
    return _role(record) == MODEL and record.get("training") is True and record.get("grad_enabled") is False


def _trained_iterators(run, rank: int) -> set[int]:
    """The `order` of each DataLoader iterator a step of the rank trained from (its `loader_iterators` entry)."""
    items = fact_items(read_hook_facts(run, rank), "loader_iterators")
    return {i["order"] for i in items if i.get("trained") is True and isinstance(i.get("order"), int)}


def _recur_at_every_step(groups: list[dict], records: list[dict]) -> bool:
    """Groups after two steps or more, and after every step between the first and the last of them, or an
    evaluation in eval mode there (which held the step's group where the hooks did not yet part forwards by mode:
    a validation, then the next step's caching pass, with no training forward between). An evaluation left in
    training mode runs where the program validates (an epoch's end), not at every step."""
    steps = {r["step"] for r in groups if isinstance(r.get("step"), int)}
    if len(steps) < 2:
        return False
    evaluated = {r["step"] for r in records if r.get("training") is False}
    return all(step in steps or step in evaluated for step in range(min(steps), max(steps) + 1))


def model_evaluations(run) -> dict[int, list[dict]]:
    """{rank: the hooks' evaluations of the trained model}: a copy's (an EMA's) left out."""
    return {rank: records for rank, records in _of_role(evaluations_of(run), MODEL).items() if records}


def evaluation_differences(run_a, run_b, names) -> list[dict]:
    """Where both runs were recorded by the hooks, per rank the first evaluation that one side ran and the other did
    not at that point, and the first that both ran at one point with other outputs: warnings (the training is equal,
    or the difference in it is the diagnosis's to name). The model's evaluations and its copies' (an EMA) apart; the
    loop's own no-grad forwards (`loop_forwards`) compared with the other side's only (`loop_differences`)."""
    recorded = seen_evaluations(run_a), seen_evaluations(run_b)
    loops = loop_forwards((run_a, run_b), recorded)
    recorded = _less(recorded[0], loops[0]), _less(recorded[1], loops[1])
    out = loop_differences(loops, names)
    if not any(recorded[0].values()) and not any(recorded[1].values()):
        return out
    unseen = unseen_evaluations(run_a), unseen_evaluations(run_b)
    for role in (MODEL, COPY):
        evaluations = _of_role(recorded[0], role), _of_role(recorded[1], role)
        for rank in _ranks_with_unseen(unseen, role):  # said by unseen_warnings: nothing to pair them with
            for found in evaluations:
                found.pop(rank, None)
        if role == COPY and not any(evaluations[0].values()) and not any(evaluations[1].values()):
            continue
        if role == COPY and (not any(evaluations[0].values()) or not any(evaluations[1].values())):
            if not any(unseen[1 if any(evaluations[0].values()) else 0].values()):  # else it ran where none was seen
                out.append(_copy_on_one_side(evaluations, names))
            continue
        evaluations = _grouped_by_rank(evaluations[0]), _grouped_by_rank(evaluations[1])
        for rank in sorted(set(evaluations[0]) | set(evaluations[1])):
            for said in _differences(evaluations[0].get(rank, []), evaluations[1].get(rank, []), names, role):
                _add_evidence(said, (run_a, run_b), rank, evaluations, names)
                out.append({"kind": "evaluation_differs", "rank": rank, "role": role, **said})
                out[-1]["message"] = f"rank {rank}: {said['message']}"
    return out


def _add_evidence(said: dict, runs, rank: int, evaluations, names) -> None:
    """What the records show beside one difference: the evaluation's samples and the rank's buffers where its
    outputs differ, the ranks each side evaluates on where one side evaluates alone, the ranks' outputs alike."""
    if said.pop("outputs_apart", False):
        for evidence in (_samples(*runs, rank, said, names), _buffers_apart(*runs, rank, names)):
            if evidence:
                said["message"] += f"; {evidence}"
    if said.pop("one_sided", False):
        said["message"] += _ranks_said(evaluations, names)
    unsplit = [i for i, found in enumerate(evaluations) if _every_rank_alike(found, said)]
    if len(unsplit) == 1 and _ranks_apart(evaluations[1 - unsplit[0]], said):
        said["message"] += (
            f"; every rank of {names[unsplit[0]]} gave the same outputs there (as when its evaluation is "
            "not split by rank), the other side's ranks gave other ones"
        )


def _less(found: dict[int, list[dict]], parts: dict[int, list[dict]]) -> dict[int, list[dict]]:
    """{rank: records} less the records (the same objects) of `parts`."""
    return {
        rank: [r for r in records if not any(r is p for p in parts.get(rank, []))] for rank, records in found.items()
    }


# ---------------------------------------------------------------------------------------------
# the loop's own no-grad forwards: a rollout, a teacher's targets, a cache between steps


def loop_forwards(runs, found) -> tuple[dict[int, list[dict]], dict[int, list[dict]]]:
    """Per side, {rank: the model's forwards in training mode with gradients off that no evaluation DataLoader fed}:
    the loop's own work between steps (PPO's rollout of the policy, a teacher's targets, a cache), no evaluation. An
    evaluation runs with the model in eval mode or over a DataLoader of its own; these do neither, and one side makes
    them in its loop where the other makes the same inside its training step (Lightning's training_step), where the
    hooks see them as part of the step or not at all. Kept as an evaluation where the other side evaluates in eval
    mode at that point (model.eval() forgotten there: said as a mode), and where the rank's hooks wrote no facts
    (which loaders ran is unrecorded)."""
    out: tuple[dict, dict] = ({}, {})
    for side in (0, 1):
        for rank, records in found[side].items():
            facts = read_hook_facts(runs[side], rank)
            candidates = [r for r in records if _no_grad_training_forwards(r)]
            if not candidates or not facts:
                continue
            fed = _evaluation_loader_points(facts)
            evaluated = {_point(r) for r in found[1 - side].get(rank, []) if r.get("training") is False}
            loop = [r for r in candidates if not _fed_by(r, fed) and _point(r) not in evaluated]
            if loop:
                out[side][rank] = loop
    return out


def _point(record: dict) -> tuple:
    return record.get("step"), record.get("micro_batch")


def _evaluation_loader_points(facts: dict) -> tuple[set[int], set[int]]:
    """The steps after which an evaluation's DataLoader iterator started (one no step trained from that yielded a
    batch), and those iterators' `order`s."""
    items = [i for i in fact_items(facts, "loader_iterators") if i.get("trained") is False and i.get("batches")]
    steps = {i["before_step"] - 1 for i in items if isinstance(i.get("before_step"), int)}
    return steps, {i["order"] for i in items if isinstance(i.get("order"), int)}


def _fed_by(record: dict, fed: tuple[set[int], set[int]]) -> bool:
    """An evaluation DataLoader started after the record's step, or held the batch it ran on (`pending_batch_of`:
    an iterator started earlier and drawn from at each evaluation)."""
    steps, orders = fed
    return record.get("step") in steps or record.get("pending_batch_of") in orders


def loop_differences(loops, names) -> list[dict]:
    """Per rank where both sides recorded the loop's own no-grad forwards, the first point both ran them at with
    other outputs: a warning (the training is equal, or the diagnosis names what differs in it). Where one side
    recorded none they are compared with nothing, and said in the EQUIVALENT line (`in_loop`)."""
    out = []
    for rank in sorted(set(loops[0]) & set(loops[1])):
        pairs = _paired_by_point(loops[0][rank], loops[1][rank])
        apart = [(ra, rb) for ra, rb in pairs if not _same_outputs_of(ra, rb)]
        if not apart:
            continue
        ra, rb = apart[0]
        out.append(
            {
                "kind": "loop_forwards_differ",
                "rank": rank,
                "step": ra["step"],
                "micro_batch": ra["micro_batch"],
                "message": f"rank {rank}: the model's forwards in training mode with gradients off {_where(ra)}, over "
                f"no DataLoader of an evaluation's own (the loop's own work: a rollout, a teacher's targets, a cache; "
                f"no evaluation), gave other outputs ({ra.get('forwards')} forward(s), output_digest "
                f"{str(ra.get('output_digest'))[:16]} on {names[0]}; {rb.get('forwards')}, "
                f"{str(rb.get('output_digest'))[:16]} on {names[1]}); {len(apart)} of the points both sides ran them "
                "at differ on this rank. With the weights equal they ran on other inputs (an environment seeded "
                "otherwise, another draw) or another number of forwards",
            }
        )
    return out


def _same_outputs_of(ra: dict, rb: dict) -> bool:
    return (ra.get("forwards"), ra.get("output_digest")) == (rb.get("forwards"), rb.get("output_digest"))


def _ranks_said(evaluations, names) -> str:
    """Where the two sides evaluate on other ranks (one on rank 0 only, the other on every rank): said, since it is
    why one side has an evaluation at a point where the other records none."""
    ranks = [sorted(rank for rank, records in found.items() if records) for found in evaluations]
    if ranks[0] == ranks[1]:
        return ""
    said = [f"rank(s) {', '.join(map(str, found))}" if found else "no rank" for found in ranks]
    return f"; {names[0]} records evaluations on {said[0]}, {names[1]} on {said[1]}"


def _ranks_with_unseen(unseen, role: str) -> set[int]:
    return {rank for found in unseen for rank, records in found.items() if any(_role(r) == role for r in records)}


def evaluation_summary(run_a, run_b) -> dict | None:
    """The hooks' evaluations compared as a row of the report's table: {compared, equal, first_divergence} over
    every rank's evaluations of the model and of its copies (an EMA, with the other side's copies), paired in order
    at the same point (step, micro-batch), by their output digests (no metric the program computes); `recorded`
    [a, b] the evaluations each side recorded and `unseen` [a, b] those left out as outputs the weights did not move
    (`unseen_evaluations`); `unlike` {count, step, rank, forwards} the pairs that ran another number of forwards, not
    compared (each holds other work: a recalibration's forwards, precise BN's, or two evaluations recorded as one).
    `in_step` [a, b] the records left out as part of a training step (`step_parts`: a feature-caching pass), never
    counted as evaluations; `in_loop` {recorded [a, b], compared, equal} the loop's own no-grad forwards in training
    mode (`loop_forwards`: a rollout), compared with the other side's only, not counted in `recorded`. None where
    neither side recorded one."""
    read = read_evaluations(run_a), read_evaluations(run_b)
    if not any(read[0].values()) and not any(read[1].values()):
        return None
    everything = evaluations_of(run_a, read[0]), evaluations_of(run_b, read[1])
    seen = seen_evaluations(run_a, everything[0]), seen_evaluations(run_b, everything[1])
    loops = loop_forwards((run_a, run_b), seen)
    seen = _less(seen[0], loops[0]), _less(seen[1], loops[1])
    compared = equal = 0
    first = unlike = split = None
    alone: list[dict] = [{}, {}]  # per side {module: evaluations}: a part recorded apart at a point on one side only
    for role in (MODEL, COPY):
        by_role = _grouped_by_rank(_of_role(seen[0], role)), _grouped_by_rank(_of_role(seen[1], role))
        for rank in sorted(set(by_role[0]) & set(by_role[1])):
            for ga, gb in _paired_by_point(by_role[0][rank], by_role[1][rank]):
                for side, modules in enumerate(_parts_one_side(ga, gb)):
                    for module in modules:
                        alone[side][module] = alone[side].get(module, 0) + 1
                ra, rb = like_with_like(ga, gb)
                if ra.get("forwards") != rb.get("forwards"):  # other work recorded as one: unlike, not compared
                    unlike = unlike or {"count": 0, "step": ra["step"], "rank": rank, "forwards": []}
                    unlike["count"] += 1
                    unlike["forwards"] = unlike["forwards"] or [ra.get("forwards"), rb.get("forwards")]
                    continue
                if ra.get("pieces") != rb.get("pieces"):  # as many forwards, digested in other pieces: not comparable
                    split = split or {"count": 0, "step": ra["step"], "rank": rank, "pieces": []}
                    split["count"] += 1
                    split["pieces"] = split["pieces"] or [ra.get("pieces"), rb.get("pieces")]
                    continue
                compared += 1
                same = _same_outputs_of(ra, rb)
                equal += same
                if not same and (first is None or (ra["step"], rank) < (first["step"], first["rank"])):
                    digests = [str(r.get("output_digest"))[:16] for r in (ra, rb)]
                    first = {"step": ra["step"], "rank": rank, "a": digests[0], "b": digests[1], "role": role}
    return {
        "compared": compared,
        "equal": equal,
        "max_abs": None,
        "max_rel": None,
        "first_divergence": first,
        "recorded": [_evaluations_in(found) - _evaluations_in(loop) for found, loop in zip(everything, loops)],
        "unseen": [
            _evaluations_in(found) - _evaluations_in(kept) - _evaluations_in(loop)
            for found, kept, loop in zip(everything, seen, loops)
        ],
        "unlike": unlike,
        "split": split,
        "parts_one_side": alone,
        "in_step": [_count(found) - _count(kept) for found, kept in zip(read, everything)],
        "in_loop": _loop_summary(loops),
    }


def _loop_summary(loops) -> dict:
    """The loop's own no-grad forwards (`loop_forwards`): {recorded [a, b], compared, equal}, paired at the same
    point on ranks where both sides recorded them."""
    pairs = [p for rank in set(loops[0]) & set(loops[1]) for p in _paired_by_point(loops[0][rank], loops[1][rank])]
    return {
        "recorded": [_count(found) for found in loops],
        "compared": len(pairs),
        "equal": sum(_same_outputs_of(ra, rb) for ra, rb in pairs),
    }


def _count(found: dict[int, list[dict]]) -> int:
    return sum(len(records) for records in found.values())


def _evaluations_in(found: dict[int, list[dict]]) -> int:
    """How many evaluations the records make, each role's records grouped per point (`grouped`)."""
    return sum(len(grouped(_of_role({0: records}, role)[0])) for records in found.values() for role in (MODEL, COPY))


# ---------------------------------------------------------------------------------------------
# one evaluation per point: the records the hooks wrote for it, whatever parts of the model ran


def grouped(records: list[dict]) -> list[dict]:
    """A rank's records of one role as evaluations: the records that follow each other at one point (step,
    micro-batch) in one mode are one evaluation, however many modules they name and whatever the grad mode (an
    evaluation in eval() with gradients on that calls a part of the model on its own, a head outside the wrapper, is
    recorded by the hooks as forwards of each; older hooks wrote a record per run of one module's forwards). Each
    evaluation is its first record's fields with `parts`: the records it holds, in order."""
    out: list[dict] = []
    for record in records:
        last = out[-1] if out else None
        if last is not None and _point(last) == _point(record) and last.get("training") == record.get("training"):
            last["parts"].append(record)
            continue
        out.append({**record, "parts": [record]})
    return out


def _grouped_by_rank(found: dict[int, list[dict]]) -> dict[int, list[dict]]:
    return {rank: grouped(records) for rank, records in found.items()}


def _by_module(evaluation: dict) -> dict[str, list[dict]]:
    """{module: its records in the evaluation}, in the order each module first ran."""
    out: dict[str, list[dict]] = {}
    for part in evaluation.get("parts") or [evaluation]:
        out.setdefault(str(part.get("module")), []).append(part)
    return out


def _parts_one_side(ga: dict, gb: dict) -> tuple[list[str], list[str]]:
    """The modules one side's evaluation at a point ran apart that the other's did not, where both share another:
    a part of the model called on its own (a head outside the wrapper) on one side, inside the forward recorded on
    the other, where the hooks record no forward of it apart."""
    ma, mb = _by_module(ga), _by_module(gb)
    if not set(ma) & set(mb):
        return [], []
    return [m for m in ma if m not in mb], [m for m in mb if m not in ma]


def like_with_like(ga: dict, gb: dict) -> tuple[dict, dict]:
    """Two evaluations at one point reduced to what both recorded: the forwards of the modules both ran (all of each
    where they share none: one module each, named otherwise), each side as one record with those forwards summed,
    their digests in order (`output_digest`) and the forwards each record held (`pieces`): the same forwards digested
    in other pieces (one record of two forwards against two of one) give digests that cannot be compared."""
    ma, mb = _by_module(ga), _by_module(gb)
    shared = [m for m in ma if m in mb]
    chosen = (
        ([ma[m] for m in shared], [mb[m] for m in shared])
        if shared
        else ([next(iter(ma.values()))], [next(iter(mb.values()))])
    )
    out = []
    for evaluation, modules in zip((ga, gb), chosen):
        records = [r for module in modules for r in module]
        forwards = [r.get("forwards") for r in records]
        total = sum(forwards) if all(isinstance(f, int) for f in forwards) else None
        record = {k: v for k, v in evaluation.items() if k != "parts"}
        record.update(
            forwards=total,
            output_digest="+".join(str(r.get("output_digest")) for r in records),
            pieces=[[r.get("forwards") for r in module] for module in modules],
            module=", ".join(str(m[0].get("module")) for m in modules),
        )
        out.append(record)
    return out[0], out[1]


def _paired_by_point(a: list[dict], b: list[dict]) -> list[tuple[dict, dict]]:
    """The two sides' evaluations at the same point (step, micro-batch), in order there: one side's evaluation at a
    point the other has none (Lightning's sanity check after step 0) pairs with nothing and moves no other."""
    at_b: dict[tuple, list[dict]] = {}
    for record in b:
        at_b.setdefault((record["step"], record["micro_batch"]), []).append(record)
    pairs, taken = [], {}
    for record in a:
        point = (record["step"], record["micro_batch"])
        index = taken.get(point, 0)
        if index < len(at_b.get(point, [])):
            pairs.append((record, at_b[point][index]))
            taken[point] = index + 1
    return pairs


def seen_evaluations(run, found: dict[int, list[dict]] | None = None) -> dict[int, list[dict]]:
    """{rank: the hooks' evaluations} less those whose outputs the weights did not move (`unseen_evaluations`) and the
    forwards that were part of a step (`step_parts`)."""
    found = evaluations_of(run) if found is None else found
    unseen = unseen_evaluations(run, found)
    return {
        rank: [r for r in records if not any(r is u for u in unseen.get(rank, []))] for rank, records in found.items()
    }


def unseen_evaluations(run, found: dict[int, list[dict]] | None = None) -> dict[int, list[dict]]:
    """{rank: evaluations whose outputs the weights did not move}: one module's forwards giving one output digest
    after two steps or more between which the weights they ran with changed (the rank's parameter digest for the
    model, its `copy_digest` for a copy: a target network updated now and then keeps its outputs with reason). What
    the hooks digested there is no output of the model (a LightningModule's forward run as its validation_step,
    returning None, recorded by hooks that took it for the model); compared, such records would say nothing."""
    found = evaluations_of(run) if found is None else found
    out = {}
    for rank, records in found.items():
        repeated = [group for group in _same_outputs(records) if len({r["step"] for r in group}) > 1]
        if not repeated:  # the usual case: the step records are not read
            continue
        weights = _weight_digests(run, rank)
        unseen = [
            record
            for group in repeated
            if len({weights[_role(r)][r["step"]] for r in group if r["step"] in weights[_role(r)]}) > 1
            for record in group
        ]
        if unseen:
            out[rank] = unseen
    return out


def _same_outputs(records: list[dict]) -> list[list[dict]]:
    """The records grouped by what they gave: role, module, forwards and output digest."""
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        key = (_role(record), record.get("module"), record.get("forwards"), record.get("output_digest"))
        groups.setdefault(key, []).append(record)
    return list(groups.values())


def _weight_digests(run, rank: int) -> dict[str, dict[int, str]]:
    """{role: {step: the digest of the weights an evaluation of that role ran with after it}}, from the rank's step
    records: `param_digest` for the model, `copy_digest` for its copies (none where they cannot be read)."""
    try:
        records = read_records(run, rank)
    except (OSError, ValueError, TraceFormatError):
        records = []
    keys = {MODEL: "param_digest", COPY: "copy_digest"}
    return {
        role: {r["step"]: repr(r[key]) for r in records if key in r and isinstance(r["step"], int)}
        for role, key in keys.items()
    }


def unseen_warnings(run_a, run_b, names) -> list[dict]:
    """Per side, the evaluations left out as outputs the weights did not move: said, with what tells its two causes
    apart."""
    out = []
    for side, run in enumerate((run_a, run_b)):
        unseen = unseen_evaluations(run)
        if not unseen:
            continue
        records = [r for found in unseen.values() for r in found]
        steps = sorted({r["step"] for r in records})
        modules = sorted({str(r.get("module")) for r in records})
        out.append(
            {
                "kind": "evaluation_unseen",
                "side": names[side],
                "message": f"{names[side]}'s evaluations of {', '.join(modules)} after steps "
                f"{', '.join(map(str, steps))} (rank(s) {', '.join(map(str, sorted(unseen)))}) gave one output digest "
                f"({str(records[0].get('output_digest'))[:16]}) while the parameter digest changed between them: what "
                "the hooks digested did not move with the weights, so these evaluations were not compared. Either the "
                "module's forward returns no output of the model (a LightningModule's forward run as validation_step, "
                "which calls the model as a submodule and returns None: hooks that took the LightningModule for the "
                "model recorded it; record again, the hooks now take the part holding the trained parameters), or its "
                "outputs are rounded to the same values whatever the weights (predicted labels on a few samples). The "
                "module named tells them apart: the LightningModule or a wrapper (the first), the network (the second)",
            }
        )
    return out


def _copy_on_one_side(evaluations, names) -> dict:
    side = 0 if any(evaluations[0].values()) else 1
    records = [r for found in evaluations[side].values() for r in found]
    modules = sorted({str(r.get("module")) for r in records})
    return {
        "kind": "evaluation_differs",
        "role": COPY,
        "step": min(r["step"] for r in records),
        "micro_batch": 0,
        "message": f"{names[side]} evaluates a copy of the trained model ({', '.join(modules)}: an EMA, laid out as "
        f"the model and training none of its parameters) in eval mode {len(records)} time(s) over its ranks; the "
        f"hooks saw none on {names[1 - side]}: either {names[1 - side]} evaluates no copy, or they could not see it. "
        "A copy outside the recorded model is seen only where eval() was called on it; one never switched to eval() "
        f"usually runs in training mode (BatchNorm's batch statistics, dropout), unlike {names[side]}'s: call eval() "
        "on it before evaluating. Its outputs are not compared",
    }


def _digests_at(found: dict[int, list[dict]], said: dict) -> list:
    """Each rank's first output digest at the point `said` names (ranks that evaluated there)."""
    at = (said["step"], said["micro_batch"])
    digests = [
        [r.get("output_digest") for r in records if (r["step"], r["micro_batch"]) == at] for records in found.values()
    ]
    return [d[0] for d in digests if d]


def _every_rank_alike(found: dict[int, list[dict]], said: dict) -> bool:
    """Two ranks or more evaluated at that point, with one output digest."""
    digests = _digests_at(found, said)
    return len(digests) > 1 and len(set(digests)) == 1


def _ranks_apart(found: dict[int, list[dict]], said: dict) -> bool:
    """Two ranks or more evaluated at that point, with other output digests."""
    return len(set(_digests_at(found, said))) > 1


def _where(record: dict) -> str:
    micro = record["micro_batch"]
    within = f", after {micro} micro-batch(es) of step {record['step'] + 1}" if micro else ""
    return f"after step {record['step']}{within}"


def _what(role: str, record: dict) -> str:
    if role == COPY:
        return f"the evaluation of a copy of the trained model ({record.get('module')}, an EMA)"
    return "the evaluation"


# what "no evaluation recorded" can mean: the hooks see an evaluation as forwards of the model the steps train
NOT_SEEN = (
    " (an evaluation is recorded as forwards of the model the steps train, or of a copy of it, with gradients off or "
    "under eval(): one that calls a part of that model directly is not seen)"
)


def modes_apart(ra: dict, rb: dict) -> bool:
    """Two evaluations at one point that ran the same number of forwards, one with the model in training mode, the
    other in eval mode: the same work in another mode. With other forward counts each holds other work (one side's
    validation against the other's caching pass, or a validation and a pass recorded as one), and no mode is said."""
    recorded = isinstance(ra.get("training"), bool) and isinstance(rb.get("training"), bool)
    return recorded and ra["training"] != rb["training"] and ra.get("forwards") == rb.get("forwards")


def _mode_difference(ra: dict, rb: dict, names) -> dict:
    slipped, other = (names[0], names[1]) if ra["training"] else (names[1], names[0])
    return {
        "step": ra["step"],
        "micro_batch": ra["micro_batch"],
        "message": f"the evaluation {_where(ra)} gave other outputs: {slipped} ran it with the model in training "
        f"mode, {other} in eval mode (call model.eval() before evaluating on {slipped}, model.train() after)",
    }


def _differences(a: list[dict], b: list[dict], names, role: str = MODEL) -> list[dict]:
    """The first point one side evaluated at and the other did not, and the first evaluation both sides made at one
    point that gave other outputs, in step order: each said apart, so that one side's evaluation alone (Lightning's
    sanity check before step 1) never hides evaluations both made that differ (a validation sampler's epoch)."""
    pairs = _paired_by_point(a, b)
    said = [d for d in (_first_one_sided(a, b, pairs, names, role), _first_apart(pairs, names, role)) if d]
    return sorted(said, key=lambda d: (d["step"], d["micro_batch"]))


def _first_one_sided(a: list[dict], b: list[dict], pairs, names, role: str) -> dict | None:
    paired = {id(r) for pair in pairs for r in pair}
    alone = [(r, names[side]) for side, found in enumerate((a, b)) for r in found if id(r) not in paired]
    if not alone:
        return None
    record, name = min(alone, key=lambda x: (x[0]["step"], x[0]["micro_batch"]))
    copy = " a copy of the trained model" if role == COPY else ""
    return {
        "one_sided": True,
        "step": record["step"],
        "micro_batch": record["micro_batch"],
        "message": f"{name} evaluates{copy} {_where(record)} and the other side records no evaluation "
        f"{'of one ' if copy else ''}there{NOT_SEEN}",
    }


def _first_apart(pairs, names, role: str) -> dict | None:
    for ga, gb in pairs:
        ra, rb = like_with_like(ga, gb)
        if _same_outputs_of(ra, rb):
            continue
        if modes_apart(ra, rb):  # the mode is recorded: say it, not a list of maybes
            return _mode_difference(ra, rb, names)
        if ra.get("forwards") != rb.get("forwards"):
            return _unlike(ra, rb, names, role)
        if ra.get("pieces") != rb.get("pieces"):  # the same forwards digested in other pieces: nothing to compare
            continue
        return {
            "step": ra["step"],
            "micro_batch": ra["micro_batch"],
            "outputs_apart": True,
            "message": f"{_what(role, ra)} {_where(ra)} gave other outputs ({ra.get('forwards')} forward(s), "
            f"output_digest {str(ra.get('output_digest'))[:16]} on {names[0]}; {rb.get('forwards')}, "
            f"{str(rb.get('output_digest'))[:16]} on {names[1]}) with the training equal: it ran on other inputs "
            "or otherwise (another mode, dropout, autocast, another number of batches)"
            + (
                ", or the copy holds other weights (copied from other weights, such as a rank's own before DDP's "
                "broadcast; updated at another moment or rate)"
                if role == COPY
                else ""
            ),
        }
    return None


def _unlike(ra: dict, rb: dict, names, role: str) -> dict:
    """Two evaluations at one point that ran another number of forwards: each holds other work (a recalibration's
    forwards with gradients off, precise BN's, or two evaluations with nothing between recorded as one), so their
    outputs are not compared, and nothing is said of them but that."""
    return {
        "step": ra["step"],
        "micro_batch": ra["micro_batch"],
        "message": f"{_what(role, ra)} {_where(ra)} ran {ra.get('forwards')} forward(s) on {names[0]} and "
        f"{rb.get('forwards')} on {names[1]}: the forwards recorded as this evaluation hold other work on one side "
        "(a recalibration run with gradients off, such as precise BN's, or two evaluations with no step between), "
        "so their outputs were not compared",
    }


def _evaluation_loaders(run, rank: int, step: int) -> list[dict]:
    """The DataLoader iterators a rank's hooks saw start after `step` optimizer steps that no step trained from
    and that yielded a batch: an evaluation's loaders, in the order they started."""
    items = fact_items(read_hook_facts(run, rank), "loader_iterators")
    return [i for i in items if i.get("before_step") == step + 1 and i.get("trained") is False and i.get("batches")]


def _samples(run_a, run_b, rank: int, said: dict, names) -> str | None:
    """What the evaluation's own DataLoader shows where its outputs differ: other sample indices (with the sampler's
    epoch or arguments where those differ), or the same indices on both sides; None where no loader was recorded."""
    loaders = _evaluation_loaders(run_a, rank, said["step"]), _evaluation_loaders(run_b, rank, said["step"])
    pairs = [
        (a, b)
        for a, b in zip(*loaders)
        if isinstance(a.get("indices_sha256"), str) and isinstance(b.get("indices_sha256"), str)
    ]
    if not pairs or len(loaders[0]) != len(loaders[1]):
        return None
    apart = [(a, b) for a, b in pairs if (a["indices_sha256"], a["batches"]) != (b["indices_sha256"], b["batches"])]
    if not apart:
        return (
            f"its DataLoader yielded the same sample indices on both sides ({pairs[0][0]['batches']} batch(es)), so "
            "the samples' contents differ (a transform drawing otherwise) or it ran otherwise"
        )
    a, b = apart[0]
    out = (
        f"it ran on other samples: its DataLoader ({a.get('dataset')}) yielded other sample indices "
        f"({a['batches']} batch(es) on {names[0]}, {b['batches']} on {names[1]})"
    )
    sa, sb = (x.get("sampler") if isinstance(x.get("sampler"), dict) else {} for x in (a, b))
    ea, eb = sa.get("epoch"), sb.get("epoch")
    if isinstance(ea, int) and isinstance(eb, int) and ea != eb and sa.get("shuffle") is not False:
        return out + (
            f"; its sampler ({sa.get('class')}, shuffle {sa.get('shuffle')}) was at epoch {ea} on {names[0]} and {eb} "
            f"on {names[1]}: set_epoch was called on it on one side only, or with another value (Lightning calls "
            "set_epoch on the sampler of every DataLoader it iterates, the validation's too, each epoch). Fix: give "
            "the evaluation's sampler the same epoch on both sides (call its set_epoch as the other side does), or "
            "evaluate in a fixed order (shuffle=False)"
        )
    keys = [k for k in sorted(set(sa) | set(sb)) if k != "epoch" and sa.get(k) != sb.get(k)]
    if keys:
        return out + "; its samplers differ: " + ", ".join(f"{k} {sa.get(k)!r} vs {sb.get(k)!r}" for k in keys)
    return out


def _buffers_apart(run_a, run_b, rank: int, names) -> str | None:
    """Where rank `rank` (not 0) ends with other buffers on the two sides while rank 0's agree: a BatchNorm's
    running statistics kept per rank on one side and broadcast from rank 0 on the other (DDP's broadcast_buffers at
    every forward through its wrapper), which an evaluation on that rank normalises with. None otherwise."""
    if rank == 0:
        return None
    try:
        per_side = [_rank_buffers(read_meta(run)) for run in (run_a, run_b)]
    except (OSError, ValueError, TraceFormatError):
        return None
    zero = [_by_tail(side.get(0)) for side in per_side]
    mine = [_by_tail(side.get(rank)) for side in per_side]
    if not all(zero) or not all(mine) or zero[0] != zero[1]:
        return None
    apart = sorted(name for name in set(mine[0]) & set(mine[1]) if mine[0][name] != mine[1][name])
    if not apart:
        return None
    broadcast = [_broadcasts_buffers(run, rank) for run in (run_a, run_b)]
    words = (
        f"rank {rank}'s buffers end apart ({apart[0]}{f' and {len(apart) - 1} more' if len(apart) > 1 else ''}), "
        "rank 0's alike: what an evaluation on that rank normalises with (a BatchNorm's running statistics)"
    )
    if broadcast[0] != broadcast[1] and None not in broadcast:
        on, off = (names[0], names[1]) if broadcast[0] else (names[1], names[0])
        words += (
            f". {on} gives DDP broadcast_buffers=True (rank 0's buffers copied to every rank at each forward "
            f"through the wrapper); {off}'s ranks keep their own (no DDP wrapper, or broadcast_buffers=False). Fix: "
            "sync the buffers alike, DDPStrategy(broadcast_buffers=False) on Lightning where the loop keeps them per "
            "rank, or the loop's model given to DDP (or its buffers broadcast from rank 0 before each forward)"
        )
    return words


def _rank_buffers(meta: dict) -> dict:
    return {f.get("rank", r): f.get("buffers_sha256") for r, f in enumerate(meta.get("ranks") or [])}


def _by_tail(buffers) -> dict:
    """A rank's buffer digests by their names less any wrapper's prefix (`model.`), for pairing across sides."""
    if not isinstance(buffers, dict):
        return {}
    return {name.split("model.", 1)[-1] if name.startswith("model.") else name: d for name, d in buffers.items()}


def _broadcasts_buffers(run, rank: int) -> bool | None:
    """Whether the rank's model was given to DDP with broadcast_buffers (the hooks' `ddp` facts); False where the
    hooks saw no DDP construction, None where the run was not recorded by hooks."""
    facts = read_hook_facts(run, rank)
    if not facts:
        return None
    wrapped = fact_items(facts, "ddp")
    return any(item.get("broadcast_buffers") is not False for item in wrapped) if wrapped else False


# ---------------------------------------------------------------------------------------------
# the DataLoaders' samplers as built, the training's and the evaluations', side by side


def samplers_apart(run_a, run_b) -> list[dict]:
    """Per rank where both sides' hooks recorded DataLoader iterators, the first pair of the training's (in the
    order they started) and the first of an evaluation's (paired by the step they started before, in order there)
    whose samplers as built differ (their epoch aside: set_epoch's, said by the epoch checks): [{rank, trained,
    before_step, dataset, apart {argument: [a, b]}, pairs, indices_apart, orders [a, b], first_indices [a, b]}],
    `pairs` the iterators paired, `indices_apart` how many of them yielded other sample indices, `orders` how many
    distinct index orders each side's paired iterators yielded."""
    out = []
    for rank in range(_world_size(run_a)):
        facts = read_hook_facts(run_a, rank), read_hook_facts(run_b, rank)
        if not all(facts):
            continue
        for trained in (True, False):
            found = _iterators_of(facts[0], trained), _iterators_of(facts[1], trained)
            pairs = list(zip(*found)) if trained else _paired_by_start(*found)
            apart = next(((ia, ib) for ia, ib in pairs if _sampler_args_apart(ia, ib)), None)
            if apart is None:
                continue
            digests = [[p[side].get("indices_sha256") for p in pairs] for side in (0, 1)]
            out.append(
                {
                    "rank": rank,
                    "trained": trained,
                    "before_step": apart[0].get("before_step"),
                    "dataset": apart[0].get("dataset"),
                    "apart": {k: list(v) for k, v in _sampler_args_apart(*apart).items()},
                    "classes": [str(i["sampler"].get("class")) for i in apart],
                    "pairs": len(pairs),
                    "indices_apart": sum(da != db for da, db in zip(*digests)),
                    "orders": [len(set(d)) for d in digests],
                    "first_indices": [str(i.get("indices_sha256"))[:8] for i in apart],
                    "steps": [p[0].get("before_step") for p in pairs],
                }
            )
    return out


def _world_size(run) -> int:
    try:
        size = read_meta(run).get("world_size")
    except (OSError, ValueError, TraceFormatError):
        return 0
    return size if isinstance(size, int) and size > 0 else 0


def _iterators_of(facts: dict, trained: bool) -> list[dict]:
    """A rank's DataLoader iterators that yielded a batch, with their sampler recorded: those a step trained from
    (`trained`), or those none did (an evaluation's)."""
    return [
        i
        for i in fact_items(facts, "loader_iterators")
        if i.get("trained") is trained and i.get("batches") and isinstance(i.get("sampler"), dict) and i["sampler"]
    ]


def _paired_by_start(a: list[dict], b: list[dict]) -> list[tuple[dict, dict]]:
    """Two sides' evaluation iterators paired by the step they started before, in order there: one side's alone at
    a step (Lightning's sanity check before step 1) pairs with nothing."""
    at_b: dict = {}
    for item in b:
        at_b.setdefault(item.get("before_step"), []).append(item)
    pairs, taken = [], {}
    for item in a:
        step = item.get("before_step")
        index = taken.get(step, 0)
        if index < len(at_b.get(step, [])):
            pairs.append((item, at_b[step][index]))
            taken[step] = index + 1
    return pairs


def _sampler_args_apart(ia: dict, ib: dict) -> dict[str, tuple]:
    """{argument: (a's, b's)} of two iterators' samplers as built that differ, the epoch aside."""
    a, b = ({k: v for k, v in i["sampler"].items() if k != "epoch"} for i in (ia, ib))
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def sampler_words(found: dict, names) -> str:
    """One sampler difference (`samplers_apart`) in words: what differs, side by side."""
    args = ", ".join(f"{k} {v[0]!r} on {names[0]}, {v[1]!r} on {names[1]}" for k, v in found["apart"].items())
    classes = found["classes"]
    which = classes[0] if classes[0] == classes[1] else f"{classes[0]} on {names[0]}, {classes[1]} on {names[1]}"
    return f"{args} ({which})"


def evaluation_sampler_warnings(run_a, run_b, names) -> list[dict]:
    """Where an evaluation's DataLoader had another sampler on the two sides (its arguments as built, shuffle on one
    side only): a warning, one for the ranks alike, with the sample indices its iterators yielded side by side. The
    training is not touched by it; the evaluations ran on other sample indices where those differ."""
    found = [f for f in samplers_apart(run_a, run_b) if not f["trained"]]
    if not found:
        return []
    first = found[0]
    ranks = ", ".join(str(f["rank"]) for f in found)
    pairs, apart, orders = first["pairs"], first["indices_apart"], first["orders"]
    steps = ", ".join(str(s - 1) for s in first["steps"] if isinstance(s, int))
    indices = (
        f"at the {pairs} evaluation(s) both sides ran (after step(s) {steps}) on rank {first['rank']}, its "
        f"iterators yielded other sample indices at {apart} of them (indices_sha256 {first['first_indices'][0]}… on "
        f"{names[0]}, {first['first_indices'][1]}… on {names[1]} at the first), {orders[0]} distinct order(s) on "
        f"{names[0]} and {orders[1]} on {names[1]}: the evaluations ran on other samples or in another order"
        if apart
        else f"its iterators yielded the same sample indices at the {pairs} evaluation(s) both sides ran on rank "
        f"{first['rank']}"
    )
    return [
        {
            "kind": "evaluation_sampler_differs",
            "rank": first["rank"],
            "step": first["before_step"] - 1 if isinstance(first["before_step"], int) else None,
            "message": f"rank(s) {ranks}: the evaluation's DataLoader ({first['dataset']}) has another sampler on the "
            f"two sides: {sampler_words(first, names)}; {indices}. The training does not read it. Fix: build the "
            f"evaluation's sampler with the same arguments on both sides ({', '.join(first['apart'])})",
        }
    ]
