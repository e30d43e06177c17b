"""The two ways the corpus trains: a hand-written loop recording with TraceRecorder, and a Lightning
Trainer recording with TraceCallback (the public plugin API); or the loop making no recording call, recorded by
`ddp-parity record`'s hooks in a process of its own (Setup.recorded_by, benchmarks/bugs/run.py). One `Setup` holds
every knob; a bug is the reference Setup with a few knobs changed on one side (benchmarks/bugs/cases.py).

Both train one process on one CPU thread, watch every step's modules, pass batch=, optimizer= and
model= to record(), and clip (or measure the norm) over the optimizer's parameters as Lightning does,
so that the clean pairs are bitwise twins.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from benchmarks.bugs.families import CLASSES, FAMILIES, Samples
from ddp_parity import TraceRecorder
from ddp_parity.trace import sampler_facts
from ddp_parity.watch import WATCH_STEP_ENV

SEED = 11


@dataclass(frozen=True)
class Setup:
    family: str = "mlp"
    samples: int = 48
    batch: int = 8
    epochs: int = 1
    validate: bool = True
    # the model
    init_seed: int = SEED
    model: dict = field(default_factory=dict)  # the family's constructor arguments (dropout, eps, ...)
    frozen: tuple = ()  # parameters with requires_grad=False
    eval_mode: str = "never"  # "after_validation": model.eval() for validation, never train() again
    # the data
    shuffle: bool = True
    drop_last: bool = False
    sampler: str = "random"  # "distributed": DistributedSampler(num_replicas=1, rank=0)
    sampler_seed: int = SEED  # the DistributedSampler's seed=
    # "partition" (under DDP): each rank reads its own partition of the data (a seeded shuffle split by rank, as
    # the PyTorch distributed tutorial's DataPartitioner), shuffled from the same seed on every rank: the indices
    # a rank records are positions in its partition, the same on every rank, the samples not
    set_epoch: bool = True
    workers: int = 0
    seeded_workers: bool = False
    rank_in_worker_seed: bool = True  # pl_worker_init_function seeds from the rank too (#7937)
    augment: bool = False
    extra_draw: bool = False  # one draw from the global stream after seeding (a sanity check's sampler)
    peek: int = 0  # batches drawn from the first epoch's iterator before the first step (to look at shapes)
    # the step
    optimizer: str = "adamw"
    lr: float = 0.01
    decay_split: bool = True
    group_key: float | None = None  # a key of the program's own in every param group, which no optimizer reads (VAR's
    # lr_sc, a scale its own schedule would read)
    two_optimizers: bool = False
    zero_grad_all: bool = True
    accumulate: int = 1
    # an epoch's left-over micro-batches (fewer than `accumulate`): None: dropped; "configured": stepped alone, each
    # loss divided by `accumulate` (Lightning's); "own": divided by their own count (timm's train.py, last_accum_steps);
    # "carry": kept for the next epoch's first step, which steps at its epoch's batch i with (i + 1) % accumulate == 0
    # (ViT-pytorch's train.py: no step nor zero_grad at an epoch's end)
    leftover: str | None = None
    record_micro: bool = False  # micro_batches= given to record() (the step's micro-batches)
    scale_loss: bool = True
    clip: float | None = None
    label_smoothing: float = 0.0
    class_weights: bool = False
    reduction: str = "mean"
    global_batch_mean: bool = False  # the loss divided by the world size as well (averaged over the global batch)
    # under DDP without its wrapper: each gradient all-reduced by hand, "mean" (the sum / world size, as the PyTorch
    # distributed tutorial's average_gradients) or "sum" (the division left out)
    hand_average: str | None = None
    # "onecycle_loader", "onecycle_dataset" (total steps from len(dataset)), "step", "warmup_cosine" (a LambdaLR
    # warming up linearly over 2 optimizer updates, then a cosine to 0 at the run's last update), "per_epoch" (a
    # StepLR halving the rate, stepped once at each epoch's end: ppo's rate annealed per rollout)
    schedule: str | None = None
    group_lr_times: float | None = None  # param group 1's lr × this (the no-decay group's rate set apart)
    # each epoch left after this many optimizer steps (a break in the batch loop: an early stop checked per batch,
    # ppo's KL stop indented one level in); None: every batch
    epoch_steps: int | None = None
    # or "micro_batches": warmup_cosine's lengths counted in micro-batches (× accumulate) though stepped once per
    # update (Swin's slip: the schedule sized from the loader's length under accumulation)
    schedule_unit: str = "updates"
    # a warm-up then decay set by hand from the count of steps done (no scheduler object): "before" optimizer.step(),
    # or "after" it, the count already advanced (open_clip's lr adjuster called after the step), or "late": after it
    # from the step's own count (HRNet's adjust_learning_rate after optimizer.step(): each rate one step late)
    hand_lr: str | None = None
    hand_warmup: int = 3  # the hand-set rate's warm-up steps (1: none, a decay from the built lr, as HRNet's poly)
    lr_at: tuple | None = None  # (step, lr): the rate set by hand at that step alone (a warm-up's bound off by one)
    rebuild_scheduler: bool = False  # the scheduler built again at each epoch's start: its schedule counted from the
    # epoch's first step (as one computed from batch_idx instead of the global step)
    record_built: bool = False  # meta.optimizer_built (the optimizers as constructed), as the hooks write it
    scheduler_first: bool = False  # scheduler.step() before optimizer.step(): each step gets the next rate
    # the lr the loop records: "applied" (what optimizer.step() used), "before_step" (read at the top of the
    # step, before any scheduler.step()), "after_scheduler" (read after this step's scheduler.step())
    lr_read: str = "applied"
    record_loss: str = "scaled"  # or "backward": the loss each micro-batch's backward got, summed
    loss_times: float = 1.0  # the recorded loss × this (2^16: recorded after GradScaler's scaler.scale(loss))
    scheduler_steps: int = 1  # scheduler.step() calls per optimizer step (per micro-batch under accumulation)
    record_scheduler_count: bool = False  # scheduler_steps_before given to record(), as the hooks record it
    # under DDP, the micro-batches whose backward syncs: "every" (no no_sync), "last" (no_sync around the others, as
    # Lightning accumulates), "none" (a no_sync left around all); recorded as grad_sync, as the hooks record it
    sync: str = "every"
    record_sync: bool = False
    norm_type: float = 2.0  # the norm the gradient norm is measured (and clipped) with
    norm_reversed: bool = False  # the 2-norm (no clip) measured square by square over the optimizer's parameters
    # in reverse order (a loop's own sum against Lightning's): the same norm, summed in another order
    val_reduce: str = "sum_count"  # or "mean_of_means"
    # a contrastive term over the outputs as features beside the labels' loss (open_clip's ClipLoss): "gathered":
    # each sample against every rank's features, all-gathered without gradient (gather_with_grad=False); "local":
    # against its own rank's only (the loss built without the process group's world size)
    contrastive: str | None = None
    # after these steps the BatchNorm running statistics are averaged over the ranks (timm's distribute_bn:
    # all_reduce SUM, then / world size)
    average_buffers_after: tuple = ()
    record_collectives: bool = False  # the loop's own collectives given to record() as the hooks list them (those
    # made since the previous record: a step's gathers in its own record, an averaging after it in the next one's)
    # under DDP, each micro-batch's loss reduced to rank 0 in place before backward, to log it (HRNet's train loop:
    # dist.reduce of the loss tensor itself): rank 0 records the sum over the ranks, the gradients are the rank's own
    reduce_loss: bool = False
    # the module the loop calls, watches and records: None (the network), "with_loss" (the network and its loss in
    # one module whose forward(inputs, labels) returns the loss: HRNet's FullModel), "outputs" (another class holding
    # the same network and loss, whose forward takes the inputs alone and the loop calls its loss: a
    # LightningModule's shape)
    wrapper: str | None = None
    # a restart after the first epoch from an in-memory checkpoint: None, "restored" (model, optimizer,
    # RNG and the loader's generator restored) or "order_lost" (the loader's generator starts afresh)
    resume: str | None = None
    # what the loop records (a user's record call may leave any of these out)
    record_batch: bool = True
    # what batch= holds: "loader" (the micro-batches as the DataLoader yields them: inputs, labels, indices), "inputs"
    # (the inputs alone, as a loop feeding its model by hand digests what it feeds)
    record_batch_as: str = "loader"
    record_indices: bool = True  # the step's sample indices given to record()
    record_optimizer: bool = True
    record_sampler: bool = False  # the loader's sampler facts given to start() (plugin.md's sampler_facts)
    record_clip: bool = False  # clip_max_norm/clip_norm_type given to record() (None: no clip at the step)
    record_params: bool = True  # model= given to record() (the parameter digest and the layers' sketch)
    record_config: bool = True  # config= given to the recorder (as a program recorded by the hooks has none)
    watch: bool = True
    # "recorder": the loop records through TraceRecorder (the knobs above say what it passes); "hooks": it makes no
    # recording call at all, `ddp-parity record`'s hooks record it (run in a process of its own: benchmarks/bugs/run.py)
    recorded_by: str = "recorder"
    # how the loop calls the network (mlp): "model" (model(x)), "parts" (its submodules one by one, never the model
    # itself: an RL agent used through its methods, cleanrl's get_value / get_action_and_value)
    call: str = "model"
    # after each optimizer step, a no-grad forward of the model in training mode over the step's last micro-batch
    # (the training accuracy logged): the loop's own forward, no evaluation; in training mode it draws dropout masks
    log_accuracy: bool = False
    # a frozen EMA teacher (a copy of the network, requires_grad False, in no optimizer) whose softened outputs
    # are targets beside the labels, following the network by this momentum after each step (DINO's shape): the
    # loop keeps it outside the recorded model, the Trainer's LightningModule holds it as an attribute
    teacher_momentum: float | None = None

    def changed(self, **knobs) -> Setup:
        return dataclasses.replace(self, **knobs)

    def config(self) -> dict:
        if not self.record_config:
            return {}
        return {"family": self.family, "data": {"batch_size": self.batch, "num_workers": self.workers}}


# ---------------------------------------------------------------------------------------------
# shared pieces


def build_teacher(model: nn.Module) -> nn.Module:
    """The network's frozen copy, in eval mode (no dropout draws): set again before each use, as a Trainer
    puts every submodule of its LightningModule in training mode."""
    teacher = copy.deepcopy(model)
    teacher.requires_grad_(False)
    return teacher.eval()


def distillation(out: torch.Tensor, teacher: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Cross-entropy to the teacher's softened outputs."""
    with torch.no_grad():
        targets = torch.softmax(teacher.eval()(x) / 0.5, dim=-1)
    return -(targets * torch.log_softmax(out / 0.5, dim=-1)).sum(dim=-1).mean()


