"""What a report reads of run folders (:func:`read_run` never raises: a damaged folder is status
``damaged``), a run's saved predictions and the recipe's ``summary.json``."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro.runs.folder import (
    CONFIG,
    PREDICTIONS,
    REPAIR,
    SUMMARY,
    DamagedRunError,
    RunFolder,
    write_json,
)

# the splits a reference run keeps no predictions of (train predictions are a fit diagnostic,
# large, and no table reads them)
COMPACT_SKIP = ("train",)


@dataclass
class RunInfo:
    """What a report needs of one seed folder (never raises on a damaged folder)."""

    recipe: str
    seed: int
    path: str
    # finished | running | interrupted | failed | damaged | unknown (no such folder) | stale
    # (result.json says running but its process is gone from this host)
    status: str
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    chosen_epoch: int | None = None
    commit: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    problem: str = ""  # damaged: which file and why

    def value(self, metric: str) -> float | None:
        """``"<split>.<metric>"`` of a finished run, or None."""
        split, name = metric.split(".", 1)
        value = self.metrics.get(split, {}).get(name)
        return float(value) if isinstance(value, int | float) else None

    @property
    def folder(self) -> RunFolder:
        return RunFolder(Path(self.path))


def process_gone(result: dict[str, Any]) -> bool:
    """True when ``result.json`` names a process on this host that no longer exists."""
    pid, host = result.get("pid"), result.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool) or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, owned by another user
    return False


def read_run(seed_dir: Path) -> RunInfo:
    """A seed folder's record; a damaged or incomplete one has status ``damaged`` and a
    ``problem`` naming the file."""
    folder = RunFolder(seed_dir)
    info = RunInfo(recipe=seed_dir.parent.name, seed=folder.seed, path=str(seed_dir),
                   status="unknown")
    try:
        result = folder.read_result()
        info.manifest = folder.read_manifest()
        info.config = folder.read_config()
    except DamagedRunError as exc:
        info.status, info.problem = "damaged", exc.message
        return info
    if not seed_dir.is_dir():
        return info  # no run here: "unknown"
    # result.json is a run's first file (train.lifecycle.SeedRun.start): a folder without it lost it
    problem = (f"{folder.result_path}: missing (a seed folder holds one from its start)"
               if not result else "")
    if result and result["status"] == "finished":
        problem = "; ".join(_missing_parts(folder, result, info.manifest))
    if problem:
        info.status, info.problem = "damaged", problem
        return info
    info.status = str(result["status"])
    if info.status == "running" and process_gone(result):
        info.status = "stale"
    info.metrics = result.get("metrics") or {}
    info.chosen_epoch = result.get("chosen_epoch")
    info.recipe = str(result.get("recipe", info.recipe))
    git = info.manifest.get("git")
    info.commit = str(git.get("commit") or "") if isinstance(git, dict) else ""
    return info


def _missing_parts(folder: RunFolder, result: dict[str, Any], manifest: dict[str, Any]
                   ) -> list[str]:
    """What a trainer-finished run lacks: a ``metrics.jsonl`` line per epoch run, and the
    predictions of each split it has metrics of (but :data:`COMPACT_SKIP`)."""
    epochs = manifest.get("epochs_run")
    if not isinstance(epochs, int) or isinstance(epochs, bool):
        return []
    missing = [f"{folder.predictions(split)}: missing (result.json records {split} metrics)"
               for split in result.get("metrics", {})
               if split not in COMPACT_SKIP and not folder.predictions(split).is_file()]
    try:
        lines = len(folder.read_metrics())
    except DamagedRunError as exc:
        return [*missing, exc.message]
    if lines != epochs:
        missing.append(f"{folder.metrics_path}: {lines} epoch line(s) where manifest.json "
                       f"records {epochs} epoch(s) run")
    return missing


def find_runs(runs_dir: Path, recipe: str) -> list[RunInfo]:
    """Every ``runs_dir/<recipe>/seed-*`` folder, sorted by seed."""
    runs = [read_run(d) for d in (runs_dir / recipe).glob("seed-*") if d.is_dir()]
    return sorted(runs, key=lambda r: r.seed)


def all_runs(runs_dir: Path) -> list[RunInfo]:
    """Every seed folder under ``runs_dir``, by recipe then seed."""
    if not runs_dir.is_dir():
        return []
    folders = [d for d in sorted(runs_dir.iterdir()) if d.is_dir()]
    return [run for d in folders for run in find_runs(runs_dir, d.name)]


def seed_folders(target: Path) -> list[RunFolder]:
    """A seed folder itself, or every seed folder (with a config) of a recipe's folder."""
    if (target / CONFIG).is_file():
        return [RunFolder(target)]
    folders = [RunFolder(p) for p in target.glob("seed-*") if (p / CONFIG).is_file()]
    return sorted(folders, key=lambda f: f.seed)


def write_summary(recipe_dir: Path, summary: dict[str, Any]) -> Path:
    """Write ``runs/<recipe>/summary.json`` (the seeds of the last ``train`` call)."""
    path = recipe_dir / SUMMARY
    write_json(path, summary)
    return path


def read_predictions(folder: RunFolder, key: str) -> Any:
    """``predictions/<key>.parquet`` as a DataFrame, or None when absent; a compact copy's
    classification split, saved without ``group_id``, gets it back as ``pair_id``."""
    import pandas as pd

    path = folder.predictions(key)
    if not path.is_file():
        return None
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise DamagedRunError(f"{path}: not a readable parquet file ({exc})",
                              hint=REPAIR) from None
    if "pair_id" in frame.columns and "group_id" not in frame.columns:
        frame.insert(1, "group_id", frame["pair_id"])
    return frame


def prediction_keys(folder: RunFolder) -> list[str]:
    """The splits a run saved predictions for (``dev``, ``test``, ``train``, ...)."""
    return sorted(p.stem for p in (folder.path / PREDICTIONS).glob("*.parquet"))


