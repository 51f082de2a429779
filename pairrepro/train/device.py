"""Device choice and mixed precision: CPU without a GPU, CUDA with bf16 autocast when present."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from pairrepro.errors import ConfigError


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


@contextlib.contextmanager
def autocast(device: torch.device) -> Iterator[None]:
    """bf16 autocast on CUDA; nothing on CPU (float32 keeps CPU runs exactly reproducible)."""
    if device.type == "cuda":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            yield
    else:
        yield


def device_name(device: torch.device) -> str:
    """Human-readable name of the device (GPU model or 'cpu')."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"
