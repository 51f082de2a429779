"""The evidence behind a reproduced number: per-unit values from a run's saved predictions,
their bootstrap interval, and paired tests between two rows on the same test units.

A *unit* is what a metric averages over: a query for ranking metrics (AP, RR, P@1 per query by
:func:`pairrepro.metrics.per_query_metrics`, with the run's recorded ``no_positive`` rule), a
pair for classification (correct or not for accuracy; the predicted and gold class for F1,
which is not a mean and is recomputed from counts). Several seeds give a ``[seeds, units]``
matrix on the same units. Predictions come through
:func:`pairrepro.train.run_folder.read_predictions` (the report opens no parquet file), and
the per-unit values must give back each run's ``result.json`` value (to 1e-6): when they do
not, no interval is claimed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pairrepro.metrics import per_query_metrics
from pairrepro.stats import (
    Interval,
    PairedTest,
    f1_interval,
    mean_interval,
    paired_f1_test,
    paired_randomization_test,
)
from pairrepro.train.run_folder import DamagedRunError, RunInfo, read_predictions

RANKING_METRICS = ("map", "mrr", "p_at_1")
CLASSIFICATION_METRICS = ("accuracy", "f1")
# the seed of every resampling: the same runs always give the same interval and p-value
BOOTSTRAP_SEED = 0


def unit_name(metric: str) -> str:
    """What ``metric`` (``<split>.<metric>``) averages over, in words: ``"<split> queries"`` for
    a ranking metric, ``"<split> pairs"`` for a classification one."""
    split, name = metric.split(".", 1)
    return f"{split} {'pairs' if name in CLASSIFICATION_METRICS else 'queries'}"


@dataclass(frozen=True)
class Units:
    """One metric of one or more seeds of a run, unit by unit (units in ``ids`` order)."""

    metric: str  # "<split>.<metric>"
    kind: str  # "mean" (values are per-unit scores) or "f1" (values are predicted 0/1)
    ids: tuple[str, ...]
    values: np.ndarray  # [seeds, units]
    labels: np.ndarray | None  # f1: gold 0/1 per unit
    seeds: tuple[int, ...]


def _seed_units(run: RunInfo, metric: str) -> tuple[str, list[str], np.ndarray,
                                                   np.ndarray | None]:
    """(kind, ids, values, labels) of one run; a ``ValueError`` says why not."""
    split, name = metric.split(".", 1)
    try:
        frame = read_predictions(run.folder, split)
    except DamagedRunError as exc:
        raise ValueError(exc.message) from None
    if frame is None:
        raise ValueError(f"{run.path} has no predictions/{split}.parquet")
    if name in RANKING_METRICS and "score" in frame.columns:
        no_positive = str(run.manifest.get("no_positive") or "skip")
        per_query = per_query_metrics(frame["group_id"].astype(str).tolist(),
                                      frame["label"].to_numpy(), frame["score"].to_numpy(),
                                      frame["pair_id"].astype(str).tolist(), no_positive)
        per_query = per_query.sort_values("query")
        return "mean", per_query["query"].astype(str).tolist(), \
            per_query[name].to_numpy(np.float64), None
    if name in CLASSIFICATION_METRICS and "prediction" in frame.columns:
        frame = frame.sort_values("pair_id")
        ids = frame["pair_id"].astype(str).tolist()
        gold, pred = frame["label"].to_numpy(), frame["prediction"].to_numpy()
        if name == "accuracy":
            return "mean", ids, (gold == pred).astype(np.float64), None
        return "f1", ids, (pred == 1).astype(np.float64), (gold == 1).astype(np.float64)
    raise ValueError(f"no per-unit values for {name} (intervals cover "
                     f"{', '.join(RANKING_METRICS + CLASSIFICATION_METRICS)})")


def _point(kind: str, values: np.ndarray, labels: np.ndarray | None) -> float:
    if kind == "mean":
        return float(values.mean())
    pred, gold = values.astype(bool), np.asarray(labels).astype(bool)
    tp, fp, fn = (pred & gold).sum(), (pred & ~gold).sum(), (~pred & gold).sum()
    return float(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else 0.0


def run_units(runs: list[RunInfo], metric: str) -> Units:
    """The per-unit values of ``metric`` over the finished ``runs`` (one row per seed).

    Raises ``ValueError`` (with the reason a note can print) when a run has no readable
    predictions, the seeds were scored on different units, or the per-unit values do not
    give back a run's recorded value."""
    rows, ids, labels, kind = [], None, None, ""
    for run in runs:
        kind, seed_ids, values, seed_labels = _seed_units(run, metric)
        recorded = run.value(metric)
        point = _point(kind, values, seed_labels)
        if recorded is None or abs(point - recorded) > 1e-6:
            raise ValueError(f"{run.path}: predictions give {metric} {point:.6f}, result.json "
                             f"{recorded}")
        if ids is not None and seed_ids != ids:
            raise ValueError(f"{run.path}: scored on other {metric.split('.')[0]} units than "
                             "the other seeds")
        ids, labels = seed_ids, seed_labels
        rows.append(values)
    if not rows or ids is None:
        raise ValueError("no finished run")
    return Units(metric=metric, kind=kind, ids=tuple(ids), values=np.vstack(rows),
                 labels=labels, seeds=tuple(r.seed for r in runs))


def interval(units: Units) -> Interval:
    """The 95% two-level bootstrap interval of the metric (units and seeds resampled)."""
    if units.kind == "f1":
        return f1_interval(np.asarray(units.labels), units.values, seed=BOOTSTRAP_SEED)
    return mean_interval(units.values, seed=BOOTSTRAP_SEED)


# how the paired test treats F1 over seeds, in the words every report footer uses
F1_PAIRING = ("F1: the mean of per-seed differences, seed k against seed k, a single seed "
              "against each")


def _paired_seeds(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Seed k of ``a`` against seed k of ``b`` (as many as both have); a single seed (a
    deterministic scorer such as BM25) stands against every seed of the other."""
    if len(a) == 1 or len(b) == 1:
        count = max(len(a), len(b))
        return np.repeat(a, count // len(a), axis=0), np.repeat(b, count // len(b), axis=0)
    paired = min(len(a), len(b))
    return a[:paired], b[:paired]


def paired_test(a: Units, b: Units) -> PairedTest:
    """Paired randomization test of ``a`` against ``b`` on the same units (two-sided).

    Mean metrics average each unit over the seeds first; F1 pairs seed k of one with seed k
    of the other (as many as both have; a single seed against every seed of the other) and
    tests the mean of the per-seed F1 differences (an F1 has no per-unit value to average).
    ``ValueError`` when the units differ."""
    if a.kind != b.kind or set(a.ids) != set(b.ids):
        raise ValueError(f"scored on different {a.metric.split('.')[0]} units")
    position = {unit: k for k, unit in enumerate(b.ids)}
    order = np.array([position[i] for i in a.ids]) if a.ids != b.ids else None
    b_values = b.values if order is None else b.values[:, order]
    if a.kind == "f1":
        b_labels = np.asarray(b.labels)
        if order is not None:
            b_labels = b_labels[order]
        if not np.array_equal(np.asarray(a.labels), b_labels):
            raise ValueError("different gold labels on the same pairs")
        a_values, b_values = _paired_seeds(a.values, b_values)
        return paired_f1_test(np.asarray(a.labels), a_values, b_values, seed=BOOTSTRAP_SEED)
    return paired_randomization_test(a.values, b_values, seed=BOOTSTRAP_SEED)
