"""Recipe validation: errors name the file, the key and what is allowed; --set overrides;
every recipe in recipes/ validates and builds its model."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import torch

from pairrepro import paths
from pairrepro.config import load_recipe
from pairrepro.data.manifests import available_datasets, load_manifest
from pairrepro.errors import ConfigError
from pairrepro.models.base import ModelContext
from pairrepro.models.registry import build_model
from pairrepro.train.losses import num_outputs_for

BASE = """
[data]
dataset = "synthetic"
variant = "nli"
[model]
name = "bilstm_max"
hidden = 8
"""
RECIPES = sorted((paths.PROJECT_DIR / "recipes").glob("*.toml"))


def write(tmp_path: Path, text: str, name: str = "r.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path, overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_recipe(path, overrides)
    return str(info.value)


def test_valid_recipe_and_defaults(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, BASE))
    assert recipe.name == "r" and recipe.model.hparams == {"hidden": 8}
    assert recipe.select_metric == "accuracy" and recipe.train.epochs == 10
    again = tomllib.loads(recipe.to_toml())
    assert again["model"] == {"name": "bilstm_max", "hidden": 8}


def test_unknown_key_names_file_section_and_allowed(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "[optim]\nlearning_rate = 0.1\n")
    msg = error_of(path)
    assert str(path) in msg and "[optim]" in msg and "learning_rate" in msg
    assert "allowed keys" in msg and "lr" in msg
    assert "unknown section [optimizer]" in error_of(write(tmp_path, BASE + "[optimizer]\n"))


def test_wrong_type_and_choice(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, BASE + '[optim]\nlr = "fast"\n'))
    assert "[optim] lr" in msg and "expected a number" in msg and "'fast'" in msg
    msg = error_of(write(tmp_path, BASE + '[optim]\nname = "lbfgs"\n'))
    assert "'lbfgs'" in msg and "'adagrad'" in msg
    msg = error_of(write(tmp_path, BASE + '[train]\nepochs = 2.5\n'))
    assert "[train] epochs" in msg and "integer" in msg
    msg = error_of(write(tmp_path, BASE + '[task]\ntype = "ranking"\nloss = "cross_entropy"\n'))
    assert "does not fit type 'ranking'" in msg and "hinge" in msg


def test_missing_field(tmp_path: Path) -> None:
    msg = error_of(write(tmp_path, '[data]\ndataset = "x"\n[model]\nhidden = 3\n'))
    assert "missing key [model] name" in msg
    msg = error_of(write(tmp_path, '[model]\nname = "bilstm_max"\n'))
    assert "missing key [data] dataset" in msg
    assert "not found" in error_of(tmp_path / "absent.toml")


def test_unknown_model_and_hyper_parameter() -> None:
    ctx = ModelContext(vocab_size=10, embed_dim=4, num_outputs=3)
    with pytest.raises(ConfigError) as info:
        build_model("no_such_model", ctx, {})
    assert "no_such_model" in str(info.value) and "bilstm_max" in str(info.value)
    with pytest.raises(ConfigError) as info:
        build_model("bilstm_max", ctx, {"hiden": 5})
    assert "'hiden'" in str(info.value) and "hidden" in str(info.value)


def test_set_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    recipe = load_recipe(path, ["model.hidden=100", "optim.lr=0.5", 'optim.name="adagrad"',
                                "train.select_metric=macro_f1", "data.test_splits=['a', 'b']"])
    assert recipe.model.hparams["hidden"] == 100 and recipe.optim.lr == 0.5
    assert recipe.optim.name == "adagrad" and recipe.select_metric == "macro_f1"
    assert recipe.data.test_splits == ["a", "b"]
    assert "expected section.key=value" in error_of(path, ["model.hidden"])
    assert "section.key" in error_of(path, ["hidden=3"])
    assert "[train] epochs" in error_of(path, ["train.epochs=many"])


@pytest.mark.parametrize("path", RECIPES, ids=[p.stem for p in RECIPES])
def test_every_recipe_validates_and_builds_its_model(path: Path) -> None:
    recipe = load_recipe(path)
    assert recipe.data.dataset in available_datasets(), f"{path}: unknown dataset"
    for row in recipe.recipe.reproduces:
        assert row.paper in {"clstm", "dflstm", "mvlstm", "csran", "cin"}, path
    labels = load_manifest(recipe.data.dataset).label_map
    num_classes = 2 if recipe.task.type == "ranking" else len(labels)
    vocab = ["<pad>", "<unk>", *(f"w{i}" for i in range(18))]
    ctx = ModelContext(vocab_size=len(vocab), embed_dim=recipe.embeddings.dim,
                       num_outputs=num_outputs_for(recipe.task.loss, num_classes),
                       trainable_embeddings=recipe.embeddings.trainable, vocab=vocab)
    torch.manual_seed(0)  # the engine always seeds before building a model
    model = build_model(recipe.model.name, ctx, recipe.model.hparams)
    assert sum(p.numel() for p in model.parameters()) >= 0
