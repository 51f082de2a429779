"""CIN: batched dynamic convolution vs a per-example conv1d loop, the filter generator vs
its printed formula, padding invariance of every ablation, and a short NLI fit."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from model_harness import assert_padding_invariant, fit_nli, fit_ranking

from pairrepro.config import OptimSection
from pairrepro.errors import ConfigError
from pairrepro.models.base import ModelContext, build_model
from pairrepro.models.cin import (
    FilterGenerator,
    dynamic_conv1d,
    normalise_filters,
)
from pairrepro.models.layers import exact_match
from pairrepro.train.setup import initialise

SMALL = {"hidden": 12, "dim": 24, "layers": 2, "kmax": 3, "char_dim": 6, "char_filters": 8,
         "mlp_hidden": 16, "dropout": 0.0}


def cin(ctx: ModelContext, **overrides: object) -> torch.nn.Module:
    return build_model("cin", ctx, {**SMALL, **overrides})


@pytest.mark.parametrize("tau", [1, 3, 5])
def test_dynamic_conv_equals_per_example_loop(tau: int) -> None:
    torch.manual_seed(0)
    lengths = [5, 2, 7, 1]
    c_in, c_out, T = 4, 6, 7
    x = torch.randn(4, T, c_in)
    mask = torch.arange(T)[None] < torch.tensor(lengths)[:, None]
    x = x.masked_fill(~mask.unsqueeze(-1), 9.0)  # garbage in the padding must not leak
    weight = torch.randn(4, c_out, tau * c_in)
    out = dynamic_conv1d(x, mask, weight)
    for k, n in enumerate(lengths):
        # Eq. 8 column layout [x_{i-h}; ..; x_{i+h}] -> conv1d weight [c_out, c_in, tau]
        w = weight[k].reshape(c_out, tau, c_in).permute(0, 2, 1)
        ref = F.conv1d(x[k, :n].T.unsqueeze(0), w, padding=tau // 2)[0].T
        torch.testing.assert_close(out[k, :n], ref)
        assert out[k, n:].abs().sum() == 0


def test_filter_generator_matches_printed_formula() -> None:
    torch.manual_seed(0)
    c_in, c_out, tau, k = 5, 6, 3, 2
    fgn = FilterGenerator(c_in, c_out, tau, k)
    with torch.no_grad():
        fgn.b.normal_(0, 0.1)
    x = torch.randn(2, 6, c_in)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    out = fgn(x, mask)
    assert out.shape == (2, c_out, tau * c_in)
    for e, n in enumerate([4, 6]):
        u = torch.relu(fgn.w_u.weight @ x[e, :n].T)  # [c_in, n] (Eq. 16)
        z = u.sort(dim=1, descending=True).values[:, :k]  # Eq. 17, values sorted
        slices = [torch.relu(fgn.p @ torch.diag(z[:, j]) @ fgn.q + fgn.b) for j in range(k)]
        torch.testing.assert_close(out[e], torch.cat(slices, dim=0))  # Eqs. 18-19


def test_filter_generator_rejects_indivisible_width() -> None:
    with pytest.raises(ConfigError, match="divisible"):
        FilterGenerator(5, 7, 3, 2)


def test_exact_match_ignores_padding() -> None:
    ids = torch.tensor([[4, 5, 1, 0]])
    other = torch.tensor([[5, 1, 0, 0]])
    em = exact_match(ids, ids != 0, other, other != 0)  # pad 0 and unk 1 never match
    assert em.squeeze(-1).tolist() == [[0.0, 1.0, 0.0, 0.0]]


@pytest.mark.parametrize("switches", [
    {}, {"use_interaction": False}, {"use_intra": False},
    {"aggr_lstm": True, "use_exact_match": False, "char_dim": 0, "window": 1, "layers": 1},
])
def test_cin_padding_invariant(switches: dict[str, object]) -> None:
    assert_padding_invariant(lambda ctx: cin(ctx, **switches), num_outputs=3)


def test_cin_ablations_change_the_graph() -> None:
    ctx = ModelContext(vocab_size=20, embed_dim=8, num_outputs=2,
                       vocab=[f"w{i}" for i in range(20)])
    assert len(cin(ctx).layers) == 2
    assert len(cin(ctx, use_interaction=False).layers) == 0
    assert cin(ctx, use_intra=False).layers[0].fuse.in_features == 24  # only v, not 5 x 24


def test_cin_learns_synthetic_nli() -> None:
    acc = fit_nli(cin, n_train=600, n_test=300, epochs=4)
    assert acc > 0.6, f"CIN test accuracy {acc:.3f} (chance 0.33)"


def _xavier(model: torch.nn.Module, pretrained: bool = False) -> torch.nn.Module:
    """The recipes' ``init = "xavier"`` (Xavier matrices, zero biases) via the engine's code;
    ``pretrained`` leaves embedding tables alone, as the runner does for GloVe."""
    initialise(model, OptimSection(init="xavier"), keep_embeddings=pretrained)
    return model


def test_cin_is_not_saturated_at_recipe_width_on_ranking_shapes() -> None:
    """Regression: with Eq. 18's non-negative filters unnormalised, layer 2 summed tau*d
    positive terms, its outputs reached ~100, the tanh classifier saturated, the gradient
    below it was exactly 0 and the output took a handful of values (by padding length):
    TrecQA dev MAP fell below random order. Sizes are those of recipes/cin_trecqa.toml."""
    torch.manual_seed(0)
    vocab = ["<pad>", "<unk>", *(f"w{i}" for i in range(300))]
    ctx = ModelContext(vocab_size=len(vocab), embed_dim=50, num_outputs=2, vocab=vocab)
    model = _xavier(cin(ctx, hidden=50, dim=100, kmax=4, char_dim=8, char_filters=50,
                        mlp_hidden=100), pretrained=True)
    with torch.no_grad():  # GloVe-6B-50d scale (entries ~ N(0, 0.4^2)), kept by the init
        model.embed.embedding.weight.normal_(0, 0.4)
    left, right = torch.randint(2, len(vocab), (16, 8)), torch.randint(2, len(vocab), (16, 36))
    right_mask = torch.ones_like(right, dtype=torch.bool)
    right_mask[:8, 25:] = False  # short and long answers in one batch, as in ranking
    out = model(left, left != 0, right, right_mask)
    assert out.abs().max() < 20
    assert len({round(x, 4) for x in out[:, 1].tolist()}) == 16  # every pair scored apart
    F.cross_entropy(out, torch.arange(16) % 2).backward()
    for name in ["encoder.weight_ih_l0", "layers.0.fgn.q", "layers.1.fgn.q",
                 "classifier.net.0.weight"]:
        assert model.get_parameter(name).grad.norm() > 1e-4, name


def test_normalised_filters_are_row_averages() -> None:
    w = torch.tensor([[[1.0, 3.0, 0.0], [0.0, 0.0, 0.0]]])
    expected = torch.tensor([[[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]]])
    torch.testing.assert_close(normalise_filters(w), expected)


def test_cin_learns_synthetic_ranking() -> None:
    p_at_1 = fit_ranking(lambda ctx: _xavier(cin(ctx)), n_train=200, n_test=100, epochs=4)
    assert p_at_1 > 0.5, f"CIN test P@1 {p_at_1:.3f} (chance 0.2)"
