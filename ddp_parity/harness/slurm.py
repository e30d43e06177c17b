"""sbatch scripts for a parity check on a SLURM cluster: both implementations, N nodes x D devices.

    python -m ddp_parity.harness.slurm --nodes 2 --devices 4 --out runs/slurm-check
    sbatch runs/slurm-check/raw.sbatch; sbatch runs/slurm-check/lightning.sbatch
    python compare/run.py --traces runs/slurm-check/raw runs/slurm-check/lightning

The raw loop: `srun` starts one torchrun agent per node; the agents meet through torchrun's c10d
rendezvous on the first node and start D workers each. The Lightning side: `srun` starts one task
per device (`--ntasks-per-node=D`) and Lightning's SLURMEnvironment takes rank, local rank, node
rank and world size from SLURM_PROCID / SLURM_LOCALID / SLURM_NODEID / SLURM_NTASKS. A world that
SLURM and Lightning see differently (e.g. `--ntasks` smaller than nodes x ntasks-per-node, Lightning
#20391) shows up in the comparison as a `config` difference on `world_size` before any step.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ddp_parity.harness.launch import RAW_SCRIPT, REPO
from ddp_parity.harness.outdir import check_not_in_checkout
from ddp_parity.harness.program import harness_command

RDZV_PORT = 29400  # torchrun's c10d rendezvous store on the first node (torchrun's own default)
MASTER_PORT = 29500  # the Lightning side's process group store on the first node
# The script's own variables, as placeholders no user value can contain (values holding NUL are
# refused): shell_word writes them as "$name"; everything else is quoted inert with shlex.quote.
HEAD_NODE = "\0head_node\0"  # the first host of the allocation, resolved in the script
JOB_ID = "\0SLURM_JOB_ID\0"
SCRIPT_VARIABLES = {HEAD_NODE: '"$head_node"', JOB_ID: '"$SLURM_JOB_ID"'}
NOT_IN_A_LINE = {"\n": "a newline", "\r": "a carriage return", "\0": "a NUL byte"}
EXIT_USAGE = 2
PROG = "python -m ddp_parity.harness.slurm"  # its name run as a module; the harness passes `ddp-parity slurm`


@dataclass
class SlurmJob:
    """What both scripts share: the allocation shape, the config, where the runs go."""

    nodes: int
    devices: int
    out: Path
    config: str = str(REPO / "configs" / "default.yaml")
    overrides: list[str] = field(default_factory=list)  # flags both sides get, e.g. ["--data.batch_size", "16"]
    repo: Path = REPO  # the checkout on the cluster's shared filesystem
    python: str = "python"
    threads: int = 1  # CPU threads per process (the config's `threads:`)
    time: str = "00:30:00"
    sbatch_options: list[str] = field(default_factory=list)  # e.g. ["--partition=gpu", "--account=me"]
    setup: list[str] = field(default_factory=list)  # shell lines before srun: module load, venv activation

    def run_flags(self, side: str) -> list[str]:
        """The flags each side's training command takes (both read the same config)."""
        return [
            "--config",
            str(self.config),
            "--run_dir",
            str(self.out / side),
            "--trainer.devices",
            str(self.devices),
            "--trainer.num_nodes",
            str(self.nodes),
            "--trainer.enable_progress_bar",
            "false",
            *self.overrides,
        ]


def raw_task_command(
    job: SlurmJob, head: str = HEAD_NODE, port: int = RDZV_PORT, rdzv_id: str = JOB_ID, local_addr: str | None = None
) -> list[str]:
    """What each node's srun task runs: a torchrun agent joining the c10d rendezvous on `head`.
    `local_addr`: the address this agent advertises to the others (default: its host name)."""
    return [
        job.python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={job.nodes}",
        f"--nproc_per_node={job.devices}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={head}:{port}",
        f"--rdzv-id={rdzv_id}",
        *([f"--local-addr={local_addr}"] if local_addr else []),
        "--max-restarts=0",
        str(job.repo / RAW_SCRIPT),
        *job.run_flags("raw"),
    ]


def lightning_task_command(job: SlurmJob) -> list[str]:
    """What each of the nodes x devices srun tasks runs: one Lightning rank (SLURMEnvironment)."""
    return [job.python, "-m", "lightning_impl", "fit", *job.run_flags("lightning")]


