"""A user's own resuming loop under real `torchrun --max-restarts=2`: a small MLP regression (not the
project's network), a snapshot after every epoch, one rank crashing mid-epoch on two attempts.

This file is also the training script: `torchrun tests/test_recorder_resume.py RUN_DIR CRASH` runs
`main()`. CRASH is `none` or `twice`: attempt 0 dies by os._exit after step 6 and attempt 1 declares
its resume with `start(resumed_from_step=...)`; attempt 1 raises after step 10 and attempt 2 just calls
`start()`, the recorder finding the earlier attempts' steps on disk. Both ways of resuming, and a
resume of a resumed run, in one run.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import ddp_parity
from ddp_parity import TraceRecorder

EPOCHS, SAMPLES, BATCH = 3, 64, 8  # 2 ranks: 4 steps per epoch, 12 in all
CRASH_RANK = 1
# attempt -> (the step after which rank 1 crashes, how): mid-epoch 1 (the snapshot holds step 4), then
# mid-epoch 2 (the snapshot holds step 8)
CRASHES = {0: (6, "exit"), 1: (10, "raise")}


class Regression(Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(SAMPLES, 5, generator=g)
        self.y = self.x @ torch.randn(5, 1, generator=g) + 0.1 * torch.randn(SAMPLES, 1, generator=g)

    def __len__(self):
        return SAMPLES

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.y[i], "index": torch.tensor(i)}


def main(run_dir: Path, crash: str) -> None:
    torch.set_num_threads(1)
    ddp_parity.init_process_group("gloo")  # a fresh key space per torchrun attempt
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sampler = DistributedSampler(Regression(), num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(sampler.dataset, batch_size=BATCH, sampler=sampler)

    snapshot, epochs_done, step = run_dir / "snapshot.pt", 0, 0
    if snapshot.exists():
        state = torch.load(snapshot, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        epochs_done, step = state["epochs_done"], state["step"]
    trace = run_dir / "trace" / f"rank{rank}.jsonl"
    if attempt and trace.exists():  # for the test: what the crashed attempt left on disk
        shutil.copy(trace, run_dir / f"left-by-attempt{attempt - 1}-rank{rank}.jsonl")

    recorder = TraceRecorder(run_dir, side="mlp", config={"epochs": EPOCHS, "lr": 0.05})
    if attempt == 1:  # declared; attempt 2 leaves it to the recorder
        recorder.start(resumed_from_step=step)
    else:
        recorder.start()
    crash_step, how = CRASHES.get(attempt, (None, None)) if crash == "twice" else (None, None)
    for epoch in range(epochs_done, EPOCHS):
        sampler.set_epoch(epoch)
        for batch in loader:
            loss = torch.nn.functional.mse_loss(ddp_model(batch["x"]), batch["y"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # the norm before clipping
            optimizer.step()
            step += 1
            recorder.record(
                step,
                loss,
                batch["index"],
                epoch=epoch,
                grad_norm=grad_norm,
                batch=batch,
                optimizer=optimizer,
                model=model,
            )
            if rank == CRASH_RANK and step == crash_step:
                if how == "exit":
                    os._exit(1)
                raise RuntimeError(f"injected crash after step {step}")
        if rank == 0:
            tmp = snapshot.with_suffix(".tmp")
            torch.save(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "epochs_done": epoch + 1,
                    "step": step,
                },
                tmp,
            )
            os.replace(tmp, snapshot)
        dist.barrier()
    recorder.finish(model)
    del ddp_model
    ddp_parity.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# the tests

STEPS = list(range(1, EPOCHS * SAMPLES // (2 * BATCH) + 1))


def launch(tmp_path_factory, crash: str) -> Path:
    from conftest import check_ok, run_cmd

    from ddp_parity.harness.launch import free_port, torchrun_args

    run_dir = tmp_path_factory.mktemp(f"mlp-{crash}")
    cmd = torchrun_args(2, free_port(), max_restarts=2) + [__file__, str(run_dir), crash]
    check_ok(run_cmd(cmd, log=run_dir.parent / f"mlp-{crash}.log"))
    return run_dir


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    return launch(tmp_path_factory, "none")


@pytest.mark.slow
def test_a_loop_crashed_and_resumed_twice_records_every_step_once(tmp_path_factory, uninterrupted):
    from ddp_parity.trace import read_meta, read_records

    run_dir = launch(tmp_path_factory, "twice")
    meta = read_meta(run_dir)
    assert [(a["attempt"], a["start_step"]) for a in meta["attempts"]] == [(0, 0), (1, 4), (2, 8)]
    assert [a["torchelastic_restart_count"] for a in meta["attempts"]] == [0, 1, 2]
    assert meta["resumed_from_step"] == 8 and meta["finished"] is True and meta["replicas_identical"] is True
    assert meta["optimizer"]["class"] == "SGD" and meta["optimizer"]["param_groups"][0]["momentum"] == 0.9
    for rank in (0, 1):
        records = read_records(run_dir, rank)
        assert [r["step"] for r in records] == STEPS, f"rank {rank}: every step exactly once"
        assert [r["attempt"] for r in records] == [0] * 4 + [1] * 4 + [2] * 4
        # the resumed run trains on what the uninterrupted one did, bit for bit
        reference = read_records(uninterrupted, rank)
        for key in ("loss", "grad_norm", "lr", "param_digest", "indices", "batch_digest"):
            assert [r[key] for r in records] == [r[key] for r in reference], f"rank {rank}: {key}"
        # each crash lost at most the step in flight: what the attempt left on disk
        for attempt, (crash_step, _) in CRASHES.items():
            left = [r["step"] for r in read_records_file(run_dir / f"left-by-attempt{attempt}-rank{rank}.jsonl")]
            if rank == CRASH_RANK:
                assert left == list(range(1, crash_step + 1)), (attempt, left)  # it recorded the step, then died
            else:
                assert left == list(range(1, len(left) + 1)) and len(left) >= crash_step - 1, (attempt, left)
    # the exception (attempt 1) left rank 1's error file; os._exit (attempt 0) could not (rank 0 may have
    # one too: the collective its peer left failed)
    assert "rank1.json" in [p.name for p in (run_dir / "errors").glob("*.json")]
    error = json.loads((run_dir / "errors" / "rank1.json").read_text())
    assert error["message"] == "injected crash after step 10" and error["step"] == 10


def read_records_file(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
