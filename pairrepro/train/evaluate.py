"""Re-scoring a run from one of its checkpoints, and ensembles of one recipe's runs (mean class
probabilities, or scores for ranking)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pairrepro.config import Recipe
from pairrepro.data.batches import EncodedSplit
from pairrepro.errors import ConfigError, DataError
from pairrepro.train.loop import predict_outputs
from pairrepro.train.setup import load_run_model, recipe_task, resolve_split


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
    metrics: dict[str, Any] = recipe_task(recipe).metrics(target, total / len(run_dirs),
                                                          num_classes, no_positive)
    metrics["ensemble_size"] = float(len(run_dirs))
    return metrics
