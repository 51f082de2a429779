"""Benchmark: pairrepro.stats' resampling (swap masks as random bits counted by popcount,
bootstrap type counts) against the former dense float code and a plain loop, in one run.

Synthetic data of the README cells' shapes: the paired F1 test on 9,324 pairs (TwitterURL's
test set) with 1 and 3 seeds, two systems about 85% right that disagree on about 12% of the
pairs; the paired mean test on 68 queries (TrecQA's test set) of AP-like values over 3 seeds,
and on 0/1 correctness of 9,324 pairs (accuracy); the two-level bootstrap interval of the 68
queries over 3 seeds. Each method is timed on its own number of resamples (the slow ones on
fewer) and reported as resamples per second, the new code's the best of ``--repeats`` runs
(load only adds time), with its time at its cap (TEST_CAP, INTERVAL_CAP). The references live in
tests/stats_reference.py, which the tests check the new code against.

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
from stats_reference import (  # noqa: E402
    dense_f1_test,
    dense_mean_interval,
    dense_mean_test,
    loop_f1_test,
    loop_mean_test,
)

from pairrepro.stats import (  # noqa: E402
    INTERVAL_CAP,
    TEST_CAP,
    mean_interval,
    paired_f1_test,
    paired_randomization_test,
)

PAIRS, QUERIES, SEEDS = 9_324, 68, 3
TARGET_S = 10.0  # the paired F1 test at TEST_CAP resamples on PAIRS pairs, 3 seeds (issue 36)


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


def cases(scale: float) -> list[tuple[str, dict[str, tuple[Callable[[int], object], int]], int]]:
    """(name, {method: (fn(resamples), resamples)}, the new code's cap) of every case."""
    rng = np.random.default_rng(1)
    ap_a = rng.beta(2, 1, size=(SEEDS, QUERIES))
    ap_b = np.clip(ap_a - 0.02 + rng.normal(0, 0.15, size=ap_a.shape), 0, 1)
    labels, a3, b3 = f1_data(SEEDS)
    acc_a, acc_b = (a3 == labels).astype(float), (b3 == labels).astype(float)
    out = []
    for seeds in (1, SEEDS):
        a, b = a3[:seeds], b3[:seeds]
        out.append((f"paired F1 test, {PAIRS:,} pairs, {seeds} seed(s)", {
            "bits": (lambda r, a=a, b=b: paired_f1_test(labels, a, b, resamples=r), TEST_CAP),
            "dense float": (lambda r, a=a, b=b: dense_f1_test(labels, a, b, r, 0), 6_000),
            "loop": (lambda r, a=a, b=b: loop_f1_test(labels, a, b, r, 0), 200)}, TEST_CAP))
    for name, x, y in ((f"paired mean test, {QUERIES} queries x {SEEDS} seeds", ap_a, ap_b),
                       (f"paired mean test, accuracy of {PAIRS:,} pairs x {SEEDS} seeds",
                        acc_a, acc_b)):
        out.append((name, {
            "bits": (lambda r, x=x, y=y: paired_randomization_test(x, y, resamples=r),
                     TEST_CAP),
            "dense float": (lambda r, x=x, y=y: dense_mean_test(x, y, r, 0), 40_000),
            "loop": (lambda r, x=x, y=y: loop_mean_test(x, y, r, 0), 2_000)}, TEST_CAP))
    seeds = itertools.count()  # a new stream each run: an interval is computed once a process
    out.append((f"bootstrap interval, {QUERIES} queries x {SEEDS} seeds", {
        "type counts": (lambda r: mean_interval(ap_a, resamples=r, seed=next(seeds)),
                        INTERVAL_CAP),
        "dense float": (lambda r: dense_mean_interval(ap_a, r, 0), 100_000)}, INTERVAL_CAP))
    return [(name, {k: (fn, max(100, int(r * scale))) for k, (fn, r) in methods.items()}, cap)
            for name, methods, cap in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a hundredth of the resamples")
    args = parser.parse_args()
    begin(1)
    monitor = LoadMonitor(1).start()
    at_cap = {}
    for name, methods, cap in cases(0.01 if args.quick else 1.0):
        new = next(iter(methods))  # the slow references run once: long enough to be steady
        rates = {method: best_rate(fn, resamples, args.repeats if method == new else 1)
                 for method, (fn, resamples) in methods.items()}
        at_cap[name] = cap / rates[new]
        print(f"{name}:")
        for method, rate in rates.items():
            extra = (f", {cap:,} resamples in {cap / rate:.2f} s" if method == new else
                     f"; {rates[new] / rate:,.0f}x slower than {new}")
            print(f"  {method:<12} {rate:>14,.0f} resamples/s ({methods[method][1]:,} timed"
                  f"{extra})", flush=True)
    print(monitor.stop().describe())
    f1 = at_cap[f"paired F1 test, {PAIRS:,} pairs, {SEEDS} seed(s)"]
    verdict = "OK" if f1 < TARGET_S else "SLOW"
    print(f"{verdict}: the paired F1 test, {TEST_CAP:,} resamples on {PAIRS:,} pairs x {SEEDS} "
          f"seeds, {f1:.2f} s (target under {TARGET_S:g} s)")
    if verdict == "SLOW":
        raise SystemExit(1)


if __name__ == "__main__":
    main()
