"""The causes of a difference between two runs, each one definition (`base.Cause`) in the file of
its phase of a training step:

    setup.py     crash, stall, meta.json, configuration, sharding plan, param groups, weights
    seeds.py     the seeds: the configuration's, the DistributedSampler's, those the hooks recorded per rank
    data.py      resume, step numbers and counts, samples, batch contents
    per_step.py  another number of samples per step (batch size, accumulation unrecorded), before any seed
    forward.py   a module's mode (an evaluation in training mode too), a random layer, a module's computation,
                 the loss
    backward.py  the gradient norm: recorded after clipping, summed in another order, a factor, .grad
    update.py    an optimizer over stale tensors, the learning rate, the update
    schedule_steps.py  a scheduler stepped another number of times per optimizer step
    end.py       buffers, final parameters, validation, structural problems, equivalent
    measured.py  what was measured otherwise while the training is the same (recording), or unproved
    undetermined.py  no single cause: the candidates ranked
    parting.py   what else is recorded apart at the parting step, and the lr apart there in place of no cause
    noise.py     under --tolerance noise: within the noise, or the step that leaves it

`CAUSES` is the causal order, declared once: the diagnosis runs each check in that order, and the
first finding is the diagnosis. A check that tells several kinds apart runs once, where its first
kind stands. A new cause is one `Cause` in its phase's file, placed in this list, and one case in the
bug corpus (benchmarks/bugs).
"""

from __future__ import annotations

from ddp_parity.compare.causes import (
    backward,
    data,
    end,
    forward,
    measured,
    noise,
    parting,
    per_step,
    resume,
    schedule_steps,
    seeds,
    setup,
    undetermined,
    update,
)
from ddp_parity.compare.causes.base import Cause, Evidence

