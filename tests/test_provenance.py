"""Provenance (issue 17): untracked files that change what a run does make it ``dirty``, and a
recipe's row must be on its table's dataset."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.errors import ConfigError
from pairrepro.planning.paper_tables import PAPERS, load_paper
from pairrepro.planning.recipe_index import load_recipe_index
from pairrepro.train.provenance import git_info

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                        "HOME": str(repo), "PATH": "/usr/bin:/bin"})


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git checkout with the project's top-level folders and one commit."""
    root = tmp_path / "repo"
    for name in ("pairrepro/data/formats", "recipes", "data_manifests", "docs"):
        (root / name).mkdir(parents=True)
    (root / "pairrepro" / "__init__.py").write_text("")
    (root / "recipes" / "a.toml").write_text("[recipe]\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "init")
    return root


def test_clean_checkout_and_untracked_notes_are_not_dirty(repo: Path) -> None:
    info = git_info(repo)
    assert len(info["commit"]) == 40 and info["dirty"] is False
    (repo / "notes.txt").write_text("scratch")  # untracked, outside the code and recipes
    (repo / "docs" / "draft.md").write_text("draft")
    assert git_info(repo)["dirty"] is False


@pytest.mark.parametrize("new_file", ["pairrepro/data/formats/new_reader.py",
                                      "data_manifests/new_dataset.toml",
                                      "recipes/new_recipe.toml"])
def test_an_untracked_reader_manifest_or_recipe_makes_the_run_dirty(repo: Path,
                                                                    new_file: str) -> None:
    (repo / new_file).write_text("x = 1\n")
    info = git_info(repo)
    assert info["dirty"] is True and info["untracked"] == [new_file]


def test_a_modified_tracked_file_is_dirty(repo: Path) -> None:
    (repo / "recipes" / "a.toml").write_text("[recipe]\nseeds = [2]\n")
    assert git_info(repo)["dirty"] is True


def test_not_a_git_checkout_records_unknown(tmp_path: Path) -> None:
    assert git_info(tmp_path) == {"commit": None, "dirty": None}


# --------------------------------------------------------------------------- table datasets
def test_every_table_dataset_is_a_dataset_manifest() -> None:
    """A table's dataset is compared with recipes' [data] dataset: it must be a real name."""
    known = {p.stem for p in paths.manifests_dir().glob("*.toml")}
    for name in PAPERS:
        for table in load_paper(name).tables:
            assert set(table.datasets) <= known, (table.name, table.datasets)


def _copied_recipe(tmp_path: Path) -> Path:
    """csran_trecqa.toml copied to Quora with its Table 6 lines left in."""
    folder = tmp_path / "recipes"
    shutil.copytree(paths.recipes_dir(), folder)  # recipes extend each other
    text = (paths.recipes_dir() / "csran_trecqa.toml").read_text()
    assert 'dataset = "trecqa"' in text and "table = 6" in text
    text = text.replace('dataset = "trecqa"', 'dataset = "quora"').replace(
        'variant = "clean"', 'variant = ""')
    (folder / "csran_quora_copy.toml").write_text(text)
    return folder


def test_a_row_on_another_dataset_is_refused_naming_recipe_and_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _copied_recipe(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_recipe_index(folder)
    message = str(caught.value)
    assert "csran_quora_copy.toml" in message and "csran Table 6" in message
    assert "'quora'" in message and "'trecqa'" in message
    # the report refuses too (exit 2) rather than print Quora numbers as TrecQA ones
    monkeypatch.setenv("PAIRREPRO_RECIPES", str(folder))
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs"))
    result = CliRunner().invoke(app, ["report", "csran", "--table", "6", "--format", "md"])
    assert result.exit_code == 2 and "csran_quora_copy" in "".join(result.output.split())


def test_table8_columns_accept_each_of_their_datasets() -> None:
    """CSRAN Table 8 has no table dataset: its columns' datasets are the allowed ones, and the
    shipped recipes all pass the check."""
    table = load_paper("csran").table(8)
    assert set(table.datasets) == {"snli", "scitail", "trecqa"}
    index = load_recipe_index()
    assert not index.errors and index.recipes
