"""docs/adding-a-dataset.md, its commands followed line by line in a temporary project folder:
a reader module (kept outside the package, found through ``$PAIRREPRO_READERS``), a manifest,
the published files fetched with ``--from``, preprocess, the recipe's records (``make
recipe-records``, expanded from the Makefile), a tiny recipe trained for one epoch, and the
report of the run. Nothing of the package is changed: if a step needed core code, this test
would fail; each record is checked as the test that asks for it checks it."""

from __future__ import annotations

import hashlib
import json
import random
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from guide_steps import guide_lines, make_lines, preflight_section, run_line

from pairrepro import paths
from pairrepro.config import load_recipe
from pairrepro.planning.preflight_record import preflight_problem

GUIDE = paths.PROJECT_DIR / "docs" / "adding-a-dataset.md"
NAME = "bilstm_max_toy"  # the recipe of the guide's commands

READER = '''\
"""Toy pairs: ``left<SEP>right<SEP>yes|no`` per line."""

from __future__ import annotations

from pathlib import Path

from pairrepro.data.formats import ReaderOptions, ReaderResult
from pairrepro.data.formats._common import PairCollector, numbered_lines, raw_file, split_options
from pairrepro.data.manifests import SplitSpec, VariantSpec


class Options(ReaderOptions):
    separator: str = "\\t"


def read_split(raw_root: Path, split: SplitSpec, variant: VariantSpec) -> ReaderResult:
    sep = split_options(split, variant, Options).separator
    labels = variant.options.label_map
    out = PairCollector()
    for rel in split.files:
        for number, line in numbered_lines(raw_file(raw_root, rel)):
            fields = line.split(sep)
            if len(fields) != 3 or fields[2] not in labels:
                out.bad(rel, number, "expected left, right and a label")
                continue
            out.add(f"{split.name}-{number}", f"{split.name}-{number}", fields[0], fields[1],
                    labels.index(fields[2]))
    return out.result()
'''

RECIPE = """\
[recipe]
description = "BiLSTM-max on the toy pairs"
seeds = [1]

[data]
dataset = "toy"
test_splits = ["test"]

[embeddings]
source = "random"
dim = 8

[model]
name = "bilstm_max"
hidden = 8
mlp_hidden = 8

[task]
type = "classification"
loss = "cross_entropy"

[optim]
name = "adam"
lr = 0.01

[train]
epochs = 1
batch_size = 16
select_metric = "accuracy"
"""

WORDS = ["red", "blue", "cat", "dog", "sun", "moon", "tree", "river", "stone", "bird"]
SIZES = {"train": 96, "dev": 32, "test": 40}


def _published(folder: Path) -> dict[str, list[str]]:
    """The toy release: ``<split>.txt`` with ``;`` between fields and one malformed line in
    test; returns the label of every well-formed line, by split."""
    rng = random.Random(7)
    labels: dict[str, list[str]] = {}
    for split, n in SIZES.items():
        lines, labels[split] = [], []
        for _ in range(n):
            left = rng.sample(WORDS, 3)
            same = rng.random() < 0.5
            right = left[::-1] if same else rng.sample(WORDS, 3)
            label = "yes" if same else "no"
            lines.append(f"{' '.join(left)};{' '.join(right)};{label}")
            labels[split].append(label)
        if split == "test":
            lines.append("a line without fields")
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return labels


def _manifest(published: Path) -> str:
    files = "".join(textwrap.dedent(f"""
        [[files]]
        path = "{split}.txt"
        url = ""
        sha256 = "{hashlib.sha256((published / f'{split}.txt').read_bytes()).hexdigest()}"
        size = {(published / f'{split}.txt').stat().st_size}
        splits = ["{split}"]
        """) for split in SIZES)
    splits = "".join(textwrap.dedent(f"""
        [variants.plain.splits.{split}]
        files = ["{split}.txt"]
        expected = {{ pairs = {n} }}
        """) for split, n in SIZES.items())
    return textwrap.dedent("""\
        name = "toy"
        title = "Toy pairs (test data)"
        task = "classification"
        reader = "toy_pairs"
        licence = "CC0"
        homepage = ""
        citation = ""
        public = true
        notes = ""
        label_map = ["no", "yes"]
        default_variant = "plain"
        """) + files + textwrap.dedent("""
        [variants.plain]
        description = "as published"
        tokenizer = "whitespace"
        separator = ";"
        """) + splits


