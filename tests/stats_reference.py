"""Slow references for pairrepro.stats' resampling: the former dense float implementation of
the two-level bootstrap (count matrices of resamples x units, multiplied out), for means and
for a difference of two systems' F1. tests/test_stats.py checks the type-count code against
them; bench/bench_stats.py times them beside it."""

from __future__ import annotations

import numpy as np

from pairrepro.metrics import class_one_indicators, f1_from_counts


def _count_matrix(rng: np.random.Generator, resamples: int, size: int) -> np.ndarray:
    """``[R, size]`` float counts of ``size`` draws with replacement (row-offset bincount)."""
    draws = rng.integers(0, size, size=(resamples, size))
    flat = (draws + (np.arange(resamples) * size)[:, None]).ravel()
    return np.bincount(flat, minlength=resamples * size).reshape(
        resamples, size).astype(np.float64)


def _ends(stats: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """(low, high) percentile endpoints and the two-sided bootstrap p of 0."""
    alpha = (1 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    p = 2 * (1 + min(np.sum(stats <= 0), np.sum(stats >= 0))) / (1 + len(stats))
    return float(low), float(high), float(min(1.0, p))


def dense_mean_interval(values: np.ndarray, resamples: int, seed: int,
                        confidence: float = 0.95) -> tuple[float, float, float]:
    """The former two-level bootstrap of a mean: (low, high, p of 0)."""
    rng = np.random.default_rng(seed)
    matrix = np.atleast_2d(values)
    seeds, units = matrix.shape
    per_seed = _count_matrix(rng, resamples, units) @ matrix.T / units
    seed_w = _count_matrix(rng, resamples, seeds) if seeds > 1 else np.ones((resamples, 1))
    return _ends((per_seed * seed_w).sum(axis=1) / seeds, confidence)


def dense_f1_difference(labels: np.ndarray, runs_a: np.ndarray, runs_b: np.ndarray,
                        resamples: int, seed: int, confidence: float = 0.95
                        ) -> tuple[float, float, float]:
    """Two-level bootstrap of mean over seeds of F1(A_k) - F1(B_k): (low, high, p of 0)."""
    rng = np.random.default_rng(seed)
    seeds = len(runs_a)
    units = _count_matrix(rng, resamples, runs_a.shape[1])
    seed_w = _count_matrix(rng, resamples, seeds) if seeds > 1 else np.ones((resamples, 1))

    def f1(runs: np.ndarray) -> np.ndarray:  # [R, seeds]
        return f1_from_counts(*(units @ c.T for c in class_one_indicators(labels, runs)))

    return _ends(((f1(runs_a) - f1(runs_b)) * seed_w).sum(axis=1) / seeds, confidence)
