# Source: huggingface/accelerate, examples/nlp_example.py (Apache License 2.0; header below).
# The loop as written (the 2021 version: `if step % gradient_accumulation_steps == 0`). What it imports from
# accelerate, transformers and datasets is stood in for by standins.py (plain torch, no download); `--run_dir`
# and the lines marked `# parity` are the ddp-parity instrumentation, as docs/plugin.md says.
#
# coding=utf-8
# Copyright 2021 The HuggingFace Inc. team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
import argparse

import torch
from standins import (
    Accelerator,
    AccuracyMetric,
    AutoModelForSequenceClassification,
    DistributedType,
    Tokenizer,
    get_linear_schedule_with_warmup,
    load_tokenized_mrpc,
    set_seed,
)
from torch.utils.data import DataLoader

from ddp_parity import TraceRecorder, destroy_process_group  # parity

########################################################################
# This is a fully working simple example to use Accelerate
#
# This example train a Bert base model on GLUE MRPC
# in any of the following settings (with the same script):
#   - single CPU or single GPU
#   - multi GPUS (using PyTorch distributed mode)
#   - (multi) TPUs
#   - fp16 (mixed-precision) or fp32 (normal precision)
#
# To run it in each of these various modes, follow the instructions
# in the readme for examples:
# https://github.com/huggingface/accelerate/tree/main/examples
#
########################################################################


MAX_GPU_BATCH_SIZE = 16
EVAL_BATCH_SIZE = 32


def training_function(config, args):
    # Initialize accelerator
    accelerator = Accelerator(fp16=args.fp16, cpu=args.cpu)
    recorder = TraceRecorder(args.run_dir, side="raw", config=config)  # parity
    recorder.start()  # parity

    # Sample hyper-parameters for learning rate, batch size, seed and a few other HPs
    lr = config["lr"]
    num_epochs = int(config["num_epochs"])
    seed = int(config["seed"])
    batch_size = int(config["batch_size"])

    tokenizer = Tokenizer()
    tokenized_datasets = load_tokenized_mrpc(args.train_size, args.validation_size)
    metric = AccuracyMetric()

    # If the batch size is too big we use gradient accumulation
    gradient_accumulation_steps = 1
    if batch_size > MAX_GPU_BATCH_SIZE:
        gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
        batch_size = MAX_GPU_BATCH_SIZE

    def collate_fn(examples):
        # On TPU it's best to pad everything to the same length or training will be very slow.
        if accelerator.distributed_type == DistributedType.TPU:
            return tokenizer.pad(examples, padding="max_length", max_length=128, return_tensors="pt")
        return tokenizer.pad(examples, padding="longest", return_tensors="pt")

    # Instantiate dataloaders.
    train_dataloader = DataLoader(
        tokenized_datasets["train"], shuffle=True, collate_fn=collate_fn, batch_size=batch_size
    )
    eval_dataloader = DataLoader(
        tokenized_datasets["validation"], shuffle=False, collate_fn=collate_fn, batch_size=EVAL_BATCH_SIZE
    )

    set_seed(seed)

    # Instantiate the model (we build the model here so that the seed also control new weights initialization)
    model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased", return_dict=True)

    # We could avoid this line since the accelerator is set with `device_placement=True` (default value).
    # Note that if you are placing tensors on devices manually, this line absolutely needs to be before the optimizer
    # creation otherwise training will not work on TPU (`accelerate` will kindly throw an error to make us aware of
    # that).
    model = model.to(accelerator.device)

    # Instantiate optimizer
    optimizer = torch.optim.AdamW(params=model.parameters(), lr=lr)

    # Prepare everything
    # There is no specific order to remember, we just need to unpack the objects in the same order we gave them to the
    # prepare method.
    model, optimizer, train_dataloader, eval_dataloader = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader
    )
    recorder.watch(model.module)  # parity: the module watch (round 4: what the diagnosis asked for)

    # Instantiate learning rate scheduler after preparing the training dataloader as the prepare method
    # may change its length.
    lr_scheduler = get_linear_schedule_with_warmup(
        optimizer=optimizer,
        num_warmup_steps=100,
        num_training_steps=len(train_dataloader) * num_epochs,
    )

    optimizer_steps, micro_losses, micro_batches = 0, [], []  # parity
    # Now we train the model - We prune bad trials after each epoch if needed
    for epoch in range(num_epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            # We could avoid this line since we set the accelerator with `device_placement=True`.
            batch.to(accelerator.device)
            outputs = model(**batch)
            loss = outputs.loss
            loss = loss / gradient_accumulation_steps
            accelerator.backward(loss)
            micro_losses, micro_batches = [*micro_losses, loss.detach()], [*micro_batches, batch]  # parity
            if step % gradient_accumulation_steps == 0:
                grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]  # parity
                grad_norm = torch.nn.utils.get_total_norm(grads)  # parity
                optimizer.step()
                optimizer_steps += 1  # parity
                recorder.record(
                    optimizer_steps,
                    sum(micro_losses),
                    epoch=epoch,
                    grad_norm=grad_norm,
                    batch=micro_batches,
                    micro_batches=len(micro_batches),
                    optimizer=optimizer,
                    model=model.module,
                )  # parity
                micro_losses, micro_batches = [], []  # parity
                lr_scheduler.step()
                optimizer.zero_grad()

        model.eval()
        for step, batch in enumerate(eval_dataloader):  # noqa: B007 (as written)
            # We could avoid this line since we set the accelerator with `device_placement=True`.
            batch.to(accelerator.device)
            outputs = model(**batch)
            predictions = outputs.logits.argmax(dim=-1)
            metric.add_batch(
                predictions=accelerator.gather(predictions),
                references=accelerator.gather(batch["labels"]),
            )

        eval_metric = metric.compute()
        # Use accelerator.print to print only on the main process.
        accelerator.print(f"epoch {epoch}:", eval_metric)
        recorder.record_validation(epoch, optimizer_steps, eval_metric)  # parity
    recorder.finish(model)  # parity
    del model  # teardown, not recording: the DDP wrapper dropped before destroy_process_group (docs/plugin.md)
    destroy_process_group()  # parity


def main():
    parser = argparse.ArgumentParser(description="Simple example of training script.")
    parser.add_argument(
        "--fp16",
        action="store_true",
        help="If passed, will use FP16 training.",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="If passed, will train on the CPU.",
    )
    parser.add_argument("--num_epochs", type=int, default=3)  # the corpus's tiny config
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--train_size", type=int, default=3668)  # GLUE MRPC's
    parser.add_argument("--validation_size", type=int, default=408)
    parser.add_argument("--run_dir", default="trace")  # parity
    args = parser.parse_args()
    config = {
        "lr": 2e-5,
        "num_epochs": args.num_epochs,
        "correct_bias": True,
        "seed": 42,
        "batch_size": args.batch_size,
    }
    training_function(config, args)


if __name__ == "__main__":
    main()