@torch.no_grad()
def ema_update(teacher: nn.Module, model: nn.Module, momentum: float) -> None:
    for t, p in zip(teacher.parameters(), model.parameters()):
        t.mul_(momentum).add_(p.detach(), alpha=1 - momentum)


def build_model(s: Setup) -> nn.Module:
    torch.manual_seed(s.init_seed)
    model = FAMILIES[s.family](**s.model)
    for name, p in model.named_parameters():
        p.requires_grad_(name not in s.frozen)
    torch.manual_seed(SEED)  # re-seed after the build, as Lightning's reset_seed does
    if s.extra_draw:
        torch.rand(1)
    return model


def param_groups(model: nn.Module, s: Setup) -> list[dict]:
    decay, rest = [], []
    for name, p in model.named_parameters():
        (rest if s.decay_split and (name.endswith("bias") or "norm" in name or "bn" in name) else decay).append(p)
    own = {} if s.group_key is None else {"lr_sc": s.group_key}
    rest_lr = {} if s.group_lr_times is None else {"lr": s.lr * s.group_lr_times}
    return [{"params": decay, "weight_decay": 0.05, **own}, {"params": rest, "weight_decay": 0.0, **own, **rest_lr}]


def build_optimizers(model: nn.Module, s: Setup) -> list[torch.optim.Optimizer]:
    cls = torch.optim.AdamW if s.optimizer == "adamw" else torch.optim.Adam
    if not s.two_optimizers:
        return [cls(param_groups(model, s), lr=s.lr)]
    body = [p for n, p in model.named_parameters() if not n.startswith("head")]
    return [cls(body, lr=s.lr), cls(model.head.parameters(), lr=s.lr)]


