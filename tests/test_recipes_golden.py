"""Every recipe in recipes/ resolves (``extends`` chain merged, defaults filled) to exactly
the resolved config its file gave before recipes became deltas: tests/golden/configs/<name>.toml
holds ``recipe.to_toml()`` of every recipe as it was then, compared byte for byte, every key
``[recipe] description`` included (a recipe's description is its own, never inherited)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pairrepro import paths
from pairrepro.config import load_recipe

RECIPES = sorted((paths.PROJECT_DIR / "recipes").glob("*.toml"))
GOLDEN = Path(__file__).parent / "golden" / "configs"


def test_every_golden_config_has_its_recipe_and_back() -> None:
    golden = {p.stem for p in GOLDEN.glob("*.toml")}
    recipes = {p.stem for p in RECIPES}
    assert len(golden) == 103
    assert golden == recipes, (sorted(golden - recipes), sorted(recipes - golden))


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_resolves_to_its_golden_config(path: Path) -> None:
    expected = (GOLDEN / f"{path.stem}.toml").read_text(encoding="utf-8")
    assert load_recipe(path).to_toml() == expected
