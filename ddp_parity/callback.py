"""The trace as a Lightning Callback: add it to any Trainer to record the same trace as the raw loop.

    trainer = Trainer(strategy="ddp", callbacks=[TraceCallback("runs/my-lightning-run")])

It needs nothing from the model but what Lightning already has: the loss the training step
returned, the optimizer (its lr and param groups), the module (its parameter digest) and the batch
(its `index` field or key when it carries one, and a digest of its tensors). The gradient norm is
measured where `on_before_optimizer_step` sees the gradients: after backward and unscaling, before
clipping; the lr is the one the step used. On a CPU each step is written as it is recorded; on an
accelerator values stay tensors (no device sync per step) and are written every `flush_every` steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import torch

from ddp_parity.fingerprints import parameters_sha256
from ddp_parity.record_values import check_json
from ddp_parity.runs import write_error_file
from ddp_parity.sharding import total_grad_norm
from ddp_parity.trace import TraceRecorder, batch_indices, checked_metric, params_sha256, sampler_facts


class TraceCallback(L.Callback):
    def __init__(
        self,
        run_dir: str | None = None,
        side: str = "lightning",
        config: dict | None = None,
        flush_every: int = 100,
        digest_batches: bool = True,
        record_sanity_check: bool = False,
    ):
        self.run_dir = run_dir
        self.side = side
        self.config = config
        self.flush_every = flush_every
        self.digest_batches = digest_batches  # False: skip batch_digest (sha256 of every batch's bytes)
        # True: the sanity check's validation is the run's validation before its first step (step 0,
        # or the step a resumed fit starts from), as a loop that evaluates at iteration 0 records it;
        # give the Trainer num_sanity_val_steps=-1 (or the batches the loop evaluates) to make it whole
        self.record_sanity_check = record_sanity_check
        self._before_training: tuple[int, int, dict] | None = None
        self.recorder: TraceRecorder | None = None
        self._micro_losses: list[torch.Tensor] = []
        self._backwarded: list[torch.Tensor] = []  # manual optimization: the losses manual_backward was given
        self._micro_indices: list[Any] = []
        self._micro_batches: list[Any] = []
        self._lr: float | None = None
        self._grad_norm: torch.Tensor | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        self._last_step = 0

    # -- lifecycle ------------------------------------------------------------------------

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        # before the strategy wraps the model in DDP (and broadcasts rank 0's weights); a module that builds
        # its layers in configure_model has none yet here: its digest is taken at on_fit_start instead
        has_state = next(iter(pl_module.state_dict()), None) is not None
        self._init_params_sha256 = params_sha256(pl_module) if has_state else None
        self._init_parameters_by_name = parameters_sha256(pl_module) if has_state else None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # configure_model has run: rank 0's weights (DDP has broadcast them), the initial weights all the same
        if getattr(self, "_init_params_sha256", None) is None:
            self._init_params_sha256 = params_sha256(pl_module)
            self._init_parameters_by_name = parameters_sha256(pl_module)

    def _init_by_name(self) -> dict:
        """Each initial parameter by name, where taken: the initial states compared on what both sides hold."""
        by_name = getattr(self, "_init_parameters_by_name", None)
        return {"init_parameters_by_name": by_name} if by_name is not None else {}

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        run_dir = Path(self.run_dir or trainer.default_root_dir)
        config, config_problem = self.config, None
        if config is None:  # the module's hyperparameters: what meta.json cannot hold is said, never raised
            config = dict(pl_module.hparams)
            try:
                check_json("(config=...)", config)
            except TypeError as exc:
                config, config_problem = {}, str(exc)
        self.recorder = TraceRecorder(
            run_dir,
            side=self.side,
            config=config,
            flush_every=self.flush_every,
            handle_signals=False,  # Lightning turns SIGTERM into an exception: on_exception flushes
            extra_meta={
                "device": str(trainer.strategy.root_device),
                "precision": str(trainer.precision),
                "resumed_from": trainer.ckpt_path,
                "trainer": {  # how the Trainer clips: compared with the other side's clipping per step
                    "gradient_clip_val": trainer.gradient_clip_val,
                    "gradient_clip_algorithm": _algorithm(trainer),
                },
            },
        )
        if config_problem is not None:
            self.recorder.note_unrecorded("config", config_problem)
        self._last_step = trainer.global_step
        # a resumed fit keeps the steps recorded up to its checkpoint and records the rest again
        sampler = getattr(trainer.train_dataloader, "sampler", None)
        self.recorder.start(
            facts={
                "init_params_sha256": getattr(self, "_init_params_sha256", None),
                "sampler": sampler_facts(sampler) if sampler is not None else None,
                **self._init_by_name(),
            },
            resumed_from_step=trainer.global_step if trainer.ckpt_path else None,
        )
        self.recorder.watch(pl_module, start_step=trainer.global_step)  # module watch (docs/localisation.md)
        if self._before_training is not None:  # the sanity check ran before the recorder existed
            epoch, step, metrics = self._before_training
            self.recorder.record_validation(epoch, step, self._recordable(metrics))
            self._before_training = None

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.recorder.finish(pl_module)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        # every rank: the trace up to this step is on disk before a checkpoint that resumes after it
        if self.recorder is not None:
            self.recorder.set_phase("checkpoint")
            self.recorder.flush()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        # keyed by trainer.global_rank: Lightning's own launcher does not set RANK
        if self.recorder is not None:
            self.recorder.close()
            self.recorder.record_error(exception)
        else:
            write_error_file(Path(self.run_dir or trainer.default_root_dir), exception, rank=trainer.global_rank)

    # -- per step -------------------------------------------------------------------------

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer) -> None:
        # after backward (and after unscaling under fp16), before clipping: what the raw loop measures
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        self._grad_norm = total_grad_norm(grads)  # over full tensors: comparable with DDP under FSDP2
        self._lr = optimizer.param_groups[0]["lr"]  # before the scheduler steps: the lr this step uses
        if self._optimizer is None and self.recorder is not None:
            # the param groups as the first step uses them: a per-step scheduler steps before
            # on_train_batch_end, where record() would read them already rescaled
            self.recorder._record_optimizer(optimizer, pl_module)
        self._optimizer = optimizer

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        if not pl_module.automatic_optimization:  # manual_backward(loss): what the step's loss is made of
            self._backwarded.append(loss.detach())

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.recorder is not None:
            self.recorder.set_phase("train")
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if not pl_module.automatic_optimization and self._backwarded:
            # manual optimization: the losses given to manual_backward in this batch, summed in order
            loss, self._backwarded = _summed(self._backwarded), []
        if loss is None:  # training_step returned None: Lightning skips the batch, and so does the trace
            if trainer.global_step != self._last_step and self.recorder is not None:
                self._last_step = trainer.global_step  # the optimizer stepped (manual), with no loss to record
                self.recorder.note_unrecorded(
                    "steps without a loss",
                    f"from step {trainer.global_step}: the optimizer stepped, and training_step returned no loss "
                    "and called no manual_backward; return the loss from training_step to record the step",
                )
            return
        self._micro_losses.append(loss.detach() if isinstance(loss, torch.Tensor) else loss)  # divided by accumulation
        indices = batch_indices(batch)
        if indices is not None:
            self._micro_indices.append(indices)
        if self.digest_batches:
            self._micro_batches.append(batch)
        if trainer.global_step == self._last_step:
            return  # a micro-batch of an accumulation: the optimizer has not stepped yet
        self._last_step = trainer.global_step
        self.recorder.record(
            trainer.global_step,
            _summed(self._micro_losses),  # summed in order, as the raw loop does
            torch.cat(self._micro_indices) if self._micro_indices else None,
            epoch=trainer.current_epoch,
            lr=self._lr,
            grad_norm=self._grad_norm,
            batch=self._micro_batches or None,  # the micro-batches digest as one batch of their tensors
            micro_batches=len(self._micro_losses),  # where this step's accumulation boundary fell
            optimizer=self._optimizer,  # param groups to meta.json once (the lr is the one captured above)
            model=pl_module,  # param_digest of the parameters as this step left them
            **_clip_facts(trainer),  # the Trainer's clipping, in the fields the hooks record clip_grad_norm_ in
        )
        self._micro_losses, self._micro_indices, self._micro_batches = [], [], []

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # on_validation_end, not _epoch_end: callbacks run before the module's epoch-end hook
        if trainer.sanity_checking:
            if self.record_sanity_check:
                self._before_training = (
                    trainer.current_epoch,
                    trainer.global_step,
                    validation_metrics(trainer, pl_module),
                )
            return
        if self.recorder is None or self.recorder.finished:  # trainer.validate() outside fit: not in the trace
            return
        self.recorder.set_phase("after-validation")
        metrics = self._recordable(validation_metrics(trainer, pl_module))
        self.recorder.record_validation(trainer.current_epoch, trainer.global_step, metrics)

    def _recordable(self, metrics: dict) -> dict:
        """The figures record_validation takes; one it cannot (a string the module keeps beside its
        numbers) is the module's data, not a misuse of the callback: noted as unrecorded, fit() goes on."""
        kept = {}
        for name, value in metrics.items():
            try:
                checked_metric(name, value)
            except (TypeError, ValueError) as exc:
                self.recorder.note_unrecorded(f"validation metric {name!r}", str(exc))
            else:
                kept[name] = value
        return kept

    def record_validation(
        self, trainer: L.Trainer, metrics: dict, *, step: int | None = None, epoch: int | None = None
    ):
        """A validation the module ran itself, outside Lightning's validation loop (an evaluation at
        iteration 0 on rank 0, between two training draws): keyed by `step`, default the optimizer steps
        done (trainer.global_step: 0 before the first), and `epoch`, default trainer.current_epoch. Rank 0
        writes it, as for every validation; pass the figures unrounded."""
        if self.recorder is None:
            raise RuntimeError(
                "TraceCallback.record_validation(): the recorder starts at on_train_start; call it after"
            )
        step = trainer.global_step if step is None else step
        epoch = trainer.current_epoch if epoch is None else epoch
        self.recorder.record_validation(epoch, step, metrics)

    # -- phases, for the heartbeat (a watcher tells a long validation or checkpoint from a hang) ----

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.recorder is not None and self.recorder.total_steps is None:
            total = trainer.estimated_stepping_batches
            self.recorder.total_steps = int(total) if total != float("inf") else None

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.recorder is not None:
            self.recorder.set_phase("validation")

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if self.recorder is not None:
            self.recorder.tick()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.recorder is not None:
            self.recorder.set_phase("epoch-end")


def _summed(losses: list) -> Any:
    total = losses[0]
    for loss in losses[1:]:
        total = total + loss
    return total


def validation_metrics(trainer: L.Trainer, pl_module: L.LightningModule) -> dict:
    """The figures of a validation: the module's `last_validation` (ours), else whatever it logged
    under a name starting with val."""
    metrics = getattr(pl_module, "last_validation", None)
    if metrics is None:
        metrics = {k: v for k, v in trainer.callback_metrics.items() if k.startswith("val")}
    return dict(metrics)


def _algorithm(trainer: L.Trainer) -> str | None:
    algorithm = trainer.gradient_clip_algorithm
    return None if algorithm is None else str(getattr(algorithm, "value", algorithm))


def _clip_facts(trainer: L.Trainer) -> dict:
    """clip_max_norm and clip_norm_type (Lightning clips by the 2-norm), or clip_value, as the Trainer clips
    at each step (gradient_clip_val / gradient_clip_algorithm); {} where it does not clip."""
    value = trainer.gradient_clip_val
    if not value:
        return {}
    if _algorithm(trainer) == "value":
        return {"clip_value": float(value)}
    return {"clip_max_norm": float(value), "clip_norm_type": 2.0}
