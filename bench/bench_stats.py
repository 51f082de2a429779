"""Benchmark: pairrepro.stats' two-level bootstrap intervals, which also give the paired tests
of two recipes (bootstrap type counts, pair-sum tables, cache-sized chunks), against the former
dense float code, in one run.

Synthetic data of the README cells' shapes: the interval of a difference of two systems' F1 on
9,324 pairs (TwitterURL's test set) with 1 and 3 seeds, two systems about 85% right that
disagree on about 12% of the pairs; of a difference of AP-like values on 68 queries (TrecQA's
test set) over 3 seeds, and of 0/1 correctness of 9,324 pairs (accuracy). Each method is timed
on its own number of resamples (the slow one on fewer) and reported as resamples per second,
the new code's the best of ``--repeats`` runs (load only adds time), with its time at its cap
(INTERVAL_CAP). The references live in tests/stats_reference.py, which the tests check the new
code against.

    .venv/bin/python bench/bench_stats.py              # one pinned core, load printed
    .venv/bin/python bench/bench_stats.py --quick      # fewer resamples: a check that it runs
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the references live with the tests
sys.path.insert(0, str(ROOT / "bench"))

from protocol import LoadMonitor, begin  # noqa: E402
from stats_reference import dense_f1_difference, dense_mean_interval  # noqa: E402

from pairrepro.stats import INTERVAL_CAP, f1_combination_interval, mean_interval  # noqa: E402

PAIRS, QUERIES, SEEDS = 9_324, 68, 3
TARGET_S = 30.0  # the F1 difference interval at INTERVAL_CAP on PAIRS pairs, SEEDS seeds


def best_rate(fn: Callable[[int], object], resamples: int, repeats: int) -> float:
    """Resamples per second of ``fn(resamples)``, the fastest of ``repeats`` runs."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(resamples)
        best = min(best, time.perf_counter() - start)
    return resamples / best


def f1_data(seeds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    labels = (rng.random(PAIRS) < 0.3).astype(np.int64)
    a = np.stack([np.where(rng.random(PAIRS) < 0.15, 1 - labels, labels) for _ in range(seeds)])
    b = np.where(rng.random(a.shape) < 0.12, 1 - a, a)
    return labels, a, b


def cases(scale: float) -> list[tuple[str, dict[str, tuple[Callable[[int], object], int]]]]:
    """(name, {method: (fn(resamples), resamples)}) of every case, the new code first."""
    rng = np.random.default_rng(1)
    ap_a = rng.beta(2, 1, size=(SEEDS, QUERIES))
    ap_b = np.clip(ap_a - 0.02 + rng.normal(0, 0.15, size=ap_a.shape), 0, 1)
    labels, a3, b3 = f1_data(SEEDS)
    acc = (a3 == labels).astype(float) - (b3 == labels).astype(float)
    streams = itertools.count()  # a new stream each run: an interval is computed once a process
    out = []
    for seeds in (1, SEEDS):
        a, b = a3[:seeds], b3[:seeds]
        out.append((f"F1 difference interval, {PAIRS:,} pairs, {seeds} seed(s)", {
            "type counts": (lambda r, a=a, b=b: f1_combination_interval(
                (labels, a), (labels, b), (1.0, -1.0), resamples=r, seed=next(streams)),
                INTERVAL_CAP),
            "dense float": (lambda r, a=a, b=b: dense_f1_difference(labels, a, b, r, 0), 400)}))
    for name, diff, dense in ((f"mean difference interval, {QUERIES} queries x {SEEDS} seeds",
                               ap_a - ap_b, 100_000),
                              (f"accuracy difference interval, {PAIRS:,} pairs x {SEEDS} seeds",
                               acc, 400)):
        out.append((name, {
            "type counts": (lambda r, d=diff: mean_interval(d, resamples=r, seed=next(streams)),
                            INTERVAL_CAP),
            "dense float": (lambda r, d=diff: dense_mean_interval(d, r, 0), dense)}))
    return [(name, {k: (fn, max(100, int(r * scale))) for k, (fn, r) in methods.items()})
            for name, methods in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a hundredth of the resamples")
    args = parser.parse_args()
    begin(1)
    monitor = LoadMonitor(1).start()
    at_cap = {}
    for name, methods in cases(0.01 if args.quick else 1.0):
        new = next(iter(methods))  # the slow references run once: long enough to be steady
        rates = {method: best_rate(fn, resamples, args.repeats if method == new else 1)
                 for method, (fn, resamples) in methods.items()}
        at_cap[name] = INTERVAL_CAP / rates[new]
        print(f"{name}:")
        for method, rate in rates.items():
            extra = (f", {INTERVAL_CAP:,} resamples in {INTERVAL_CAP / rate:.2f} s"
                     if method == new else
                     f"; {rates[new] / rate:,.0f}x slower than {new}")
            print(f"  {method:<12} {rate:>14,.0f} resamples/s ({methods[method][1]:,} timed"
                  f"{extra})", flush=True)
    print(monitor.stop().describe())
    f1 = at_cap[f"F1 difference interval, {PAIRS:,} pairs, {SEEDS} seed(s)"]
    verdict = "OK" if f1 < TARGET_S else "SLOW"
    print(f"{verdict}: the F1 difference interval, {INTERVAL_CAP:,} resamples on {PAIRS:,} "
          f"pairs x {SEEDS} seeds, {f1:.2f} s (target under {TARGET_S:g} s)")
    if verdict == "SLOW":
        raise SystemExit(1)


if __name__ == "__main__":
    main()
