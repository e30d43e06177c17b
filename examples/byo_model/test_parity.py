"""The raw DDP loop and the Lightning script must train this CNN bitwise the same: a parity test as
it would sit in the model owner's own suite (`python -m pytest examples/byo_model/test_parity.py`)."""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SMALL = ["--epochs", "1", "--num_samples", "256", "--val_samples", "64"]  # 4 steps per rank: enough to drift


@pytest.mark.parity
def test_raw_loop_and_lightning_train_the_same(parity):
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port={port}"]
    parity(
        [*torchrun, str(HERE / "train_raw.py"), "--run_dir", "{run_dir}", *SMALL],
        [sys.executable, str(HERE / "train_lightning.py"), "--run_dir", "{run_dir}", "--devices", "2", *SMALL],
    )
