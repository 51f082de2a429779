"""Write ``bench/model_facts.json``, what the report needs to know about the models without
importing them (``pairrepro/planning/model_facts.py`` reads it):

* per model: its constructor defaults and ``needs_training``;
* per recipe of a paper table's parameter column: θ_M (weight matrices without embeddings and
  biases, as the papers count it), for rows not run yet (a run records its own count in
  ``manifest.json``, ``parameters.weights``).

``tests/test_model_facts.py`` checks that the file equals what the models give; after
changing a model or such a recipe, rerun::

    .venv/bin/python bench/model_facts.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pairrepro.config import Recipe
from pairrepro.data.manifests import load_manifest
from pairrepro.errors import PairreproError
from pairrepro.models.base import (
    ModelContext,
    available_models,
    build_model,
    count_weight_params,
    model_hparams,
)
from pairrepro.planning.model_facts import MODEL_FACTS
from pairrepro.planning.paper_tables import PAPERS, load_paper
from pairrepro.planning.recipe_index import RecipeIndex, load_recipe_index, table_recipes
from pairrepro.tasks import task_for

VOCAB_SIZE = 10  # embedding tables are not counted: any vocabulary gives the same θ_M


def params_recipes(index: RecipeIndex) -> list[str]:
    """The recipes of the rows of every table that has a parameter-count column."""
    names: set[str] = set()
    for name in PAPERS:
        paper = load_paper(name)
        for table in paper.tables:
            if any(c.kind == "params" for c in table.columns):
                names.update(table_recipes(paper, table, index))
    return sorted(names)


def weight_count(recipe: Recipe) -> int:
    """θ_M of the model ``recipe`` builds (outputs as its task and dataset's classes say)."""
    task = task_for(recipe.task.type, recipe.task.loss)
    try:
        label_map = load_manifest(recipe.data.dataset).label_map
    except PairreproError:
        label_map = None
    outputs = task.num_outputs(task.num_classes(label_map, max_label=2))
    ctx = ModelContext(vocab_size=VOCAB_SIZE, embed_dim=recipe.embeddings.dim,
                       num_outputs=outputs)
    model = build_model(recipe.model.name, ctx, recipe.model.hparams)
    return count_weight_params(model)


def counts(index: RecipeIndex | None = None) -> dict[str, int]:
    """``{recipe: θ_M}`` for :func:`params_recipes`."""
    index = index or load_recipe_index()
    return {name: weight_count(index.recipes[name]) for name in params_recipes(index)}


def models() -> dict[str, dict[str, Any]]:
    """``{model: {"needs_training": bool, "defaults": {hyper-parameter: default}}}``."""
    out = {}
    for name, cls in available_models().items():
        defaults = {key: param.default for key, param in model_hparams(name).items()
                    if param.default is not param.empty}
        out[name] = {"needs_training": bool(cls.needs_training), "defaults": defaults}
    return out


def facts(index: RecipeIndex | None = None) -> dict[str, Any]:
    """The whole file's content (JSON-shaped: tuples as lists)."""
    data = {"about": "what the report knows of the models without importing them; "
                     "written by python bench/model_facts.py",
            "models": models(), "weights": counts(index)}
    return json.loads(json.dumps(data))


def main(path: Path = MODEL_FACTS) -> None:
    data = facts()
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    print(f"wrote {path} ({len(data['models'])} models, {len(data['weights'])} recipe "
          "counts)", file=sys.stderr)


if __name__ == "__main__":
    main()
