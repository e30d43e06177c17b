"""What the raw loop leaves alive when it ends (issue 39: FSDP2 ranks aborted at exit).

A thread keeps the sys.excepthook of its creation (threading's invoke_excepthook). tqdm's monitor
thread, started by the loop's first progress bar while the recorder's excepthook was installed, kept
the recorder, its module watch and the watched model alive until the interpreter ended; an FSDP2
model freed there, after destroy_process_group, aborted a rank that had finished ("terminate called
without an active exception"). The loop must leave its model to be freed before its teardown.
Fast tier: in-process, no process group, no training."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from conftest import REPO, _torchrun_prefix, check_ok, child_env, module_from_file, run_cmd
from tqdm import tqdm

from ddp_parity import TraceRecorder
from ddp_parity.hooks import recording_env
from ddp_parity.trace_files import read_records


def test_the_raw_loops_model_is_freed_when_the_loop_drops_it(tmp_path):
    if tqdm.monitor is not None:  # one started by an earlier test, before any recorder: stopped
        tqdm.monitor.exit()
        tqdm.monitor = None
    module_from_file("raw_train_teardown", REPO / "raw" / "train.py")  # the loop's own settings
    model = torch.nn.Linear(4, 2)
    recorder = TraceRecorder(tmp_path / "run", side="raw", config={}, handle_signals=False)
    recorder.start()
    recorder.watch(model)
    for _ in tqdm(range(2), disable=True):  # as every rank but a talking rank 0 makes it
        recorder.record(1, torch.tensor(1.0), [0, 1], model=model)
        break
    recorder.finish(model)
    alive = weakref.ref(model)
    del model, recorder
    gc.collect()
    assert alive() is None, [type(r).__name__ for r in gc.get_referrers(alive())]


EXIT_LOOP = REPO / "tests" / "hooks_programs" / "exit_loop.py"


@pytest.mark.slow
def test_a_recorded_program_that_never_destroys_its_group_leaves_it_together(tmp_path):
    """StyleGAN2's loop never destroys its process group. Recorded, its trace is finished at exit with a collective
    (the replica check), and a rank that left while its peer was still in it aborted the peer under gloo (SIGABRT,
    about one recorded run in ten; the frozen tool too). After that collective every rank now waits for the others
    and the group goes, which the program's own exit handler, running after the recording's, sees."""
    env = recording_env(tmp_path / "run", "exit", child_env())
    result = check_ok(run_cmd([*_torchrun_prefix(2), EXIT_LOOP], env=env))
    assert result.stdout.count("group at exit: initialized=False") == 2, result.stdout
    assert [r["step"] for r in read_records(tmp_path / "run", 1)] == [1, 2, 3]


def test_the_lightning_entry_point_frees_its_model_before_the_group_goes(tmp_path):
    """jsonargparse keeps its parser in a context variable, and the parser holds LightningCLI, its
    trainer and its model: an FSDP2 model kept past destroy_process_group is what aborts a finished rank
    at exit (a CI run: Lightning's FSDP2 resume, rank 1 SIGABRT after its last epoch). A one-process
    fit, in process, must leave no ParityModule alive behind it."""
    from conftest import lightning_in_process

    from lightning_impl.__main__ import fit_then_free
    from lightning_impl.module import ParityModule

    def alive() -> int:
        gc.collect()
        return sum(isinstance(o, ParityModule) for o in gc.get_objects())

    before = alive()
    args = ["fit", "--config", REPO / "configs" / "default.yaml", "--run_dir", tmp_path / "run"]
    args += ["--trainer.strategy", "auto", "--trainer.devices", "1", "--trainer.enable_progress_bar", "false"]
    args += ["--data.num_samples", "64", "--data.val_samples", "16", "--trainer.max_epochs", "1"]
    code, _, err = lightning_in_process(*args, main=fit_then_free)
    assert code == 0, err[-2000:]
    assert (tmp_path / "run" / "meta.json").exists()  # it trained
    assert alive() == before
