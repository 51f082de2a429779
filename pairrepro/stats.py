"""Is a difference real? Confidence intervals and paired tests for reproduced metrics.

* :func:`mean_interval`, :func:`f1_interval` & co.: a seeded two-level percentile bootstrap:
  each resample draws the seeds *and* the test units (queries for ranking, pairs for
  classification) with replacement, so an interval covers the test sample and the training
  randomness both.
* :func:`paired_randomization_test`: under the null each unit's pair of outputs is swapped
  with probability 1/2; two-sided ``p = (1 + #{|stat*| >= |stat|}) / (1 + R)``.

Resamples are weight matrices (counts per unit), vectorised and seeded by the caller. Without
an explicit ``resamples`` both are adaptive: batches are drawn until the Monte-Carlo s.e. of
what decides a verdict is under its bound (:data:`ENDPOINT_SE`, :data:`P_SE`) and the
threshold lies more than :data:`MC_Z` s.e. away, or a cap is reached. What is still that close,
or a p-value within :data:`P_MARGIN` of its threshold, is *undecided*
(:meth:`Interval.straddles`, :meth:`PairedTest.straddles`): another seed could decide it. An
endpoint's MC s.e. comes from the order statistics around its quantile, a p-value's is
``sqrt(p (1 - p) / R)``. An explicit ``resamples`` draws exactly that many.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pairrepro.errors import DataError
from pairrepro.metrics import f1_from_counts

CONFIDENCE = 0.95
RESAMPLES = 2000  # an interval's batch: adaptive intervals draw this many at a time
INTERVAL_CAP = 32_000
TEST_BATCH = 10_000  # a paired test's batch
TEST_CAP = 640_000
ENDPOINT_SE = 0.001  # bound on an interval endpoint's MC s.e. (the metric's own scale)
P_SE = 0.005  # bound on a p-value's MC s.e.
MC_Z = 3.0  # a threshold closer than this many MC s.e. to the estimate is undecided
# a p-value this close to its threshold is undecided however many resamples are drawn: the
# band's edges, not the threshold, are where the seed could still flip a verdict, and no
# committed test sits near them (tests/test_results.py renders with 10 seeds)
P_MARGIN = 0.005
ALPHA = 0.05  # the significance threshold paired tests are decided against
_ORDER_Z = 1.959964  # the 95% band of an order statistic, for the endpoints' MC s.e.


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile bootstrap interval."""

    value: float
    low: float
    high: float
    confidence: float
    resamples: int
    seeds: int
    units: int
    low_se: float = 0.0  # Monte-Carlo standard errors of the endpoints
    high_se: float = 0.0

    def contains(self, x: float) -> bool:
        """Whether ``x`` lies in ``[low, high]``."""
        return self.low <= x <= self.high

    def straddles(self, x: float) -> bool:
        """Whether ``x`` lies within ``MC_Z`` MC standard errors of an endpoint: whether it
        is inside may depend on the resampling seed. An endpoint without MC error (every
        resample alike there, e.g. a tie share of 0) is exact and straddles nothing."""
        return any(se > 0 and abs(x - end) <= MC_Z * se + 1e-12
                   for end, se in ((self.low, self.low_se), (self.high, self.high_se)))

    @property
    def mc_se(self) -> float:
        """The larger MC standard error of the two endpoints."""
        return max(self.low_se, self.high_se)


def _endpoints(stats: np.ndarray, confidence: float) -> tuple[float, float, float, float]:
    """(low, high, MC s.e. of low, MC s.e. of high) of the percentile interval of ``stats``:
    an endpoint's s.e. is half the spread of the order statistics that bound its quantile
    with 95% confidence, over 2 x 1.96."""
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    ordered = np.sort(stats)
    n = len(ordered)
    ses = []
    for q in (alpha, 1.0 - alpha):
        half = _ORDER_Z * np.sqrt(n * q * (1 - q))
        lo = int(np.clip(np.floor(n * q - half), 0, n - 1))
        hi = int(np.clip(np.ceil(n * q + half), 0, n - 1))
        ses.append(float(ordered[hi] - ordered[lo]) / (2 * _ORDER_Z))
    return float(low), float(high), ses[0], ses[1]


