"""GPUs for the plan: peak bf16 FLOP/s (``gpus.toml``) and rates measured by gpu_check.sh."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairrepro.errors import ConfigError
from pairrepro.fileio import read_toml
from pairrepro.planning import BENCH_DIR

GPU_PEAKS = Path(__file__).with_name("gpus.toml")
GPU_RATES = BENCH_DIR / "records" / "gpu_rates.json"


def load_gpu_peaks(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """``gpus.toml``: ``{name: {bf16_tflops, name, source}}`` (dense bf16 peaks)."""
    return read_toml(path or GPU_PEAKS).get("gpus", {})


USABLE_SHARE = 0.9  # of a device's memory that runs packed onto it may fill
CONTEXT_MB = 1024.0  # per process beyond its peak: the CUDA context and allocator slack


def device_need_mb(record: dict[str, Any] | None) -> float | None:
    """A run's device memory by its preflight ``record`` (a CPU record's peak RSS stands in:
    docs/internals.md) + :data:`CONTEXT_MB`; None without a peak (a device to itself)."""
    return float(record["peak_mb"]) + CONTEXT_MB if record and record.get("peak_mb") else None


def runs_per_device(need_mb: float | None, memory_mb: float) -> int:
    """Runs of ``need_mb`` that fit together in :data:`USABLE_SHARE` of ``memory_mb`` (≥ 1)."""
    return max(1, int(memory_mb * USABLE_SHARE // need_mb)) if need_mb else 1


def gpu_key(device_name: str) -> str:
    """The ``gpus.toml`` name of a CUDA device name (in an entry's ``device_names``), else ""."""
    return next((key for key, entry in load_gpu_peaks().items()
                 if device_name.lower() in (n.lower() for n in entry.get("device_names", []))),
                "")


@dataclass(frozen=True)
class GpuRate:
    """A training rate measured on a GPU (``bench/records/gpu_rates.json``)."""

    pairs_per_s: float
    subject: str  # "esim on esim", "one epoch of <recipe>"
    precision: str
    run: str  # the device and date of the run
    runs: int = 1  # runs sharing the device: pairs_per_s is their total

    @property
    def what(self) -> str:
        return f"{self.subject} ({self.precision})"


def load_gpu_rates(gpu: str, path: Path | None = None) -> dict[tuple[str, str], GpuRate]:
    """``{(recipe or model, precision): rate}`` on GPU ``gpu`` (a ``gpus.toml`` name), each from
    the latest run that measured it, an epoch's figure over its recipe's preflight one; the
    total rate of runs sharing a device under ``(recipe or model, "shared " + precision)``."""
    p = path or GPU_RATES
    if not p.is_file():
        return {}
    try:
        runs = json.loads(p.read_text(encoding="utf-8"))["runs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{p}: cannot be read ({exc})",
                          hint="restore it (git checkout -- bench/records) or run "
                               "bench/gpu_check.sh again on the GPU") from None
    rates: dict[tuple[str, str], GpuRate] = {}
    for run in (r for r in runs if r.get("gpu") == gpu and not r.get("dry_run")):
        when = f"{run['device_name']}, {run['measured']}"
        for row in run.get("models", []):
            for precision in ("fp32", "bf16"):
                if speed := row.get(precision, {}).get("pairs_per_s"):
                    rate = GpuRate(float(speed), f"{row['model']} on {row['recipe']}",
                                   precision, when)
                    rates[(row["model"], precision)] = rates[(row["recipe"], precision)] = rate
            if (shared := row.get("shared", {})).get("pairs_per_s"):
                rate = GpuRate(float(shared["pairs_per_s"]), f"{shared['runs']} runs of "
                               f"{row['recipe']} sharing the device", shared["precision"],
                               when, int(shared["runs"]))
                for key in (row["model"], row["recipe"]):
                    rates[(key, f"shared {shared['precision']}")] = rate
        if (epoch := run.get("epoch", {})).get("pairs_per_s"):
            rates[(epoch["recipe"], epoch["precision"])] = GpuRate(
                float(epoch["pairs_per_s"]), f"one epoch of {epoch['recipe']}",
                epoch["precision"], when)
    return rates


def gpu_peak(name: str) -> tuple[str, float, float]:
    """The full name, peak dense bf16 FLOP/s and memory (MB) of GPU ``name``."""
    peaks = load_gpu_peaks()
    if (entry := peaks.get(name.lower())) is None:
        raise ConfigError(f"--gpu {name!r}: unknown GPU",
                          hint=f"known: {', '.join(sorted(peaks))} "
                               f"(pairrepro/planning/gpus.toml)")
    return str(entry["name"]), float(entry["bf16_tflops"]) * 1e12, entry["memory_gb"] * 1024.0
