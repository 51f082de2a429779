"""Is a difference real? Seeded two-level (seeds × units) percentile bootstrap intervals, whose
bootstrap p-value of 0 is the paired test of two recipes, adaptive unless ``resamples`` is
given (docs/internals.md), and Holm's adjustment."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack

import numpy as np

from pairrepro.errors import DataError
from pairrepro.metrics import class_one_indicators, f1_from_counts

CONFIDENCE = 0.95
RESAMPLES = 2000  # an adaptive interval's first round; each later round doubles the total
INTERVAL_CAP = 1_024_000
ENDPOINT_SE = 0.001  # bound on an interval endpoint's MC s.e. (the metric's own scale)
MC_Z = 3.0  # a threshold closer than this many MC s.e. to the estimate is undecided
P_SE = 0.005  # bound on a tested p-value's MC s.e.
# a p-value this close to its threshold is undecided however many resamples are drawn, so
# whether a test is decided does not hang on the resampling seed
P_MARGIN = 0.005
ALPHA = 0.05  # the significance threshold paired tests are decided against
_ORDER_Z = 1.959964  # the 95% band of an order statistic, for the endpoints' MC s.e.
CHUNK_BYTES = 1 << 20  # random words or counts of one chunk of resamples: about an L2 cache
# a multinomial draw costs about this many unit draws per type: below it, draw type counts
_TYPE_COST = 12
# up to this many units, two unit draws are one index into a table of pair sums (in L2)
PAIR_UNITS = 256


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
    step: float = 0.0  # the unit the endpoints print in (the metric's scale; 0: not printed)
    # two-sided bootstrap p of 0: twice the smaller share of resamples on either side of 0
    # (counted as (1 + k) / (1 + R), never 0), so p < 1 - confidence only where 0 lies outside
    # the interval (resamples a multiple of 40)
    p_value: float = 1.0

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high

    def straddles(self, x: float) -> bool:
        """Whether ``x`` lies within ``MC_Z`` MC standard errors of an endpoint."""
        return any(se > 0 and abs(x - end) <= MC_Z * se + 1e-12
                   for end, se in ((self.low, self.low_se), (self.high, self.high_se)))

    def moving(self) -> tuple[bool, bool]:
        """Whether the printed digits of (low, high) could move with the resampling seed."""
        return (_near_boundary(self.low, self.low_se, self.step),
                _near_boundary(self.high, self.high_se, self.step))

    @property
    def mc_se(self) -> float:
        return max(self.low_se, self.high_se)

    @property
    def p_se(self) -> float:
        """The MC s.e. of :attr:`p_value`, twice a share: ``sqrt(p (2 - p) / R)``."""
        return float(np.sqrt(self.p_value * (2 - self.p_value) / self.resamples))

    def undecided(self, alpha: float = ALPHA) -> bool:
        """Whether p < ``alpha`` is undecided: p within ``P_MARGIN`` of it, or it within
        ``MC_Z`` MC s.e. of p."""
        return abs(self.p_value - alpha) <= max(P_MARGIN, MC_Z * self.p_se) + 1e-12

    def test_settled(self, alpha: float) -> bool:
        """Whether no more resamples can change :meth:`undecided` at ``alpha``."""
        return self.p_se <= P_SE and abs(abs(self.p_value - alpha) - P_MARGIN) > MC_Z * self.p_se


def _near_boundary(value: float, se: float, step: float) -> bool:
    if step <= 0 or se <= 0:
        return False
    scaled = value / step
    return bool(abs(scaled - np.floor(scaled) - 0.5) * step <= MC_Z * se + 1e-12)


def _endpoints(stats: np.ndarray, confidence: float) -> tuple[float, float, float, float]:
    """(low, high, low's MC s.e., high's) of the percentile interval of ``stats``."""
    alpha = (1.0 - confidence) / 2
    n = len(stats)
    wanted = []
    for q in (alpha, 1.0 - alpha):
        half = _ORDER_Z * np.sqrt(n * q * (1 - q))
        position = (n - 1) * q
        wanted.append((position, int(np.floor(position)), int(np.ceil(position)),
                       int(np.clip(np.floor(n * q - half), 0, n - 1)),
                       int(np.clip(np.ceil(n * q + half), 0, n - 1))))
    ordered = np.partition(stats, sorted({k for w in wanted for k in w[1:]}))
    ends = [ordered[below] + (position - below) * (ordered[above] - ordered[below])
            for position, below, above, _, _ in wanted]
    ses = [float(ordered[hi] - ordered[lo]) / (2 * _ORDER_Z) for _, _, _, lo, hi in wanted]
    return float(ends[0]), float(ends[1]), ses[0], ses[1]


def _chunks(rows: int, width: int) -> list[int]:
    """``rows`` split into chunks of at most :data:`CHUNK_BYTES` of ``width`` 8-byte values."""
    size = max(64, CHUNK_BYTES // (8 * max(width, 1)))
    return [min(size, rows - done) for done in range(0, rows, size)]


class _UnitSums:
    """Sums of per-unit ``features`` ``[units, K]`` over bootstrap resamples of the units."""

    def __init__(self, features: np.ndarray) -> None:
        self.units = n = len(features)
        types, sizes = np.unique(features, axis=0, return_counts=True)
        self.by_type = len(types) * _TYPE_COST < n
        self.features = types if self.by_type else features
        self.shares = sizes / n
        self.width = len(self.features)
        self.paired = not self.by_type and n <= PAIR_UNITS
        # one table per feature column: far faster gathers than one over [rows, units, K]
        self.tables = [(c[:, None] + c[None, :]).ravel() if self.paired else c
                       for c in np.ascontiguousarray(self.features.T)]

    def draw(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """``[rows, K]`` resampled sums."""
        n = self.units
        if self.by_type:
            return rng.multinomial(n, self.shares, size=rows) @ self.features
        drawn = (rng.integers(0, n * n, size=(rows, n // 2)) if self.paired else
                 rng.integers(0, n, size=(rows, n)))
        sums = np.stack([table[drawn].sum(axis=1) for table in self.tables], axis=1)
        if self.paired and n % 2:
            sums += self.features[rng.integers(0, n, size=rows)]
        return sums


def _bincount_rows(draws: np.ndarray, size: int) -> np.ndarray:
    """``[rows, size]``: how often each value occurs in each row of ``draws``."""
    rows = len(draws)
    # one bincount over row-offset draws: the same counts as np.add.at, many times faster
    flat = (draws + (np.arange(rows) * size)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * size).reshape(rows, size)


# intervals computed in this process: a report renders the same cell in several tables
_MEMO: dict[tuple[object, ...], Interval] = {}
_MEMO_SIZE = 4096


class Draw(TypedDict, total=False):
    """How every interval of this module is drawn (defaults: :func:`_two_level`)."""

    confidence: float
    resamples: int | None  # None: adaptive
    seed: int
    targets: Sequence[float]  # what a verdict compares the interval with
    step: float  # the unit its endpoints print in (0: not printed)
    test: float  # > 0: also drawn until whether p < test is settled (Interval.undecided)


def _two_level(kind: str, features: np.ndarray, per_seed: Callable[[np.ndarray], np.ndarray],
               point: float, seeds: int, combine: Callable[[np.ndarray], np.ndarray] | None = None,
               *, confidence: float = CONFIDENCE, resamples: int | None = None, seed: int = 0,
               targets: Sequence[float] = (), step: float = 0.0, test: float = 0.0) -> Interval:
    """The percentile interval of the mean over resampled seeds of ``per_seed(sums)``
    (``[R, seeds]``), ``sums`` being ``features`` ``[units, K]`` summed over resampled units;
    with ``combine``, ``per_seed`` gives ``[R, seeds, M]`` and ``combine`` maps the M means
    ``[R, M]`` to the statistic ``[R]`` (``kind`` names it in the memo)."""
    if len(features) == 0 or seeds == 0:
        raise DataError("bootstrap: nothing to resample (no units or no seeds)")
    key = (kind, features.shape, hashlib.blake2b(features.tobytes()).digest(), seeds,
           confidence, resamples, seed, tuple(targets), step, test,
           (RESAMPLES, INTERVAL_CAP, ENDPOINT_SE, MC_Z))
    if key in _MEMO:
        return _MEMO[key]
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.clear()
    sampler = _UnitSums(features)
    rng = np.random.default_rng([seed, 2718])
    batch = resamples or RESAMPLES
    stats = np.empty(0)
    while True:
        found = [stats]
        for rows in _chunks(batch, sampler.width):
            seed_w = (_bincount_rows(rng.integers(0, seeds, size=(rows, seeds)), seeds)
                      if seeds > 1 else np.ones((rows, 1)))
            values = per_seed(sampler.draw(rng, rows))
            weights = seed_w if values.ndim == 2 else seed_w[:, :, None]
            means = (values * weights).sum(axis=1) / seeds
            found.append(means if combine is None else combine(means))
        stats = np.concatenate(found)
        low, high, low_se, high_se = _endpoints(stats, confidence)
        side = (1 + min(np.count_nonzero(stats <= 0), np.count_nonzero(stats >= 0))) / (
            1 + len(stats))
        out = Interval(value=float(point), low=low, high=high, confidence=confidence,
                       resamples=len(stats), seeds=seeds, units=sampler.units,
                       low_se=low_se, high_se=high_se, step=step, p_value=min(1.0, 2 * side))
        settled = (out.mc_se <= ENDPOINT_SE and not any(out.straddles(t) for t in targets)
                   and (test <= 0 or out.test_settled(test))
                   and not any(out.moving()))
        if resamples is not None or settled or 2 * len(stats) > INTERVAL_CAP:
            _MEMO[key] = out
            return out
        batch = len(stats)


def _as_matrix(values: np.ndarray) -> np.ndarray:
    return np.atleast_2d(np.asarray(values, dtype=np.float64))


def mean_interval(values: np.ndarray, **draw: Unpack[Draw]) -> Interval:
    """Interval of a mean from per-unit values ``[units]`` or ``[seeds, units]``."""
    matrix = _as_matrix(values)
    seeds, units = matrix.shape
    return _two_level("mean", matrix.T, lambda sums: sums / units, float(matrix.mean()), seeds,
                      **draw)


def _f1_of_sums(sums: np.ndarray, seeds: int, offset: int = 0) -> np.ndarray:
    """F1 per seed from ``sums`` holding TP, FP, FN of ``seeds`` seeds from column ``offset``."""
    tp, fp, fn = (sums[:, offset + k * seeds: offset + (k + 1) * seeds] for k in range(3))
    return f1_from_counts(tp, fp, fn)


def f1_interval(labels: np.ndarray, predictions: np.ndarray, **draw: Unpack[Draw]) -> Interval:
    """Interval of the F1 of class 1 from 0/1 ``predictions`` ``[pairs]`` or ``[seeds, pairs]``."""
    pred = _as_matrix(predictions)
    seeds = pred.shape[0]
    counts = np.vstack(class_one_indicators(labels, pred))  # [3 seeds, pairs]
    point = float(_f1_of_sums(counts.sum(axis=1)[None, :], seeds).mean())
    return _two_level("f1", counts.T, lambda sums: _f1_of_sums(sums, seeds), point, seeds, **draw)


def macro_f1_interval(labels: np.ndarray, predictions: np.ndarray, **draw: Unpack[Draw]
                      ) -> Interval:
    """Interval of the macro F1 of two classes; arguments as :func:`f1_interval`."""
    pred = _as_matrix(predictions)
    gold = np.broadcast_to(np.asarray(labels), pred.shape)
    return f1_combination_interval((gold, pred), (1 - gold, 1 - pred), (0.5, 0.5), **draw)


def f1_combination_interval(first: tuple[np.ndarray, np.ndarray],
                            second: tuple[np.ndarray, np.ndarray], weights: tuple[float, float],
                            **draw: Unpack[Draw]) -> Interval:
    """Interval of the mean over seeds of ``weights[0]`` F1(first) + ``weights[1]`` F1(second),
    each (gold, 0/1 predictions ``[seeds, pairs]``) and seed k with seed k: a macro F1 with
    (0.5, 0.5), a difference of two systems' F1 with (1, -1)."""
    seeds = _as_matrix(first[1]).shape[0]
    counts = np.vstack(class_one_indicators(*first) + class_one_indicators(*second))

    def combined(sums: np.ndarray) -> np.ndarray:
        return (weights[0] * _f1_of_sums(sums, seeds)
                + weights[1] * _f1_of_sums(sums, seeds, 3 * seeds))

    return _two_level(f"f1s:{weights}", counts.T, combined,
                      float(combined(counts.sum(axis=1)[None, :]).mean()), seeds, **draw)


