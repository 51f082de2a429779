"""Is a difference real? Seeded two-level (seeds × units) percentile bootstrap intervals, whose
bootstrap p-value of 0 is the test of a recipe, and paired randomization tests conditional on
the trained models, adaptive unless ``resamples`` is given (docs/internals.md)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pairrepro.errors import DataError
from pairrepro.metrics import class_one_indicators, f1_from_counts

CONFIDENCE = 0.95
RESAMPLES = 2000  # an adaptive interval's first round; each later round doubles the total
INTERVAL_CAP = 1_024_000
TEST_BATCH = 10_000  # a paired test's batch
TEST_CAP = 640_000
ENDPOINT_SE = 0.001  # bound on an interval endpoint's MC s.e. (the metric's own scale)
P_SE = 0.005  # bound on a p-value's MC s.e.
MC_Z = 3.0  # a threshold closer than this many MC s.e. to the estimate is undecided
# a p-value this close to its threshold is undecided however many resamples are drawn
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
    # two-sided bootstrap p of 0: twice the smaller share of resamples on either side of 0, so
    # p < 1 - confidence only where 0 lies outside the interval (resamples a multiple of 40)
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


def _two_level(kind: str, features: np.ndarray, per_seed: Callable[[np.ndarray], np.ndarray],
               point: float, seeds: int, confidence: float, resamples: int | None,
               seed: int, targets: Sequence[float], step: float,
               combine: Callable[[np.ndarray], np.ndarray] | None = None) -> Interval:
    """The percentile interval of the mean over resampled seeds of ``per_seed(sums)``
    (``[R, seeds]``), ``sums`` being ``features`` ``[units, K]`` summed over resampled units;
    with ``combine``, ``per_seed`` gives ``[R, seeds, M]`` and ``combine`` maps the M means
    ``[R, M]`` to the statistic ``[R]`` (``kind`` names it in the memo)."""
    if len(features) == 0 or seeds == 0:
        raise DataError("bootstrap: nothing to resample (no units or no seeds)")
    key = (kind, features.shape, hashlib.blake2b(features.tobytes()).digest(), seeds,
           confidence, resamples, seed, tuple(targets), step,
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
        side = min(np.count_nonzero(stats <= 0), np.count_nonzero(stats >= 0)) / len(stats)
        out = Interval(value=float(point), low=low, high=high, confidence=confidence,
                       resamples=len(stats), seeds=seeds, units=sampler.units,
                       low_se=low_se, high_se=high_se, step=step, p_value=min(1.0, 2 * side))
        settled = (out.mc_se <= ENDPOINT_SE and not any(out.straddles(t) for t in targets)
                   and not any(out.moving()))
        if resamples is not None or settled or 2 * len(stats) > INTERVAL_CAP:
            _MEMO[key] = out
            return out
        batch = len(stats)


def _as_matrix(values: np.ndarray) -> np.ndarray:
    return np.atleast_2d(np.asarray(values, dtype=np.float64))


def mean_interval(values: np.ndarray, confidence: float = CONFIDENCE,
                  resamples: int | None = None, seed: int = 0,
                  targets: Sequence[float] = (), step: float = 0.0) -> Interval:
    """Interval of a mean from per-unit values ``[units]`` or ``[seeds, units]``; ``targets``:
    what a verdict compares it with; ``step``: the unit its endpoints print in."""
    matrix = _as_matrix(values)
    seeds, units = matrix.shape
    return _two_level("mean", matrix.T, lambda sums: sums / units, float(matrix.mean()), seeds,
                      confidence, resamples, seed, targets, step)


def _f1_of_sums(sums: np.ndarray, seeds: int, offset: int = 0) -> np.ndarray:
    """F1 per seed from ``sums`` holding TP, FP, FN of ``seeds`` seeds from column ``offset``."""
    tp, fp, fn = (sums[:, offset + k * seeds: offset + (k + 1) * seeds] for k in range(3))
    return f1_from_counts(tp, fp, fn)


def f1_interval(labels: np.ndarray, predictions: np.ndarray, confidence: float = CONFIDENCE,
                resamples: int | None = None, seed: int = 0,
                targets: Sequence[float] = (), step: float = 0.0) -> Interval:
    """Interval of the F1 of class 1 from 0/1 ``predictions`` ``[pairs]`` or ``[seeds, pairs]``."""
    pred = _as_matrix(predictions)
    seeds = pred.shape[0]
    counts = np.vstack(class_one_indicators(labels, pred))  # [3 seeds, pairs]
    point = float(_f1_of_sums(counts.sum(axis=1)[None, :], seeds).mean())
    return _two_level("f1", counts.T, lambda sums: _f1_of_sums(sums, seeds), point, seeds,
                      confidence, resamples, seed, targets, step)


def macro_f1_interval(labels: np.ndarray, predictions: np.ndarray,
                      confidence: float = CONFIDENCE, resamples: int | None = None,
                      seed: int = 0, targets: Sequence[float] = (), step: float = 0.0
                      ) -> Interval:
    """Interval of the macro F1 of two classes; arguments as :func:`f1_interval`."""
    pred = _as_matrix(predictions)
    gold = np.broadcast_to(np.asarray(labels), pred.shape)
    return f1_combination_interval((gold, pred), (1 - gold, 1 - pred), (0.5, 0.5), confidence,
                                   resamples, seed, targets, step)


def f1_combination_interval(first: tuple[np.ndarray, np.ndarray],
                            second: tuple[np.ndarray, np.ndarray], weights: tuple[float, float],
                            confidence: float = CONFIDENCE, resamples: int | None = None,
                            seed: int = 0, targets: Sequence[float] = (), step: float = 0.0
                            ) -> Interval:
    """Interval of the mean over seeds of ``weights[0]`` F1(first) + ``weights[1]`` F1(second),
    each (gold, 0/1 predictions ``[seeds, pairs]``) and seed k with seed k: a macro F1 with
    (0.5, 0.5), a difference of two systems' F1 with (1, -1)."""
    seeds = _as_matrix(first[1]).shape[0]
    counts = np.vstack(class_one_indicators(*first) + class_one_indicators(*second))

    def combined(sums: np.ndarray) -> np.ndarray:
        return (weights[0] * _f1_of_sums(sums, seeds)
                + weights[1] * _f1_of_sums(sums, seeds, 3 * seeds))

    return _two_level(f"f1s:{weights}", counts.T, combined,
                      float(combined(counts.sum(axis=1)[None, :]).mean()), seeds, confidence,
                      resamples, seed, targets, step)