CAUSES: tuple[Cause, ...] = (
    setup.CRASH,
    setup.STALL,
    setup.METADATA,
    setup.CONFIG,
    setup.CONFIG_THREADS,
    setup.CONFIG_ARITHMETIC,
    setup.CONFIG_STATE,
    setup.CONFIG_TORCH_FLAGS,
    setup.CONFIG_SHARDING,
    seeds.SAMPLER_SEED,
    seeds.CONFIG_SEED,
    setup.PARAM_GROUPS,
    setup.PARAM_GROUPS_CLASS,
    setup.TIED,
    setup.INIT,
    setup.INIT_PARAMETER,
    resume.RESUME,
    update.OPTIMIZER_OTHER_STEPS,
    per_step.DATA_BATCH_SIZE,
    forward.LOSS_GATHERED,  # before the seeds: a generator apart at equal batches is not where the loss parts
    seeds.RNG_SEED,
    seeds.RNG_RESEED,
    forward.TRAINING_MODE,
    seeds.RNG_LOADER_DRAWS,
    data.RECORDED_STEP_OFFSET,
    data.STEP_COUNT_STOP,
    data.STEP_COUNT,
    data.STEP_COUNT_EMPTY,
    data.SET_EPOCH,
    data.DATA_ACCUMULATION,
    data.DATA_RESTARTED,
    data.DATA_REMADE,
    data.DATA_EPOCH,
    data.DATA_SKIPPED,
    data.DATA_AHEAD,
    data.DATA_NOT_SHUFFLED,
    data.DATA_EVALUATION,
    data.DATA_SHARED,
    data.DATA_ORDER_UNRECORDED,
    data.DATA_ORDER,
    data.DATA_FED_ALIKE,  # after the samples' own findings: the same relation read where the samples are not first
    seeds.RNG_DRAWN_BEFORE_STEP_1,
    seeds.RNG_OTHER_GENERATOR,
    data.DATA_INDICES_UNRECORDED,
    data.DATA_PIPELINE,
    forward.EVALUATION_TRAIN_MODE,
    measured.RECORDED_MEASURE,
    update.OPTIMIZER_LR_GROUP,  # before every cause that reads the record's lr: that is group 0's, equal here
    update.OPTIMIZER_STALE_PARAMS,
    update.OPTIMIZER_CLIP_EARLIER,
    update.OPTIMIZER_HYPERPARAMETERS,
    backward.GRADIENTS_ACROSS_VALIDATION,
    backward.GRADIENTS_SYNC_PATTERN,
    backward.REDUCTION_ORDER_SHARDING,
    backward.GRADIENTS_ACCUMULATION_SYNC,
    forward.LOSS_FACTOR,
    backward.FROZEN,
    forward.MODULE_STATE,
    forward.RNG,
    forward.NUMERICS_MODULE,
    forward.NUMERICS,
    forward.LOSS,
    backward.RECORDED_CLIPPED_NORM,
    backward.REDUCTION_ORDER,
    backward.GRADIENTS_CLIPPED_ONE_SIDE,
    backward.GRADIENTS_NORM_TYPE,
    backward.GRADIENTS_FACTOR,
    backward.GRADIENTS,
    schedule_steps.OPTIMIZER_SCHEDULER_STEPS,
    update.OPTIMIZER_LR_RESTART,  # before the shift: an epoch of k steps restarted is also a shift of k
    update.RECORDED_LR,
    update.OPTIMIZER_LR_AHEAD,
    update.OPTIMIZER_LR_SHIFT,
    update.OPTIMIZER_LR,
    update.OPTIMIZER_EFFECTIVE_LR,
    update.OPTIMIZER_CLIP,
    update.OPTIMIZER,
    end.FINAL_MOVED,
    end.BUFFERS_REPLICAS,
    end.BUFFERS_SYNC,
    end.BUFFERS_AVERAGED,
    end.BUFFERS_STATISTICS,
    end.FINAL_PARAMS,
    end.RECORDED_FLOAT32_VALIDATION,
    end.NUMERICS_VALIDATION,
    end.VALIDATION_STEPS,
    end.STATE_NAMES,
    end.PROBLEMS,
    end.EQUIVALENT,
)
# the checks in causal order, each once; the last (equivalent) always finds
CHECKS = tuple(dict.fromkeys(cause.check for cause in CAUSES))
# causes not in the order: reported by the checks of the loss, the gradients and the update when no
# single cause holds (and the lr apart at that step, which the diagnosis reports in its place), and those made
# under measured noise
REPORTED = (
    undetermined.UNDETERMINED,
    undetermined.UNRECORDED,
    parting.OPTIMIZER_LR_AT_PARTING,
    *noise.NOISE_CAUSES.values(),
)
EVERY_CAUSE: tuple[Cause, ...] = (*CAUSES, *REPORTED)

# every category a diagnosis may name
CATEGORIES = tuple(dict.fromkeys(cause.category for cause in EVERY_CAUSE))
# causes found before any step's numbers (or from how a run ended): their own evidence is direct, and a
# module finding after them is a consequence, not a contradiction
UPSTREAM_CATEGORIES = (
    "equivalent",
    "crash",
    "stall",
    "metadata",
    "config",
    "param_groups",
    "init",
    "tied",
    "frozen",
    "resume",
    "step_count",
    "sampler_seed",
    "set_epoch",
    "data_order",
    "recording",
    "buffers",
)
# the evidence each kind of finding needs before it may give its fix (one per kind: the causes that
# share a kind share it)
REQUIRES: dict[str, Evidence] = {cause.kind: cause.requires for cause in EVERY_CAUSE}
# the module readings that name a module's own computation
COMPUTATION_READINGS = forward.COMPUTATION_READINGS

KINDS_TABLE_START = "<!-- the table of kinds: written by `python -m ddp_parity.compare.causes` from the registry -->"
KINDS_TABLE_END = "<!-- end of the table of kinds -->"


def kinds_table() -> str:
    """docs/diagnosis.md's table of kinds: one row per cause, in causal order, then those reported."""
    rows = [
        "| kind | phase | found by | evidence it needs before its fix | what it names |",
        "|---|---|---|---|---|",
    ]
    for cause in EVERY_CAUSE:
        phase = cause.check.__module__.rsplit(".", 1)[-1]
        rows.append(f"| `{cause.kind}` | {phase} | `{cause.check.__name__}` | {cause.requires.says} | {cause.doc} |")
    return "\n".join([KINDS_TABLE_START, *rows, KINDS_TABLE_END])
