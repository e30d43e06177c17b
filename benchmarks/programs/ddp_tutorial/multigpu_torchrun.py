# Source: pytorch/examples, distributed/ddp-tutorial-series/multigpu_torchrun.py (BSD 3-Clause License,
# Copyright (c) 2017, Pytorch contributors; see LICENSE.pytorch-examples).
# The loop as written. Changed for CPU: gloo instead of nccl, the device is "cpu" where the tutorial moves to
# LOCAL_RANK's GPU; and one seed (torch.manual_seed) where the tutorial sets none, so that a run repeats itself.
# Instrumented for ddp-parity only as docs/plugin.md says: the lines marked `# parity`.
import os

import torch
from datautils import MyTrainDataset
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

# parity, as written: from torch.distributed import destroy_process_group
from ddp_parity import TraceRecorder, destroy_process_group  # parity


def ddp_setup():
    init_process_group(backend="gloo")


class Trainer:
    def __init__(
        self,
        model: torch.nn.Module,
        train_data: DataLoader,
        optimizer: torch.optim.Optimizer,
        save_every: int,
        snapshot_path: str,
        recorder: TraceRecorder,  # parity
    ) -> None:
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model.to("cpu")
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.epochs_run = 0
        if os.path.exists(snapshot_path):
            print("Loading snapshot")
            self._load_snapshot(snapshot_path)

        self.model = DDP(self.model)
        self.recorder, self.step, self.epoch = recorder, 0, 0  # parity

    def _load_snapshot(self, snapshot_path):
        snapshot = torch.load(snapshot_path)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        print(f"Resuming training from snapshot at Epoch {self.epochs_run}")

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = torch.nn.CrossEntropyLoss()(output, targets)
        loss.backward()
        grads = [p.grad for group in self.optimizer.param_groups for p in group["params"]]  # parity
        grad_norm = torch.nn.utils.get_total_norm(grads)  # parity
        self.optimizer.step()
        self.step += 1  # parity
        self.recorder.record(
            self.step,
            loss,
            epoch=self.epoch,
            grad_norm=grad_norm,
            batch=(source, targets),
            optimizer=self.optimizer,
            model=self.model.module,
        )  # parity

    def _run_epoch(self, epoch):
        self.epoch = epoch  # parity
        b_sz = len(next(iter(self.train_data))[0])
        print(f"[GPU{self.gpu_id}] Epoch {epoch} | Batchsize: {b_sz} | Steps: {len(self.train_data)}")
        self.train_data.sampler.set_epoch(epoch)  # round 2 (docs/programs.md): the fix the tool named, on raw
        for source, targets in self.train_data:
            source = source.to("cpu")
            targets = targets.to("cpu")
            self._run_batch(source, targets)

    def _save_snapshot(self, epoch):
        snapshot = {}
        snapshot["MODEL_STATE"] = self.model.module.state_dict()
        snapshot["EPOCHS_RUN"] = epoch
        torch.save(snapshot, "snapshot.pt")
        print(f"Epoch {epoch} | Training snapshot saved at snapshot.pt")

    def train(self, max_epochs: int):
        for epoch in range(self.epochs_run, max_epochs):
            self._run_epoch(epoch)
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs():
    train_set = MyTrainDataset(2048)  # load your dataset
    model = torch.nn.Linear(20, 1)  # load your model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int):
    return DataLoader(
        dataset, batch_size=batch_size, pin_memory=True, shuffle=False, sampler=DistributedSampler(dataset)
    )


def main(save_every: int, total_epochs: int, batch_size: int, snapshot_path: str = "snapshot.pt", run_dir="trace"):
    torch.manual_seed(0)
    ddp_setup()
    config = {"total_epochs": total_epochs, "save_every": save_every, "batch_size": batch_size}  # parity
    recorder = TraceRecorder(run_dir, side="raw", config=config)  # parity
    recorder.start()  # parity
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    # parity, as written: trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path)
    trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path, recorder)  # parity
    trainer.train(total_epochs)
    recorder.finish(model)  # parity
    del trainer  # teardown, not recording: the DDP wrapper dropped before destroy_process_group (docs/plugin.md)
    destroy_process_group()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int, help="Input batch size on each device (default: 32)")
    parser.add_argument("--run_dir", default="trace", help="where the trace goes")  # parity
    args = parser.parse_args()

    # parity, as written: main(args.save_every, args.total_epochs, args.batch_size)
    main(args.save_every, args.total_epochs, args.batch_size, run_dir=args.run_dir)  # parity
