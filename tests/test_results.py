"""Reference runs (results/): what is committed, variants, cells with reference and own
runs, intervals, --compare-to, pairrepro verify and results add. Built on the committed
results/bm25_trecqa run, copied into tmp folders and edited; no training."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.config import load_recipe
from pairrepro.errors import ConfigError
from pairrepro.metrics import per_query_metrics
from pairrepro.pipeline import done_seeds
from pairrepro.report import cells as cl
from pairrepro.report import evidence
from pairrepro.report.paper_tables import load_paper
from pairrepro.report.recipe_index import load_recipe_index
from pairrepro.report.verify import add_reference
from pairrepro.stats import paired_randomization_test
from pairrepro.train.run_folder import (
    COMPACT_COLUMNS,
    RunFolder,
    config_differences,
    copy_compact,
    read_run,
)

RESULTS = paths.PROJECT_DIR / "results"
BM25 = RESULTS / "bm25_trecqa" / "seed-1"
BM25_ROW = "BM25, same tokens as the models"


def _copy(dest_root: Path, recipe: str = "bm25_trecqa") -> Path:
    dest = dest_root / recipe / "seed-1"
    shutil.copytree(RESULTS / recipe / "seed-1", dest)
    return dest


def _edit_config(run: Path, section: str, key: str, value: object) -> None:
    from pairrepro.config import dumps_toml

    config = tomllib.loads((run / "config.toml").read_text(encoding="utf-8"))
    config[section][key] = value
    (run / "config.toml").write_text(dumps_toml(config), encoding="utf-8")


def test_config_differences_ignore_device_threads_and_bookkeeping() -> None:
    recipe = {"recipe": {"description": "a", "seeds": [1]}, "train": {"epochs": 4,
              "device": "auto"}, "data": {"max_train_pairs": 0}}
    run = {"recipe": {"description": "b", "seeds": [1, 2]}, "train": {"epochs": 1,
           "device": "cuda", "threads": 8}, "data": {"max_train_pairs": 0, "extra": 1}}
    assert config_differences(run, recipe) == {"train.epochs": (1, 4), "data.extra": (1, None)}
    assert config_differences(recipe, recipe) == {}


def test_a_key_added_to_the_schema_later_does_not_make_old_runs_variants() -> None:
    """A run made before a key existed has no such key in its config.toml; read through
    today's schema it gets the key's default, which reproduces the old behaviour. Only a
    recipe value other than that default makes the run a variant."""
    recipe = tomllib.loads(load_recipe(paths.PROJECT_DIR / "recipes" / "bm25_trecqa.toml")
                           .to_toml())
    old_run = {s: dict(v) for s, v in recipe.items()}
    default = old_run["train"].pop("score_train_pairs")  # as if the key came later
    assert config_differences(old_run, recipe) == {}
    changed = {s: dict(v) for s, v in recipe.items()}
    changed["train"]["score_train_pairs"] = default + 500
    assert config_differences(old_run, changed) == {
        "train.score_train_pairs": (default, default + 500)}


def test_committed_reference_runs_are_compact_and_their_recipes_runs() -> None:
    runs = [read_run(d) for d in sorted(RESULTS.glob("*/seed-*"))]
    assert {r.recipe for r in runs} >= {"bm25_trecqa", "bm25_digits_trecqa",
                                        "bm25_twitter_url", "mv_lstm_tensor_trecqa_short"}
    total = sum(f.stat().st_size for f in RESULTS.rglob("*") if f.is_file())
    assert total < 5 * 2**20, f"results/ is {total / 2**20:.1f} MiB"
    for run in runs:
        assert run.status == "finished", run.path
        recipe = load_recipe(paths.recipes_dir() / f"{run.recipe}.toml")
        assert config_differences(run.config, tomllib.loads(recipe.to_toml())) == {}, run.path
        folder = Path(run.path)
        assert not (folder / "checkpoints").exists()
        assert sorted(p.stem for p in (folder / "predictions").glob("*.parquet")) == [
            "dev", "test"]
        for split in ("dev", "test"):
            frame = pd.read_parquet(folder / "predictions" / f"{split}.parquet")
            assert set(frame.columns) <= set(COMPACT_COLUMNS), (run.path, frame.columns)
            metric = "map" if "map" in run.metrics[split] else "f1"
            # run_units checks that the saved predictions give back result.json's value
            evidence.run_units([run], f"{split}.{metric}")


def test_copy_compact_drops_checkpoints_train_predictions_and_extra_columns(
        tmp_path: Path) -> None:
    src = _copy(tmp_path / "runs")
    (src / "checkpoints").mkdir()
    (src / "checkpoints" / "last.pt").write_bytes(b"x" * 1000)
    frame = pd.read_parquet(src / "predictions" / "test.parquet")
    frame["prob_1"] = 0.5
    frame.to_parquet(src / "predictions" / "test.parquet")
    frame.to_parquet(src / "predictions" / "train.parquet")
    copy_compact(RunFolder(src), RunFolder(tmp_path / "out" / "seed-1"))
    out = tmp_path / "out" / "seed-1"
    assert not (out / "checkpoints").exists() and not (out / "predictions/train.parquet").exists()
    assert "prob_1" not in pd.read_parquet(out / "predictions" / "test.parquet").columns
    assert (out / "result.json").read_bytes() == (src / "result.json").read_bytes()


def test_add_reference_refuses_a_variant_and_an_existing_reference(tmp_path: Path) -> None:
    run = _copy(tmp_path / "runs")
    dest, _ = add_reference(run, tmp_path / "results")
    assert (dest.path / "result.json").is_file()
    with pytest.raises(ConfigError, match="already holds"):
        add_reference(run, tmp_path / "results")
    _edit_config(run, "data", "max_train_pairs", 2000)
    with pytest.raises(ConfigError, match=r"data\.max_train_pairs"):
        add_reference(run, tmp_path / "results", force=True)


def _table6(runs: Path | None) -> cl.EvalTable:
    paper = load_paper("csran")
    return cl.evaluate_table(paper, paper.table(6), runs, load_recipe_index(), RESULTS)


def _cell(ev: cl.EvalTable, label: str, column: str = "map") -> cl.Cell:
    row = next(r for r in ev.rows if r.row.label == label)
    return next(c for c in row.cells if c.column == column)


def test_cells_show_reference_own_run_and_variant(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ref = _cell(_table6(None), BM25_ROW)
    assert ref.source == cl.REFERENCE and ref.status == cl.NEW
    recorded = read_run(BM25).value("test.map")
    assert ref.mean == recorded and ref.interval is not None
    assert ref.interval.low < recorded < ref.interval.high
    # an own run of the recipe: its number, the reference beside it
    own = _copy(runs)
    result = json.loads((own / "result.json").read_text())
    result["metrics"]["test"]["map"] = 0.5
    (own / "result.json").write_text(json.dumps(result))
    cell = _cell(_table6(runs), BM25_ROW)
    assert cell.source == cl.OWN and cell.reproduced_text == "0.500"
    assert cell.reference_text == f"ref {recorded:.3f}" and cell.interval is None  # 0.5 is
    # not what the predictions give: no interval is claimed
    # the own run made with --set: a variant, the reference number stays, the variant noted
    _edit_config(own, "data", "max_train_pairs", 2000)
    cell = _cell(_table6(runs), BM25_ROW)
    assert cell.source == cl.REFERENCE and "variant" in cell.detail
    # with no reference either, the cell is the variant and names its keys, no number
    ev = cl.evaluate_table(load_paper("csran"), load_paper("csran").table(6), runs,
                           load_recipe_index(), tmp_path / "no-results")
    cell = _cell(ev, BM25_ROW)
    assert cell.status == cl.VARIANT and cell.mean is None
    assert cell.variant_keys == ["data.max_train_pairs"]


def test_a_variant_run_is_not_a_done_seed(tmp_path: Path) -> None:
    recipe = load_recipe(paths.recipes_dir() / "bm25_trecqa.toml")
    run = _copy(tmp_path / "runs")
    assert done_seeds(tmp_path / "runs", recipe) == {1}
    _edit_config(run, "train", "epochs", recipe.train.epochs + 3)
    assert done_seeds(tmp_path / "runs", recipe) == set()
    _edit_config(run, "train", "epochs", recipe.train.epochs)
    _edit_config(run, "train", "device", "cuda")  # where it ran does not matter
    assert done_seeds(tmp_path / "runs", recipe) == {1}


def test_verdict_uses_the_interval_or_the_printed_precision() -> None:
    paper = load_paper("csran")
    table = paper.table(6)
    column = table.columns[0]  # MAP, 3 decimals
    from pairrepro.stats import Interval

    def verdict(mean: float, low: float, high: float, target: float) -> str:
        cell = cl.Cell(column=column.key, published="", status="", mean=mean,
                       interval=Interval(mean, low, high, 0.95, 10, 1, 10))
        cl._verdict(cell, table, column, target)
        return cell.status

    assert verdict(0.80, 0.75, 0.85, 0.84) == cl.REPRODUCED  # inside
    assert verdict(0.80, 0.78, 0.82, 0.854) == cl.BELOW  # 0.854 above the interval
    assert verdict(0.90, 0.88, 0.92, 0.854) == cl.ABOVE
    assert verdict(0.8544, 0.8542, 0.8546, 0.854) == cl.REPRODUCED  # rounds to 0.854


def test_compare_to_is_a_paired_test_on_the_same_queries() -> None:
    ev = cl.compare_to(_table6(None), "BM25, DEV/TEST numbers kept")
    cell = _cell(ev, BM25_ROW)

    def ap(recipe: str) -> pd.Series:
        frame = pd.read_parquet(RESULTS / recipe / "seed-1" / "predictions" / "test.parquet")
        q = per_query_metrics(frame["group_id"].tolist(), frame["label"].to_numpy(),
                              frame["score"].to_numpy(), frame["pair_id"].tolist())
        return q.set_index("query")["map"].sort_index()

    a, b = ap("bm25_trecqa"), ap("bm25_digits_trecqa")
    expected = paired_randomization_test(a.to_numpy(), b.loc[a.index].to_numpy())
    assert cell.comparison_p == expected.p_value
    assert cell.comparison.startswith(f"{expected.difference:+.3f}".replace("-", "−"))
    assert np.isclose(expected.difference, a.mean() - b.mean())
    with pytest.raises(ConfigError, match="no such row"):
        cl.compare_to(_table6(None), "no such model")


def test_an_f1_row_against_a_one_seed_scorer_pairs_every_seed_with_it() -> None:
    """BM25 has one seed: each MV-LSTM-Cosine seed stands against it, so the difference is
    the mean F1 over the three seeds minus BM25's (the result.json values)."""
    from pairrepro.report import evidence
    from pairrepro.train.run_folder import find_runs

    def runs(recipe: str) -> list:
        return [r for r in find_runs(RESULTS, recipe) if r.status == "finished"]

    cosine, bm25 = runs("mv_lstm_cosine_twitter_url"), runs("bm25_twitter_url")
    assert (len(cosine), len(bm25)) == (3, 1)
    test = evidence.paired_test(evidence.run_units(cosine, "test.f1"),
                                evidence.run_units(bm25, "test.f1"))
    f1 = [json.loads((RESULTS / "mv_lstm_cosine_twitter_url" / f"seed-{r.seed}" /
                      "result.json").read_text())["metrics"]["test"]["f1"] for r in cosine]
    bm25_f1 = json.loads((RESULTS / "bm25_twitter_url/seed-1/result.json").read_text()
                         )["metrics"]["test"]["f1"]
    assert test.difference == pytest.approx(float(np.mean(f1)) - bm25_f1)


def test_verify_says_same_names_variant_keys_and_data(tmp_path: Path) -> None:
    runner = CliRunner()
    run = _copy(tmp_path / "runs")
    args = ["verify", str(run), "--results", str(RESULTS)]
    out = runner.invoke(app, args)
    assert out.exit_code == 0 and out.output.startswith("same: "), out.output
    _edit_config(run, "data", "max_train_pairs", 2000)
    out = runner.invoke(app, args)
    assert out.exit_code == 9 and out.output.startswith("variant: "), out.output
    assert "data.max_train_pairs (2000 vs reference 0)" in out.output
    _edit_config(run, "data", "max_train_pairs", 0)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["prepared_sha256"]["test.parquet"] = "0" * 64
    (run / "manifest.json").write_text(json.dumps(manifest))
    out = runner.invoke(app, args)
    assert out.exit_code == 9 and "different data" in out.output
    assert "test.parquet" in out.output
    other = _copy(tmp_path / "other", "bm25_twitter_url")
    out = runner.invoke(app, ["verify", str(other), "--results", str(tmp_path / "none")])
    assert out.exit_code == 7, out.output
