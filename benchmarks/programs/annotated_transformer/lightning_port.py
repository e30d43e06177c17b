"""the_annotated_transformer.py's "A Real World Example" (harvardnlp/annotated-transformer, MIT) as a LightningModule,
run by Lightning's own launcher: `python lightning_port.py`. The model (make_model), the masks (Batch), the label
smoothing, the loss (SimpleLossCompute), the Noam rate, the tokenizers, vocabularies and collate_batch are the
authors' code, imported; Lightning does the DDP wrapping, the samplers, the accumulation and the loop."""

from __future__ import annotations

import lightning as L
import standins as datasets
import torch
from standins import to_map_style_dataset
from the_annotated_transformer import (
    Batch,
    LabelSmoothing,
    SimpleLossCompute,
    collate_batch,
    load_tokenizers,
    load_vocab,
    make_model,
    rate,
    tokenize,
)
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader

CONFIG = {
    "batch_size": 8,
    "num_epochs": 3,
    "accum_iter": 2,
    "base_lr": 1.0,
    "max_padding": 16,
    "warmup": 8,
    "d_model": 32,
}
NUM_DEVICES = 2


class TransformerModule(L.LightningModule):
    def __init__(self, vocab_src, vocab_tgt, spacy_de, spacy_en, config):
        super().__init__()
        self.vocab_src, self.vocab_tgt = vocab_src, vocab_tgt
        self.spacy_de, self.spacy_en = spacy_de, spacy_en
        self.config = config
        self.pad_idx = vocab_tgt["<blank>"]
        self.model = None
        self.criterion = LabelSmoothing(size=len(vocab_tgt), padding_idx=self.pad_idx, smoothing=0.1)

    def configure_model(self):
        # built after Lightning's re-seed (DDP setup seeds every rank again): the init, then dropout, draw from
        # seed 0 in that order, as train_worker's torch.manual_seed(0) then make_model do
        if self.model is not None:
            return
        vocab_src, vocab_tgt = self.vocab_src, self.vocab_tgt
        self.model = make_model(len(vocab_src), len(vocab_tgt), N=1, d_model=self.config["d_model"], d_ff=64, h=2)
        self.loss_compute = SimpleLossCompute(self.model.generator, self.criterion)

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.model(src, tgt, src_mask, tgt_mask)

    def _step(self, batch):
        b = Batch(batch[0], batch[1], self.pad_idx)
        out = self(b.src, b.tgt, b.src_mask, b.tgt_mask)
        loss, loss_node = self.loss_compute(out, b.tgt_y, b.ntokens)
        return loss, loss_node, b.ntokens

    def training_step(self, batch, batch_idx):
        loss, loss_node, ntokens = self._step(batch)
        self.log("train_loss", loss / ntokens, prog_bar=True)
        return loss_node

    def validation_step(self, batch, batch_idx):
        loss, _, ntokens = self._step(batch)
        self.log("val_loss", loss / ntokens, sync_dist=True)

    # run_epoch steps the optimizer where `i % accum_iter == 0` (i the epoch's micro-batch index, from 0): after the
    # first micro-batch alone, then every accum_iter; zero_grad only after a step, so the epoch's last micro-batches
    # carry into the next epoch's first step. Lightning runs every micro-batch here (no accumulate_grad_batches) and
    # this hook steps at the loop's boundaries.
    def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):
        optimizer_closure()
        if batch_idx % self.config["accum_iter"] == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    def optimizer_zero_grad(self, epoch, batch_idx, optimizer):
        pass  # zero_grad after the step only (optimizer_step)

    def on_validation_model_zero_grad(self):
        pass  # the epoch's last micro-batch's gradient waits in .grad across the validation for the next step

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.config["base_lr"], betas=(0.9, 0.98), eps=1e-9)
        scheduler = LambdaLR(
            optimizer,
            lr_lambda=lambda step: rate(step, self.config["d_model"], factor=1, warmup=self.config["warmup"]),
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def _collate(self, batch):
        return collate_batch(
            batch,
            lambda text: tokenize(text, self.spacy_de),
            lambda text: tokenize(text, self.spacy_en),
            self.vocab_src,
            self.vocab_tgt,
            torch.device("cpu"),
            max_padding=self.config["max_padding"],
            pad_id=self.vocab_src.get_stoi()["<blank>"],
        )

    def _loader(self, split, shuffle):
        train, valid, _ = datasets.Multi30k(language_pair=("de", "en"))
        data = to_map_style_dataset(train if split == "train" else valid)
        batch_size = self.config["batch_size"] // NUM_DEVICES
        return DataLoader(data, batch_size=batch_size, shuffle=shuffle, collate_fn=self._collate)

    def train_dataloader(self):
        return self._loader("train", shuffle=True)

    def val_dataloader(self):
        return self._loader("valid", shuffle=False)


def main():
    L.seed_everything(0)
    spacy_de, spacy_en = load_tokenizers()
    vocab_src, vocab_tgt = load_vocab(spacy_de, spacy_en)
    module = TransformerModule(vocab_src, vocab_tgt, spacy_de, spacy_en, CONFIG)
    trainer = L.Trainer(
        strategy="ddp",
        accelerator="cpu",
        devices=NUM_DEVICES,
        max_epochs=CONFIG["num_epochs"],
        log_every_n_steps=1,
    )
    trainer.fit(module)
    if trainer.is_global_zero:
        torch.save(module.model.state_dict(), "multi30k_model_final_lightning.pt")


if __name__ == "__main__":
    main()
