"""What each diagnosis says beyond its evidence: why such a difference arises and the one fix.

One table, keyed by finding kind ("category" or "category.variant"); the checks in diagnosis.py
state the facts they found and look the rest up here. `{placeholders}` are filled from the check's
values. docs/diagnosis.md lists every kind with the Lightning issue or PyTorch behaviour it comes from.
"""

from __future__ import annotations

from typing import NamedTuple


class Advice(NamedTuple):
    why: str  # appended to the facts in the explanation
    fix: str  # the advice line


_UNDETERMINED_WHY = (
    "The recorded evidence does not single out one cause; the candidates, most likely first: {ranked}. "
    "What tells them apart: {separate}"
)

ADVICE: dict[str, Advice] = {
    "equivalent": Advice("", "Nothing to fix."),
    "crash": Advice(
        "The other ranks' errors (a closed connection, a timeout in a collective) follow from this one: "
        "a rank that dies leaves its peers waiting in the next collective.",
        "Fix the error {side} rank {error_rank} raised ({type}: {message}); its traceback is in {path}.",
    ),
    "metadata": Advice(
        "Without the setup (configuration, world size, per-rank facts) nothing says the runs trained "
        "under the same conditions, so they are never called equivalent.",
        "Record with TraceRecorder(run_dir, side=..., config=...) and call start() after "
        "init_process_group, so that meta.json holds side, world_size, config and ranks.",
    ),
    "config": Advice(
        "Configuration comes first in the causal order: whatever differs downstream (weights, samples, "
        "losses) may be its consequence, so fix it before reading anything after it.",
        "Give both sides the same value of {keys} (or leave a run-control key out with --ignore-config KEY).",
    ),
    "config.threads": Advice(
        "The number of intra-op threads decides how a CPU kernel splits its reductions, so different "
        "thread counts sum in a different order and round differently: typically the first loss already "
        "differs in its last bits and the runs drift apart from there.",
        "Pin threads on every rank of both sides: export OMP_NUM_THREADS=N and call torch.set_num_threads(N) "
        "before building the model (the config's `threads:` key).",
    ),
    "config.arithmetic": Advice(
        "Another CPU, another ATen kernel set (ATEN_CPU_CAPABILITY), another BLAS path (MKL_CBWR) or another "
        "GPU adds and multiplies in another order or with other instructions: the same code rounds "
        "differently, typically from the first step, and the runs drift apart from there. Bits cannot "
        "match across these; the difference says nothing yet about the code.",
        "To compare the code bit for bit, run both sides under the same {keys}. Where they cannot share it "
        "(a laptop against CI, two GPU models), judge the pair against the rounding noise of that "
        "arithmetic, not its bits.",
    ),
    "config.state": Advice(
        "Each rank records the state it ran under (thread counts, environment, the world as it saw it); "
        "these values change what or where a rank computes.",
        "Give every rank of both sides the same {keys} (set them in the launch environment, before the "
        "process group and the model are created).",
    ),
    "config.torch_flags": Advice(
        "These global torch settings choose kernels and precisions (deterministic algorithms, cuDNN "
        "benchmark, TF32, float32 matmul precision, default dtype): the same code computes other bits.",
        "Set {keys} to the same value on every rank of both sides, before the model is built "
        "(Lightning's `deterministic=True` sets torch.use_deterministic_algorithms; spawned processes "
        "must set the flags themselves, Lightning #12685).",
    ),
    "config.seed": Advice(
        "The global seed decides the initial weights and the DistributedSampler's shuffle "
        "(LightningCLI's `seed_everything: true` picks a random seed on every run).",
        "Pin seed_everything to an integer in the config (not `true`) on both sides.",
    ),
    "param_groups": Advice(
        "The optimizer applies each group's hyperparameters to its parameters, so these parameters are "
        "updated differently from the first step on: a typical split is weight decay on every parameter "
        "on one side and biases and norms excluded on the other.",
        "Build the same param groups on both sides: give {names} the same {key} on both sides (one param group "
        "for them, or the same split).",
    ),
    "param_groups.class": Advice(
        "Another optimizer class computes another update from the same gradients.",
        "Use {b_class} on {a} as on {b} (or the other way round), with the same hyperparameters.",
    ),
    "init": Advice(
        "The usual cause is the model being built under a different RNG state: another seed, seeding "
        "after instead of before building the network, or an extra random draw between seeding and "
        "construction.",
        "Seed identically and build the model right after seeding on both sides (seed_everything pinned "
        "to an integer, the network constructed before anything else draws random numbers).",
    ),
    "sampler_seed": Advice(
        "Lightning seeds the DistributedSampler it injects from the global seed (PL_GLOBAL_SEED), and "
        "LightningCLI's `seed_everything: true` (its default) picks a random seed on every run; a "
        "hand-written loop must pass the same seed to DistributedSampler(seed=...).",
        "Pin seed_everything to an integer in the config, and seed the raw loop's DistributedSampler "
        "with that same value: DistributedSampler(..., seed=seed_everything).",
    ),
    "set_epoch": Advice(
        "A DistributedSampler shuffles with seed + epoch, and its epoch only changes when "
        "set_epoch(epoch) is called; without that call every epoch replays the first epoch's order. "
        "Lightning calls set_epoch on the sampler it injects; a hand-written loop must do it itself.",
        "On {side}: call sampler.set_epoch(epoch) at the start of every epoch, before iterating the "
        "DataLoader (also after resuming from a checkpoint).",
    ),
    "data_order": Advice(
        "Since the inputs differ, every later loss and gradient differs as a consequence, not as a cause. "
        "The recorded samplers say where: {sampler}",
        "Build the same DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=..., "
        "seed=seed, drop_last=...) with the same batch size on both sides; compare meta.json "
        "ranks[*].sampler.",
    ),
    "data_pipeline": Advice(
        "The indices are the same, so the sampler agrees; the tensors built from them are not: "
        "`__getitem__` or collate draws random numbers (a random augmentation) from a stream that "
        "differs between the sides, typically because DataLoader workers are seeded differently "
        "(seed_everything(workers=True) on one side, a worker_init_fn on one side only, a generator "
        "passed to one DataLoader, persistent workers).",
        "Seed DataLoader workers the same way on both sides: the same worker_init_fn (Lightning's "
        "`seed_everything(seed, workers=True)` installs pl_worker_init_function) and the same "
        "`generator=` and `persistent_workers` on both DataLoaders.",
    ),
    "rng": Advice(
        "With the same samples and the same initial weights the forward pass differs only through a "
        "random draw: the global random stream is in another state on the two sides when {where}.",
        "Re-seed right after building the model on both sides (Lightning re-seeds with reset_seed() "
        "before training; raw: torch.manual_seed(seed) after the model build), and let nothing else "
        "draw from the global stream in between (a sanity check, an extra DataLoader iterator: "
        "Lightning #6988).",
    ),
    "numerics": Advice(
        "With identical inputs and weights the forward pass differs only through how it is computed: "
        "the reduction order of CPU kernels (threads), precision or autocast, kernel selection.",
        "Pin threads (OMP_NUM_THREADS and torch.set_num_threads on every rank), use the same precision "
        "on both sides, and set torch.use_deterministic_algorithms(True).",
    ),
    "numerics.validation": Advice(
        "A DistributedSampler pads the validation set with repeated samples when it does not divide by "
        "the world size; averaging per-rank means instead of summing counts weights ranks unequally "
        "(Lightning #21859: epoch metrics with sync_dist inflated by an integer batch counter).",
        "Reduce validation metrics as sums and counts across ranks (all_reduce of both) and count each "
        "sample once, the way torchmetrics does.",
    ),
    "reduction_order": Advice(
        "The same numbers summed in another order round differently in the last bits. Lightning clips "
        "and measures the gradient norm over the optimizer's parameters in param-group order "
        "(`clip_gradients` iterates optimizer.param_groups), not over model.parameters().",
        "On {side}, compute the norm and clip over the parameters in the optimizer's order: "
        "torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g['params']], "
        "max_norm).",
    ),
    "config.sharding": Advice(
        "fully_shard decides which parameters are gathered and reduced together, and in which dtype: a "
        "bf16 reduce_dtype rounds every gradient sum to bf16; a module left out of the blocks is gathered "
        "with the root for the whole step (more memory per rank; at a world of 2 the same numbers).",
        "Apply one sharding plan on both sides: fully_shard on the same modules, then the root, with the "
        "same MixedPrecisionPolicy and reshard_after_forward (here ddp_parity.sharding.shard with the "
        "`fsdp:` section, which the raw loop, the LightningModule's configure_model and Fabric all call).",
    ),
    "optimizer.stale_params": Advice(
        "An optimizer updates the tensors it was given. fully_shard replaces every parameter of the module "
        "with a new DTensor parameter; an optimizer built before it keeps the old tensors, which no backward "
        "reaches: no gradient, no update, no error, and nothing trains.",
        "On {side}, build the optimizer after fully_shard (after the root's call), over model.parameters() "
        "as they are then: the DTensors.",
    ),
    "gradients.accumulation_sync": Advice(
        "With gradient sync on, FSDP2 reduce-scatters after every backward and adds up the averaged "
        "shards; with it off until the last micro-batch, each rank adds up its micro-batches and one "
        "reduce-scatter averages the sum. The same numbers summed in another order part in the last bits.",
        "On both sides, call model.set_requires_gradient_sync(False) before every micro-batch's backward "
        "but the last of a step, and set_requires_gradient_sync(True) before the last (Fabric: "
        "fabric.no_backward_sync; Lightning's ModelParallelStrategy does neither: do it in the "
        "LightningModule's on_train_batch_start, as lightning_impl/module.py does).",
    ),
    "noise": Advice(
        "The controls ({controls}) ran {side} again under a change of rounding alone; every per-step "
        "quantity of the pair stayed within {factor:g} times how far they drifted (the largest: {worst} "
        "at step {worst_step}, {ratio:.2g} of its bound). The runs differ as much as rounding makes "
        "correct code differ, no more.",
        "Nothing to fix: the runs are equivalent within the measured noise. For a bitwise verdict, run "
        "both sides under the same arithmetic (threads, ATen capability, BLAS path, world size).",
    ),
    # beyond the noise (--tolerance noise): read in causal order at the step the pair leaves it
    "loss.beyond_noise": Advice(
        "Rounding alone does not explain it: the controls ({controls}: {side} run again under a change "
        "of rounding alone) stay within that bound, and until then the pair's parameters were no further "
        "apart than rounding carries them, so the loss was computed differently at that step: the loss "
        "function or its arguments, a module's settings (a dropout p, train or eval mode), or the batch "
        "itself.{before}",
        "Compare what step {step} computes on the two sides, in this order: the loss and its arguments "
        "(label smoothing, class weights, reduction), the modules' settings and mode, the batch contents; "
        "watching the model (DDP_PARITY_WATCH_STEP={step}) compares each module's output.",
    ),
    "gradients.beyond_noise": Advice(
        "Rounding alone does not explain it: the controls ({controls}: {side} run again under a change "
        "of rounding alone) stay within that bound and the loss is within it too, so what happens between "
        "the loss and the optimizer step differs at that step: a loss scaled before backward, "
        "accumulation, averaging over ranks, a frozen or unused parameter, clipping on one side (the "
        "per-layer gradient norms are read after it; a gradient norm taken before it stays inside), or "
        "the batch (one sample fewer moves the gradients before the loss).{before}",
        "Look at what step {step} does between loss and optimizer step on each side, in {where} first: "
        "loss scaling and accumulation, DDP's averaging (no extra division by world size), requires_grad, "
        "gradient clipping; record batch=batch so the batch contents are compared exactly.",
    ),
    "optimizer.beyond_noise": Advice(
        "Rounding alone does not explain it: the controls ({controls}: {side} run again under a change "
        "of rounding alone) stay within that bound, and the loss and the gradients are within it too, so "
        "the update differs at that step: the optimizer's settings (lr, weight decay, momentum or betas of "
        "a group), its state, or gradient clipping on one side.{before}",
        "Compare the optimizer's settings and what touches the gradients after their norm is taken "
        "(clipping) on the two sides from step {step} on, for {where} first; record optimizer=optimizer "
        "so the param groups are compared before any step.",
    ),
    "reduction_order.sharding": Advice(
        "DDP sums each gradient across ranks in an all-reduce, FSDP2 in a reduce-scatter; with {world} "
        "terms the two add in different orders and round differently in the last bits. Neither side is "
        "wrong: this is the legitimate difference between the strategies, and it grows from step to step "
        "as rounding does.",
        "Nothing to fix in either loop. The exact verdict cannot call these runs equal; judge them against "
        "measured noise (--tolerance noise), or compare at a world of 2, where DDP and FSDP2 agree bit for bit.",
    ),
    "gradients": Advice(
        "Every module computes the same gradient, but the parameters' accumulated .grad differs, so "
        "what happens to the gradients between backward and the step differs: .grad not zeroed for some "
        "parameters (zero_grad on one optimizer of two), a parameter frozen (requires_grad=False) or unused "
        "on one side only, accumulation over another number of micro-batches, DDP's no_sync or averaging "
        "over ranks done differently.",
        "Zero the gradients of every parameter once per optimizer step (each optimizer's zero_grad), "
        "freeze the same parameters on both sides, "
        "accumulate the same micro-batches with the loss divided by accumulate_grad_batches, and let DDP "
        "do the averaging (no extra division by world size). First parameter whose .grad differs: {param}.",
    ),
    "gradients.factor": Advice(
        "A factor of about {factor:g} between the gradient norms is the signature of a loss scaled by the "
        "number of accumulated micro-batches, or of gradients averaged over the world size once too "
        "often or not at all.",
        "Divide the loss by accumulate_grad_batches before backward (and only then), and let DDP do the "
        "averaging over ranks (no extra division by world size).",
    ),
    "numerics.module": Advice(
        "The module watch shows where the difference is born: {name} ({type}) computes another output from "
        "the same input, with the same parameters and in the same mode (training flag, autocast, dtypes) on "
        "both sides, and the thread counts and torch flags are recorded equal: the module itself is built "
        "or computed differently.",
        "Build {name} ({type}) the same way on both sides: the same class and constructor arguments (eps, "
        "momentum, approximate, bias, ...) and the same dtype; compare print(model) of both sides.",
    ),
    "loss": Advice(
        "Every module call of the forward pass is equal on both sides, so the model's outputs are the same: "
        "the loss computed from them is not. The loss function or its arguments differ: label smoothing, "
        "class weights, reduction (mean or sum, averaged over the local or the global batch), ignore_index.",
        "Compute the loss with the same function and arguments on both sides (the same criterion with the "
        "same label_smoothing, weight= and reduction), averaged over the same samples.",
    ),
    "module_state": Advice(
        "With equal inputs and parameters a module computes what its mode makes it compute: {what}",
        "{fix}",
    ),
    "undetermined": Advice(_UNDETERMINED_WHY, "Tell them apart: {separate}"),
    # the same, where a side did not record what would tell the candidates apart
    "undetermined.unrecorded": Advice(
        _UNDETERMINED_WHY, "Record what would tell them apart, then compare again: {changes}."
    ),
    "optimizer.lr": Advice(
        "The learning-rate schedule is stepped differently: per optimizer step on one side and per "
        "epoch on the other (Lightning's `interval`), or per micro-batch under accumulation.",
        "Step the scheduler exactly where Lightning does: after optimizer.step(), once per epoch for "
        "interval 'epoch' or once per optimizer step for interval 'step', with the same parameters "
        "(a schedule sized in steps, like OneCycleLR, needs the same total_steps: optimizer steps, "
        "len(train_loader) x epochs / accumulation, not len(dataset): Lightning #2643).",
    ),
    "optimizer": Advice(
        "Same samples, loss, gradient norm and learning rate, yet another update: the optimizer's "
        "state or settings differ (hyperparameters not in meta.optimizer, zero_grad missing so "
        "gradients accumulate, clipping on one side only, a fused/foreach implementation).",
        "Build the same optimizer with the same hyperparameters and implementation on both sides, clip "
        "the same way, and zero the gradients once per optimizer step.",
    ),
    "buffers.replicas": Advice(
        "On {side} the ranks end with different buffers ({name}), while the other side's replicas agree. "
        "DDP broadcasts rank 0's buffers at every forward through the wrapper (broadcast_buffers=True); a "
        "forward on the unwrapped module (validation outside the DDP wrapper) uses and updates each rank's "
        "own running statistics.",
        "On {side}, validate through the DDP-wrapped model (as Lightning does), so every rank uses rank 0's buffers.",
    ),
    "buffers.sync": Advice(
        "The buffer {name} differs between the sides while the per-step training records agree: its running "
        "statistics are computed from other batch statistics, as when one side converts BatchNorm to "
        "SyncBatchNorm (statistics over the global batch) and the other does not.",
        "Use SyncBatchNorm on both sides (torch.nn.SyncBatchNorm.convert_sync_batchnorm) or on neither.",
    ),
    "recording": Advice(
        "The training is the same; only what was written down differs, so nothing in the training needs fixing.",
        "{fix}",
    ),
    "resume": Advice(
        "{cause}",
        "{fix} In general: save and load model, optimizer, scheduler, scaler and RNG state with the "
        "checkpoint, as raw/train.py does.",
    ),
    "step_count": Advice(
        "DistributedSampler pads the dataset so every rank gets ceil(N / world_size) samples (or drops "
        "the tail with drop_last=True) and the DataLoader's drop_last decides whether a short last "
        "batch is a step; max_steps/max_epochs and accumulation leftovers at an epoch's end change the "
        "count too (Lightning #19987, #21808).",
        "Shard with DistributedSampler on both sides (same drop_last for sampler and DataLoader, same "
        "batch size) and stop on the same max_epochs / max_steps.",
    ),
    "step_count.empty": Advice(
        "That run failed or was stopped before its first optimizer step finished, so there is nothing to compare yet.",
        "Look at {side}'s log for the error (a rank that failed at start-up, a wrong run directory), "
        "fix it and compare again.",
    ),
    "stall": Advice(
        "The classic cause is uneven shards: one rank gets more batches than the others, so at the end "
        "of an epoch it enters an all-reduce its peers never reach.",
        "Give every rank the same number of batches: shard with DistributedSampler (it pads to "
        "ceil(N / world_size)) and use the same drop_last for sampler and DataLoader; never put a "
        "collective under a rank-dependent condition; for truly uneven inputs use DDP's Join context.",
    ),
}

