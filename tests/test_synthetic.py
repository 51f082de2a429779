"""The built-in synthetic data: labels follow the documented rule, and a model that looks
at one side only cannot learn them (so a broken pair model cannot pass the learning tests)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

from pairrepro.data.synthetic import NOUNS, VERBS, generate_nli, generate_ranking


def _rule(premise: str, hypothesis: str) -> int:
    """The label as the module docstring states it, re-derived from the two sentences."""
    _, p_adj, p_noun, p_verb, *_ = premise.split()
    _, h_adj, h_noun, h_verb, *_ = hypothesis.split()
    if h_verb == VERBS[p_verb] or (h_noun in NOUNS and h_noun != p_noun):
        return 2
    if h_noun not in (p_noun, NOUNS[p_noun][1]):
        raise AssertionError(f"unexpected noun in {hypothesis!r}")
    return 0 if h_adj == p_adj else 1


def test_nli_labels_follow_the_rule_and_are_balanced() -> None:
    frame = generate_nli(3000, seed=5)
    assert [_rule(p, h) for p, h in zip(frame.left, frame.right, strict=True)] == list(frame.label)
    shares = np.bincount(frame.label, minlength=3) / len(frame)
    assert np.all(np.abs(shares - 1 / 3) < 0.04)


def test_generation_is_seeded() -> None:
    pd.testing.assert_frame_equal(generate_nli(50, seed=2), generate_nli(50, seed=2))
    assert not generate_nli(50, seed=2).equals(generate_nli(50, seed=3))
    pd.testing.assert_frame_equal(generate_ranking(20, seed=2), generate_ranking(20, seed=2))


def _fit_score(train_x: sp.spmatrix, train_y: np.ndarray, test_x: sp.spmatrix,
               test_y: np.ndarray) -> float:
    model = LogisticRegression(max_iter=3000).fit(train_x, train_y)
    return float((model.predict(test_x) == test_y).mean())


def test_one_sentence_alone_stays_at_chance() -> None:
    train, test = generate_nli(6000, seed=1), generate_nli(2000, seed=1, split="test")
    words = CountVectorizer(token_pattern=r"\S+").fit(list(train.left) + list(train.right))
    for side in ("left", "right"):
        acc = _fit_score(words.transform(train[side]), train.label.values,
                         words.transform(test[side]), test.label.values)
        assert acc < 0.40, f"{side}-only classifier reached {acc:.3f} (chance 0.333)"


def test_ranking_candidate_alone_stays_at_chance() -> None:
    train = generate_ranking(800, negatives=4, seed=1)
    test = generate_ranking(400, negatives=4, seed=1, split="test")
    words = CountVectorizer(token_pattern=r"\S+").fit(train.right)
    model = LogisticRegression(max_iter=3000).fit(words.transform(train.right), train.label)
    scored = test.assign(score=model.decision_function(words.transform(test.right)))
    top = scored.sort_values("score", ascending=False).groupby("group_id").head(1)
    assert top.label.mean() < 0.3  # chance is 0.2 with 5 candidates
    assert (test.groupby("group_id").label.sum() == 1).all()
