"""Where and how a run computes: device, precision, threads, seeds and determinism, the CPU
fingerprint a run records, and the process group of a distributed run."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import platform
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.weak import WeakIdKeyDictionary

from pairrepro.errors import ConfigError

# the CPU flags that decide which kernels oneDNN and MKL pick (and so the last bits of a run)
KERNEL_FLAGS = ("amx_bf16", "amx_tile", "avx512_bf16", "avx512f", "avx2")
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
# what OpenMP, MKL and OpenBLAS read in the processes a run starts
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def available_cores() -> int:
    """CPUs this process may run on (its affinity mask, lowered by a cgroup CPU quota)."""
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
    """``threads`` torch threads here and in child processes, and :func:`keep_freed_memory`."""
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    torch.set_num_threads(threads)
    keep_freed_memory()


@functools.cache
def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed memory (False off glibc): torch's CPU allocator does not
    cache, and re-faulting unmapped blocks cost a tenth of a TC-LSTM step."""
    if platform.system() != "Linux":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    # M_TRIM_THRESHOLD (-1) 1 GiB, M_MMAP_THRESHOLD (-3) 32 MiB: the largest glibc takes
    return bool(mallopt(-1, 1 << 30)) and bool(mallopt(-3, 32 << 20))


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
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    pairs = [line.partition(":")[::2] for line in text.splitlines()]
    return {key.strip(): value.strip() for key, value in reversed(pairs)}  # the first wins


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where there is none)."""
    return frozenset(_cpuinfo().get("flags", "").split())


def cpu_has_bf16_units() -> bool:
    """Does this CPU compute bf16 matrix products in hardware (AMX or AVX512-BF16)?"""
    return any(flag in cpu_flags() for flag in BF16_FLAGS)


def resolve_precision(name: str, device: torch.device) -> str:
    """``[train] precision`` for ``device`` (fp32 on CUDA turns TF32 off); bf16 on a CPU
    without bf16 units is a ConfigError (emulated ~80x slower, no bf16 LSTM)."""
    if name == "auto":
        name = "bf16" if device.type == "cuda" else "fp32"
    if device.type == "cuda" and name == "fp32":
        torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    if name == "bf16" and device.type == "cpu" and not cpu_has_bf16_units():
        raise ConfigError(
            f"[train] precision: 'bf16' needs a CPU with bf16 units (AMX or AVX512-BF16); "
            f"this one ({cpu_model()}, {torch.backends.cpu.get_cpu_capability()}) has none: "
            "bf16 would be emulated far slower than fp32, and LSTMs cannot run in it",
            hint="use --precision fp32 (or auto) on this machine")
    return name


def autocast(device: torch.device, precision: str = "fp32") -> contextlib.AbstractContextManager:
    """bf16 autocast on ``device`` when ``precision`` is bf16, else nothing."""
    return (torch.autocast(device.type, dtype=torch.bfloat16) if precision == "bf16"
            else contextlib.nullcontext())


_HOST_COPIES = WeakIdKeyDictionary()  # a tensor to_device made -> the host tensor it copied


def to_device(host: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``host`` on ``device``, copied without a wait; :func:`on_host` finds ``host`` again."""
    if host.device == torch.device(device):
        return host
    _HOST_COPIES[moved := host.to(device, non_blocking=True)] = host
    return moved


