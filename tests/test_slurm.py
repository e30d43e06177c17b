"""SLURM without a cluster: the sbatch scripts of ddp_parity.harness.slurm, and their task commands
run here as the processes srun would start, each with the SLURM_* variables srun would set.

Both sides must see the same world (rank, local rank, world size, node rank) and train bitwise the
same; a world that SLURM and Lightning see differently (`--ntasks` smaller than nodes x
ntasks-per-node, Lightning #20391) must come out as a `config` difference before any step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, child_env

from ddp_parity.harness.launch import Launch, free_port, run_launch
from ddp_parity.harness.slurm import (
    SlurmJob,
    lightning_script,
    lightning_task_command,
    raw_script,
    raw_task_command,
)
from ddp_parity.harness.slurm import main as slurm_main

TINY = ["--trainer.max_epochs", "1", "--data.num_samples", "128", "--data.val_samples", "64"]
TIMEOUT_S = 300
JOB_ID = "4242"


# ---------------------------------------------------------------------------------------------
# srun, faked


def srun_env(job_name: str, nodes: int, tasks_per_node: int, task: int, ntasks: int | None = None) -> dict:
    """The variables srun sets for one task of a step with nodes x tasks_per_node tasks (block
    distribution). `ntasks`: what `--ntasks` made of SLURM_NTASKS, if the user set it."""
    nodelist = f"node[0-{nodes - 1}]" if nodes > 1 else "node0"
    return {
        "SLURM_JOB_ID": JOB_ID,
        "SLURM_JOB_NAME": job_name,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_NNODES": str(nodes),
        "SLURM_NTASKS": str(ntasks if ntasks is not None else nodes * tasks_per_node),
        "SLURM_NPROCS": str(ntasks if ntasks is not None else nodes * tasks_per_node),
        "SLURM_NTASKS_PER_NODE": str(tasks_per_node),
        "SLURM_TASKS_PER_NODE": f"{tasks_per_node}(x{nodes})",
        "SLURM_PROCID": str(task),
        "SLURM_LOCALID": str(task % tasks_per_node),
        "SLURM_NODEID": str(task // tasks_per_node),
        "SLURMD_NODENAME": f"node{task // tasks_per_node}",
        "SLURM_STEP_ID": "0",
    }


def srun(command: list[str], tasks: list[dict]) -> list[list[str]]:
    """One process per task; `env VAR=VALUE ... command` gives each its own variables."""
    return [["env", *(f"{k}={v}" for k, v in task.items()), *command] for task in tasks]


def base_env(**extra: str) -> dict:
    env = {k: v for k, v in child_env().items() if not k.startswith("SLURM")}
    return {**env, **extra}


def run_tasks(side: str, commands: list[list[str]], run_dir: Path, env: dict) -> None:
    """All tasks of one side at once, under the project's watcher; every process gone afterwards."""
    launch = Launch(side, commands, env, run_dir, run_dir.parent / f"{run_dir.name}.log", cwd=REPO)
    outcome = run_launch(launch, TIMEOUT_S, stall_seconds=240)
    logs = "\n".join(launch.log_for(n).read_text()[-3000:] for n in range(len(commands)))
    assert outcome.ok, f"{outcome.describe()}\n{logs}"


def raw_side(job: SlurmJob, command: list[str], run_dir: Path) -> None:
    tasks = [srun_env("ddp-parity-raw", job.nodes, 1, node) for node in range(job.nodes)]
    run_tasks("raw", srun(command, tasks), run_dir, base_env())


def lightning_side(job: SlurmJob, command: list[str], run_dir: Path, ntasks: int | None = None) -> None:
    world = ntasks if ntasks is not None else job.nodes * job.devices
    tasks = [srun_env("ddp-parity-lightning", job.nodes, job.devices, t, ntasks) for t in range(world)]
    env = base_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))  # as lightning.sbatch exports
    run_tasks("lightning", srun(command, tasks), run_dir, env)


def raw_command(job: SlurmJob) -> list[str]:
    return raw_task_command(job, head="127.0.0.1", port=free_port(), rdzv_id=JOB_ID, local_addr="127.0.0.1")


def compare(run_a: Path, run_b: Path) -> dict:
    from ddp_parity import compare_traces

    return compare_traces(run_a, run_b)  # exact


# ---------------------------------------------------------------------------------------------
# fast: the scripts


def test_scripts_launch_torchrun_per_node_and_one_lightning_task_per_device(tmp_path):
    job = SlurmJob(nodes=2, devices=4, out=tmp_path, overrides=["--data.batch_size", "16"])
    raw, lightning = raw_script(job), lightning_script(job)
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n" in raw
    assert "srun --ntasks-per-node=1 python -m torch.distributed.run" in raw
    for flag in ("--nnodes=2", "--nproc_per_node=4", "--rdzv-backend=c10d", '--rdzv-endpoint="$head_node":29400'):
        assert flag in raw
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n" in lightning
    assert "--ntasks=" not in lightning and "gpu-bind" not in lightning.replace("--gpu-bind=closest (", "")
    assert 'if [ "$SLURM_NTASKS" != "8" ]' in lightning and "srun python -m lightning_impl fit" in lightning
    for script in (raw, lightning):
        assert "--trainer.devices 4" in script and "--trainer.num_nodes 2" in script
        assert "--data.batch_size 16" in script
        check = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert check.returncode == 0, check.stderr


