"""The account under a gap ladder (report/analyses/gap_account.py): each number it prints is
recomputed here from the committed predictions or the runs' recorded metrics."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import f1_score

from pairrepro import paths
from pairrepro.report.analyses import ladders
from pairrepro.report.analyses.gap_account import account_markdown, dose_response, gap_markdown
from pairrepro.runs import find_runs
from pairrepro.stats import Interval

RESULTS = paths.PROJECT_DIR / "results"


def _ladder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: int, metric: str,
            steps: str) -> ladders.LadderResult:
    """A ladder of CSRAN's row in ``table`` with ``steps`` (TOML), evaluated on results/."""
    (tmp_path / "test.toml").write_text(
        f'title = "test"\npaper = "csran"\ntable = {table}\nrow = "CSRAN"\n'
        f'metrics = ["{metric}"]\n{steps}')
    monkeypatch.setattr(ladders, "LADDERS_DIR", tmp_path)
    return ladders.evaluate_ladder("test", RESULTS)


def test_the_twitter_account_is_the_paper_less_each_reading() -> None:
    result = ladders.evaluate_ladder("csran_twitter_url", RESULTS)
    step = result.ladder.account.step if result.ladder.account else -1
    frames = [pd.read_parquet(run.folder.predictions("test"))
              for run in find_runs(RESULTS, result.ladder.steps[step].recipe)]
    # each reading is the mean over the step's seeds
    positive = np.mean([f1_score(f["label"], f["prediction"]) for f in frames])
    macro = np.mean([f1_score(f["label"], f["prediction"], average="macro") for f in frames])
    lines = account_markdown(result)
    left = next(line for line in lines if line.startswith("- **Unexplained**"))
    assert f"*F1 of the paraphrase class*, {0.840 - positive:.3f}" in left
    assert f"*macro-F1*, {0.840 - macro:.3f}" in left
    protocol = next(line for line in lines if line.startswith("- **Protocol**"))
    assert "scored as *macro-F1*, the reading nearest the paper" in protocol
    assert f"step {step} gives {macro:.3f}" in protocol
    assert lines[-1] + "\n\nNot tried here:" in gap_markdown(result)


def test_a_tied_nearest_reading_is_named_with_what_it_cannot_be_told_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the CPU recipe, accuracy and macro-F1 lie about as far from the paper's 0.840
    (+0.028 and −0.029): the account names the nearest and says the runs cannot decide."""
    result = _ladder(tmp_path, monkeypatch, 5, "test.f1", """[[steps]]
recipe = "csran_twitter_url"
change = "the CPU recipe"
[readings]
steps = [0]
[account]
step = 0
""")
    (_, _, _, values), = ladders.ladder_readings(result)
    distances = {v.reading.name: abs(v.distance or 0.0) for v in values}
    nearest, runner_up = sorted(distances, key=distances.__getitem__)[:2]
    assert abs(distances[nearest] - distances[runner_up]) < 0.005  # the premise
    protocol = next(line for line in account_markdown(result)
                    if line.startswith("- **Protocol**"))
    assert f"scored as *{nearest}*, the reading nearest the paper" in protocol
    assert (f"These runs cannot tell *{nearest}* from *{runner_up}* (farther by +0.00"
            in protocol)
    assert "the nearest protocol is not decided" in protocol
    assert "*F1 of the paraphrase class*" not in protocol.split("Scored as")[0]
    assert f"**{runner_up}** (tied)" in gap_markdown(result)


def test_the_dose_slope_is_the_seed_paired_difference_per_doubling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two committed recipes on the same test queries stand for two doses (4 and 16, two
    doublings): the slope is the mean over seeds of their test MAP differences, halved."""
    result = _ladder(tmp_path, monkeypatch, 6, "test.map", """[[steps]]
recipe = "csran_trecqa_es_tuned"
change = "low"
[[steps]]
recipe = "csran_trecqa"
change = "high"
[dose]
what = "units"
steps = [0, 1]
amounts = [4, 16]
target = 64
target_what = "sixty-four"
""")
    (_, slope, carried), = dose_response(result)
    low_runs, high_runs = (sorted(find_runs(RESULTS, r), key=lambda r: r.seed)
                           for r in ("csran_trecqa_es_tuned", "csran_trecqa"))
    differences = [(h.value("test.map") or 0) - (lo.value("test.map") or 0)
                   for lo, h in zip(low_runs, high_runs, strict=True)]
    assert slope.value == pytest.approx(np.mean(differences) / math.log2(16 / 4), abs=1e-9)
    assert slope.low < slope.value < slope.high
    text = gap_markdown(result)
    assert "Dose-response (units, step 0 at 4 against step 1 at 16" in text
    # the slope's interval holds 0: two points do not identify a gain carried two doublings
    assert slope.low < 0 < slope.high and carried is None
    assert "over the 2.00 doublings to 64 not identified" in text
    assert f"{slope.value * 2:+.3f}".replace("-", "−") not in text.split("Dose-response")[1]


