"""What a recipe and its overrides may be, checked before anything runs, with errors that
point where the problem is (issue 38): ``extends`` stays in the recipe's folder; an error about
a key given with ``--set`` names the ``--set``; a byte-order mark is read as UTF-8 editors mean
it; ``--print-config`` refuses what building the model refuses; a model that is not trained has
no bf16 path, and a run of one records the precision that ran."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from synth_prepared import write_synthetic
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.config import load_recipe
from pairrepro.errors import ConfigError

NLI = paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml"
runner = CliRunner()


def error(*args: str) -> str:
    """The --json error of ``pairrepro ARGS``, which must exit 2."""
    out = runner.invoke(app, ["--json", *args])
    assert out.exit_code == 2, out.output
    return json.loads(out.output)["error"]


def test_extends_reaches_no_file_outside_the_recipes_folder(tmp_path: Path) -> None:
    """`extends = "../../outside.toml"` resolved: a committed recipe could then depend on
    a file the run's dirty check never sees. A link out of the folder is refused alike."""
    shutil.copy(NLI, tmp_path / "outside.toml")
    folder = tmp_path / "recipes" / "sub"
    folder.mkdir(parents=True)
    child = folder / "child.toml"
    child.write_text('extends = "../../outside.toml"\n[recipe]\nchange = "x"\n',
                     encoding="utf-8")
    with pytest.raises(ConfigError, match=r"extends: '\.\./\.\./outside\.toml': a recipe "
                                          r"extends a file in its own folder") as caught:
        load_recipe(child)
    assert caught.value.message.startswith(f"{child}: extends:")
    (folder / "base.toml").symlink_to(tmp_path / "outside.toml")
    child.write_text('extends = "base.toml"\n[recipe]\nchange = "x"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=f"and this is {tmp_path / 'outside.toml'}"):
        load_recipe(child)
    shutil.copy(NLI, folder / "beside.toml")  # the rule's own case still resolves
    child.write_text('extends = "beside.toml"\n[recipe]\nchange = "x"\n', encoding="utf-8")
    assert load_recipe(child).model.hparams["hidden"] == 48


@pytest.mark.parametrize(("override", "start"), [
    ("model.hiddne=7", "--set model.hiddne=7: [model] hiddne: model 'bilstm_max' has no "
                       "hyper-parameter"),
    ("optim.lr=fast", "--set optim.lr=fast: [optim] lr: 'fast': expected a number"),
    ("task.margin=2", "--set task.margin=2: [task] margin: 2.0: the classification"),
    ("model.name=nosuch", "--set model.name=nosuch: [model] name: unknown model 'nosuch'"),
    ("model.dropout=1.5", f"{NLI} with --set model.dropout=1.5: [model] bilstm_max:"),
])
def test_an_error_about_an_overridden_key_names_the_override(override: str, start: str) -> None:
    """`--set model.hiddne=7` was reported as `recipes/bilstm_max_synthetic.toml: [model]
    hiddne`, a key that file does not hold. A range check that does not say which key failed
    names the file with the section's overrides."""
    assert error("train", str(NLI), "--set", override, "--print-config").startswith(start)


def test_a_key_of_the_file_is_still_named_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "own.toml"
    path.write_text(NLI.read_text(encoding="utf-8").replace("hidden = 48", "hiden = 48"),
                    encoding="utf-8")
    message = error("train", str(path), "--set", "model.dropout=0.1", "--print-config")
    assert message.startswith(f"{path}: [model] hiden: model 'bilstm_max' has no"), message


def test_a_recipe_saved_with_a_byte_order_mark_reads_as_without(tmp_path: Path) -> None:
    """A UTF-8 recipe saved with a BOM (Windows editors) failed with "Invalid statement (at
    line 1, column 1)"."""
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + NLI.read_bytes())
    assert load_recipe(path).to_dict() == load_recipe(NLI).to_dict()
    out = runner.invoke(app, ["train", str(path), "--print-config"])
    assert out.exit_code == 0 and out.output.startswith("[recipe]\n"), out.output


def test_print_config_refuses_a_value_the_model_refuses(data_home: Path) -> None:
    """`--print-config --set model.dropout=1.5` printed the config with exit 0; only `train`
    refused it (when the model was built)."""
    write_synthetic(data_home, n_train=60, n_eval=30)
    for flags in (["--print-config"], ["--seeds", "1"]):
        message = error("train", str(NLI), "--set", "model.dropout=1.5", *flags)
        assert "0 <= dropout < 1" in message, message
    assert not paths.runs_dir().exists()


@pytest.mark.parametrize("recipe", ["esim_trecqa", "cin_trecqa"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_hyper_parameter_that_is_not_finite_is_refused_naming_it(recipe: str,
                                                                    value: str) -> None:
    """`--set model.dropout=nan` passed `--print-config` (1.5 was refused) and crashed
    training with a long traceback: NaN lies in no range."""
    path = paths.PROJECT_DIR / "recipes" / f"{recipe}.toml"
    message = error("train", str(path), "--set", f"model.dropout={value}", "--print-config")
    assert message.startswith(f"--set model.dropout={value}: [model] dropout:"), message


def _bm25_recipe(tmp_path: Path) -> Path:
    path = tmp_path / "bm25_synthetic.toml"
    path.write_text('[data]\ndataset = "synthetic"\nvariant = "ranking"\n'
                    '[model]\nname = "bm25"\n[task]\ntype = "ranking"\nloss = "pointwise"\n'
                    '[train]\nselect_metric = "map"\n', encoding="utf-8")
    return path


def test_a_model_that_is_not_trained_refuses_bf16(tmp_path: Path, data_home: Path) -> None:
    """BM25 took `--set train.precision=bf16` and recorded "precision": "bf16", though
    nothing of it runs in bf16."""
    write_synthetic(data_home, n_queries=20, n_eval_queries=10)
    recipe = _bm25_recipe(tmp_path)
    for flags in (["--print-config"], []):
        message = error("train", str(recipe), "--set", "train.precision=bf16", *flags)
        assert message.startswith("--set train.precision=bf16: [train] precision: 'bf16': "
                                  "model 'bm25' is not trained"), message
    assert not paths.runs_dir().exists()


def test_a_model_that_is_not_trained_records_fp32_where_auto_means_bf16(
        tmp_path: Path, data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``precision = "auto"`` is bf16 on CUDA: a BM25 run there recorded bf16. Here the CPU
    is made to resolve "auto" as CUDA does."""
    import pairrepro.train.runner as runner_module

    write_synthetic(data_home, n_queries=20, n_eval_queries=10)
    monkeypatch.setattr(runner_module, "resolve_precision", lambda name, device: "bf16")
    (result,) = runner_module.train_recipe(_bm25_recipe(tmp_path), quiet=True)
    manifest = json.loads((paths.runs_dir() / "bm25_synthetic" / "seed-1" / "manifest.json")
                          .read_text(encoding="utf-8"))
    assert result["status"] == "finished" and manifest["precision"] == "fp32"
