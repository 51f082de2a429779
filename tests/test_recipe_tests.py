"""Verdicts on training recipes (report/analyses/comparison.py): a paired test that treats the
seeds and the test units as random, as the intervals do, so a verdict never contradicts its
interval; "no difference" only by an equivalence test against a stated margin."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from stats_reference import dense_mean_interval

from pairrepro.report.analyses import comparison, evidence


def _units(values: np.ndarray, recipe: str) -> evidence.Units:
    return evidence.Units(metric="test.map", kind="mean",
                          ids=tuple(f"q{k}" for k in range(values.shape[1])), values=values,
                          labels=None, seeds=tuple(range(1, len(values) + 1)), recipe=recipe)


def _seed_effects(rng: np.random.Generator, offsets: list[float]) -> tuple[np.ndarray, ...]:
    """Two recipes whose per-seed difference is ``offsets`` plus little per-query noise."""
    b = rng.beta(2, 1, size=(len(offsets), 68))
    return b + np.array(offsets)[:, None] + rng.normal(0, 0.02, b.shape), b


def test_seed_to_seed_variation_keeps_a_recipe_difference_from_being_significant() -> None:
    """Seeds that disagree (+0.08, −0.05, +0.03) and queries that all agree on the mean over
    seeds: a test over queries alone (seeds averaged, the trained models fixed) is sure; the
    recipes' test is not, and its interval crosses 0 (the reference draws its own)."""
    a, b = _seed_effects(np.random.default_rng(3), [0.08, -0.05, 0.03])
    conditional = sps.ttest_rel(a.mean(axis=0), b.mean(axis=0)).pvalue
    assert conditional < 0.001  # the premise: conditional on these models, a clear win
    found = comparison.compare(_units(a, "a"), _units(b, "b"))
    low, high, p = dense_mean_interval(a - b, 40_000, seed=1)
    assert low < 0 < high and p > 0.1
    assert found.p_value is not None and found.p_value >= 0.05 and not found.undecided
    assert abs(found.p_value - p) < 0.02


@pytest.mark.parametrize("seed", range(6))
def test_a_verdict_agrees_with_the_difference_interval(seed: int) -> None:
    """Whatever the data, p < 0.05 exactly where the 95% interval of the same difference
    excludes 0, and a verdict near the edge is undecided rather than seed-dependent."""
    rng = np.random.default_rng(seed)
    a, b = _seed_effects(rng, list(rng.normal(0.03, 0.03, 3)))
    found = comparison.compare(_units(a, "a"), _units(b, "b"))
    interval = evidence.difference_interval(_units(a, "a"), _units(b, "b"))
    assert found.p_value == interval.p_value
    if not found.undecided:
        assert (found.p_value < 0.05) == (not interval.low <= 0 <= interval.high)


def test_equivalence_is_two_one_sided_tests_on_the_two_level_bootstrap() -> None:
    """Equivalent within ±m when the 90% two-level interval lies inside ±m (a dense reference
    decides), not shown when it reaches past, and the detectable difference is 2.8 s.e."""
    rng = np.random.default_rng(8)
    a, b = _seed_effects(rng, [0.004, -0.003, 0.001])
    low, high, _ = dense_mean_interval(a - b, 40_000, seed=2, confidence=0.90)
    wide, narrow = 2 * max(abs(low), abs(high)), max(abs(low), abs(high)) / 2
    shown = comparison.equivalence(_units(a, "a"), _units(b, "b"), wide)
    assert shown.verdict == "shown"
    assert shown.tost.low == pytest.approx(low, abs=0.002)
    assert shown.tost.high == pytest.approx(high, abs=0.002)
    assert comparison.equivalence(_units(a, "a"), _units(b, "b"), narrow).verdict == "not shown"
    width = shown.difference.high - shown.difference.low
    assert shown.detectable == pytest.approx((1.959964 + 0.841621) * width / (2 * 1.959964))