def test_a_cross_check_is_tested_against_the_step_it_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies of a step's own runs as a cross-check: the same values, a difference of 0."""
    folder = tmp_path / "copies" / "results"
    for run in find_runs(RESULTS, "csran_trecqa"):
        shutil.copytree(run.folder.path, folder / run.folder.path.name)
        # as the cross-check's runs, made outside pairrepro: no config.toml, so the folder
        # ("results") is not taken for their recipe
        (folder / run.folder.path.name / "config.toml").unlink()
    text = (paths.PROJECT_DIR / "pairrepro/report/ladders/csran_trecqa.toml").read_text()
    text = text.replace('folder = "crosscheck/csran_tf/results"', f'folder = "{folder}"')
    (tmp_path / "csran_trecqa.toml").write_text(text)
    shutil.copy(paths.PROJECT_DIR / "pairrepro/report/ladders/csran_trecqa_vectors.toml",
                tmp_path)
    monkeypatch.setattr(ladders, "LADDERS_DIR", tmp_path)
    result = ladders.evaluate_ladder("csran_trecqa", RESULTS)
    (_, number, values, _), = ladders.crosscheck_values(result)
    assert number == 0 and values is not None
    assert [v.text for v in values] == [v.text for v in result.steps[0].values]
    assert all(v.comparison.difference == 0 for v in values)
    line = next(x for x in account_markdown(result) if x.startswith("- **Cross-check**"))
    assert "its difference from step 0 is +0.000 [+0.000, +0.000] (p 1.000)" in line
    assert "Equivalence within ±0.020 (" in line and "): shown (two one-sided tests" in line


def test_the_vectors_line_is_the_seed_paired_worth_of_the_vectors() -> None:
    """All the vectors' information: the CPU recipe less its random-vectors twin, seed k
    against seed k, from the runs' recorded test MAP."""
    result = ladders.evaluate_ladder("csran_trecqa", RESULTS)
    line = next(x for x in account_markdown(result) if x.startswith("- **Vectors**"))
    glove, random = (sorted(find_runs(RESULTS, r), key=lambda r: r.seed)
                     for r in ("csran_trecqa", "csran_trecqa_random_vectors"))
    worth = np.mean([(g.value("test.map") or 0) - (r.value("test.map") or 0)
                     for g, r in zip(glove, random, strict=True)])
    assert f"worth {worth:+.3f}".replace("-", "−") in line
    assert "3 seeds a step" in line


