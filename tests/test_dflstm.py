"""DF-LSTM: padding invariance (both heads), the K = 1 grid-LSTM case, learning synthetic NLI.

Engine-vs-reference equality (K = 2 and K = 9, stacked, ragged) is in tests/test_grid.py.
"""

from __future__ import annotations

import pytest
import torch
from model_harness import assert_padding_invariant, fit_nli

from pairrepro.models.base import ModelContext, build_model


@pytest.mark.parametrize("pooling", ["last", "max"])
def test_padding_invariant(pooling: str) -> None:
    assert_padding_invariant(lambda ctx: build_model(
        "df_lstm", ctx, {"hidden": 6, "memory": 3, "layers": 2, "pooling": pooling}))
    assert_padding_invariant(lambda ctx: build_model(
        "df_lstm", ctx, {"hidden": 6, "memory": 2}), num_outputs=1)


def test_memory_one_is_a_grid_lstm() -> None:
    # K = 1: softmax over one slot is 1, so H_{i,j} = h^x_{i-1,j} ⊕ h^y_{i,j-1} (spec §3.3);
    # check at cell (1, 1) by hand from the cells (0, 1) and (1, 0)
    torch.manual_seed(0)
    ctx = ModelContext(vocab_size=10, embed_dim=4, num_outputs=3)
    model = build_model("df_lstm", ctx, {"hidden": 3, "memory": 1}).double().eval()
    left = torch.tensor([[2, 3]])
    right = torch.tensor([[4, 5]])
    g = model.encode_grid(left, left != 0, right, right != 0)
    cell = model.blocks[0]
    x = model.embed(left)[0]
    hx_up, hy_left = g[0, 0, 1, :3], g[0, 1, 0, 3:]
    big_h = torch.cat([hx_up, hy_left])

    def lstm(side, inp, c_prev):  # type: ignore[no-untyped-def]
        gates = side.w_in.weight[:12] @ inp + side.u(big_h)
        cand, o, i, f = gates.chunk(4)
        c = torch.tanh(cand) * torch.sigmoid(i) + c_prev * torch.sigmoid(f)
        return torch.sigmoid(o) * torch.tanh(c)

    hx = g[0, 1, 1, :3]
    # the memory cell c^x_{0,1} is not exposed: recompute it (first row: H = [0; h^y_{0,0}])
    hy00 = g[0, 0, 0, 3:]
    gates = cell.x.w_in.weight[:12] @ x[0] + cell.x.u(torch.cat([torch.zeros(3, dtype=g.dtype),
                                                                  hy00]))
    cand, o, i, _ = gates.chunk(4)
    cx01 = torch.tanh(cand) * torch.sigmoid(i)  # c^x_{-1,1} = 0
    torch.testing.assert_close(torch.sigmoid(o) * torch.tanh(cx01), hx_up)
    torch.testing.assert_close(lstm(cell.x, x[1], cx01), hx)


def test_learns_synthetic_nli() -> None:
    # the labels depend on word pairs across the two sentences only (no one-sentence signal)
    acc = fit_nli(lambda ctx: build_model("df_lstm", ctx, {"hidden": 32, "memory": 3}),
                  n_train=1000, n_test=300, epochs=5, lr=1e-2, embed_dim=32)
    assert acc > 0.45, acc  # chance is 1/3 (sd about 0.027 on 300 test pairs)

def test_orthogonal_recurrent_init() -> None:
    ctx = ModelContext(vocab_size=10, embed_dim=4, num_outputs=3)
    model = build_model("df_lstm", ctx, {"hidden": 5, "memory": 2, "layers": 2})
    model.orthogonal_recurrent_()
    for cell in model.blocks:
        for block in cell.x.u.weight.chunk(4) + cell.y.u.weight.chunk(4):
            torch.testing.assert_close(block @ block.T, torch.eye(5), atol=1e-5, rtol=0)
