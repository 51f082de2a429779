"""Printed interval endpoints against converged values (issue 36): a sample of the README's
cells (CSRAN Table 6 and Table 8, the TrecQA gap ladder, readings' distances beyond the nearest)
recomputed here from the committed reference runs with 2,000,000 resamples (500,000 for the
distances) from a stream of their own. An endpoint printed
without the ~ mark must be the converged endpoint rounded to its printed digits: within half
a printed unit of it, give or take the reference's own Monte-Carlo error; a marked one (its
digit could still move) within half a unit and both Monte-Carlo errors."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from pairrepro import paths
from pairrepro.planning.paper_tables import Column, load_paper
from pairrepro.planning.recipe_index import load_recipe_index
from pairrepro.report.analyses import evidence
from pairrepro.report.analyses.ladders import evaluate_ladder, recipe_runs
from pairrepro.report.tables import cells as cl
from pairrepro.report.tables.numbers import (
    MOVING,
    format_interval,
    from_unit,
    in_column,
    parse_published,
    printed_step,
)
from pairrepro.stats import Interval, mean_interval

RESULTS = paths.PROJECT_DIR / "results"
REFERENCE_RESAMPLES = 2_000_000
# the test's own bound: 4 MC s.e. over the ~30 endpoints checked (3 per endpoint would leave
# a family-wise chance of a false alarm of several per cent)
TEST_Z = 4.0
ENDPOINTS = re.compile(rf"\[({MOVING}?)([^,\]]+), ({MOVING}?)([^\]]+)\]")
TABLE_CELLS = {6: [("CSRAN", "map"), ("CSRAN", "mrr"),
                   ("ESIM (Chen et al., 2017) + EM", "map"),
                   ("ESIM (Chen et al., 2017) + EM", "mrr"),
                   ("BM25, DEV/TEST numbers kept", "mrr")],
               8: [("Original", "trec_map"), ("Original", "trec_mrr")]}


def _converged(runs: list, metric: str) -> Interval:
    units = evidence.run_units(runs, metric)
    return mean_interval(units.values, resamples=REFERENCE_RESAMPLES,
                         seed=evidence.stream("converged", units.recipe, metric))


def _check(text: str, printed: Interval, converged: Interval, column: Column) -> list[str]:
    """Why the endpoints printed in ``text`` are off the converged ones ([] when they are not)."""
    match = ENDPOINTS.search(text)
    assert match, text
    half = printed_step(column) / 2
    problems = []
    for mark, shown, end, own_se, ref_se in (
            (match[1], match[2], converged.low, printed.low_se, converged.low_se),
            (match[3], match[4], converged.high, printed.high_se, converged.high_se)):
        value = from_unit(parse_published(shown) or 0.0, column)
        slack = TEST_Z * (ref_se + (own_se if mark else 0.0))
        if abs(value - end) > half + slack + 1e-12:
            problems.append(f"{text}: {mark}{shown} against converged {end:.5f} "
                            f"(half a unit {half:g}, MC slack {slack:.5f})")
    return problems


@pytest.mark.parametrize("number", sorted(TABLE_CELLS))
def test_printed_table_endpoints_are_the_converged_ones(number: int) -> None:
    paper = load_paper("csran")
    ev = cl.evaluate_table(paper, paper.table(number), None, load_recipe_index(), RESULTS)
    problems, checked = [], 0
    for label, key in TABLE_CELLS[number]:
        row = next(r for r in ev.rows if r.row.label == label)
        cell = next(c for c in row.cells if c.column == key)
        column = next(c for c in ev.table.columns if c.key == key)
        found = cell.estimate
        assert found is not None and found.interval is not None, (label, key, cell.detail)
        problems += _check(format_interval(found.interval, in_column(column)), found.interval,
                           _converged(cell.runs, column.metric), column)
        checked += 1
    assert checked == len(TABLE_CELLS[number]) and not problems, "\n".join(problems)


def test_printed_ladder_endpoints_are_the_converged_ones() -> None:
    """Every step of the TrecQA gap ladder with runs, each of its metrics."""
    index = load_recipe_index()
    result = evaluate_ladder("csran_trecqa", RESULTS, index)
    problems, checked = [], 0
    for step in result.steps:
        runs = recipe_runs(index, RESULTS, step.recipe)
        for (column, _), value in zip(result.columns, step.values, strict=True):
            units = evidence.run_units(runs, column.metric)
            printed = evidence.interval(units, step=printed_step(column))
            problems += _check(value.text, printed, _converged(runs, column.metric), column)
            checked += 1
    assert checked >= 8 and not problems, "\n".join(problems)


def test_printed_farther_than_nearest_endpoints_are_the_converged_ones(
        monkeypatch: pytest.MonkeyPatch, csran_cell: Callable) -> None:
    """The paired *farther than nearest* intervals of the CSRAN cells of Table 5 (TwitterURL
    F1) and Table 6 (TrecQA MAP), each against the same statistic drawn 500,000 times."""
    from pairrepro.report.analyses import readings

    drawn: list[tuple[Interval, Interval]] = []  # (as printed, converged), in call order
    joint = readings.joint_interval

    def both(kind: str, *args: object, **options: object) -> Interval:
        printed = joint(kind, *args, **options)  # type: ignore[arg-type]
        drawn.append((printed, joint(kind, *args, resamples=500_000,  # type: ignore[arg-type]
                                     seed=evidence.stream("converged", kind))))
        return printed

    monkeypatch.setattr(readings, "joint_interval", both)
    problems, checked = [], 0
    for recipe, number, metric in (("csran_twitter_url", 5, "test.f1"),
                                   ("csran_trecqa", 6, "test.map")):
        column, published, spec, runs = csran_cell(recipe, number, metric)
        drawn.clear()
        values = readings.read_cell(runs, column, published, spec)
        farther = [v.farther for v in values if v.farther is not None]
        assert len(farther) == len(drawn) == len(values) - 1
        for found, (printed, converged) in zip(farther, drawn, strict=True):
            problems += _check(readings.farther_text(found, column), printed, converged, column)
            checked += 1
    assert checked == 4 and not problems, "\n".join(problems)


def test_printed_dose_slopes_are_the_converged_ones() -> None:
    """The vectors ladder's change per doubling (25-d against 50-d, one doubling: the
    seed-paired difference), each column's, as the dose-response sentence prints it."""
    from pairrepro.report.analyses.gap_account import dose_response, gap_markdown

    result = evaluate_ladder("csran_trecqa_vectors", RESULTS)
    dose = result.ladder.dose
    assert dose is not None and dose.amounts == [25, 50]
    text = gap_markdown(result).split("Dose-response")[1]
    problems = []
    for column, slope, _ in dose_response(result):
        low, high = (evidence.run_units(result.runs[n], column.metric) for n in dose.steps)
        converged = mean_interval(high.values - low.values, resamples=REFERENCE_RESAMPLES,
                                  seed=evidence.stream("converged", "dose", column.metric))
        printed = text.split(f"{column.header} per doubling ")[1]
        problems += _check(printed, slope, converged, column)
    assert not problems, "\n".join(problems)


def test_verify_prints_its_intervals_converged_at_its_four_decimals(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, item 17: `verify` printed the reference's interval at 4 decimals from an
    interval resampled with no printed step, so its last digit could move unmarked. It asks for
    the interval at its own step, and an endpoint whose digit could still move is marked."""
    from pairrepro.report.publishing import verify
    from pairrepro.runs import read_run

    ref = read_run(RESULTS / "bm25_trecqa" / "seed-1")
    asked: list[float] = []
    moving_low = Interval(value=0.70, low=0.65005, high=0.75122, confidence=0.95,
                          resamples=1_024_000, seeds=1, units=68, low_se=0.0002,
                          high_se=0.0, step=verify.VERIFY_STEP)
    assert moving_low.moving() == (True, False)

    def fake(runs: object, metric: str, targets: tuple[float, ...] = (),
             step: float = 0.0) -> Interval:
        asked.append(step)
        return moving_low

    monkeypatch.setattr(evidence, "metric_interval", fake)
    kind, words = verify._check_metric(ref, ref, "test.map")
    assert asked == [verify.VERIFY_STEP]
    assert (kind, words.split(" in ")[1]) == ("inside", f"[{MOVING}0.6501, 0.7512]")
