"""Reference runs (results/): what is committed, variants, cells with reference and own
runs, intervals, --compare-to, pairrepro verify and results add. Built on the committed
results/bm25_trecqa run, copied into tmp folders and edited; no training."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.config import load_recipe
from pairrepro.errors import ConfigError
from pairrepro.metrics import per_query_metrics
from pairrepro.planning.paper_tables import load_paper
from pairrepro.planning.plan import done_seeds
from pairrepro.planning.recipe_index import RecipeIndex, load_recipe_index
from pairrepro.report.analyses import evidence
from pairrepro.report.analyses.comparison import Comparison
from pairrepro.report.analyses.orderings import compare_to
from pairrepro.report.publishing.verify import add_reference
from pairrepro.report.tables import cells as cl
from pairrepro.report.tables.layout import comparison_text
from pairrepro.runs import (
    COMPACT_COLUMNS,
    DamagedRunError,
    RunFolder,
    all_runs,
    config_differences,
    copy_compact,
    find_runs,
    read_predictions,
    read_run,
)
from pairrepro.stats import mean_interval

RESULTS = paths.PROJECT_DIR / "results"
BM25 = RESULTS / "bm25_trecqa" / "seed-1"
BM25_ROW = "BM25, same tokens as the models"


def _copy(dest_root: Path, recipe: str = "bm25_trecqa") -> Path:
    dest = dest_root / recipe / "seed-1"
    shutil.copytree(RESULTS / recipe / "seed-1", dest)
    return dest


def _edit_config(run: Path, section: str, key: str, value: object) -> None:
    from pairrepro.fileio import dumps_toml

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
    # about 6 MiB of paper-table runs and 3 of smoke runs (16 recipes x 3 seeds, 60 KiB a
    # run with 9,824 delta-coded SNLI pair ids); a run's checkpoint alone is megabytes
    assert total < 10 * 2**20, f"results/ is {total / 2**20:.1f} MiB"
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
            metric = next(m for m in ("map", "f1", "accuracy") if m in run.metrics[split])
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
    assert (read_predictions(RunFolder(out), "test")[list(COMPACT_COLUMNS[:3])]
            .equals(frame[list(COMPACT_COLUMNS[:3])]))
    assert (out / "result.json").read_bytes() == (src / "result.json").read_bytes()


def test_a_classification_split_is_kept_without_its_group_ids_and_read_back_whole(
        tmp_path: Path) -> None:
    """group_id repeats pair_id in a classification split: the compact copy drops it (half
    the file) and read_predictions gives it back, so every reader sees the same frame."""
    src = _copy(tmp_path / "runs")
    frame = pd.DataFrame({"pair_id": ["a", "b", "c"], "group_id": ["a", "b", "c"],
                          "label": [1, 0, 1], "prediction": [1, 1, 0]})
    frame.to_parquet(src / "predictions" / "dev.parquet")
    copy_compact(RunFolder(src), RunFolder(tmp_path / "out" / "seed-1"))
    out = tmp_path / "out" / "seed-1" / "predictions"
    assert list(pd.read_parquet(out / "dev.parquet").columns) == ["pair_id", "label",
                                                                  "prediction"]
    assert read_predictions(RunFolder(out.parent), "dev").equals(frame)
    # a ranking split's groups are questions, not pairs: kept as they are
    assert "group_id" in pd.read_parquet(out / "test.parquet").columns
    # and a ranking split that lost them is not given one question per pair
    ranking = pd.read_parquet(out / "test.parquet").drop(columns="group_id")
    ranking.to_parquet(out / "test.parquet", index=False)
    assert "group_id" not in read_predictions(RunFolder(out.parent), "test").columns


def test_add_reference_refuses_a_dirty_run_naming_why(tmp_path: Path) -> None:
    run = _copy(tmp_path / "runs")
    for git, words in [({"commit": "b9d01b25f5aa", "dirty": True,
                         "untracked": ["pairrepro/x.py"]},
                        "made with uncommitted changes (commit b9d01b25f5; untracked: "
                        "pairrepro/x.py)"),
                       ({"commit": None, "dirty": None}, "no record of its git state")]:
        _edit_json(run / "manifest.json", lambda m, git=git: m.update(git=git))
        with pytest.raises(ConfigError, match=re.escape(words)) as caught:
            add_reference(run, tmp_path / "results")
        assert "manifest.json" in caught.value.message and "commit the changes" in str(
            caught.value)
        assert not (tmp_path / "results").exists()
    out = CliRunner().invoke(app, ["results", "add", str(run), "--results",
                                   str(tmp_path / "results")])
    assert out.exit_code == 2 and "only a run of committed code" in out.output


def _clean(run: Path) -> Path:
    _edit_json(run / "manifest.json", lambda m: m.update(
        git={"commit": "0" * 40, "dirty": False, "untracked": []}))
    return run


def test_add_reference_refuses_a_variant_and_an_existing_reference(tmp_path: Path) -> None:
    run = _clean(_copy(tmp_path / "runs"))
    dest, _ = add_reference(run, tmp_path / "results")
    assert (dest.path / "result.json").is_file()
    with pytest.raises(ConfigError, match="already holds"):
        add_reference(run, tmp_path / "results")
    _edit_config(run, "data", "max_train_pairs", 2000)
    with pytest.raises(ConfigError, match=r"data\.max_train_pairs"):
        add_reference(run, tmp_path / "results", force=True)


def test_a_run_added_again_keeps_the_record_of_what_it_replaced(tmp_path: Path) -> None:
    results = tmp_path / "results"
    dest, _ = add_reference(_clean(_copy(tmp_path / "first")), results)
    assert not (dest.path / "replaces.json").exists()
    # re-made at another commit: every test score doubled, so the ranking and MAP stay
    remade = _copy(tmp_path / "remade")
    _edit_json(remade / "manifest.json", lambda m: m.update(
        git={"commit": "1" * 40, "dirty": False, "untracked": []}))
    frame = pd.read_parquet(remade / "predictions" / "test.parquet")
    largest = float(frame["score"].abs().max())
    frame["score"] *= 2
    frame.to_parquet(remade / "predictions" / "test.parquet")
    _, files = add_reference(remade, results, force=True)
    assert dest.path / "replaces.json" in files
    record = json.loads((dest.path / "replaces.json").read_text())
    assert record["replaced_commit"] == "0" * 40 and record["bit_equal"] is False
    assert record["differs_in"] == {"test": f"metrics equal, scores move by up to "
                                            f"{largest:.2g}"}
    # the same run added again: it still replaces the first one, not itself
    add_reference(remade, results, force=True)
    assert json.loads((dest.path / "replaces.json").read_text()) == record


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
    assert ref.estimate.mean == recorded and ref.estimate.interval is not None
    assert ref.estimate.interval.low < recorded < ref.estimate.interval.high
    # an own run of the recipe: its number, the reference beside it
    own = _copy(runs)
    result = json.loads((own / "result.json").read_text())
    result["metrics"]["test"]["map"] = 0.5
    (own / "result.json").write_text(json.dumps(result))
    cell = _cell(_table6(runs), BM25_ROW)
    # 0.5 is not what its predictions give: a damaged run, no number is claimed
    assert cell.status == cl.DAMAGED and cell.estimate is None
    assert f"{own / 'result.json'} disagrees with its saved predictions" in cell.detail
    # nor when its test predictions are gone: a finished run without them lost a part
    (own / "predictions" / "test.parquet").unlink()
    cell = _cell(_table6(runs), BM25_ROW)
    assert cell.source == cl.REFERENCE and cell.damaged == [
        f"{own / 'predictions' / 'test.parquet'}: missing (result.json records test metrics)"]
    shutil.copyfile(BM25 / "predictions" / "test.parquet", own / "predictions" / "test.parquet")
    # the own run made with --set: a variant, the reference number stays, the variant noted
    _edit_config(own, "data", "max_train_pairs", 2000)
    cell = _cell(_table6(runs), BM25_ROW)
    assert cell.source == cl.REFERENCE and "variant" in cell.detail
    # with no reference either, the cell is the variant and names its keys, no number
    ev = cl.evaluate_table(load_paper("csran"), load_paper("csran").table(6), runs,
                           load_recipe_index(), tmp_path / "no-results")
    cell = _cell(ev, BM25_ROW)
    assert cell.status == cl.VARIANT and cell.estimate is None
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
        found = cl.Estimate(mean, interval=Interval(mean, low, high, 0.95, 10, 1, 10))
        return cl._verdict(found, table, column, target).status

    assert verdict(0.80, 0.75, 0.85, 0.84) == cl.REPRODUCED  # inside
    assert verdict(0.80, 0.78, 0.82, 0.854) == cl.BELOW  # 0.854 above the interval
    assert verdict(0.90, 0.88, 0.92, 0.854) == cl.ABOVE
    assert verdict(0.8544, 0.8542, 0.8546, 0.854) == cl.REPRODUCED  # rounds to 0.854


def test_compare_to_is_a_paired_test_on_the_same_queries() -> None:
    ev = compare_to(_table6(None), "BM25, DEV/TEST numbers kept")
    cell = _cell(ev, BM25_ROW)

    def ap(recipe: str) -> pd.Series:
        frame = pd.read_parquet(RESULTS / recipe / "seed-1" / "predictions" / "test.parquet")
        q = per_query_metrics(frame["group_id"].tolist(), frame["label"].to_numpy(),
                              frame["score"].to_numpy(), frame["pair_id"].tolist())
        return q.set_index("query")["map"].sort_index()

    a, b = ap("bm25_trecqa"), ap("bm25_digits_trecqa")
    # the p of the two-level bootstrap of the per-query differences (one seed each: queries
    # alone), drawn on its own stream: the same verdict, p within Monte-Carlo error
    expected = mean_interval(a.to_numpy() - b.loc[a.index].to_numpy(), resamples=200_000,
                             seed=9)
    assert cell.comparison is not None and cell.comparison.p_value is not None
    p = expected.p_value
    assert abs(cell.comparison.p_value - p) <= 4 * np.sqrt(p * (1 - p) / 2000) + 1e-9
    column = next(c for c in ev.table.columns if c.key == cell.column)
    assert comparison_text(cell, column).startswith(
        f"{a.mean() - b.mean():+.3f}".replace("-", "−"))
    with pytest.raises(ConfigError, match="no such row"):
        compare_to(_table6(None), "no such model")


def test_an_f1_row_against_a_one_seed_scorer_pairs_every_seed_with_it() -> None:
    """BM25 has one seed: each MV-LSTM-Cosine seed stands against it, so the difference is
    the mean F1 over the three seeds minus BM25's (the result.json values)."""
    from pairrepro.report.analyses import evidence
    from pairrepro.runs import find_runs

    def runs(recipe: str) -> list:
        return [r for r in find_runs(RESULTS, recipe) if r.status == "finished"]

    cosine, bm25 = runs("mv_lstm_cosine_twitter_url"), runs("bm25_twitter_url")
    assert (len(cosine), len(bm25)) == (3, 1)
    test = evidence.difference_interval(evidence.run_units(cosine, "test.f1"),
                                        evidence.run_units(bm25, "test.f1"))
    f1 = [json.loads((RESULTS / "mv_lstm_cosine_twitter_url" / f"seed-{r.seed}" /
                      "result.json").read_text())["metrics"]["test"]["f1"] for r in cosine]
    bm25_f1 = json.loads((RESULTS / "bm25_twitter_url/seed-1/result.json").read_text()
                         )["metrics"]["test"]["f1"]
    assert test.value == pytest.approx(float(np.mean(f1)) - bm25_f1)