# a module that runs in another mode than its twin: why that changes its output, and the fix
# ({name}: the module, {side}: the side whose mode is the usual slip, {a}/{b}: the two values)
MODULE_STATE = {
    "training": Advice(
        "in eval mode dropout passes its input through and BatchNorm normalises with its running statistics; "
        "the usual slip is a loop that calls model.eval() for validation and never model.train() again "
        "(Lightning switches back after its validation loop).",
        "On {side}, put the model back in training mode before training continues: call model.train() after "
        "validation (and at the start of every epoch), so that {name} trains with training=True.",
    ),
    "arguments": Advice(
        "the module is built with other constructor arguments (a dropout probability, eps, momentum, "
        "approximate), so it computes another function.",
        "Build {name} with the same arguments on both sides ({a} vs {b}).",
    ),
    "autocast": Advice(
        "under autocast a module computes in a lower precision (bf16/fp16 matmuls), so the same input gives "
        "other bits.",
        "Run {name} under the same precision on both sides ({a} vs {b}): the same Trainer `precision` and "
        "the same torch.autocast regions in the hand-written loop.",
    ),
    "grad_enabled": Advice(
        "a forward without gradients records no graph; the module's backward then differs.",
        "Run the training forward with gradients enabled on both sides (no torch.no_grad() or "
        "torch.inference_mode() around {name}).",
    ),
    "output_dtypes": Advice(
        "a module whose parameters or computation are in another dtype gives outputs of another dtype.",
        "Give {name} the same dtype on both sides ({a} vs {b}): model.to(dtype), the Trainer's `precision`.",
    ),
    "input_dtypes": Advice(
        "the same values in another dtype are other bits.",
        "Feed {name} the same dtype on both sides ({a} vs {b}): cast the batch the same way.",
    ),
}

