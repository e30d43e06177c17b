"""python -m benchmarks.programs.slips [--only PROGRAM] [--keep DIR]: each program's slips (the port differences
and the raw loop's own that docs/programs.md's rounds found, put back one at a time as an edit of the program),
run instrumented (the `# parity` lines, benchmarks.programs.run) and recorded by the hooks with no line changed
(benchmarks.programs.hooks, `ddp-parity record`): does the tool name the same cause both ways?

Prints one line a slip: the cause (report.json's diagnosis kind) and step each way, `same` or `differs`, and a
score; exit 0 when every slip is named the same, 1 otherwise."""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.programs.corpus import PROGRAMS
from benchmarks.programs.hooks import run_pair_recorded
from benchmarks.programs.run import HERE, PairResult, run_pair


@dataclass(frozen=True)
class Slip:
    program: str
    round: str  # the round of docs/programs.md it comes from
    what: str
    file: str  # in the program's folder
    old: str  # exact text, once in the file
    new: str


SLIPS = [
    Slip(
        "ddp_tutorial", "1", "the port builds the model before the dataset (both draw from the global RNG)",
        "lightning_port.py", "    dataset = MyTrainDataset(2048)\n    model = LitLinear()\n",
        "    model = LitLinear()\n    dataset = MyTrainDataset(2048)\n",
    ),
    Slip(
        "ddp_tutorial", "2", "raw never calls set_epoch", "multigpu_torchrun.py",
        "        self.train_data.sampler.set_epoch(epoch)", "        pass",
    ),
    Slip(
        "iterable", "1", "the port holds its feature table as two buffers", "lightning_port.py",
        "        self.inputs, self.targets = features(size)\n",
        "        for name, table in zip((\"inputs\", \"targets\"), features(size)):\n"
        "            self.register_buffer(name, table)\n",
    ),
    Slip(
        "imagenet", "1", "the port's ranks average their halves of the validation set, unreduced",
        "lightning_port.py", "        torch.distributed.all_reduce(self.sums)\n", "",
    ),
    Slip(
        "nanogpt", "1", "the port seeds 1337 on every rank (nanoGPT: 1337 + rank)", "lightning_port.py",
        "torch.manual_seed(1337 + self.global_rank)", "torch.manual_seed(1337)",
    ),
    Slip(
        "nanogpt", "2", "the port seeds after building the model (raw: before)", "lightning_port.py",
        "        torch.manual_seed(1337 + self.global_rank)\n        self.model = GPT(GPTConfig(**self.model_args))\n",
        "        self.model = GPT(GPTConfig(**self.model_args))\n        torch.manual_seed(1337 + self.global_rank)\n",
    ),
    Slip(
        "nanogpt", "3", "the port's loader draws its base seed from the global generator", "lightning_port.py",
        "DataLoader(windows, batch_size=None, generator=torch.Generator())", "DataLoader(windows, batch_size=None)",
    ),
    Slip(
        "nanogpt", "4", "the port does not evaluate between its first two draws, as raw's rank 0 does",
        "lightning_port.py", "            self.windows.after_first = self.evaluate_at_iteration_0\n",
        "            pass\n",
    ),
    Slip(
        "nanogpt", "5", "raw clips over model.parameters() (the port: the optimizer's order)", "train.py",
        '        params = [p for group in optimizer.param_groups for p in group["params"]]\n',
        "        params = list(model.parameters())\n",
    ),
    Slip(
        "nanogpt", "6", "the port stops at max_iters (raw runs iterations 0 to max_iters)", "lightning_port.py",
        "max_steps=max_iters + 1,", "max_steps=max_iters,",
    ),
    Slip(
        "hf_accelerate", "3", "the port steps after n micro-batches (raw at step % n == 0: after the first alone)",
        "lightning_port.py", "if batch_idx % self.hparams.accumulate == 0:",
        "if (batch_idx + 1) % self.hparams.accumulate == 0:",
    ),
    Slip(
        "hf_accelerate", "5", "the port lets Lightning zero the gradients before validating", "lightning_port.py",
        "    def on_validation_model_zero_grad(self):", "    def kept_on_validation_model_zero_grad(self):",
    ),
]  # fmt: skip


def slipped_program(slip: Slip, dest: Path):
    """The program copied to `dest` with the slip made (instrumentation and all), as a Program to run."""
    program = PROGRAMS[slip.program]
    shutil.copytree(HERE / program.folder, dest, ignore=shutil.ignore_patterns("__pycache__"))
    file = dest / slip.file
    text = file.read_text()
    if text.count(slip.old) != 1:
        raise ValueError(f"slip {slip.program} {slip.round}: {slip.old!r} is not once in {slip.file}")
    file.write_text(text.replace(slip.old, slip.new))
    return dataclasses.replace(program, folder=str(dest))  # HERE / an absolute folder is that folder


def cause(result: PairResult) -> str:
    if result.failed:
        return "FAILED"
    d = result.diagnosis or {}
    kind = d.get("kind") or result.verdict
    return f"{kind} at step {d['step']}" if d.get("step") is not None else str(kind)


def run_slip(slip: Slip, work: Path) -> tuple[str, str]:
    """(the cause named instrumented, the cause named under the hooks)."""
    work.mkdir(parents=True)
    program = slipped_program(slip, work / "slipped")
    instrumented = run_pair(program, work / "instrumented", in_process=True)
    hooked = run_pair_recorded(program, work / "hooks")
    return cause(instrumented), cause(hooked)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.programs.slips", description=__doc__)
    p.add_argument("--only", default=None, choices=sorted({s.program for s in SLIPS}))
    p.add_argument("--slip", action="append", default=None, metavar="PROGRAM:ROUND", help="only this slip (repeatable)")
    p.add_argument("--keep", type=Path, default=None, help="keep the runs under DIR (must not exist)")
    args = p.parse_args(argv)
    slips = [s for s in SLIPS if args.only in (None, s.program)]
    if args.slip:
        slips = [s for s in slips if f"{s.program}:{s.round}" in args.slip]
    with tempfile.TemporaryDirectory(prefix="ddp-parity-slips-") as tmp:
        root = Path(os.path.abspath(args.keep)) if args.keep else Path(tmp)
        same = 0
        for slip in slips:
            instrumented, hooked = run_slip(slip, root / f"{slip.program}-{slip.round}")
            same += instrumented == hooked
            word = "same" if instrumented == hooked else "differs"
            print(f"{slip.program} {slip.round} ({slip.what}): instrumented {instrumented}; hooks {hooked}: {word}")
            sys.stdout.flush()
        print(f"named the same: {same}/{len(slips)}")
    return 0 if same == len(slips) else 1


if __name__ == "__main__":
    raise SystemExit(main())