CPU = {"model": "Xeon 8480", "capability": "AVX512", "isa": ["amx_bf16", "avx512f"],
       "mkl": "2025.0", "onednn": "3.7"}


def _edit_json(path: Path, edit: Any) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _fingerprinted(tmp_path: Path) -> tuple[Path, Path]:
    """(a run, its reference in a private results folder), both made on CPU, fp32."""
    results = tmp_path / "results"
    run, ref = _copy(tmp_path / "runs"), _copy(results)
    for folder in (run, ref):
        _edit_json(folder / "manifest.json", lambda m: m.update(cpu=dict(CPU),
                                                                precision="fp32"))
    return run, results


def test_verify_says_same_only_in_the_same_environment(tmp_path: Path) -> None:
    runner = CliRunner()
    run, results = _fingerprinted(tmp_path)
    args = ["verify", str(run), "--results", str(results)]
    out = runner.invoke(app, args)
    assert out.exit_code == 0 and out.output.startswith("same: "), out.output
    for change, words in [(lambda m: m.pop("cpu"), "unknown cpu"),
                          (lambda m: m["cpu"].update(isa=["avx2"]), "cpu Xeon 8480"),
                          (lambda m: m.update(precision="bf16"), "precision bf16 vs "
                                                                "reference fp32")]:
        _edit_json(run / "manifest.json", change)
        out = runner.invoke(app, args)
        # the same bit-equal metrics, but no bit-equality claim: checked against intervals
        assert out.exit_code == 0 and out.output.startswith("consistent: "), out.output
        assert words in out.output and "test.map" in out.output and "dev.map" in out.output
        _edit_json(run / "manifest.json", lambda m: m.update(cpu=dict(CPU), precision="fp32"))


