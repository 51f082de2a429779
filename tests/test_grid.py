"""The wavefront grid engine equals the cell-by-cell reference (outputs and gradients).

Truth: tests/grid_reference.py, a plain loop over the cells written from the
papers' equations. Batches are ragged (lengths 1..5, extra padding), the
engine runs them together, the reference one pair at a time without padding.
"""

from __future__ import annotations

import copy
import os
import signal
from pathlib import Path
from unittest import mock

import pytest
import torch
from grid_reference import reference_forward, reference_grid
from synth_prepared import write_synthetic

from pairrepro import paths
from pairrepro.models import gridkernels
from pairrepro.models.base import ModelContext, build_model
from pairrepro.models.grid import (
    _Regroup,
    diagonals,
    dynamic_pool,
    flip_index,
    flip_seq,
    lstm_backward,
    lstm_forward,
    run_grid_directions,
)
from pairrepro.train.loop import Trainer, TrainHooks
from pairrepro.train.runner import train_recipe

LEFT_LENGTHS = [4, 1, 5, 3]
RIGHT_LENGTHS = [3, 4, 1, 5]


needs_kernels = pytest.mark.skipif(
    gridkernels.status().startswith("eager"),
    reason=f"the grid kernels are not built here: {gridkernels.status()}")


def _ragged(lengths: list[int], pad_to: int, vocab: int, gen: torch.Generator
            ) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.zeros(len(lengths), pad_to, dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, :n] = torch.randint(2, vocab, (n,), generator=gen)
    return ids, ids != 0


def _compare(name: str, hparams: dict[str, object], num_outputs: int = 3,
             dtype: torch.dtype = torch.float64) -> None:
    """The engine in ``dtype`` against the reference in float64, outputs and gradients within
    1e-5 (float32 runs the fused kernels of gridkernels.c where they build)."""
    torch.manual_seed(0)
    ctx = ModelContext(vocab_size=15, embed_dim=5, num_outputs=num_outputs)
    model = build_model(name, ctx, hparams).to(dtype).eval()
    truth = copy.deepcopy(model).double()
    gen = torch.Generator().manual_seed(1)
    left, lm = _ragged(LEFT_LENGTHS, 6, 15, gen)
    right, rm = _ragged(RIGHT_LENGTHS, 7, 15, gen)
    params = [p for p in model.parameters() if p.requires_grad]

    grid = model.encode_grid(left, lm, right, rm)
    out = model(left, lm, right, rm)
    weights = torch.randn(grid.shape, generator=gen, dtype=torch.float64)
    out_weights = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    loss = (grid.double() * weights).sum() + (out.double() * out_weights).sum()
    grads = torch.autograd.grad(loss, params)

    ref_loss = torch.zeros((), dtype=torch.float64)
    for b, (n, m) in enumerate(zip(LEFT_LENGTHS, RIGHT_LENGTHS, strict=True)):
        lb, rb = left[b: b + 1, :n], right[b: b + 1, :m]
        ref_grid = reference_grid(truth, lb, rb)
        ref_out = reference_forward(truth, lb, rb)
        assert (grid[b, :n, :m] - ref_grid[0]).abs().max().item() <= 1e-5
        assert (out[b] - ref_out[0]).abs().max().item() <= 1e-5
        assert grid[b, n:].abs().sum() == 0 and grid[b, :, m:].abs().sum() == 0
        ref_loss = ref_loss + (ref_grid[0] * weights[b, :n, :m]).sum()
        ref_loss = ref_loss + (ref_out[0] * out_weights[b]).sum()
    ref_grads = torch.autograd.grad(ref_loss, [p for p in truth.parameters() if p.requires_grad])
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


@pytest.mark.parametrize("name,hparams", [
    ("tc_lstm", {"hidden": 4, "directions": 4, "layers": 2, "pool_p": 2, "pool_q": 2,
                 "fc_hidden": 3}),
    ("df_lstm", {"hidden": 4, "memory": 2, "layers": 2}),
    ("df_lstm", {"hidden": 4, "memory": 9, "layers": 2, "pooling": "max"}),
])
@pytest.mark.parametrize("kernels", [True, False], ids=["kernels", "eager"])
def test_float32_engine_equals_reference(name: str, hparams: dict[str, object],
                                         kernels: bool) -> None:
    # float32 is what trains: the fused kernels of gridkernels.c where they build, and the
    # eager path that runs where they do not ($PAIRREPRO_GRID_KERNELS=0, no compiler)
    if kernels and gridkernels.status().startswith("eager"):
        pytest.skip(f"the grid kernels are not built here: {gridkernels.status()}")
    with mock.patch.object(gridkernels, "usable", gridkernels.usable if kernels
                           else lambda *tensors: False):
        _compare(name, hparams, dtype=torch.float32)