# what a resume got wrong, by what the first step after it shows: the cause and the fix the `resume`
# kind fills in ({at}: the step the run resumed after)
RESUME = {
    "numbering": Advice(
        "The resumed loop restarts its step counter at another value than the steps done.",
        "Restore the global step from the checkpoint and continue counting from it.",
    ),
    "count": Advice(
        "The resumed run trains another number of steps than remained: it resumed at the wrong step or epoch.",
        "Store the steps and epochs *done* with the checkpoint and resume right after them.",
    ),
    "order_lost": Advice(
        "The resumed run rebuilt its DataLoader or sampler without the state that decides the order: a "
        "DataLoader generator seeded afresh, a sampler without set_epoch(restored epoch), workers "
        "re-seeded from the start (Lightning #21938: workers replaying an epoch after a resume).",
        "Restore the data order with the checkpoint: save and load the DataLoader's generator state "
        "(generator.get_state()/set_state()) or call sampler.set_epoch(restored epoch) before iterating.",
    ),
    "replay": Advice(
        "The checkpoint stores the epoch that was running (or just finished) and the loop restarts "
        "at that index, so the finished epoch is replayed.",
        "Save the number of epochs *done* (epoch + 1 after an epoch ends) and resume from it.",
    ),
    "skip": Advice(
        "The loop resumes past the point the checkpoint was taken: an epoch or steps are skipped.",
        "Resume at the first step not done: the epoch and step stored with the checkpoint.",
    ),
    "order": Advice(
        "The sampler's order after the restart differs: its epoch (set_epoch) or RNG state was not restored.",
        "Call sampler.set_epoch(epoch) with the restored epoch and restore the RNG states from the checkpoint.",
    ),
    "scheduler": Advice(
        "The learning-rate scheduler starts again from its initial state: its state was not restored.",
        "Save scheduler.state_dict() with the checkpoint and load it on resume.",
    ),
    "optimizer": Advice(
        "An optimizer whose state (Adam's moments, momentum buffers) starts empty updates differently from "
        "the same gradients: the optimizer state was not restored.",
        "Save optimizer.state_dict() with the checkpoint and load it on resume.",
    ),
    "model_or_rng": Advice(
        "The weights or the random stream the resumed run starts from are not those the other run had after "
        "step {at}: the model state or the RNG state was not restored, or comes from another step (a snapshot "
        "that stores the index of the epoch just finished, resumed at that index, trains that epoch again "
        "from weights that already learned it).",
        "Resume right after the snapshot: save the epochs and steps *done* (epoch + 1 after an epoch ends) "
        "with the model state and the torch/numpy/random RNG states, and load them all.",
    ),
}

