"""The GPU path in one run: every claim the tutorial makes about CUDA, checked on the device (issue 18).

    scripts/gpu_check.sh OUTDIR              # on a machine with a CUDA build of torch (about 5 minutes on one H200)
    scripts/gpu_check.sh --dry-run OUTDIR    # the same steps on CPU/gloo with tiny sizes (CI runs this)

Writes under OUTDIR (5 files): summary.json (one entry per check: status, one-line verdict, details),
checks.log (every command and its full output), bench.log (the benchmark's output), reports.json (the
report.json of every comparison) and report-mistake.html (the divergent page, on the device's data).
Runs go to a temporary folder, removed at the end (--keep keeps it).

A check's status: pass; measured (it ran and the result is a measurement, e.g. a precision whose
kernels are not bitwise); skip (with the reason: what the dry run cannot do on CPU); fail. Exit code 1
when any check failed, 0 otherwise; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ddp_parity.harness.launch import REPO, free_port, kill_tree

CONFIG = REPO / "configs" / "default.yaml"
COMMAND_TIMEOUT_S = 300  # one command; the whole script stays under 8 minutes on one H200
RESUME_CHECKPOINT_EVERY = 4  # steps; the fault fires mid-epoch, after the checkpoint at this step
RESUME_FAULT_STEP = 6
PASS, MEASURED, SKIP, FAIL = "pass", "measured", "skip", "fail"


@dataclass
class Setup:
    """Where and how big: the device settings every command gets, and the output files."""

    dry_run: bool
    out: Path
    work: Path
    log: Path = field(init=False)

    def __post_init__(self):
        self.log = self.out / "checks.log"

    @property
    def accelerator(self) -> str:
        return "cpu" if self.dry_run else "gpu"

    @property
    def sizes(self) -> list[str]:
        """Small enough for minutes on the device, and seconds per run on CPU."""
        samples = "128" if self.dry_run else "1024"
        return ["--data.num_samples", samples, "--trainer.max_epochs", "2"]

    def side_flags(self, devices: int = 1) -> list[str]:
        return ["--trainer.accelerator", self.accelerator, "--trainer.devices", str(devices), *self.sizes]

    def harness_sets(self, devices: int = 1) -> list[str]:
        flags = self.side_flags(devices)
        return [f"--set={key[2:]}={value}" for key, value in zip(flags[::2], flags[1::2])]


@dataclass
class Result:
    name: str
    status: str
    line: str
    proves: str
    seconds: float = 0.0
    details: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# running commands


def run(setup: Setup, command: list[str], env: dict | None = None, timeout: float = COMMAND_TIMEOUT_S):
    """Run a command from the repository root in a session of its own; its whole tree is killed
    afterwards. The command and its full output go to checks.log."""
    command = [str(c) for c in command]
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_tree(proc.pid)
        output, _ = proc.communicate()
    finally:
        kill_tree(proc.pid)
    seconds = time.monotonic() - started
    with open(setup.log, "a") as f:
        f.write(f"\n$ {' '.join(command)}\n# exit {proc.returncode}{' (timed out)' if timed_out else ''}, ")
        f.write(f"{seconds:.1f} s\n{output}")
    return subprocess.CompletedProcess(command, -9 if timed_out else proc.returncode, output, "")


def torchrun(nproc: int, max_restarts: int = 0) -> list[str]:
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        f"--max-restarts={max_restarts}",
    ]


def raw_run(setup: Setup, run_dir: Path, *extra: str, nproc: int = 1, env=None, max_restarts: int = 0):
    return run(
        setup,
        [
            *torchrun(nproc, max_restarts),
            "raw/train.py",
            "--config",
            CONFIG,
            "--run_dir",
            run_dir,
            "--trainer.enable_progress_bar",
            "false",
            *setup.side_flags(nproc),
            *extra,
        ],
        env=env,
    )


def harness(setup: Setup, out: Path, *extra: str):
    """compare/run.py on the device settings, world size 1; returns (completed process, report or None)."""
    proc = run(
        setup,
        [
            sys.executable,
            "compare/run.py",
            "--out",
            out,
            "--nproc",
            "1",
            "--stall-timeout",
            "300",
            *setup.harness_sets(),
            *extra,
        ],
    )
    report_path = out / "report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else None
    return proc, report


def last_error(output: str) -> str:
    """The most telling line of a failed command: the last line naming an error."""
    lines = [line.strip() for line in output.splitlines() if re.search(r"error|refus|duplicate|invalid", line, re.I)]
    return (lines[-1] if lines else (output.strip().splitlines() or ["(no output)"])[-1])[:400]


def read_meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "meta.json").read_text())


# ---------------------------------------------------------------------------------------------
# the checks, in the order they run


def check_environment(setup: Setup) -> Result:
    import torch

    proves = "the machine: torch build, device, NCCL"
    facts = {"torch": torch.__version__, "python": platform.python_version(), "cuda": torch.version.cuda}
    if setup.dry_run:
        return Result("environment", SKIP, "dry run: CPU only, no CUDA device looked for", proves, details=facts)
    if not torch.cuda.is_available():
        return Result(
            "environment",
            FAIL,
            f"no CUDA device (torch {torch.__version__}): install a CUDA build",
            proves,
            details=facts,
        )
    import torch.distributed as dist

    facts.update(
        device=torch.cuda.get_device_name(0),
        device_count=torch.cuda.device_count(),
        accelerator=str(torch.accelerator.current_accelerator()),
        nccl=dist.is_nccl_available(),
        nccl_version=".".join(map(str, torch.cuda.nccl.version())) if dist.is_nccl_available() else None,
    )
    ok = facts["nccl"]
    line = (
        f"{facts['device']} x{facts['device_count']}, torch {facts['torch']} (CUDA {facts['cuda']}), "
        f"NCCL {facts['nccl_version']}"
    )
    return Result("environment", PASS if ok else FAIL, line, proves, details=facts)


def check_raw_on_device(setup: Setup) -> Result:
    """torchrun --nproc_per_node=1 raw/train.py: the backend torch.accelerator picks, the device by local rank."""
    proves = "raw/train.py under torchrun picks NCCL through torch.accelerator and binds cuda:LOCAL_RANK"
    run_dir = setup.work / "raw-plain"
    proc = raw_run(setup, run_dir, "--checkpoint.every_n_train_steps", str(RESUME_CHECKPOINT_EVERY))
    if proc.returncode != 0:
        return Result(
            "raw_on_device", FAIL, f"raw/train.py exited {proc.returncode}: {last_error(proc.stdout)}", proves
        )
    meta = read_meta(run_dir)
    want = ("gloo", "cpu") if setup.dry_run else ("nccl", "cuda:0")
    got = (meta.get("backend"), meta.get("device"))
    ok = got == want and meta.get("finished") and meta.get("replicas_identical")
    line = f"backend {got[0]}, device {got[1]} (expected {want[0]}, {want[1]}); finished {meta.get('finished')}"
    return Result("raw_on_device", PASS if ok else FAIL, line, proves, details={"backend": got[0], "device": got[1]})


def check_resume(setup: Setup) -> Result:
    """A rank killed mid-epoch, torchrun restarts it, the run resumes from the checkpoint loaded with
    map_location onto its device: the whole trace and the final parameters bitwise equal to the
    uninterrupted run of the previous check."""
    from ddp_parity.compare.comparator import Criterion, compare_runs

    proves = (
        "checkpoint saved and loaded with map_location; a mid-epoch resume is bitwise equal to an uninterrupted run"
    )
    plain, resumed = setup.work / "raw-plain", setup.work / "raw-resumed"
    if not (plain / "meta.json").is_file():
        return Result("resume_bitwise", FAIL, "the uninterrupted run (raw_on_device) is missing", proves)
    env = {"DDP_PARITY_FAULT": f"0:{RESUME_FAULT_STEP}", "DDP_PARITY_FAULT_MARKER": str(setup.work / "fault.marker")}
    proc = raw_run(
        setup, resumed, "--checkpoint.every_n_train_steps", str(RESUME_CHECKPOINT_EVERY), env=env, max_restarts=1
    )
    if proc.returncode != 0:
        return Result(
            "resume_bitwise", FAIL, f"resumed run exited {proc.returncode}: {last_error(proc.stdout)}", proves
        )
    fired = (setup.work / "fault.marker").exists()
    resumed_from = read_meta(resumed).get("resumed_from")
    result = compare_runs(plain, resumed, Criterion()).to_dict()
    ok = fired and resumed_from and result["verdict"] == "equivalent"
    line = (
        f"killed after step {RESUME_FAULT_STEP} ({'fired' if fired else 'DID NOT FIRE'}), resumed from "
        f"{Path(resumed_from).name if resumed_from else 'NOTHING'}: {result['verdict']} to the uninterrupted run "
        f"({result['params']['equal']}/{result['params']['compared']} tensors bitwise)"
    )
    return Result(
        "resume_bitwise", PASS if ok else FAIL, line, proves, details={"first_divergence": result["first_divergence"]}
    )


def parity_check(precision: str, must_be_bitwise: bool) -> Callable[[Setup], Result]:
    name = {"32-true": "parity_fp32", "bf16-mixed": "parity_bf16", "16-mixed": "parity_fp16"}[precision]

    def check(setup: Setup) -> Result:
        proves = f"raw vs Lightning, world 1, {precision}, deterministic algorithms + CUBLAS_WORKSPACE_CONFIG: " + (
            "bitwise" if must_be_bitwise else "bitwise, or the measured difference and its diagnosis"
        )
        if precision == "16-mixed" and setup.dry_run:
            return Result(
                name, SKIP, "16-mixed (fp16 + GradScaler) needs CUDA: on CPU Lightning runs bf16 instead", proves
            )
        proc, report = harness(setup, setup.work / name, f"--set=trainer.precision={precision}")
        if report is None or proc.returncode not in (0, 1):
            return Result(name, FAIL, f"compare/run.py exited {proc.returncode}: {last_error(proc.stdout)}", proves)
        setup.reports[name] = report
        losses = report.get("losses") or {}
        diagnosis = report.get("diagnosis") or {}
        details = {
            "verdict": report["verdict"],
            "loss_max_abs": losses.get("max_abs"),
            "params_max_abs": (report.get("params") or {}).get("max_abs"),
            "diagnosis": {k: diagnosis.get(k) for k in ("category", "step", "rank", "explanation")},
            "timing": report.get("timing"),
        }
        if report["verdict"] == "equivalent":
            return Result(
                name, PASS, f"{precision}: bitwise equal ({losses.get('compared')} losses)", proves, details=details
            )
        line = (
            f"{precision}: different, loss max abs {losses.get('max_abs')}, params max abs "
            f"{details['params_max_abs']}; diagnosis {diagnosis.get('category')} at step {diagnosis.get('step')}"
        )
        return Result(name, FAIL if must_be_bitwise else MEASURED, line, proves, details=details)

    return check


def check_world2_one_device(setup: Setup) -> Result:
    """Two ranks on the one GPU: NCCL refuses (its message kept); gloo carries CUDA tensors and DDP
    trains with identical replicas. The project's twins bind cuda:LOCAL_RANK, so they refuse this
    layout on one GPU: both refusals are recorded (a documented limit, not a failure)."""
    proves = "world 2 on one GPU: NCCL's refusal, gloo on CUDA tensors, and how the twins answer"
    details: dict = {}
    device = "cpu" if setup.dry_run else "cuda"
    probe = setup.work / "world2"
    probe.mkdir(parents=True, exist_ok=True)
    proc = run(setup, [*torchrun(2), "scripts/gpu_check.py", "--probe", "gloo", device, probe])
    gloo = [json.loads(p.read_text()) for p in sorted(probe.glob("gloo-rank*.json"))]
    details["gloo"] = gloo
    gloo_ok = proc.returncode == 0 and len(gloo) == 2 and len({g["params_sha256"] for g in gloo}) == 1
    said = "DDP trained, replicas identical" if gloo_ok else "FAILED: " + last_error(proc.stdout)
    parts = [f"gloo on {device} tensors: {said}"]
    if setup.dry_run:
        parts.append("NCCL refusal and the twins' answer skipped (need CUDA)")
        return Result("world2_one_device", PASS if gloo_ok else FAIL, "; ".join(parts), proves, details=details)
    proc = run(setup, [*torchrun(2), "scripts/gpu_check.py", "--probe", "nccl", "cuda", probe], timeout=120)
    nccl = [json.loads(p.read_text()) for p in sorted(probe.glob("nccl-rank*.json"))]
    refused = [n for n in nccl if n.get("refused")]
    details["nccl"] = nccl
    parts.append(f"NCCL: {'refused: ' + refused[0]['message'][:200] if refused else 'NOT refused (unexpected)'}")
    raw = raw_run(setup, setup.work / "raw-world2", nproc=2)
    details["raw_world2"] = {"exit": raw.returncode, "message": last_error(raw.stdout)}
    lit = run(
        setup,
        [
            sys.executable,
            "-m",
            "lightning_impl",
            "fit",
            "--config",
            CONFIG,
            "--run_dir",
            setup.work / "lit-world2",
            "--trainer.enable_progress_bar",
            "false",
            *setup.side_flags(2),
        ],
        env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())},
        timeout=120,
    )
    details["lightning_world2"] = {"exit": lit.returncode, "message": last_error(lit.stdout)}
    parts.append(f"raw/train.py exit {raw.returncode}, Lightning exit {lit.returncode} (messages in summary.json)")
    ok = gloo_ok and bool(refused)
    return Result("world2_one_device", PASS if ok else FAIL, "; ".join(parts), proves, details=details)


def check_mistake(setup: Setup) -> Result:
    """One classic mistake through the harness on the device: the diagnosis names it."""
    proves = "compare/run.py --mistake on device data: the diagnosis names the planted cause"
    mistake, expected = "no-loss-scaling-for-accumulation", "gradients"
    out = setup.work / "mistake"
    proc, report = harness(setup, out, "--mistake", mistake)
    if report is None or proc.returncode != 1:
        return Result(
            "mistake", FAIL, f"compare/run.py --mistake exited {proc.returncode}: {last_error(proc.stdout)}", proves
        )
    setup.reports["mistake"] = report
    from ddp_parity.compare.findings import Report
    from ddp_parity.compare.html import write_html

    shutil.copyfile(write_html(out, Report.from_json(report)), setup.out / "report-mistake.html")
    diagnosis = report.get("diagnosis") or {}
    ok = diagnosis.get("category") == expected
    line = f"--mistake {mistake}: diagnosis {diagnosis.get('category')} at step {diagnosis.get('step')}"
    line += f" (expected {expected})"
    return Result("mistake", PASS if ok else FAIL, line, proves, details={"diagnosis": diagnosis})


def bench_check(name: str, args: Callable[[Setup], list[str]], pattern: str, proves: str) -> Callable[[Setup], Result]:
    def check(setup: Setup) -> Result:
        command = [sys.executable, "-m", "benchmarks.bench", "--tmp", setup.work / name, *args(setup)]
        proc = run(setup, command, timeout=COMMAND_TIMEOUT_S)
        with open(setup.out / "bench.log", "a") as f:
            f.write(proc.stdout + "\n")
        if proc.returncode != 0:
            return Result(name, FAIL, f"benchmark exited {proc.returncode}: {last_error(proc.stdout)}", proves)
        found = [line.strip() for line in proc.stdout.splitlines() if re.search(pattern, line)]
        line = " | ".join(re.sub(r"\s{2,}", "  ", x) for x in found) or "ran (figures in bench.log)"
        return Result(name, PASS, line, proves, details={"lines": found})

    return check


def launch_args(setup: Setup) -> list[str]:
    if setup.dry_run:  # the default network, tiny: the large one takes minutes on CPU
        return [
            "--only",
            "launch",
            "--network",
            "default",
            "--repeats",
            "1",
            "--nproc",
            "1",
            "--set",
            "trainer.accelerator=cpu",
            "--set",
            "data.num_samples=384",
            "--set",
            "trainer.max_epochs=1",
        ]
    return [
        "--only",
        "launch",
        "--network",
        "large",
        "--repeats",
        "1",
        "--nproc",
        "1",
        "--set",
        "trainer.accelerator=gpu",
    ]


def record_args(setup: Setup) -> list[str]:
    if setup.dry_run:
        return ["--only", "record", "--quick", "--record-steps", "50", "--device", "cpu"]
    return ["--only", "record", "--quick", "--network", "large", "--record-steps", "300", "--device", "cuda"]


CHECKS: list[tuple[str, Callable[[Setup], Result]]] = [
    ("environment", check_environment),
    ("raw_on_device", check_raw_on_device),
    ("resume_bitwise", check_resume),
    ("parity_fp32", parity_check("32-true", must_be_bitwise=True)),
    ("parity_bf16", parity_check("bf16-mixed", must_be_bitwise=False)),
    ("parity_fp16", parity_check("16-mixed", must_be_bitwise=False)),
    ("world2_one_device", check_world2_one_device),
    ("mistake", check_mistake),
    (
        "bench_lightning_vs_raw",
        bench_check("bench_lightning_vs_raw", launch_args, r"^(large|default)\s", "Lightning vs raw step time, 2048x4"),
    ),
    (
        "bench_recording",
        bench_check("bench_recording", record_args, r"^step, recording|difference per step", "recording overhead"),
    ),
]


# ---------------------------------------------------------------------------------------------
# the world-2 probe (run under torchrun by check_world2_one_device)


def train_a_few_ddp_steps(target, rank: int) -> dict:
    """Five DDP steps on `target`, then the parameter digest. The DDP wrapper dies when this returns:
    a Reducer still alive at destroy_process_group makes gloo's threads abort the rank at exit
    (`terminate called without an active exception`, about one run in four here)."""
    import hashlib

    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(target)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(5):
        x, y = torch.randn(8, 16, generator=g).to(target), torch.randint(0, 4, (8,), generator=g).to(target)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return {"losses": losses, "params_sha256": h.hexdigest(), "param_device": str(next(model.parameters()).device)}


def probe(backend: str, device: str, out: Path) -> int:
    """Every rank on device 0. nccl: expect the refusal, keep its message. gloo: a few DDP steps on
    CUDA (or CPU) tensors, then each rank's parameter digest."""
    import datetime

    import torch
    import torch.distributed as dist

    from ddp_parity.distributed import destroy_process_group

    rank = int(os.environ["RANK"])
    target = torch.device(device, 0) if device == "cuda" else torch.device("cpu")
    record = {"rank": rank, "backend": backend, "device": str(target)}
    try:
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=60))
        if backend == "nccl":
            torch.cuda.set_device(0)
            value = torch.ones(1, device=target)
            dist.all_reduce(value)
            torch.cuda.synchronize()
            record.update(refused=False, message=f"all_reduce returned {value.item()}")
        else:
            record.update(train_a_few_ddp_steps(target, rank))
    except Exception as err:  # the refusal is the result
        record.update(refused=True, message=f"{type(err).__name__}: {err}".strip())
    (out / f"{backend}-rank{rank}.json").write_text(json.dumps(record))
    try:
        destroy_process_group()  # after train_a_few_ddp_steps has dropped its DDP wrapper
    except Exception:
        pass
    return 0 if backend == "nccl" or not record.get("refused") else 1


