"""Evaluation metrics: classification (accuracy, F1) and ranking with trec_eval's conventions
(ties, ``no_positive``, Ubuntu R10@k / R2@1: docs/internals.md, "Metrics")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score

from pairrepro.errors import DataError

NO_POSITIVE_MODES = ("skip", "zero", "error")
MetricName = Literal["accuracy", "f1", "macro_f1", "map", "mrr", "p_at_1", "r10_at_1", "r10_at_2",
                     "r10_at_5", "r2_at_1", "tie_share"]  # every metric a run records


def _check_lengths(**arrays: object) -> int:
    lengths = {name: len(value) for name, value in arrays.items()}  # type: ignore[arg-type]
    if len(set(lengths.values())) > 1:
        raise DataError(f"metric inputs differ in length: {lengths}")
    return next(iter(lengths.values()))


def f1_from_counts(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """F1 = 2 tp / (2 tp + fp + fn) elementwise, 0 where undefined: the one F1 formula."""
    tp, fp, fn = (np.asarray(c, dtype=np.float64) for c in (tp, fp, fn))
    denom = 2 * tp + fp + fn
    return np.divide(2 * tp, denom, out=np.zeros_like(denom), where=denom > 0)


def class_one_indicators(labels: np.ndarray, predictions: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(TP, FP, FN) indicators of class 1 (truthy values), each shaped like ``predictions``."""
    gold = np.broadcast_to(np.asarray(labels).astype(bool), np.shape(predictions))
    pred = np.asarray(predictions).astype(bool)
    return ((pred & gold).astype(np.float64), (pred & ~gold).astype(np.float64),
            (~pred & gold).astype(np.float64))


def binary_f1(labels: np.ndarray, predictions: np.ndarray) -> float:
    """The F1 of class 1 of 0/1 ``labels`` and ``predictions``."""
    return float(f1_from_counts(*(c.sum() for c in class_one_indicators(labels, predictions))))


def classification_metrics(labels: np.ndarray, predictions: np.ndarray,
                           num_classes: int) -> dict[str, float]:
    """Accuracy, macro F1 over all ``num_classes`` (a class neither present nor predicted
    counts 0, scikit-learn's ``zero_division=0``) and, for two classes, ``f1`` of class 1."""
    labels = np.asarray(labels).astype(np.int64).ravel()
    predictions = np.asarray(predictions).astype(np.int64).ravel()
    if _check_lengths(labels=labels, predictions=predictions) == 0:
        raise DataError("classification_metrics: no examples to score")
    for name, values in (("labels", labels), ("predictions", predictions)):
        if values.min() < 0 or values.max() >= num_classes:
            raise DataError(f"classification_metrics: {name} outside 0..{num_classes - 1} "
                            f"(min {values.min()}, max {values.max()})")
    # confusion[gold, predicted] over the whole class set (absent classes count F1 = 0)
    confusion = np.bincount(labels * num_classes + predictions,
                            minlength=num_classes * num_classes).reshape(num_classes, -1)
    tp = np.diag(confusion)
    f1 = f1_from_counts(tp, confusion.sum(axis=0) - tp, confusion.sum(axis=1) - tp)
    result = {"accuracy": float(accuracy_score(labels, predictions)),
              "macro_f1": float(np.mean(f1))}
    if num_classes == 2:
        result["f1"] = float(f1[1])
    return result


@dataclass
class RankedQueries:
    """Per-query results of one ranking (the arrays are per query, in first-seen order)."""

    names: np.ndarray  # query ids
    ap: np.ndarray
    rr: np.ndarray
    p1: np.ndarray
    evaluated: np.ndarray  # bool: the query counts (has a positive, or no_positive="zero")
    missing: int  # queries without a relevant candidate
    tie_share: float
    extra: dict[str, float]  # Ubuntu R10@k / R2@1 where they apply


