"""Fetch → prepare → train what paper tables need (``pairrepro reproduce``, ``make tables``).

No CLI here: :func:`run_tables` does the work and returns what ran and what failed; the CLI
(``cli/report_cmds.py``) renders the tables afterwards. Finished seeds are skipped,
interrupted ones resume. A recipe whose data cannot be fetched or prepared, or whose training
fails, is recorded in :attr:`Outcome.failed` and the others still run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pairrepro.data.prepared import data_status
from pairrepro.errors import PairreproError
from pairrepro.report.cells import table_recipes
from pairrepro.report.paper_tables import Paper, PaperTable
from pairrepro.report.recipe_index import RecipeIndex, load_recipe_index
from pairrepro.train.run_folder import find_runs


@dataclass
class Outcome:
    """What :func:`run_tables` did: recipes trained (or already finished), and why others
    could not run."""

    ran: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def _quiet(_kind: str, _message: str) -> None:
    return None


def run_tables(selected: list[tuple[Paper, PaperTable]], runs_dir: Path,
               seeds: list[int] | None = None, device: str | None = None,
               mirror: Path | None = None, comparisons: bool = False,
               progress: bool = True, index: RecipeIndex | None = None,
               notify: Callable[[str, str], None] = _quiet) -> Outcome:
    """Fetch, prepare and train every recipe of ``selected`` (and of their comparison rows
    with ``comparisons``) into ``runs_dir``; failures are collected, not raised.

    ``notify(kind, message)`` hears each step (``"training"``, ``"failed"``) so a caller can
    print it as it happens; ``progress`` draws the fetch/prepare/train progress bars.
    """
    from pairrepro.data.fetch import fetch_dataset
    from pairrepro.data.prepare import prepare_dataset
    from pairrepro.train.runner import train_recipe

    index = index or load_recipe_index()
    names = sorted({n for p, t in selected for n in table_recipes(p, t, index, comparisons)})
    outcome = Outcome()
    prepared: dict[tuple[str, str], str] = {}  # (dataset, variant) -> "" ok or the error
    for name in names:
        recipe = index.recipes[name]
        key = (recipe.data.dataset, recipe.data.variant)
        if key not in prepared:
            prepared[key] = ""
            ready, _ = data_status(*key)
            if not ready:
                try:
                    fetch_dataset(key[0], mirror=mirror, from_path=None, force=False,
                                  progress=progress)
                    prepare_dataset(key[0], variant=key[1] or None, strict=False,
                                    progress=progress)
                except PairreproError as exc:
                    prepared[key] = exc.message
        if prepared[key]:
            outcome.failed[name] = f"data: {prepared[key]}"
            continue
        wanted = seeds or recipe.seeds
        done = {r.seed for r in find_runs(runs_dir, name) if r.status == "finished"}
        todo = [s for s in wanted if s not in done]
        if todo:
            notify("training", f"training {name} seeds {todo}")
            try:
                train_recipe(recipe.source, [], todo, resume=True, device=device,
                             quiet=not progress, runs_dir=runs_dir)
            except PairreproError as exc:
                outcome.failed[name] = exc.message
                notify("failed", f"{name} failed: {exc.message}")
                continue
        outcome.ran.append(name)
    return outcome
