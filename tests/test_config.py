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
from pairrepro.models.base import ModelContext, build_model
from pairrepro.tasks import TASKS

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
    assert "[model] name: missing key" in msg
    msg = error_of(write(tmp_path, '[model]\nname = "bilstm_max"\n'))
    assert "[data] dataset: missing key" in msg
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
                       num_outputs=TASKS[recipe.task.loss].num_outputs(num_classes),
                       trainable_embeddings=recipe.embeddings.trainable, vocab=vocab)
    torch.manual_seed(0)  # the engine always seeds before building a model
    model = build_model(recipe.model.name, ctx, recipe.model.hparams)
    assert sum(p.numel() for p in model.parameters()) >= 0


@pytest.mark.parametrize(("section", "key", "value", "allowed", "edge"), [
    ("train", "batch_size", "0", "greater than or equal to 1", "1"),
    ("train", "epochs", "0", "greater than or equal to 1", "1"),
    ("train", "patience", "-1", "greater than or equal to 0", "0"),
    ("optim", "lr", "nan", "finite", "0.5"),
    ("optim", "lr", "-1", "greater than 0", "1e-9"),
    ("optim", "lr", "inf", "finite", "100.0"),
    ("optim", "clip_norm", "-0.5", "greater than or equal to 0", "0.0"),
    ("optim", "lr_decay", "1.5", "less than or equal to 1", "1.0"),
    ("optim", "lr_decay", "0", "greater than 0", "0.01"),
    ("embeddings", "dim", "0", "greater than or equal to 1", "1"),
    ("data", "max_len", "-3", "greater than or equal to 0", "0"),
    ("recipe", "seeds", "[]", "at least 1", "[0]"),
])
def test_ranges_are_part_of_the_schema(tmp_path: Path, section: str, key: str, value: str,
                                       allowed: str, edge: str) -> None:
    path = write(tmp_path, BASE)
    with pytest.raises(ConfigError) as info:
        load_recipe(path, [f"{section}.{key}={value}"])
    assert info.value.exit_code == 2
    # the key came from --set, so the error names the --set, not the file
    assert info.value.message.startswith(f"--set {section}.{key}={value}: [{section}] {key}: ")
    assert allowed in info.value.message
    assert value == "[]" or f": {value}: " in info.value.message  # lists are not repeated
    # the edge of the range is allowed
    recipe = load_recipe(path, [f"{section}.{key}={edge}"])
    assert recipe.to_dict()[section][key] == tomllib.loads(f"v = {edge}")["v"]


def test_task_keys_a_task_does_not_use_keep_their_defaults(tmp_path: Path) -> None:
    ranking = BASE.replace('"nli"', '"ranking"') + '[task]\ntype = "ranking"\n'
    msg = error_of(write(tmp_path, ranking + 'loss = "hinge"\nmax_negatives_per_query = 8\n'))
    assert "[task] max_negatives_per_query: 8" in msg and "ranking/hinge" in msg
    assert "default 0" in msg and "margin, negatives" in msg
    msg = error_of(write(tmp_path, ranking + 'loss = "pointwise"\nmargin = 0.5\n'))
    assert "[task] margin: 0.5" in msg and "ranking/pointwise" in msg
    msg = error_of(write(tmp_path, BASE + "[task]\nnegatives = 4\n"))
    assert "[task] negatives: 4" in msg and "classification/cross_entropy" in msg
    # the same values where the task uses them, and defaults written out, are fine
    load_recipe(write(tmp_path, ranking + 'loss = "hinge"\nmargin = 0.5\nnegatives = 4\n'
                      "max_negatives_per_query = 0\n"))
    load_recipe(write(tmp_path, ranking + 'loss = "pointwise"\nmax_negatives_per_query = 8\n'
                      "margin = 1.0\nnegatives = 1\n"))


def test_with_changes_validates_again(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, BASE))
    changed = recipe.with_changes(data={"variant": "other"}, model={"hidden": 3})
    assert changed.data.variant == "other" and changed.data.dataset == "synthetic"
    assert changed.model.hparams == {"hidden": 3} and changed.name == "r"
    assert recipe.data.variant == "nli"  # the original is untouched
    with pytest.raises(ConfigError, match=r"\[train\] epochs: 0"):
        recipe.with_changes(train={"epochs": 0})


