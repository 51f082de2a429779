"""Protocol readings (report/analyses/readings.py): every reading of the committed reference
runs is recomputed here with scikit-learn or pytrec_eval, and the raw question counts of the
TrecQA readings file are recounted from the prepared raw variant where ../shared is here."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from sklearn.metrics import accuracy_score, f1_score

from pairrepro import paths
from pairrepro.planning.paper_tables import load_paper
from pairrepro.planning.recipe_index import load_recipe_index
from pairrepro.report.analyses import ladders
from pairrepro.report.analyses.gap_account import gap_markdown
from pairrepro.report.analyses.readings import load_readings, read_cell, table_readings
from pairrepro.report.publishing.readme import _reference_view
from pairrepro.runs import find_runs

RESULTS = paths.PROJECT_DIR / "results"


def _predictions(recipe: str, split: str) -> list[pd.DataFrame]:
    return [pd.read_parquet(RESULTS / recipe / f"seed-{seed}" / "predictions" / f"{split}.parquet")
            for seed in sorted(int(p.name.split("-")[1])
                               for p in (RESULTS / recipe).glob("seed-*"))]


def _by_name(values: list) -> dict[str, float]:  # type: ignore[type-arg]
    return {v.reading.name: v.value for v in values}


def test_twitter_url_readings_equal_scikit_learn() -> None:
    """Paraphrase-class F1, macro-F1 and accuracy of the CSRAN cell, against scikit-learn."""
    ev = _reference_view("csran", 5, RESULTS)
    (label, column, published, values), = table_readings(ev)
    assert (label, column.metric, published) == ("CSRAN", "test.f1", 0.840)
    frames = _predictions("csran_twitter_url", "test")
    expected = {
        "F1 of the paraphrase class": np.mean([f1_score(f["label"], f["prediction"])
                                               for f in frames]),
        "macro-F1": np.mean([f1_score(f["label"], f["prediction"], average="macro")
                             for f in frames]),
        "accuracy": np.mean([accuracy_score(f["label"], f["prediction"]) for f in frames]),
    }
    got = _by_name(values)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, abs=1e-12), name
    nearest = [v.reading.name for v in values if v.nearest]
    assert nearest == [min(expected, key=lambda n: abs(expected[n] - 0.840))]
    for value in values:  # the interval holds the value, the distance is value - paper
        assert value.low <= value.value <= value.high
        assert value.distance == pytest.approx(value.value - 0.840)


def _percentiles(statistic: np.ndarray) -> tuple[float, float]:
    low, high = np.quantile(statistic, [0.025, 0.975])
    return float(low), float(high)


def _seed_means(per_seed: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """Each reading's ``[R, seeds]`` values averaged over seeds drawn with replacement, the
    same seeds for every reading: ``[R]``."""
    resamples, seeds = next(iter(per_seed.values())).shape
    drawn = np.random.default_rng(seed).integers(0, seeds, size=(resamples, seeds))
    return {name: np.take_along_axis(values, drawn, axis=1).mean(axis=1)
            for name, values in per_seed.items()}


def _cell(csran_cell: Callable, recipe: str, table: int, metric: str) -> tuple[float, list]:
    """(published, readings) of the CSRAN row's ``metric`` in ``table``, read from the
    committed runs of ``recipe`` alone."""
    column, published, spec, runs = csran_cell(recipe, table, metric)
    return published, read_cell(runs, column, published, spec)


def _check_farther(values: list, readings: dict[str, np.ndarray],  # type: ignore[type-arg]
                   published: float, tolerance: float) -> None:
    """Each reading's *farther than nearest* against the reference draws ``readings``
    (name -> ``[R]`` means over resampled seeds), and tied exactly when the reference's
    interval reaches 0 (a reference endpoint within ``tolerance`` of 0 is not judged)."""
    nearest = next(v for v in values if v.nearest)
    for value in values:
        if value.nearest:
            assert value.farther is None
            continue
        statistic = (np.abs(readings[value.reading.name] - published)
                     - np.abs(readings[nearest.reading.name] - published))
        low, high = _percentiles(statistic)
        assert value.farther.value == pytest.approx(
            abs(value.value - published) - abs(nearest.value - published), abs=1e-12)
        assert value.farther.low == pytest.approx(low, abs=tolerance), value.reading.name
        assert value.farther.high == pytest.approx(high, abs=tolerance), value.reading.name
        if abs(low) > tolerance:
            assert value.farther.tied == (low < 0), value.reading.name


def test_farther_than_nearest_is_a_paired_bootstrap_over_pairs_and_seeds(
        csran_cell: Callable) -> None:
    """TwitterURL: pairs and seeds resampled together for the three readings, each scored
    from counts of the drawn pairs (a reference independent of stats.py's sampler)."""
    published, values = _cell(csran_cell, "csran_twitter_url", 5, "test.f1")
    frames = [f.sort_values("pair_id") for f in _predictions("csran_twitter_url", "test")]
    gold = frames[0]["label"].to_numpy() == 1
    preds = np.stack([f["prediction"].to_numpy() == 1 for f in frames])
    rng = np.random.default_rng(11)
    n, resamples = len(gold), 4000
    scores: dict[str, list[np.ndarray]] = {"F1 of the paraphrase class": [], "macro-F1": [],
                                           "accuracy": []}
    for _ in range(resamples // 500):
        drawn = rng.integers(0, n, size=(500, n))
        weights = np.stack([np.bincount(row, minlength=n) for row in drawn]).astype(float)

        def f1(said: np.ndarray, truth: np.ndarray, w: np.ndarray = weights) -> np.ndarray:
            tp, fp, fn = (w @ (said & truth), w @ (said & ~truth), w @ (~said & truth))
            return 2 * tp / (2 * tp + fp + fn)

        positive = np.stack([f1(p, gold) for p in preds], axis=1)
        negative = np.stack([f1(~p, ~gold) for p in preds], axis=1)
        scores["F1 of the paraphrase class"].append(positive)
        scores["macro-F1"].append((positive + negative) / 2)
        scores["accuracy"].append(np.stack([weights @ (p == gold) for p in preds], axis=1) / n)
    readings = _seed_means({name: np.vstack(parts) for name, parts in scores.items()}, 12)
    _check_farther(values, readings, published, tolerance=0.005)
    assert not next(v for v in values if v.reading.name == "F1 of the paraphrase class"
                    ).farther.tied


def test_farther_than_nearest_resamples_the_raw_questions_for_trecqa(
        csran_cell: Callable) -> None:
    """TrecQA: the raw split's questions resampled (clean ones with their pytrec_eval AP,
    all-positive ones as 1, no-positive ones as 0 or left out); each reading averages its own
    questions among those drawn."""
    spec = load_readings("trecqa")
    assert spec is not None
    counts = spec.raw["test"]
    published, values = _cell(csran_cell, "csran_trecqa", 6, "test.map")
    ap = []
    for frame in _predictions("csran_trecqa", "test"):
        qrels, run = _qrels_and_run(frame)
        found = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
        ap.append([found[q]["map"] for q in sorted(found)])
    clean, seeds = len(ap[0]), len(ap)
    score = np.hstack([np.array(ap), np.ones((seeds, counts.all_positive)),
                       np.zeros((seeds, counts.no_positive))])  # [seeds, raw questions]
    total = score.shape[1]
    rng = np.random.default_rng(13)
    drawn = rng.integers(0, total, size=(20_000, total))
    weights = np.stack([np.bincount(row, minlength=total) for row in drawn]).astype(float)
    kept = {"clean": np.arange(total) < clean,
            "raw, no-positive questions dropped": np.arange(total) < clean + counts.all_positive,
            "raw, no-positive questions scored 0": np.ones(total, dtype=bool)}
    readings = _seed_means({name: (weights * mask) @ score.T / (weights @ mask)[:, None]
                            for name, mask in kept.items()}, 14)
    _check_farther(values, readings, published, tolerance=0.006)


def _qrels_and_run(frame: pd.DataFrame
                   ) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """pytrec_eval's relevance judgements and run of a ranking predictions frame."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for row in frame.itertuples():
        qrels.setdefault(str(row.group_id), {})[str(row.pair_id)] = int(row.label)
        run.setdefault(str(row.group_id), {})[str(row.pair_id)] = float(row.score)
    return qrels, run


def _trec_eval_means(frame: pd.DataFrame, all_positive: int, no_positive: int
                     ) -> dict[str, tuple[float, float]]:
    """(MAP, MRR) by pytrec_eval over the clean questions plus stand-in questions of the raw
    split: ``all_positive`` whose candidates are all relevant, ``no_positive`` with none. The
    means are over questions with a relevant candidate (trec_eval without -c) and over all."""
    qrels, run = _qrels_and_run(frame)
    for kind, count, label in (("all", all_positive, 1), ("none", no_positive, 0)):
        for k in range(count):
            qrels[f"{kind}{k}"] = {f"{kind}{k}-{d}": label for d in range(3)}
            run[f"{kind}{k}"] = {f"{kind}{k}-{d}": float(d) for d in range(3)}
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"map", "recip_rank"}).evaluate(run)
    relevant = [q for q in per_query if any(qrels[q].values())]
    return {
        "dropped": (np.mean([per_query[q]["map"] for q in relevant]),
                    np.mean([per_query[q]["recip_rank"] for q in relevant])),
        "zero": (np.mean([v["map"] for v in per_query.values()]),
                 np.mean([v["recip_rank"] for v in per_query.values()])),
    }


@pytest.mark.parametrize(("recipe", "table", "split", "row"),
                         [("csran_trecqa", 6, "test", "CSRAN"),
                          ("csran_trecqa", 8, "dev", "Original")])
def test_trecqa_readings_equal_pytrec_eval(recipe: str, table: int, split: str,
                                           row: str) -> None:
    spec = load_readings("trecqa")
    assert spec is not None
    counts = spec.raw[split]
    frames = _predictions(recipe, split)
    per_seed = [_trec_eval_means(f, counts.all_positive, counts.no_positive) for f in frames]
    ev = _reference_view("csran", table, RESULTS)
    cells = [(column, values) for label, column, _, values in table_readings(ev)
             if label == row]
    assert [c.metric_name for c, _ in cells] == ["map", "mrr"]
    for k, (column, values) in enumerate(cells):
        got = _by_name(values)
        expected_clean = np.mean([_trec_eval_means(f, 0, 0)["dropped"][k] for f in frames])
        assert got["clean"] == pytest.approx(expected_clean, abs=1e-12)
        assert got["raw, no-positive questions dropped"] == pytest.approx(
            np.mean([s["dropped"][k] for s in per_seed]), abs=1e-12)
        assert got["raw, no-positive questions scored 0"] == pytest.approx(
            np.mean([s["zero"][k] for s in per_seed]), abs=1e-12)
        assert column.metric == f"{split}.{column.metric_name}"


def test_trecqa_raw_counts_match_the_prepared_raw_variant(
        raw_from_mirror: Callable[[str], Path]) -> None:
    """The readings file's counts are the raw split's questions that clean drops, and the
    questions both keep have the same candidates (so clean predictions stand for them)."""
    from pairrepro.data.prepared import load_prepared
    from pairrepro.data.preprocess import prepare_dataset

    raw_from_mirror("trecqa")
    for variant in ("raw", "clean"):
        prepare_dataset("trecqa", variant, progress=False)
    spec = load_readings("trecqa")
    assert spec is not None
    for split, counts in spec.raw.items():
        raw = load_prepared("trecqa", "raw").split(split)
        clean = load_prepared("trecqa", "clean").split(split)
        sizes = raw.groupby("group_id")["label"].agg(["sum", "count"])
        assert (sizes["sum"] == 0).sum() == counts.no_positive
        assert (sizes["sum"] == sizes["count"]).sum() == counts.all_positive
        kept = sizes[(sizes["sum"] > 0) & (sizes["sum"] < sizes["count"])]
        assert kept["count"].to_dict() == clean.groupby("group_id").size().to_dict()


def test_ladder_readings_name_their_steps_and_read_the_same_runs() -> None:
    result = ladders.evaluate_ladder("csran_twitter_url", RESULTS)
    assert sorted({number for number, _, _, _ in ladders.ladder_readings(result)}) == [0, 3]
    column, published = result.columns[0]
    spec = load_readings("twitter_url")
    assert spec is not None
    for number, _, _, values in ladders.ladder_readings(result):
        assert values == read_cell(result.runs[number], column, published, spec)
    text = gap_markdown(result)
    assert "Protocol readings of steps 0, 3" in text and "(nearest" in text
    assert "Sources:" in text and "Lan, Qiu, He, Xu" in text


def test_a_side_step_is_tested_against_the_step_it_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step with ``against`` is compared with that earlier step, not the one before it, and
    the main line goes on from the step before the side step."""
    (tmp_path / "side.toml").write_text("""title = "side"
paper = "csran"
table = 6
row = "CSRAN"
metrics = ["test.map"]
[[steps]]
recipe = "csran_trecqa"
change = "base"
[[steps]]
recipe = "csran_trecqa_bf16"
change = "side"
against = "csran_trecqa"
[[steps]]
recipe = "csran_no_em_trecqa"
change = "next"
""")
    monkeypatch.setattr(ladders, "LADDERS_DIR", tmp_path)
    result = ladders.evaluate_ladder("side", RESULTS)
    assert [s.against for s in result.steps] == [None, 0, 0]
    text = ladders.ladder_markdown(result)
    assert "vs step 0: " in text.splitlines()[3]
    assert "vs step 0: " not in text.splitlines()[4]
    (tmp_path / "side.toml").write_text((tmp_path / "side.toml").read_text().replace(
        'against = "csran_trecqa"', 'against = "csran_no_em_trecqa"'))
    with pytest.raises(Exception, match="no earlier step runs"):
        ladders.evaluate_ladder("side", RESULTS)


def test_every_readings_file_names_real_tables_and_metrics() -> None:
    index = load_recipe_index()
    assert index.recipes
    for path in sorted((paths.PROJECT_DIR / "pairrepro" / "report" / "readings").glob("*.toml")):
        spec = load_readings(path.stem)
        assert spec is not None and spec.readings
        for ref in spec.tables:
            table = load_paper(ref.paper).table(ref.table)
            datasets = {c.dataset or table.dataset for c in table.columns
                        if c.kind == "metric" and c.metric_name in spec.metrics}
            assert spec.dataset in datasets, (path.name, ref)
    assert find_runs(RESULTS, "csran_trecqa")


def test_report_readings_json_gives_each_readings_distance_and_ties(
        csran_cell: Callable) -> None:
    from typer.testing import CliRunner

    from pairrepro.cli.app import app

    out = CliRunner().invoke(app, ["--json", "report", "readings", "csran", "--table", "5"])
    assert out.exit_code == 0, out.output
    rows = {row["reading"]: row for row in json.loads(out.output)}
    published, values = _cell(csran_cell, "csran_twitter_url", 5, "test.f1")
    assert rows.keys() == {v.reading.name for v in values}
    for value in values:
        row = rows[value.reading.name]
        assert (row["published"], row["nearest"]) == (published, value.nearest)
        assert row["distance"] == pytest.approx(value.value - published)
        assert row["tied"] == (value.farther is not None and value.farther.tied)
        farther = value.farther
        assert row["farther"] == (None if farther is None else
                                  {"value": farther.value, "low": farther.low,
                                   "high": farther.high})


def _nan_score(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(score=frame["score"].where(frame.index != 3, np.nan))


def _flip_a_label(frame: pd.DataFrame) -> pd.DataFrame:
    """The first question's lowest-scored candidate made relevant (its AP falls)."""
    first = frame[frame["group_id"] == frame["group_id"].iloc[0]]
    return frame.assign(label=frame["label"].where(frame.index != first["score"].idxmin(), 1))


def _drop_question(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["group_id"] != frame["group_id"].iloc[0]]


@pytest.mark.parametrize("damage", [
    _nan_score, _flip_a_label, _drop_question,
    lambda f: pd.concat([f, f.iloc[:5]]),  # duplicated rows
    lambda f: f.drop(columns="group_id"),
    lambda f: f.iloc[10:],  # rows removed
], ids=["nan", "flipped-label", "question-removed", "duplicated", "no-group-id",
        "rows-removed"])
def test_report_readings_refuses_damaged_predictions_as_gap_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        damage: Callable[[pd.DataFrame], pd.DataFrame]) -> None:
    """Damaged test predictions of one seed left the cell out: exit 0 with "No reproduced cell
    ... has a published value"; `report gap` refuses the same folder with exit 3."""
    assert _readings_of_damaged(tmp_path, monkeypatch, "csran_trecqa", 6, damage)


def test_report_readings_refuses_damaged_classification_predictions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _readings_of_damaged(tmp_path, monkeypatch, "csran_twitter_url", 5,
                                lambda f: f.iloc[100:])


def _readings_of_damaged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recipe: str,
                         table: int, damage: Callable[[pd.DataFrame], pd.DataFrame]) -> bool:
    """`report readings csran --table N` on a copy of ``recipe``'s runs whose seed 2 has its
    test predictions damaged: exit 3 naming that seed."""
    from typer.testing import CliRunner

    from pairrepro.cli.app import app

    results = tmp_path / "results"
    shutil.copytree(RESULTS / recipe, results / recipe)
    target = results / recipe / "seed-2" / "predictions" / "test.parquet"
    damage(pd.read_parquet(target)).to_parquet(target)
    monkeypatch.setenv("PAIRREPRO_RESULTS", str(results))
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs"))
    out = CliRunner().invoke(app, ["report", "readings", "csran", "--table", str(table)])
    assert out.exit_code == 3, out.output
    return f"{recipe}/seed-2/" in out.output


def test_a_readings_file_naming_an_unknown_metric_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``metrics = ["map", "bogus"]`` silently dropped the unknown metric (and MRR's rows)."""
    from pairrepro.errors import ConfigError
    from pairrepro.report.analyses import readings

    text = (readings.READINGS_DIR / "trecqa.toml").read_text(encoding="utf-8")
    assert 'metrics = ["map", "mrr"]' in text
    (tmp_path / "trecqa.toml").write_text(
        text.replace('metrics = ["map", "mrr"]', 'metrics = ["map", "bogus"]'), encoding="utf-8")
    monkeypatch.setattr(readings, "READINGS_DIR", tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_readings("trecqa")
    message = caught.value.message
    assert str(tmp_path / "trecqa.toml") in message and "[metrics]" in message
    assert "'bogus'" in message and all(f"'{m}'" in message for m in ("map", "mrr", "f1"))