def build_loader(s: Setup, n: int | None = None) -> DataLoader:
    data = Samples(s.family, n or s.samples, augment=s.augment)
    rank, world = rank_and_world()
    sampler = None
    if s.sampler == "partition":
        data = Partition(data, rank, world)
    elif s.sampler == "distributed" or world > 1:
        sampler = DistributedSampler(data, num_replicas=world, rank=rank, seed=s.sampler_seed)
    return DataLoader(
        data,
        batch_size=s.batch,
        shuffle=s.shuffle if sampler is None else None,
        sampler=sampler,
        drop_last=s.drop_last,
        generator=torch.Generator().manual_seed(SEED) if sampler is None else None,
        num_workers=s.workers,
        worker_init_fn=functools.partial(seed_worker, rank=rank if s.rank_in_worker_seed else 0)
        if s.seeded_workers
        else None,
    )


class Partition(torch.utils.data.Dataset):
    """Rank `rank`'s share of `data`: a seeded permutation split by rank; item i is the partition's i-th
    sample, its "index" i (a position in the partition, as a loader over it records)."""

    def __init__(self, data, rank: int, world: int):
        order = torch.randperm(len(data), generator=torch.Generator().manual_seed(SEED)).tolist()
        self.data, self.ids = data, order[rank::world]

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {**self.data[self.ids[i]], "index": i}


