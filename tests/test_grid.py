"""The wavefront grid engine equals the cell-by-cell reference (outputs and gradients).

Truth: tests/grid_reference.py, a plain loop over the cells written from the
papers' equations. Batches are ragged (lengths 1..5, extra padding), the
engine runs them together, the reference one pair at a time without padding.
"""

from __future__ import annotations

import pytest
import torch
from grid_reference import reference_forward, reference_grid

from pairrepro.models.base import ModelContext
from pairrepro.models.grid import dynamic_pool, flip_index, flip_seq, run_grid
from pairrepro.models.registry import build_model

LEFT_LENGTHS = [4, 1, 5, 3]
RIGHT_LENGTHS = [3, 4, 1, 5]


def _ragged(lengths: list[int], pad_to: int, vocab: int, gen: torch.Generator
            ) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.zeros(len(lengths), pad_to, dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, :n] = torch.randint(2, vocab, (n,), generator=gen)
    return ids, ids != 0


def _compare(name: str, hparams: dict[str, object], num_outputs: int = 3) -> None:
    torch.manual_seed(0)
    ctx = ModelContext(vocab_size=15, embed_dim=5, num_outputs=num_outputs)
    model = build_model(name, ctx, hparams).double().eval()
    gen = torch.Generator().manual_seed(1)
    left, lm = _ragged(LEFT_LENGTHS, 6, 15, gen)
    right, rm = _ragged(RIGHT_LENGTHS, 7, 15, gen)
    params = [p for p in model.parameters() if p.requires_grad]

    grid = model.encode_grid(left, lm, right, rm)
    out = model(left, lm, right, rm)
    weights = torch.randn(grid.shape, generator=gen, dtype=torch.float64)
    out_weights = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    loss = (grid * weights).sum() + (out * out_weights).sum()
    grads = torch.autograd.grad(loss, params)

    ref_loss = torch.zeros((), dtype=torch.float64)
    for b, (n, m) in enumerate(zip(LEFT_LENGTHS, RIGHT_LENGTHS, strict=True)):
        lb, rb = left[b: b + 1, :n], right[b: b + 1, :m]
        ref_grid = reference_grid(model, lb, rb)
        ref_out = reference_forward(model, lb, rb)
        assert (grid[b, :n, :m] - ref_grid[0]).abs().max().item() <= 1e-5
        assert (out[b] - ref_out[0]).abs().max().item() <= 1e-5
        assert grid[b, n:].abs().sum() == 0 and grid[b, :, m:].abs().sum() == 0
        ref_loss = ref_loss + (ref_grid[0] * weights[b, :n, :m]).sum()
        ref_loss = ref_loss + (ref_out[0] * out_weights[b]).sum()
    ref_grads = torch.autograd.grad(ref_loss, params)
    for p_engine, p_ref in zip(grads, ref_grads, strict=True):
        assert (p_engine - p_ref).abs().max().item() <= 1e-5
    assert max(g.abs().max().item() for g in grads) > 0  # gradients actually flow


@pytest.mark.parametrize("name", ["tc_lstm", "lc_lstm"])
@pytest.mark.parametrize("directions", [1, 4])
def test_clstm_engine_equals_reference(name: str, directions: int) -> None:
    _compare(name, {"hidden": 4, "directions": directions, "layers": 2, "pool_p": 2,
                    "pool_q": 2, "fc_hidden": 3})


def test_clstm_ranking_head_equals_reference() -> None:
    _compare("tc_lstm", {"hidden": 3, "directions": 4, "layers": 1, "pool_p": 2, "pool_q": 1,
                         "fc_hidden": 3}, num_outputs=1)


def test_checkpointing_changes_nothing() -> None:
    _compare("tc_lstm", {"hidden": 3, "directions": 4, "layers": 2, "fc_hidden": 3,
                         "checkpoint": True})
    _compare("df_lstm", {"hidden": 3, "memory": 2, "layers": 2, "checkpoint": True})


@pytest.mark.parametrize("memory,pooling", [(2, "last"), (9, "max")])
def test_dflstm_engine_equals_reference(memory: int, pooling: str) -> None:
    _compare("df_lstm", {"hidden": 4, "memory": memory, "layers": 2, "pooling": pooling})


class _SumCell:
    """h_{i,j} = x_i + y_j + h_{i-1,j} + h_{i,j-1}: counts monotone lattice paths."""

    state_sizes = (1,)
    memory = 0
    memory_up = 0
    memory_left = 0

    def step(self, inp, up, left, mem_up, mem_left):  # type: ignore[no-untyped-def]
        return (inp + up[0] + left[0],)


def test_run_grid_counts_lattice_paths() -> None:
    # with inputs 1 at (0, 0) only, h_{i,j} is the number of monotone paths = C(i+j, i)
    n, m = 4, 6
    grid = torch.zeros(1, n, m, 1)
    grid[0, 0, 0] = 1.0
    (h,) = run_grid(_SumCell(), n, m, grid=grid)
    from math import comb

    expected = torch.tensor([[comb(i + j, i) for j in range(m)] for i in range(n)],
                            dtype=torch.float32)
    assert torch.equal(h[0, :, :, 0], expected)


class _FeatSumCell(_SumCell):
    """:class:`_SumCell` reading its per-cell input as ``feats`` (the cell-side projection)."""

    def step(self, inp, up, left, mem_up, mem_left, feats=None):  # type: ignore[no-untyped-def]
        assert inp is None and feats is not None
        return (feats + up[0] + left[0],)


@pytest.mark.parametrize("n,m", [(4, 6), (5, 2), (1, 3)])
def test_run_grid_feats_reach_each_cell(n: int, m: int) -> None:
    # feats travel in diagonal order to the cell: the same sums as the additive grid input
    grid = torch.randn(2, n, m, 3, generator=torch.Generator().manual_seed(0))
    (by_grid,) = run_grid(_SumCell(), n, m, grid=grid)
    (by_feats,) = run_grid(_FeatSumCell(), n, m, feats=grid)
    assert torch.equal(by_grid, by_feats)


def test_flip_is_per_example_and_involutive() -> None:
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.bool)
    x = torch.arange(12).view(3, 4)
    idx = flip_index(mask)
    assert flip_seq(x, idx).tolist() == [[2, 1, 0, 3], [7, 6, 5, 4], [8, 9, 10, 11]]
    assert torch.equal(flip_seq(flip_seq(x, idx), idx), x)


def test_dynamic_pool_by_hand() -> None:
    g = torch.arange(1.0, 13.0).view(1, 3, 4, 1)  # rows 1..4, 5..8, 9..12
    row_mask = torch.tensor([[True, True, True]])
    col_mask = torch.tensor([[True, True, True, False]])
    # rows split [0,1) [1,3); real columns 0..2 split [0,1) [1,3)
    assert dynamic_pool(g, row_mask, col_mask, 2, 2).tolist() == [[1.0, 3.0, 9.0, 11.0]]
    # one real row, p = 2: the row is used by both groups
    one = torch.tensor([[True, False, False]])
    assert dynamic_pool(g, one, col_mask, 2, 1).tolist() == [[3.0, 3.0]]