def on_host(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` on a CPU, the tensor :func:`to_device` copied, else a copy (a wait)."""
    host = tensor if tensor.device.type == "cpu" else _HOST_COPIES.get(tensor)
    return tensor.cpu() if host is None else host


def compiled(module: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``module`` under ``torch.compile``: CUDA graphs on a GPU, inductor on a CPU, a graph
    per batch shape (up to 64: the widened widths, the last batch's size)."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    return torch.compile(module, mode="reduce-overhead" if device.type == "cuda" else None,
                         dynamic=False)


def device_name(device: torch.device) -> str:
    """The GPU model, or "cpu" (the CPU's model is in :func:`cpu_fingerprint`)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    return (_cpuinfo().get("model name") or platform.processor() or platform.machine())


def cpu_fingerprint() -> dict[str, Any]:
    """What picks a CPU run's kernels: runs are bit-comparable only when these match."""
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
            return next(iter(line.split(marker, 1)[1].split()), None)
    return None


def seed_everything(seed: int, deterministic: bool = True) -> None:
    """Seed python, numpy and torch (all devices); optionally ask for deterministic kernels."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:  # cuBLAS needs this workspace setting for deterministic matmuls on CUDA
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(deterministic, warn_only=deterministic)
    torch.backends.cudnn.benchmark = not deterministic


def capture_rng_state() -> dict[str, Any]:
    """The RNG states of python, numpy, torch and CUDA as tensors, lists and numbers."""
    version, internal, gauss = random.getstate()
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    return {
        "python": [version, list(internal), gauss],
        "numpy": {"name": np_name, "keys": torch.from_numpy(np_keys.astype(np.int64)),
                  "pos": int(np_pos), "has_gauss": int(np_has_gauss), "gauss": float(np_gauss)},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


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


@dataclass
class DistContext:
    """This process's place in the job (``world_size == 1``: not distributed)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: str) -> tuple[torch.device, DistContext]:
    """This process's device and place in the job, joining the process group under torchrun."""
    device_t = resolve_device(device)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return device_t, DistContext()
    ctx = DistContext(rank=int(os.environ["RANK"]), world_size=world,
                      local_rank=int(os.environ.get("LOCAL_RANK", "0")))
    if device_t.type == "cuda":
        device_t = resolve_device("cuda", ctx.local_rank)
        torch.cuda.set_device(device_t)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_t.type == "cuda" else "gloo",
                                rank=ctx.rank, world_size=world)
    return device_t, ctx


#: The key of :func:`record_error`'s entry in an error file (beside torchelastic's own).
ERROR_KEY = "pairrepro"


def record_error(message: str, exit_code: int) -> None:
    """Leave this rank's error in ``TORCHELASTIC_ERROR_FILE`` for the launcher to report."""
    if not (path := os.environ.get("TORCHELASTIC_ERROR_FILE")):
        return
    now = time.time()
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"message": message, "timestamp": int(now),
                   ERROR_KEY: {"exit_code": exit_code, "time": now}}, handle)


@dataclass
class RankFailure:
    """How a job of :func:`launch_ranks` failed; ``message`` where rank 0 did not print it."""

    rank: int
    exit_code: int
    message: str | None = None


def launch_ranks(nproc: int, args: list[str]) -> RankFailure | None:
    """Run ``python -m pairrepro ARGS`` as ``nproc`` local ranks; None when all finished."""
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    logging.disable(logging.CRITICAL)  # this process only runs the agent meanwhile
    try:
        run(parse_args(["--standalone", f"--nproc-per-node={nproc}", "-m", "pairrepro",
                        *args]))
    except ChildFailedError as exc:
        return reported_failure(exc.failures)
    finally:
        logging.disable(logging.NOTSET)
    return None


def reported_failure(failures: dict[int, Any]) -> RankFailure:
    """The earliest error a rank recorded (rank 0 if it printed it), else the first failure."""
    recorded = {rank: failure for rank, failure in failures.items()
                if isinstance(failure.error_file_data.get(ERROR_KEY), dict)}
    if not recorded:  # a crash or a signal: what the ranks printed is all there is
        rank = min(failures, key=lambda r: (failures[r].timestamp, r))
        code = failures[rank].exitcode
        return RankFailure(rank, code if code > 0 else 128 - code if code < 0 else 1)
    rank = min(recorded, key=lambda r: (recorded[r].error_file_data[ERROR_KEY]["time"], r))
    message = recorded[rank].message
    printed = 0 in recorded and recorded[0].message == message
    if printed:  # the ranks met the same error, which rank 0 printed: name rank 0, whichever
        rank = 0  # rank happened to record it first (a race between processes)
    return RankFailure(rank, int(recorded[rank].error_file_data[ERROR_KEY]["exit_code"]),
                       None if printed else message)


def all_reduce_sum(values: list[float], ctx: DistContext) -> list[float]:
    """Sum numbers over ranks (identity when not distributed)."""
    if not ctx.enabled:
        return values
    # nccl only moves CUDA tensors; gloo moves CPU ones
    device = torch.cuda.current_device() if dist.get_backend() == "nccl" else "cpu"
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.cpu().tolist()


def gather_rows(rows: np.ndarray, outputs: np.ndarray, ctx: DistContext) -> tuple[
        np.ndarray, np.ndarray]:
    """Concatenate every rank's ``(rows, outputs)``; every rank receives the result."""
    if not ctx.enabled:
        return rows, outputs
    parts: list[tuple[np.ndarray, np.ndarray] | None] = [None] * ctx.world_size
    dist.all_gather_object(parts, (rows, outputs))
    return (np.concatenate([p[0] for p in parts if p is not None]),
            np.concatenate([p[1] for p in parts if p is not None]))


def barrier(ctx: DistContext) -> None:
    """Wait for every rank (no-op when not distributed)."""
    if ctx.enabled:
        dist.barrier()


def broadcast_object(obj: Any, ctx: DistContext) -> Any:
    """Rank 0's picklable ``obj`` on every rank (identity when not distributed)."""
    box = [obj]
    if ctx.enabled:
        dist.broadcast_object_list(box, src=0)
    return box[0]


def leave_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
