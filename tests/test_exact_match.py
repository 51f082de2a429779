"""The exact-match input feature (``use_exact_match``) of every model that offers it.

Two vocabulary words get the same (fixed) vector, so only the exact-match flag can tell
"the answer repeats the question's word" from "the answer has a different word": with the
feature the model's output must change between the two, without it it must not.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from model_harness import assert_padding_invariant

from pairrepro.models.base import ModelContext, build_model
from pairrepro.models.layers import WordEmbedding, exact_match

MODELS: dict[str, dict[str, Any]] = {
    "esim": {"hidden": 8, "dropout": 0.0},
    "mv_lstm": {"hidden": 6, "k": 2, "interaction": "tensor", "tensor_slices": 2},
    "csran": {"hidden": 6, "layers": 2, "char_dim": 0, "fm_factors": 3, "aggr_layers": 1,
              "out_hidden": 8, "dropout": 0.0},
    "tc_lstm": {"hidden": 5, "directions": 1},
    "lc_lstm": {"hidden": 5, "directions": 4},
    "df_lstm": {"hidden": 6, "memory": 3},
    "cin": {"hidden": 5, "dim": 12, "kmax": 2, "char_dim": 0, "layers": 1, "mlp_hidden": 8,
            "dropout": 0.0},
}
SWITCH = {"cin": "use_exact_match"}


def _context(twins: bool) -> ModelContext:
    torch.manual_seed(0)
    matrix = torch.randn(12, 6)
    if twins:
        matrix[5] = matrix[4]  # words 4 and 5 look the same to the embedding
    return ModelContext(vocab_size=12, embed_dim=6, num_outputs=2, pretrained=matrix,
                        trainable_embeddings=False, vocab=[f"w{i}" for i in range(12)])


def _model(name: str, on: bool) -> torch.nn.Module:
    torch.manual_seed(1)
    hparams = {**MODELS[name], SWITCH.get(name, "use_exact_match"): on}
    return build_model(name, _context(twins=True), hparams).eval()


def test_flags_by_hand() -> None:
    ids = torch.tensor([[4, 7, 1, 0]])
    other = torch.tensor([[7, 7, 1, 2, 4, 0]])
    flags = exact_match(ids, ids != 0, other, other != 0)
    # 4 and 7 occur in the other text; <unk> (1) never matches; padding is 0
    assert flags[0, :, 0].tolist() == [1.0, 1.0, 0.0, 0.0]
    other_mask = other != 0
    other_mask[0, 4] = False  # a masked 4 does not count
    assert exact_match(ids, ids != 0, other, other_mask)[0, :, 0].tolist() == [0, 1, 0, 0]


def test_word_embedding_pair_appends_the_flag() -> None:
    emb = WordEmbedding(_context(twins=False), exact_match=True)
    left, right = torch.tensor([[3, 4]]), torch.tensor([[4, 9, 0]])
    x, y = emb.pair(left, left != 0, right, right != 0)
    assert emb.dim == 7 and x.shape == (1, 2, 7) and y.shape == (1, 3, 7)
    assert x[0, :, -1].tolist() == [0.0, 1.0] and y[0, :, -1].tolist() == [1.0, 0.0, 0.0]
    torch.testing.assert_close(x[..., :6], emb(left))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_only_the_flag_tells_twin_words_apart(name: str) -> None:
    question = torch.tensor([[3, 4, 8, 2]])
    same = torch.tensor([[6, 4, 9, 10, 11]])   # repeats word 4
    twin = torch.tensor([[6, 5, 9, 10, 11]])   # word 5: the same vector, another word
    qm, am = question != 0, same != 0
    for on in (False, True):
        model = _model(name, on)
        with torch.no_grad():
            a = model(question, qm, same, am)
            b = model(question, qm, twin, am)
        if on:
            assert (a - b).abs().max() > 1e-6, f"{name}: the flag does not reach the output"
        else:
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_padding_invariant_with_the_flag(name: str) -> None:
    hparams = {**MODELS[name], SWITCH.get(name, "use_exact_match"): True}
    assert_padding_invariant(lambda ctx: build_model(name, ctx, hparams), num_outputs=2)
