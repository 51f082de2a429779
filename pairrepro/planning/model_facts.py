"""What report and plan know of models, from ``bench/model_facts.json`` (never model code):
constructor defaults, ``needs_training``, and θ_M per recipe for rows without a run."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pairrepro.errors import ConfigError
from pairrepro.planning import BENCH_DIR
from pairrepro.runs import RunInfo

MODEL_FACTS = BENCH_DIR / "model_facts.json"
REGENERATE = "regenerate it: python bench/model_facts.py"


@cache
def _facts() -> dict[str, Any]:
    if not MODEL_FACTS.is_file():
        return {}
    try:
        data = json.loads(MODEL_FACTS.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{MODEL_FACTS}: cannot be read ({exc})", hint=REGENERATE) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{MODEL_FACTS}: expected a JSON object", hint=REGENERATE)
    return data


def model_defaults(name: str) -> dict[str, Any] | None:
    """Constructor defaults of model ``name`` (None: not a known model)."""
    entry = _facts().get("models", {}).get(name)
    return dict(entry.get("defaults", {})) if isinstance(entry, dict) else None


def needs_training(name: str) -> bool | None:
    """Whether model ``name`` learns from the training split (None: not a known model)."""
    entry = _facts().get("models", {}).get(name)
    return bool(entry.get("needs_training", True)) if isinstance(entry, dict) else None


def weight_count(recipe_name: str, runs: list[RunInfo]) -> tuple[int, str] | None:
    """θ_M of a recipe and its source: a run's ``manifest.json``, else model_facts.json, or None."""
    for run in runs:
        parameters = run.manifest.get("parameters")
        weights = parameters.get("weights") if isinstance(parameters, dict) else None
        if isinstance(weights, int) and not isinstance(weights, bool):
            return weights, f"{run.path}/manifest.json"
    committed = _facts().get("weights", {})
    if recipe_name in committed:
        return int(committed[recipe_name]), "bench/model_facts.json"
    return None