def joint_interval(kind: str, features: np.ndarray,
                   per_seed: Callable[[np.ndarray], np.ndarray],
                   combine: Callable[[np.ndarray], np.ndarray], seeds: int,
                   confidence: float = CONFIDENCE, resamples: int | None = None, seed: int = 0,
                   targets: Sequence[float] = (), step: float = 0.0) -> Interval:
    """Interval of ``combine`` (``[R, M]`` -> ``[R]``) of M statistics, each the mean over
    resampled seeds of ``per_seed(sums)`` (``[R, seeds, M]``), all M from the same resamples
    of units and seeds: how two metrics of the same predictions are compared. ``kind`` must
    name ``per_seed`` and ``combine`` (the memo's key)."""
    whole = per_seed(np.asarray(features, dtype=np.float64).sum(axis=0)[None, :])
    point = float(combine(whole.mean(axis=1))[0])
    return _two_level(f"joint:{kind}", features, per_seed, point, seeds, confidence, resamples,
                      seed, targets, step, combine)


def ratio_interval(numerators: np.ndarray, denominators: np.ndarray,
                   confidence: float = CONFIDENCE, resamples: int | None = None,
                   seed: int = 0, targets: Sequence[float] = (), step: float = 0.0
                   ) -> Interval:
    """Interval of ``sum(numerators) / sum(denominators)``, ``[units]`` or ``[seeds, units]``."""
    num, den = _as_matrix(numerators), _as_matrix(denominators)
    seeds = num.shape[0]

    def ratio(sums: np.ndarray) -> np.ndarray:
        n, d = sums[:, :seeds], sums[:, seeds:]
        return np.divide(n, d, out=np.zeros_like(n), where=d > 0)

    both = np.vstack([num, den])
    return _two_level("ratio", both.T, ratio, float(ratio(both.sum(axis=1)[None, :]).mean()), seeds,
                      confidence, resamples, seed, targets, step)


