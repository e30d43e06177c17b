"""Wrong resumes in a user's own loop, on real runs: a `Trainer` class in the style of the DDP
tutorial series' multigpu_torchrun.py (a snapshot after every epoch, resumed under torchrun),
instrumented with TraceRecorder the documented way, crashed once after epoch 0 and restarted by
`torchrun --max-restarts=1` with the same command, then compared with an uninterrupted run.

This file is also the training script: `torchrun tests/test_resume_real.py RUN_DIR VARIANT`, VARIANT
one of (the snapshot's content and what is loaded from it):
- `off-by-one`: the tutorial's resume: the snapshot holds the index of the epoch just finished
  (`EPOCHS_RUN = epoch`) and the loop restarts at that index, so that epoch is trained twice; the
  optimizer state is not saved.
- `tutorial`: the same, and the snapshot holds no step either (only the model and EPOCHS_RUN): the
  loop counts its steps from EPOCHS_RUN, so after epoch 0 it resumes "at step 0".
- `lost-optimizer`: the epochs done are right, the scheduler and RNG are saved, Adam's state is not.
- `fixed`: epochs done, optimizer, scheduler and RNG states saved and loaded.
The crash fires when RESUME_CRASH_MARKER names a file that does not exist yet (it is created first).
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import ddp_parity
from ddp_parity import TraceRecorder

EPOCHS, SAMPLES, BATCH = 3, 64, 8  # 2 ranks: 4 steps per epoch, 12 in all
CRASH_RANK, CRASH_STEP = 1, 5  # the first step of epoch 1; the snapshot holds epoch 0 (step 4)
VARIANTS = ("off-by-one", "tutorial", "lost-optimizer", "fixed")
CRASH_ENV = "RESUME_CRASH_MARKER"


class Curve(Dataset):
    """y = sin(x . w): a regression a small network learns (the loss falls from the first epoch)."""

    def __init__(self):
        g = torch.Generator().manual_seed(7)
        self.x = torch.randn(SAMPLES, 6, generator=g)
        self.y = torch.sin(self.x @ torch.randn(6, 1, generator=g))

    def __len__(self):
        return SAMPLES

    def __getitem__(self, i):
        return self.x[i], self.y[i], i


def build_model() -> torch.nn.Module:
    # dropout: the resumed run's random stream matters, so a resume must restore it
    return torch.nn.Sequential(torch.nn.Linear(6, 24), torch.nn.GELU(), torch.nn.Dropout(0.1), torch.nn.Linear(24, 1))


class Trainer:
    def __init__(self, run_dir: Path, variant: str):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.variant, self.snapshot_path = variant, run_dir / "snapshot.pt"
        torch.manual_seed(0)
        self.module = build_model()
        self.model = DDP(self.module)
        self.optimizer = torch.optim.Adam(self.module.parameters(), lr=0.01)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=2, gamma=0.5)
        self.sampler = DistributedSampler(Curve(), num_replicas=self.world, rank=self.rank, shuffle=True, seed=0)
        self.loader = DataLoader(self.sampler.dataset, batch_size=BATCH, sampler=self.sampler)
        self.epochs_run, self.step = 0, 0
        resumed = self.snapshot_path.exists()
        if resumed:
            self._load_snapshot()
        config = {"lr": 0.01, "epochs": EPOCHS, "batch": BATCH, "snapshot": str(self.snapshot_path), "variant": variant}
        self.recorder = TraceRecorder(run_dir, side=f"trainer-{variant}", config=config)
        self.recorder.start(resumed_from_step=self.step if resumed else None)  # the documented resume pattern

    def _load_snapshot(self) -> None:
        snapshot = torch.load(self.snapshot_path, weights_only=True)
        self.module.load_state_dict(snapshot["MODEL_STATE"])
        self.epochs_run = snapshot["EPOCHS_RUN"]
        # the tutorial's snapshot has no step: the steps follow from the epochs run
        self.step = snapshot.get("STEP", self.epochs_run * len(self.loader))
        if "OPTIMIZER" in snapshot:
            self.optimizer.load_state_dict(snapshot["OPTIMIZER"])
        if "SCHEDULER" in snapshot:
            self.scheduler.load_state_dict(snapshot["SCHEDULER"])
        if "RNG" in snapshot:
            torch.set_rng_state(snapshot["RNG"][self.rank])

    def _save_snapshot(self, epoch: int) -> None:
        rng = [torch.empty(0, dtype=torch.uint8) for _ in range(self.world)]
        dist.all_gather_object(rng, torch.get_rng_state())  # every rank's stream, saved by rank 0
        if self.rank == 0:
            snapshot = {"MODEL_STATE": self.module.state_dict()}
            if self.variant != "tutorial":
                snapshot["STEP"] = self.step
            if self.variant in ("off-by-one", "tutorial"):
                snapshot["EPOCHS_RUN"] = epoch  # the tutorial: the index of the epoch just finished
            else:
                snapshot["EPOCHS_RUN"] = epoch + 1  # epochs done
                snapshot["SCHEDULER"], snapshot["RNG"] = self.scheduler.state_dict(), rng
            if self.variant == "fixed":
                snapshot["OPTIMIZER"] = self.optimizer.state_dict()
            tmp = self.snapshot_path.with_suffix(".tmp")
            torch.save(snapshot, tmp)
            os.replace(tmp, self.snapshot_path)
        dist.barrier()  # nobody crashes (or resumes) before the snapshot is on disk

    def _run_batch(self, x, y, indices, epoch: int) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in self.module.parameters()])
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.step += 1
        self.recorder.record(
            self.step, loss, indices, epoch=epoch, lr=lr, grad_norm=grad_norm, optimizer=self.optimizer,
            model=self.module,
        )  # fmt: skip
        maybe_crash(self.step, self.rank)

    def train(self) -> None:
        for epoch in range(self.epochs_run, EPOCHS):
            self.sampler.set_epoch(epoch)
            for x, y, indices in self.loader:
                self._run_batch(x, y, indices, epoch)
            self.scheduler.step()
            self._save_snapshot(epoch)
        self.recorder.finish(self.module)


def maybe_crash(step: int, rank: int) -> None:
    marker = os.environ.get(CRASH_ENV)
    if marker and rank == CRASH_RANK and step == CRASH_STEP and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)  # a dead worker: torchrun restarts every worker with the same command


def main(run_dir: Path, variant: str) -> None:
    torch.set_num_threads(1)
    ddp_parity.init_process_group("gloo")  # a fresh key space per torchrun attempt
    Trainer(run_dir, variant).train()
    ddp_parity.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# the tests

RUN_CONTROL = ["snapshot", "variant"]  # in the config, different between the runs by design


def launch(root: Path, name: str, variant: str, crash: bool) -> Path:
    from conftest import check_ok, run_cmd

    from ddp_parity.harness.launch import free_port, torchrun_args

    run_dir = root / name
    run_dir.mkdir()
    env = {CRASH_ENV: str(root / f"{name}.crashed")} if crash else None
    cmd = torchrun_args(2, free_port(), max_restarts=1) + [__file__, str(run_dir), variant]
    check_ok(run_cmd(cmd, env=env, log=root / f"{name}.log"))
    if crash:
        assert (root / f"{name}.crashed").exists(), f"{name}: the crash never fired, the resume was not tested"
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The uninterrupted run and the three crashed-and-resumed ones, launched side by side."""
    root = tmp_path_factory.mktemp("trainer")
    jobs = [("uninterrupted", "fixed", False)] + [(v, v, True) for v in VARIANTS]
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {name: pool.submit(launch, root, name, variant, crash) for name, variant, crash in jobs}
        return {name: future.result() for name, future in futures.items()}


