"""A run's torch checkpoints (``checkpoints/last.pt``, ``best.pt``): written atomically, read
with ``weights_only=True``. They hold tensors, numbers, strings, lists and dicts only, so no
code runs on load; a finished run's ``best.pt`` must be the one its ``result.json`` records
(chosen epoch, sha256). The only module of :mod:`pairrepro.runs` that imports torch."""

from __future__ import annotations

from io import BytesIO
from pathlib import Path
from typing import Any

from pairrepro import fileio
from pairrepro.errors import TrainingError
from pairrepro.runs.folder import DamagedRunError, writing

CHECKPOINT_FORMAT = 1


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically; a disk fault is a :class:`~pairrepro.errors.StorageError`
    (written from Python: torch's own writer hides the errno)."""
    import torch

    buffer = BytesIO()
    torch.save({"format_version": CHECKPOINT_FORMAT, **state}, buffer)
    with writing(path), fileio.atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getbuffer())


def load_checkpoint(path: Path, result: dict[str, Any] | None = None) -> dict[str, Any]:
    """Read a checkpoint onto the CPU; with ``result``, the finished run's chosen one (best.pt)."""
    import torch

    if not path.is_file():
        raise TrainingError(f"checkpoint {path} not found",
                            hint="train the run first, or pick --checkpoint last|best")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which one
        raise TrainingError(f"checkpoint {path} cannot be read: {exc}",
                            hint="delete it and re-train with --force") from exc
    if state.get("format_version") != CHECKPOINT_FORMAT:
        raise TrainingError(f"checkpoint {path} has format {state.get('format_version')!r}, "
                            f"expected {CHECKPOINT_FORMAT}", hint="re-train with --force")
    if result is not None:
        recorded = {"epoch": (state.get("epoch"), result.get("chosen_epoch")),
                    "sha256": (fileio.sha256_file(path), result.get("best_sha256"))}
        if wrong := [f"{key} {mine!s:.16} where result.json records {key} {theirs!s:.16}"
                     for key, (mine, theirs) in recorded.items() if theirs not in (None, mine)]:
            raise DamagedRunError(f"checkpoint {path} is not the one this run chose: "
                                  + "; ".join(wrong), hint="restore the run's own "
                                  "checkpoint, or re-train it with --force")
    return state