def test_verify_checks_every_dev_and_test_metric_and_names_the_unchecked(
        tmp_path: Path) -> None:
    runner = CliRunner()
    run, results = _fingerprinted(tmp_path)
    _edit_json(run / "manifest.json", lambda m: m.pop("cpu"))
    args = ["verify", str(run), "--results", str(results)]
    ref_result = results / "bm25_trecqa" / "seed-1" / "result.json"
    original = ref_result.read_text()
    # hostile case 2: the reference's test MAP raised by 0.10 is a damaged reference
    _edit_json(ref_result, lambda r: r["metrics"]["test"].update(
        map=r["metrics"]["test"]["map"] + 0.10))
    out = runner.invoke(app, args)
    assert out.exit_code == 9 and out.output.startswith("reference damaged: "), out.output
    assert "result.json disagrees with its saved predictions: test.map" in out.output
    ref_result.write_text(original)
    # the run's dev MAP far from the reference: dev is compared on this path too
    _edit_json(run / "result.json", lambda r: r["metrics"]["dev"].update(map=0.1))
    out = runner.invoke(app, args)
    assert out.exit_code == 9 and out.output.startswith("different: "), out.output
    assert "dev.map 0.1 outside" in out.output
    _edit_json(run / "result.json", lambda r: r["metrics"]["dev"].update(
        map=json.loads(original)["metrics"]["dev"]["map"]))
    # a metric no interval covers is named and fails: it cannot be called consistent
    for path in (run / "result.json", ref_result):
        _edit_json(path, lambda r: r["metrics"]["test"].update(r10_at_1=0.5))
    out = runner.invoke(app, args)
    assert out.exit_code == 9 and "cannot be checked: test.r10_at_1" in out.output, out.output
    assert "not checked: train" in out.output