def report_against_uninterrupted(runs, variant: str) -> dict:
    from ddp_parity.compare.diagnosis import format_diagnosis
    from ddp_parity.compare.findings import Finding
    from ddp_parity.compare.pipeline import compare_traces

    report = compare_traces(runs["uninterrupted"], runs[variant], ignore_config=RUN_CONTROL)
    print(f"{variant}: {report['verdict']}\n{format_diagnosis(Finding.from_json(report['diagnosis']))}")
    return report


@pytest.mark.slow
def test_every_resumed_run_crashed_once_and_resumed_after_epoch_0(runs):
    from ddp_parity.trace import read_meta

    for variant in VARIANTS:
        meta = read_meta(runs[variant])
        at = 0 if variant == "tutorial" else 4  # the tutorial's EPOCHS_RUN = 0 after epoch 0: 0 steps
        assert [(a["attempt"], a["start_step"]) for a in meta["attempts"]] == [(0, 0), (1, at)], variant
        assert meta["resumed_from_step"] == at and meta["finished"] is True, variant
    losses = [r["loss"] for r in read_records_of(runs["uninterrupted"], 0)]
    assert losses[-1] < losses[0] and len(set(losses)) == len(losses), "the loss must be learnable"


@pytest.mark.slow
def test_the_off_by_one_resume_is_named_with_the_replayed_epoch(runs):
    report = report_against_uninterrupted(runs, "off-by-one")
    d = report["diagnosis"]
    assert report["verdict"] == "different" and d["category"] == "resume", d
    assert (d["step"], d["evidence"]["resumed_from_step"]) == (5, 4), d
    assert (d["evidence"]["matches_step"], d["evidence"]["matches_epoch"]) == (1, 0), d
    assert "epoch 0 again" in d["explanation"] and "epochs *done*" in d["advice"], d


