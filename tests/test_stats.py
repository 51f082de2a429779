"""Bootstrap intervals, and the paired tests they give, against slow references."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import f1_score
from stats_reference import dense_f1_difference, dense_mean_interval

from pairrepro.stats import (
    f1_combination_interval,
    f1_interval,
    joint_interval,
    mean_interval,
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


def _slow_stats(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Loop reference of every resample's mean over seeds (the draws of :func:`_draws`)."""
    seed_draws, unit_draws = _draws(*values.shape, resamples, seed)
    return np.array([np.mean([values[s, unit_draws[r]].mean() for s in seed_draws[r]])
                     for r in range(resamples)])


@pytest.mark.parametrize("shift", [0.0, 0.02, 0.05, 0.12])
def test_the_bootstrap_p_is_the_share_beyond_0_and_agrees_with_the_interval(shift: float
                                                                             ) -> None:
    """Per-seed differences that vary by seed: p is twice the smaller share of resampled
    means on either side of 0 (a loop over the same draws), and p < 0.05 only where the 95%
    interval excludes 0."""
    rng = np.random.default_rng(21)
    diff = shift + np.array([[0.06], [-0.05], [0.01]]) + rng.normal(0, 0.2, (3, 40))
    got = mean_interval(diff, resamples=3200, seed=3)  # one chunk: the draws of _draws
    stats = _slow_stats(diff, 3200, 3)
    expected = min(1.0, 2 * (1 + min(np.sum(stats <= 0), np.sum(stats >= 0))) / 3201)
    assert got.p_value == pytest.approx(expected, abs=1e-12)
    assert (got.p_value < 0.05) == (not got.low <= 0 <= got.high)


def test_paired_interval_of_a_mean_agrees_with_the_former_dense_code() -> None:
    """68 queries of AP-like values over 3 seeds, each side from its own stream: endpoints
    and p-values agree within their Monte-Carlo errors."""
    rng = np.random.default_rng(13)
    a = rng.beta(2, 1, size=(3, 68))
    b = np.clip(a - 0.03 + rng.normal(0, 0.15, size=(3, 68)), 0, 1)
    got = mean_interval(a - b, resamples=40_000, seed=5)
    low, high, p = dense_mean_interval(a - b, 40_000, seed=6)
    assert abs(got.low - low) <= 4 * np.sqrt(2) * got.low_se
    assert abs(got.high - high) <= 4 * np.sqrt(2) * got.high_se
    assert 0.01 < p < 0.9 and abs(got.p_value - p) <= 4 * np.sqrt(2 * p * (1 - p) / 40_000)


def test_f1_difference_interval_agrees_with_scikit_learn_and_the_dense_code() -> None:
    """300 pairs, 3 seeds, seed k against seed k: the point is the mean of scikit-learn's
    per-seed F1 differences; the endpoints and p those of the dense reference."""
    rng = np.random.default_rng(11)
    labels = rng.integers(0, 2, 300)
    pred_a = np.stack([np.where(rng.random(300) < 0.8, labels, 1 - labels) for _ in range(3)])
    pred_b = np.stack([np.where(rng.random(300) < 0.76, labels, 1 - labels) for _ in range(3)])
    got = f1_combination_interval((labels, pred_a), (labels, pred_b), (1.0, -1.0),
                                  resamples=40_000, seed=2)
    assert got.value == pytest.approx(np.mean([f1_score(labels, a) - f1_score(labels, b)
                                               for a, b in zip(pred_a, pred_b, strict=True)]))
    low, high, p = dense_f1_difference(labels, pred_a, pred_b, 40_000, seed=1)
    assert abs(got.low - low) <= 4 * np.sqrt(2) * got.low_se
    assert abs(got.high - high) <= 4 * np.sqrt(2) * got.high_se
    assert 0.01 < p < 0.9 and abs(got.p_value - p) <= 4 * np.sqrt(2 * p * (1 - p) / 40_000)


def test_identical_systems_have_p_1() -> None:
    a = np.random.default_rng(5).random((3, 50))
    assert mean_interval(a - a, resamples=2000).p_value == 1.0


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
