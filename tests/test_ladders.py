"""Gap ladders (report/analyses/ladders.py): every number comes from the committed reference
runs and agrees with their result.json files, read here by hand."""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.report.analyses import ladders
from pairrepro.report.analyses.gap_account import gap_json, gap_markdown

RESULTS = paths.PROJECT_DIR / "results"


def _test_map(recipe: str) -> list[float]:
    return [json.loads(p.read_text())["metrics"]["test"]["map"]
            for p in sorted((RESULTS / recipe).glob("seed-*/result.json"))]


def _ladder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> str:
    (tmp_path / "mine.toml").write_text(body, encoding="utf-8")
    monkeypatch.setattr(ladders, "LADDERS_DIR", tmp_path)
    return "mine"


UNRUN = "csran_trecqa_es_tuned_no_em_all_negatives_big"  # a step without runs in _two_steps
LADDER = f"""title = "test ladder"
paper = "csran"
table = 6
row = "CSRAN"
metrics = ["test.map"]
[[steps]]
recipe = "csran_trecqa"
change = "base"
[[steps]]
recipe = "csran_no_em_trecqa"
change = "- exact match"
[[steps]]
recipe = "{UNRUN}"
change = "+ size"
[[left]]
what = "vectors"
why = "not here"
"""


def _two_steps(tmp_path: Path) -> Path:
    """A results folder with the reference runs of the ladder's first two steps only."""
    for recipe in ("csran_trecqa", "csran_no_em_trecqa"):
        shutil.copytree(RESULTS / recipe, tmp_path / "results" / recipe)
    return tmp_path / "results"


def test_each_step_is_its_runs_mean_and_the_difference_from_the_step_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _ladder(tmp_path, monkeypatch, LADDER)
    text = ladders.ladder_markdown(ladders.evaluate_ladder(name, _two_steps(tmp_path)))
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")]
            for line in text.splitlines() if line.startswith("| ")][1:]
    base, no_em = statistics.fmean(_test_map("csran_trecqa")), \
        statistics.fmean(_test_map("csran_no_em_trecqa"))
    assert len(_test_map("csran_trecqa")) == 3
    assert rows[0][4].startswith(f"{base:.3f} [")  # mean over the three seeds
    assert rows[0][5] == ""  # the first step has nothing before it
    assert rows[1][4].startswith(f"{no_em:.3f} [")
    # MAP is a mean over the same 68 queries, so the per-query difference is the MAPs'
    diff = f"{no_em - base:+.3f}".replace("-", "−")
    assert rows[1][5].startswith(f"{diff} (p ")
    assert ("no reference run yet: `pairrepro train "
            f"recipes/{UNRUN}.toml`") in rows[2][3]
    # the paper's value (Table 6, as printed) and the distance from the last step with runs
    assert (f"MAP 0.854, {f'{no_em - 0.854:+.3f}'.replace('-', '−')} from step 1, the last "
            "main step run") in text
    assert "- vectors: not here" in text


def test_a_ladder_naming_an_unknown_key_or_recipe_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _ladder(tmp_path, monkeypatch, LADDER.replace("change = \"base\"",
                                                          "change = \"base\"\nchnage = 1"))
    with pytest.raises(ConfigError, match="chnage"):
        ladders.ladder_markdown(ladders.evaluate_ladder(name, RESULTS))
    name = _ladder(tmp_path, monkeypatch, LADDER.replace(UNRUN, "no_such"))
    with pytest.raises(ConfigError, match="no recipe 'no_such'"):
        ladders.ladder_markdown(ladders.evaluate_ladder(name, RESULTS))


def test_every_committed_ladder_renders() -> None:
    for name in ladders.available_ladders():
        result = ladders.evaluate_ladder(name, RESULTS)
        assert gap_markdown(result).startswith("| step |")
        json.dumps(gap_json(result))  # --json output is plain data