def rank_and_world() -> tuple[int, int]:
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def seed_worker(worker_id: int, rank: int = 0) -> None:
    """What seed_everything(seed, workers=True) installs (pl_worker_init_function): re-seed from the
    global seed, the rank and the worker id (without the rank, every rank's workers draw alike: #7937)."""
    torch.manual_seed(SEED * 1000 + rank * 100 + worker_id)


def criterion(s: Setup) -> nn.Module:
    weight = torch.linspace(0.5, 2.0, CLASSES) if s.class_weights else None
    return nn.CrossEntropyLoss(weight=weight, label_smoothing=s.label_smoothing, reduction=s.reduction)


def build_scheduler(optimizer, s: Setup, loader: DataLoader):
    if s.schedule is None:
        return None
    if s.schedule == "step":  # halves the rate every 2 optimizer steps: steps 1 and 2 share a rate
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    if s.schedule == "per_epoch":  # halves the rate at each epoch's end
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    if s.schedule == "warmup_cosine":
        k = s.accumulate if s.schedule_unit == "micro_batches" else 1
        warmup, length = 2 * k, s.epochs * (len(loader) // s.accumulate) * k
        return torch.optim.lr_scheduler.LambdaLR(optimizer, functools.partial(warmup_cosine, warmup, length))
    per_epoch = len(loader.dataset) if s.schedule == "onecycle_dataset" else len(loader)
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=s.lr, total_steps=s.epochs * per_epoch)


def warmup_cosine(warmup: int, length: int, step: int) -> float:
    """The factor of the base rate at scheduler step `step`: linear from 0.1 to 1 over `warmup`, then a cosine to 0
    at `length`. Lengths k times as long map step k·t onto t exactly (both quotients scale by k)."""
    if step < warmup:
        return 0.1 + 0.9 * step / warmup
    return 0.5 * (1 + math.cos(math.pi * min(step - warmup, length - warmup) / (length - warmup)))


HAND_DECAY = 0.9


def set_lr_by_hand(optimizers, s: Setup, done: int) -> None:
    """The rate for the step after `done` steps, written into every param group (no scheduler object): a linear
    warm-up to s.lr over s.hand_warmup steps, then × HAND_DECAY a step."""
    rate = s.lr * min(1.0, (done + 1) / s.hand_warmup) * HAND_DECAY ** max(0, done + 1 - s.hand_warmup)
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            group["lr"] = rate


def built_facts(model: nn.Module, optimizers) -> dict:
    """meta.optimizer_built as the hooks write it: each optimizer as constructed, its parameters named, the first
    the one stepped first."""
    names = {id(p): n for n, p in model.named_parameters()}
    built = [
        {
            "class": type(o).__name__,
            "param_groups": [{**g, "params": [names[id(p)] for p in g["params"]]} for g in o.param_groups],
            "named": True,
            "stepped": i == 0,
        }
        for i, o in enumerate(optimizers)
    ]
    return {"optimizer_built": built}


class WithLoss(nn.Module):
    """The network and its loss in one module (HRNet's FullModel(model, criterion)): forward(inputs, labels) returns
    the loss."""

    def __init__(self, net: nn.Module, loss_fn: nn.Module):
        super().__init__()
        self.net, self.loss = net, loss_fn

    def forward(self, inputs, labels):
        return self.loss(self.net(inputs), labels)