@pytest.fixture
def _forget_the_reader() -> Iterator[None]:
    yield  # the reader module is registered under the package's name: not for other tests
    sys.modules.pop("pairrepro.data.formats.toy_pairs", None)


@pytest.mark.usefixtures("_forget_the_reader")
def test_a_toy_dataset_goes_from_files_to_a_report(
        tmp_path: Path, manifests: Path, data_home: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    readers, published, project = tmp_path / "readers", tmp_path / "download", tmp_path / "p"
    for folder in (readers, published, *(project / sub for sub in (
            "recipes", "tests/golden/configs", "bench/preflight"))):
        folder.mkdir(parents=True)
    (readers / "toy_pairs.py").write_text(READER, encoding="utf-8")
    monkeypatch.setenv("PAIRREPRO_READERS", str(readers))
    labels = _published(published)
    (manifests / "toy.toml").write_text(_manifest(published), encoding="utf-8")
    (project / "recipes" / f"{NAME}.toml").write_text(RECIPE, encoding="utf-8")
    monkeypatch.setenv("PAIRREPRO_RECIPES", str(project / "recipes"))
    monkeypatch.chdir(project)

    out, ran = {}, []
    for command in guide_lines(GUIDE):
        command = command.replace("~/Downloads/toy", str(published))
        for line in make_lines(command) if command.startswith("make ") else [command]:
            if line != "pairrepro results readme":  # rewrites the project's pages: see below
                out[line.split()[1]] = run_line(line, project)
            ran.append(line)
    assert "pairrepro results readme" in ran

    record = json.loads((data_home / "raw" / "toy" / ".fetched.json").read_text())
    assert {(f["path"], f["verified"], f["source"]) for f in record["files"]} == {
        (f"{s}.txt", True, f"from:{published.resolve() / f'{s}.txt'}") for s in SIZES}

    stats = out["preprocess"]
    assert {s: stats["splits"][s]["pairs"] for s in SIZES} == SIZES
    assert stats["splits"]["train"]["labels"] == {
        "no": labels["train"].count("no"), "yes": labels["train"].count("yes")}
    assert [(m["split"], m["file"], m["line"]) for m in stats["malformed"]] == [
        ("test", "test.txt", SIZES["test"] + 1)]
    assert stats["reader"] == "toy_pairs"

    # the records: golden config (test_recipes_golden), preflight record (test_plan's gate)
    # and the generated preflight table of docs/preflight.md (test_readme_drift)
    recipe = load_recipe(project / "recipes" / f"{NAME}.toml")
    golden = project / "tests" / "golden" / "configs" / f"{NAME}.toml"
    assert recipe.to_toml() == golden.read_text(encoding="utf-8")
    assert preflight_problem(NAME, recipe.to_dict(), project / "bench" / "preflight") == ""
    assert f"| `{NAME}` | toy train |" in preflight_section(project / "bench" / "preflight")

    assert out["train"][0]["status"] == "finished"
    [row] = out["report"]
    assert (row["dataset"], row["status"], row["epochs_run"]) == ("toy", "finished", 1)
    # the reported accuracy, against the labels this test wrote (line n is pair "test-n")
    predictions = pd.read_parquet(Path(row["run"]) / "predictions" / "test.parquet")
    predicted = dict(zip(predictions["pair_id"], predictions["prediction"], strict=True))
    truth = {f"test-{n}": ["no", "yes"].index(label)
             for n, label in enumerate(labels["test"], 1)}
    assert predicted.keys() == truth.keys()
    assert row["test"]["accuracy"] == pytest.approx(
        sum(predicted[k] == truth[k] for k in truth) / len(truth))
