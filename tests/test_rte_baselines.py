"""Baselines of the C-LSTM / DF-LSTM tables: padding invariance (both heads), learning
synthetic NLI, and the single LSTM equal to one LSTM over the explicit concatenation."""

from __future__ import annotations

import pytest
import torch
from model_harness import assert_padding_invariant, fit_nli, fit_ranking

from pairrepro.models.base import ModelContext
from pairrepro.models.registry import build_model

SMALL = {
    "nbow": {"hidden": 32},
    "single_lstm": {"hidden": 16},
    "parallel_lstms": {"hidden": 16, "mlp_hidden": 32, "mlp_layers": 2},
    "attention_lstm": {"hidden": 16},
    "attention_lstm_wbw": {"hidden": 16},
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_padding_invariant(name: str) -> None:
    assert_padding_invariant(lambda ctx: build_model(name, ctx, SMALL[name]))
    assert_padding_invariant(lambda ctx: build_model(name, ctx, SMALL[name]), num_outputs=1)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_learns_synthetic_nli(name: str) -> None:
    acc = fit_nli(lambda ctx: build_model(name, ctx, SMALL[name]),
                  n_train=800, n_test=300, epochs=5, lr=1e-2)
    assert acc > 0.55, acc  # chance is 1/3


def test_ranking_head_learns() -> None:
    # the scalar head trained with the pairwise hinge loss (the grid models' ranking head is
    # checked against the reference in test_grid.py; their fits are too slow for CI)
    p1 = fit_ranking(lambda ctx: build_model("nbow", ctx, {"hidden": 32}),
                     n_train=300, n_test=100, epochs=4, lr=1e-2)
    assert p1 > 0.35, p1  # chance is 0.2


def test_single_lstm_reads_the_concatenation() -> None:
    torch.manual_seed(0)
    ctx = ModelContext(vocab_size=12, embed_dim=5, num_outputs=3)
    model = build_model("single_lstm", ctx, {"hidden": 4}).eval()
    left = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    right = torch.tensor([[8, 9, 0], [10, 11, 2]])
    with torch.no_grad():
        out = model(left, left != 0, right, right != 0)
        for b in range(2):
            ids = torch.cat([left[b][left[b] != 0], right[b][right[b] != 0]]).unsqueeze(0)
            _, (h, _) = model.lstm(model.embed(ids))
            torch.testing.assert_close(out[b], model.mlp(h[0, 0]))
