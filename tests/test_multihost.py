"""Two hosts through torchrun's c10d rendezvous, run here as two "hosts" on loopback: one torchrun
agent per host (`--nnodes=2 --nproc_per_node=1`), for the raw loop and for Lightning under torchrun
(`--trainer.num_nodes 2 --trainer.devices 1`). Each must be bitwise equal to the one-host run of
the same world size (`--nproc_per_node=2`). The commands are those of docs/multi-node.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import DEFAULT_CONFIG, REPO, child_env

from ddp_parity.compare.comparator import Criterion, compare_runs
from ddp_parity.harness.launch import Launch, free_port, run_launch

pytestmark = pytest.mark.slow

TINY = ["--trainer.max_epochs", "1", "--data.num_samples", "128", "--data.val_samples", "64"]
TIMEOUT_S = 300


def torchrun_host(port: int, rdzv_id: str) -> list[str]:
    """One host's torchrun agent: 1 worker, meeting the other host at 127.0.0.1:port."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc_per_node=1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        f"--rdzv-id={rdzv_id}",
        "--local-addr=127.0.0.1",  # the address this "host" gives the other for the workers' store
        "--max-restarts=0",
    ]


def flags(run_dir: Path, devices: int, nodes: int) -> list[str]:
    return [
        "--config",
        str(DEFAULT_CONFIG),
        "--run_dir",
        str(run_dir),
        "--trainer.devices",
        str(devices),
        "--trainer.num_nodes",
        str(nodes),
        "--trainer.enable_progress_bar",
        "false",
        *TINY,
    ]


def run(name: str, commands: list[list[str]], out: Path) -> Path:
    run_dir = out / name
    launch = Launch(name, commands, child_env(), run_dir, out / f"{name}.log", cwd=REPO)
    outcome = run_launch(launch, TIMEOUT_S, stall_seconds=240)
    logs = "\n".join(launch.log_for(n).read_text()[-3000:] for n in range(len(commands)))
    assert outcome.ok, f"{outcome.describe()}\n{logs}"
    return run_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("multihost")
    train = str(REPO / "raw" / "train.py")
    one_host = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={free_port()}"]
    runs = {"one-host": run("one-host", [[*one_host, train, *flags(out / "one-host", 2, 1)]], out)}
    port = free_port()
    runs["raw"] = run("raw", [[*torchrun_host(port, "raw"), train, *flags(out / "raw", 1, 2)] for _ in range(2)], out)
    port = free_port()
    lightning = ["-m", "lightning_impl", "fit", *flags(out / "lightning", 1, 2)]
    runs["lightning"] = run("lightning", [[*torchrun_host(port, "lightning"), *lightning] for _ in range(2)], out)
    return runs


@pytest.mark.parametrize("side", ["raw", "lightning"])
def test_two_hosts_are_bitwise_the_one_host_run(runs, side):
    result = compare_runs(runs["one-host"], runs[side], Criterion())
    report = result.to_dict()
    assert result.equivalent, json.dumps(report["first_divergence"])
    assert report["losses"]["compared"] == report["losses"]["equal"] > 0
    assert report["per_step"]["samples"]["compared"] == report["losses"]["compared"]
    assert report["validation"]["compared"] == report["validation"]["equal"] > 0
    assert result.params.compared == result.params.equal > 0
    meta = json.loads((runs[side] / "meta.json").read_text())
    # each agent starts one worker (--nproc_per_node=1): a world of 2 means the two "hosts" met
    assert meta["world_size"] == 2 and [facts["rank"] for facts in meta["ranks"]] == [0, 1]
    trainer = meta["config"]["trainer"]
    assert (int(trainer["num_nodes"]), int(trainer["devices"])) == (2, 1)  # LightningCLI keeps devices as "1"
