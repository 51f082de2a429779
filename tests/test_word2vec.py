"""``pairrepro embeddings train``: skip-gram vectors from a prepared dataset, GloVe text out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from pairrepro import paths
from pairrepro.cli.app import app
from pairrepro.data.embeddings import build_embedding_matrix
from pairrepro.data.prepared import write_prepared

pytest.importorskip("gensim")


def test_train_writes_glove_file_readable_by_recipes(data_home: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default output is relative, as recipes' paths are
    vocab = ["<pad>", "<unk>", "cat", "dog", "sat", "barked", "mat", "loud"]
    rng = np.random.default_rng(0)
    rows = []
    for i in range(60):
        left = [int(x) for x in rng.integers(2, 8, 6)]
        right = [int(x) for x in rng.integers(1, 8, 5)]
        rows.append({"pair_id": f"q{i}:a{i}", "group_id": f"q{i}", "left": "", "right": "",
                     "label": i % 2, "left_ids": left, "right_ids": right})
    frame = pd.DataFrame(rows)
    write_prepared(paths.prepared_dir("toy", "v"), {"train": frame, "test": frame.head(5)},
                   vocab, [0] * len(vocab), {})
    result = CliRunner().invoke(app, ["--json", "embeddings", "train", "--dataset", "toy",
                                      "--variant", "v", "--dim", "8", "--epochs", "2"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "word2vec" / "toy-v-sg-8d.txt"  # where a recipe of toy/v, dim 8, reads
    lines = out.read_text().splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted(vocab[2:])  # no specials
    assert all(len(line.split()) == 9 for line in lines)
    matrix, oov = build_embedding_matrix(vocab, "glove-file", out, dim=8)
    assert oov == 0 and matrix.shape == (8, 8)
    first = dict((ln.split()[0], np.array(ln.split()[1:], dtype=float)) for ln in lines)
    np.testing.assert_allclose(matrix[2], first["cat"], atol=1e-6)