def check_one_line(option: str, value: str) -> None:
    """A value written into a script is one line: a newline would start a command of its own."""
    for char, name in NOT_IN_A_LINE.items():
        if char in str(value):
            raise ValueError(f"{option} {str(value)!r}: contains {name}; a value in a script must be one line")


def shell_word(arg: str) -> str:
    """One argument for bash, inert whatever it holds ($(...), backticks, ;, quotes, spaces, globs):
    shlex.quote around every piece, only the script's own variables (HEAD_NODE, JOB_ID) expanded."""
    check_one_line("argument", arg.replace(HEAD_NODE, "").replace(JOB_ID, ""))
    pieces = [arg]
    for placeholder in SCRIPT_VARIABLES:
        pieces = [part for piece in pieces for part in _split_keeping(piece, placeholder)]
    return "".join(SCRIPT_VARIABLES.get(piece) or shlex.quote(piece) for piece in pieces if piece)


def _split_keeping(text: str, separator: str) -> list[str]:
    parts = text.split(separator)
    return [item for i, part in enumerate(parts) for item in ((separator, part) if i else (part,))]


def sbatch_header(job: SlurmJob, side: str, ntasks_per_node: int, cpus_per_task: int) -> list[str]:
    for line in job.setup:
        check_one_line("--setup", line)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=ddp-parity-{side}",
        f"#SBATCH --nodes={job.nodes}",
        f"#SBATCH --ntasks-per-node={ntasks_per_node}",
        f"#SBATCH --cpus-per-task={cpus_per_task}",
        f"#SBATCH --time={shell_word(job.time)}",
        f"#SBATCH --output={shell_word(f'{job.out / side}-%j.log')}",
        *(f"#SBATCH {shell_word(option)}" for option in job.sbatch_options),
        "set -euo pipefail",
        f"cd {shell_word(str(job.repo))}",
        *job.setup,  # shell the user wrote, run as written
        f"export OMP_NUM_THREADS={int(job.threads)}",
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
    ]
    return lines


def shell_command(command: list[str]) -> str:
    """Quoted for bash by shell_word, one option per line."""
    parts = [shell_word(arg) for arg in command]
    text = " ".join(parts[:3])  # python -m module
    for arg, part in zip(command[3:], parts[3:]):
        text += (" \\\n    " if arg.startswith("-") or arg.endswith(".py") else " ") + part
    return text


def raw_script(job: SlurmJob) -> str:
    lines = sbatch_header(job, "raw", ntasks_per_node=1, cpus_per_task=job.devices * job.threads)
    lines += [
        "# one torchrun agent per node; they meet in the c10d rendezvous on the first node",
        "srun --ntasks-per-node=1 " + shell_command(raw_task_command(job)),
    ]
    return "\n".join(lines) + "\n"


def lightning_script(job: SlurmJob) -> str:
    world = job.nodes * job.devices
    lines = sbatch_header(job, "lightning", ntasks_per_node=job.devices, cpus_per_task=job.threads)
    lines += [
        "# one task per device: Lightning's SLURMEnvironment reads SLURM_PROCID, SLURM_LOCALID,",
        "# SLURM_NODEID and SLURM_NTASKS. No --ntasks (it can shrink the world: Lightning #20391), no",
        "# --gpu-bind=closest (several small worlds: #13605), and a job name other than bash or",
        "# interactive (Lightning then ignores SLURM: #16730).",
        f'if [ "$SLURM_NTASKS" != "{world}" ]; then',
        f'    echo "SLURM_NTASKS=$SLURM_NTASKS, expected {job.nodes} nodes x {job.devices} tasks = {world}" >&2',
        "    exit 2",
        "fi",
        'export MASTER_ADDR="$head_node"',
        f"export MASTER_PORT={MASTER_PORT}",
        "srun " + shell_command(lightning_task_command(job)),
    ]
    return "\n".join(lines) + "\n"


def write_sbatch_scripts(job: SlurmJob, overwrite: bool = False) -> dict[str, Path]:
    """Write OUT/raw.sbatch and OUT/lightning.sbatch; returns their paths by side."""
    paths = {"raw": job.out / "raw.sbatch", "lightning": job.out / "lightning.sbatch"}
    held = [str(p) for p in paths.values() if p.exists()] + [str(job.out / s) for s in paths if (job.out / s).exists()]
    if held and not overwrite:
        raise ValueError(f"--out {job.out} already holds {', '.join(held)}; choose another directory or --overwrite")
    job.out.mkdir(parents=True, exist_ok=True)
    paths["raw"].write_text(raw_script(job))
    paths["lightning"].write_text(lightning_script(job))
    return paths


