"""Which recipe fills which paper row (``reproduces``, or ``compares``: a row of its own)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import ConfigError, PairreproError
from pairrepro.planning.model_facts import model_defaults
from pairrepro.planning.paper_tables import Paper, PaperTable, Row, load_paper
from pairrepro.runs import flatten_config as flatten


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


def _check_datasets(recipe: Any, cache: dict[tuple[str, int], PaperTable | None]) -> None:
    """Every row a recipe ``reproduces`` or ``compares`` is on its table's dataset."""
    for kind, refs in (("reproduces", recipe.recipe.reproduces),
                       ("compares", recipe.recipe.compares)):
        for ref in refs:
            if (ref.paper, ref.table) not in cache:  # None: no such paper or table
                try:
                    cache[(ref.paper, ref.table)] = load_paper(ref.paper).table(ref.table)
                except ConfigError:
                    cache[(ref.paper, ref.table)] = None
            table = cache[(ref.paper, ref.table)]
            if table is not None and table.datasets and recipe.data.dataset not in table.datasets:
                raise ConfigError(
                    f"{recipe.source}: [recipe] {kind} {table.name} row {ref.row!r} "
                    f"(\"{table.caption}\"), but [data] dataset is "
                    f"{recipe.data.dataset!r}: that table's rows are on "
                    f"{' or '.join(repr(d) for d in table.datasets)}",
                    hint=f"remove the {kind} entry (a recipe copied from another dataset "
                         "keeps it), or train the recipe on the table's dataset")


def load_recipe_index(recipes_dir: Path | None = None) -> RecipeIndex:
    """Every ``*.toml`` recipe, invalid ones as errors; a row on another dataset: ConfigError."""
    from pairrepro.config import load_recipe

    index = RecipeIndex({}, {}, {})
    tables: dict[tuple[str, int], PaperTable | None] = {}
    for _, path in sorted(paths.toml_files(recipes_dir or paths.recipes_dir()).items()):
        try:
            recipe = load_recipe(path)
        except PairreproError as exc:
            index.errors[path.stem] = str(exc)
            continue
        _check_datasets(recipe, tables)
        index.recipes[recipe.name] = recipe
        for ref in recipe.recipe.reproduces:
            key = (ref.paper, ref.table, normalise_label(ref.row))
            index.rows.setdefault(key, []).append(recipe.name)
        for ref in recipe.recipe.compares:
            index.comparisons.setdefault((ref.paper, ref.table), []).append((ref.row, recipe.name))
    return index


def settings(config: dict[str, Any]) -> dict[str, Any]:
    """A recipe's or run's flat ``section.key`` settings, unset ``model.*`` keys at defaults."""
    flat = flatten(config)
    name = flat.get("model.name")
    defaults = model_defaults(name) if isinstance(name, str) else None
    for key, value in (defaults or {}).items():
        flat.setdefault(f"model.{key}", value)
    return flat


COMPARISON_BLOCK = "comparison"  # the block of the rows recipes add with ``compares``


def row_recipes(paper: str, table: PaperTable, row: Row, index: RecipeIndex) -> list[str]:
    """The recipes that reproduce ``row``: the one it names, else those declaring it."""
    if row.recipe:
        if row.recipe not in index.recipes:
            raise ConfigError(f"{paper} Table {table.number} row {row.label!r}: recipe "
                              f"{row.recipe!r} not found", hint=index.errors.get(
                                  row.recipe, "check recipes/ (or $PAIRREPRO_RECIPES)"))
        return [row.recipe]
    found = index.for_row(paper, table.number, row.label)
    if not found and row.cite:
        found = index.for_row(paper, table.number, row.printed_label)
    return sorted(set(found))


def comparison_rows(paper: Paper, table: PaperTable, index: RecipeIndex) -> list[Row]:
    """The rows recipes add below ``table`` with ``compares`` (none for hparams tables)."""
    if table.kind == "hparams":
        return []
    return [Row(label=label, values={}, block=COMPARISON_BLOCK, recipe=recipe)
            for label, recipe in index.comparisons.get((paper.paper, table.number), [])]


def table_recipes(paper: Paper, table: PaperTable, index: RecipeIndex,
                  comparisons: bool = False) -> list[str]:
    """Every recipe of a row of ``table`` (``comparisons``: and of its comparison rows)."""
    rows = [] if table.kind == "hparams" else table.rows
    names = {name for row in rows for name in row_recipes(paper.paper, table, row, index)}
    if comparisons:
        names.update(row.recipe for row in comparison_rows(paper, table, index))
    return sorted(names)