@pytest.mark.slow
def test_the_tutorials_own_resume_is_named(runs):
    """The tutorial's snapshot has no step: the loop counts EPOCHS_RUN * steps per epoch = 0 and
    declares a resume from step 0, so every step of the trace after the restart is the resumed attempt's."""
    report = report_against_uninterrupted(runs, "tutorial")
    d = report["diagnosis"]
    assert report["verdict"] == "different" and d["category"] == "resume", d
    assert (d["step"], d["evidence"]["resumed_from_step"], d["evidence"]["quantity"]) == (1, 0, "loss"), d
    assert "restarted" in d["explanation"] and "trains that epoch again" in d["explanation"], d
    assert "epochs and steps *done*" in d["advice"], d


@pytest.mark.slow
def test_the_lost_optimizer_state_is_named_at_the_first_step_after_the_resume(runs):
    report = report_against_uninterrupted(runs, "lost-optimizer")
    d = report["diagnosis"]
    assert report["verdict"] == "different" and d["category"] == "resume", d
    assert (d["step"], d["evidence"]["quantity"]) == (5, "param_digest"), d
    assert "optimizer.state_dict()" in d["advice"], d


@pytest.mark.slow
def test_the_fixed_resume_is_equivalent_bit_for_bit(runs):
    report = report_against_uninterrupted(runs, "fixed")
    assert report["verdict"] == "equivalent" and report["diagnosis"]["category"] == "equivalent", report["diagnosis"]
    assert report["warnings"] == [], report["warnings"]
    assert report["losses"]["equal"] == report["losses"]["compared"] == 2 * EPOCHS * SAMPLES // (2 * BATCH)


def zero_loss_run(run_dir: Path) -> None:
    """The tutorial's own loss as written: cross_entropy over a single output column is log(1) = 0
    for every sample (-0.0), so every gradient is zero and nothing trains. One process, no DDP."""
    torch.manual_seed(0)
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Curve(), batch_size=BATCH, shuffle=False)
    recorder = TraceRecorder(run_dir, side=run_dir.name, config={"lr": 0.1})
    recorder.start()
    for step, (x, y, indices) in enumerate(loader, start=1):
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)  # (B, 1) logits: one class, loss 0
        loss.backward()
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
        optimizer.step()
        recorder.record(step, loss, indices, epoch=0, lr=0.1, grad_norm=grad_norm, model=model)
    recorder.finish(model)


def test_a_loop_that_learns_nothing_is_equivalent_with_a_no_learning_warning(tmp_path):
    from ddp_parity.compare.findings import Report
    from ddp_parity.compare.pipeline import compare_traces
    from ddp_parity.compare.report import format_summary

    for name in ("first", "second"):
        zero_loss_run(tmp_path / name)
    report = compare_traces(tmp_path / "first", tmp_path / "second")
    assert report["verdict"] == "equivalent" and report["diagnosis"]["category"] == "equivalent"
    kinds = [w["kind"] for w in report["warnings"]]
    assert kinds == ["no_learning", "no_learning"], report["warnings"]  # one per side
    assert "every recorded gradient norm is zero" in report["warnings"][0]["message"]
    summary = format_summary(Report.from_json(report))
    assert "verdict: EQUIVALENT" in summary and "WARNING no_learning: first:" in summary, summary


def read_records_of(run_dir: Path, rank: int) -> list[dict]:
    from ddp_parity.trace import read_records

    return read_records(run_dir, rank)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