def test_verify_says_variant_keys_and_data(tmp_path: Path) -> None:
    runner = CliRunner()
    run = _copy(tmp_path / "runs")
    _edit_json(run / "manifest.json", lambda m: m.pop("cpu", None))
    args = ["verify", str(run), "--results", str(RESULTS)]
    out = runner.invoke(app, args)
    # a run that carries no CPU fingerprint: never a bit-equality claim
    assert out.exit_code == 0 and out.output.startswith("consistent: "), out.output
    assert "unknown cpu" in out.output
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


def test_verify_fails_a_reference_that_lost_its_test_predictions(tmp_path: Path) -> None:
    """With the reference's test predictions gone, test MAP cannot be checked: the reference
    is damaged (exit 9), never "consistent" with "not checked: test"."""
    run, results = _fingerprinted(tmp_path)
    _edit_json(run / "manifest.json", lambda m: m.pop("cpu"))  # the interval path
    lost = results / "bm25_trecqa" / "seed-1" / "predictions" / "test.parquet"
    lost.unlink()
    out = CliRunner().invoke(app, ["verify", str(run), "--results", str(results)])
    assert out.exit_code == 9 and out.output.startswith("reference damaged: "), out.output
    assert f"{lost}: missing (result.json records test metrics)" in out.output


def test_an_incomplete_run_cannot_be_added_and_an_incomplete_reference_is_damaged(
        tmp_path: Path) -> None:
    """results add --force took a run without predictions/test.parquet, or with
    metrics.jsonl cut to 100 bytes, and results readme then passed such a reference."""
    results = tmp_path / "results"
    run = _clean(_copy(tmp_path / "runs", "mv_lstm_tensor_trecqa_short"))
    _copy(results, "mv_lstm_tensor_trecqa_short")
    test, metrics = run / "predictions" / "test.parquet", run / "metrics.jsonl"
    kept_test, kept_metrics = test.read_bytes(), metrics.read_bytes()
    for cut, words in ((lambda: test.unlink(), f"{test}: missing (result.json records test "
                                                "metrics)"),
                       (lambda: metrics.write_bytes(kept_metrics[:100]),
                        f"{metrics}:1: not valid JSON"),
                       (lambda: metrics.write_bytes(b""),
                        f"{metrics}: 0 epoch line(s) where manifest.json records 1 epoch(s)")):
        cut()
        with pytest.raises(DamagedRunError, match=re.escape(words)):
            add_reference(run, results, force=True)
        out = CliRunner().invoke(app, ["results", "add", str(run), "--results", str(results),
                                       "--force"])
        assert out.exit_code == 3 and "cannot be a reference run" in out.output, out.output
        test.write_bytes(kept_test)
        metrics.write_bytes(kept_metrics)
    # the same cut in a reference already committed: damaged where it is read
    ref = results / "mv_lstm_tensor_trecqa_short" / "seed-1"
    (ref / "predictions" / "test.parquet").unlink()
    assert evidence.tampered_runs(results) == [
        f"{ref / 'predictions' / 'test.parquet'}: missing (result.json records test metrics)"]
    out = CliRunner().invoke(app, ["results", "readme", "--check", "--results", str(results)])
    assert out.exit_code == 3 and "predictions/test.parquet: missing" in out.output, out.output


