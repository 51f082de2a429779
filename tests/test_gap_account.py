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
    (_, slope, low, high), = dose_response(result)
    low_runs, high_runs = (sorted(find_runs(RESULTS, r), key=lambda r: r.seed)
                           for r in ("csran_trecqa_es_tuned", "csran_trecqa"))
    differences = [(h.value("test.map") or 0) - (lo.value("test.map") or 0)
                   for lo, h in zip(low_runs, high_runs, strict=True)]
    assert slope == pytest.approx(np.mean(differences) / math.log2(16 / 4), abs=1e-9)
    assert low < slope < high
    text = gap_markdown(result)
    assert "Dose-response (units, step 0 at 4 against step 1 at 16" in text
    assert f"{slope * 2:+.3f}".replace("-", "−") in text  # two doublings from 16 to 64


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
    (_, number, values), = ladders.crosscheck_values(result)
    assert number == 0 and values is not None
    assert [v.text for v in values] == [v.text for v in result.steps[0].values]
    assert all(v.comparison.difference == 0 for v in values)
    line = next(x for x in account_markdown(result) if x.startswith("- **Cross-check**"))
    assert "vs step 0: +0.000 (p 1.000)" in line


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
    assert "does not support" in _supports(column, 0.076, 0.101)
    assert "cannot rule out" in _supports(column, 0.120, 0.101)
    text = gap_markdown(ladders.evaluate_ladder("csran_trecqa_vectors", RESULTS))
    assert "MAP: even the upper end of the carried gain falls short" in text
