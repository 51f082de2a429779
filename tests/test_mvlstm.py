"""MV-LSTM: shapes, padding invariance, masked k-max pooling on a hand-made matrix, the
interaction functions against per-pair loops (torch's cosine_similarity, explicit sums), and
short fits on synthetic ranking and NLI data."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from model_harness import ModelFactory, assert_padding_invariant, context, fit_nli, fit_ranking

from pairrepro.errors import ConfigError
from pairrepro.models.base import ModelContext, build_model
from pairrepro.models.layers import BilinearTensor, masked_kmax_pooling
from pairrepro.models.mvlstm import MVLSTM

SMALL = {"hidden": 8, "k": 3, "tensor_slices": 3, "mlp_hidden": 8}


def mvlstm(interaction: str, **overrides: object) -> ModelFactory:
    def factory(ctx: ModelContext) -> MVLSTM:
        model = build_model("mv_lstm", ctx, {**SMALL, "interaction": interaction, **overrides})
        assert isinstance(model, MVLSTM)
        return model

    return factory


@pytest.mark.parametrize("interaction", ["cosine", "bilinear", "tensor"])
def test_padding_invariant_scores_and_logits(interaction: str) -> None:
    assert_padding_invariant(mvlstm(interaction), num_outputs=1)
    assert_padding_invariant(mvlstm(interaction), num_outputs=3)


def test_padding_invariant_when_k_exceeds_real_cells() -> None:
    # 6 x 6 = 36 cells at most in the harness batch: k = 40 forces zero-filled slots
    assert_padding_invariant(mvlstm("tensor", k=40), num_outputs=1)


def test_masked_kmax_ignores_padded_cells() -> None:
    # real block 2 x 2 of a 3 x 3 matrix; the padded cells hold the largest values
    grid = torch.tensor([[[0.1, -0.5, 9.0],
                          [0.7, -0.2, 8.0],
                          [7.0, 6.0, 5.0]]])
    real = torch.tensor([[True, True, False]])
    mask = (real.unsqueeze(2) & real.unsqueeze(1)).reshape(1, 9)
    out = masked_kmax_pooling(grid.reshape(1, 9), mask, k=3)
    torch.testing.assert_close(out, torch.tensor([[0.7, 0.1, -0.2]]))
    # more slots than real cells: the missing ones are 0, never a padded value
    out = masked_kmax_pooling(grid.reshape(1, 9), mask, k=6)
    torch.testing.assert_close(out, torch.tensor([[0.7, 0.1, -0.2, -0.5, 0.0, 0.0]]))
    # k larger than the whole (padded) width keeps the output size k
    assert masked_kmax_pooling(grid.reshape(1, 9), mask, k=12).shape == (1, 12)


def test_output_shapes_follow_k_and_slices() -> None:
    ctx = ModelContext(vocab_size=20, embed_dim=6, num_outputs=1)
    ids = torch.randint(2, 20, (4, 5))
    mask = torch.ones(4, 5, dtype=torch.bool)
    for interaction, channels in (("cosine", 1), ("bilinear", 1), ("tensor", 3)):
        model = mvlstm(interaction, k=4)(ctx)
        assert model.mlp.net[0].in_features == 4 * channels
        px = model.positions(model.embed(ids), mask)
        assert px.shape == (4, 5, 16)
        assert model.interact(px, px[:, :3]).shape == (4, 5, 3, channels)
        assert model(ids, mask, ids, mask).shape == (4, 1)


def test_cosine_interaction_equals_per_pair_cosine_similarity() -> None:
    torch.manual_seed(1)
    model = mvlstm("cosine")(ModelContext(vocab_size=5, embed_dim=4, num_outputs=1))
    px, py = torch.randn(2, 4, 16), torch.randn(2, 3, 16)
    px[0, 1] = 0.0  # a zero vector (padding): cosine 0, not NaN
    grid = model.interact(px, py)
    for b in range(2):
        for i in range(4):
            for j in range(3):
                expected = F.cosine_similarity(px[b, i], py[b, j], dim=0)
                torch.testing.assert_close(grid[b, i, j, 0], expected)


def naive_tensor(layer: BilinearTensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """u^T M^[s] v + W [u; v] + b, slice by slice, element by element."""
    out = torch.zeros(layer.slices)
    for s in range(layer.slices):
        total = layer.bias[s].clone()
        for i in range(u.numel()):
            for j in range(v.numel()):
                total = total + u[i] * layer.weight[s, i, j] * v[j]
        if layer.linear_u is not None and layer.linear_v is not None:
            w = torch.cat([layer.linear_u.weight[s], layer.linear_v.weight[s]])
            total = total + (w * torch.cat([u, v])).sum()
        out[s] = total
    return out


@pytest.mark.parametrize("interaction", ["bilinear", "tensor"])
def test_bilinear_and_tensor_interactions_equal_naive_loops(interaction: str) -> None:
    torch.manual_seed(2)
    model = mvlstm(interaction, hidden=3)(ModelContext(vocab_size=5, embed_dim=4,
                                                        num_outputs=1))
    with torch.no_grad():  # non-zero bias so a dropped term would show
        model.tensor.bias.uniform_(-0.5, 0.5)
    px, py = torch.randn(2, 3, 6), torch.randn(2, 4, 6)
    with torch.no_grad():
        grid = model.interact(px, py)
        for b in range(2):
            for i in range(3):
                for j in range(4):
                    expected = naive_tensor(model.tensor, px[b, i], py[b, j])
                    if interaction == "tensor":
                        expected = torch.relu(expected)  # the tensor layer's f
                    torch.testing.assert_close(grid[b, i, j], expected)
                    # aligned-pair form of the same layer (used by CNTN)
                    torch.testing.assert_close(model.tensor(px[b, i], py[b, j]),
                                               naive_tensor(model.tensor, px[b, i], py[b, j]))


def test_bilinear_has_no_linear_term_and_one_slice() -> None:
    model = mvlstm("bilinear")(ModelContext(vocab_size=5, embed_dim=4, num_outputs=1))
    assert model.tensor is not None and model.tensor.slices == 1
    assert model.tensor.linear_u is None


def test_bad_hyper_parameters_are_config_errors() -> None:
    ctx = context({"<pad>": 0, "<unk>": 1}, 1)
    with pytest.raises(ConfigError, match="interaction"):
        build_model("mv_lstm", ctx, {"interaction": "dot"})
    with pytest.raises(ConfigError, match="k must be"):
        build_model("mv_lstm", ctx, {"k": 0})
    with pytest.raises(ConfigError, match="no hyper-parameter"):
        build_model("mv_lstm", ctx, {"slices": 3})


def test_tensor_variant_learns_synthetic_ranking() -> None:
    # measured 0.71 (CPU, one thread); chance 0.2, sd 0.04 over 100 test lists
    p_at_1 = fit_ranking(mvlstm("tensor", k=5, hidden=16, mlp_hidden=16), n_train=400, epochs=4,
                         lr=1e-2)
    assert p_at_1 > 0.5, f"MV-LSTM-Tensor test P@1 {p_at_1:.3f} (chance 0.2)"


def test_cosine_variant_learns_synthetic_nli() -> None:
    acc = fit_nli(mvlstm("cosine", k=5, mlp_hidden=16), n_train=600, n_test=300, epochs=4,
                  lr=1e-2)
    # measured 0.62 (CPU, one thread)
    assert acc > 0.5, f"MV-LSTM-Cosine test accuracy {acc:.3f} (chance 0.33)"
