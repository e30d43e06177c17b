"""The corpus: real-world training bugs, each made on one side of a pair that is otherwise a bitwise
twin, and clean pairs that must come out equivalent. Every bug cites the tracker report or the
tutorial classic it reproduces, and states what a right diagnosis says: the category, the first
step (by construction: the step at which the slip first changes what is computed), the module where
one is involved, and words of the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from benchmarks.bugs.loops import Setup

STEPS_PER_EPOCH = Setup().samples // Setup().batch  # 6


@dataclass(frozen=True)
class Case:
    name: str
    cites: str
    a: Setup  # the reference side: a hand-written loop
    b: Setup  # the other side: the slip, or the same training
    category: str = "equivalent"
    step: int | None = None
    module: str | None = None  # the module (or parameter) a right diagnosis names
    fix: str = "Nothing to fix"
    b_trainer: bool = False  # side b is a Lightning Trainer with TraceCallback
    trainer: dict = field(default_factory=dict)  # fit_trainer keywords
    world: int = 1  # > 1: both sides are DDP loops on that many gloo ranks

    @property
    def family(self) -> str:
        return self.a.family

    @property
    def pair(self) -> str:
        if self.world > 1:
            return f"DDP loops, {self.world} ranks"
        return "loop vs Trainer" if self.b_trainer else "loop vs loop"

    @property
    def clean(self) -> bool:
        return self.category == "equivalent"


def slip(name, cites, base: Setup, category, step, module, fix, **knobs) -> Case:
    return Case(name, cites, base, base.changed(**knobs), category, step, module, fix)


def on_each(model: Setup, name, cites, common: dict, changed: dict, category, step, module, fix) -> Case:
    """One slip made the same way on one model family: both sides share `common`, side b adds `changed`."""
    a = model.changed(**common)
    return Case(f"{name} ({model.family})", cites, a, model.changed(**(common | changed)), category, step, module, fix)


MLP, CNN, TRANSFORMER = Setup(family="mlp"), Setup(family="cnn"), Setup(family="transformer")
TWO_EPOCHS = {"epochs": 2}
AUGMENTED = {"augment": True, "workers": 2}
ONECYCLE = "https://github.com/Lightning-AI/pytorch-lightning/issues/2643"
WORKERS = "https://github.com/Lightning-AI/pytorch-lightning/issues/7937"
SANITY = "https://github.com/Lightning-AI/pytorch-lightning/issues/6988"
ZERO_GRAD = "https://github.com/Lightning-AI/pytorch-lightning/issues/591"
SYNC_DIST = "https://github.com/Lightning-AI/pytorch-lightning/issues/21859"
UNUSED = "https://github.com/pytorch/pytorch/issues/43259 (find_unused_parameters with a frozen layer)"
EVAL = "tutorial classic: model.eval() for validation, model.train() never called again"
SET_EPOCH = "tutorial classic (PyTorch DistributedSampler docs): set_epoch(epoch) before each epoch"
ACCUMULATE = "tutorial classic: gradient accumulation without dividing the loss"
DATA_ORDER = "tutorial classic: shuffle on one side only"

RELATIONS = "issue 37: the exact relation between the two runs"
STEP_LR = {"schedule": "step", "validate": False}  # StepLR: steps 1 and 2 share a rate, step 3 halves it
SCHEDULE_ORDER = "tutorial classic (PyTorch lr_scheduler docs): scheduler.step() after optimizer.step()"
UNSCALED = {"accumulate": 2, "scale_loss": False, "record_loss": "backward"}
SCALER = "issue 46 (public programs): the loss recorded after GradScaler's scaler.scale(loss), × 2^16"
K_SCHED = "issue 46 (public programs): scheduler.step() per micro-batch, or by hand beside lr_scheduler_config"
COUNTED, TWICE = MLP.changed(record_scheduler_count=True, accumulate=2, **STEP_LR), {"scheduler_steps": 2}
SCALED, ONECYCLE_MLP = {"loss_times": 65536.0}, MLP.changed(schedule="onecycle_loader")
SCALED_SET, STEPS = ONECYCLE_MLP.changed(schedule="onecycle_dataset", **SCALED), "total_steps"
NO_SYNC = "issue 46 (public programs): a no_sync() left around every micro-batch, the last one's too"
SYNC_LAST = MLP.changed(accumulate=2, record_sync=True, validate=False, sync="last")
SYNC_NONE, FIX_SYNC = SYNC_LAST.changed(sync="none"), "let the last micro-batch's backward sync"
# issue 46's tenth pass (docs/programs.md: openclip, timm, swin): the slips its classes were found on
TIMM_TRAIN = "https://github.com/huggingface/pytorch-image-models/blob/main/train.py"
LR_AFTER = (
    "https://github.com/mlfoundations/open_clip/blob/main/src/training/train.py (scheduler(step), the lr adjuster, "
    "called before each step's forward; a port calling it after optimizer.step())"
)
HAND_LR = {"hand_lr": "before", "record_built": True, "record_scheduler_count": True, "validate": False}
SIZED = (
    "https://github.com/microsoft/Swin-Transformer/blob/main/main.py (build_scheduler(config, optimizer, "
    "len(data_loader_train) // config.TRAIN.ACCUMULATION_STEPS): a port passing len(data_loader_train) alone)"
)
WARMUP_COSINE = {"schedule": "warmup_cosine", "epochs": 2, "validate": False}
NEVER_STEPPED = f"{TIMM_TRAIN} (lr_scheduler.step_update(num_updates) after every update; a port never stepping it)"
LAST_ACCUM = (
    f"{TIMM_TRAIN} (train_one_epoch: last_accum_steps, an epoch's left-over micro-batches divided by their count)"
)
# issue 46's ninth pass (docs/programs.md: vitft, var, basicsr)
VAR_SCHEDULE = (
    "https://github.com/FoundationVision/VAR/blob/main/train.py (lr_wd_annealing(..., cur_it, ...) from the global "
    "iteration ep * iters_train + it; a port counting from the iteration within the epoch)"
)
WARMUP_BOUND = (
    "https://github.com/XPixelGroup/BasicSR/blob/master/basicsr/models/base_model.py (update_learning_rate: the "
    "warm-up's rate set by hand while current_iter < warmup_iter; the bound off by one on one side)"
)
LEFTOVER = {"samples": 40, "accumulate": 2, "epochs": 2, "record_micro": True, "validate": False}  # 5 micro-batches

# slips whose diagnosis names an exact relation between the sides' numbers (compare/relations.py): a
# factor equal to a recorded count, a shift by k steps, another norm, a gradient on one side only, one
# constant between every layer's update
RELATION_CASES = (
    slip(
        "loss not divided by the accumulation, recorded as backpropagated (mlp)",
        ACCUMULATE,
        MLP.changed(accumulate=2),
        "loss",
        1,
        None,
        "Divide the loss by accumulate_grad_batches",
        **UNSCALED,
    ),
    Case(
        "loss not divided by the accumulation vs Trainer (transformer)",
        ACCUMULATE,
        TRANSFORMER.changed(**UNSCALED, validate=False),
        TRANSFORMER.changed(accumulate=2, validate=False),
        "loss",
        1,
        None,
        "Divide the loss by accumulate_grad_batches",
        b_trainer=True,
    ),
    *(
        on_each(
            m,
            "gradient norm with norm_type=inf",
            RELATIONS,
            {},
            {"norm_type": math.inf},
            "recording",  # the gradients and parameters equal: only the measured norm differs
            1,
            None,
            "norm_type=2.0",
        )
        for m in (MLP, TRANSFORMER)
    ),
    Case(
        "gradient norm with norm_type=inf vs Trainer (cnn)",
        RELATIONS,
        CNN.changed(norm_type=math.inf, validate=False),
        CNN.changed(validate=False),
        "recording",
        1,
        None,
        "norm_type=2.0",
        b_trainer=True,
    ),
    slip("gradient norm as the 1-norm (cnn)", RELATIONS, CNN, "recording", 1, None, "norm_type=2.0", norm_type=1.0),
    slip(
        "a batch taken from the training iterator before the first step (mlp)",
        RELATIONS,
        MLP,
        "data_order",
        1,
        None,
        "draw no batch from the training data outside the steps",
        peek=1,
    ),
    slip(
        "token embedding frozen on one side (transformer)",
        UNUSED,
        TRANSFORMER,
        "frozen",
        1,
        None,
        "requires_grad_(False) on embed.weight",
        frozen=("embed.weight",),
    ),
    Case(
        "a conv frozen in the loop vs Trainer (cnn)",
        UNUSED,
        CNN.changed(frozen=("conv.weight", "conv.bias"), validate=False),
        CNN.changed(validate=False),
        "frozen",
        1,
        None,
        "requires_grad_(False)",
        b_trainer=True,
    ),
    *(
        on_each(
            m,
            "lr schedule one iteration ahead",
            SCHEDULE_ORDER,
            STEP_LR,
            {"scheduler_first": True},
            "optimizer",
            2,
            None,
            "scheduler.step() after optimizer.step()",
        )
        for m in (MLP, CNN)
    ),
    *(
        on_each(
            m,
            "scheduler.step() before optimizer.step(), the lr read before both",
            SCHEDULE_ORDER,
            STEP_LR,
            {"scheduler_first": True, "lr_read": "before_step"},
            "optimizer",
            2,
            None,
            "scheduler.step() after optimizer.step()",
        )
        for m in (MLP, TRANSFORMER)
    ),
    *(
        on_each(
            m,
            "lr set by hand after optimizer.step()",
            LR_AFTER,
            HAND_LR,
            {"hand_lr": "after"},
            "optimizer",
            1,
            None,
            "set the rate before optimizer.step()",
        )
        for m in (MLP, CNN)
    ),
    *(
        on_each(
            m,
            "a warm-up and cosine sized in micro-batches",
            SIZED,
            WARMUP_COSINE | {"accumulate": 2},
            {"schedule_unit": "micro_batches"},
            "optimizer",
            2,
            None,
            "Size the schedule in optimizer updates",
        )
        for m in (MLP, CNN)
    ),
    *(
        on_each(
            m,
            "a per-update schedule never stepped",
            NEVER_STEPPED,
            WARMUP_COSINE,
            {"scheduler_steps": 0},
            "optimizer",
            2,
            None,
            "step the schedule once per optimizer step",
        )
        for m in (MLP, TRANSFORMER)
    ),
    *(
        on_each(
            m,
            "an epoch's lone last micro-batch divided by its own count",
            LAST_ACCUM,
            LEFTOVER | {"leftover": "configured"},
            {"leftover": "own"},
            "loss",
            3,  # epoch 0's left-over micro-batch, stepped alone
            None,
            "divide the loss of a shorter accumulation",
        )
        for m in (MLP, TRANSFORMER)
    ),
    *(
        on_each(
            m,
            "a schedule started again at each epoch",
            VAR_SCHEDULE,
            WARMUP_COSINE,
            {"rebuild_scheduler": True},
            "optimizer",
            STEPS_PER_EPOCH + 1,
            None,
            "not from the iteration within the epoch (batch_idx)",
        )
        for m in (MLP, CNN)
    ),
    slip(
        "the warm-up's last rate set by hand a step early (mlp)",
        WARMUP_BOUND,
        MLP.changed(**WARMUP_COSINE, record_scheduler_count=True),
        "optimizer",
        2,  # the warm-up's factor 0.55 there, the peak set by hand on one side
        None,
        "Give step 2 the same rate on both sides",
        lr_at=(2, MLP.lr),
    ),
    *(
        on_each(
            m,
            "lr read after scheduler.step()",
            SCHEDULE_ORDER,
            STEP_LR,
            {"lr_read": "after_scheduler"},
            "recording",
            2,
            None,
            "before scheduler.step()",
        )
        for m in (MLP, CNN)
    ),
)

# issue 46: a seed is named only where both sides take as many samples per step
SEEDS = "issue 46: a Lightning port with accumulate_grad_batches=2 headlined as a seed difference"
SAMPLED = {"sampler": "distributed", "record_sampler": True}
SEED_CASES = (
    slip(
        "another DistributedSampler seed (mlp)",
        SEEDS,
        MLP.changed(**SAMPLED),
        "sampler_seed",
        1,
        None,
        "DistributedSampler(..., seed=",
        sampler_seed=12,
    ),
    slip(
        "accumulation 2 with another sampler seed, micro-batches unrecorded (mlp)",
        SEEDS,
        MLP.changed(**SAMPLED, validate=False),
        "data_order",
        1,
        None,
        "accumulate_grad_batches",
        sampler_seed=12,
        accumulate=2,
    ),
)

ISSUE_46 = (
    slip("scheduler per micro-batch (mlp)", K_SCHED, COUNTED, "optimizer", 2, None, "step the scheduler as", **TWICE),
    slip("loss × GradScaler's scale (mlp)", SCALER, MLP, "recording", 1, None, "before scaler.scale(loss)", **SCALED),
    Case(
        "loss × scale, OneCycleLR from the dataset (mlp)", SCALER, ONECYCLE_MLP, SCALED_SET, "optimizer", 2, None, STEPS
    ),
    Case(
        "no micro-batch synced under DDP (mlp)", NO_SYNC, SYNC_LAST, SYNC_NONE, "gradients", 1, None, FIX_SYNC, world=2
    ),
)

TENTH_PASS = (
    Case(
        "a contrastive loss over the rank's own features, not gathered (mlp)",
        "https://github.com/mlfoundations/open_clip/blob/main/src/open_clip/loss.py (ClipLoss gathers every rank's "
        "features only where built with world_size > 1; left at rank=0, world_size=1 it contrasts the rank's own)",
        MLP.changed(contrastive="gathered", record_collectives=True, validate=False),
        MLP.changed(contrastive="local", record_collectives=True, validate=False),
        "loss",
        1,
        None,
        "with the process group's rank and world size",
        world=2,
    ),
    Case(
        "BatchNorm statistics averaged over the ranks on one side (cnn)",
        "https://github.com/huggingface/pytorch-image-models/blob/main/timm/utils/distributed.py (distribute_bn, "
        "called by train.py at each epoch's end; left out of one side)",
        CNN.changed(record_collectives=True, validate=False, epochs=2),
        CNN.changed(record_collectives=True, validate=False, epochs=2, average_buffers_after=(3,)),  # epoch 0's end
        "buffers",
        None,  # every step equal: only the final buffers differ
        None,
        "Average the running statistics over the ranks",
        world=2,
    ),
    slip(
        "no-decay group lost on one side, a clip binding nowhere (mlp)",
        "https://github.com/mlfoundations/open_clip/blob/main/src/training/main.py (gains, biases and logit_scale "
        "in a param group of weight_decay 0; the norm of the same gradients summed in the other group order)",
        MLP.changed(clip=10.0, record_clip=True),
        "param_groups",
        None,
        None,
        "the same weight_decay",
        decay_split=False,
    ),
)

# issue 46's eleventh pass (docs/programs.md: muon, hrnet, ppo): a slip in a program of each shape its classes
# were found on
MUON = "https://github.com/KellerJordan/modded-nanogpt/blob/master/train_gpt2.py"
HRNET = "https://github.com/HRNet/HRNet-Semantic-Segmentation/blob/HRNet-OCR/tools/train.py"
PPO = "https://github.com/vwxyzjn/cleanrl/blob/master/cleanrl/ppo_atari_multigpu.py"
BY_HAND = {"record_batch_as": "inputs", "validate": False}  # a loop feeding its model by hand digests the inputs
REDUCED = {"reduce_loss": True, "record_collectives": True, "validate": False}
# HRNet's shape: the loss computed inside the module the loop calls, reduced in place to log it, a poly-like rate set
# by hand from the built lr (no warm-up)
WRAPPED = {"wrapper": "with_loss", "reduce_loss": True, "record_collectives": True, **HAND_LR, "hand_warmup": 1}
# a loop that records its loss and rate alone (no indices, batch or watch), its rate halved at each epoch's end
ROLLOUTS = {"schedule": "per_epoch", "epochs": 2, "record_indices": False, "record_batch": False, "watch": False}

HOOKED = {"recorded_by": "hooks", "validate": False}  # no recording call: `ddp-parity record`'s hooks record it
NO_DRAWS = {**HOOKED, "model": {"dropout": 0.0}}  # a forward in training mode draws nothing

ELEVENTH_PASS = (
    Case(
        "label smoothing on one side, a hand-fed loop's batch digest against the DataLoader's (mlp)",
        f"{MUON} (its own shard loader feeds the model by hand, digesting its inputs; the Lightning port's "
        "DataLoader yields inputs and targets: the batch digests cover other tensors over the same samples)",
        MLP.changed(**BY_HAND),
        MLP.changed(validate=False, label_smoothing=0.1),
        "loss",
        1,
        None,
        "label_smoothing",
    ),
    Case(
        "one param group's lr apart beside a loss reduced in place to log it (mlp)",
        f"{HRNET} (the loss dist.reduce'd in place before backward, rank 0 recording the sum; the second param group's "
        "lr × 10 on one side only)",
        MLP.changed(**REDUCED, group_lr_times=10.0),
        MLP.changed(record_collectives=True, validate=False),
        "param_groups",  # optimizer= given to record(): the groups as built differ, named before any step
        None,
        None,
        "the same lr on both sides",
        world=2,
    ),
    Case(
        "lr set by hand after optimizer.step() one step late, the loss computed inside the watched wrapper (mlp)",
        f"{HRNET} (FullModel(model, criterion): forward(inputs, labels) returns the loss, reduced in place to log it; "
        "adjust_learning_rate after optimizer.step() from the step's own count; the port a module of another class "
        "taking the inputs alone)",
        MLP.changed(**WRAPPED),
        MLP.changed(**WRAPPED | {"wrapper": "outputs", "reduce_loss": False, "hand_lr": "late"}),
        "optimizer",
        2,  # step 1 at the built lr on both sides
        None,
        "set it before each optimizer.step()",
        world=2,
    ),
    Case(
        "an epoch left early by a break in the batch loop, the rate stepped per epoch (mlp)",
        f"{PPO} (the approximate-KL early stop: a break placed one loop in on one side ends the phase early; the lr "
        "annealed per rollout)",
        MLP.changed(**ROLLOUTS),
        MLP.changed(**ROLLOUTS, epoch_steps=4),
        "optimizer",
        5,  # side b's first step of epoch 1, its rate halved, on side a the 5th of epoch 0
        None,
        "Find what moves",
    ),
    Case(
        "a per-update schedule never stepped, the network called through its parts only, recorded by the hooks (mlp)",
        f"{PPO} (the Agent used only through get_value and get_action_and_value, which call its network and heads, "
        "never the Agent itself; the lr annealed per update, here never stepped on one side)",
        MLP.changed(**HOOKED | WARMUP_COSINE),
        MLP.changed(**HOOKED | WARMUP_COSINE, call="parts", scheduler_steps=0),
        "optimizer",
        2,
        None,
        "step the scheduler once per optimizer step",
    ),
    Case(
        "minibatches not shuffled, the training accuracy logged by a no-grad forward in training mode, recorded by "
        "the hooks (mlp)",
        f"{PPO} (the rollout's no-grad forwards in training mode between the updates, made by one side only; the "
        "minibatch indices shuffled on the other side only)",
        MLP.changed(**NO_DRAWS),
        MLP.changed(**NO_DRAWS, log_accuracy=True, shuffle=False),
        "data_order",
        1,
        None,
        "shuffle=True",
    ),
)

BUGS = (
    slip("extra RNG draw before training (mlp)", SANITY, MLP, "rng", 1, "drop", "Re-seed", extra_draw=True),
    slip(
        "extra RNG draw before training (transformer)",
        SANITY,
        TRANSFORMER,
        "rng",
        1,
        "encoder",
        "Re-seed",
        extra_draw=True,
    ),
    *(
        on_each(
            m,
            "workers seeded on one side",
            WORKERS,
            AUGMENTED,
            {"seeded_workers": True},
            "data_pipeline",
            1,
            None,
            "worker_init_fn",
        )
        for m in (MLP, CNN)
    ),
    *(
        on_each(
            m,
            "OneCycleLR total steps from the dataset",
            ONECYCLE,
            {"schedule": "onecycle_loader"},
            {"schedule": "onecycle_dataset"},
            "optimizer",
            2,
            None,
            "total_steps",
        )
        for m in (MLP, CNN)
    ),
    *(
        on_each(
            m,
            "zero_grad on one optimizer of two",
            ZERO_GRAD,
            {"two_optimizers": True},
            {"zero_grad_all": False},
            "gradients",
            2,
            "head",
            "zero_grad",
        )
        for m in (MLP, CNN)
    ),
    slip(
        "eval mode left on after validation (mlp)",
        EVAL,
        MLP.changed(**TWO_EPOCHS),
        "module_state",
        STEPS_PER_EPOCH + 1,
        "drop",
        "model.train()",
        eval_mode="after_validation",
    ),
    slip(
        "eval mode left on after validation (cnn)",
        EVAL,
        CNN.changed(**TWO_EPOCHS),
        "module_state",
        STEPS_PER_EPOCH + 1,
        "bn",
        "model.train()",
        eval_mode="after_validation",
    ),
    slip(
        "eval mode left on after validation (transformer)",
        EVAL,
        TRANSFORMER.changed(**TWO_EPOCHS),
        "module_state",
        STEPS_PER_EPOCH + 1,
        "encoder",
        "model.train()",
        eval_mode="after_validation",
    ),
    slip(
        "DistributedSampler without set_epoch (mlp)",
        SET_EPOCH,
        MLP.changed(sampler="distributed", **TWO_EPOCHS),
        "set_epoch",
        STEPS_PER_EPOCH + 1,
        None,
        "set_epoch(epoch)",
        set_epoch=False,
    ),
    slip(
        "DistributedSampler without set_epoch (transformer)",
        SET_EPOCH,
        TRANSFORMER.changed(sampler="distributed", **TWO_EPOCHS),
        "set_epoch",
        STEPS_PER_EPOCH + 1,
        None,
        "set_epoch(epoch)",
        set_epoch=False,
    ),
    slip(
        "accumulation without dividing the loss (mlp)",
        ACCUMULATE,
        MLP.changed(accumulate=2),
        "gradients",
        1,
        None,
        "Divide the loss by accumulate_grad_batches",
        scale_loss=False,
    ),
    Case(
        "accumulation without dividing the loss vs Trainer (cnn)",
        ACCUMULATE,
        CNN.changed(accumulate=2, scale_loss=False),
        CNN.changed(accumulate=2),
        "gradients",
        1,
        None,
        "Divide the loss by accumulate_grad_batches",
        b_trainer=True,
    ),
    slip(
        "label smoothing on one side (mlp)",
        "tutorial classic: CrossEntropyLoss(label_smoothing=...) on one side",
        MLP,
        "loss",
        1,
        None,
        "label_smoothing",
        label_smoothing=0.1,
    ),
    slip(
        "label smoothing on one side (transformer)",
        "tutorial classic: label smoothing on one side",
        TRANSFORMER,
        "loss",
        1,
        None,
        "label_smoothing",
        label_smoothing=0.1,
    ),
    slip(
        "class weights on one side (cnn)",
        "tutorial classic: CrossEntropyLoss(weight=...) on one side",
        CNN,
        "loss",
        1,
        None,
        "weight=",
        class_weights=True,
    ),
    slip(
        "loss summed instead of averaged (mlp)",
        "tutorial classic: reduction='sum' vs 'mean'",
        MLP,
        "loss",
        1,
        None,
        "reduction",
        reduction="sum",
    ),
    slip(
        "a different drop_last (mlp)",
        "tutorial classic: drop_last on one DataLoader only",
        MLP.changed(samples=52),
        "step_count",
        STEPS_PER_EPOCH + 1,
        None,
        "drop_last",
        drop_last=True,
    ),
    slip(
        "head under bf16 autocast on one side (mlp)",
        "Lightning precision='bf16-mixed' on one side",
        MLP,
        "module_state",
        1,
        "head",
        "precision",
        model={"autocast_head": True},
    ),
    slip(
        "another dropout probability (mlp)",
        "tutorial classic: a hyperparameter differing in the model",
        MLP,
        "module_state",
        1,
        "drop",
        "same arguments",
        model={"dropout": 0.2},
    ),
    slip(
        "another LayerNorm eps (mlp)",
        "tutorial classic: a hyperparameter differing in the model",
        MLP,
        "module_state",
        1,
        "norm",
        "same arguments",
        model={"eps": 1e-3},
    ),
    slip(
        "GELU tanh approximation on one side (mlp)",
        "tutorial classic: GELU(approximate='tanh') in one port",
        MLP,
        "module_state",
        1,
        "act",
        "same arguments",
        model={"approximate": "tanh"},
    ),
    slip(
        "weight decay on every parameter (mlp)",
        "tutorial classic: the no-decay split on one side",
        MLP,
        "param_groups",
        None,
        None,
        "param groups",
        decay_split=False,
    ),
    slip(
        "Adam instead of AdamW (cnn)",
        "tutorial classic: Adam(weight_decay) vs AdamW",
        CNN,
        "param_groups",
        None,
        None,
        "same hyperparameters",
        optimizer="adam",
    ),
    slip(
        "a layer frozen on one side (mlp)",
        UNUSED,
        MLP,
        "frozen",
        1,
        "fc1",
        "freeze the same parameters",
        frozen=("fc1.weight", "fc1.bias"),
    ),
    slip(
        "clipping on one side only (mlp)",
        "Lightning gradient_clip_val on one side",
        MLP,
        "optimizer",
        1,
        None,
        "clip the same way",
        clip=0.05,
    ),
    Case(
        "clipping in the Trainer only (cnn)",
        "Lightning gradient_clip_val on one side",
        CNN,
        CNN.changed(clip=0.05),
        "optimizer",
        1,
        None,
        "clip the same way",
        b_trainer=True,
    ),
    Case(
        "worker seeds without the rank under DDP (mlp)",
        WORKERS,
        MLP.changed(**AUGMENTED, seeded_workers=True),
        MLP.changed(**AUGMENTED, seeded_workers=True, rank_in_worker_seed=False),
        "data_pipeline",
        1,
        None,
        "worker_init_fn",
        world=2,
    ),
    Case(
        "per-rank partitions against a DistributedSampler under DDP (mlp)",
        "PyTorch distributed tutorial (dist_tuto): a DataPartitioner per rank, each rank's loader shuffled alike",
        MLP.changed(validate=False),
        MLP.changed(validate=False, sampler="partition"),
        "data_order",
        1,
        None,
        "draw the same samples at each step",
        world=2,
    ),
    Case(
        "per-rank partitions against a DistributedSampler, samplers recorded (mlp)",
        "PyTorch distributed tutorial (dist_tuto): a port shards with DistributedSampler where the loop partitions",
        MLP.changed(validate=False, record_sampler=True),
        MLP.changed(validate=False, sampler="partition", record_sampler=True),
        "data_order",
        1,
        None,
        "not by a DistributedSampler",
        world=2,
    ),
    Case(
        "a clip on one side only, the loss parting first (mlp)",
        "a clip_grad_norm_ added to one loop only; its parameters recorded by no digest, the loss shows it first",
        MLP.changed(validate=False, watch=False, record_params=False, record_clip=True),
        MLP.changed(validate=False, watch=False, record_params=False, record_clip=True, clip=0.05),
        "optimizer",
        2,
        None,
        "Clip the same way on both sides",
    ),
    Case(
        "a global batch not divided by the world size (mlp)",
        "ImageNet/MoCo main: batch_size = int(batch_size / ngpus_per_node) on one side only",
        MLP.changed(validate=False, record_config=False),
        MLP.changed(validate=False, batch=16, record_config=False),
        "data_order",
        1,
        None,
        "divide the global batch by the world size",
        world=2,
    ),
    Case(
        "gradients all-reduced by hand without the division by the world size (mlp)",
        "PyTorch distributed tutorial (dist_tuto): average_gradients without its / size, the gradients summed",
        MLP.changed(validate=False, hand_average="mean"),
        MLP.changed(validate=False, hand_average="sum"),
        "gradients",
        1,
        None,
        "divide the sum by the world size",
        world=2,
    ),
    Case(
        "lr × world size on one side, the norm summed in another order, under DDP (mlp)",
        "torchvision classification reference: lr=args.lr * world_size (the linear-scaling rule) on one side only",
        MLP.changed(validate=False),
        MLP.changed(validate=False, lr=MLP.lr * 2, norm_reversed=True),
        "optimizer",
        1,
        None,
        "the same rate on both sides",
        world=2,
    ),
    Case(
        "loss averaged over the global batch under DDP (mlp)",
        "tutorial classic (DDP tutorial): dividing the loss by the world size although DDP averages gradients",
        MLP,
        MLP.changed(global_batch_mean=True),
        "loss",
        1,
        None,
        "averaged over the same samples",
        world=2,
    ),
    slip(
        "resume rebuilds the DataLoader without its generator state (mlp)",
        "https://github.com/Lightning-AI/pytorch-lightning/issues/21938",
        MLP.changed(**TWO_EPOCHS),
        "resume",
        STEPS_PER_EPOCH + 1,
        None,
        "generator",
        resume="order_lost",
    ),
    slip(
        "another seed before the model build (cnn)",
        "tutorial classic: seeding after building the model on one side",
        CNN,
        "init",
        1,
        "conv",
        "Seed identically",
        init_seed=12,
    ),
    slip("shuffle on one side only (cnn)", DATA_ORDER, CNN, "data_order", 1, None, "shuffle=True", shuffle=False),
    slip(
        "validation as a mean of batch means (mlp)",
        SYNC_DIST,
        MLP,
        "recording",  # the training equal: the validation figure is measured otherwise (issue 46 class c)
        STEPS_PER_EPOCH,
        None,
        "sums and counts",
        val_reduce="mean_of_means",
    ),
    *RELATION_CASES,
    *SEED_CASES,
    *ISSUE_46,  # last: the fast tier keeps each category's earlier representative
    *TENTH_PASS,
    *ELEVENTH_PASS,
)

CLEAN = (
    # Lightning 2.6.6 runs the sanity check without touching the training's random stream (#6988 fixed):
    # a Trainer with a sanity check over a shuffled validation loader is the loop's twin
    Case(
        "sanity check over a shuffled val loader (Trainer, mlp)",
        SANITY,
        MLP,
        MLP,
        b_trainer=True,
        trainer={"sanity_steps": 1},
    ),
    Case(
        "sanity check over a shuffled val loader (Trainer, transformer)",
        SANITY,
        TRANSFORMER,
        TRANSFORMER,
        b_trainer=True,
        trainer={"sanity_steps": 1},
    ),
    Case("clean twins (mlp)", "-", MLP.changed(**TWO_EPOCHS), MLP.changed(**TWO_EPOCHS)),
    Case(
        "resumed after an epoch with everything restored (mlp)",
        "-",
        MLP.changed(**TWO_EPOCHS),
        MLP.changed(**TWO_EPOCHS, resume="restored"),
    ),
    Case("clean DDP twins, 2 ranks (cnn)", "-", CNN.changed(**TWO_EPOCHS), CNN.changed(**TWO_EPOCHS), world=2),
    Case("clean twins (cnn)", "-", CNN.changed(**TWO_EPOCHS), CNN.changed(**TWO_EPOCHS)),
    Case("clean twins (transformer)", "-", TRANSFORMER.changed(**TWO_EPOCHS), TRANSFORMER.changed(**TWO_EPOCHS)),
    Case("loop vs Trainer (mlp)", "-", MLP.changed(validate=False), MLP.changed(validate=False), b_trainer=True),
    Case("loop vs Trainer (cnn)", "-", CNN.changed(validate=False), CNN.changed(validate=False), b_trainer=True),
    Case(
        "loop vs Trainer (transformer)",
        "-",
        TRANSFORMER.changed(validate=False),
        TRANSFORMER.changed(validate=False),
        b_trainer=True,
    ),
    Case(
        "workers seeded alike (mlp)",
        "-",
        MLP.changed(**AUGMENTED, seeded_workers=True),
        MLP.changed(**AUGMENTED, seeded_workers=True),
    ),
    Case(
        "accumulation vs Trainer (mlp)",
        "-",
        MLP.changed(accumulate=2, validate=False),
        MLP.changed(accumulate=2, validate=False),
        b_trainer=True,
    ),
    Case(
        "clipping vs Trainer (cnn)",
        "-",
        CNN.changed(clip=0.05, validate=False),
        CNN.changed(clip=0.05, validate=False),
        b_trainer=True,
    ),
    Case("two optimizers, both zeroed (mlp)", "-", MLP.changed(two_optimizers=True), MLP.changed(two_optimizers=True)),
    Case(
        "DistributedSampler with set_epoch (cnn)",
        "-",
        CNN.changed(sampler="distributed", **TWO_EPOCHS),
        CNN.changed(sampler="distributed", **TWO_EPOCHS),
    ),
    Case("StepLR after the step on both sides (mlp)", "-", MLP.changed(**STEP_LR), MLP.changed(**STEP_LR)),
    Case(
        "norm_type=inf on both sides (cnn)",
        "-",
        CNN.changed(norm_type=math.inf),
        CNN.changed(norm_type=math.inf),
    ),
    Case(
        "the same embedding frozen on both sides (transformer)",
        "-",
        TRANSFORMER.changed(frozen=("embed.weight",)),
        TRANSFORMER.changed(frozen=("embed.weight",)),
    ),
    Case(  # issue 46 f: the LightningModule holds a frozen teacher the loop keeps outside its recorded model
        "an EMA teacher outside the loop's model, an attribute of the LightningModule (mlp)",
        "-",
        MLP.changed(teacher_momentum=0.9),
        MLP.changed(teacher_momentum=0.9),
        b_trainer=True,
    ),
    Case(  # issue 46's ninth pass (var slip 1): a key no optimizer reads is no cause
        "a param-group key of the program's own apart, every setting AdamW reads alike (mlp)",
        "-",
        MLP.changed(group_key=1.0),
        MLP.changed(group_key=0.5),
    ),
    Case(
        "OneCycleLR from the loader (mlp)",
        "-",
        MLP.changed(schedule="onecycle_loader"),
        MLP.changed(schedule="onecycle_loader"),
    ),
    Case(  # issue 46's eleventh pass (ppo round 3): the hooks take the module owning every trained parameter
        "the network called through its parts on one side only, recorded by the hooks (mlp)",
        "-",
        MLP.changed(**HOOKED),
        MLP.changed(**HOOKED, call="parts"),
    ),
    Case(  # issue 46's eleventh pass (muon): batch digests over other tensors, the model fed the same
        "a hand-fed loop's batch digest of the inputs against the DataLoader's batch (mlp)",
        "-",
        MLP.changed(**BY_HAND),
        MLP.changed(validate=False),
    ),
)

CASES = BUGS + CLEAN