class Outputs(nn.Module):
    """The same network and loss held by a module of another class whose forward takes the inputs alone (a
    LightningModule's): the loop calls its loss itself."""

    def __init__(self, net: nn.Module, loss_fn: nn.Module):
        super().__init__()
        self.net, self.loss = net, loss_fn

    def forward(self, inputs):
        return self.net(inputs)


WRAPPERS = {"with_loss": WithLoss, "outputs": Outputs}


class Parts:
    """The MLP called through its parts, never as a whole (s.call "parts"): the loop's own function over the
    network's submodules, as an agent's methods call its network and heads (no module of its own)."""

    def __init__(self, net: nn.Module):
        self.net = net

    def __call__(self, x):
        net = self.net
        h = net.drop(net.act(net.norm(net.fc1(x))))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=net.autocast_head):  # as MLP.forward enters it
            return net.head(h).float()


class Unrecorded:
    """What the loop holds for a recorder where the hooks record it (s.recorded_by "hooks"): every call a no-op."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def log_accuracy(model, micro: list) -> float:
    """The training accuracy of the step's last micro-batch, from a forward without gradients in training mode."""
    with torch.no_grad():
        return (model(micro[-1]["x"]).argmax(-1) == micro[-1]["y"]).float().mean().item()


def contrastive_term(out: torch.Tensor, s: Setup, made: list) -> torch.Tensor:
    """open_clip's ClipLoss over the outputs as features, in one direction: each sample's features against every
    gathered sample's (s.contrastive "gathered": all ranks', the others' without gradient), or its own rank's
    ("local"); its own sample the target. A gather is listed in `made` as the hooks list it."""
    features = nn.functional.normalize(out, dim=-1)
    rank, world = rank_and_world()
    others, first = features, 0
    if s.contrastive == "gathered" and world > 1:
        gathered = [torch.zeros_like(features) for _ in range(world)]
        dist.all_gather(gathered, features.detach())
        made.append(own_collective("all_gather", gathered))
        gathered[rank] = features  # the gradient flows through the rank's own features only
        others, first = torch.cat(gathered), rank * len(features)
    return nn.functional.cross_entropy(features @ others.T / 0.5, torch.arange(len(features)) + first)


def average_buffers(model: nn.Module, made: list) -> None:
    """timm's distribute_bn: each running statistic all-reduced (SUM) and divided by the world size."""
    world = rank_and_world()[1]
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith(("running_mean", "running_var")):
                dist.all_reduce(buf, op=dist.ReduceOp.SUM)
                buf /= world
                made.append(own_collective("all_reduce", buf, reduce_op="SUM"))


def own_collective(op: str, result, **facts) -> dict:
    """A collective of the loop's own as the hooks list it: the op, its caller, what its result holds."""
    tensors = [result] if isinstance(result, torch.Tensor) else list(result)
    entry = {"op": op, "caller": __name__, **facts, "dtype": str(tensors[0].dtype).removeprefix("torch.")}
    entry["shape"] = list(tensors[0].shape)
    return entry if isinstance(result, torch.Tensor) else {**entry, "tensors": len(tensors)}


def validation_loss(model: nn.Module, s: Setup) -> float:
    loader = DataLoader(Samples(s.family, 20, seed=5), batch_size=8)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    total, count, means = 0.0, 0, []
    with torch.no_grad():
        for batch in loader:
            summed = loss_fn(model(batch["x"]), batch["y"]).item()
            total, count = total + summed, count + len(batch["y"])
            means.append(summed / len(batch["y"]))
    # the mean of per-batch means weights a short last batch like a full one (Lightning #21859's kind)
    return sum(means) / len(means) if s.val_reduce == "mean_of_means" else total / count


# ---------------------------------------------------------------------------------------------
# the hand-written loop


