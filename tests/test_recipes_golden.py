"""Every recipe in recipes/ resolves (``extends`` chain merged, defaults filled) to exactly
the resolved config its file gave before recipes became deltas: tests/golden/configs/<name>.toml
holds ``recipe.to_toml()`` of every recipe, compared byte for byte, the prose (``[recipe]
description`` and the ``change`` chain) included. A recipe added here needs its golden file;
write it from ``pairrepro train RECIPE --print-config`` once its resolved config is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from pairrepro import paths
from pairrepro.config import load_recipe
from pairrepro.fileio import read_toml

RECIPES = sorted((paths.PROJECT_DIR / "recipes").glob("*.toml"))
GOLDEN = Path(__file__).parent / "golden" / "configs"


def test_every_golden_config_has_its_recipe_and_back() -> None:
    golden = {p.stem for p in GOLDEN.glob("*.toml")}
    recipes = {p.stem for p in RECIPES}
    assert golden and golden == recipes, (sorted(golden - recipes), sorted(recipes - golden))


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_a_delta_says_what_it_changes_and_states_its_own_paper(path: Path) -> None:
    """A recipe that extends states one ``change`` line (or describes itself whole), so its
    inherited description is never read as all there is to it; and ``paper`` is not
    inherited, so a recipe that fills a paper's row states the paper it follows."""
    own = read_toml(path)
    section = own.get("recipe", {})
    if "extends" in own:
        assert isinstance(section.get("change"), str) or "description" in section, path.name
    recipe = load_recipe(path).recipe
    if recipe.reproduces or recipe.compares:
        assert recipe.paper, f"{path.name}: fills a table row but states no paper"


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_resolves_to_its_golden_config(path: Path) -> None:
    expected = (GOLDEN / f"{path.stem}.toml").read_text(encoding="utf-8")
    assert load_recipe(path).to_toml() == expected