def test_cli_writes_both_scripts_and_refuses_bad_input_before_writing(tmp_path, capsys):
    ok = ["--nodes", "2", "--devices", "2", "--out", str(tmp_path / "ok")]
    assert slurm_main([*ok, "--set", "data.batch_size=16"]) == 0
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == ["lightning.sbatch", "raw.sbatch"]
    assert "--data.batch_size 16" in (tmp_path / "ok" / "raw.sbatch").read_text()
    capsys.readouterr()
    assert slurm_main(ok) == 2
    assert "already holds" in capsys.readouterr().err
    for args, says in (
        (("--nodes", "0", "--devices", "2"), "--nodes must be positive"),
        (("--nodes", "1", "--devices", "2", "--set", "data.batch_size=x"), "data.batch_size"),
        (("--nodes", "1", "--devices", "2", "--set", "batch_size"), "--set 'batch_size': expected KEY=VALUE"),
        (("--nodes", "1", "--devices", "2", "--config", "nope.yaml"), "--config nope.yaml: no such file"),
    ):
        assert slurm_main([*args, "--out", str(tmp_path / "bad")]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "bad").exists()


def test_a_srun_task_records_its_local_and_node_rank(monkeypatch):
    """Lightning's SLURMEnvironment reads SLURM_LOCALID / SLURM_NODEID and exports neither LOCAL_RANK
    nor NODE_RANK: the recorded world must still say where the task stands (torchrun's wins)."""
    from ddp_parity.distributed import world_facts

    for key in ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in srun_env("job", nodes=2, tasks_per_node=2, task=3).items():
        monkeypatch.setenv(key, value)
    assert world_facts()["local_rank"] == 1 and world_facts()["node_rank"] == 1
    monkeypatch.setenv("LOCAL_RANK", "0")  # torchrun inside the allocation: its variables win
    monkeypatch.setenv("GROUP_RANK", "0")
    assert world_facts()["local_rank"] == 0 and world_facts()["node_rank"] == 0


# ---------------------------------------------------------------------------------------------
# slow: both sides under faked srun


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory) -> tuple[SlurmJob, Path]:
    """2 nodes x 1 device: the raw loop through two torchrun agents and c10d, Lightning as two srun tasks."""
    out = tmp_path_factory.mktemp("slurm")
    job = SlurmJob(nodes=2, devices=1, out=out, overrides=TINY, python=sys.executable)
    raw_side(job, raw_command(job), out / "raw")
    lightning_side(job, lightning_task_command(job), out / "lightning")
    return job, out


@pytest.mark.slow
def test_both_sides_train_bitwise_the_same_under_srun(two_nodes):
    job, out = two_nodes
    report = compare(out / "raw", out / "lightning")
    assert report["verdict"] == "equivalent", json.dumps(report["first_divergence"])
    assert report["losses"]["compared"] == report["losses"]["equal"] > 0
    assert report["params"]["compared"] == report["params"]["equal"] > 0
    metas = {side: json.loads((out / side / "meta.json").read_text()) for side in ("raw", "lightning")}
    for meta in metas.values():
        assert meta["world_size"] == 2 and [facts["rank"] for facts in meta["ranks"]] == [0, 1]
    # each rank's world as it took it (meta.ranks[r].world): torchrun's variables on the raw side, Lightning's
    # SLURMEnvironment on the other (any other environment would have spawned its own ranks: no world of 2)
    expected = [{"rank": r, "local_rank": 0, "world_size": 2, "node_rank": r} for r in (0, 1)]
    assert [facts["world"] for facts in metas["raw"]["ranks"]] == expected
    assert [facts["world"] for facts in metas["lightning"]["ranks"]] == expected
    for r, facts in enumerate(metas["lightning"]["ranks"]):
        assert facts["env"]["SLURM_PROCID"] == str(r) and facts["env"]["SLURM_NTASKS"] == "2"
        assert facts["sampler"]["num_replicas"] == 2, facts["sampler"]


@pytest.mark.slow
def test_ntasks_below_nodes_times_tasks_per_node_is_a_config_difference(tmp_path):
    """`#SBATCH --ntasks=1 --ntasks-per-node=2` (Lightning #20391): srun starts one task, Lightning
    takes SLURM_NTASKS=1 as the world but still splits the data for 2 replicas, and trains on half
    of it. Against the raw loop's world of 2 the comparison names `world_size` before any step."""
    job = SlurmJob(nodes=1, devices=2, out=tmp_path, overrides=TINY, python=sys.executable)
    raw_side(job, raw_command(job), tmp_path / "raw")
    lightning_side(job, lightning_task_command(job), tmp_path / "lightning", ntasks=1)
    meta = json.loads((tmp_path / "lightning" / "meta.json").read_text())
    assert meta["world_size"] == 1 and len(meta["ranks"]) == 1
    report = compare(tmp_path / "raw", tmp_path / "lightning")
    diagnosis = report["diagnosis"]
    assert report["verdict"] == "different"
    assert diagnosis["category"] == "config" and diagnosis["step"] is None
    assert diagnosis["evidence"]["values"]["world_size"] == [2, 1]
    assert "world_size: 2 vs 1" in diagnosis["explanation"]
    assert os.path.exists(tmp_path / "lightning" / "final.safetensors")  # it did train, silently