# each cause a divergence can have, as the ranked candidates of an undetermined finding say it:
# (the cause, what would tell it apart from the others)
CANDIDATES = {
    "data_pipeline": (
        "the batch contents (random augmentation, DataLoader worker seeding, transforms)",
        "record batch=batch on both sides (its batch_digest is compared), or watch the model (its first "
        "module's input is compared)",
    ),
    "rng": (
        "the random stream (a dropout mask drawn from another RNG state)",
        "watch the model: a random layer (Dropout) whose output differs with equal input is the random stream",
    ),
    "module_state": (
        "a module in another mode (eval mode left on after validation, autocast, dtype)",
        "watch the model with this version: each call's training flag, autocast and dtypes are compared",
    ),
    "loss": (
        "the loss function or its arguments (label smoothing, class weights, reduction)",
        "watch the model: equal module outputs with a different loss are the loss function",
    ),
    "numerics": (
        "a module that computes differently from equal inputs (its constructor arguments, its kernel)",
        "watch the model: the first module whose output differs with equal input is named",
    ),
    "gradients": (
        "the scaling or reduction of the gradients (accumulation without loss division, no_sync, averaging over ranks)",
        "watch the model: equal module gradients with different parameter .grad are the reduction",
    ),
    "param_groups": (
        "the optimizer's param groups (weight decay or lr on some parameters only)",
        "record optimizer=optimizer on both sides: the param groups are compared before any step",
    ),
    "reduction_order": (
        "clipping over the parameters in another order (model.parameters() vs the optimizer's groups)",
        "record optimizer=optimizer on both sides: equal param groups leave the order as the cause",
    ),
    "optimizer": (
        "the optimizer's update (its state, settings outside the param groups, zero_grad, clipping on one side)",
        "watch the model: the parameters after the step are compared one by one",
    ),
    "earlier_update": (
        "an earlier optimizer step that already differed (the parameters after each step were not recorded)",
        "record model=model on both sides: the parameters after every step are then compared",
    ),
}

