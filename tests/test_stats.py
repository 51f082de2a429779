"""Bootstrap intervals and paired randomization tests against slow references and scipy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import f1_score

from pairrepro.errors import DataError
from pairrepro.stats import (
    f1_interval,
    mean_interval,
    paired_f1_test,
    paired_randomization_test,
)


def _slow_two_level(values: np.ndarray, resamples: int, seed: int, confidence: float = 0.95
                    ) -> tuple[float, float]:
    """Loop reference: draw seeds and units with replacement (the same draws as the
    vectorised code), average, take percentiles."""
    seeds, units = values.shape
    rng = np.random.default_rng([seed, 2718])
    unit_draws = rng.integers(0, units, size=(resamples, units))
    seed_draws = (rng.integers(0, seeds, size=(resamples, seeds)) if seeds > 1
                  else np.zeros((resamples, 1), dtype=int))
    stats = []
    for r in range(resamples):
        per_seed = [np.mean([values[s, u] for u in unit_draws[r]]) for s in seed_draws[r]]
        stats.append(np.mean(per_seed))
    alpha = (1 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return float(low), float(high)


@pytest.mark.parametrize("seeds", [1, 3])
def test_mean_interval_equals_a_loop_over_the_same_resamples(seeds: int) -> None:
    rng = np.random.default_rng(0)
    values = rng.random((seeds, 40))
    got = mean_interval(values if seeds > 1 else values[0], resamples=300, seed=5)
    low, high = _slow_two_level(values, 300, 5)
    assert got.low == pytest.approx(low, abs=1e-12)
    assert got.high == pytest.approx(high, abs=1e-12)
    assert got.value == pytest.approx(values.mean())
    assert got.seeds == seeds and got.units == 40


def test_mean_interval_agrees_with_scipy_percentile_bootstrap() -> None:
    rng = np.random.default_rng(1)
    ap = rng.beta(2, 1, size=120)  # AP-like values per query
    ours = mean_interval(ap, resamples=20_000, seed=3)
    ref = sps.bootstrap((ap,), np.mean, n_resamples=20_000, method="percentile",
                        random_state=np.random.default_rng(4)).confidence_interval
    assert ours.low == pytest.approx(ref.low, abs=0.004)
    assert ours.high == pytest.approx(ref.high, abs=0.004)


def test_seed_spread_widens_the_interval() -> None:
    rng = np.random.default_rng(2)
    base = rng.random(60)
    same = np.stack([base, base, base])
    spread = np.stack([base - 0.05, base, base + 0.05])
    a, b = mean_interval(same, seed=1), mean_interval(spread, seed=1)
    # analytic: sd of the mean over 3 resampled seeds of {-0.05, 0, 0.05} is 0.024, against
    # 0.037 for the 60 units alone: sqrt(0.037² + 0.024²) / 0.037 = 1.19
    assert (b.high - b.low) > (a.high - a.low) * 1.1


def test_f1_interval_equals_a_loop_with_sklearn() -> None:
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 80)
    pred = np.where(rng.random(80) < 0.8, labels, 1 - labels)
    got = f1_interval(labels, pred, resamples=200, seed=9)
    draws = np.random.default_rng([9, 2718]).integers(0, 80, size=(200, 80))
    stats = [f1_score(labels[d], pred[d], zero_division=0) for d in draws]
    low, high = np.quantile(stats, [0.025, 0.975])
    assert got.value == pytest.approx(f1_score(labels, pred))
    assert got.low == pytest.approx(low, abs=1e-12)
    assert got.high == pytest.approx(high, abs=1e-12)


def _exact_sign_flip_p(a: np.ndarray, b: np.ndarray) -> float:
    diff = a - b
    observed = abs(diff.mean())
    flips = np.array(list(itertools.product([1, -1], repeat=len(diff))))
    return float((np.abs(flips @ diff / len(diff)) >= observed - 1e-12).mean())


def test_paired_test_matches_exact_enumeration_and_scipy() -> None:
    rng = np.random.default_rng(4)
    a = rng.random(12)
    b = a - 0.08 + rng.normal(0, 0.1, 12)
    ours = paired_randomization_test(a, b, resamples=40_000, seed=2)
    exact = _exact_sign_flip_p(a, b)
    ref = sps.permutation_test((a, b), lambda x, y: np.mean(x - y), permutation_type="samples",
                               n_resamples=np.inf, alternative="two-sided").pvalue
    assert exact == pytest.approx(ref, abs=1e-9)
    assert ours.p_value == pytest.approx(exact, abs=0.01)
    assert ours.difference == pytest.approx((a - b).mean())


def test_paired_test_of_identical_systems_is_not_significant() -> None:
    a = np.random.default_rng(5).random(50)
    assert paired_randomization_test(a, a.copy()).p_value == 1.0


def test_paired_f1_test_equals_a_loop_with_sklearn() -> None:
    rng = np.random.default_rng(6)
    labels = rng.integers(0, 2, 60)
    pred_a = np.where(rng.random(60) < 0.85, labels, 1 - labels)
    pred_b = np.where(rng.random(60) < 0.65, labels, 1 - labels)
    got = paired_f1_test(labels, pred_a, pred_b, resamples=300, seed=8)
    swaps = np.random.default_rng([8, 31337]).integers(0, 2, size=(300, 60)).astype(bool)
    observed = f1_score(labels, pred_a) - f1_score(labels, pred_b)
    stats = []
    for m in swaps:
        a2, b2 = np.where(m, pred_b, pred_a), np.where(m, pred_a, pred_b)
        stats.append(f1_score(labels, a2, zero_division=0)
                     - f1_score(labels, b2, zero_division=0))
    expected = (1 + np.sum(np.abs(stats) >= abs(observed) - 1e-12)) / 301
    assert got.difference == pytest.approx(observed)
    assert got.p_value == pytest.approx(expected, abs=1e-12)


def test_paired_f1_test_over_seeds_equals_a_loop_with_sklearn() -> None:
    """Seeds paired in order: one resample swaps the same pairs in every seed, and the
    statistic is the mean of the per-seed F1 differences."""
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 2, 50)
    pred_a = np.stack([np.where(rng.random(50) < 0.8, labels, 1 - labels) for _ in range(3)])
    pred_b = np.stack([np.where(rng.random(50) < 0.7, labels, 1 - labels) for _ in range(3)])
    got = paired_f1_test(labels, pred_a, pred_b, resamples=200, seed=4)
    swaps = np.random.default_rng([4, 31337]).integers(0, 2, size=(200, 50)).astype(bool)
    observed = np.mean([f1_score(labels, a) - f1_score(labels, b)
                        for a, b in zip(pred_a, pred_b, strict=True)])
    stats = [np.mean([f1_score(labels, np.where(m, b, a), zero_division=0)
                      - f1_score(labels, np.where(m, a, b), zero_division=0)
                      for a, b in zip(pred_a, pred_b, strict=True)]) for m in swaps]
    expected = (1 + np.sum(np.abs(stats) >= abs(observed) - 1e-12)) / 201
    assert got.difference == pytest.approx(observed)
    assert got.p_value == pytest.approx(expected, abs=1e-12)
    with pytest.raises(DataError, match="3 seeds against 2"):
        paired_f1_test(labels, pred_a, pred_b[:2])


# ------------------------------------------------------- Monte-Carlo error and Holm
def test_holm_matches_its_definition_by_hand() -> None:
    from pairrepro.stats import holm

    # sorted: .005 x4 = .02, .01 x3 = .03, .03 x2 = .06, .04 x1 = .04 -> monotone .06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_endpoint_mc_error_matches_the_spread_over_resampling_seeds() -> None:
    """The order-statistic s.e. of an endpoint against the plain truth: the standard
    deviation of that endpoint over 150 resampling seeds."""
    values = np.random.default_rng(0).beta(2, 3, size=60)
    found = [mean_interval(values, resamples=2000, seed=s) for s in range(150)]
    spread = np.std([i.low for i in found], ddof=1)
    estimate = np.median([i.low_se for i in found])
    assert 0.6 < estimate / spread < 1.6, (estimate, spread)


def test_an_adaptive_interval_stops_once_decided_and_says_undecided_at_the_cap() -> None:
    from pairrepro.stats import ENDPOINT_SE, INTERVAL_CAP, RESAMPLES

    values = np.random.default_rng(1).beta(2, 3, size=400)
    far = mean_interval(values, targets=(0.9,))
    assert far.resamples == RESAMPLES and far.mc_se <= ENDPOINT_SE
    assert not far.straddles(0.9)
    # a target on the endpoint: more resamples cannot decide it
    edge = mean_interval(values, targets=(far.low,))
    assert edge.resamples == INTERVAL_CAP and edge.straddles(far.low)
    assert edge.mc_se < far.mc_se


def test_p_value_mc_error_and_an_undecided_test() -> None:
    from pairrepro.stats import P_MARGIN, TEST_BATCH, TEST_CAP, PairedTest

    test = PairedTest(difference=0.1, p_value=0.2, resamples=10_000, units=5)
    assert test.mc_se == pytest.approx(np.sqrt(0.2 * 0.8 / 10_000))
    assert not test.straddles(0.05) and PairedTest(0.1, 0.054, 10_000, 5).straddles(0.05)
    assert PairedTest(0.1, 0.056, 10_000, 5).straddles(0.05)  # 3 s.e. = 0.0069 > 0.006
    rng = np.random.default_rng(3)
    noise = rng.normal(size=80)
    noise -= noise.mean()
    low, high = 0.0, 0.6
    for _ in range(30):  # the shift whose p-value is 0.05, by bisection
        mid = (low + high) / 2
        p = paired_randomization_test(noise + mid, np.zeros(80), resamples=20_000).p_value
        low, high = (mid, high) if p > 0.05 else (low, mid)
    edge = paired_randomization_test(noise + (low + high) / 2, np.zeros(80))
    # inside the margin around 0.05 for sure: undecided, and more resamples cannot help
    assert edge.straddles(0.05) and abs(edge.p_value - 0.05) < P_MARGIN
    assert edge.resamples < TEST_CAP and edge.settled([0.05])
    clear = paired_randomization_test(noise + 1.0, np.zeros(80))
    assert clear.resamples == TEST_BATCH and clear.p_value < 0.001
