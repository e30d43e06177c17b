"""Everything that makes two runs comparable, set in one place and recorded in meta.json."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import random
import re
import sys

import numpy as np
import torch


def set_determinism(seed: int, threads: int, deterministic: bool) -> dict:
    """Seed every generator, pin the thread count and (optionally) deterministic kernels.

    The seeding is what Lightning's `seed_everything` does (random, numpy, torch, PL_GLOBAL_SEED),
    so the raw loop and the Lightning run build the same initial weights. The thread count is
    pinned through OMP_NUM_THREADS too: torchrun sets 1 and Lightning's launcher sets
    cpu_count // processes when the variable is unset, and CPU float results depend on it.
    """
    os.environ["PL_GLOBAL_SEED"] = str(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    if deterministic:
        # cuBLAS needs a fixed workspace for reproducible GEMMs; Lightning sets the same value.
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True)
    return determinism_facts(seed)


def pin_threads(threads: int) -> None:
    """Re-assert the thread count (a launcher may have changed it after set_determinism)."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)


def determinism_facts(seed: int) -> dict:
    return {
        "seed": seed,
        "threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }


def torch_flags() -> dict:
    """The process-wide torch settings that change floating-point results, as this process holds them
    (recorded per rank: a flag set in the launcher but not in a spawned worker shows up here)."""
    return {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "default_dtype": str(torch.get_default_dtype()).removeprefix("torch."),
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
    }


# environment variables that change which kernels a CPU or GPU runs, or how they round (unset: None)
ARITHMETIC_ENV = (
    "ATEN_CPU_CAPABILITY",  # ATen's kernel set: default (scalar), avx2, avx512
    "MKL_CBWR",  # MKL's conditional numerical reproducibility path (COMPATIBLE, AVX2, ...)
    "MKL_ENABLE_INSTRUCTIONS",
    "OPENBLAS_CORETYPE",
)
# the same for CUDA's libraries: recorded only where a GPU is (on a CPU they change nothing)
GPU_ARITHMETIC_ENV = ("NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "CUBLAS_WORKSPACE_CONFIG")


def arithmetic_facts() -> dict:
    """What decides how this process's floats round, beyond torch_flags: the CPU and the kernel set
    ATen chose on it, the BLAS behind matmuls, the variables that steer them, and on a GPU its model,
    driver, CUDA and cuDNN. Two runs that differ here can part by rounding with identical code."""
    facts = {
        "cpu": cpu_model(),
        "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "blas": build_setting("BLAS_INFO"),
        "mkldnn": torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled,
        **{name: os.environ.get(name) for name in ARITHMETIC_ENV},
    }
    if torch.cuda.is_available():
        device = torch.cuda.current_device()
        facts |= {
            "gpu": torch.cuda.get_device_name(device),
            "gpu_capability": ".".join(map(str, torch.cuda.get_device_capability(device))),
            "cuda": torch.version.cuda,
            "cuda_driver": getattr(torch._C, "_cuda_getDriverVersion", lambda: None)(),
            "cudnn": torch.backends.cudnn.version(),
            **{name: os.environ.get(name) for name in GPU_ARITHMETIC_ENV},
        }
    return facts


@functools.cache
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def build_setting(name: str) -> str | None:
    """One `NAME=value` of torch's build configuration (torch.__config__.show())."""
    match = re.search(rf"\b{name}=([^,\s]+)", torch.__config__.show())
    return match.group(1) if match else None


def rng_state() -> dict:
    """Every generator's state as plain lists and ints: gathers between ranks and loads with weights_only."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state().tolist(),
        "python": random.getstate(),
        "numpy": [name, keys.tolist(), pos, has_gauss, cached],
        "cuda": [s.tolist() for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    if state["cuda"]:
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def versions() -> dict:
    """Read from the installed distribution, not by importing Lightning: that import costs a process
    without Lightning (a raw worker, a user's own loop) over a CPU-second. A process that has Lightning
    loaded says the version it runs."""
    lightning = sys.modules.get("lightning")
    if lightning is None:
        try:
            lightning_version = importlib.metadata.version("lightning")
        except importlib.metadata.PackageNotFoundError:
            lightning_version = None
    else:
        lightning_version = lightning.__version__
    return {"python": platform.python_version(), "torch": torch.__version__, "lightning": lightning_version}
