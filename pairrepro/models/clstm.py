"""Coupled-LSTMs (Liu et al., EMNLP 2016), TC-LSTMs (eqs. 9-11) and LC-LSTMs (eqs. 5-8), on
the 2-D grid engine; equations, stacking and the readings that give Table 2's θ_M:
``docs/spec/clstm.md`` §3.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from pairrepro.models.base import ModelContext, register_model
from pairrepro.models.grid import (
    Diagonals,
    GridPairModel,
    State,
    accumulate_mm,
    compute_dtype,
    dynamic_pool,
    lstm_backward,
    lstm_forward,
    state_dtype,
)
from pairrepro.models.layers import WordEmbedding

# where TC's gate gradients are summed per diagonal (the CPU's bit-exact order); elsewhere once
PER_DIAGONAL_SUMS = {"cpu"}  # over the whole grid after the sweep: fewer, larger launches


class _TCSweep(torch.autograd.Function):
    """A whole TC-LSTM sweep (eqs. 9-11) with a hand-written backward pass: per diagonal one
    product ``z = [ĥ; h_left; h_up] → gates`` and :func:`lstm_forward`. Matrix-product
    operands are in the inputs' dtype; memory cells and gradients float32."""

    @staticmethod
    def forward(ctx: Any, rows: torch.Tensor | None, cols: torch.Tensor | None,  # type: ignore[override]
                feats: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor | None,
                diags: Diagonals) -> torch.Tensor:
        """``rows`` ``[n, B, 5d]`` and ``cols`` ``[m, B, 5d]`` for a first block, else
        ``feats`` ``[n·m, B, F]``; ``weight`` ``[5d, F + 2d]``. Returns ``h`` ``[n·m, B, d]``."""
        d, width = weight.size(0) // 5, weight.size(1)
        like = rows if feats is None else feats
        assert like is not None
        batch = like.size(1)
        h = like.new_empty(diags.cells, batch, d)
        saved: list[list[torch.Tensor]] = [[], [], [], []]  # gates, c, tanh c, z per diagonal
        with torch.autocast(like.device.type, enabled=False):
            cols_rev = None if cols is None else cols.flip(0)
            w_t = weight.to(like.dtype).t()
            b = None if bias is None else bias.to(like.dtype)
            state = state_dtype(like.dtype)
            for t in range(diags.steps):
                cells, lo, n = diags.block(t), diags.lo[t], diags.count[t]
                z = like.new_empty(n, batch, width)
                if feats is not None:
                    z[..., : width - 2 * d].copy_(feats[cells])
                _neighbour_rows(diags, t, h[diags.block(t - 1)] if t else h[:0],
                                z[..., width - 2 * d :])
                shift = b  # the bias, or (a first block) the cells' rows and columns
                if rows is not None and cols_rev is not None:
                    first_col = diags.m - 1 - t + lo  # column t - lo, reversed
                    shift = torch.add(rows[lo : lo + n], cols_rev[first_col : first_col + n])
                # not in place: addmm(out=its input) ran at a tenth of the rate in bf16
                gates = torch.addmm(shift.view(-1, 5 * d), z.view(-1, width), w_t).view(
                    n, batch, 5 * d)
                c, tanh_c = (like.new_empty(n, batch, d, dtype=state) for _ in "ct")
                lstm_forward(gates, _neighbour_cells(diags, t, saved[1]), c, tanh_c, h[cells])
                for store, x in zip(saved, (gates, c, tanh_c, z), strict=True):
                    store.append(x)
        ctx.diags = diags
        ctx.has_rows, ctx.has_bias = rows is not None, bias is not None
        ctx.save_for_backward(weight, *itertools.chain(*saved))
        return h

    @staticmethod
    def backward(ctx: Any, dh_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        weight, *flat = ctx.saved_tensors
        diags: Diagonals = ctx.diags
        steps = diags.steps
        gates, c, tanh_c, z = (flat[k * steps : (k + 1) * steps] for k in range(4))
        d, width = weight.size(0) // 5, weight.size(1)
        dtype = gates[0].dtype
        w = weight.to(dtype)
        dh_out = dh_out.to(dtype).contiguous()
        # float32, from the next diagonal (one zero fill each)
        dh, dc = (c[0].new_zeros(diags.cells, *c[0].shape[1:]).split(diags.count) for _ in "hc")
        d_weight = torch.zeros_like(weight)
        d_bias = weight.new_zeros(5 * d) if ctx.has_bias else None
        d_rows = d_cols = d_feats = None
        if ctx.has_rows:
            d_rows = weight.new_zeros(diags.n, dh_out.size(1), 5 * d)
            d_cols = weight.new_zeros(diags.m, dh_out.size(1), 5 * d)  # reversed, as cols_rev
        elif ctx.needs_input_grad[2]:
            d_feats = dh_out.new_empty(diags.cells, dh_out.size(1), width - 2 * d)
        d_all = (None if weight.device.type in PER_DIAGONAL_SUMS
                 else gates[0].new_empty(diags.cells, *gates[0].shape[1:]))
        for t in reversed(range(steps)):
            cells, lo, n = diags.block(t), diags.lo[t], diags.count[t]
            d_gates = torch.empty_like(gates[t]) if d_all is None else d_all[cells]
            lstm_backward(gates[t], _neighbour_cells(diags, t, c), tanh_c[t],
                          [dh[t], dh_out[cells]], dc[t], d_gates,
                          _neighbour_cells(diags, t, dc, grad=True))
            flat_gates = d_gates.view(-1, 5 * d)
            if d_all is None:
                accumulate_mm(d_weight, flat_gates.t(), z[t].view(-1, width))
                if d_bias is not None:
                    d_bias.add_(flat_gates.sum(0, dtype=d_bias.dtype))
                if d_rows is not None and d_cols is not None:
                    first_col = diags.m - 1 - t + lo
                    d_rows[lo : lo + n].add_(d_gates)
                    d_cols[first_col : first_col + n].add_(d_gates)
            dz = flat_gates.mm(w).view(n, -1, width)
            if d_feats is not None:
                d_feats[cells].copy_(dz[..., : width - 2 * d])
            if t:
                _neighbour_rows(diags, t, dh[t - 1], dz[..., width - 2 * d :], grad=True)
        if d_all is not None:  # every cell at once
            flat = d_all.view(-1, 5 * d)
            accumulate_mm(d_weight, flat.t(), torch.cat(z).view(-1, width))
            if d_bias is not None:
                d_bias.add_(flat.sum(0, dtype=d_bias.dtype))
            if d_rows is not None and d_cols is not None:  # the cells as a grid, summed
                grid = d_all[diags.order.argsort()].view(diags.n, diags.m, *d_all.shape[1:])
                d_rows.add_(grid.sum(1, dtype=d_rows.dtype))
                d_cols.add_(grid.sum(0, dtype=d_cols.dtype).flip(0))
        return (None if d_rows is None else d_rows.to(dtype),
                None if d_cols is None else d_cols.flip(0).to(dtype), d_feats, d_weight,
                d_bias, None)


def _neighbour_rows(diags: Diagonals, t: int, h: torch.Tensor, z: torch.Tensor,
                    grad: bool = False) -> None:
    """``z [L_t, B, 2d] = [h_left; h_up]`` from diagonal ``t-1``'s ``h`` (zeros on the
    border); with ``grad``, ``z``'s gradient added into ``h``'s."""
    d = z.size(-1) // 2
    for part, (dst, src, k) in enumerate((diags.left[t], diags.up[t]) if t else ()):
        target = z[dst : dst + k, :, part * d : (part + 1) * d]
        if grad:
            h[src : src + k].add_(target)
        else:
            target.copy_(h[src : src + k])
            # the one border row of a diagonal that lacks this neighbour (if any)
            z[:dst, :, part * d : (part + 1) * d].zero_()
            z[dst + k :, :, part * d : (part + 1) * d].zero_()
    if t == 0 and not grad:
        z.zero_()


def _neighbour_cells(diags: Diagonals, t: int, c: Sequence[torch.Tensor],
                     grad: bool = False) -> list[Any]:
    """Diagonal ``t``'s previous cells ``[c_{i,j-1}, c_{i-1,j}]`` as :func:`lstm_forward`
    takes them; with ``grad``, only the tensors."""
    if t == 0:
        return []
    out = [(dst, c[t - 1][src : src + k]) for dst, src, k in (diags.left[t], diags.up[t])]
    return [x for _, x in out] if grad else out


class TCCell(nn.Module):
    """Tightly coupled cell (eqs. 9-11), gates ``[c~, o, i, f¹ (left), f² (up)]``: fused."""

    outputs = (0,)

    def __init__(self, in_dim: int, hidden: int, first: bool) -> None:
        super().__init__()
        self.hidden = self.out_dim = hidden
        self.first = first
        if first:  # A's columns for x_i and y_j
            self.w_x = nn.Linear(in_dim, 5 * hidden, bias=False)
            self.w_y = nn.Linear(in_dim, 5 * hidden, bias=False)
        else:  # A's columns for the fused ĥ_{i,j} of the block below
            self.w_g = nn.Linear(in_dim, 5 * hidden, bias=False)
        self.u = nn.Linear(2 * hidden, 5 * hidden)  # columns for [h_{i,j-1}; h_{i-1,j}], and b

    def project(self, x: torch.Tensor | None, y: torch.Tensor | None,
                g: torch.Tensor | None) -> dict[str, torch.Tensor]:
        if self.first:
            assert x is not None and y is not None
            # b rides on the rows (added once per row, not once per cell)
            return {"rows": F.linear(x, self.w_x.weight, self.u.bias), "cols": self.w_y(y)}
        assert g is not None
        return {"feats": g}  # projected per diagonal, in the recurrent product

    def sweep(self, diags: Diagonals, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        if self.first:
            rows, cols = compute_dtype(inputs["rows"], inputs["cols"])
            return [_TCSweep.apply(rows, cols, None, self.u.weight, None, diags)]
        (feats,) = compute_dtype(inputs["feats"])
        weight = torch.cat([self.w_g.weight, self.u.weight], dim=1)
        return [_TCSweep.apply(None, None, feats, weight, self.u.bias, diags)]


class LCCell(nn.Module):
    """Loosely coupled cell (eqs. 5-8): two LSTMs sharing one weight set, state
    ``(h¹, c¹, h², c²)``."""

    outputs = (0, 2)

    def __init__(self, in_dim: int, hidden: int, first: bool) -> None:
        super().__init__()
        self.hidden, self.out_dim = hidden, 2 * hidden
        self.first = first
        self.state_sizes = (hidden, hidden, hidden, hidden)
        self.w_in = nn.Linear(in_dim, 4 * hidden, bias=False)  # A's input columns
        self.u = nn.Linear(2 * hidden, 4 * hidden)  # A's columns for H = [h¹; h²], and b

    def project(self, x: torch.Tensor | None, y: torch.Tensor | None,
                g: torch.Tensor | None) -> dict[str, torch.Tensor]:
        if self.first:
            assert x is not None and y is not None
            px, py = self.w_in(x), self.w_in(y)
            return {"rows": torch.cat([px, torch.zeros_like(px)], dim=-1),
                    "cols": torch.cat([torch.zeros_like(py), py], dim=-1)}
        assert g is not None
        return {"feats": g}  # projected per diagonal in step(), as TCCell does

    def _lstm(self, gates: torch.Tensor, c_prev: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cand, o, i, f = gates.chunk(4, dim=-1)
        c = torch.tanh(cand) * torch.sigmoid(i) + c_prev * torch.sigmoid(f)
        return torch.sigmoid(o) * torch.tanh(c), c

    def step(self, inp: torch.Tensor | None, up: State, left: State,
             feats: torch.Tensor | None = None) -> State:
        h1_up, c1_up, h2_up, _ = up
        h1_left, _, h2_left, c2_left = left
        if feats is not None:  # ĥ's X half feeds LSTM¹, its Y half LSTM²
            in1, in2 = (self.w_in(f) for f in feats.split(self.hidden, dim=-1))
        else:
            assert inp is not None
            in1, in2 = inp.split(4 * self.hidden, dim=-1)
        h1, c1 = self._lstm(in1 + self.u(torch.cat([h1_up, h2_up], -1)), c1_up)
        h2, c2 = self._lstm(in2 + self.u(torch.cat([h1_left, h2_left], -1)), c2_left)
        return h1, c1, h2, c2


class CoupledLSTM(GridPairModel):
    """Stacked blocks of (one or four) C-LSTMs + aggregation, dynamic pooling, FC, output."""

    cell_class: type[TCCell] | type[LCCell] = TCCell

    def __init__(self, ctx: ModelContext, hidden: int = 50, directions: int = 4, layers: int = 1,
                 pool_p: int = 1, pool_q: int = 1, fc_hidden: int = 50, dropout: float = 0.0,
                 checkpoint: bool = False, use_exact_match: bool = False) -> None:
        """``directions``: 1 or 4 (eq. 13); ``pool_p × pool_q``: dynamic pooling size."""
        super().__init__(ctx, checkpoint)
        if directions not in (1, 4):
            raise ValueError(f"directions must be 1 or 4, got {directions}")
        if layers < 1 or pool_p < 1 or pool_q < 1:
            raise ValueError("layers, pool_p and pool_q must be at least 1")
        self.directions = directions
        self.pool_p, self.pool_q = pool_p, pool_q
        self.embed = WordEmbedding(ctx, use_exact_match)
        # a block above the first reads hidden-wide input (TC: the fused ĥ; LC: a half of it)
        self.blocks = nn.ModuleList(self.cell_class(self.embed.dim if k == 0 else hidden, hidden,
                                                    first=k == 0) for k in range(layers))
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(pool_p * pool_q * self.blocks[-1].out_dim, fc_hidden)
        self.out = nn.Linear(fc_hidden, ctx.num_outputs)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        g = self.encode_grid(left, left_mask, right, right_mask)
        pooled = dynamic_pool(g, left_mask, right_mask, self.pool_p, self.pool_q)
        return self.out(self.dropout(torch.tanh(self.fc(pooled))))


@register_model("tc_lstm")
class TCLSTM(CoupledLSTM):
    """Tightly coupled LSTMs (``directions`` = 1 for the single-direction rows)."""


@register_model("lc_lstm")
class LCLSTM(CoupledLSTM):
    """Loosely coupled LSTMs (``directions`` = 1 for the single-direction rows)."""

    cell_class = LCCell