def _autocast_step(model: torch.nn.Module, kernels: bool, dtype: torch.dtype | None
                   ) -> list[torch.Tensor]:
    """Outputs and parameter gradients of one step on ragged pairs (under ``dtype``
    autocast; None: float32)."""
    gen = torch.Generator().manual_seed(1)
    left, lm = _ragged(LEFT_LENGTHS, 6, 15, gen)
    right, rm = _ragged(RIGHT_LENGTHS, 7, 15, gen)
    params = [p for p in model.parameters() if p.requires_grad]
    with mock.patch.object(gridkernels, "usable", gridkernels.usable if kernels
                           else lambda *tensors: False):
        with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            out = model(left, lm, right, rm).float()
        grads = torch.autograd.grad((out * torch.randn(out.shape, generator=gen)).sum(), params)
    return [out, *grads]


@pytest.mark.parametrize("kernels", [True, False], ids=["kernels", "eager"])
@pytest.mark.parametrize("name,hparams", [
    ("tc_lstm", {"hidden": 8, "directions": 4, "layers": 2, "pool_p": 2, "pool_q": 2,
                 "fc_hidden": 3}),
    ("df_lstm", {"hidden": 8, "memory": 3, "layers": 2}),
])
def test_bf16_engine_follows_float32(name: str, hparams: dict[str, object], kernels: bool
                                     ) -> None:
    # bf16 operands, float32 cells, attention weights and accumulators: each output and
    # gradient within 1-2% (in norm) of float32's, and within 15% the attention's tiny ones
    # (v, w_read: 1e-7 against 0.4, differences of near-equal slots), which bf16 attention
    # weights or scores put off by 10-100%
    if kernels and gridkernels.status().startswith("eager"):
        pytest.skip(f"the grid kernels are not built here: {gridkernels.status()}")
    torch.manual_seed(0)
    model = build_model(name, ModelContext(vocab_size=15, embed_dim=5, num_outputs=3), hparams)
    wide = _autocast_step(model, kernels, None)
    for got, want in zip(_autocast_step(model, kernels, torch.bfloat16), wide, strict=True):
        assert want.norm() > 0
        assert (got - want).norm() <= 0.15 * want.norm()


@needs_kernels
@pytest.mark.parametrize("dtype", [None, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name,hparams", [
    ("tc_lstm", {"hidden": 8, "directions": 4, "layers": 2, "pool_p": 2, "pool_q": 2,
                 "fc_hidden": 3}),
    ("tc_lstm", {"hidden": 8, "directions": 1, "layers": 1}),
    ("df_lstm", {"hidden": 8, "memory": 3, "layers": 2}),
])
def test_the_gpu_path_equals_the_c_kernels(name: str, hparams: dict[str, object],
                                           dtype: torch.dtype | None) -> None:
    """The path a GPU takes (torch operations; TC's gradients summed over the whole grid after
    the sweep), run on CPU tensors, against the CPU's C kernels, summed per diagonal."""
    import pairrepro.models.clstm as clstm

    torch.manual_seed(0)
    model = build_model(name, ModelContext(vocab_size=15, embed_dim=5, num_outputs=3), hparams)
    kernels = _autocast_step(model, True, dtype)
    with mock.patch.object(clstm, "PER_DIAGONAL_SUMS", set()):
        device = _autocast_step(model, False, dtype)
    for got, want in zip(device, kernels, strict=True):
        assert want.norm() > 0
        if dtype is None:
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        else:  # bf16: 2%, and 15% for the attention's tiny gradients (see the test above)
            assert (got - want).norm() <= (0.02 if want.norm() > 1e-3 else 0.15) * want.norm()


class _SumCell:
    """h_{i,j} = x_i + y_j + h_{i-1,j} + h_{i,j-1}: counts monotone lattice paths."""

    state_sizes = (1,)

    def step(self, inp, up, left):  # type: ignore[no-untyped-def]
        return (inp + up[0] + left[0],)


def _run_grid(cell: _SumCell, n: int, m: int, key: str, grid: torch.Tensor) -> torch.Tensor:
    """One direction over all-real texts, ``grid`` handed to ``cell`` as ``key``."""
    masks = [torch.ones(grid.size(0), k, dtype=torch.bool) for k in (n, m)]
    (h,) = run_grid_directions(cell, lambda x, y, g: {key: g}, *masks, 1, grid=grid)
    return h


