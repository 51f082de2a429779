"""Checkpoints: everything needed to continue a run exactly, loadable with
``torch.load(weights_only=True)`` (tensors, numbers, strings, lists and dicts only).

A training checkpoint holds: ``model``, ``optimizer``, ``scheduler`` state dicts;
``rng`` (python/numpy/torch/CUDA, see :mod:`pairrepro.train.seeding`); ``progress``
(epoch, position of the next batch in the epoch's order, global step, running loss
sums, early-stopping state, per-epoch history); and ``meta`` (recipe name, seed).
"""

from __future__ import annotations

from io import BytesIO
from pathlib import Path
from typing import Any

import torch

from pairrepro import io
from pairrepro.errors import TrainingError
from pairrepro.runs import writing

FORMAT_VERSION = 1


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically: a crash mid-write leaves the previous file intact (a full
    disk is a :class:`~pairrepro.errors.StorageError`)."""
    buffer = BytesIO()
    torch.save({"format_version": FORMAT_VERSION, **state}, buffer)
    # written from Python, not by torch's own file writer: a full disk is then an OSError
    # with its errno (torch reports it as a bare RuntimeError)
    with writing(path), io.atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getbuffer())


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True`` (no arbitrary code runs on load)."""
    if not path.is_file():
        raise TrainingError(f"checkpoint {path} not found",
                            hint="train the run first, or pick --checkpoint last|best")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which one
        raise TrainingError(f"checkpoint {path} cannot be read: {exc}",
                            hint="delete it and re-train with --force") from exc
    if state.get("format_version") != FORMAT_VERSION:
        raise TrainingError(f"checkpoint {path} has format {state.get('format_version')!r}, "
                            f"expected {FORMAT_VERSION}", hint="re-train with --force")
    return state