def rank_queries(group_ids: Sequence[str], labels: np.ndarray, scores: np.ndarray,
                 pair_ids: Sequence[str] | None = None, no_positive: str = "skip") -> RankedQueries:
    """AP, RR and P@1 per query, candidates ranked by trec_eval's tie rule."""
    if no_positive not in NO_POSITIVE_MODES:
        raise DataError(f"no_positive={no_positive!r} is not one of {NO_POSITIVE_MODES}")
    labels = np.asarray(labels).ravel()
    scores = np.asarray(scores, dtype=np.float64).ravel()
    n = _check_lengths(group_ids=group_ids, labels=labels, scores=scores,
                       **({} if pair_ids is None else {"pair_ids": pair_ids}))
    if n == 0:
        raise DataError("ranking_metrics: no candidates to score")
    if not np.isfinite(scores).all():
        bad = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise DataError(f"ranking_metrics: non-finite score at candidate {bad}: {scores[bad]}")

    group_codes, group_names = pd.factorize(np.asarray(group_ids, dtype=object), sort=False)
    num_groups = len(group_names)
    relevant = labels > 0
    if pair_ids is None:
        docno_rank = np.arange(n)
    else:
        # Rank of each docno in string order; Python's code-point order equals strcmp on UTF-8.
        _, docno_rank = np.unique(np.asarray(pair_ids, dtype=str), return_inverse=True)
    # Sorted order: by group, then score descending, then docno descending (trec_eval).
    order = np.lexsort((-docno_rank, -scores, group_codes))
    sorted_groups = group_codes[order]
    sorted_rel = relevant[order].astype(np.int64)
    sizes = np.bincount(group_codes, minlength=num_groups)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    rank = np.arange(n) - starts[sorted_groups] + 1  # 1-based rank inside the query

    num_rel = np.bincount(group_codes, weights=relevant, minlength=num_groups)
    cum_rel = np.cumsum(sorted_rel)
    cum_rel_in_group = cum_rel - (cum_rel[starts] - sorted_rel[starts])[sorted_groups]
    precision_at_rel = np.where(sorted_rel == 1, cum_rel_in_group / rank, 0.0)
    ap_sum = np.bincount(sorted_groups, weights=precision_at_rel, minlength=num_groups)
    has_pos = num_rel > 0
    ap = np.divide(ap_sum, num_rel, out=np.zeros(num_groups), where=has_pos)
    # First relevant rank per query: minimum over relevant rows (n + 1 where none).
    first_rel = np.full(num_groups, n + 1, dtype=np.int64)
    rel_rows = sorted_rel == 1
    np.minimum.at(first_rel, sorted_groups[rel_rows], rank[rel_rows])
    rr = np.where(has_pos, 1.0 / first_rel, 0.0)
    p1 = (first_rel == 1).astype(np.float64)

    # Ties: a candidate tied with its neighbour in the sorted order of the same query.
    same_group = sorted_groups[1:] == sorted_groups[:-1]
    tie_pair = same_group & (scores[order][1:] == scores[order][:-1])
    tied = np.r_[False, tie_pair] | np.r_[tie_pair, False]

    missing = int((~has_pos).sum())
    if missing and no_positive == "error":
        example = group_names[int(np.flatnonzero(~has_pos)[0])]
        raise DataError(
            f"ranking_metrics: {missing} queries have no relevant candidate (e.g. {example!r})",
            hint="pass no_positive='skip' (clean convention) or 'zero' (raw, trec_eval)")
    evaluated = has_pos if no_positive == "skip" else np.ones(num_groups, dtype=bool)
    if not evaluated.any():
        raise DataError("ranking_metrics: no query has a relevant candidate")
    row_eval = evaluated[sorted_groups]
    extra: dict[str, float] = {}
    if (sizes[evaluated] == 10).all() and (num_rel[evaluated] == 1).all():
        extra = _ubuntu_metrics(group_codes, relevant, order, first_rel, evaluated, n)
    return RankedQueries(names=np.asarray(group_names, dtype=object), ap=ap, rr=rr, p1=p1,
                         evaluated=evaluated, missing=missing,
                         tie_share=float(tied[row_eval].mean()), extra=extra)


def ranking_metrics(group_ids: Sequence[str], labels: np.ndarray, scores: np.ndarray,
                    pair_ids: Sequence[str] | None = None,
                    no_positive: str = "skip") -> dict[str, float]:
    """``map``, ``mrr``, ``p_at_1``, ``tie_share``, ``num_queries``, ``skipped_queries`` and,
    where they apply, ``r10_at_1/2/5``, ``r2_at_1``; ``pair_ids`` are the tie rule's docnos."""
    q = rank_queries(group_ids, labels, scores, pair_ids, no_positive)
    ev = q.evaluated
    return {
        "map": float(q.ap[ev].mean()),
        "mrr": float(q.rr[ev].mean()),
        "p_at_1": float(q.p1[ev].mean()),
        "tie_share": q.tie_share,
        "num_queries": float(ev.sum()),
        "skipped_queries": float(q.missing if no_positive == "skip" else 0),
        **q.extra,
    }


def per_query_metrics(group_ids: Sequence[str], labels: np.ndarray, scores: np.ndarray,
                      pair_ids: Sequence[str] | None = None,
                      no_positive: str = "skip") -> pd.DataFrame:
    """AP, RR and P@1 of every evaluated query: the unit intervals and paired tests resample."""
    q = rank_queries(group_ids, labels, scores, pair_ids, no_positive)
    ev = q.evaluated
    return pd.DataFrame({"query": q.names[ev], "map": q.ap[ev], "mrr": q.rr[ev],
                         "p_at_1": q.p1[ev]})


def _ubuntu_metrics(group_codes: np.ndarray, relevant: np.ndarray, order: np.ndarray,
                    first_rel: np.ndarray, evaluated: np.ndarray, n: int) -> dict[str, float]:
    """R10@1/2/5 and R2@1 for 1-positive-in-10 lists (Lowe et al. 2015)."""
    pos_rank = first_rel[evaluated]
    result = {f"r10_at_{k}": float((pos_rank <= k).mean()) for k in (1, 2, 5)}
    # R2@1: the positive against the first negative in input order, compared by their
    # positions in the tie-broken sorted order (so ties follow the same documented rule).
    sorted_position = np.argsort(order)  # the inverse permutation
    first_neg, pos_row = np.full((2, len(first_rel)), n, dtype=np.int64)
    for first, rows in ((first_neg, np.flatnonzero(~relevant)),
                        (pos_row, np.flatnonzero(relevant))):
        np.minimum.at(first, group_codes[rows], rows)
    wins = sorted_position[pos_row[evaluated]] < sorted_position[first_neg[evaluated]]
    result["r2_at_1"] = float(wins.mean())
    return result