def test_run_grid_counts_lattice_paths() -> None:
    # with inputs 1 at (0, 0) only, h_{i,j} is the number of monotone paths = C(i+j, i)
    n, m = 4, 6
    grid = torch.zeros(1, n, m, 1)
    grid[0, 0, 0] = 1.0
    h = _run_grid(_SumCell(), n, m, "grid", grid)
    from math import comb

    expected = torch.tensor([[comb(i + j, i) for j in range(m)] for i in range(n)],
                            dtype=torch.float32)
    assert torch.equal(h[0, :, :, 0], expected)


class _FeatSumCell(_SumCell):
    """:class:`_SumCell` reading its per-cell input as ``feats`` (the cell-side projection)."""

    def step(self, inp, up, left, feats=None):  # type: ignore[no-untyped-def]
        assert inp is None and feats is not None
        return (feats + up[0] + left[0],)


@pytest.mark.parametrize("n,m", [(4, 6), (5, 2), (1, 3)])
def test_run_grid_feats_reach_each_cell(n: int, m: int) -> None:
    # feats travel in diagonal order to the cell: the same sums as the additive grid input
    grid = torch.randn(2, n, m, 3, generator=torch.Generator().manual_seed(0))
    by_grid = _run_grid(_SumCell(), n, m, "grid", grid)
    by_feats = _run_grid(_FeatSumCell(), n, m, "feats", grid)
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


@pytest.mark.parametrize("n,m", [(1, 1), (3, 5), (5, 3), (4, 4)])
def test_diagonal_tables(n: int, m: int) -> None:
    d = diagonals(n, m, torch.device("cpu"))
    cells = [divmod(q, m) for q in d.order.tolist()]
    assert sorted(cells) == [(i, j) for i in range(n) for j in range(m)]
    for t in range(d.steps):  # diagonal t: its cells, rows ascending, contiguous
        block = cells[d.block(t)]
        assert [i + j for i, j in block] == [t] * d.count[t]
        assert [i for i, _ in block] == list(range(d.lo[t], d.lo[t] + d.count[t]))
    for t in range(1, d.steps):  # the neighbour ranges hold exactly the cells that have one
        for (di, dj), (dst, src, k) in (((0, -1), d.left[t]), ((-1, 0), d.up[t])):
            have = {q for q in range(d.start[t], d.start[t] + d.count[t])
                    if cells[q][0] + di >= 0 and cells[q][1] + dj >= 0}
            dst += d.start[t]
            assert have == set(range(dst, dst + k))
            for q in have:
                assert cells[d.start[t - 1] + src + q - dst] == (cells[q][0] + di,
                                                                 cells[q][1] + dj)


def test_regroup_spread_and_collect_are_adjoint() -> None:
    gen = torch.Generator().manual_seed(0)
    cells, directions = 6, 3
    take = torch.randperm(cells * directions, generator=gen) % cells  # each cell 3 times
    readers = torch.stack([torch.nonzero(take == c).flatten() for c in range(cells)], dim=1)
    x = torch.randn(cells, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    y = torch.randn(cells * directions, 2, dtype=torch.float64, generator=gen,
                    requires_grad=True)
    spread = _Regroup.apply(x, take, readers, False)
    collect = _Regroup.apply(y, take, readers, True)
    assert torch.equal(spread, x[take])
    torch.testing.assert_close(collect, torch.zeros_like(x).index_add(0, take, y))
    torch.testing.assert_close((spread * y).sum(), (x * collect).sum())  # adjoint
    assert torch.autograd.gradcheck(lambda a: _Regroup.apply(a, take, readers, False), (x,))
    assert torch.autograd.gradcheck(lambda a: _Regroup.apply(a, take, readers, True), (y,))


@pytest.mark.parametrize("forgets", [1, 2])
def test_lstm_helpers_match_autograd(forgets: int) -> None:
    # partial neighbour ranges, as on a diagonal at the grid's border
    gen = torch.Generator().manual_seed(0)
    rows, batch, d = 4, 3, 5
    ranges = [(1, 3), (0, 3)][:forgets]  # (first row, rows) of each previous memory cell

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, dtype=torch.float64, generator=gen, requires_grad=True)

    pre, c_prev = rand(rows, batch, (3 + forgets) * d), [rand(k, batch, d) for _, k in ranges]
    dh, dc = torch.randn(2, rows, batch, d, dtype=torch.float64, generator=gen)
    cand, o, i, *f = pre.split(d, dim=-1)
    c_ref = torch.tanh(cand) * torch.sigmoid(i)
    for (row, k), f_k, c_k in zip(ranges, f, c_prev, strict=True):
        c_ref = c_ref + torch.nn.functional.pad(torch.sigmoid(f_k[row : row + k]) * c_k,
                                                (0, 0, 0, 0, row, rows - row - k))
    h_ref = torch.sigmoid(o) * torch.tanh(c_ref)
    grads = torch.autograd.grad((h_ref * dh).sum() + (c_ref * dc).sum(), [pre, *c_prev])

    gates = pre.detach().clone()
    c, tanh_c, h = (torch.empty(rows, batch, d, dtype=torch.float64) for _ in range(3))
    prev = [(row, x.detach()) for (row, _), x in zip(ranges, c_prev, strict=True)]
    lstm_forward(gates, prev, c, tanh_c, h)
    torch.testing.assert_close(h, h_ref.detach())
    torch.testing.assert_close(c, c_ref.detach())
    d_gates = torch.full_like(gates, float("nan"))  # every entry must be written
    d_prev = [torch.zeros_like(x) for _, x in prev]
    lstm_backward(gates, prev, tanh_c, dh.clone(), dc.clone(), d_gates, d_prev)
    torch.testing.assert_close(d_gates, grads[0])
    for got, ref in zip(d_prev, grads[1:], strict=True):
        torch.testing.assert_close(got, ref)