# ---------------------------------------------------------------------------------------------
# the command line


def parse_args(argv: list[str], prog: str = PROG) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, required=True, help="nodes of the allocation")
    p.add_argument("--devices", type=int, required=True, help="processes (devices) per node")
    p.add_argument("--out", required=True, help="where the scripts go and the runs write (a shared filesystem)")
    p.add_argument("--config", default=str(REPO / "configs" / "default.yaml"), help="config file both sides read")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--repo", default=None, help="the checkout's path on the cluster (default: this checkout)")
    p.add_argument("--python", default="python", help="the interpreter on the nodes (after --setup)")
    p.add_argument("--time", default="00:30:00", help="sbatch --time")
    p.add_argument("--sbatch", dest="sbatch_options", action="append", default=[], metavar="OPTION",
                   help="an extra #SBATCH option, e.g. --sbatch=--partition=gpu (repeatable)")  # fmt: skip
    p.add_argument("--setup", action="append", default=[], metavar="LINE",
                   help="a shell line run before srun, e.g. 'source .venv/bin/activate' (repeatable)")  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="replace scripts already in --out")
    return p.parse_args(argv)


# every option whose value lands in a script, and its values
SCRIPT_OPTIONS = {
    "--out": lambda args: [args.out],
    "--config": lambda args: [args.config],
    "--repo": lambda args: [args.repo],
    "--python": lambda args: [args.python],
    "--time": lambda args: [args.time],
    "--sbatch": lambda args: args.sbatch_options,
    "--setup": lambda args: args.setup,
    "--set": lambda args: args.overrides,
}


def this_checkout() -> str:
    """--repo's default: the checkout this ddp_parity runs from. Installed from a package there is
    none, and scripts pointing into site-packages would fail on the cluster: the user names it."""
    if not (REPO / RAW_SCRIPT).is_file():
        raise ValueError(
            f"--repo: this ddp-parity is installed without a checkout ({REPO / RAW_SCRIPT} is not there); "
            "name the checkout's path on the cluster, e.g. --repo /shared/ddp-parity"
        )
    return str(REPO)


def job_from_args(args: argparse.Namespace) -> SlurmJob:
    """Checked before anything is written: the shape, the config and its overrides."""
    from ddp_parity.config import parse_raw_config
    from ddp_parity.harness.validate import to_flags

    for name in ("nodes", "devices"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be positive, got {getattr(args, name)}")
    args.repo = args.repo or this_checkout()
    check_not_in_checkout(Path(args.out).absolute())
    for option, values in SCRIPT_OPTIONS.items():
        for value in values(args):
            check_one_line(option, value)
    if not Path(args.config).is_file():
        raise ValueError(f"--config {args.config}: no such file")
    overrides = to_flags(args.overrides, "--set")
    cfg = parse_raw_config(["--config", args.config, *overrides])
    return SlurmJob(
        nodes=args.nodes,
        devices=args.devices,
        out=Path(args.out).absolute(),
        config=str(Path(args.config).absolute()),
        overrides=overrides,
        repo=Path(args.repo).absolute(),
        python=args.python,
        threads=cfg.threads,
        time=args.time,
        sbatch_options=args.sbatch_options,
        setup=args.setup,
    )


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """`prog`: the name it was started by, for --help and the error line."""
    from ddp_parity.config import ConfigError

    args = parse_args(sys.argv[1:] if argv is None else argv, prog)
    try:
        job = job_from_args(args)
        paths = write_sbatch_scripts(job, overwrite=args.overwrite)
    except (ValueError, ConfigError) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    raw, lightning = shell_word(str(paths["raw"])), shell_word(str(paths["lightning"]))
    print(f"wrote {raw} and {lightning} ({job.nodes} nodes x {job.devices} devices)")
    print(f"  sbatch {raw}; sbatch {lightning}")  # lines to paste into a shell: quoted like the scripts
    runs = " ".join(shell_word(str(job.out / side)) for side in ("raw", "lightning"))
    print(f"  then: {harness_command()} --traces {runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
