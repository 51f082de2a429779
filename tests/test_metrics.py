"""Metrics against independent truths: pytrec_eval (trec_eval's C code) on the real TrecQA
qrels structure, scikit-learn for F1/accuracy, and hand-computed small cases."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score

from pairrepro.errors import DataError
from pairrepro.metrics import classification_metrics, ranking_metrics

pytrec_eval = pytest.importorskip("pytrec_eval")


def _trecqa(shared_datasets: Path, name: str) -> tuple[list[str], np.ndarray]:
    folder = shared_datasets / "trecqa" / "nce-cnn-torch" / "TrecQA" / name
    ids = (folder / "id.txt").read_text().split()
    sims = np.array((folder / "sim.txt").read_text().split(), dtype=int)
    return ids, sims


def _pytrec(ids, labels, scores, docnos, drop_no_positive: bool) -> dict[str, float]:
    qrel: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q, d, label, score in zip(ids, docnos, labels, scores, strict=True):
        qrel.setdefault(q, {})[d] = int(label)
        run.setdefault(q, {})[d] = float(score)
    if drop_no_positive:
        qrel = {q: r for q, r in qrel.items() if any(v > 0 for v in r.values())}
    res = pytrec_eval.RelevanceEvaluator(qrel, {"map", "recip_rank", "P_1"}).evaluate(run)
    return {
        "map": float(np.mean([r["map"] for r in res.values()])),
        "mrr": float(np.mean([r["recip_rank"] for r in res.values()])),
        "p_at_1": float(np.mean([r["P_1"] for r in res.values()])),
        "num_queries": float(len(res)),
    }


@pytest.mark.parametrize("split", ["raw-test", "clean-test", "raw-dev"])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_trec_eval_on_trecqa(shared_datasets: Path, split: str, seed: int) -> None:
    ids, labels = _trecqa(shared_datasets, split)
    rng = np.random.default_rng(seed)
    # Coarse scores: most candidates tie with another, so the tie rule is exercised.
    scores = rng.integers(0, 4, len(ids)) / 3.0
    # Docnos whose string order differs from input order, to check docno-descending ties.
    docnos = [f"a{rng.integers(0, 10**6):06d}-{i}" for i in range(len(ids))]
    mode_and_drop = [("zero", False), ("skip", True)]
    for mode, drop in mode_and_drop:
        ours = ranking_metrics(ids, labels, scores, pair_ids=docnos, no_positive=mode)
        ref = _pytrec(ids, labels, scores, docnos, drop)
        assert ours["tie_share"] > 0.5
        for key, value in ref.items():
            assert ours[key] == pytest.approx(value, abs=1e-12), (mode, key)
    # Without pair ids the docno is the input position (zero-padded so strcmp = numeric order).
    ours = ranking_metrics(ids, labels, scores, no_positive="zero")
    ref = _pytrec(ids, labels, scores, [f"{i:08d}" for i in range(len(ids))], False)
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, abs=1e-12), key


def test_raw_test_counts_skipped_queries(shared_datasets: Path) -> None:
    ids, labels = _trecqa(shared_datasets, "raw-test")
    scores = np.random.default_rng(3).random(len(ids))
    skip = ranking_metrics(ids, labels, scores, no_positive="skip")
    zero = ranking_metrics(ids, labels, scores, no_positive="zero")
    # 95 questions in these files, 6 of them without a correct answer (counted by hand from sim).
    n_without = sum(
        1 for q in set(ids) if not any(lab for i, lab in zip(ids, labels, strict=True) if i == q)
    )
    assert skip["skipped_queries"] == n_without > 0
    assert skip["num_queries"] + n_without == zero["num_queries"] == len(set(ids))
    with pytest.raises(DataError, match="no relevant candidate"):
        ranking_metrics(ids, labels, scores, no_positive="error")


def test_hand_computed_map_mrr_p1() -> None:
    # q1: ranking by score is c(0) b(1) a(1) -> first relevant at rank 2; AP = (1/2 + 2/3)/2.
    # q2: ranking is e(1) d(0) -> RR 1, P@1 1, AP 1.
    groups = ["q1", "q1", "q1", "q2", "q2"]
    labels = np.array([1, 1, 0, 0, 1])
    scores = np.array([0.1, 0.5, 0.9, 0.2, 0.3])
    out = ranking_metrics(groups, labels, scores)
    assert out["map"] == pytest.approx(((0.5 + 2 / 3) / 2 + 1.0) / 2)
    assert out["mrr"] == pytest.approx((0.5 + 1.0) / 2)
    assert out["p_at_1"] == pytest.approx(0.5)
    assert out["tie_share"] == 0.0 and out["num_queries"] == 2.0
    assert "r10_at_1" not in out


def test_ties_use_docno_descending() -> None:
    # All scores equal: trec_eval ranks docno "b" before "a".
    groups = ["q", "q"]
    labels = np.array([1, 0])
    scores = np.zeros(2)
    assert ranking_metrics(groups, labels, scores, pair_ids=["a", "b"])["mrr"] == 0.5
    assert ranking_metrics(groups, labels, scores, pair_ids=["b", "a"])["mrr"] == 1.0
    # Without ids: later input position first, so a constant model is not rewarded for
    # lists stored positive-first.
    out = ranking_metrics(groups, labels, scores)
    assert out["mrr"] == 0.5 and out["tie_share"] == 1.0


def test_ubuntu_recall_hand_computed() -> None:
    # Three contexts of 10 candidates, positive stored first (Ubuntu layout).
    groups = [g for g in ("c1", "c2", "c3") for _ in range(10)]
    labels = np.tile([1] + [0] * 9, 3)
    s1 = np.array([0.9] + [0.1 * i for i in range(9)])  # positive ranked 1st
    s2 = np.array([0.5, 0.6, 0.7, 0.0, 0.0, 0.1, 0.2, 0.3, 0.4, 0.45])  # 3rd of 10
    s3 = np.array([0.5, 0.1, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])  # 2nd; beats 1st neg
    out = ranking_metrics(groups, labels, np.concatenate([s1, s2, s3]))
    # ranks of the positive: 1, 3 (0.7, 0.6 above it), 2
    assert out["r10_at_1"] == pytest.approx(1 / 3)
    assert out["r10_at_2"] == pytest.approx(2 / 3)
    assert out["r10_at_5"] == pytest.approx(1.0)
    # R2@1 vs the first negative: c1 wins (0.9 > 0.0), c2 loses (0.5 < 0.6), c3 wins (0.5 > 0.1)
    assert out["r2_at_1"] == pytest.approx(2 / 3)
    assert out["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 2) / 3)


def test_classification_against_sklearn() -> None:
    rng = np.random.default_rng(0)
    for num_classes in (2, 3):
        labels = rng.integers(0, num_classes, 500)
        preds = np.where(rng.random(500) < 0.6, labels, rng.integers(0, num_classes, 500))
        out = classification_metrics(labels, preds, num_classes)
        assert out["accuracy"] == pytest.approx(accuracy_score(labels, preds))
        assert out["macro_f1"] == pytest.approx(
            f1_score(labels, preds, average="macro", labels=list(range(num_classes)))
        )
        if num_classes == 2:
            assert out["f1"] == pytest.approx(f1_score(labels, preds))
        else:
            assert "f1" not in out
    # A class never present nor predicted counts as F1 = 0 in the macro average.
    out = classification_metrics(np.array([0, 1]), np.array([0, 1]), 3)
    assert out["macro_f1"] == pytest.approx(2 / 3)


def test_bad_inputs_are_clear_errors() -> None:
    with pytest.raises(DataError, match="differ in length"):
        ranking_metrics(["q"], np.array([1, 0]), np.array([0.1, 0.2]))
    with pytest.raises(DataError, match="non-finite"):
        ranking_metrics(["q", "q"], np.array([1, 0]), np.array([np.nan, 0.2]))
    with pytest.raises(DataError, match="outside"):
        classification_metrics(np.array([0, 3]), np.array([0, 1]), 3)
    with pytest.raises(DataError, match="no_positive"):
        ranking_metrics(["q"], np.array([1]), np.array([0.1]), no_positive="drop")


def test_ubuntu_sized_input_is_fast() -> None:
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(18_920).astype(str), 10)
    labels = np.tile([1] + [0] * 9, 18_920)
    scores = rng.random(len(labels)).astype(np.float32)
    start = time.perf_counter()
    out = ranking_metrics(groups, labels, scores)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0  # typically ~0.1 s; generous for shared CI cores
    # Random scores: R10@1 ~ 0.1, R2@1 ~ 0.5, R10@5 ~ 0.5 (loose statistical bounds).
    assert abs(out["r10_at_1"] - 0.1) < 0.015 and abs(out["r2_at_1"] - 0.5) < 0.02
    assert abs(out["r10_at_5"] - 0.5) < 0.02
