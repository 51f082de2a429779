"""Where and how a run computes: device, precision, threads, seeds and determinism, and the
CPU fingerprint a run records.

Precision: ``fp32``, ``bf16`` (autocast of the training forward pass; loss, optimiser and
scores stay fp32, as bf16 rounds scores into ties) or ``auto`` (bf16 on CUDA, fp32 on CPU); a
CPU without bf16 units (AMX, AVX512-BF16) is refused (:func:`resolve_precision`). Threads: a
CPU run gets ``cores // runs sharing the machine`` (:func:`default_threads`; two 2-thread runs
on 2 cores were ~13× slower per CPU second than 1-thread ones), set before training and
recorded as ``cpu_threads``. RNG states are plain tensors and lists, so checkpoints load with
``weights_only=True``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pairrepro.errors import ConfigError

# the CPU flags that decide which kernels oneDNN and MKL pick (and so the last bits of a run)
KERNEL_FLAGS = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f", "avx2")
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
# what OpenMP, MKL and OpenBLAS read in the processes a run starts
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def available_cores() -> int:
    """CPUs this process may run on (its affinity mask, which Slurm and taskset restrict;
    a cgroup CPU quota lowers it further)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    with contextlib.suppress(OSError, ValueError):
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    return max(1, cores)


def default_threads(runs: int = 1) -> int:
    """Torch threads for one of ``runs`` runs sharing this machine: cores // runs, at least 1."""
    return max(1, available_cores() // max(1, runs))


def set_threads(threads: int) -> None:
    """Use ``threads`` torch intra-op threads in this process, and tell OpenMP/MKL the same
    (for the processes it starts); also :func:`keep_freed_memory`, the other half of a CPU
    run's process set-up."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch.set_num_threads(threads)
    keep_freed_memory()


# glibc mallopt parameters, and the values keep_freed_memory sets
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
TRIM_BYTES, MMAP_BYTES = 1 << 30, 32 << 20  # 32 MiB: the largest mmap threshold glibc takes


@functools.cache
def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory for the next allocation instead of handing it back
    to the kernel (whether it took: False off glibc).

    torch's CPU allocator does not cache: each training step allocates its large buffers
    afresh, and by default glibc unmaps blocks of a few MiB on free and trims the heap's free
    top, so every step pays a page fault per 4 KiB of them (86,000 faults, about a tenth of a
    four-stacked TC-LSTM step at batch 32 in fp32; bench/bench_grid.py). Blocks up to
    :data:`MMAP_BYTES` now come from the heap, and up to :data:`TRIM_BYTES` of its free top
    stay mapped. The process's resident memory then stays near its peak, as it would with a
    caching allocator.
    """
    if platform.system() != "Linux":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    return bool(mallopt(M_TRIM_THRESHOLD, TRIM_BYTES)) and bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_BYTES))


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """``auto`` -> ``cuda:<local_rank>`` when a GPU is visible, else ``cpu``."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        name = f"cuda:{local_rank}"
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ConfigError(f"[train] device: {name!r} is not a device",
                          hint="use auto, cpu, cuda or cuda:N") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"[train] device: {name!r} requested but no CUDA GPU is visible",
                          hint="use --device cpu (or device = \"auto\" in the recipe)")
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"[train] device: {name!r} is not supported", hint="use cpu or cuda")
    return device


@functools.cache
def _cpuinfo() -> dict[str, str]:
    """The first CPU's ``/proc/cpuinfo`` fields (empty where there is none), read once."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return fields
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where there is none)."""
    return frozenset(_cpuinfo().get("flags", "").split())


def cpu_has_bf16_units() -> bool:
    """Does this CPU compute bf16 matrix products in hardware (AMX or AVX512-BF16)?"""
    return any(flag in cpu_flags() for flag in BF16_FLAGS)


def resolve_precision(name: str, device: torch.device) -> str:
    """A validated ``[train] precision`` (config.PRECISIONS) for ``device``: ``auto`` becomes
    bf16 on CUDA and fp32 on CPU. bf16 on a CPU without bf16 units is a ConfigError: oneDNN
    emulates bf16 matrix products there about 80x slower than fp32 (AMD EPYC, AVX2: 1 against
    84 GFLOP/s on one thread) and has no bf16 LSTM primitive at all."""
    if name == "auto":
        return "bf16" if device.type == "cuda" else "fp32"
    if name == "bf16" and device.type == "cpu" and not cpu_has_bf16_units():
        raise ConfigError(
            f"[train] precision: 'bf16' needs a CPU with bf16 units (AMX or AVX512-BF16); "
            f"this one ({cpu_model()}, {torch.backends.cpu.get_cpu_capability()}) has none: "
            "bf16 would be emulated far slower than fp32, and LSTMs cannot run in it",
            hint="use --precision fp32 (or auto) on this machine")
    return name


@contextlib.contextmanager
def autocast(device: torch.device, precision: str = "fp32") -> Iterator[None]:
    """bf16 autocast on ``device`` when ``precision`` is bf16, else nothing."""
    if precision == "bf16":
        with torch.autocast(device.type, dtype=torch.bfloat16):
            yield
    else:
        yield


def device_name(device: torch.device) -> str:
    """Human-readable name of the device: the GPU model, or "cpu" (the CPU's model is in
    :func:`cpu_fingerprint`)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    return (_cpuinfo().get("model name") or platform.processor() or platform.machine())


def cpu_fingerprint() -> dict[str, Any]:
    """What picks a CPU run's kernels: model, torch's capability level, the ISA flags that
    matter, and the MKL / oneDNN versions. Two runs are bit-comparable only when these match."""
    mkl = torch.backends.mkl.is_available()
    onednn = torch.backends.mkldnn.is_available()
    config = torch.__config__.show()
    return {
        "model": cpu_model(),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "isa": sorted(flag for flag in KERNEL_FLAGS if flag in cpu_flags()),
        "mkl": _version_in(config, "Math Kernel Library Version") if mkl else None,
        "onednn": _version_in(config, "MKL-DNN") if onednn else None,
    }


def _version_in(config: str, marker: str) -> str | None:
    """The version torch's build configuration prints after ``marker`` (its first word)."""
    for line in config.splitlines():
        if marker in line:
            words = line.split(marker, 1)[1].split()
            return words[0] if words else None
    return None


def seed_everything(seed: int, deterministic: bool = True) -> None:
    """Seed python, numpy and torch (all devices); optionally ask for deterministic kernels."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        # cuBLAS needs this workspace setting for deterministic matmuls on CUDA
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    else:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.benchmark = True


def capture_rng_state() -> dict[str, Any]:
    """The RNG states of python, numpy, torch and CUDA as tensors, lists and numbers."""
    version, internal, gauss = random.getstate()
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": {"name": np_name, "keys": torch.from_numpy(np_keys.astype(np.int64)),
                  "pos": int(np_pos), "has_gauss": int(np_has_gauss), "gauss": float(np_gauss)},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_state`."""
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))
    np_state = state["numpy"]
    np.random.set_state((np_state["name"], np_state["keys"].numpy().astype(np.uint32),
                         np_state["pos"], np_state["has_gauss"], np_state["gauss"]))
    torch.set_rng_state(state["torch"].cpu())
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