def test_the_slope_verdict_compares_the_carried_upper_end_with_the_distance_left() -> None:
    from pairrepro.planning.paper_tables import Column
    from pairrepro.report.analyses.gap_account import _supports

    column = Column(key="map", header="MAP", metric="test.map", unit="fraction", decimals=3)

    def carried(high: float) -> Interval:
        return Interval(0.05, 0.02, high, 0.95, 2000, 3, 68)

    assert "does not support" in _supports(column, carried(0.076), 0.101)
    assert "cannot rule out" in _supports(column, carried(0.120), 0.101)
    assert "not identified" in _supports(column, None, 0.101)
    text = gap_markdown(ladders.evaluate_ladder("csran_trecqa_vectors", RESULTS))
    assert "MAP: the slope is not identified" in text


def test_the_unexplained_remainder_is_one_joint_bootstrap_under_one_protocol(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dose whose slope is identified (BM25 as the low dose, the CPU recipe as the high one,
    one doubling apart and one doubling short of the target): the remainder is the paper's
    value less the step's and less the carried gain, all scored clean, its interval one
    bootstrap of the three recipes' queries and seeds together (a dense reference over the
    same per-query values draws its own), not the endpoints of two intervals added."""
    from stats_reference import dense_mean_interval

    from pairrepro.report.analyses import evidence

    (tmp_path / "dose.toml").write_text(
        'title = "dose"\npaper = "csran"\ntable = 6\nrow = "CSRAN"\nmetrics = ["test.map"]\n'
        '[[steps]]\nrecipe = "bm25_trecqa"\nchange = "low"\n'
        '[[steps]]\nrecipe = "csran_trecqa"\nchange = "high"\n'
        '[dose]\nwhat = "units"\nsteps = [0, 1]\namounts = [25, 50]\ntarget = 100\n'
        'target_what = "a hundred"\n')
    result = _ladder(tmp_path, monkeypatch, 6, "test.map", """[[steps]]
recipe = "csran_trecqa_es_tuned_no_em"
change = "the step"
[account]
step = 0
dose_ladder = "dose"
""")
    lines = account_markdown(result)
    vectors = next(x for x in lines if x.startswith("- **Vectors**"))
    assert "carried at that rate over the 1.00 doublings to 100, +" in vectors
    left = next(x for x in lines if x.startswith("- **Unexplained**"))
    assert "one bootstrap of queries and seeds drawn jointly" in left
    step, high, low = (evidence.run_units(
        sorted(find_runs(RESULTS, r), key=lambda run: run.seed), "test.map")
        for r in ("csran_trecqa_es_tuned_no_em", "csran_trecqa", "bm25_trecqa"))
    remainder = 0.854 - step.values - (high.values - low.values)  # seed k with seed k
    value = 0.854 - np.mean([r.value("test.map") or 0 for r in find_runs(
        RESULTS, "csran_trecqa_es_tuned_no_em")]) - (np.mean([r.value("test.map") or 0 for r in
        find_runs(RESULTS, "csran_trecqa")]) - (find_runs(RESULTS, "bm25_trecqa")[0].value(
            "test.map") or 0))
    low_end, high_end, _ = dense_mean_interval(remainder, 40_000, seed=3)
    printed = [float(x) for x in
               left.split("): ")[1].rstrip(".").replace("[", "").replace("]", "")
               .replace(",", "").replace("~", "").replace("−", "-").split()]
    assert printed[0] == pytest.approx(value, abs=0.0005)
    assert printed[1] == pytest.approx(low_end, abs=0.003)
    assert printed[2] == pytest.approx(high_end, abs=0.003)


def test_a_slope_whose_interval_holds_0_is_not_carried() -> None:
    """The committed vectors ladder: 25-d against 50-d does not fix the slope's sign, so no
    carried gain is printed, and nothing is subtracted from the paper's value for it."""
    result = ladders.evaluate_ladder("csran_trecqa", RESULTS)
    lines = account_markdown(result)
    vectors = next(x for x in lines if x.startswith("- **Vectors**"))
    assert "not identified" in vectors and "carried at that rate" not in vectors
    left = next(x for x in lines if x.startswith("- **Unexplained**"))
    assert "the vectors' share is not identified (above), so none is subtracted" in left
