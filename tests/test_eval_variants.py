"""Scoring a finished run on another prepared variant (``pairrepro eval --variant``).

TrecQA ``clean`` removes whole DEV/TEST questions that lack a positive (AP 0 under the raw
variant's trec_eval rule) or a negative (AP 1 whatever the order), so a clean-trained run's
raw MAP must equal (sum of its clean APs + the all-positive questions) / raw questions:
an independent check that the raw questions, their labels and the mapped ids are right.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.data.prepared import load_prepared
from pairrepro.data.preprocess import prepare_dataset
from pairrepro.errors import DataError
from pairrepro.train.provenance import evaluate_run
from pairrepro.train.runner import train_recipe

RECIPE = ('[data]\ndataset = "trecqa"\nvariant = "clean"\n[model]\nname = "bm25"\n'
          '[task]\ntype = "ranking"\nloss = "pointwise"\n[train]\nepochs = 1\n')


def test_clean_run_scored_on_raw(raw_from_mirror: Callable[[str], Path], tmp_path: Path) -> None:
    raw_from_mirror("trecqa")
    for variant in ("clean", "raw", "clean_digits"):
        prepare_dataset("trecqa", variant, progress=False)
    recipe = tmp_path / "bm25_x.toml"
    recipe.write_text(RECIPE)
    (result,) = train_recipe(recipe, quiet=True)
    run = paths.runs_dir() / "bm25_x" / "seed-1"
    clean = result["metrics"]["test"]
    assert evaluate_run(run, "test") == pytest.approx(clean)  # same variant: same numbers

    raw = evaluate_run(run, "test", variant="raw")
    frame = load_prepared("trecqa", "raw").split("test")
    per_question = frame.groupby("group_id")["label"].agg(["min", "max"])
    all_positive = int((per_question["min"] == 1).sum())
    assert len(per_question) == 95 and raw["num_queries"] == 95
    expected = (clean["map"] * clean["num_queries"] + all_positive) / 95
    assert raw["map"] == pytest.approx(expected, abs=1e-12)
    expected_mrr = (clean["mrr"] * clean["num_queries"] + all_positive) / 95
    assert raw["mrr"] == pytest.approx(expected_mrr, abs=1e-12)

    # kept with the run, and read back by report runs
    out = CliRunner().invoke(app, ["eval", str(run), "--variant", "raw", "--split", "test",
                                   "--save"])
    assert out.exit_code == 0, out.output
    listed = CliRunner().invoke(app, ["--json", "eval", str(run), "--variant", "raw"])
    assert [row["split"] for row in json.loads(listed.output)] == ["test@raw"]
    saved = json.loads((run / "evals" / "test@raw.json").read_text())
    assert saved["metrics"]["map"] == pytest.approx(raw["map"])
    assert saved["variant"] == "raw" and list(saved["prepared_sha256"]) == ["test.parquet"]
    listing = CliRunner().invoke(app, ["report", "runs", "--format", "md"])
    assert f"test@raw {raw['map']:.3f} / {raw['mrr']:.3f}" in listing.output

    # a variant tokenised differently (digits kept) cannot carry the run's ids
    with pytest.raises(DataError, match="tokenised differently"):
        evaluate_run(run, "test", variant="clean_digits")
