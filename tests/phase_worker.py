"""A tiny training process for the liveness tests, recording through the public TraceRecorder:

python tests/phase_worker.py busy RUN_DIR SECONDS   # 2 steps, then a validation and a checkpoint
                                                    # each SECONDS long (computing), then finish
python tests/phase_worker.py hang RUN_DIR SECONDS   # 2 steps, then waits forever (as in a collective)
"""

from __future__ import annotations

import io
import sys
import threading
import time

import torch

from ddp_parity import TraceRecorder


def compute_for(seconds: float, recorder: TraceRecorder, phase: str) -> None:
    """Work the way a long phase does: the training thread computes and nothing else moves."""
    recorder.set_phase(phase)
    model = torch.nn.Linear(256, 256)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if phase == "checkpoint":
            torch.save(model.state_dict(), io.BytesIO())
        else:
            with torch.no_grad():
                model(torch.ones(64, 256))


def main(mode: str, run_dir: str, seconds: float) -> None:
    torch.set_num_threads(1)
    model = torch.nn.Linear(4, 2)
    recorder = TraceRecorder(run_dir, side=f"phases-{mode}", config={"mode": mode})
    recorder.total_steps = 2
    recorder.start()
    for step in (1, 2):
        recorder.record(step, torch.tensor(1.0 / step), [step], epoch=0)
    if mode == "hang":
        threading.Event().wait()
    compute_for(seconds, recorder, "validation")
    compute_for(seconds, recorder, "checkpoint")
    recorder.finish(model)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]))