def joint_interval(kind: str, features: np.ndarray,
                   per_seed: Callable[[np.ndarray], np.ndarray],
                   combine: Callable[[np.ndarray], np.ndarray], seeds: int,
                   **draw: Unpack[Draw]) -> Interval:
    """Interval of ``combine`` (``[R, M]`` -> ``[R]``) of M statistics, each the mean over
    resampled seeds of ``per_seed(sums)`` (``[R, seeds, M]``), all M from the same resamples
    of units and seeds: how two metrics of the same predictions are compared. ``kind`` must
    name ``per_seed`` and ``combine`` (the memo's key)."""
    whole = per_seed(np.asarray(features, dtype=np.float64).sum(axis=0)[None, :])
    point = float(combine(whole.mean(axis=1))[0])
    return _two_level(f"joint:{kind}", features, per_seed, point, seeds, combine, **draw)


def ratio_interval(numerators: np.ndarray, denominators: np.ndarray, **draw: Unpack[Draw]
                   ) -> Interval:
    """Interval of ``sum(numerators) / sum(denominators)``, ``[units]`` or ``[seeds, units]``."""
    num, den = _as_matrix(numerators), _as_matrix(denominators)
    seeds = num.shape[0]

    def ratio(sums: np.ndarray) -> np.ndarray:
        n, d = sums[:, :seeds], sums[:, seeds:]
        return np.divide(n, d, out=np.zeros_like(n), where=d > 0)

    both = np.vstack([num, den])
    return _two_level("ratio", both.T, ratio, float(ratio(both.sum(axis=1)[None, :]).mean()), seeds,
                      **draw)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input order."""
    order = np.argsort(p_values, kind="stable")
    steps = (len(order) - np.arange(len(order))) * np.asarray(p_values, dtype=np.float64)[order]
    adjusted = np.empty(len(order))
    adjusted[order] = np.maximum.accumulate(np.fmin(1.0, steps))  # fmin: NaN -> 1
    return adjusted.tolist()
