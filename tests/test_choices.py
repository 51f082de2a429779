"""Every choice list of the recipe and manifest schemas against the code that implements it: a
choice added to the schema only, or to an implementation only, fails here."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import numpy as np
import pytest
import torch
from torch import nn

from pairrepro.config import (
    ADAPTIVE_OPTIMISERS,
    EmbeddingsSection,
    Initializer,
    L2Scope,
    OptimiserName,
    OptimSection,
)
from pairrepro.data.embeddings import OOV_DRAWS, SOURCES, OovInit, build_embedding_matrix
from pairrepro.data.manifests import TokenizerName, VariantOptions
from pairrepro.data.preprocess import TOKENIZERS, Tokenizer
from pairrepro.models.base import ModelContext
from pairrepro.models.layers import WordEmbedding
from pairrepro.train.optim import OPTIMIZERS, L2Penalty, build_optimizer
from pairrepro.train.setup import INITIALIZERS


def _schema_choices(model: type, key: str) -> set[str]:
    """The values a schema field accepts, read from the field itself (not from the alias the
    implementation imports), so a field retyped to a local Literal is caught too."""
    return set(get_args(model.model_fields[key].annotation))


def test_optimisers() -> None:
    assert _schema_choices(OptimSection, "name") == set(get_args(OptimiserName)) == set(OPTIMIZERS)
    model = nn.Linear(2, 1)
    for name in get_args(OptimiserName):
        optimiser = build_optimizer(model, OptimSection(name=name, lr=0.1))
        assert type(optimiser) is OPTIMIZERS[name]
    # plain SGD is the one optimiser whose step is not rescaled per coordinate
    assert set(OPTIMIZERS) - ADAPTIVE_OPTIMISERS == {"sgd"}


def test_initializers() -> None:
    assert _schema_choices(OptimSection, "init") == set(get_args(Initializer)) == set(INITIALIZERS)
    for name, apply in INITIALIZERS.items():
        param = torch.full((3, 4), 7.0)
        apply(param, 0.1)
        changed = not torch.equal(param, torch.full((3, 4), 7.0))
        assert changed == (name != "default"), name


class _Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.words = WordEmbedding(ModelContext(vocab_size=10, embed_dim=3, num_outputs=2))
        self.proj = nn.Linear(3, 2)


def test_l2_scopes() -> None:
    assert _schema_choices(OptimSection, "l2_scope") == set(get_args(L2Scope))
    model = _Tiny()
    covered = {scope: {id(p) for p in L2Penalty(model, 1.0, scope).dense}
               for scope in get_args(L2Scope)}
    assert len({frozenset(ids) for ids in covered.values()}) == len(covered)  # all distinct
    with pytest.raises(ValueError, match="l2 scope 'none' is not one of"):
        L2Penalty(model, 1.0, "none")  # type: ignore[arg-type]


def test_oov_inits(tmp_path: Path) -> None:
    assert _schema_choices(EmbeddingsSection, "oov_init") == set(get_args(OovInit)) == set(
        OOV_DRAWS)
    vectors = tmp_path / "v.txt"
    vectors.write_text("known 0.5 0.5\n")
    vocab = ["<pad>", "<unk>", "known", "other"]
    rows = {init: build_embedding_matrix(vocab, "glove-file", vectors, 2, seed=0,
                                         oov_init=init)[0][3]
            for init in get_args(OovInit)}
    # the std of the vectors found is 0: glove_stats draws exactly their mean
    np.testing.assert_array_equal(rows["glove_stats"], [0.5, 0.5])
    assert not np.array_equal(rows["normal_0.1"], rows["glove_stats"])
    np.testing.assert_array_equal(rows["zero"], [0.0, 0.0])


def test_embedding_sources_and_tokenizers() -> None:
    assert _schema_choices(EmbeddingsSection, "source") == set(SOURCES)
    assert _schema_choices(VariantOptions, "tokenizer") == set(TOKENIZERS) == set(
        get_args(TokenizerName))
    tokens = {kind: Tokenizer(kind).split("it's a-b") for kind in get_args(TokenizerName)}
    assert tokens == {"regex": ["it", "'s", "a", "-", "b"], "whitespace": ["it's", "a-b"]}


def test_metric_names_are_the_metrics_a_run_records() -> None:
    """The one list of metric names (readings files, result.json) against what the metric
    functions return: binary classification, and ranking lists of one positive in ten."""
    from pairrepro.metrics import MetricName, classification_metrics, ranking_metrics

    labels = np.array([1, 0, 1, 1])
    recorded = set(classification_metrics(labels, np.array([1, 1, 0, 1]), 2))
    groups = [str(k // 10) for k in range(30)]
    relevant = np.array([1 if k % 10 == 3 else 0 for k in range(30)])
    scores = np.random.default_rng(0).random(30)
    recorded |= set(ranking_metrics(groups, relevant, scores)) - {"num_queries",
                                                                  "skipped_queries"}
    assert set(get_args(MetricName)) == recorded