def test_extends_merges_tables_and_replaces_lists(tmp_path: Path) -> None:
    write(tmp_path, BASE.replace('variant = "nli"', 'variant = "nli"\ntest_splits = ["a", "b"]')
          + """
[recipe]
description = "the base"
paper = "cin"
seeds = [1, 2]
reproduces = [{paper = "cin", table = 2, row = "CIN"}]
[optim]
lr = 0.5
name = "adagrad"
""", "base.toml")
    write(tmp_path, """extends = "base.toml"
[recipe]
description = "the middle"
[data]
test_splits = ["test"]
[model]
dropout = 0.1
[optim]
lr = 0.25
""", "middle.toml")
    child = write(tmp_path, 'extends = "middle.toml"\n[model]\nhidden = 16\n', "child.toml")
    recipe = load_recipe(child, ["optim.clip_norm=5"])
    assert recipe.name == "child" and recipe.source == str(child)
    # tables merge key by key through the chain
    assert recipe.model.name == "bilstm_max"
    assert recipe.model.hparams == {"hidden": 16, "dropout": 0.1}
    assert (recipe.optim.name, recipe.optim.lr, recipe.optim.clip_norm) == ("adagrad", 0.25, 5.0)
    assert recipe.data.variant == "nli" and recipe.data.test_splits == ["test"]  # replaced
    # seeds and the prose carry over; what the base *is* (its paper and rows) does not, and
    # a file without a change line is named with the keys it sets
    assert recipe.recipe.paper == "" and recipe.seeds == [1, 2]
    assert recipe.recipe.description == "the middle" and recipe.recipe.reproduces == []
    assert recipe.recipe.change == ["child: sets model.hidden"]
    middle = load_recipe(tmp_path / "middle.toml").recipe  # its own description: no chain
    assert (middle.description, middle.change) == ("the middle", [])
    grandchild = write(tmp_path, 'extends = "child.toml"\n[recipe]\nchange = " hidden 4 "\n'
                       '[model]\nhidden = 4\n', "grandchild.toml")
    assert load_recipe(grandchild).recipe.change == ["child: sets model.hidden",
                                                     "grandchild: hidden 4"]
    assert load_recipe(tmp_path / "base.toml").recipe.reproduces[0].row == "CIN"
    # --set applies after the merge, and the resolved recipe needs no extends to reload
    again = load_recipe(write(tmp_path, recipe.to_toml(), "resolved.toml"))
    assert again.to_toml() == recipe.to_toml()


def test_a_recipe_on_another_dataset_restates_its_prose(tmp_path: Path) -> None:
    """A recipe moved to another dataset carried its base's description ("CSRAN on TrecQA
    (Table 6 ...)") into its run records: across datasets it must describe itself."""
    write(tmp_path, '[recipe]\ndescription = "BiLSTM on synthetic nli"\npaper = "cin"\n'
                 + BASE, "base.toml")
    same = write(tmp_path, 'extends = "base.toml"\nmodel.hidden = 4\n', "same.toml")
    assert load_recipe(same).recipe.description == "BiLSTM on synthetic nli"  # same dataset
    moved = write(tmp_path, 'extends = "base.toml"\ndata.dataset = "trecqa"\n'
                  'data.variant = "clean"\n', "moved.toml")
    with pytest.raises(ConfigError) as info:
        load_recipe(moved)
    assert str(moved) in info.value.message and "'trecqa'" in info.value.message
    assert "base.toml's 'synthetic'" in info.value.message and "description" in info.value.hint
    moved.write_text('extends = "base.toml"\nrecipe.description = "BiLSTM on TrecQA"\n'
                     'data.dataset = "trecqa"\ndata.variant = "clean"\n', encoding="utf-8")
    recipe = load_recipe(moved).recipe
    assert (recipe.description, recipe.paper, recipe.change) == ("BiLSTM on TrecQA", "", [])