def test_a_seed_folder_without_its_result_is_damaged_wherever_runs_are_read(
        tmp_path: Path) -> None:
    """A reference seed whose result.json was deleted was read as "running" and left out:
    the gap ladder, the parity table and the README went on with the other seeds, and
    report runs did not list it. It is damaged, named wherever runs are read."""
    from pairrepro.report.analyses.ladders import recipe_runs

    results = tmp_path / "results"
    _copy(results)
    lost = results / "bm25_trecqa" / "seed-2"
    shutil.copytree(BM25, lost)
    (lost / "result.json").unlink()
    problem = f"{lost / 'result.json'}: missing (a seed folder holds one from its start)"
    assert [(r.seed, r.status, r.problem) for r in find_runs(results, "bm25_trecqa")] == [
        (1, "finished", ""), (2, "damaged", problem)]
    assert [r.status for r in all_runs(results)] == ["finished", "damaged"]
    # report gap and report parity read a recipe's reference runs through recipe_runs
    with pytest.raises(DamagedRunError, match=re.escape(problem)):
        recipe_runs(load_recipe_index(), results, "bm25_trecqa")
    paper = load_paper("csran")
    cell = _cell(cl.evaluate_table(paper, paper.table(6), None, load_recipe_index(), results),
                 BM25_ROW)
    assert cell.damaged == [problem] and "1 seed(s) damaged" in cell.detail
    out = CliRunner().invoke(app, ["results", "readme", "--check", "--results", str(results)])
    assert out.exit_code == 3 and problem in out.output, out.output
    out = CliRunner().invoke(app, ["--json", "report", "runs", "--runs", str(results)])
    assert [(x["status"], x["problem"]) for x in json.loads(out.output)
            if x["run"].endswith("seed-2")] == [("damaged", problem)]


def test_a_run_under_another_seed_s_or_recipe_s_name_is_damaged_wherever_it_is_read(
        tmp_path: Path) -> None:
    """A seed-1 run copied into seed-2 was added as seed 2 ("seed": 1 inside), counted as a
    third seed in the table and verified "consistent" against the real seed 2. Its files
    name another run than its folder: damaged, exit 3 naming the file, in add, verify and
    the table alike; so are a manifest naming another data variant and another recipe."""
    runs, results = tmp_path / "runs", tmp_path / "results"
    moved = runs / "bm25_trecqa" / "seed-2"
    shutil.copytree(BM25, moved)
    _clean(moved)
    out = CliRunner().invoke(app, ["--json", "results", "add", str(moved), "--force",
                                   "--results", str(results)])
    error = json.loads(out.output)["error"]
    assert out.exit_code == 3 and "result.json seed 1" in error and "move it" in error, error
    assert not results.exists()
    _copy(results)
    shutil.copytree(BM25, results / "bm25_trecqa" / "seed-2")  # as the reference of seed 2
    paper = load_paper("csran")
    cell = _cell(cl.evaluate_table(paper, paper.table(6), None, load_recipe_index(), results),
                 BM25_ROW)
    assert len(cell.damaged) == 1 and "seed-2" in cell.damaged[0]
    assert [r.seed for r in cell.runs] == [1] and "1 seed(s) damaged" in cell.detail
    out = CliRunner().invoke(app, ["verify", str(moved), "--results", str(results)])
    assert out.exit_code == 3 and "manifest.json seed 1" in out.output, out.output
    true_two = _copy(tmp_path / "other").rename(tmp_path / "other" / "bm25_trecqa" / "seed-2")
    for path in (true_two / "result.json", true_two / "manifest.json"):
        _edit_json(path, lambda d: d.update(seed=2))
    out = CliRunner().invoke(app, ["verify", str(true_two), "--results", str(results)])
    assert out.exit_code == 9 and "reference damaged" in out.output, out.output
    _edit_json(results / "bm25_trecqa" / "seed-1" / "manifest.json",
               lambda m: m.update(variant="raw"))
    shutil.copytree(BM25, results / "bm25_twitter_url" / "seed-1")
    found = {(r.recipe, r.seed): r.problem for r in all_runs(results)}
    assert "manifest.json variant 'raw'" in found["bm25_trecqa", 1]
    assert "result.json recipe 'bm25_trecqa'" in found["bm25_twitter_url", 1]


