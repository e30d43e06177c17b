"""The tutorial's classic DDP mistakes, one at a time, applied to raw/train.py from the outside.

    torchrun --nproc_per_node=2 raw/mistakes.py no-set-epoch --config configs/default.yaml ...
    python compare/run.py --mistake no-set-epoch        # and see what the harness says
    python compare/run.py --mistake list

raw/train.py stays the clean loop: each mistake replaces one of the names it looks up at run time
(DistributedSampler, build_net, set_determinism, parse_raw_config, batch_loss, load_checkpoint) before `train.main`
runs, the way the mistake would look in a user's own loop. raw/reference.py bends it the same way.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.utils.data import DistributedSampler

from ddp_parity.sharding import wrapped_module_names

# raw/train.py, the module every mistake bends: imported by main(), so that the harness can read the
# catalogue below without importing the training script
train = None


@dataclass
class Mistake:
    name: str
    summary: str
    apply: Callable[[], None]
    overrides: list[str] = field(default_factory=list)  # config both sides need for the mistake to show
    expected: str = ""  # the diagnosis category the harness should give
    needs_fault: bool = False  # shows only on a crashed-and-resumed run (the harness asks for --fault)


class ForgetfulSampler(DistributedSampler):
    """set_epoch is never called: every epoch shuffles with the same seed, repeating epoch 0's order."""

    def set_epoch(self, epoch: int) -> None:
        pass


class OffByOneSeedSampler(DistributedSampler):
    """The sampler seeded with something else than seed_everything (LightningCLI's `true` does this)."""

    def __init__(self, *args, seed: int = 0, **kwargs):
        super().__init__(*args, seed=seed + 1, **kwargs)


class UnevenSampler(DistributedSampler):
    """A hand-made split without DistributedSampler's padding: rank 0 gets one batch more than the others."""

    def __iter__(self):
        own = list(super().__iter__())
        return iter(own + own[:32] if self.rank == 0 else own)

    def __len__(self) -> int:
        return super().__len__() + (32 if self.rank == 0 else 0)


def no_set_epoch() -> None:
    train.DistributedSampler = ForgetfulSampler


def sampler_seed() -> None:
    train.DistributedSampler = OffByOneSeedSampler


def uneven_shards() -> None:
    train.DistributedSampler = UnevenSampler


def unseeded_init() -> None:
    """Each rank builds its weights from its own fresh random seed (no seed_everything before the model)."""
    build = train.build_net

    def build_unseeded(config):
        torch.manual_seed(torch.seed())
        return build(config)

    train.build_net = build_unseeded


def thread_mismatch() -> None:
    """One process runs with another thread count than the config says (e.g. OMP_NUM_THREADS left to a launcher)."""
    setup = train.set_determinism

    def set_determinism_with_more_threads(seed, threads, deterministic):
        facts = setup(seed, threads, deterministic)
        torch.set_num_threads(threads + 1)
        return facts

    train.set_determinism = set_determinism_with_more_threads


def no_loss_scaling_for_accumulation() -> None:
    """backward() on the micro-batch loss as it is, not divided by accumulate_grad_batches: the
    logged loss looks right, the accumulated gradient is k times too large."""
    batch_loss, parse = train.batch_loss, train.parse_raw_config
    accumulate = {}

    def parse_and_note_k(argv):
        cfg = parse(argv)
        accumulate["k"] = cfg.trainer.accumulate_grad_batches
        return cfg

    def unscaled(model, batch, device):
        loss, k = batch_loss(model, batch, device), accumulate["k"]
        return loss + (k - 1) * (loss - loss.detach())  # value unchanged, gradient times k

    train.parse_raw_config, train.batch_loss = parse_and_note_k, unscaled


def resume_off_by_one() -> None:
    """The tutorial's snapshot resume: the checkpoint's epoch index is taken as the epoch to run, from
    its first batch, so the epoch the checkpoint closed is trained again (the global step and every
    state are restored; only the position is wrong). Shows only on a resumed run: --fault RANK:STEP."""
    load = train.load_checkpoint

    def load_and_restart_the_epoch(path, stateful, device, world_size):
        progress, rng = load(path, stateful, device, world_size)
        return {**progress, "batches_done": 0}, rng  # `range(epochs_run, ...)` with epochs_run = epoch

    train.load_checkpoint = load_and_restart_the_epoch


# -----------------------------------------------------------------------------
# FSDP2 slips (trainer.strategy fsdp): the same loop, one line of the sharding wrong

FSDP = ["--trainer.strategy", "fsdp"]


