"""Skip-gram word2vec (gensim) on a prepared dataset's own text, written as a GloVe text
file (MV-LSTM's vectors "on the whole QA dataset")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from pairrepro.data.prepared import PreparedDataset
from pairrepro.errors import ConfigError
from pairrepro.fileio import atomic_open


def corpus_sentences(data: PreparedDataset) -> list[list[str]]:
    seen: set[tuple[int, ...]] = set()
    sentences = []
    for split in data.split_names:
        frame = data.split(split)
        for column in ("left_ids", "right_ids"):
            for ids in frame[column]:
                key = tuple(int(i) for i in ids if i > 1)  # drop <pad>/<unk>
                if key and key not in seen:
                    seen.add(key)
                    sentences.append([data.vocab[i] for i in key])
    return sentences


def train_skipgram(sentences: Sequence[list[str]], dim: int = 50, window: int = 5,
                   min_count: int = 1, epochs: int = 5, seed: int = 1, workers: int = 1
                   ) -> tuple[list[str], np.ndarray]:
    """Train skip-gram (``sg=1``) vectors; returns the words and a ``[V, dim]`` matrix."""
    try:
        from gensim.models import Word2Vec
    except ImportError:
        raise ConfigError("word2vec training needs gensim, an optional dependency",
                          hint="pip install 'pairrepro[w2v]'  (or: pip install 'gensim>=4')"
                          ) from None
    if not sentences:
        raise ConfigError("word2vec: no text to train on")
    model = Word2Vec(sentences=list(sentences), vector_size=dim, window=window,
                     min_count=min_count, sg=1, epochs=epochs, seed=seed, workers=workers)
    return list(model.wv.index_to_key), np.asarray(model.wv.vectors, dtype=np.float32)


def write_glove_text(path: Path, words: Iterable[str], vectors: np.ndarray) -> None:
    with atomic_open(path) as handle:
        for word, vector in zip(words, vectors, strict=True):
            handle.write(word + " " + " ".join(f"{x:.6f}" for x in vector) + "\n")