def train_loop(run_dir: Path, side: str, s: Setup) -> None:
    torch.set_num_threads(1)
    model = build_model(s)
    teacher = build_teacher(model) if s.teacher_momentum is not None else None
    optimizers = build_optimizers(model, s)
    loader = build_loader(s)
    scheduler = build_scheduler(optimizers[0], s, loader)
    loss_fn = criterion(s)
    world = rank_and_world()[1]
    if s.wrapper is not None:  # the loop calls, watches and records the wrapper
        model = WRAPPERS[s.wrapper](model, loss_fn)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 and not s.hand_average else model
    if s.call == "parts":
        net = Parts(model)
    built = built_facts(model, optimizers) if s.record_built else None
    if s.recorded_by == "hooks":
        recorder = Unrecorded()
    else:
        recorder = TraceRecorder(run_dir, side=side, config=s.config(), extra_meta=built)
    recorder.start(facts={"sampler": sampler_facts(loader.sampler)} if s.record_sampler else None)
    if s.watch:
        recorder.watch(model, steps="all")
    model.train()
    step, made, carried = 0, [], []  # made: the loop's own collectives since the previous record
    for epoch in range(s.epochs):
        if s.rebuild_scheduler and epoch > 0:
            scheduler = build_scheduler(optimizers[0], s, loader)
        if isinstance(loader.sampler, DistributedSampler) and s.set_epoch:
            loader.sampler.set_epoch(epoch)
        if s.eval_mode != "after_validation":
            model.train()
        batches = iter(loader)
        for _ in range(s.peek if epoch == 0 else 0):
            next(batches)  # the slip: a batch taken from the training iterator, never trained on
        epoch_start = step
        for micro in accumulated(batches, s, carried):
            step += 1
            if s.hand_lr == "before":
                set_lr_by_hand(optimizers, s, step - 1)
            if s.lr_at is not None and step == s.lr_at[0]:
                for optimizer in optimizers:
                    for group in optimizer.param_groups:
                        group["lr"] = s.lr_at[1]
            lr_before = optimizers[0].param_groups[0]["lr"]
            if scheduler is not None and s.scheduler_first:
                scheduler.step()
            step_loss = run_step(net, micro, loss_fn, s, teacher, made)
            if s.hand_average:
                average_gradients(model, world, divide=s.hand_average == "mean")
            norm = clip_in_optimizer_order(optimizers, s.clip, s.norm_type, reverse=s.norm_reversed)
            for optimizer in optimizers:
                optimizer.step()
            if teacher is not None:
                ema_update(teacher, model, s.teacher_momentum)
            if s.log_accuracy:
                log_accuracy(net, micro)
            lr = optimizers[0].param_groups[0]["lr"]  # the lr this step used
            if s.hand_lr == "after":  # the count already advanced: the rate the other side sets before the next step
                set_lr_by_hand(optimizers, s, step)
            elif s.hand_lr == "late":  # this step's own rate, set after it: the next step runs at it
                set_lr_by_hand(optimizers, s, step - 1)
            late_scheduler = scheduler is not None and not s.scheduler_first and s.schedule != "per_epoch"
            if late_scheduler and s.lr_read == "after_scheduler":
                step_scheduler(scheduler, s)
                lr = optimizers[0].param_groups[0]["lr"]
            lr = lr_before if s.lr_read == "before_step" else lr
            indices = torch.cat([b["index"] for b in micro]) if s.record_indices else None
            fed = micro if s.record_batch_as == "loader" else [b["x"] for b in micro]
            recorder.record(
                step,
                step_loss * s.loss_times,
                indices,
                epoch=epoch,
                grad_norm=norm,
                lr=lr,  # passed also when optimizer= is: what a user's loop reads
                batch=fed if s.record_batch else None,
                optimizer=optimizers[0] if s.record_optimizer else None,
                model=model if s.record_params else None,
                **(
                    {"clip_max_norm": s.clip, "clip_norm_type": s.norm_type if s.clip else None}
                    if s.record_clip
                    else {}
                ),
                **scheduler_count(scheduler, s, step),
                **sync_flags(s, len(micro)),
                **({"micro_batches": len(micro)} if s.record_micro else {}),
                **({"collectives": made, "collectives_count": len(made)} if s.record_collectives else {}),
            )
            made = []
            if late_scheduler and s.lr_read != "after_scheduler":
                step_scheduler(scheduler, s)
            # after record(): the recorder reads each parameter's gradient (its norm and largest |g|)
            for optimizer in optimizers if s.zero_grad_all else optimizers[:1]:
                optimizer.zero_grad()
            if step in s.average_buffers_after:
                average_buffers(model, made)
            if s.epoch_steps is not None and step - epoch_start == s.epoch_steps:
                break
        if scheduler is not None and s.schedule == "per_epoch":
            scheduler.step()
        if s.validate:
            model.eval()
            recorder.record_validation(epoch, step, {"val_loss": validation_loss(model, s)})
        if s.resume and epoch == 0:
            model, optimizers, loader, recorder = restart(run_dir, side, s, model, optimizers, loader, recorder, step)
            net = model
    recorder.finish(model)


