"""The evidence behind a reproduced number: per-unit values from a run's saved predictions,
their bootstrap intervals, and paired tests on the same test units (docs/results.md)."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

import numpy as np
import pandas as pd

from pairrepro import stats
from pairrepro.errors import DataError, NoEvidenceError
from pairrepro.metrics import binary_f1, classification_metrics, per_query_metrics, ranking_metrics
from pairrepro.runs import DamagedRunError, RunInfo, all_runs, prediction_keys, read_predictions

RANKING_METRICS = ("map", "mrr", "p_at_1")
CLASSIFICATION_METRICS = ("accuracy", "f1")
BOOTSTRAP_SEED = 0  # the root of every resampling stream (:func:`stream`)
# how far a recorded metric may lie from its predictions' (float32 and summation order)
RECORD_TOLERANCE = 1e-6


class TamperedRunError(DamagedRunError):
    """A run's ``result.json`` disagrees with its saved predictions: neither is trusted."""


def rescore(run: RunInfo) -> dict[str, dict[str, float]]:
    """The metrics of every split with saved predictions, recomputed (else DamagedRunError)."""
    out: dict[str, dict[str, float]] = {}
    for split, recorded in sorted(run.metrics.items()):
        frame = read_predictions(run.folder, split)
        if frame is None:
            continue
        try:
            if "map" in recorded and "score" in frame.columns:
                out[split] = ranking_metrics(*_ranking_inputs(run, frame))
            elif "accuracy" in recorded and "prediction" in frame.columns:
                gold, pred = frame["label"].to_numpy(), frame["prediction"].to_numpy()
                # a binary run records the F1 of class 1; macro F1 counts every class
                classes = 2 if "f1" in recorded else int(max(gold.max(), pred.max())) + 1
                out[split] = classification_metrics(gold, pred, classes)
        except (DataError, KeyError, ValueError) as exc:
            raise DamagedRunError(f"{run.folder.predictions(split)}: cannot be scored ({exc})",
                                  hint=_TAMPER_HINT) from None
    return out


_TAMPER_HINT = ("restore the run's files as committed (git checkout -- FOLDER), or retrain "
                "it and add it again (pairrepro results add runs/RECIPE/seed-N --force)")
# a damaged or edited run under results/
RESTORE_RESULTS_HINT = ("restore them as committed (git checkout -- results/), or retrain and add "
                        "them again (pairrepro results add RUN --force)")


def refuse_damaged(recipe: str, problems: list[str]) -> None:
    """A DamagedRunError naming each run of ``recipe`` that cannot be read or trusted."""
    if problems:
        raise DamagedRunError(f"{len(problems)} run(s) of {recipe} cannot be read: "
                              + "; ".join(problems), hint=RESTORE_RESULTS_HINT)


_CHECKED: set[tuple[str, tuple[tuple[str, int, int], ...]]] = set()


def _signature(run: RunInfo) -> tuple[str, tuple[tuple[str, int, int], ...]]:
    """The run's files as (name, size, mtime): a file rewritten since is checked again."""
    files = [run.folder.result_path,
             *(run.folder.predictions(key) for key in prediction_keys(run.folder))]
    found = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file()]
    return str(run.folder.path.resolve()), tuple(found)


def check_recorded(run: RunInfo) -> None:
    """Raise :class:`TamperedRunError` when ``result.json`` differs from the predictions
    (runs checked before and unchanged since are not scored again)."""
    key = _signature(run)
    if key in _CHECKED:
        return
    problems = []
    for split, values in rescore(run).items():
        for name, recorded in sorted(run.metrics.get(split, {}).items()):
            given = values.get(name)
            if given is None:
                continue
            if not isinstance(recorded, int | float) or not math.isclose(
                    float(recorded), given, rel_tol=0, abs_tol=RECORD_TOLERANCE):
                problems.append(f"{split}.{name} {recorded!r} where "
                                f"predictions/{split}.parquet give {given:.6f}")
    if problems:
        raise TamperedRunError(f"{run.folder.result_path} disagrees with its saved "
                               f"predictions: {'; '.join(problems)}", hint=_TAMPER_HINT)
    _CHECKED.add(key)


def tampered_runs(results_dir: Path) -> list[str]:
    """Why each finished run under ``results_dir`` cannot be trusted (empty: all check)."""
    problems = []
    for run in all_runs(results_dir):
        if run.status == "damaged":
            problems.append(run.problem or f"{run.path}: damaged")
        elif run.status == "finished":
            try:
                check_recorded(run)
            except DamagedRunError as exc:
                problems.append(exc.message)
    return problems