def test_extends_errors_name_the_files(tmp_path: Path) -> None:
    write(tmp_path, 'extends = "b.toml"\n' + BASE, "a.toml")
    write(tmp_path, 'extends = "c.toml"\n', "b.toml")
    write(tmp_path, 'extends = "a.toml"\n', "c.toml")
    msg = error_of(tmp_path / "a.toml")
    assert "cycle" in msg and "a.toml -> b.toml -> c.toml -> a.toml" in msg
    assert "self.toml -> self.toml" in error_of(
        write(tmp_path, 'extends = "self.toml"\n', "self.toml"))
    msg = error_of(write(tmp_path, 'extends = "gone.toml"\n', "orphan.toml"))
    assert "orphan.toml: extends: 'gone.toml'" in msg and "no such file" in msg
    msg = error_of(write(tmp_path, "extends = 3\n" + BASE, "num.toml"))
    assert "num.toml: extends: 3" in msg
    # an error in the base names the base
    write(tmp_path, BASE + "[train]\nepochs = 'x'\n", "badbase.toml")
    msg = error_of(write(tmp_path, 'extends = "badbase.toml"\n', "kid.toml"))
    assert "kid.toml: [train] epochs: 'x'" in msg
    # a change line is one line of text, and only a recipe that extends has one
    write(tmp_path, BASE, "r.toml")
    msg = error_of(write(tmp_path, 'extends = "r.toml"\n[recipe]\nchange = 3\n', "c3.toml"))
    assert "c3.toml: [recipe] change: 3" in msg
    msg = error_of(write(tmp_path, BASE + '[recipe]\nchange = "x"\n', "root.toml"))
    assert "root.toml: [recipe] change" in msg and "extends none" in msg


def test_cli_error_keeps_section_brackets(tmp_path: Path) -> None:
    """rich reads "[optim]" as markup; the printed error must show it as written."""
    from typer.testing import CliRunner

    from pairrepro.cli.app import app

    path = write(tmp_path, BASE + "[optim]\nlearning_rate = 0.1\n[optimizer]\n")
    result = CliRunner().invoke(app, ["train", str(path), "--print-config"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "unknown section [optimizer]" in text
    assert "allowed sections: [recipe], [data], [embeddings], [model]" in text


def test_print_config_prints_the_resolved_recipe(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pairrepro.cli.app import app

    child = write(tmp_path, 'extends = "base.toml"\n[model]\nhidden = 16\n', "child.toml")
    write(tmp_path, BASE, "base.toml")
    result = CliRunner().invoke(app, ["train", str(child), "--print-config",
                                      "--set", "optim.lr=0.5", "--max-epochs", "3"])
    assert result.exit_code == 0, result.output
    assert result.output == load_recipe(child, ["optim.lr=0.5", "train.epochs=3"]).to_toml()
    printed = tomllib.loads(result.output)
    assert printed["model"] == {"name": "bilstm_max", "hidden": 16}
    assert printed["optim"]["lr"] == 0.5 and printed["train"]["epochs"] == 3
    assert not (tmp_path / "runs").exists() and not Path("runs/child").exists()


def test_the_users_own_recipes_and_manifests_add_to_the_shipped_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~/.config/pairrepro/recipes/`` and ``data_manifests/`` (beside the settings file)
    hold a user's own files: found by name beside the shipped ones, which keep their names."""
    from pairrepro.cli.train_cmds import resolve_recipe
    from pairrepro.planning.recipe_index import load_recipe_index

    mine = tmp_path / "config" / "pairrepro"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (mine / "recipes").mkdir(parents=True)
    write(mine / "recipes", BASE, "my_bilstm.toml")
    write(mine / "recipes", BASE, "csran_trecqa.toml")  # a shipped name: the shipped file
    (mine / "data_manifests").mkdir()
    synthetic = (paths.manifests_dir() / "synthetic.toml").read_text(encoding="utf-8")
    write(mine / "data_manifests", synthetic, "my_data.toml")
    assert resolve_recipe("my_bilstm") == mine / "recipes" / "my_bilstm.toml"
    assert resolve_recipe("csran_trecqa.toml") == paths.recipes_dir() / "csran_trecqa.toml"
    assert "my_bilstm" in load_recipe_index().recipes
    assert {"my_data", "synthetic"} <= set(available_datasets())
    assert load_manifest("my_data").source == str(mine / "data_manifests" / "my_data.toml")
