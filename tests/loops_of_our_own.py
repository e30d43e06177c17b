"""A small training loop of the tests' own, recorded through the public plugin API (TraceRecorder), with
knobs that change what the loop trains or only what it records: the diagnosis tests of issue 46 build
their pairs with it. One process, one CPU thread, a few steps: a pair trains in well under a second."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ddp_parity import TraceRecorder


@dataclass(frozen=True)
class Loop:
    steps: int = 6
    batch: int = 4
    lr: float = 0.05
    momentum: float = 0.0
    weight_decay: float = 0.0
    eps: float = 1e-8
    optimizer: str = "sgd"  # or "adamw"
    clip: float | None = None
    schedule: str | None = None  # "exp": ExponentialLR(gamma); "lambda": LambdaLR(gamma ** step)
    gamma: float = 0.995
    loss_scale: float = 1.0  # the loss backpropagated × this (the training changes)
    autocast: bool = False  # the forward under bf16 autocast
    order_seed: int = 3  # the seed of the shuffled order (a sampler's seed)
    lr_read: str = "applied"  # "after_scheduler": read after scheduler.step(); "by_hand": lr set by hand each step;
    # "warmup": set by hand to lr × (step - 1) / steps, 0 at step 1
    accumulate: int = 1
    divide_loss: bool = True  # each micro-batch's loss divided by the accumulation before backward
    reinit: tuple = ()  # parameters filled with 0.01 after the build (their own init on this side)
    watch: bool = False  # recorder.watch(model) over every step
    # what the loop records, and how
    record_model: bool = True
    record_optimizer: str = "first"  # "last": optimizer= passed at the last step only (its groups read there)
    loss_times: float = 1.0  # the recorded loss × this (what is trained is unchanged)
    norm_type: float = 2.0  # the norm the gradient norm is measured with (clipping always uses 2)
    norm_order: str = "model"  # "reversed": the same 2-norm summed over the parameters in reverse order
    frozen: tuple = ()
    init_seed: int = 0
    indices: str = "shuffled"  # "identity": 0, 1, 2, ...; "stride": every other sample
    config: dict = field(default_factory=lambda: {"data": {"batch_size": 4}})
    extra_meta: dict = field(default_factory=dict)
    # issue 46 b, f, g and 47's misleading fixes
    sampler: dict | None = None  # recorded as the rank's sampler facts (start(facts={"sampler": ...}))
    first_epoch: int = 0  # the epoch the loop starts at: each epoch's order is randperm(order_seed + epoch)
    skip_at: int | None = None  # at this step a batch is drawn and skipped (no backward, no step, no record)
    eval_at: int | None = None  # at this step, before training, an evaluation forward in eval mode (grad on)
    record_clip: bool = False  # record(clip_max_norm=, clip_norm_type=) as the hooks do
    deep: bool = False  # two more 8×8 layers (2 and 4)
    tie: bool = False  # with deep: layer 4's weight is layer 2's
    step_offset: int = 0  # the recorded step = step × step_factor + step_offset
    step_factor: int = 1
    # issue 46's classes found on public programs
    hand_ahead: int = 0  # with lr_read="by_hand": the lr set for the step this many steps later
    record_scheduler_count: bool = False  # record scheduler_steps_before (the scheduler.step() calls since
    # the previous optimizer step) as the hooks do
    cudnn_benchmark: bool = False  # torch.backends.cudnn.benchmark while recording (it acts on no CPU kernel)
    group_fn: bool = False  # a function as a param-group value (LARS's weight_decay_filter), recorded by repr
    average_at_end: bool = False  # the weights halved after the last step (an averaged model copied in at the end)
    warmup_from_zero: bool = False  # the lr 0 at step 1 (a linear warmup from 0), s.lr from step 2
    scheduler_steps: int = 1  # scheduler.step() calls per optimizer step (per micro-batch, or a hand call and
    # Lightning's lr_scheduler_config both); recorded as scheduler_steps_before with record_scheduler_count
    lr_from: tuple | None = None  # (step, lr): from this step on the lr is set to lr (the training parts there)
    lr_floor: float | None = None  # by hand: lr × step / 3 for steps 1-3, then lr / 2 + this floor (a schedule
    # whose floor, like a cosine's min_lr, is not scaled with the base rate)
    input_noise: float = 0.0  # noise × this added to the inputs before the model, drawn from the global generator
    # (EDM's loss draws its noise before calling the network): not in the batch, which record_batch records
    record_batch: bool = False  # record(batch=) the step's inputs as drawn from the data
    record_indices: bool = True  # record the step's indices (False: a loop fed by hand, its batch digest alone)
    batch_with_targets_from: int | None = None  # from this step on record(batch=) the inputs with their targets: a
    # digest over other things than the other side's, the model fed the same (eleventh pass: batch inputs)
    loss_scale_from: int = 1  # loss_scale acts from this step on (StyleGAN2's lazy R1 weight: some steps only)
    record_scaled: bool = False  # record the loss backward ran on (× loss_scale where it acts), as the hooks do
    warmup_per_epoch: bool = False  # with lr_read="warmup": the rate set once per epoch, at its first step's value
    hand_lr: str | None = None  # "before" / "after": a warm-up then decay set by hand from a step counter (the
    # program's own adjuster), called before optimizer.step() with the steps done, or after it with the count advanced
    hand_warmup: int = 3  # with hand_lr: the warm-up's length in steps (its rate rises over them to lr)
    lr_at: tuple | None = None  # (step, lr): the lr set by hand at this step alone (a warm-up's last step, its bound
    # off by one), the schedule setting the others (with schedule="lambda": computed from its base rate again)
    warmup: int = 2  # with schedule="warmup": a LambdaLR warming up linearly from lr / 10 over this many steps, then a
    # cosine to 0 at step `length` (both × schedule_stretch: a schedule sized in micro-batches under accumulation)
    length: int = 8
    schedule_stretch: int = 1
    # issue 46's tenth pass: buffers and final states (timm's distribute_bn, an EMA registered in the module)
    batchnorm: bool = False  # a BatchNorm1d after the first layer: running statistics, buffers of the final state
    sync_batchnorm: bool = False  # with batchnorm: built as nn.SyncBatchNorm (in one process it syncs nothing;
    # its class is what a module watch records)
    average_buffers_after: tuple = ()  # after these steps the running statistics are averaged over the ranks as
    # timm's distribute_bn does (all_reduce SUM, then / world size); one process stands in for two ranks, the
    # other holding zeros: each buffer halved
    record_collectives: bool = False  # record the loop's own collectives per step as the hooks do (`collectives`,
    # `collectives_count`: those made since the previous step, in the next step's record)
    copy_in_module: bool = False  # an EMA of the model registered beside it (`ema.*`) in the module recorded and
    # saved, updated after each step's record (an EMA kept as a LightningModule's submodule)

    def changed(self, **knobs) -> Loop:
        return replace(self, **knobs)


def build(s: Loop) -> nn.Module:
    torch.manual_seed(s.init_seed)
    if s.deep:
        layers = [nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3)]
        model = nn.Sequential(*layers)
        if s.tie:
            model[4].weight = model[2].weight
    elif s.batchnorm:
        norm = nn.SyncBatchNorm(8) if s.sync_batchnorm else nn.BatchNorm1d(8)
        model = nn.Sequential(nn.Linear(6, 8), norm, nn.Tanh(), nn.Linear(8, 3))
    else:
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
    for name, p in model.named_parameters():
        p.requires_grad_(name not in s.frozen)
        if name in s.reinit:
            nn.init.constant_(p, 0.01)
    return model


def order(s: Loop, n: int, epoch: int = 0) -> list[int]:
    if s.indices == "identity":
        return list(range(n))
    if s.indices == "stride":
        return list(range(0, n, 2)) + list(range(1, n, 2))
    return torch.randperm(n, generator=torch.Generator().manual_seed(s.order_seed + epoch)).tolist()


def batches(s: Loop, n: int):
    """(epoch, indices) of each batch, epoch after epoch from s.first_epoch, as a DistributedSampler with
    set_epoch(epoch) draws them."""
    per_step = s.batch * s.accumulate
    epoch = s.first_epoch
    while True:
        sequence = order(s, n, epoch)
        for start in range(0, n - per_step + 1, per_step):
            yield epoch, torch.tensor(sequence[start : start + per_step])
        epoch += 1


def optimizer_of(model: nn.Module, s: Loop) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if s.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=s.lr, weight_decay=s.weight_decay, eps=s.eps)
    optimizer = torch.optim.SGD(params, lr=s.lr, momentum=s.momentum, weight_decay=s.weight_decay)
    if s.group_fn:  # the same function, a new object on each side (as in two processes): its repr's address differs

        def exclude_bias(p) -> bool:
            return p.ndim == 1

        for group in optimizer.param_groups:
            group["weight_decay_filter"] = exclude_bias
    return optimizer


def scheduler_of(optimizer, s: Loop):
    if s.schedule == "exp":
        return torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=s.gamma)
    if s.schedule == "lambda":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: s.gamma**step)
    if s.schedule == "warmup":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(s, step))
    return None


def warmup_cosine(s: Loop, step: int) -> float:
    """The factor of the base rate at scheduler step `step`: linear from 0.1 to 1 over the warm-up, then a cosine to 0
    at the schedule's length, each s.schedule_stretch times as long (a stretch maps step k·t onto t exactly)."""
    warmup, length = s.warmup * s.schedule_stretch, s.length * s.schedule_stretch
    if step < warmup:
        return 0.1 + 0.9 * step / warmup
    return 0.5 * (1 + math.cos(math.pi * min(step - warmup, length - warmup) / (length - warmup)))