def _lstm_case(dtype: torch.dtype, forgets: int) -> tuple[torch.Tensor, list, list]:  # type: ignore[type-arg]
    """Gates, neighbour cells (partial ranges, as at a border) and backward inputs; rows of
    17 values, so the last vector of a row is a partial one."""
    gen = torch.Generator().manual_seed(forgets)
    rows, batch, d = 4, 3, 17
    pre = (torch.randn(rows, batch, (3 + forgets) * d, generator=gen) * 3).to(dtype)
    prev = [(row, torch.randn(k, batch, d, generator=gen)) for row, k in [(1, 3), (0, 4)][:forgets]]
    back = [torch.randn(rows, batch, d, generator=gen), torch.randn(rows, batch, d, generator=gen)
            .to(dtype), torch.randn(rows, batch, d, generator=gen)]  # dh, dh (gates' dtype), dc
    return pre, prev, back


def _run_lstm(pre: torch.Tensor, prev: list, back: list, fused: bool) -> list[torch.Tensor]:  # type: ignore[type-arg]
    rows, batch, d = back[0].shape
    gates, c, tanh_c = pre.clone(), torch.empty(rows, batch, d), torch.empty(rows, batch, d)
    h, h2 = (torch.empty(rows, batch, d, dtype=pre.dtype) for _ in "hh")
    d_gates = torch.full_like(gates, float("nan"))  # every entry must be written
    d_prev = [torch.zeros_like(x) for _, x in prev]
    dc = back[2].clone()
    fits = gridkernels.fits_lstm
    with mock.patch.object(gridkernels, "fits_lstm", lambda *a: fused and fits(*a)):
        lstm_forward(gates, prev, c, tanh_c, h, h2)
        lstm_backward(gates, prev, tanh_c, back[:2], dc, d_gates, d_prev)
    assert torch.equal(h, h2)
    return [gates, c, tanh_c, h, dc, d_gates, *d_prev]


@needs_kernels
@pytest.mark.parametrize("forgets", [0, 1, 2])
def test_lstm_kernels_equal_the_eager_update(forgets: int) -> None:
    pre, prev, back = _lstm_case(torch.float32, forgets)
    for got, want in zip(_run_lstm(pre, prev, back, True), _run_lstm(pre, prev, back, False),
                         strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=2e-6)


@needs_kernels
@pytest.mark.parametrize("forgets", [1, 2])
def test_bf16_lstm_kernels_round_the_float32_update(forgets: int) -> None:
    # bf16 operands, float32 arithmetic and cells: the float32 kernel on the same (bf16)
    # values, its bf16 outputs rounded once
    pre, prev, back = _lstm_case(torch.bfloat16, forgets)
    wide = [pre.float(), prev, [back[0], back[1].float(), back[2]]]
    got, want = _run_lstm(pre, prev, back, True), _run_lstm(*wide, True)
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        # c and tanh(c) before any rounding; the rest after the bf16 activations and outputs
        tol = 1e-6 if k in (1, 2) else 2e-2
        torch.testing.assert_close(a.float(), b, rtol=tol, atol=tol)


