"""Recording changes nothing a program prints, torch's warnings included: a warning torch raises inside a call the
hooks wrap names the program's line, as it does unrecorded (issue 45: "the program's output ... the same with and
without recording"). DDP's constructor warns with `stacklevel=2`, the line that built it; with the hooks' wrapper
between the two, that line was the wrapper's (`ddp_parity/hooks/context.py`)."""

from __future__ import annotations

import pytest
from conftest import check_ok, run_cmd

from ddp_parity.harness.launch import free_port
from ddp_parity.hooks import recording_env

PROGRAM = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo", rank=0, world_size=1)
model = DistributedDataParallel(torch.nn.Linear(2, 2), broadcast_buffers=False)
dist.destroy_process_group()
"""


def _warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "Warning:" in line]


@pytest.mark.slow
def test_a_warning_torch_raises_in_a_wrapped_call_names_the_programs_line(tmp_path):
    program = tmp_path / "build_ddp.py"
    program.write_text(PROGRAM)
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "PYTHONWARNINGS": "always::FutureWarning"}
    plain = check_ok(run_cmd(["python", program], env=env))
    env["MASTER_PORT"] = str(free_port())
    recorded = check_ok(run_cmd(["python", program], env=recording_env(tmp_path / "run", "raw", env)))
    warned = _warning_lines(plain.stderr)
    assert any(f"{program}:6: FutureWarning" in line for line in warned), plain.stderr  # what the check rests on
    assert _warning_lines(recorded.stderr) == warned