# ------------------------------------------------------------------ tamper evidence
def _pytrec(frame: pd.DataFrame, no_positive: str) -> dict[str, float]:
    """MAP, MRR, P@1 and the query counts of trec_eval itself (pytrec_eval), which breaks
    ties by docno descending as our metrics do."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrel: dict[str, dict[str, int]] = {}
    scored: dict[str, dict[str, float]] = {}
    for q, d, label, score in frame[["group_id", "pair_id", "label", "score"]].itertuples(
            index=False):
        qrel.setdefault(str(q), {})[str(d)] = int(label)
        scored.setdefault(str(q), {})[str(d)] = float(score)
    judged = {q: r for q, r in qrel.items() if no_positive == "zero" or max(r.values()) > 0}
    res = pytrec_eval.RelevanceEvaluator(judged, {"map", "recip_rank", "P_1"}).evaluate(scored)
    return {"map": float(np.mean([r["map"] for r in res.values()])),
            "mrr": float(np.mean([r["recip_rank"] for r in res.values()])),
            "p_at_1": float(np.mean([r["P_1"] for r in res.values()])),
            "num_queries": float(len(res)),
            "skipped_queries": float(len(qrel) - len(judged))}


def _sklearn(frame: pd.DataFrame, binary: bool) -> dict[str, float]:
    """Accuracy and macro-F1; a binary run also records the F1 of class 1 (a 3-class run
    such as SNLI's has no such F1)."""
    from sklearn.metrics import accuracy_score, f1_score

    gold, pred = frame["label"].to_numpy(), frame["prediction"].to_numpy()
    return {"accuracy": accuracy_score(gold, pred),
            "macro_f1": f1_score(gold, pred, average="macro"),
            **({"f1": f1_score(gold, pred)} if binary else {})}


def test_every_committed_run_gives_its_result_json_from_its_predictions() -> None:
    """What CI checks: every reference run in results/ re-scored from its saved predictions
    by independent code (trec_eval, scikit-learn) gives what its result.json records."""
    checked = 0
    for folder in sorted(RESULTS.glob("*/seed-*")):
        result = json.loads((folder / "result.json").read_text())
        manifest = json.loads((folder / "manifest.json").read_text())
        for path in sorted((folder / "predictions").glob("*.parquet")):
            frame = pd.read_parquet(path)
            recorded = result["metrics"][path.stem]
            truth = (_pytrec(frame, manifest.get("no_positive") or "skip")
                     if "score" in frame.columns else _sklearn(frame, "f1" in recorded))
            assert set(truth) <= set(recorded), (path, sorted(recorded))
            for name, value in truth.items():
                assert recorded[name] == pytest.approx(value, abs=1e-9), (path, name)
                checked += 1
    assert checked > 400
    assert evidence.tampered_runs(RESULTS) == []  # the report's own check agrees


def _tampered_table6(tmp_path: Path, edit: Any) -> tuple[Path, cl.Cell]:
    results = tmp_path / "results"
    for seed in (1, 2, 3):
        shutil.copytree(RESULTS / "csran_trecqa" / f"seed-{seed}",
                        results / "csran_trecqa" / f"seed-{seed}")
        edit(results / "csran_trecqa" / f"seed-{seed}")
    paper = load_paper("csran")
    ev = cl.evaluate_table(paper, paper.table(6), None, load_recipe_index(), results)
    return results, _cell(ev, "CSRAN")


def test_an_edited_reference_result_is_damaged_and_stops_the_readme(tmp_path: Path) -> None:
    """Hostile case 1: the published 0.8541 typed into result.json is no reproduced cell;
    the README cannot be rewritten from it (exit 3, the file named)."""
    from pairrepro.report.publishing.readme import render_sections
    from pairrepro.report.tables.render import to_markdown

    def edit(folder: Path) -> None:
        _edit_json(folder / "result.json", lambda r: r["metrics"]["test"].update(map=0.8541))

    results, cell = _tampered_table6(tmp_path, edit)
    assert cell.status == cl.DAMAGED and cell.estimate is None and not cell.runs
    assert "csran_trecqa/seed-1/result.json disagrees with its saved predictions: " \
           "test.map 0.8541 where predictions/test.parquet give 0.766440" in cell.detail
    paper = load_paper("csran")
    text = to_markdown(cl.evaluate_table(paper, paper.table(6), None, load_recipe_index(),
                                         results))
    assert "0.854 ±" not in text and "damaged" in text
    with pytest.raises(evidence.TamperedRunError, match=r"seed-1/result\.json"):
        render_sections(results)
    readme = tmp_path / "README.md"
    readme.write_text("x\n")
    out = CliRunner().invoke(app, ["results", "readme", "--readme", str(readme),
                                   "--results", str(results)])
    assert out.exit_code == 3 and "result.json disagrees" in out.output, out.output
    assert readme.read_text() == "x\n"


def test_edited_predictions_never_print_an_interval_or_a_no_predictions_footer(
        tmp_path: Path) -> None:
    """Hostile case 12: a reference's predictions changed under its result.json."""
    from pairrepro.report.tables.render import to_markdown

    def edit(folder: Path) -> None:
        path = folder / "predictions" / "test.parquet"
        frame = pd.read_parquet(path)
        frame["score"] = -frame["score"]  # the worst ranking the model could give
        frame.to_parquet(path)

    results, cell = _tampered_table6(tmp_path, edit)
    assert cell.status == cl.DAMAGED and cell.estimate is None
    assert "predictions/test.parquet give" in cell.detail
    paper = load_paper("csran")
    text = to_markdown(cl.evaluate_table(paper, paper.table(6), None, load_recipe_index(),
                                         results))
    assert "without saved predictions" not in text and "± 0.0" not in text


def test_run_lists_print_each_seeds_commit_in_seed_order_with_dirty() -> None:
    from pairrepro.report.tables.layout import layout

    lay = layout(_table6(None))
    for recipe in ("esim_no_em_trecqa", "csran_trecqa", "mv_lstm_tensor_trecqa"):
        expected = []
        for folder in sorted((RESULTS / recipe).glob("seed-*"),
                             key=lambda p: int(p.name.split("-")[1])):
            git = json.loads((folder / "manifest.json").read_text())["git"]
            expected.append(git["commit"][:10] + ("+dirty" if git["dirty"] else ""))
        text = lay.runs[f"{recipe} (reference)"]
        words = (f"commit {expected[0]};" if len(set(expected)) == 1
                 else f"commits in seed order {', '.join(expected)};")
        assert words in text, (recipe, text)


# ------------------------------------------------------- stable verdicts, marks, Holm
def _for_verdicts(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Resampling seed ``seed``, and intervals drawn until their verdicts are decided, not on
    until their printed digits are too: those draws are the first rounds of the same stream,
    which a printed interval continues only while its targets stay decided (the stopping rule
    asks for both), so the verdicts are the README's; the digits are checked against
    converged values in tests/test_converged_intervals.py."""
    interval = evidence.interval
    monkeypatch.setattr(evidence, "BOOTSTRAP_SEED", seed)
    monkeypatch.setattr(evidence, "interval",
                        lambda units, targets=(), step=0.0: interval(units, targets))


@pytest.fixture(scope="module")
def index() -> RecipeIndex:
    return load_recipe_index()


def _verdicts(monkeypatch: pytest.MonkeyPatch, seed: int, index: RecipeIndex
              ) -> list[tuple[str, str, str]]:
    """Every verdict the README prints from Tables 6 and 8 and Table 8's orderings, with
    resampling seed ``seed``."""
    from pairrepro.report.analyses.orderings import table_orderings

    _for_verdicts(monkeypatch, seed)
    paper = load_paper("csran")
    found = []
    for number in (6, 8):
        ev = cl.evaluate_table(paper, paper.table(number), None, index, RESULTS)
        found += [(r.row.label, c.column, c.status) for r in ev.rows for c in r.cells]
        if number == 8:
            found += [(f"{o.higher} > {o.lower}", o.column, o.verdict)
                      for o in table_orderings(ev)]
    return found


def test_verdicts_do_not_depend_on_the_resampling_seed(monkeypatch: pytest.MonkeyPatch,
                                                       index: RecipeIndex) -> None:
    first = _verdicts(monkeypatch, 0, index)
    assert any(status == cl.BELOW for _, _, status in first)
    for seed in range(1, 10):
        assert _verdicts(monkeypatch, seed, index) == first, seed


def _nearest_readings(monkeypatch: pytest.MonkeyPatch, seed: int, index: RecipeIndex
                      ) -> list[tuple[object, ...]]:
    """Which reading is nearest the paper in each cell of CSRAN Tables 5, 6 and 8, and which
    are tied with it, with resampling seed ``seed`` (paired intervals drawn until the tie
    is decided, as :func:`_for_verdicts` says)."""
    from pairrepro.report.analyses import readings

    _for_verdicts(monkeypatch, seed)
    joint = readings.joint_interval
    monkeypatch.setattr(readings, "joint_interval",
                        lambda *args, step=0.0, **kwargs: joint(*args, **kwargs))
    paper = load_paper("csran")
    found: list[tuple[object, ...]] = []
    for number in (5, 6, 8):
        ev = cl.evaluate_table(paper, paper.table(number), None, index, RESULTS)
        found += [(number, label, column.metric, v.reading.name, v.nearest,
                   v.farther is not None and v.farther.tied)
                  for label, column, _, values in readings.table_readings(ev) for v in values]
    return found


def test_nearest_readings_and_their_ties_do_not_depend_on_the_resampling_seed(
        monkeypatch: pytest.MonkeyPatch, index: RecipeIndex) -> None:
    first = _nearest_readings(monkeypatch, 0, index)
    assert any(found[-1] for found in first)  # some readings are tied with the nearest
    assert any(not found[-1] and not found[-2] for found in first)  # some are farther
    for seed in (1, 2):
        assert _nearest_readings(monkeypatch, seed, index) == first, seed


def test_one_seed_rows_of_trained_models_are_marked_and_claim_nothing(
        one_seed_results: Callable[[str], Path]) -> None:
    from pairrepro.report.tables.render import to_markdown

    results = one_seed_results("cin_trecqa")  # a trained row of one model
    paper = load_paper("csran")
    ev = cl.evaluate_table(paper, paper.table(6), None, load_recipe_index(), results)
    marked = {r.row.label for r in ev.rows for c in r.cells if c.one_model}
    for erow in ev.rows:
        for cell in erow.cells:
            if cell.runs:
                model = cell.runs[0].config["model"]["name"]
                assert cell.one_model == (len(cell.runs) == 1 and model != "bm25"), erow.row
    assert marked == {"CIN (Gong et al., 2018)"}
    text = to_markdown(ev)
    assert "†: one trained model" in text
    for label in marked:
        line = next(x for x in text.splitlines() if x.startswith(f"| {label} †"))
        assert "✓" not in line and "↓" not in line and "↑" not in line, line
    assert "one trained model" in ev.counts()


def test_table8_shows_the_last_epoch_dev_value_and_that_dev_chose_the_epoch() -> None:
    from pairrepro.report.tables.numbers import format_number
    from pairrepro.report.tables.render import to_markdown

    paper = load_paper("csran")
    ev = cl.evaluate_table(paper, paper.table(8), None, load_recipe_index(), RESULTS)
    cell = _cell(ev, "Original", "trec_map")
    last = [json.loads((RESULTS / "csran_trecqa" / f"seed-{s}" / "metrics.jsonl"
                        ).read_text().splitlines()[-1])["dev"]["map"] for s in (1, 2, 3)]
    assert cell.estimate is not None
    assert cell.estimate.last_epoch == pytest.approx(np.mean(last))
    text = to_markdown(ev)
    column = next(c for c in ev.table.columns if c.key == "trec_map")
    assert f"(last epoch {format_number(float(np.mean(last)), column)})" in text
    assert "also the split each run's epoch was chosen on" in text


def test_compare_to_prints_holm_adjusted_p_values_beside_the_raw_ones() -> None:
    from pairrepro.report.tables.render import to_markdown

    ev = compare_to(_table6(None), "BM25, DEV/TEST numbers kept")
    tested = [c.comparison for r in ev.rows for c in r.cells
              if c.comparison is not None and c.comparison.p_value is not None]
    raw = [c.p_value or 1.0 for c in tested]
    ranks = np.argsort(raw, kind="stable")
    m = len(raw)
    for k, i in enumerate(ranks):  # Holm by its definition: a max over the smaller ones
        expected = max(min(1.0, (m - j) * raw[ranks[j]]) for j in range(k + 1))
        assert tested[i].holm == pytest.approx(expected)
    assert m > 5 and "Holm p" in to_markdown(ev)


def _tested(found: Comparison | None) -> tuple[float | None, bool]:
    return (None, False) if found is None else (found.p_value, found.undecided)


def _test_decisions(monkeypatch: pytest.MonkeyPatch, seed: int, index: RecipeIndex
                    ) -> list[tuple[str, str]]:
    """Every paired-test decision the README prints (the "vs" tables of Tables 6, 8 and 5 and
    the gap ladders): significant at 0.05, not, or undecided, with resampling seed ``seed``;
    and Table 5's cell verdicts."""
    from pairrepro.report.analyses.ladders import available_ladders, evaluate_ladder

    _for_verdicts(monkeypatch, seed)
    paper = load_paper("csran")

    def decision(p: float | None, undecided: bool) -> str:
        return "undecided" if undecided else "" if p is None else "p<0.05" if p < 0.05 \
            else "p>=0.05"

    found = []
    for number, versus in ((6, "BM25, DEV/TEST numbers kept"), (8, "Original"),
                           (5, "BM25, threshold fitted on train")):
        ev = compare_to(cl.evaluate_table(paper, paper.table(number), None, index,
                                             RESULTS), versus)
        found += [(f"{number} {r.row.label} {c.column}",
                   decision(*_tested(c.comparison))
                   + (f" {c.status}" if number == 5 else ""))
                  for r in ev.rows for c in r.cells]
    for name in available_ladders():
        for step in evaluate_ladder(name, RESULTS, index).steps:
            found += [(f"{name} {step.recipe} {v.metric}",
                       decision(*_tested(v.comparison))) for v in step.values]
    return found


def test_test_decisions_do_not_depend_on_the_resampling_seed(
        monkeypatch: pytest.MonkeyPatch, index: RecipeIndex) -> None:
    """Issue 25: re-rendering with 10 resampling seeds prints the same verdict in every cell,
    the paired tests' decisions and Table 5 included (Tables 6 and 8: the test above)."""
    first = _test_decisions(monkeypatch, 0, index)
    decided = [d for _, d in first if d.startswith("p")]
    assert "p<0.05" in " ".join(decided) and "p>=0.05" in " ".join(decided)
    for seed in range(1, 10):
        assert _test_decisions(monkeypatch, seed, index) == first, seed
