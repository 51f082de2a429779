"""Which recipe reproduces which paper row, and a recipe's settings as flat names.

Rows are tied to recipes at run time: a recipe declaring
``reproduces = [{paper = "clstm", table = 2, row = "four stacked TC-LSTMs"}]`` reproduces that
row (labels compared after dropping citations in parentheses, spaces and case, so
``"MV-LSTM(k=3)"`` and ``"single LSTM (Rocktäschel et al., 2015)"`` match). A recipe declaring
``compares = [{paper, table, row}]`` adds a row of its own below the paper's rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import PairreproError
from pairrepro.report.model_facts import model_defaults


def normalise_label(label: str) -> str:
    """Row labels compared without citations in parentheses, spaces or case."""
    no_cite = re.sub(r"\([^()]*\d{4}[a-z]?\)", "", label)
    return re.sub(r"[\s$]", "", no_cite).lower()


@dataclass
class RecipeIndex:
    """Every recipe in a folder and the table rows each one declares."""

    recipes: dict[str, Any]  # name -> pairrepro.config.Recipe
    rows: dict[tuple[str, int, str], list[str]]
    errors: dict[str, str]
    # (paper, table) -> [(printed label, recipe)] of comparison rows, in recipe-name order
    comparisons: dict[tuple[str, int], list[tuple[str, str]]] = field(default_factory=dict)

    def for_row(self, paper: str, table: int, label: str) -> list[str]:
        """The recipes declaring ``reproduces`` for this row."""
        return self.rows.get((paper, table, normalise_label(label)), [])


def load_recipe_index(recipes_dir: Path | None = None) -> RecipeIndex:
    """Read every ``*.toml`` recipe; invalid ones are kept as errors, not fatal."""
    from pairrepro.config import load_recipe

    folder = recipes_dir or paths.recipes_dir()
    recipes: dict[str, Any] = {}
    rows: dict[tuple[str, int, str], list[str]] = {}
    errors: dict[str, str] = {}
    comparisons: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
        try:
            recipe = load_recipe(path)
        except PairreproError as exc:
            errors[path.stem] = str(exc)
            continue
        recipes[recipe.name] = recipe
        for ref in recipe.recipe.reproduces:
            key = (ref.paper, ref.table, normalise_label(ref.row))
            rows.setdefault(key, []).append(recipe.name)
        for ref in recipe.recipe.compares:
            comparisons.setdefault((ref.paper, ref.table), []).append((ref.row, recipe.name))
    return RecipeIndex(recipes, rows, errors, comparisons)


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as flat ``section.key`` names."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def settings(config: dict[str, Any]) -> dict[str, Any]:
    """A recipe's (or a run's ``config.toml``) settings as flat ``section.key`` names.

    Recipes record only the model hyper-parameters they set, so the model constructor's
    defaults fill the other ``model.*`` names (from ``bench/model_facts.json``: the report
    does not import model code): a report or a figure then sees what the run actually used.
    Unknown model names (fake recipes) get no defaults.
    """
    flat = flatten(config)
    name = flat.get("model.name")
    defaults = model_defaults(name) if isinstance(name, str) else None
    for key, value in (defaults or {}).items():
        flat.setdefault(f"model.{key}", value)
    return flat
