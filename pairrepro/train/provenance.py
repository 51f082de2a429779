"""What a run records to be trusted and repeated: the manifest (:func:`build_manifest`: the
commit and whether the tree is dirty, package versions, device, CPU, threads, the prepared
data's sha256); ``pairrepro eval``: a run re-scored from one of its checkpoints, ensembles of
one recipe's runs (mean class probabilities, or scores for ranking) and the record of a kept
re-scoring (:func:`record_evaluation`)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pairrepro import paths
from pairrepro.config import Recipe
from pairrepro.data.batches import EncodedSplit
from pairrepro.data.prepared import PreparedDataset, load_prepared
from pairrepro.device import DistContext, cpu_fingerprint, device_name
from pairrepro.errors import ConfigError, DataError
from pairrepro.models.base import PairModel, count_parameters
from pairrepro.runs import RunFolder
from pairrepro.train.loop import predict_outputs
from pairrepro.train.setup import load_run_model, read_run_recipe, recipe_task, resolve_split

PACKAGES = ["pairrepro", "torch", "numpy", "pandas", "pyarrow", "typer", "rich", "scikit-learn"]


def _run_scores(run_dir: Path, split: str, checkpoint: str, variant: str = ""
                ) -> tuple[Recipe, EncodedSplit, np.ndarray, int, str]:
    recipe, model, data, device = load_run_model(run_dir, checkpoint, [split], variant)
    target = data.splits[resolve_split(recipe, split)]
    outputs = predict_outputs(model, target, recipe.train.eval_batch_size, device)
    return (recipe, target, recipe_task(recipe).scores(outputs), data.num_classes,
            data.no_positive)


def evaluate_run(run_dir: str | Path, split: str = "test", checkpoint: str = "best",
                 variant: str = "") -> dict[str, float]:
    """Re-score ``split`` (of ``variant`` when given) with the run's ``best`` or ``last``."""
    if checkpoint not in ("best", "last"):
        raise ConfigError(f"--checkpoint {checkpoint!r}: choose best or last")
    recipe, target, scores, num_classes, no_positive = _run_scores(Path(run_dir), split,
                                                                   checkpoint, variant)
    return recipe_task(recipe).metrics(target, scores, num_classes, no_positive)


def evaluate_ensemble(run_dirs: Sequence[str | Path], split: str = "test",
                      checkpoint: str = "best") -> dict[str, Any]:
    """Score the average class probabilities (ranking: scores) of runs of one recipe on the
    same data (checked by pair ids)."""
    if not run_dirs:
        raise ConfigError("ensemble: no runs given")
    recipe, target, total, num_classes, no_positive = _run_scores(Path(run_dirs[0]), split,
                                                                  checkpoint)
    total = total.astype(np.float64)
    for run_dir in run_dirs[1:]:
        other, other_target, scores, *_ = _run_scores(Path(run_dir), split, checkpoint)
        if other_target.pair_ids != target.pair_ids or other.task.loss != recipe.task.loss:
            raise DataError(f"ensemble: {run_dir} was scored on different pairs or with "
                            "a different loss than the first run",
                            hint="ensemble only seeds of one recipe")
        total = total + scores
    metrics = recipe_task(recipe).metrics(target, total / len(run_dirs), num_classes, no_positive)
    return {**metrics, "ensemble_size": float(len(run_dirs))}


def record_evaluation(run_dir: Path, split: str, variant: str, checkpoint: str,
                      metrics: dict[str, float]) -> Path:
    """Keep a re-scoring with the run, with how it was made, in ``evals/``."""
    folder = RunFolder(Path(run_dir))
    recipe, _ = read_run_recipe(folder)
    variant = variant or recipe.data.variant
    prepared = load_prepared(recipe.data.dataset, variant or None)
    target = prepared.root / f"{resolve_split(recipe, split)}.parquet"
    return folder.write_eval(split, variant, {
        "split": split, "variant": variant, "checkpoint": checkpoint, "metrics": metrics,
        "command": command_line(), "git": git_info(),
        "prepared_sha256": prepared.file_sha256([target.name]),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })


# untracked files here change what a run does (a new reader, dataset manifest or recipe):
# they make a run "dirty"; untracked files elsewhere (notes, outputs) do not
PROVENANCE_PATHS = ("pairrepro/", "recipes/", "data_manifests/")


def git_info(project_dir: Path | None = None) -> dict[str, Any]:
    """The commit and ``dirty`` (a changed tracked file, or an ``untracked`` one under
    :data:`PROVENANCE_PATHS`); all None outside a git checkout."""
    cwd = project_dir or paths.PROJECT_DIR

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True,
                              text=True, timeout=10, check=True).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        # -z: paths verbatim (no quoting); "XY path" entries, "??" = untracked
        entries = [e for e in git("status", "--porcelain", "-z",
                                  "--untracked-files=all").split("\0") if len(e) > 3]
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    changed = [e for e in entries if not e.startswith("??")]
    untracked = sorted(e[3:] for e in entries
                       if e.startswith("??") and e[3:].startswith(PROVENANCE_PATHS))
    return {"commit": commit, "dirty": bool(changed or untracked), "untracked": untracked[:50]}


def command_line() -> str:
    """The command this process was started with (program name without its path)."""
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])


def _version(package: str) -> str | None:
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        return importlib.metadata.version(package)
    return None


def build_manifest(recipe: Recipe, seed: int, prepared: PreparedDataset, device: torch.device,
                   precision: str, model: PairModel, dist_ctx: DistContext,
                   extra: dict[str, Any]) -> dict[str, Any]:
    """Everything needed to trust and repeat the run (updated when it finishes)."""
    return {
        "recipe": recipe.name, "recipe_source": paths.project_relative(recipe.source),
        "seed": seed, "git": git_info(), "packages": {name: _version(name) for name in PACKAGES},
        "python": platform.python_version(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "device": str(device), "device_name": device_name(device),
        "cpu": cpu_fingerprint(), "cpu_threads": torch.get_num_threads(),
        "world_size": dist_ctx.world_size, "precision": precision,
        "compiled": recipe.train.compile,
        "deterministic": recipe.train.deterministic,
        "dataset": recipe.data.dataset, "variant": recipe.data.variant,
        "prepared_dir": paths.project_relative(prepared.root),
        "prepared_sha256": prepared.file_sha256(),
        "parameters": count_parameters(model), "command": command_line(), **extra,
    }

