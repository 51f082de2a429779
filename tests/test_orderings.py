"""Row orderings (report/analyses/orderings.py): the paper's order of two rows, read from its
printed numbers, against our paired test, whose difference must be the difference of the two
rows' result.json values read here by hand."""

from __future__ import annotations

import json
import statistics

import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.planning.paper_tables import load_paper
from pairrepro.planning.recipe_index import load_recipe_index
from pairrepro.report.analyses import orderings
from pairrepro.report.tables.cells import evaluate_table

RESULTS = paths.PROJECT_DIR / "results"
# CSRAN Table 8's TrecQA rows and the recipes that reproduce them
RECIPES = {"Original": "csran_trecqa", "w/o MAR": "csran_no_mar_trecqa",
           "w/o CSRA": "csran_no_csra_trecqa", "w/o MAR/CSRA": "csran_no_mar_no_csra_trecqa"}


def _dev(recipe: str, metric: str) -> float:
    values = [json.loads(p.read_text())["metrics"]["dev"][metric]
              for p in sorted((RESULTS / recipe).glob("seed-*/result.json"))]
    assert values, recipe
    return statistics.fmean(values)


@pytest.mark.parametrize(("paper_difference", "difference", "p_value", "expected"), [
    (0.07, 0.02, 0.01, orderings.HOLDS),
    (0.07, 0.02, 0.35, orderings.SAME_DIRECTION),
    (0.07, -0.02, 0.35, orderings.REVERSED_NOT_SIGNIFICANT),
    (0.07, -0.02, 0.001, orderings.REVERSED),
    (0.0, 0.01, 0.63, orderings.TIE_HOLDS),
    (0.0, -0.05, 0.02, orderings.TIE_BROKEN),
    (0.07, 0.02, 0.05, orderings.SAME_DIRECTION),  # p < alpha, not <=
])
def test_the_verdict_rule(paper_difference: float, difference: float, p_value: float,
                          expected: str) -> None:
    assert orderings.verdict(paper_difference, difference, p_value) == expected


def test_table8_orderings_are_the_papers_order_against_the_reference_runs() -> None:
    paper = load_paper("csran")
    ev = evaluate_table(paper, paper.table(8), None, load_recipe_index(), RESULTS)
    found = orderings.table_orderings(ev)
    # SNLI and SciTail have no reference runs: only the 6 pairs of 4 TrecQA rows, MAP and MRR
    assert [o.metric for o in found] == ["dev.map"] * 6 + ["dev.mrr"] * 6
    by_pair = {(o.metric, o.higher, o.lower): o for o in found}
    # the paper prints MAP 0.86 / 0.79 / 0.84 / 0.79: Original first, the two 0.79 rows tie
    original = by_pair["dev.map", "Original", "w/o MAR"]
    assert (original.published_higher, original.published_lower) == (0.86, 0.79)
    assert by_pair["dev.map", "w/o CSRA", "w/o MAR"].published_higher == 0.84
    tie = by_pair["dev.map", "w/o MAR", "w/o MAR/CSRA"]
    assert tie.tie and tie.verdict in (orderings.TIE_HOLDS, orderings.TIE_BROKEN)
    for item in found:
        metric = item.metric.split(".")[1]
        # MAP and MRR are means over the same dev queries: the paired difference is the
        # difference of the two rows' recorded values (means over seeds)
        expected = _dev(RECIPES[item.higher], metric) - _dev(RECIPES[item.lower], metric)
        ours = item.comparison
        assert ours.difference == pytest.approx(expected, abs=1e-9)
        # 0 within Monte-Carlo error of an endpoint of the difference's interval: no verdict
        assert item.verdict == (
            orderings.UNDECIDED if ours.undecided else
            orderings.verdict(item.published_higher - item.published_lower, ours.difference,
                              ours.p_value))
    text = orderings.orderings_markdown(ev, found)
    assert "| TrecQA MAP | w/o MAR = w/o MAR/CSRA | 0.79 = 0.79 |" in text
    assert "on the same dev queries" in text


def test_the_orderings_command(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "no-runs"))
    result = CliRunner().invoke(app, ["--json", "report", "orderings", "csran", "--table", "8"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["paper"], data["table"], len(data["orderings"])) == ("csran", 8, 12)
    result = CliRunner().invoke(app, ["report", "orderings", "nosuch", "--table", "8"])
    assert result.exit_code == 2 and "unknown paper" in result.output
