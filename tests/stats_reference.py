"""Slow references for pairrepro.stats' resampling: the former dense float implementations
(a float swap or weight matrix of resamples x units, multiplied out) and plain loops, one
resample at a time. tests/test_stats.py checks the bit-counting code against them;
bench/bench_stats.py times them beside it."""

from __future__ import annotations

import numpy as np

from pairrepro.metrics import f1_from_counts

CHUNK = 2000  # the former code's chunk of swap masks


def _counts(labels: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, ...]:
    gold, said = labels.astype(bool), pred.astype(bool)
    return tuple(c.astype(np.float64) for c in (said & gold, said & ~gold, ~said & gold))


def dense_f1_statistic(labels: np.ndarray, runs_a: np.ndarray, runs_b: np.ndarray,
                       swaps: np.ndarray) -> np.ndarray:
    """Mean over seeds of F1(A') - F1(B') under float swap masks ``[R, pairs]``."""
    keep = 1.0 - swaps

    def f1(x: tuple[np.ndarray, ...], y: tuple[np.ndarray, ...]) -> np.ndarray:
        return f1_from_counts(*(keep @ u + swaps @ v for u, v in zip(x, y, strict=True)))

    return sum(f1(_counts(labels, a), _counts(labels, b))
               - f1(_counts(labels, b), _counts(labels, a))
               for a, b in zip(runs_a, runs_b, strict=True)) / len(runs_a)


def _p_value(stats: np.ndarray, observed: float) -> float:
    return float((1 + np.sum(np.abs(stats) >= abs(observed) - 1e-12)) / (1 + len(stats)))


def dense_f1_test(labels: np.ndarray, runs_a: np.ndarray, runs_b: np.ndarray,
                  resamples: int, seed: int) -> float:
    """The former paired F1 test's p-value: float swap masks in chunks of :data:`CHUNK`."""
    rng = np.random.default_rng(seed)
    n = runs_a.shape[1]
    observed = dense_f1_statistic(labels, runs_a, runs_b, np.zeros((1, n)))[0]
    stats = np.concatenate([
        dense_f1_statistic(labels, runs_a, runs_b,
                           rng.integers(0, 2, size=(min(CHUNK, resamples - done), n))
                           .astype(np.float64))
        for done in range(0, resamples, CHUNK)])
    return _p_value(stats, observed)


def loop_f1_test(labels: np.ndarray, runs_a: np.ndarray, runs_b: np.ndarray, resamples: int,
                 seed: int) -> float:
    """The paired F1 test one resample at a time: swap, count, score."""
    rng = np.random.default_rng(seed)
    gold = labels.astype(bool)

    def f1(pred: np.ndarray) -> float:
        tp, fp, fn = (int((pred & gold).sum()), int((pred & ~gold).sum()),
                      int((~pred & gold).sum()))
        return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0

    a, b = runs_a.astype(bool), runs_b.astype(bool)
    observed = float(np.mean([f1(x) - f1(y) for x, y in zip(a, b, strict=True)]))
    stats = []
    for _ in range(resamples):
        swap = rng.integers(0, 2, size=a.shape[1]).astype(bool)
        stats.append(np.mean([f1(np.where(swap, y, x)) - f1(np.where(swap, x, y))
                              for x, y in zip(a, b, strict=True)]))
    return _p_value(np.array(stats), observed)


def dense_mean_test(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> float:
    """The former paired mean test's p-value: ``(1 - 2 swaps) @ diff`` over float masks."""
    rng = np.random.default_rng(seed)
    diff = np.atleast_2d(a).mean(axis=0) - np.atleast_2d(b).mean(axis=0)
    n = diff.size
    stats = np.concatenate([
        (1.0 - 2.0 * rng.integers(0, 2, size=(min(CHUNK, resamples - done), n))) @ diff / n
        for done in range(0, resamples, CHUNK)])
    return _p_value(stats, float(diff.mean()))


def loop_mean_test(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> float:
    """The paired mean test one resample at a time: flip the swapped units' differences."""
    rng = np.random.default_rng(seed)
    diff = np.atleast_2d(a).mean(axis=0) - np.atleast_2d(b).mean(axis=0)
    stats = [float(np.where(rng.integers(0, 2, size=diff.size) == 1, -diff, diff).mean())
             for _ in range(resamples)]
    return _p_value(np.array(stats), float(diff.mean()))


def dense_mean_interval(values: np.ndarray, resamples: int, seed: int
                        ) -> tuple[float, float]:
    """The former two-level bootstrap's 95% endpoints: float count matrices ``[R, units]``
    (row-offset bincount) for units and seeds, multiplied out."""
    rng = np.random.default_rng(seed)
    matrix = np.atleast_2d(values)
    seeds, units = matrix.shape

    def counts(size: int) -> np.ndarray:
        draws = rng.integers(0, size, size=(resamples, size))
        flat = (draws + (np.arange(resamples) * size)[:, None]).ravel()
        return np.bincount(flat, minlength=resamples * size).reshape(
            resamples, size).astype(np.float64)

    per_seed = counts(units) @ matrix.T / units
    seed_w = counts(seeds) if seeds > 1 else np.ones((resamples, 1))
    low, high = np.quantile((per_seed * seed_w).sum(axis=1) / seeds, [0.025, 0.975])
    return float(low), float(high)
