"""docs/adding-a-model.md, followed from a temporary folder: its model code is registered (in a
copy of the registry), its recipe written to a temporary recipe folder, its commands run, and
each record is checked the way the test the page names checks it. The page's example is not
part of the package: every step here shows that the test named beside it asks for it."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
import torch
from guide_steps import guide_lines, make_lines, preflight_section, run_line

from pairrepro import paths
from pairrepro.config import load_recipe
from pairrepro.device import cpu_has_bf16_units
from pairrepro.errors import ConfigError
from pairrepro.models import base

GUIDE = paths.PROJECT_DIR / "docs" / "adding-a-model.md"
NAME, RECIPE = "mean_pool", "mean_pool_synthetic"


def _blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


def _load(module_name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture()
def guide_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> type[base.PairModel]:
    """Step 1: the page's module, registered in a copy of the registry (undone after)."""
    base.available_models()  # the package's own models first
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    code, _tiny = _blocks("python")
    (tmp_path / f"{NAME}.py").write_text(code, encoding="utf-8")
    module = _load(f"pairrepro.models.{NAME}", tmp_path / f"{NAME}.py")
    assert base.available_models()[NAME] is module.MeanPool
    return module.MeanPool


def test_the_model_keeps_the_contract(guide_model: type[base.PairModel]) -> None:
    """[B, num_outputs] scores; padding changes nothing; a bad size fails naming the key."""
    torch.manual_seed(0)
    ctx = base.ModelContext(vocab_size=20, embed_dim=6, num_outputs=3)
    model = base.build_model(NAME, ctx, {"mlp_hidden": 5}).eval()
    left, right = torch.randint(2, 20, (4, 5)), torch.randint(2, 20, (4, 7))
    ones = [torch.ones_like(t, dtype=torch.bool) for t in (left, right)]
    out = model(left, ones[0], right, ones[1])
    assert out.shape == (4, 3)
    padded = torch.cat([left, torch.zeros(4, 3, dtype=left.dtype)], 1)
    mask = torch.cat([ones[0], torch.zeros(4, 3, dtype=torch.bool)], 1)
    assert torch.equal(model(padded, mask, right, ones[1]), out)
    with pytest.raises(ConfigError, match="mlp_hidden must be >= 1"):
        base.build_model(NAME, ctx, {"mlp_hidden": 0})


def test_the_guide_walks_end_to_end(guide_model: type[base.PairModel], tmp_path: Path,
                                    data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps 2 and 3: the recipe validates, and the page's commands write a golden config the
    golden test accepts and a preflight record the plan's gate accepts; the model facts and the
    test size are what the package lacks until the page's commands and line are added."""
    from pairrepro.planning.preflight_record import preflight_problem

    (recipe_text,) = _blocks("toml")
    project = tmp_path / "project"
    for folder in ("recipes", "tests/golden/configs", "bench/preflight"):
        (project / folder).mkdir(parents=True)
    (project / "recipes" / f"{RECIPE}.toml").write_text(recipe_text, encoding="utf-8")
    monkeypatch.setenv("PAIRREPRO_RECIPES", str(project / "recipes"))
    monkeypatch.chdir(project)
    ran = []
    for command in guide_lines(GUIDE):
        if command == "python bench/model_facts.py":  # checked below, never rewritten here
            continue
        for line in make_lines(command) if command.startswith("make ") else [command]:
            if line != "pairrepro results readme":  # rewrites the project's pages: see below
                run_line(line, project)
            ran.append(line)
    assert "pairrepro results readme" in ran
    # the golden config is what test_recipes_golden compares
    recipe = load_recipe(project / "recipes" / f"{RECIPE}.toml")
    golden = project / "tests" / "golden" / "configs" / f"{RECIPE}.toml"
    assert recipe.to_toml() == golden.read_text(encoding="utf-8")
    # the preflight record passes the gate of test_plan and `results add`, and the generated
    # preflight table of docs/preflight.md (test_readme_drift) would list it
    preflight = project / "bench" / "preflight"
    assert preflight_problem(RECIPE, recipe.to_dict(), preflight) == ""
    assert f"| `{RECIPE}` | synthetic " in preflight_section(preflight)
    # model facts: the committed file lacks the model, the script's facts() have it
    facts = _load("model_facts_script", paths.PROJECT_DIR / "bench" / "model_facts.py").facts()
    assert facts["models"][NAME] == {"defaults": {"mlp_hidden": 32}, "needs_training": True}
    committed = json.loads((paths.PROJECT_DIR / "bench" / "model_facts.json").read_text())
    assert NAME not in committed["models"]


def test_the_test_size_line_gives_a_bf16_step(guide_model: type[base.PairModel],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Step 3's TINY line: without it test_autocast's check fails; with it the shared bf16
    step of every trained model runs on the page's model."""
    import model_harness

    _code, tiny = _blocks("python")
    line = re.fullmatch(r'\s*"(\w+)": (\{.*\}),\s*', tiny)
    assert line and line.group(1) == NAME
    assert NAME not in model_harness.TINY
    monkeypatch.setitem(model_harness.TINY, NAME, ast.literal_eval(line.group(2)))
    model = model_harness.tiny_model(NAME, {"<pad>": 0, "<unk>": 1, "a": 2}, num_outputs=3)
    assert sum(p.numel() for p in model.parameters()) > 0
    if not cpu_has_bf16_units():  # as test_autocast: no CPU bf16 path to step on here
        pytest.skip("this CPU has no bf16 units: test_autocast skips the bf16 step too")
    model_harness.assert_one_bf16_step(NAME, torch.device("cpu"))


def test_every_registered_model_is_listed_in_the_recipes_page() -> None:
    """Step 1's last line: docs/recipes.md names every model a recipe can use."""
    text = (paths.PROJECT_DIR / "docs" / "recipes.md").read_text(encoding="utf-8")
    listed = text.split("Models available to recipes", 1)[1].split("\n\n", 1)[0]
    missing = [name for name in base.available_models() if f"`{name}`" not in listed]
    assert not missing, f"docs/recipes.md does not list {missing}"