def set_lr_by_hand(optimizer, s: Loop, done: int) -> None:
    """The rate for the step after `done` steps: a linear warm-up to s.lr over s.hand_warmup steps, then × gamma
    per step, written into every param group (no scheduler object)."""
    rate = s.lr * min(1.0, (done + 1) / s.hand_warmup) * s.gamma ** max(0, done + 1 - s.hand_warmup)
    for group in optimizer.param_groups:
        group["lr"] = rate


def measured_norm(model: nn.Module, s: Loop) -> torch.Tensor:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if s.norm_order == "reversed":
        grads = grads[::-1]
    if s.norm_type == 2.0:  # every square added one at a time in float32, in this order: the order rounds
        total = np.float32(0)
        for g in grads:
            for v in g.reshape(-1).tolist():
                total = np.float32(total + np.float32(v) * np.float32(v))
        return torch.tensor(float(np.sqrt(total)), dtype=torch.float32)
    return torch.nn.utils.get_total_norm(grads, s.norm_type)


class WithCopy(nn.Module):
    """The trained network and an EMA of it, both registered: the state dict holds `ema.*` and `net.*`, the copy
    first (so that `param_digest`, the first and last parameter, sums one of the copy's: a final-class bias's sum
    stays put under cross-entropy)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.ema, self.net = copy.deepcopy(net), net

    @torch.no_grad()
    def update(self, decay: float = 0.5) -> None:
        for mine, theirs in zip(self.ema.state_dict().values(), self.net.state_dict().values()):
            mine.copy_(mine * decay + theirs * (1 - decay) if mine.is_floating_point() else theirs)


def average_buffers(model: nn.Module) -> list[dict]:
    """timm's distribute_bn in one process: each running statistic all-reduced (SUM) and divided by a world size
    of 2, the other rank's held zeros; the collectives as the hooks list them."""
    made = []
    with torch.no_grad():
        for name, buf in model.named_buffers():
            if name.endswith(("running_mean", "running_var")):
                buf.mul_(0.5)
                made.append({"op": "all_reduce", "reduce_op": "SUM", "dtype": "float32", "shape": list(buf.shape)})
    return [{**c, "caller": "__main__", "digest": f"{i:016x}"} for i, c in enumerate(made)]


