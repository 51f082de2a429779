"""Lucene BM25 retrieval, negative sampling and the bm25 model, against a brute-force
hand-written Lucene BM25 (the formula as documented by Lucene's BM25Similarity)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pairrepro.data.negatives import (
    BM25Params,
    analyze,
    bm25_top_k,
    sample_negatives,
)
from pairrepro.errors import ConfigError
from pairrepro.models.base import ModelContext, build_model

CORPUS = [
    "the cat sat on the mat",
    "a dog barked at the cat",
    "cats and dogs are pets",
    "nothing here at all",
    "the the the cat",
    "my dog's bone, and the dog's ball",
]


def brute_force_lucene(query: list[str], docs: list[list[str]], k1=1.2, b=0.75) -> list[float]:
    """Lucene BM25 written out term by term, independently of the project code."""
    n = len(docs)
    avg = sum(len(d) for d in docs) / n
    scores = []
    for doc in docs:
        total = 0.0
        for term in query:  # repeated query terms count again, as in a Lucene BooleanQuery
            df = sum(term in d for d in docs)
            tf = doc.count(term)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            total += idf * tf / (tf + k1 * (1 - b + b * len(doc) / avg))
        scores.append(total)
    return scores


def test_analyzer_keeps_words_drops_punctuation() -> None:
    assert analyze("My dog's bone, and THE ball?") == ["my", "dog's", "bone", "and", "the", "ball"]


@pytest.mark.parametrize("k1,b", [(1.2, 0.75), (0.9, 0.4)])
def test_retrieval_scores_equal_hand_computed_lucene(k1: float, b: float) -> None:
    docs = [analyze(t) for t in CORPUS]
    queries = [analyze(q) for q in ("the cat", "dog dog cat", "zebra", "dog's ball at")]
    idx, scores = bm25_top_k(queries, docs, BM25Params(k1=k1, b=b, top_k=4))
    assert idx.shape == (4, 4)
    for qi, query in enumerate(queries):
        truth = brute_force_lucene(query, docs, k1, b)
        ranked = sorted((s for s in truth if s > 0), reverse=True)[:4]
        got = [s for i, s in zip(idx[qi], scores[qi], strict=True) if i >= 0]
        np.testing.assert_allclose(got, ranked, rtol=1e-5)
        for i, s in zip(idx[qi], scores[qi], strict=True):
            if i >= 0:
                assert truth[i] == pytest.approx(float(s), rel=1e-5)
    assert (idx[2] == -1).all()  # no shared term: no result, as in Lucene


def test_sample_negatives_rules() -> None:
    rng = np.random.default_rng(0)
    candidates = np.stack([rng.permutation(50)[:20] for _ in range(200)])
    positives = np.array([row[rng.integers(0, 20)] for row in candidates])  # positive in list
    candidates[:5, 5:] = -1  # a few short lists: at most 5 usable results
    neg = sample_negatives(candidates, positives, 9, seed=3)
    assert neg.shape == (200, 9)
    for row, pos, cands in zip(neg, positives, candidates, strict=True):
        valid = row[row >= 0]
        assert pos not in valid
        assert len(set(valid)) == len(valid)
        assert set(valid) <= set(cands[cands >= 0])
    assert (neg[5:] >= 0).all()
    for row, pos, cands in zip(neg[:5], positives[:5], candidates[:5], strict=True):
        usable = int(((cands >= 0) & (cands != pos)).sum())
        assert (row[:usable] >= 0).all() and (row[usable:] == -1).all()  # usable ones first
    np.testing.assert_array_equal(neg, sample_negatives(candidates, positives, 9, seed=3))
    assert not np.array_equal(neg, sample_negatives(candidates, positives, 9, seed=4))
    # Uniform over the list: each of the 19 non-positive candidates is drawn ~4/19 of the time.
    draws = sample_negatives(np.tile(np.arange(20), (20000, 1)), np.zeros(20000, int), 4, 1)
    freq = np.bincount(draws.ravel(), minlength=20)[1:] / 20000
    assert freq == pytest.approx(np.full(19, 4 / 19), abs=0.015)


def test_sample_negatives_excludes_identical_text() -> None:
    candidates = np.array([[0, 1, 2, 3, 4]])
    keys = np.array([7, 7, 8, 7, 9])  # 1 and 3 repeat the positive's text
    for seed in range(20):
        neg = sample_negatives(candidates, np.array([0]), 2, seed, exclude_same_text=keys)
        assert set(neg[0]) == {2, 4}
    with pytest.raises(ConfigError):
        sample_negatives(candidates, np.array([0]), 0, 1)


def _ids(texts: list[str], vocab: dict[str, int]) -> list[list[int]]:
    return [[vocab.setdefault(w, len(vocab)) for w in analyze(t)] for t in texts]


def test_bm25_model_equals_lucene_scores() -> None:
    vocab = {"<pad>": 0, "<unk>": 1}
    docs = _ids(CORPUS, vocab)
    queries = _ids(["the cat", "dog dog cat", "dog's ball at", "pets and cats"], vocab)
    ctx = ModelContext(vocab_size=len(vocab), embed_dim=4, num_outputs=1)
    model = build_model("bm25", ctx, {})
    assert model.needs_training is False
    # Training candidates repeat documents (a document is in several lists): dedup'd for df.
    model.fit_statistics(queries * 3, docs * 3)
    # Every (query, doc) pair, padded into one batch.
    pairs = [(q, d) for q in queries for d in docs]
    n = max(len(q) for q, _ in pairs) + 2
    m = max(len(d) for _, d in pairs) + 3
    left = torch.zeros(len(pairs), n, dtype=torch.long)
    right = torch.zeros(len(pairs), m, dtype=torch.long)
    for i, (q, d) in enumerate(pairs):
        left[i, : len(q)] = torch.tensor(q)
        right[i, : len(d)] = torch.tensor(d)
    scores = model(left, left != 0, right, right != 0).squeeze(1).numpy()
    inv = {i: w for w, i in vocab.items()}
    words = [[inv[i] for i in d] for d in docs]
    truth = [s for q in queries for s in brute_force_lucene([inv[i] for i in q], words)]
    np.testing.assert_allclose(scores, truth, rtol=1e-5, atol=1e-6)
    # The same scores as the bm25s index (what builds the negatives).
    idx, top = bm25_top_k([[inv[i] for i in queries[1]]], words, BM25Params(top_k=3))
    np.testing.assert_allclose(top[0], scores[len(docs):2 * len(docs)][idx[0]], rtol=1e-5)


def test_bm25_model_ignores_unknown_and_needs_statistics() -> None:
    ctx = ModelContext(vocab_size=5, embed_dim=4, num_outputs=1)
    model = build_model("bm25", ctx, {})
    left = torch.tensor([[1, 2]])
    right = torch.tensor([[1, 3]])
    with pytest.raises(ConfigError, match="fit_statistics"):
        model(left, left != 0, right, right != 0)
    model.fit_statistics([[2]], [[1, 3], [2, 4]])
    assert float(model(left, left != 0, right, right != 0)) == 0.0  # <unk> does not match <unk>
    with pytest.raises(ConfigError):
        build_model("bm25", ModelContext(vocab_size=5, embed_dim=4, num_outputs=3), {})


def test_best_f1_threshold_equals_a_brute_force_search() -> None:
    """The fitted cut gives the best F1 of class 1 among every possible cut (sklearn's F1)."""
    from sklearn.metrics import f1_score

    from pairrepro.models.bm25 import best_f1_threshold

    rng = np.random.default_rng(3)
    for trial in range(20):
        scores = rng.integers(0, 8, size=60).astype(float)  # many ties
        labels = (rng.random(60) < 0.2 + scores / 12).astype(int)
        t = best_f1_threshold(scores, labels == 1)
        cuts = np.concatenate([[scores.min() - 1], np.unique(scores)])
        best = max(f1_score(labels, scores > c, zero_division=0) for c in cuts)
        assert f1_score(labels, scores > t) == pytest.approx(best), trial
        assert not np.isin(t, scores)  # a cut between scores, never on one


def test_bm25_threshold_classifies_and_leaves_rankings_alone() -> None:
    vocab = {"<pad>": 0, "<unk>": 1}
    docs = _ids(CORPUS, vocab)
    queries = _ids(["the cat", "dog dog cat", "dog's ball at", "pets and cats"], vocab)
    left_ids = [q for q in queries for _ in docs]
    right_ids = [d for _ in queries for d in docs]
    ctx = ModelContext(vocab_size=len(vocab), embed_dim=4, num_outputs=2)
    plain, fitted = build_model("bm25", ctx, {}), build_model("bm25", ctx, {})
    plain.fit_statistics(left_ids, right_ids)
    scores = plain.score_ids(left_ids, right_ids)
    labels = (scores > np.median(scores)).astype(int)
    fitted.fit_statistics(left_ids, right_ids, labels)
    t = float(fitted.threshold)
    left = torch.nn.utils.rnn.pad_sequence([torch.tensor(x) for x in left_ids], batch_first=True)
    right = torch.nn.utils.rnn.pad_sequence([torch.tensor(x) for x in right_ids],
                                            batch_first=True)
    out = fitted(left, left != 0, right, right != 0)
    # labels that a cut separates perfectly: the fitted rule reproduces them exactly
    assert (out.argmax(1).numpy() == labels).all()
    # the same scores, shifted by the threshold: every ranking is unchanged
    shifted = (out[:, 1] - out[:, 0]).double().numpy()
    np.testing.assert_allclose(shifted + t, scores, rtol=1e-5, atol=1e-5)