def accumulated(batches, s: Setup, carried: list):
    """An epoch's batches in groups of s.accumulate micro-batches (by the batch's index in the epoch), the first after
    the micro-batches `carried` from the epoch before; the left-over ones stepped alone, carried (into `carried`) or
    dropped, as s.leftover says."""
    micro, carried[:] = list(carried), []
    for i, batch in enumerate(batches):
        micro.append(batch)
        if (i + 1) % s.accumulate == 0:
            yield micro
            micro = []
    if micro and s.leftover == "carry":
        carried.extend(micro)
    elif micro and s.leftover is not None:
        yield micro


def step_scheduler(scheduler, s: Setup) -> None:
    for _ in range(s.scheduler_steps):
        scheduler.step()


def scheduler_count(scheduler, s: Setup, step: int) -> dict:
    """scheduler_steps_before as the hooks record it: the scheduler.step() calls since the previous optimizer
    step (after-step schedulers: none before the first)."""
    if not s.record_scheduler_count:
        return {}
    if scheduler is None:
        return {"scheduler_steps_before": 0}
    if s.scheduler_first:  # one call before each optimizer step, the first one's included
        return {"scheduler_steps_before": 1}
    return {"scheduler_steps_before": 0 if step == 1 else s.scheduler_steps}


def restart(run_dir: Path, side: str, s: Setup, model, optimizers, loader, recorder, step: int):
    """What a resumed process does after `step`: a new model, optimizer, loader and recorder, the
    state loaded from the checkpoint (here: taken from the running objects). With "order_lost" the
    DataLoader's generator is not restored, so the next epoch draws the first epoch's permutation
    (the mechanism of Lightning #21938, workers replaying an epoch after a resume)."""
    recorder.close()
    checkpoint = {
        "model": model.state_dict(),
        "optimizers": [o.state_dict() for o in optimizers],
        "rng": torch.get_rng_state(),
        "loader": loader.generator.get_state(),
    }
    model = build_model(s)
    model.load_state_dict(checkpoint["model"])
    optimizers = build_optimizers(model, s)
    for optimizer, state in zip(optimizers, checkpoint["optimizers"]):
        optimizer.load_state_dict(state)
    torch.set_rng_state(checkpoint["rng"])
    loader = build_loader(s)
    if s.resume == "restored":
        loader.generator.set_state(checkpoint["loader"])
    recorder = TraceRecorder(run_dir, side=side, config=s.config())
    recorder.start(resumed_from_step=step)
    if s.watch:
        recorder.watch(model, steps="all", start_step=step)
    return model, optimizers, loader, recorder


def run_step(model, micro: list, loss_fn, s: Setup, teacher: nn.Module | None = None, made=None) -> torch.Tensor:
    """Forward and backward over the step's micro-batches; the loss recorded as Lightning's callback
    records it (each micro-batch's loss divided by the accumulation, summed in order)."""
    step_loss = None
    divisor = len(micro) if s.leftover == "own" else s.accumulate
    for i, batch in enumerate(micro):
        with sync_context(model, s, last=i == len(micro) - 1):
            if s.wrapper == "with_loss":
                loss = model(batch["x"], batch["y"])
            else:
                out = model(batch["x"])
                loss = loss_fn(out, batch["y"])  # under "outputs": the wrapper's own loss module
            if teacher is not None:
                loss = loss + distillation(out, teacher, batch["x"])
            if s.contrastive is not None:
                loss = loss + contrastive_term(out, s, made if made is not None else [])
            if s.global_batch_mean:  # DDP already averages the gradients over ranks: this divides twice
                loss = loss / rank_and_world()[1]
            if s.reduce_loss and dist.is_initialized():  # in place, on the loss tensor itself: no autograd op
                dist.reduce(loss.detach(), dst=0)
                if made is not None:
                    made.append(own_collective("reduce", loss.detach(), reduce_op="SUM"))
            scaled = loss / divisor
            backward = scaled if s.scale_loss else loss
            backward.backward()
        recorded = (backward if s.record_loss == "backward" else scaled).detach()
        step_loss = recorded if step_loss is None else step_loss + recorded
    return step_loss