@dataclass(frozen=True)
class PairedTest:
    """Result of a paired randomization test of A against B on the same units: conditional on
    the trained models (their seeds fixed), not a test of the recipes that trained them."""

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
        """Whether no more resamples can change :meth:`straddles` for ``alphas``."""
        return self.mc_se <= P_SE and all(
            abs(abs(self.p_value - a) - P_MARGIN) > MC_Z * self.mc_se for a in alphas)


class SwapCounts:
    """How many units of each group a random swap takes (each with probability 1/2)."""

    def __init__(self, sizes: np.ndarray) -> None:
        sizes = np.asarray(sizes, dtype=np.int64)
        if (sizes <= 0).any():
            raise ValueError("every group needs a unit")
        spans = -(-sizes // 64)
        self.starts = np.concatenate([[0], np.cumsum(spans)[:-1]]).astype(np.intp)
        self.words = int(spans.sum())
        self.mask = np.full(self.words, np.iinfo(np.uint64).max, dtype=np.uint64)
        tails = sizes % 64
        partial = tails > 0
        self.mask[(self.starts + spans - 1)[partial]] = (
            (np.uint64(1) << tails[partial].astype(np.uint64)) - np.uint64(1))

    def draw(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """``[rows, groups]`` counts."""
        if self.words == 0:
            return np.zeros((rows, 0), dtype=np.int64)
        words = rng.bit_generator.random_raw(rows * self.words).reshape(rows, self.words)
        words &= self.mask
        return np.add.reduceat(np.bitwise_count(words), self.starts, axis=1, dtype=np.int64)


class _SwappedSums:
    """Sums of ``values`` over the units a random swap takes."""

    def __init__(self, values: np.ndarray) -> None:
        moving = values[values != 0]  # swapping a zero difference changes nothing
        self.distinct, sizes = np.unique(moving, return_counts=True)
        self.counts = SwapCounts(sizes)
        self.bytes = -(-len(moving) // 8)
        self.by_count = self.counts.words <= self.bytes
        self.words = self.counts.words if self.by_count else -(-self.bytes // 8)
        if not self.by_count:
            padded = np.zeros(self.bytes * 8)
            padded[:len(moving)] = moving
            bits = (np.arange(256)[:, None] >> np.arange(8)) & 1  # [byte value, bit]
            self.table = (padded.reshape(self.bytes, 8) @ bits.T).ravel()  # [byte, value]
            self.offsets = np.arange(self.bytes) * 256

    def draw(self, rng: np.random.Generator, rows: int) -> np.ndarray:
        """``[rows]`` sums."""
        if self.by_count:
            return self.counts.draw(rng, rows) @ self.distinct
        raw = rng.bit_generator.random_raw(rows * self.words).reshape(rows, self.words)
        return self.table[raw.view(np.uint8)[:, :self.bytes] + self.offsets].sum(axis=1)


def _adaptive_test(observed: float, resample: Callable[[np.random.Generator, int], np.ndarray],
                   words: int, n: int, resamples: int | None, seed: int,
                   alphas: Sequence[float]) -> PairedTest:
    """Draw the statistic under random swaps (``resample(rng, rows)``) in batches until
    :meth:`PairedTest.settled` or :data:`TEST_CAP`, or exactly ``resamples``."""
    rng = np.random.default_rng([seed, 31337])
    batch = resamples or TEST_BATCH
    # a tiny tolerance so floating-point noise never counts a tie as a miss
    bound = abs(observed) - 1e-12
    hits = drawn = 0
    while True:
        for rows in _chunks(batch, words):
            hits += int(np.count_nonzero(np.abs(resample(rng, rows)) >= bound))
        drawn += batch
        test = PairedTest(difference=observed, p_value=(1 + hits) / (1 + drawn),
                          resamples=drawn, units=n)
        if resamples is not None or test.settled(alphas) or drawn + batch > TEST_CAP:
            return test


def paired_randomization_test(a: np.ndarray, b: np.ndarray, resamples: int | None = None,
                              seed: int = 0, alphas: Sequence[float] = (ALPHA,)
                              ) -> PairedTest:
    """Two-sided paired randomization test of mean(a) - mean(b) from per-unit values ``[units]``
    (or ``[seeds, units]``, averaged over seeds first) on the same units in the same order."""
    va, vb = _as_matrix(a).mean(axis=0), _as_matrix(b).mean(axis=0)
    if va.shape != vb.shape:
        raise DataError(f"paired test: the systems were scored on different units "
                        f"({va.size} vs {vb.size})", hint="compare runs on the same test split")
    diff = va - vb
    n = diff.size
    total = float(diff.sum())
    swapped = _SwappedSums(diff)
    # a swap flips the unit's difference: the sum loses twice what the swapped units held
    return _adaptive_test(total / n, lambda rng, rows: (total - 2 * swapped.draw(rng, rows)) / n,
                          swapped.words, n, resamples, seed, alphas)


def paired_f1_test(labels: np.ndarray, pred_a: np.ndarray, pred_b: np.ndarray,
                   resamples: int | None = None, seed: int = 0,
                   alphas: Sequence[float] = (ALPHA,)) -> PairedTest:
    """Two-sided paired randomization test of mean per-seed F1(A) - F1(B), seed k against k."""
    runs_a, runs_b = _as_matrix(pred_a), _as_matrix(pred_b)
    if runs_a.shape[0] != runs_b.shape[0]:
        raise DataError(f"paired F1 test: {runs_a.shape[0]} seeds against "
                        f"{runs_b.shape[0]}", hint="pair as many seeds of each system")
    if runs_b.shape[1] != (n := runs_a.shape[1]):
        raise DataError("paired test: the systems were scored on different pairs")
    gold = np.asarray(labels).astype(bool)
    a, b = runs_a.astype(bool), runs_b.astype(bool)
    seeds = len(a)
    # the types of pairs a swap can change: how many of each it takes gives the F1 difference
    only_b, only_a = (b & ~a).astype(np.int64), (a & ~b).astype(np.int64)
    moves = np.concatenate([(only_b - only_a) * gold, (only_b - only_a) * ~gold]).T
    types, sizes = np.unique(moves[moves.any(axis=1)], axis=0, return_counts=True)
    tp_a, fp_a, fn_a = (c.sum(axis=1) for c in class_one_indicators(gold, a))
    tp_b, fp_b, fn_b = (c.sum(axis=1) for c in class_one_indicators(gold, b))

    def statistic(counts: np.ndarray) -> np.ndarray:  # [R, types] -> [R]
        move = counts @ types  # [R, 2 seeds]: A's change in TP, then in FP
        tp, fp = move[:, :seeds], move[:, seeds:]
        return (f1_from_counts(tp_a + tp, fp_a + fp, fn_a - tp)
                - f1_from_counts(tp_b - tp, fp_b - fp, fn_b + tp)).mean(axis=1)

    counts = SwapCounts(sizes)
    observed = float(statistic(np.zeros((1, len(sizes)), dtype=np.int64))[0])
    return _adaptive_test(observed, lambda rng, rows: statistic(counts.draw(rng, rows)),
                          counts.words, n, resamples, seed, alphas)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error), in the input order."""
    order = np.argsort(p_values, kind="stable")
    steps = (len(order) - np.arange(len(order))) * np.asarray(p_values, dtype=np.float64)[order]
    adjusted = np.empty(len(order))
    adjusted[order] = np.maximum.accumulate(np.fmin(1.0, steps))  # fmin: NaN -> 1
    return adjusted.tolist()
