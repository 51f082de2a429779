"""BM25 with Lucene 8's scoring (``BM25Similarity``, the one implementation: the ``bm25``
model uses it; retrieval via ``bm25s``), and seeded negative sampling from the top results.
Document lengths are exact (Lucene's are one byte), so near-ties can swap."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from pairrepro.errors import ConfigError
from pairrepro.schema import Schema

LUCENE_K1 = 1.2
LUCENE_B = 0.75
_TOKEN_RE = re.compile(r"\w+(?:'\w+)*", re.UNICODE)


def analyze(text: str) -> list[str]:
    """Lower-cased word tokens, like Lucene's StandardAnalyzer without stop words."""
    return _TOKEN_RE.findall(text.lower())


def lucene_idf(doc_freq: np.ndarray, num_docs: int) -> np.ndarray:
    """Lucene's BM25 idf, ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (always positive)."""
    doc_freq = np.asarray(doc_freq, dtype=np.float64)
    return np.log1p((num_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def lucene_term_weight(tf, doc_len, avg_doc_len: float, k1: float, b: float):  # type: ignore[no-untyped-def]
    """Lucene's BM25 ``tf / (tf + k1 * (1 - b + b * |d| / avgdl))``, numpy or torch."""
    return tf / (tf + k1 * (1.0 - b + b * doc_len / avg_doc_len))


class BM25Params(Schema):  # also [bm25] of a yahoo variant's options
    k1: Annotated[float, Field(ge=0)] = LUCENE_K1
    b: Annotated[float, Field(ge=0, le=1)] = LUCENE_B
    top_k: Annotated[int, Field(ge=1)] = 1000
    method: Literal["lucene"] = "lucene"


def bm25_top_k(queries: Sequence[Sequence[str]], corpus: Sequence[Sequence[str]],
               params: BM25Params = BM25Params(),  # frozen: a safe default
               n_threads: int = 0, show_progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(indices, scores)`` of the top ``min(top_k, len(corpus))`` documents per query, best
    first; a document sharing no term is no result (index ``-1``, score 0)."""
    import bm25s  # local: heavy import, only needed when building lists

    if not corpus:
        raise ConfigError("bm25_top_k: the corpus is empty")
    vocab: dict[str, int] = {}
    corpus_ids = [[vocab.setdefault(token, len(vocab)) for token in doc] for doc in corpus]
    # query words absent from the collection match nothing
    query_ids = [[vocab[token] for token in query if token in vocab] for query in queries]
    retriever = bm25s.BM25(method="lucene", k1=params.k1, b=params.b)
    retriever.index(bm25s.tokenization.Tokenized(ids=corpus_ids, vocab=vocab),
                    show_progress=show_progress)
    k = min(params.top_k, len(corpus))
    indices = np.full((len(queries), k), -1, dtype=np.int64)
    scores = np.zeros((len(queries), k), dtype=np.float32)
    nonempty = [i for i, q in enumerate(query_ids) if q]
    if nonempty:
        found, found_scores = retriever.retrieve([query_ids[i] for i in nonempty], k=k,
                                                 sorted=True, show_progress=show_progress,
                                                 n_threads=n_threads)
        indices[nonempty] = np.where(found_scores > 0, found, -1)
        scores[nonempty] = np.where(found_scores > 0, found_scores, 0)
    return indices, scores


def sample_negatives(candidates: np.ndarray, positives: np.ndarray, num_negatives: int,
                     seed: int | np.random.SeedSequence,
                     exclude_same_text: np.ndarray | None = None) -> np.ndarray:
    """``[Q, num_negatives]`` distinct negatives per query from its ``candidates`` (``[Q, k]``,
    ``-1`` = none) in random order, so a prefix is a uniform sample; never ``positives[q]`` nor
    a document with its ``exclude_same_text`` key. A query short of results ends in ``-1``."""
    candidates = np.asarray(candidates)
    positives = np.asarray(positives)
    if candidates.ndim != 2 or len(candidates) != len(positives):
        raise ConfigError("sample_negatives: candidates must be [Q, k] with one positive per query")
    if num_negatives < 1:
        raise ConfigError(f"sample_negatives: num_negatives must be >= 1, not {num_negatives}")
    if candidates.shape[1] < num_negatives:
        return np.full((len(candidates), num_negatives), -1, dtype=np.int64)
    usable = (candidates >= 0) & (candidates != positives[:, None])
    if exclude_same_text is not None:
        keys = np.asarray(exclude_same_text)
        cand_keys = np.where(candidates >= 0, keys[np.maximum(candidates, 0)], -1)
        usable &= cand_keys != keys[positives][:, None]
    # random keys, unusable slots last: the first n by key are a uniform sample of the usable
    rng = np.random.default_rng(seed)
    keys_random = rng.random(candidates.shape)
    keys_random[~usable] = 2.0
    picked = np.argsort(keys_random, axis=1, kind="stable")[:, :num_negatives]
    out = np.take_along_axis(candidates, picked, axis=1)
    out[np.take_along_axis(keys_random, picked, axis=1) > 1.0] = -1
    return out
