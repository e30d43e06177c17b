"""accelerate's nlp_example.py ported to Lightning, written first as a Lightning user would: the same model,
tokenized data and collate function (standins.py), AdamW with the linear warmup schedule stepped every optimizer
step, the batch size over MAX_GPU_BATCH_SIZE turned into accumulate_grad_batches, accuracy over the gathered
predictions at each epoch's end.

    python lightning_port.py --num_epochs 2 --batch_size 32 --run_dir OUT/trace
"""

import argparse

import lightning as L
import torch
from standins import (
    AccuracyMetric,
    AutoModelForSequenceClassification,
    Tokenizer,
    get_linear_schedule_with_warmup,
    load_tokenized_mrpc,
)
from torch.utils.data import DataLoader, DistributedSampler

from ddp_parity import TraceCallback  # parity

MAX_GPU_BATCH_SIZE = 16
EVAL_BATCH_SIZE = 32


class LitClassifier(L.LightningModule):
    def __init__(self, lr: float = 2e-5, num_warmup_steps: int = 100, accumulate: int = 1):
        super().__init__()
        self.save_hyperparameters()
        self.model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", return_dict=True)
        self.metric = AccuracyMetric()
        self.automatic_optimization = False
        self.last_validation = None

    def training_step(self, batch, batch_idx):
        # round 3 (docs/programs.md): nlp_example steps at `step % n == 0`, after the first micro-batch alone
        # and then every n, across epochs; accumulate_grad_batches steps after n. The loop's boundaries, by hand
        loss = self.model(**batch).loss / self.hparams.accumulate
        self.manual_backward(loss)
        if batch_idx % self.hparams.accumulate == 0:
            optimizer = self.optimizers()
            optimizer.step()
            self.lr_schedulers().step()  # once per optimizer step, as the loop does
            optimizer.zero_grad()
        return loss

    def on_validation_model_zero_grad(self):
        pass  # round 5: the loop keeps the gradients it accumulated across its evaluation; Lightning zeroes them

    def validation_step(self, batch, batch_idx):
        predictions = self.model(**batch).logits.argmax(dim=-1)
        self.metric.add_batch(
            predictions=self.all_gather(predictions).flatten(), references=self.all_gather(batch["labels"]).flatten()
        )

    def on_validation_epoch_end(self):
        self.last_validation = self.metric.compute()  # unrounded: what TraceCallback records
        self.log("val_accuracy", self.last_validation["accuracy"])

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        # the loop's schedule length: micro-batches per epoch times epochs (len(train_dataloader) * num_epochs)
        scheduler = get_linear_schedule_with_warmup(
            optimizer, self.hparams.num_warmup_steps, self.trainer.estimated_stepping_batches
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class ShardedLoader:
    """A DataLoader over a DistributedSampler(shuffle=True, seed=0), made when the process group exists."""

    def __init__(self, dataset, **loader_args):
        self.dataset, self.loader_args = dataset, loader_args

    def __call__(self):
        return DataLoader(
            self.dataset, sampler=DistributedSampler(self.dataset, shuffle=True, seed=0), **self.loader_args
        )


def main():
    parser = argparse.ArgumentParser(description="nlp_example.py in Lightning")
    parser.add_argument("--num_epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--train_size", type=int, default=3668)
    parser.add_argument("--validation_size", type=int, default=408)
    parser.add_argument("--run_dir", default="trace")
    args = parser.parse_args()
    config = {
        "lr": 2e-5,
        "num_epochs": args.num_epochs,
        "correct_bias": True,
        "seed": 42,
        "batch_size": args.batch_size,
    }
    L.seed_everything(config["seed"])
    accumulate = max(1, args.batch_size // MAX_GPU_BATCH_SIZE)
    batch_size = min(args.batch_size, MAX_GPU_BATCH_SIZE)
    data = load_tokenized_mrpc(args.train_size, args.validation_size)
    tokenizer = Tokenizer()
    # round 2 (docs/programs.md): the same DistributedSampler as raw's (accelerate's seed 0), not Lightning's
    train = ShardedLoader(data["train"], collate_fn=tokenizer.pad, batch_size=batch_size)
    val = DataLoader(data["validation"], shuffle=False, collate_fn=tokenizer.pad, batch_size=EVAL_BATCH_SIZE)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=2,
        max_epochs=args.num_epochs,
        callbacks=[TraceCallback(args.run_dir, config=config)],  # parity
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
    )
    model = LitClassifier(lr=config["lr"], accumulate=accumulate)
    model.train_dataloader = train  # built in fit, after the process group
    trainer.fit(model, val_dataloaders=val)


if __name__ == "__main__":
    main()