def sync_context(model, s: Setup, *, last: bool):
    """DDP's no_sync() around a micro-batch that does not sync (s.sync), else nothing."""
    syncs = s.sync == "every" or (s.sync == "last" and last)
    no_sync = getattr(model, "no_sync", None)
    return contextlib.nullcontext() if syncs or no_sync is None else no_sync()


def sync_flags(s: Setup, micro_batches: int) -> dict:
    """grad_sync as the hooks record it: per micro-batch, whether its backward synced."""
    if not s.record_sync:
        return {}
    return {
        "grad_sync": [s.sync == "every" or (s.sync == "last" and i == micro_batches - 1) for i in range(micro_batches)]
    }


def average_gradients(model: nn.Module, world: int, *, divide: bool) -> None:
    """Each gradient summed over the ranks by hand (no DDP wrapper), then divided by the world size."""
    for p in model.parameters():
        if p.grad is not None:
            torch.distributed.all_reduce(p.grad, op=torch.distributed.ReduceOp.SUM)
            if divide:
                p.grad /= world


def clip_in_optimizer_order(optimizers, clip: float | None, norm_type: float = 2.0, reverse=False) -> torch.Tensor:
    """The gradient norm before clipping, over the optimizer's parameters in group order (Lightning's
    order; `reverse`: squares_summed_in_reverse), with `norm_type` (Lightning's is 2); clipping only when `clip`
    is set."""
    params = [p for o in optimizers for g in o.param_groups for p in g["params"] if p.grad is not None]
    if reverse and clip is None and norm_type == 2.0:
        return squares_summed_in_reverse([p.grad for p in params])
    if clip is None:
        return torch.nn.utils.get_total_norm([p.grad for p in params], norm_type)
    return torch.nn.utils.clip_grad_norm_(params, clip, norm_type)


def squares_summed_in_reverse(grads: list[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of `grads` with every square added one at a time in float32 from the last element of the last
    tensor back: the same norm as get_total_norm's, summed in another order (as a loop's own norm over its own
    list is), so it may round apart from it in the last bits."""
    total = torch.zeros((), dtype=torch.float32)
    for g in reversed(grads):
        for v in g.detach().reshape(-1).flip(0).float():
            total = total + v * v
    return total.sqrt()


# ---------------------------------------------------------------------------------------------
# the Lightning Trainer


def fit_trainer(run_dir: Path, side: str, s: Setup, *, sanity_steps: int = 0) -> None:
    """The same training as a LightningModule under a Trainer, recorded by TraceCallback. Validation
    (when `s.validate`) computes the raw loop's figure at the end of each epoch; `sanity_steps` runs
    the sanity check over a shuffled validation loader first."""
    import lightning as L

    from ddp_parity import TraceCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = build_model(s)
            self.loss_fn = criterion(s)
            if s.teacher_momentum is not None:
                self.teacher = build_teacher(self.net)

        def training_step(self, batch, batch_idx):
            out = self.net(batch["x"])
            loss = self.loss_fn(out, batch["y"])
            return loss + distillation(out, self.teacher, batch["x"]) if s.teacher_momentum is not None else loss

        def on_train_batch_end(self, outputs, batch, batch_idx):
            if s.teacher_momentum is not None:
                ema_update(self.teacher, self.net, s.teacher_momentum)

        def validation_step(self, batch, batch_idx):
            return self.loss_fn(self.net(batch["x"]), batch["y"])

        def configure_optimizers(self):
            return build_optimizers(self.net, s)[0]

        def on_validation_epoch_end(self):
            if not self.trainer.sanity_checking:  # the raw loop's figure, computed the same way
                self.last_validation = {"val_loss": validation_loss(self.net, s)}

    torch.set_num_threads(1)
    module = Module()
    validates = s.validate or sanity_steps > 0
    val = DataLoader(Samples(s.family, 16, seed=5), batch_size=8, shuffle=True) if validates else None
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=s.epochs,
        accumulate_grad_batches=s.accumulate,
        gradient_clip_val=s.clip,
        callbacks=[TraceCallback(str(run_dir), side=side, config=s.config())],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=sanity_steps,
        limit_val_batches=1 if validates else 0,
        default_root_dir=str(run_dir),
    )
    trainer.fit(module, build_loader(s), val)


def watch_every_step() -> None:
    """The Trainer's callback watches DEFAULT_STEPS unless told: the corpus watches every step."""
    os.environ[WATCH_STEP_ENV] = "all"