def train(run_dir: Path, side: str, s: Loop) -> Path:
    torch.set_num_threads(1)
    model = build(s)
    recorded = WithCopy(model) if s.copy_in_module else model
    optimizer = optimizer_of(model, s)
    scheduler = scheduler_of(optimizer, s)
    x = torch.randn(64, 6, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 3, (64,), generator=torch.Generator().manual_seed(2))
    benchmark = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = s.cudnn_benchmark
    try:
        recorder = TraceRecorder(run_dir, side=side, config=s.config, extra_meta=s.extra_meta or None)
        recorder.start(facts={"sampler": s.sampler} if s.sampler else None)
    finally:
        torch.backends.cudnn.benchmark = benchmark
    if s.watch:
        recorder.watch(model, steps="all")
    drawn = batches(s, len(x))
    made: list[dict] = []  # the loop's own collectives since the previous step
    for step in range(1, s.steps + 1):
        if s.hand_lr == "before":  # first: a rate set otherwise at one step (lr_at) overrides it
            set_lr_by_hand(optimizer, s, step - 1)
        if s.lr_read == "by_hand":
            for group in optimizer.param_groups:
                group["lr"] = s.lr * s.gamma ** (step - 1 + s.hand_ahead)
        if s.warmup_from_zero:
            for group in optimizer.param_groups:
                group["lr"] = 0.0 if step == 1 else s.lr
        if s.lr_from is not None and step >= s.lr_from[0]:
            for group in optimizer.param_groups:
                group["lr"] = s.lr_from[1]
        if s.lr_at is not None and step == s.lr_at[0]:
            for group in optimizer.param_groups:
                group["lr"] = s.lr_at[1]
        if s.lr_floor is not None:
            for group in optimizer.param_groups:
                group["lr"] = s.lr * step / 3 if step <= 3 else s.lr / 2 + s.lr_floor
        if s.lr_read == "warmup":  # a linear warmup from 0 set by hand: step 1 moves nothing
            per_epoch = len(x) // (s.batch * s.accumulate)
            at = (step - 1) // per_epoch * per_epoch + 1 if s.warmup_per_epoch else step  # MoCo v3's slip: per epoch
            for group in optimizer.param_groups:
                group["lr"] = s.lr * (at - 1) / s.steps
        if step == s.skip_at:
            next(drawn)  # drawn, then skipped: no backward, no step (a training_step returning None)
        epoch, indices = next(drawn)
        if step == s.eval_at:
            model.eval()
            model(x[indices.flip(0)])  # an evaluation inside the step: eval mode, gradients on, no backward
            model.train()
        loss_sum = 0.0
        for micro in indices.split(s.batch):
            inputs = x[micro] + s.input_noise * torch.randn_like(x[micro]) if s.input_noise else x[micro]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s.autocast):
                out = model(inputs)
            loss = nn.functional.cross_entropy(out.float(), y[micro]) / (s.accumulate if s.divide_loss else 1)
            scaled = loss * (s.loss_scale if step >= s.loss_scale_from else 1.0)
            scaled.backward()
            loss_sum = loss_sum + (scaled if s.record_scaled else loss).detach()
        norm = measured_norm(model, s)
        if s.clip is not None:
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None], s.clip)
        optimizer.step()
        lr = optimizer.param_groups[0]["lr"]
        if s.hand_lr == "after":  # the counter already advanced: the rate the other side sets before the next step
            set_lr_by_hand(optimizer, s, step)
        if scheduler is not None:
            for _ in range(s.scheduler_steps):
                scheduler.step()
            if s.lr_read == "after_scheduler":
                lr = optimizer.param_groups[0]["lr"]
        clip = {"clip_max_norm": s.clip, "clip_norm_type": 2.0} if s.record_clip and s.clip is not None else {}
        if s.record_scheduler_count:
            clip["scheduler_steps_before"] = s.scheduler_steps if scheduler is not None and step > 1 else 0
        if s.record_collectives:
            clip.update(collectives=made, collectives_count=len(made))
        recorded_batch = x[indices] if s.record_batch else None
        if recorded_batch is not None and s.batch_with_targets_from is not None and step >= s.batch_with_targets_from:
            recorded_batch = (x[indices], y[indices])
        recorder.record(
            step * s.step_factor + s.step_offset,
            loss_sum * s.loss_times,
            indices if s.record_indices else None,
            epoch=epoch,
            grad_norm=norm,
            lr=lr,
            optimizer=optimizer if s.record_optimizer == "first" or step == s.steps else None,
            model=recorded if s.record_model else None,
            batch=recorded_batch,
            **clip,
        )
        optimizer.zero_grad()
        if s.copy_in_module:
            recorded.update()
        made = average_buffers(model) if step in s.average_buffers_after else []
    if s.average_at_end:
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(0.5)
    recorder.finish(recorded)
    return Path(run_dir)


def pair(tmp_path: Path, a: Loop, b: Loop) -> tuple[Path, Path]:
    return train(tmp_path / "a", "reference", a), train(tmp_path / "b", "changed", b)


INF = math.inf