def optimizer_before_shard() -> None:
    """The optimizer built over the parameters the network was built with, before fully_shard replaced
    them with DTensors: it holds tensors the model no longer uses, which never get a gradient, so
    nothing trains."""
    build_net, build_optimizer = train.build_net, train.build_optimizer
    built = {}

    def build_and_keep_its_parameters(config):
        net = build_net(config)
        built["params"] = list(net.parameters())
        return net

    def build_over_the_unsharded(params, config):
        return build_optimizer(built["params"], config)

    train.build_net, train.build_optimizer = build_and_keep_its_parameters, build_over_the_unsharded


def sync_every_micro_batch() -> None:
    """set_requires_gradient_sync(False) left out while accumulating: every micro-batch
    reduce-scatters, and the step's gradient is a sum of averages instead of the average of sums."""
    gradient_sync = train.gradient_sync
    train.gradient_sync = lambda model, sync: gradient_sync(model, sync=True)


def reduce_in_bf16() -> None:
    """MixedPrecisionPolicy(reduce_dtype=torch.bfloat16) hard-coded on this side only."""
    shard = train.shard
    train.shard = lambda net, plan, mesh=None: shard(net, dataclasses.replace(plan, reduce_dtype="bfloat16"), mesh)


def unwrapped_block() -> None:
    """The last block left out of the per-block fully_shard calls: the root takes its parameters."""
    shard = train.shard

    def shard_all_but_the_last_block(net, plan, mesh=None):
        blocks = wrapped_module_names(net, plan)[:-1]
        return shard(net, dataclasses.replace(plan, wrap=blocks), mesh)

    train.shard = shard_all_but_the_last_block


MISTAKES = {
    m.name: m
    for m in [
        Mistake(
            "no-set-epoch",
            "sampler.set_epoch(epoch) forgotten: every epoch repeats epoch 0's order",
            no_set_epoch,
            expected="set_epoch",
        ),
        Mistake(
            "unseeded-init",
            "ranks build their weights without a common seed (DDP then broadcasts rank 0's)",
            unseeded_init,
            expected="init",
        ),
        Mistake(
            "thread-mismatch",
            "one thread count in the config, another in the process",
            thread_mismatch,
            # a reduction large enough for 2 threads to split it: at 32->64->10 the bits agree anyway
            overrides=["--model.hidden_dim", "1024", "--data.batch_size", "128"],
            expected="config",
        ),
        Mistake(
            "sampler-seed",
            "the DistributedSampler seeded differently from seed_everything",
            sampler_seed,
            expected="sampler_seed",
        ),
        Mistake(
            "no-loss-scaling-for-accumulation",
            "gradient accumulation without dividing the loss by k",
            no_loss_scaling_for_accumulation,
            overrides=["--trainer.accumulate_grad_batches", "2"],
            expected="gradients",
        ),
        Mistake(
            "uneven-shards",
            "ranks with different numbers of batches: one waits in a collective forever",
            uneven_shards,
            expected="stall",
        ),
        Mistake(
            "resume-off-by-one",
            "the resume restarts at the epoch the checkpoint closed: that epoch is trained twice (needs --fault)",
            resume_off_by_one,
            expected="resume",
            needs_fault=True,
        ),
        Mistake(
            "fsdp-optimizer-before-shard",
            "FSDP2: the optimizer built before fully_shard holds the unsharded parameters: nothing trains",
            optimizer_before_shard,
            # no checkpoint: get_state_dict refuses an optimizer over tensors the model does not hold
            overrides=[*FSDP, "--checkpoint.every_n_epochs", "null"],
            expected="optimizer",
        ),
        Mistake(
            "fsdp-sync-every-micro-batch",
            "FSDP2 with accumulation: gradient sync not disabled on the micro-batches before the last",
            sync_every_micro_batch,
            overrides=[*FSDP, "--trainer.accumulate_grad_batches", "2"],
            expected="gradients",
        ),
        Mistake(
            "fsdp-reduce-bf16-one-side",
            "FSDP2: MixedPrecisionPolicy reduce_dtype bf16 on this side only",
            reduce_in_bf16,
            overrides=FSDP,
            expected="config",
        ),
        Mistake(
            "fsdp-unwrapped-block",
            "FSDP2: a block left out of the per-block fully_shard calls on this side (the root takes it)",
            unwrapped_block,
            overrides=FSDP,
            expected="config",
        ),
    ]
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in MISTAKES:
        print(f"raw/mistakes.py: error: first argument must be one of {', '.join(MISTAKES)}", file=sys.stderr)
        return 2
    global train
    import train  # beside this file: a script's own folder is on its import path

    MISTAKES[argv[0]].apply()
    return train.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