# evidence a side may not have recorded: what could not be checked without it, and the one-line
# change to the record call that records it ({step}: the first divergence's step)
MISSING_EVIDENCE = {
    "batch": (
        "the batch contents (batch_digest)",
        "recorder.record(step, loss, indices, ..., batch=batch)",
    ),
    "optimizer": (
        "the optimizer's class and param groups, and the parameter order clipping sums in",
        "recorder.record(step, loss, indices, ..., optimizer=optimizer, model=model)",
    ),
    "param_digest": (
        "the parameters after each step (param_digest)",
        "recorder.record(step, loss, indices, ..., model=model)",
    ),
    "watch": (
        "the module and phase where the difference is born, and each module's mode",
        "recorder.watch(model) after recorder.start() (TraceCallback watches by itself)",
    ),
    "watch_step": (
        "the module calls at step {step}, which the module watch did not cover",
        "recorder.watch(model, steps=[{step}]), or DDP_PARITY_WATCH_STEP={step} in both commands' environment",
    ),
    "watch_state": (
        "each module call's training flag, autocast and dtypes (a module watch from an older version)",
        "record again with this version's recorder.watch(model)",
    ),
}

# the right way to record each quantity (the `recording` findings name the one that was missed)
RECORDING_FIX = {
    "step": "Number optimizer steps the same way on both sides: the recorder's `step` is the count of "
    "optimizer steps done, starting at 1 after the first (Lightning's trainer.global_step after the step)",
    "grad_norm": "Record the gradient norm before clipping, as clip_grad_norm_ returns it (Lightning: "
    "`on_before_optimizer_step` sees it), on both sides.",
    "lr": "Record the learning rate the optimizer step used: read optimizer.param_groups[0]['lr'] "
    "before scheduler.step().",
    "validation": "Record validation figures as computed (float64/Python floats), not the values "
    "`self.log` keeps (rounded to float32).",
}