# ---------------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="scripts/gpu_check.sh", description=__doc__.split("\n\n")[0])
    p.add_argument("out", metavar="OUTDIR", help="where summary.json and the logs go (created; must be empty)")
    p.add_argument("--dry-run", action="store_true", help="every step on CPU/gloo with tiny sizes (no GPU needed)")
    p.add_argument("--keep", action="store_true", help="keep the runs' temporary folder (its path is printed)")
    p.add_argument(
        "--only", default=None, help=f"comma-separated checks (default all): {','.join(n for n, _ in CHECKS)}"
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--probe"]:
        return probe(argv[1], argv[2], Path(argv[3]))
    args = parse_args(argv)
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(f"gpu_check: error: OUTDIR {out} exists and is not an empty folder; choose another", file=sys.stderr)
        return 2
    wanted = [n for n, _ in CHECKS] if not args.only else [s.strip() for s in args.only.split(",")]
    unknown = sorted(set(wanted) - {n for n, _ in CHECKS})
    if unknown:
        print(f"gpu_check: error: --only {unknown}: not a check ({', '.join(n for n, _ in CHECKS)})", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    setup = Setup(args.dry_run, out, Path(tempfile.mkdtemp(prefix="gpu-check-")))
    setup.reports = {}
    started = time.monotonic()
    results: list[Result] = []
    print(f"gpu_check{' --dry-run' if args.dry_run else ''}: runs in {setup.work}, results in {out}", flush=True)
    for name, check in CHECKS:
        if name not in wanted:
            continue
        t0 = time.monotonic()
        try:
            result = check(setup)
        except Exception as err:  # a check that crashed is a failed check, with its traceback in the log
            with open(setup.log, "a") as f:
                f.write(f"\n# {name} raised:\n{traceback.format_exc()}")
            result = Result(name, FAIL, f"raised {type(err).__name__}: {err}"[:400], "")
        result.seconds = time.monotonic() - t0
        results.append(result)
        print(f"{result.status.upper():8s} {name:24s} {result.line} ({result.seconds:.0f} s)", flush=True)
    failed = [r.name for r in results if r.status == FAIL]
    summary = {
        "dry_run": args.dry_run,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": platform.node(),
        "seconds": time.monotonic() - started,
        "ok": not failed,
        "failed": failed,
        "checks": [r.__dict__ for r in results],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out / "reports.json").write_text(json.dumps(setup.reports, indent=1, default=str) + "\n")
    if args.keep:
        print(f"runs kept in {setup.work}")
    else:
        shutil.rmtree(setup.work, ignore_errors=True)
    verdict = "all checks passed" if not failed else "FAILED: " + ", ".join(failed)
    print(f"{verdict} in {summary['seconds']:.0f} s; {out / 'summary.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