def test_the_json_form_holds_the_same_numbers(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    data = ladders.ladder_json(ladders.evaluate_ladder(
        _ladder(tmp_path, monkeypatch, LADDER), _two_steps(tmp_path)))
    assert data["paper"]["published"] == {"test.map": 0.854}
    first, second, third = data["steps"]
    assert first["seeds"] == [1, 2, 3]
    assert first["values"][0]["mean"] == pytest.approx(statistics.fmean(_test_map("csran_trecqa")))
    assert first["values"][0]["low"] < first["values"][0]["mean"] < first["values"][0]["high"]
    assert second["values"][0]["difference"] == pytest.approx(
        statistics.fmean(_test_map("csran_no_em_trecqa"))
        - statistics.fmean(_test_map("csran_trecqa")))
    assert 0 < second["values"][0]["p_value"] <= 1
    assert third["values"] == []


def test_a_ladder_may_follow_a_comparison_row_and_f1_pairs_its_seeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row recipes add under a table (no published value); F1's step difference is the
    difference of the steps' mean F1 over seeds (seeds paired in order), read by hand."""
    name = _ladder(tmp_path, monkeypatch, """title = "cosine"
paper = "csran"
table = 5
row = "MV-LSTM-Cosine (Wan et al., 2016) + EM"
metrics = ["test.f1"]
[[steps]]
recipe = "mv_lstm_cosine_twitter_url"
change = "pairs"
[[steps]]
recipe = "mv_lstm_cosine_twitter_url_disjoint_dev"
change = "first tweets"
""")
    result = ladders.evaluate_ladder(name, RESULTS)

    def f1(recipe: str) -> list[float]:
        return [json.loads(p.read_text())["metrics"]["test"]["f1"]
                for p in sorted((RESULTS / recipe).glob("seed-*/result.json"))]

    base, step = f1("mv_lstm_cosine_twitter_url"), f1("mv_lstm_cosine_twitter_url_disjoint_dev")
    assert len(base) == len(step) == 3
    (value,) = result.steps[1].values
    assert value.mean == pytest.approx(statistics.fmean(step))
    assert value.comparison.difference == pytest.approx(statistics.fmean(step)
                                                        - statistics.fmean(base))
    assert "The paper prints no number for this row" in ladders.ladder_markdown(result)


def test_a_step_of_one_trained_model_is_marked(one_seed_results: Callable[[str], Path]) -> None:
    """A step with one seed is one trained model: its interval covers the test units only, so
    its row is marked and the footer says what that means (issue 25), as tables do; a step of
    several seeds is not marked. The reference runs, with TwitterURL step 1 cut to seed 1."""
    results = one_seed_results("csran_twitter_url_es")
    marks = []
    for name in ("csran_twitter_url", "csran_trecqa"):
        text = ladders.ladder_markdown(ladders.evaluate_ladder(name, results))
        rows = [[cell.strip() for cell in line.strip("|").split(" | ")]
                for line in text.splitlines() if line.startswith("| ")][1:]
        run = {row[2].strip("`"): row[3] for row in rows if "no reference run" not in row[3]}
        for recipe, seeds in run.items():
            count = len(list((results / recipe).glob("seed-*")))
            assert seeds.endswith("†") == (count == 1), (recipe, seeds, count)
            marks.append(count == 1)
        footer = "†: one trained model" in text.split("\n\n", 1)[1]
        assert footer == any(s.endswith("†") for s in run.values()), name
    assert True in marks and False in marks  # both kinds of step are checked


def test_the_steps_that_hold_after_holm_are_named(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The sentence under the table names exactly the steps whose Holm-adjusted p is below
    0.05, with their difference, and counts the tests when none is."""
    result = ladders.evaluate_ladder(_ladder(tmp_path, monkeypatch, LADDER),
                                     _two_steps(tmp_path))
    second = result.steps[1].values[0]
    second.comparison.difference, second.comparison.holm = -0.047, 0.012
    assert ("holds after Holm's adjustment (Holm p < 0.05): step 1 (MAP −0.047, Holm p 0.012)."
            in ladders.ladder_markdown(result))
    second.comparison.holm = 0.35
    assert "(Holm p < 0.05): none of the 1 test." in ladders.ladder_markdown(result)


def test_the_headline_measures_from_the_last_main_step_not_a_side_step() -> None:
    """The TrecQA ladder ends with side steps of step 0: the distance to the paper's MAP is
    step 6's (the last main step), read here from its result.json files."""
    result = ladders.evaluate_ladder("csran_trecqa", RESULTS)
    main = [k for k, step in enumerate(result.ladder.steps) if not step.against]
    assert main[-1] == 6 and len(result.ladder.steps) > 7  # the premise: side steps follow
    recipe = result.ladder.steps[6].recipe
    distance = f"{statistics.fmean(_test_map(recipe)) - 0.854:+.3f}".replace("-", "−")
    assert f"MAP 0.854, {distance} from step 6, the last main step run" in \
        ladders.ladder_markdown(result)
