"""Coupled-LSTMs: θ_M of C-LSTM Table 2, padding invariance, learning synthetic NLI.

Engine-vs-reference equality is in tests/test_grid.py.
"""

from __future__ import annotations

import pytest
import torch
from model_harness import assert_padding_invariant, fit_nli

from pairrepro.models.base import ModelContext, build_model


def theta_m(model: torch.nn.Module) -> int:
    """Weight matrices only: no biases, no word embeddings, no output layer (spec §3.8)."""
    return sum(p.numel() for name, p in model.named_parameters()
               if p.dim() >= 2 and not name.startswith(("embed.", "out.")))


# published θ_M of C-LSTM Table 2 (e = 100, d = 50, SNLI pooling (1, 1))
@pytest.mark.parametrize("name,directions,layers,published", [
    ("lc_lstm", 1, 1, 45_000),  # LC-LSTMs (Single Direction)
    ("lc_lstm", 4, 1, 45_000),  # LC-LSTMs
    ("lc_lstm", 4, 4, 135_000),  # four stacked LC-LSTMs
    ("tc_lstm", 1, 1, 77_500),  # TC-LSTMs (Single Direction)
    ("tc_lstm", 4, 1, 77_500),  # TC-LSTMs
    ("tc_lstm", 4, 4, 190_000),  # four stacked TC-LSTMs
])
def test_parameter_counts_match_table2(name: str, directions: int, layers: int,
                                       published: int) -> None:
    ctx = ModelContext(vocab_size=30, embed_dim=100, num_outputs=3)
    model = build_model(name, ctx, {"hidden": 50, "directions": directions, "layers": layers,
                                    "pool_p": 1, "pool_q": 1, "fc_hidden": 50})
    assert theta_m(model) == published


@pytest.mark.parametrize("name", ["lc_lstm", "tc_lstm"])
@pytest.mark.parametrize("directions", [1, 4])
def test_padding_invariant(name: str, directions: int) -> None:
    assert_padding_invariant(lambda ctx: build_model(
        name, ctx, {"hidden": 6, "directions": directions, "layers": 2, "pool_p": 2,
                    "pool_q": 2, "fc_hidden": 5}))
    assert_padding_invariant(lambda ctx: build_model(
        name, ctx, {"hidden": 6, "directions": directions, "pool_p": 2}), num_outputs=1)


@pytest.mark.parametrize("name,hidden,n_train", [("tc_lstm", 16, 800), ("lc_lstm", 32, 1000)])
def test_learns_synthetic_nli(name: str, hidden: int, n_train: int) -> None:
    # the labels depend on word pairs across the two sentences only (no one-sentence signal)
    acc = fit_nli(lambda ctx: build_model(name, ctx, {"hidden": hidden, "directions": 1,
                                                      "fc_hidden": 16}),
                  n_train=n_train, n_test=300, epochs=5, lr=1e-2, embed_dim=32)
    assert acc > 0.45, acc  # chance is 1/3 (sd about 0.027 on 300 test pairs)

def test_bad_hyper_parameters_are_refused() -> None:
    ctx = ModelContext(vocab_size=10, embed_dim=4, num_outputs=3)
    with pytest.raises(ValueError, match="directions"):
        build_model("tc_lstm", ctx, {"directions": 2})