def test_kernels_report_why_they_are_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(gridkernels.ENV, "0")
    gridkernels._load.cache_clear()
    try:
        assert gridkernels.status() == f"eager torch (off (${gridkernels.ENV}=0))"
        assert not gridkernels.usable(torch.zeros(1, 1, 1))
    finally:
        monkeypatch.delenv(gridkernels.ENV)
        gridkernels._load.cache_clear()


def test_no_compiler_leaves_the_eager_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(gridkernels.shutil, "which", lambda name: None)
    gridkernels._load.cache_clear()
    try:
        assert gridkernels.status() == "eager torch (no C compiler (cc, gcc, clang or $CC) found)"
        assert not gridkernels.usable(torch.zeros(1, 1, 1))
    finally:
        monkeypatch.undo()
        gridkernels._load.cache_clear()


def test_a_failing_compiler_leaves_the_eager_path(tmp_path: Path) -> None:
    fake = tmp_path / "cc"
    fake.write_text("#!/bin/sh\necho 'cc: no' >&2\nexit 1\n")
    fake.chmod(0o755)
    built, why = gridkernels._build(str(fake), tmp_path / "kernels")
    assert built is None and "could not build" in why


@pytest.mark.parametrize("name,hparams", [
    ("tc_lstm", {"hidden": 5, "directions": 4, "layers": 2, "fc_hidden": 4}),
    ("df_lstm", {"hidden": 5, "memory": 3, "layers": 2}),
])
def test_fused_sweeps_are_deterministic(name: str, hparams: dict[str, object]) -> None:
    # resuming a run bit for bit needs the same gradients from the same weights and batch,
    # and no state carried from one call to the next
    ctx = ModelContext(vocab_size=15, embed_dim=6, num_outputs=3)
    gen = torch.Generator().manual_seed(3)
    batches = [(_ragged(LEFT_LENGTHS, 6, 15, gen), _ragged(RIGHT_LENGTHS, 7, 15, gen))
               for _ in range(2)]

    def grads(model: torch.nn.Module, batch: tuple) -> list[torch.Tensor]:  # type: ignore[type-arg]
        (left, lm), (right, rm) = batch
        model.zero_grad()
        model(left, lm, right, rm).square().sum().backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    torch.manual_seed(0)
    model = build_model(name, ctx, hparams)
    first = grads(model, batches[0])
    grads(model, batches[1])
    torch.manual_seed(0)
    again = grads(build_model(name, ctx, hparams), batches[0])
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(first, grads(model, batches[0]), strict=True))


RESUME_MODELS = {
    "tc_lstm": 'name = "tc_lstm"\nhidden = 6\ndirections = 4\nlayers = 2\nfc_hidden = 8',
    "df_lstm": 'name = "df_lstm"\nhidden = 6\nmemory = 3\nlayers = 2',
}


@pytest.mark.parametrize("name", sorted(RESUME_MODELS))
def test_resume_after_ctrl_c_is_bit_identical(name: str, data_home: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/test_train.py's resume test on the fused grid sweeps."""
    write_synthetic(data_home, n_train=192, n_eval=64)
    base = (paths.PROJECT_DIR / "recipes" / "bilstm_max_synthetic.toml").read_text()
    model = base[base.index("[model]") : base.index("[task]")]
    recipe = tmp_path / f"{name}_synthetic.toml"
    recipe.write_text(base.replace(model, f"[model]\n{RESUME_MODELS[name]}\n\n"))
    overrides = ["train.epochs=2", "embeddings.dim=8"]  # 6 steps per epoch
    (full,) = train_recipe(recipe, overrides, quiet=True)
    folder = paths.runs_dir() / recipe.stem / "seed-1"
    full_last = torch.load(folder / "checkpoints/last.pt", weights_only=True)["model"]

    monkeypatch.setenv("PAIRREPRO_RUNS", str(tmp_path / "runs2"))

    def ctrl_c_mid_epoch_2(trainer: Trainer) -> None:
        if trainer.state.global_step == 8:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        train_recipe(recipe, overrides, quiet=True,
                     hooks=TrainHooks(on_step=ctrl_c_mid_epoch_2))
    (resumed,) = train_recipe(recipe, overrides, quiet=True, resume=True)
    assert resumed["metrics"] == full["metrics"]
    folder = paths.runs_dir() / recipe.stem / "seed-1"
    got = torch.load(folder / "checkpoints/last.pt", weights_only=True)["model"]
    assert got.keys() == full_last.keys()
    assert all(torch.equal(got[k], full_last[k]) for k in full_last)
