"""Bootstrap intervals and paired randomization tests against slow references, exhaustive
enumeration and scipy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import f1_score
from stats_reference import (
    dense_f1_statistic,
    dense_f1_test,
    dense_mean_interval,
    dense_mean_test,
)

from pairrepro.errors import DataError
from pairrepro.stats import (
    f1_interval,
    joint_interval,
    mean_interval,
    paired_f1_test,
    paired_randomization_test,
)


def _draws(seeds: int, units: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(seed draws, unit draws) of each resample: the same draws as the vectorised code where
    every unit differs and they are few (an index uniform over units^2 is two units)."""
    rng = np.random.default_rng([seed, 2718])
    seed_draws = (rng.integers(0, seeds, size=(resamples, seeds)) if seeds > 1
                  else np.zeros((resamples, 1), dtype=int))
    pairs = rng.integers(0, units * units, size=(resamples, units // 2))
    odd = rng.integers(0, units, size=(resamples, units % 2))
    return seed_draws, np.concatenate([pairs // units, pairs % units, odd], axis=1)


def _slow_two_level(values: np.ndarray, resamples: int, seed: int, confidence: float = 0.95
                    ) -> tuple[float, float]:
    """Loop reference: draw seeds and units with replacement, average, take percentiles."""
    seed_draws, unit_draws = _draws(*values.shape, resamples, seed)
    stats = []
    for r in range(resamples):
        per_seed = [np.mean([values[s, u] for u in unit_draws[r]]) for s in seed_draws[r]]
        stats.append(np.mean(per_seed))
    alpha = (1 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return float(low), float(high)


@pytest.mark.parametrize("seeds", [1, 3])
def test_joint_interval_equals_a_loop_over_the_same_resamples(seeds: int) -> None:
    """Two means of the same units and seeds, resampled together, combined non-linearly:
    how far the second lies from 0.5 beyond the first."""
    rng = np.random.default_rng(7)
    a, b = rng.random((seeds, 37)), rng.random((seeds, 37)) * 0.8
    features = np.vstack([a, b]).T  # [units, 2 x seeds]

    def per_seed(sums: np.ndarray) -> np.ndarray:
        return np.stack([sums[:, :seeds], sums[:, seeds:]], axis=2) / 37

    def farther(means: np.ndarray) -> np.ndarray:
        return np.abs(means[:, 1] - 0.5) - np.abs(means[:, 0] - 0.5)

    got = joint_interval(f"test{seeds}", features, per_seed, farther, seeds, resamples=300,
                         seed=4)
    seed_draws, unit_draws = _draws(seeds, 37, 300, 4)
    stats = [abs(np.mean([b[s, unit_draws[r]].mean() for s in seed_draws[r]]) - 0.5)
             - abs(np.mean([a[s, unit_draws[r]].mean() for s in seed_draws[r]]) - 0.5)
             for r in range(300)]
    low, high = np.quantile(stats, [0.025, 0.975])
    assert got.low == pytest.approx(low, abs=1e-12)
    assert got.high == pytest.approx(high, abs=1e-12)
    assert got.value == pytest.approx(abs(b.mean() - 0.5) - abs(a.mean() - 0.5))


@pytest.mark.parametrize(("seeds", "units"), [(1, 40), (3, 41)])
def test_mean_interval_equals_a_loop_over_the_same_resamples(seeds: int, units: int) -> None:
    rng = np.random.default_rng(0)
    values = rng.random((seeds, units))
    got = mean_interval(values if seeds > 1 else values[0], resamples=300, seed=5)
    low, high = _slow_two_level(values, 300, 5)
    assert got.low == pytest.approx(low, abs=1e-12)
    assert got.high == pytest.approx(high, abs=1e-12)
    assert got.value == pytest.approx(values.mean())
    assert got.seeds == seeds and got.units == units


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


def test_f1_interval_agrees_with_a_loop_with_sklearn() -> None:
    """Few types of pairs (TP, FP, FN, TN): their counts are drawn multinomial, not pair by
    pair; the endpoints agree with a plain loop over pair draws within Monte-Carlo error."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 80)
    pred = np.where(rng.random(80) < 0.8, labels, 1 - labels)
    got = f1_interval(labels, pred, resamples=20_000, seed=9)
    draws = np.random.default_rng(10).integers(0, 80, size=(20_000, 80))
    gold, said = labels[draws].astype(bool), pred[draws].astype(bool)
    tp, fp, fn = ((said & gold).sum(1), (said & ~gold).sum(1), (~said & gold).sum(1))
    stats = 2 * tp / (2 * tp + fp + fn)
    for d, f1 in zip(draws[:20], stats[:20], strict=True):
        assert f1 == pytest.approx(f1_score(labels[d], pred[d], zero_division=0))
    low, high = np.quantile(stats, [0.025, 0.975])
    assert got.value == pytest.approx(f1_score(labels, pred))
    assert abs(got.low - low) <= 4 * np.hypot(got.low_se, got.low_se)
    assert abs(got.high - high) <= 4 * np.hypot(got.high_se, got.high_se)


def test_type_counts_are_the_unit_draws_summed_by_type() -> None:
    """The multinomial draw of type counts against the bincount of unit draws it replaces:
    the same mean and covariance of the resampled sums (exact: n p and n (diag p - p p'))."""
    from pairrepro.stats import _UnitSums

    features = np.repeat(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]), [30, 50, 120], axis=0)
    sampler = _UnitSums(features)
    assert sampler.by_type and sampler.width == 3
    sums = sampler.draw(np.random.default_rng(0), 200_000)
    p = np.array([30, 50]) / 200
    assert sums.mean(axis=0) == pytest.approx(200 * p, rel=0.005)
    expected = 200 * (np.diag(p) - np.outer(p, p))
    assert np.cov(sums.T) == pytest.approx(expected, rel=0.03, abs=0.3)


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
    assert abs(ours.p_value - exact) <= 4 * np.sqrt(exact * (1 - exact) / 40_000)
    assert ours.difference == pytest.approx((a - b).mean())


def test_paired_test_and_interval_agree_with_the_former_dense_code() -> None:
    """68 queries of AP-like values over 3 seeds, each side from its own stream: the p-values
    and the endpoints agree within their Monte-Carlo errors."""
    rng = np.random.default_rng(13)
    a = rng.beta(2, 1, size=(3, 68))
    b = np.clip(a + rng.normal(0, 0.15, size=(3, 68)), 0, 1)
    new = paired_randomization_test(a, b, resamples=40_000, seed=3)
    old = dense_mean_test(a, b, 40_000, seed=4)
    assert 0.01 < old < 0.9
    assert abs(new.p_value - old) <= 4 * np.sqrt(2 * old * (1 - old) / 40_000)
    got = mean_interval(a, resamples=40_000, seed=5)
    low, high = dense_mean_interval(a, 40_000, seed=6)
    assert abs(got.low - low) <= 4 * np.sqrt(2) * got.low_se
    assert abs(got.high - high) <= 4 * np.sqrt(2) * got.high_se


def test_paired_test_of_identical_systems_is_not_significant() -> None:
    a = np.random.default_rng(5).random(50)
    assert paired_randomization_test(a, a.copy()).p_value == 1.0


def _masks(n: int) -> np.ndarray:
    """Every swap mask of ``n`` units, ``[2^n, n]`` bool."""
    return ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1).astype(bool)


def test_paired_test_with_repeated_values_matches_exact_enumeration() -> None:
    """Differences in {-1, 0, 1} (accuracy): the swaps are counted by popcount per value."""
    a = np.array([1.0] * 7 + [0.0] * 2 + [1.0, 0.0] * 3 + [1.0])
    b = np.array([0.0] * 7 + [1.0] * 2 + [1.0, 0.0] * 3 + [1.0])
    exact = _exact_sign_flip_p(a, b)
    # 9 units differ, by +1 (7) or -1 (2): P(|sum of 9 random signs| >= 5) = 92 / 512
    assert exact == pytest.approx(92 / 512)
    ours = paired_randomization_test(a, b, resamples=40_000, seed=1)
    assert abs(ours.p_value - exact) <= 4 * np.sqrt(exact * (1 - exact) / 40_000)


def test_paired_f1_test_matches_exact_enumeration_over_seeds() -> None:
    """Every one of the 2^14 swap masks, scored by the former dense implementation and by
    scikit-learn: the exact permutation p-value, which the bit-counting test must hit within
    its Monte-Carlo error; the statistic pairs seed k with seed k."""
    rng = np.random.default_rng(6)
    labels = rng.integers(0, 2, 14)
    pred_a = np.stack([np.where(rng.random(14) < 0.85, labels, 1 - labels) for _ in range(2)])
    pred_b = np.stack([np.where(rng.random(14) < 0.55, labels, 1 - labels) for _ in range(2)])
    masks = _masks(14)
    stats = dense_f1_statistic(labels, pred_a, pred_b, masks.astype(float))
    observed = np.mean([f1_score(labels, a) - f1_score(labels, b)
                        for a, b in zip(pred_a, pred_b, strict=True)])
    for m in masks[::997]:  # the dense reference against scikit-learn on a sample of masks
        by_hand = np.mean([f1_score(labels, np.where(m, b, a), zero_division=0)
                           - f1_score(labels, np.where(m, a, b), zero_division=0)
                           for a, b in zip(pred_a, pred_b, strict=True)])
        assert stats[int(m @ (1 << np.arange(14)))] == pytest.approx(by_hand)
    exact = float(np.mean(np.abs(stats) >= abs(observed) - 1e-12))
    got = paired_f1_test(labels, pred_a, pred_b, resamples=40_000, seed=4)
    assert got.difference == pytest.approx(observed)
    assert 0.01 < exact < 0.9
    assert abs(got.p_value - exact) <= 4 * np.sqrt(exact * (1 - exact) / 40_000)
    with pytest.raises(DataError, match="3 seeds against 2"):
        paired_f1_test(labels, np.vstack([pred_a, pred_a[:1]]), pred_b)


def test_paired_f1_test_agrees_with_the_former_dense_test() -> None:
    """A case too large to enumerate (300 pairs, 3 seeds): the bit-counting p-value and the
    former dense float implementation's, each from its own 40,000 resamples, agree within
    their Monte-Carlo errors."""
    rng = np.random.default_rng(11)
    labels = rng.integers(0, 2, 300)
    pred_a = np.stack([np.where(rng.random(300) < 0.8, labels, 1 - labels) for _ in range(3)])
    pred_b = np.stack([np.where(rng.random(300) < 0.78, labels, 1 - labels) for _ in range(3)])
    observed = dense_f1_statistic(labels, pred_a, pred_b, np.zeros((1, 300)))[0]
    old = dense_f1_test(labels, pred_a, pred_b, 40_000, seed=1)
    new = paired_f1_test(labels, pred_a, pred_b, resamples=40_000, seed=2)
    assert new.difference == pytest.approx(observed)
    assert 0.01 < old < 0.9
    assert abs(new.p_value - old) <= 4 * np.sqrt(2 * old * (1 - old) / 40_000)


def test_swap_counts_are_binomial_and_never_exceed_their_group() -> None:
    """Group sizes on both sides of a word boundary: each count is Binomial(size, 1/2)."""
    from scipy.stats import binom

    from pairrepro.stats import SwapCounts

    sizes = np.array([1, 7, 63, 64, 65, 130])
    counts = SwapCounts(sizes).draw(np.random.default_rng(0), 100_000)
    assert counts.shape == (100_000, 6)
    assert (counts <= sizes).all() and (counts >= 0).all()
    for size, column in zip(sizes, counts.T, strict=True):
        assert abs(column.mean() - size / 2) <= 5 * np.sqrt(size / 4 / 100_000), size
        pmf = np.bincount(column, minlength=size + 1) / len(column)
        assert np.abs(pmf - binom.pmf(np.arange(size + 1), size, 0.5)).max() < 0.006, size
    assert SwapCounts(np.array([], dtype=int)).draw(np.random.default_rng(0), 5).shape == (5, 0)


# ------------------------------------------------------- Monte-Carlo error and Holm
def test_holm_matches_its_definition_by_hand() -> None:
    from pairrepro.stats import holm

    # sorted: .005 x4 = .02, .01 x3 = .03, .03 x2 = .06, .04 x1 = .04 -> monotone .06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []
    # a missing p-value (NaN) counts as no evidence: 1, and it does not spread to the others
    assert holm([0.01, float("nan")]) == pytest.approx([0.02, 1.0])


def test_endpoint_mc_error_matches_the_spread_over_resampling_seeds() -> None:
    """The order-statistic s.e. of an endpoint against the plain truth: the standard
    deviation of that endpoint over 150 resampling seeds."""
    values = np.random.default_rng(0).beta(2, 3, size=60)
    found = [mean_interval(values, resamples=2000, seed=s) for s in range(150)]
    spread = np.std([i.low for i in found], ddof=1)
    estimate = np.median([i.low_se for i in found])
    assert 0.6 < estimate / spread < 1.6, (estimate, spread)


def test_an_adaptive_interval_stops_once_decided_and_says_undecided_at_the_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pairrepro import stats
    from pairrepro.stats import ENDPOINT_SE, RESAMPLES

    monkeypatch.setattr(stats, "INTERVAL_CAP", 64_000)  # a cap this test can reach quickly
    values = np.random.default_rng(1).beta(2, 3, size=400)
    far = mean_interval(values, targets=(0.9,))
    assert far.resamples == RESAMPLES and far.mc_se <= ENDPOINT_SE
    assert not far.straddles(0.9)
    # a target on the endpoint: more resamples cannot decide it
    edge = mean_interval(values, targets=(far.low,))
    assert edge.resamples == 64_000 and edge.straddles(far.low)
    assert edge.mc_se < far.mc_se


def test_printed_digits_are_drawn_until_they_cannot_move_or_marked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Printed in units of ``step``: resamples double until no rounding boundary lies within
    MC_Z s.e. of an endpoint; an endpoint on a boundary reaches the cap and is marked."""
    from pairrepro import stats
    from pairrepro.stats import MC_Z

    monkeypatch.setattr(stats, "INTERVAL_CAP", 256_000)
    values = np.random.default_rng(2).beta(2, 3, size=60)
    rough = mean_interval(values, resamples=256_000, seed=7)
    # a step whose rounding boundaries lie far from both endpoints, and one with a boundary
    # on the low endpoint (half-way between two printed values)
    steps = {"far": 0.05, "on": rough.low / (np.floor(rough.low / 0.001) + 0.5)}
    far = mean_interval(values, seed=7, step=steps["far"])
    for end, se in ((far.low, far.low_se), (far.high, far.high_se)):
        assert abs(end / 0.05 - np.floor(end / 0.05) - 0.5) * 0.05 > MC_Z * se
    assert far.moving() == (False, False) and far.resamples < 256_000
    on = mean_interval(values, seed=7, step=steps["on"])
    assert on.resamples == 256_000 and on.moving()[0]
    assert mean_interval(values, seed=7).moving() == (False, False)  # not printed: no digits


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