def unit_name(metric: str) -> str:
    """What ``metric`` averages over: ``"<split> queries"`` or ``"<split> pairs"``."""
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
    recipe: str = ""


def stream(*identity: object) -> int:
    """The resampling seed of one interval or test: a stable hash of what is resampled."""
    text = repr((BOOTSTRAP_SEED, *identity)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def _no_positive(run: RunInfo) -> str:
    return str(run.manifest.get("no_positive") or "skip")


def _ranking_inputs(run: RunInfo, frame: pd.DataFrame) -> tuple[Any, ...]:
    return (frame["group_id"].astype(str).tolist(), frame["label"].to_numpy(),
            frame["score"].to_numpy(), frame["pair_id"].astype(str).tolist(), _no_positive(run))


def _seed_units(run: RunInfo, metric: str) -> tuple[str, list[str], np.ndarray,
                                                   np.ndarray | None]:
    """(kind, ids, values, labels) of one run; a :class:`NoEvidenceError` says why not."""
    split, name = metric.split(".", 1)
    frame = read_predictions(run.folder, split)
    if frame is None:
        raise NoEvidenceError(f"{run.path} has no predictions/{split}.parquet")
    if name in RANKING_METRICS and "score" in frame.columns:
        per_query = per_query_metrics(*_ranking_inputs(run, frame)).sort_values("query")
        return "mean", per_query["query"].astype(str).tolist(), \
            per_query[name].to_numpy(np.float64), None
    if name in CLASSIFICATION_METRICS and "prediction" in frame.columns:
        frame = frame.sort_values("pair_id")
        ids = frame["pair_id"].astype(str).tolist()
        gold, pred = frame["label"].to_numpy(), frame["prediction"].to_numpy()
        if name == "accuracy":
            return "mean", ids, (gold == pred).astype(np.float64), None
        return "f1", ids, (pred == 1).astype(np.float64), (gold == 1).astype(np.float64)
    raise NoEvidenceError(f"no per-unit values for {name} (intervals cover "
                     f"{', '.join(RANKING_METRICS + CLASSIFICATION_METRICS)})")


def run_units(runs: list[RunInfo], metric: str) -> Units:
    """The per-unit values of ``metric`` over the finished ``runs``, a row per seed (else
    :class:`NoEvidenceError`; :class:`TamperedRunError` allows no fallback)."""
    rows, ids, labels, kind = [], None, None, ""
    for run in runs:
        check_recorded(run)
        kind, seed_ids, values, seed_labels = _seed_units(run, metric)
        recorded = run.value(metric)
        point = (float(values.mean()) if kind == "mean"
                 else binary_f1(np.asarray(seed_labels), values))
        if recorded is None or abs(point - recorded) > RECORD_TOLERANCE:
            raise TamperedRunError(f"{run.folder.result_path}: {metric} {recorded!r} "
                                   f"where its predictions give {point:.6f}",
                                   hint=_TAMPER_HINT)
        if ids is not None and seed_ids != ids:
            raise NoEvidenceError(f"{run.path}: scored on other {metric.split('.')[0]} units "
                                  "than the other seeds")
        ids, labels = seed_ids, seed_labels
        rows.append(values)
    if not rows or ids is None:
        raise NoEvidenceError("no finished run")
    return Units(metric=metric, kind=kind, ids=tuple(ids), values=np.vstack(rows),
                 labels=labels, seeds=tuple(r.seed for r in runs), recipe=runs[0].recipe)


def interval(units: Units, targets: tuple[float, ...] = (), step: float = 0.0) -> stats.Interval:
    """The 95% two-level bootstrap interval, resampled until whether each of ``targets`` (in
    the metric's scale) lies inside, and the digits printed in units of ``step``, are settled."""
    seed = stream("interval", units.recipe, units.metric, units.seeds)
    if units.kind == "f1":
        return stats.f1_interval(np.asarray(units.labels), units.values, seed=seed,
                                 targets=targets, step=step)
    return stats.mean_interval(units.values, seed=seed, targets=targets, step=step)


def _tie_counts(run: RunInfo, split: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(query ids, tied candidates, candidates) of every evaluated query (``tie_share``)."""
    frame = read_predictions(run.folder, split)
    if frame is None or "score" not in frame.columns:
        raise NoEvidenceError(f"{run.path} has no ranking predictions/{split}.parquet")
    frame = frame.assign(group_id=frame["group_id"].astype(str))
    size = frame.groupby(["group_id", "score"])["score"].transform("size")
    per_query = frame.assign(tied=(size > 1).astype(np.float64), one=1.0,
                             rel=(frame["label"] > 0).astype(np.float64)
                             ).groupby("group_id")[["tied", "one", "rel"]].sum().sort_index()
    if _no_positive(run) == "skip":
        per_query = per_query[per_query["rel"] > 0]
    return (per_query.index.tolist(), per_query["tied"].to_numpy(),
            per_query["one"].to_numpy())


def metric_interval(runs: list[RunInfo], metric: str, targets: tuple[float, ...] = (),
                    step: float = 0.0) -> stats.Interval:
    """The 95% interval of any metric the predictions give per unit (its digits in units of
    ``step`` converged), else NoEvidenceError."""
    split, name = metric.split(".", 1)
    seed = stream("interval", runs[0].recipe if runs else "", metric,
                  tuple(r.seed for r in runs))
    if name == "macro_f1":
        units = run_units(runs, f"{split}.f1")
        return stats.macro_f1_interval(np.asarray(units.labels), units.values, seed=seed,
                                       targets=targets, step=step)
    if name == "tie_share":
        for run in runs:
            check_recorded(run)
        found = [_tie_counts(run, split) for run in runs]
        if any(ids != found[0][0] for ids, _, _ in found):
            raise NoEvidenceError(f"the seeds were scored on other {split} queries")
        return stats.ratio_interval(np.vstack([t for _, t, _ in found]),
                                    np.vstack([c for _, _, c in found]), seed=seed,
                                    targets=targets, step=step)
    return interval(run_units(runs, metric), targets, step)


# how the paired tests treat seeds, in the words every report footer uses
F1_PAIRING = ("seed k against seed k, a single seed against each; F1: the mean of per-seed "
              "differences")


def _paired_seeds(*values: np.ndarray) -> list[np.ndarray]:
    """Seed k of each against seed k of the others; a single seed (BM25) stands against each."""
    count = min((len(v) for v in values if len(v) > 1), default=1)
    return [np.repeat(v, count, axis=0) if len(v) == 1 else v[:count] for v in values]


def _aligned(a: Units, b: Units) -> tuple[np.ndarray, np.ndarray | None]:
    """``b``'s values and labels in ``a``'s unit order (else :class:`NoEvidenceError`)."""
    if a.kind != b.kind or set(a.ids) != set(b.ids):
        raise NoEvidenceError(f"scored on different {a.metric.split('.')[0]} units")
    if a.ids == b.ids:
        return b.values, b.labels
    position = {unit: k for k, unit in enumerate(b.ids)}
    order = np.array([position[i] for i in a.ids])
    return b.values[:, order], None if b.labels is None else np.asarray(b.labels)[order]


def combination_interval(terms: list[tuple[float, Units]], constant: float = 0.0,
                         **draw: Unpack[stats.Draw]) -> stats.Interval:
    """The two-level interval of ``constant`` + the sum of weight × units over ``terms`` (a
    mean metric on the same units; seeds as :data:`F1_PAIRING`), units and seeds resampled
    jointly for every term; its ``p_value`` tests 0 at ``test`` (default :data:`stats.ALPHA`),
    seeds and units random."""
    draw.setdefault("test", stats.ALPHA)
    first = terms[0][1]
    values = _paired_seeds(*(_aligned(first, units)[0] for _, units in terms))
    if first.kind != "mean":
        raise NoEvidenceError(f"{first.metric}: a combination of F1 values has no interval")
    seed = stream("combination", constant, draw.get("confidence", stats.CONFIDENCE),
                  *((w, u.recipe, u.metric, u.seeds) for w, u in terms))
    total = constant + sum(w * v for (w, _), v in zip(terms, values, strict=True))
    return stats.mean_interval(total, seed=seed, **draw)


def difference_interval(a: Units, b: Units, scale: float = 1.0, **draw: Unpack[stats.Draw]
                        ) -> stats.Interval:
    """The two-level interval of ``scale`` × (``a`` − ``b``) on the same units, the test of the
    recipes (its ``p_value``, decided at ``test``, default :data:`stats.ALPHA`)."""
    draw.setdefault("test", stats.ALPHA)
    if a.kind == "mean":
        return combination_interval([(scale, a), (-scale, b)], **draw)
    b_values, b_labels = _aligned(a, b)
    if not np.array_equal(np.asarray(a.labels), np.asarray(b_labels)):
        raise NoEvidenceError("different gold labels on the same pairs")
    labels = np.asarray(a.labels)
    a_values, b_values = _paired_seeds(a.values, b_values)
    return stats.f1_combination_interval(
        (labels, a_values), (labels, b_values), (scale, -scale),
        seed=stream("difference", a.recipe, b.recipe, a.metric, a.seeds, b.seeds), **draw)