def resample_counts(rng: np.random.Generator, resamples: int, n: int) -> np.ndarray:
    """``[resamples, n]`` counts: how often each of ``n`` units is drawn in each resample of
    ``n`` draws with replacement (row sums are ``n``)."""
    draws = rng.integers(0, n, size=(resamples, n))
    # one bincount over row-offset draws: the same counts as np.add.at, many times faster
    flat = (draws + (np.arange(resamples) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * n).reshape(resamples, n).astype(np.float64)


def _two_level(per_seed: Callable[[np.ndarray], np.ndarray], point: float, seeds: int,
               units: int, confidence: float, resamples: int | None, seed: int,
               targets: Sequence[float] = ()) -> Interval:
    """The percentile interval of the mean over resampled seeds of ``per_seed(W)`` (unit
    counts ``[R, units]`` -> ``[R, seeds]``); adaptive in batches of :data:`RESAMPLES` up to
    :data:`INTERVAL_CAP` (``targets``: the values a verdict compares the interval with)."""
    if units == 0 or seeds == 0:
        raise DataError("bootstrap: nothing to resample (no units or no seeds)")
    rng = np.random.default_rng([seed, 2718])
    batch = resamples or RESAMPLES
    found: list[np.ndarray] = []
    while True:
        unit_w = resample_counts(rng, batch, units)
        seed_w = resample_counts(rng, batch, seeds) if seeds > 1 else np.ones((batch, 1))
        found.append((per_seed(unit_w) * seed_w).sum(axis=1) / seeds)
        stats = np.concatenate(found)
        low, high, low_se, high_se = _endpoints(stats, confidence)
        out = Interval(value=float(point), low=low, high=high, confidence=confidence,
                       resamples=len(stats), seeds=seeds, units=units, low_se=low_se,
                       high_se=high_se)
        settled = out.mc_se <= ENDPOINT_SE and not any(out.straddles(t) for t in targets)
        if resamples is not None or settled or len(stats) + batch > INTERVAL_CAP:
            return out


def _as_matrix(values: np.ndarray) -> np.ndarray:
    matrix = np.asarray(values, dtype=np.float64)
    return matrix[None, :] if matrix.ndim == 1 else matrix


def mean_interval(values: np.ndarray, confidence: float = CONFIDENCE,
                  resamples: int | None = None, seed: int = 0,
                  targets: Sequence[float] = ()) -> Interval:
    """Interval of a mean metric from per-unit values ``[units]`` or ``[seeds, units]``
    (e.g. AP per query for MAP, 0/1 correctness per pair for accuracy)."""
    matrix = _as_matrix(values)
    seeds, units = matrix.shape
    return _two_level(lambda w: w @ matrix.T / units, float(matrix.mean()), seeds, units,
                      confidence, resamples, seed, targets)


def _indicators(labels: np.ndarray, predictions: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    gold = np.asarray(labels).astype(bool)
    pred = np.asarray(predictions).astype(bool)
    tp = (pred & gold).astype(np.float64)
    fp = (pred & ~gold).astype(np.float64)
    fn = (~pred & gold).astype(np.float64)
    return tp, fp, fn


def f1_interval(labels: np.ndarray, predictions: np.ndarray, confidence: float = CONFIDENCE,
                resamples: int | None = None, seed: int = 0,
                targets: Sequence[float] = ()) -> Interval:
    """Interval of the F1 of class 1 (not a mean over pairs, so each resample recomputes it
    from weighted counts); ``predictions`` is ``[pairs]`` or ``[seeds, pairs]`` of 0/1."""
    pred = np.asarray(predictions)
    pred = pred[None, :] if pred.ndim == 1 else pred
    tp, fp, fn = _indicators(np.broadcast_to(labels, pred.shape), pred)
    point = float(f1_from_counts(tp.sum(1), fp.sum(1), fn.sum(1)).mean())
    return _two_level(lambda w: f1_from_counts(w @ tp.T, w @ fp.T, w @ fn.T), point,
                      pred.shape[0], pred.shape[1], confidence, resamples, seed, targets)


def macro_f1_interval(labels: np.ndarray, predictions: np.ndarray,
                      confidence: float = CONFIDENCE, resamples: int | None = None,
                      seed: int = 0, targets: Sequence[float] = ()) -> Interval:
    """Interval of the macro F1 of two classes (the mean of class 1's and class 0's F1, each
    recomputed from weighted counts); arguments as :func:`f1_interval`."""
    pred = np.asarray(predictions)
    pred = pred[None, :] if pred.ndim == 1 else pred
    gold = np.broadcast_to(labels, pred.shape)
    ones = _indicators(gold, pred)
    zeros = _indicators(1 - np.asarray(gold), 1 - pred)

    def macro(*counts: np.ndarray) -> np.ndarray:
        return (f1_from_counts(*counts[:3]) + f1_from_counts(*counts[3:])) / 2

    point = float(macro(*(u.sum(1) for u in ones + zeros)).mean())
    return _two_level(lambda w: macro(*(w @ u.T for u in ones + zeros)), point,
                      pred.shape[0], pred.shape[1], confidence, resamples, seed, targets)


def ratio_interval(numerators: np.ndarray, denominators: np.ndarray,
                   confidence: float = CONFIDENCE, resamples: int | None = None,
                   seed: int = 0, targets: Sequence[float] = ()) -> Interval:
    """Interval of ``sum(numerators) / sum(denominators)`` over units (``[units]`` or
    ``[seeds, units]``), e.g. the share of tied candidates with queries as the units."""
    num, den = _as_matrix(numerators), _as_matrix(denominators)

    def ratio(n: np.ndarray, d: np.ndarray) -> np.ndarray:
        return np.divide(n, d, out=np.zeros_like(n), where=d > 0)

    point = float(ratio(num.sum(1), den.sum(1)).mean())
    return _two_level(lambda w: ratio(w @ num.T, w @ den.T), point, num.shape[0],
                      num.shape[1], confidence, resamples, seed, targets)


@dataclass(frozen=True)
class PairedTest:
    """Result of a paired randomization test of A against B on the same units."""

    difference: float  # statistic(A) - statistic(B)
    p_value: float  # two-sided
    resamples: int
    units: int

    @property
    def mc_se(self) -> float:
        """The Monte-Carlo standard error of the p-value, ``sqrt(p (1 - p) / R)``."""
        return float(np.sqrt(self.p_value * (1 - self.p_value) / self.resamples))

    def straddles(self, alpha: float = ALPHA) -> bool:
        """Whether the p-value lies within ``P_MARGIN`` of ``alpha``, or ``alpha`` within
        ``MC_Z`` MC standard errors of it: p < alpha is then undecided."""
        return abs(self.p_value - alpha) <= max(P_MARGIN, MC_Z * self.mc_se) + 1e-12

    def settled(self, alphas: Sequence[float]) -> bool:
        """Whether more resamples could change :meth:`straddles` for any of ``alphas``: the
        MC s.e. is at most ``P_SE`` and each band edge is more than ``MC_Z`` s.e. away."""
        return self.mc_se <= P_SE and all(
            abs(abs(self.p_value - a) - P_MARGIN) > MC_Z * self.mc_se for a in alphas)


def _adaptive_test(observed: float, resample: Callable[[np.ndarray], np.ndarray], n: int,
                   resamples: int | None, seed: int, alphas: Sequence[float]) -> PairedTest:
    """Draw swap masks (``[R, n]``, 1 where a resample swaps the two systems' outputs on a
    unit; ``resample`` maps them to the resampled statistics) in batches until
    :meth:`PairedTest.settled`, or :data:`TEST_CAP`; an explicit ``resamples`` draws exactly
    that many."""
    rng = np.random.default_rng([seed, 31337])
    batch = resamples or TEST_BATCH
    hits = drawn = 0
    while True:
        # in chunks of at most 2,000 masks: a [10,000, n] float matrix of a large test set
        # would take gigabytes
        resampled = np.concatenate([
            resample(rng.integers(0, 2, size=(min(2000, batch - done), n)).astype(np.float64))
            for done in range(0, batch, 2000)])
        # a tiny tolerance so floating-point noise never counts a tie as a miss
        hits += int((np.abs(resampled) >= abs(observed) - 1e-12).sum())
        drawn += batch
        test = PairedTest(difference=observed, p_value=(1 + hits) / (1 + drawn),
                          resamples=drawn, units=n)
        if resamples is not None or test.settled(alphas) or drawn + batch > TEST_CAP:
            return test


def paired_randomization_test(a: np.ndarray, b: np.ndarray, resamples: int | None = None,
                              seed: int = 0, alphas: Sequence[float] = (ALPHA,)
                              ) -> PairedTest:
    """Two-sided paired randomization test of mean(a) - mean(b); ``a``/``b`` are per-unit
    values ``[units]`` (or ``[seeds, units]``, averaged over seeds first) on the same units in
    the same order. Adaptive unless ``resamples`` is given (the module docstring)."""
    va, vb = _as_matrix(a).mean(axis=0), _as_matrix(b).mean(axis=0)
    if va.shape != vb.shape:
        raise DataError(f"paired test: the systems were scored on different units "
                        f"({va.size} vs {vb.size})", hint="compare runs on the same test split")
    diff = va - vb
    n = diff.size
    # a swap flips the unit's difference
    return _adaptive_test(float(diff.mean()), lambda swaps: ((1.0 - 2.0 * swaps) @ diff) / n,
                          n, resamples, seed, alphas)


def paired_f1_test(labels: np.ndarray, pred_a: np.ndarray, pred_b: np.ndarray,
                   resamples: int | None = None, seed: int = 0,
                   alphas: Sequence[float] = (ALPHA,)) -> PairedTest:
    """Two-sided paired randomization test of F1(A) - F1(B) (class 1) on the same pairs.
    ``pred_a``/``pred_b``: ``[units]`` or ``[seeds, units]``, seed k of A paired with seed k
    of B; a resample swaps the same pairs in every seed, and the statistic is the mean of the
    per-seed F1 differences (an F1 has no per-unit value to average first)."""
    runs_a, runs_b = _as_matrix(pred_a), _as_matrix(pred_b)
    if runs_a.shape[0] != runs_b.shape[0]:
        raise DataError(f"paired F1 test: {runs_a.shape[0]} seeds against "
                        f"{runs_b.shape[0]}", hint="pair as many seeds of each system")
    n = runs_a.shape[1]
    if runs_b.shape[1] != n:
        raise DataError("paired test: the systems were scored on different pairs")
    systems = [(_indicators(labels, one_a), _indicators(labels, one_b))
               for one_a, one_b in zip(runs_a, runs_b, strict=True)]
    seeds = runs_a.shape[0]
    observed = sum(float(f1_from_counts(*(u.sum() for u in sys_a))
                         - f1_from_counts(*(u.sum() for u in sys_b)))
                   for sys_a, sys_b in systems) / seeds

    def resample(swaps: np.ndarray) -> np.ndarray:
        keep = 1.0 - swaps

        def f1(x: tuple[np.ndarray, ...], y: tuple[np.ndarray, ...]) -> np.ndarray:
            return f1_from_counts(*(keep @ u + swaps @ v for u, v in zip(x, y, strict=True)))

        return sum(f1(sys_a, sys_b) - f1(sys_b, sys_a) for sys_a, sys_b in systems) / seeds

    return _adaptive_test(observed, resample, n, resamples, seed, alphas)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input order:
    the k-th smallest of m is multiplied by m - k + 1, made monotone, capped at 1."""
    order = np.argsort(p_values, kind="stable")
    m = len(order)
    adjusted = np.empty(m)
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * float(p_values[i])))
        adjusted[i] = running
    return adjusted.tolist()
