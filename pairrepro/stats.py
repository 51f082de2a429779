"""Is a difference real? Confidence intervals and paired tests for reproduced metrics.

* :func:`mean_interval` / :func:`f1_interval`: a seeded percentile bootstrap over the test
  units (queries for ranking, pairs for classification), combined with the spread over seeds
  where there are several: each resample draws the seeds *and* the units with replacement
  (a two-level bootstrap), so a cell's interval covers both the test-set sample and the
  training randomness.
* :func:`paired_randomization_test`: is system A better than system B on the same units?
  Under the null hypothesis the two systems are exchangeable on each unit, so each unit's
  pair of outputs is swapped with probability 1/2 (for mean metrics: the sign of the
  per-unit difference flips); the two-sided p-value is ``(1 + #{|stat*| >= |stat|}) /
  (1 + R)``.

Everything is vectorised as weight matrices (a resample is a vector of counts per unit), so a
table with dozens of cells renders in seconds. Resamples come from ``numpy`` generators
seeded by the caller: the same call gives the same interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pairrepro.errors import DataError

CONFIDENCE = 0.95
RESAMPLES = 2000


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

    def contains(self, x: float) -> bool:
        """Whether ``x`` lies in ``[low, high]``."""
        return self.low <= x <= self.high


def resample_counts(rng: np.random.Generator, resamples: int, n: int) -> np.ndarray:
    """``[resamples, n]`` counts: how often each of ``n`` units is drawn in each resample of
    ``n`` draws with replacement (row sums are ``n``)."""
    draws = rng.integers(0, n, size=(resamples, n))
    counts = np.zeros((resamples, n), dtype=np.float64)
    np.add.at(counts, (np.arange(resamples)[:, None], draws), 1.0)
    return counts


def _two_level(per_seed: Callable[[np.ndarray], np.ndarray], point: float, seeds: int,
               units: int, confidence: float, resamples: int, seed: int) -> Interval:
    """The percentile interval of ``mean over resampled seeds of per_seed(unit counts)``.

    ``per_seed(W)`` maps unit counts ``[R, units]`` to each seed's statistic ``[R, seeds]``."""
    if units == 0 or seeds == 0:
        raise DataError("bootstrap: nothing to resample (no units or no seeds)")
    rng = np.random.default_rng([seed, 2718])
    unit_w = resample_counts(rng, resamples, units)
    seed_w = resample_counts(rng, resamples, seeds) if seeds > 1 else np.ones((resamples, 1))
    stats = (per_seed(unit_w) * seed_w).sum(axis=1) / seeds
    alpha = (1.0 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return Interval(value=float(point), low=float(low), high=float(high),
                    confidence=confidence, resamples=resamples, seeds=seeds, units=units)


def _as_matrix(values: np.ndarray) -> np.ndarray:
    matrix = np.asarray(values, dtype=np.float64)
    return matrix[None, :] if matrix.ndim == 1 else matrix


def mean_interval(values: np.ndarray, confidence: float = CONFIDENCE,
                  resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """Interval of a mean metric from per-unit values ``[units]`` or ``[seeds, units]``
    (e.g. AP per query for MAP, 0/1 correctness per pair for accuracy)."""
    matrix = _as_matrix(values)
    seeds, units = matrix.shape
    return _two_level(lambda w: w @ matrix.T / units, float(matrix.mean()), seeds, units,
                      confidence, resamples, seed)


def _f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    denom = 2 * tp + fp + fn
    return np.divide(2 * tp, denom, out=np.zeros_like(denom), where=denom > 0)


def _indicators(labels: np.ndarray, predictions: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    gold = np.asarray(labels).astype(bool)
    pred = np.asarray(predictions).astype(bool)
    tp = (pred & gold).astype(np.float64)
    fp = (pred & ~gold).astype(np.float64)
    fn = (~pred & gold).astype(np.float64)
    return tp, fp, fn


def f1_interval(labels: np.ndarray, predictions: np.ndarray, confidence: float = CONFIDENCE,
                resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """Interval of the F1 of class 1 (not a mean over pairs, so each resample recomputes it
    from weighted counts); ``predictions`` is ``[pairs]`` or ``[seeds, pairs]`` of 0/1."""
    pred = np.asarray(predictions)
    pred = pred[None, :] if pred.ndim == 1 else pred
    tp, fp, fn = _indicators(np.broadcast_to(labels, pred.shape), pred)
    point = float(_f1_from_counts(tp.sum(1), fp.sum(1), fn.sum(1)).mean())
    return _two_level(lambda w: _f1_from_counts(w @ tp.T, w @ fp.T, w @ fn.T), point,
                      pred.shape[0], pred.shape[1], confidence, resamples, seed)


@dataclass(frozen=True)
class PairedTest:
    """Result of a paired randomization test of A against B on the same units."""

    difference: float  # statistic(A) - statistic(B)
    p_value: float  # two-sided
    resamples: int
    units: int


def _swap_masks(rng: np.random.Generator, resamples: int, n: int) -> np.ndarray:
    """``[R, n]`` of 0/1: 1 where a resample swaps the two systems' outputs on that unit."""
    return rng.integers(0, 2, size=(resamples, n)).astype(np.float64)


def _p_value(observed: float, resampled: np.ndarray) -> float:
    # a tiny tolerance so floating-point noise never counts a tie as a miss
    hits = np.abs(resampled) >= abs(observed) - 1e-12
    return float((1 + hits.sum()) / (1 + len(resampled)))


def paired_randomization_test(a: np.ndarray, b: np.ndarray, resamples: int = 10_000,
                              seed: int = 0) -> PairedTest:
    """Two-sided paired randomization test of mean(a) - mean(b); ``a``/``b`` are per-unit
    values ``[units]`` (or ``[seeds, units]``, averaged over seeds first) on the same units in
    the same order."""
    va, vb = _as_matrix(a).mean(axis=0), _as_matrix(b).mean(axis=0)
    if va.shape != vb.shape:
        raise DataError(f"paired test: the systems were scored on different units "
                        f"({va.size} vs {vb.size})", hint="compare runs on the same test split")
    diff = va - vb
    n = diff.size
    swaps = _swap_masks(np.random.default_rng([seed, 31337]), resamples, n)
    resampled = ((1.0 - 2.0 * swaps) @ diff) / n  # a swap flips the unit's difference
    observed = float(diff.mean())
    return PairedTest(difference=observed, p_value=_p_value(observed, resampled),
                      resamples=resamples, units=n)


def paired_f1_test(labels: np.ndarray, pred_a: np.ndarray, pred_b: np.ndarray,
                   resamples: int = 10_000, seed: int = 0) -> PairedTest:
    """Two-sided paired randomization test of F1(A) - F1(B) (class 1) on the same pairs:
    each resample swaps the two systems' predictions on a random half of the pairs.

    ``pred_a``/``pred_b`` are ``[units]`` or ``[seeds, units]`` with as many seeds each: seed
    k of A is paired with seed k of B, one resample swaps the same pairs in every seed, and
    the statistic is the mean over seeds of the per-seed F1 differences (an F1 has no
    per-unit value to average over seeds first)."""
    runs_a, runs_b = _as_matrix(pred_a), _as_matrix(pred_b)
    if runs_a.shape[0] != runs_b.shape[0]:
        raise DataError(f"paired F1 test: {runs_a.shape[0]} seeds against "
                        f"{runs_b.shape[0]}", hint="pair as many seeds of each system")
    n = runs_a.shape[1]
    if runs_b.shape[1] != n:
        raise DataError("paired test: the systems were scored on different pairs")
    swaps = _swap_masks(np.random.default_rng([seed, 31337]), resamples, n)
    keep = 1.0 - swaps

    def f1(x: tuple[np.ndarray, ...], y: tuple[np.ndarray, ...]) -> np.ndarray:
        return _f1_from_counts(*(keep @ u + swaps @ v for u, v in zip(x, y, strict=True)))

    resampled = np.zeros(resamples)
    observed = 0.0
    for one_a, one_b in zip(runs_a, runs_b, strict=True):
        sys_a, sys_b = _indicators(labels, one_a), _indicators(labels, one_b)
        resampled += f1(sys_a, sys_b) - f1(sys_b, sys_a)
        observed += float(_f1_from_counts(*(u.sum() for u in sys_a))
                          - _f1_from_counts(*(u.sum() for u in sys_b)))
    seeds = runs_a.shape[0]
    observed, resampled = observed / seeds, resampled / seeds
    return PairedTest(difference=observed, p_value=_p_value(observed, resampled),
                      resamples=resamples, units=n)
