"""Deep Fusion LSTMs (Liu et al., ACL 2016) on the 2-D grid engine; equations and readings in
``docs/spec/dflstm.md`` §3. At cell ``(i, j)``:

* the X-memory ``M^x`` holds ``h^x_{i-K,j} .. h^x_{i-1,j}``, the Y-memory ``M^y`` holds
  ``h^y_{i,j-K} .. h^y_{i,j-1}`` (eqs. 10-11); slots before the grid's first row/column are
  left out (truncated, B8), so the first row reads nothing (``r = 0``);
* attention reads (eqs. 12-16) ``a_k = softmax_k(v^T tanh(W_a [M_k; r_prev; z]))``,
  ``r_prev`` = ``r^x_{i-1,j}`` / ``r^y_{i,j-1}``, ``z`` = ``x_i`` / ``y_j`` (B4);
* ``H = [r^x; r^y]`` is the recurrent input of both conditional LSTMs (eqs. 7-8, 17), LSTM_x
  along X, LSTM_y along Y, separate weights.

Stacking (B1): layer ℓ+1 reads layer ℓ's ``h^x`` / ``h^y`` in place of ``x_i`` / ``y_j``.
Output (B2): the last real cell's ``h^x ⊕ h^y`` (or the grid max-pooled), a linear layer.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import nn

from pairrepro.models import gridkernels
from pairrepro.models.base import ModelContext, register_model
from pairrepro.models.grid import (
    Diagonals,
    GridPairModel,
    accumulate_mm,
    compute_dtype,
    grid_mask,
    lstm_backward,
    lstm_forward,
    state_dtype,
)
from pairrepro.models.layers import NEG_INF, WordEmbedding, masked_max


class _Side(nn.Module):
    """One conditional LSTM with its attention read (the x side or the y side)."""

    def __init__(self, in_dim: int, hidden: int) -> None:
        super().__init__()
        self.w_in = nn.Linear(in_dim, 5 * hidden, bias=False)  # [LSTM input cols | W_a's z cols]
        self.u = nn.Linear(2 * hidden, 4 * hidden)  # LSTM columns for H = [r^x; r^y], and b
        self.w_mem = nn.Linear(hidden, hidden, bias=False)  # W_a's memory-slot columns
        self.w_read = nn.Linear(hidden, hidden, bias=False)  # W_a's r_prev columns
        self.v = nn.Linear(hidden, 1, bias=False)


class _Memories:
    """The ``K``-slot memories of one side (0: along X, 1: along Y) as strided views of one
    store: X-states by column (``[m, K + n, B, d]``, columns reversed), Y-states by row
    (``[n, K + m, B, d]``), each line after ``K`` zero slots, so a diagonal's windows are one
    ``[L, K, B, d]`` view (docs/grid-engine.md)."""

    def __init__(self, diags: Diagonals, memory: int, side: int, like: torch.Tensor,
                 batch: int, d: int) -> None:
        self.diags, self.memory, self.side = diags, memory, side
        outer, inner = (diags.m, diags.n) if side == 0 else (diags.n, diags.m)
        self.shape = (outer, memory + inner, batch, d)
        self.stride = memory + inner + 1 if side == 0 else memory + inner - 1
        reach = torch.arange(max(diags.n, diags.m), device=like.device).unsqueeze(1) + \
            torch.arange(memory, device=like.device)  # slot k of position p: p - K + k >= 0
        bias = torch.where(reach >= memory, 0.0, NEG_INF).to(state_dtype(like.dtype)).unsqueeze(-1)
        self.bias = bias if side == 0 else bias.flip(0)  # y: positions j fall along a diagonal

    def new(self, like: torch.Tensor) -> torch.Tensor:
        """A store with zeroed memory slots before the border."""
        store = like.new_empty(self.shape)
        store[:, : self.memory].zero_()
        return store

    def _offset(self, t: int) -> int:
        lo, d = self.diags.lo[t], self.diags
        return (d.m - 1 - t + lo) * (self.shape[1]) + lo if self.side == 0 else (
            t + lo * self.stride)

    def window(self, store: torch.Tensor, t: int) -> torch.Tensor:
        """``[L, K, B, d]``: the memory slots of diagonal ``t``'s cells."""
        b, d = self.shape[2:]
        return store.as_strided((self.diags.count[t], self.memory, b, d),
                                (self.stride * b * d, b * d, d, 1), self._offset(t) * b * d)

    def slot(self, store: torch.Tensor, t: int) -> torch.Tensor:
        """``[L, B, d]``: where diagonal ``t``'s own states are stored."""
        b, d = self.shape[2:]
        return store.as_strided((self.diags.count[t], b, d), (self.stride * b * d, d, 1),
                                (self._offset(t) + self.memory) * b * d)

    def mask(self, t: int) -> torch.Tensor:
        """``[L, K, 1]``: 0 for the slots inside the grid, a large negative number outside."""
        lo, count = self.diags.lo[t], self.diags.count[t]
        first = lo if self.side == 0 else self.bias.size(0) - 1 - (t - lo)
        return self.bias[first : first + count]


def _neighbour(diags: Diagonals, t: int, side: int) -> tuple[int, int, int]:
    """``(first cell, first source, length)`` of the neighbour a side reads: x the cell
    above (``c^x``, ``r^x`` of ``(i-1, j)``), y the cell on the left."""
    return diags.up[t] if side == 0 else diags.left[t]


class _DFSweep(torch.autograd.Function):
    """A whole DF-LSTM layer (eqs. 6-17) with a hand-written backward pass: per diagonal and
    side the query ``W_read r_prev + z``, the read (:func:`_attend`), the gates from ``H``,
    :func:`lstm_forward` and the key ``W_mem h``. Matrix-product operands are in the inputs'
    dtype; memory cells, attention weights and accumulated gradients float32."""

    @staticmethod
    def forward(ctx: Any, rows: torch.Tensor | None, cols: torch.Tensor | None,  # type: ignore[override]
                feats: torch.Tensor | None, diags: Diagonals, memory: int,
                *weights: torch.Tensor) -> torch.Tensor:
        """``rows`` ``[n, B, 5d]``, ``cols`` ``[m, B, 5d]`` (``[gates | z]``) for a first
        layer, else ``feats`` ``[n·m, B, 2d]``; ``weights``: per side ``w_in``, ``b_in``,
        ``u``, ``w_read``, ``w_mem``, ``v``. Returns ``[h^x; h^y]`` ``[n·m, B, 2d]``."""
        like = rows if feats is None else feats
        assert like is not None
        sides = _cast_sides(weights, like.dtype)
        d, batch = sides[0][2].size(1) // 2, like.size(1)
        mems = [_Memories(diags, memory, side, like, batch, d) for side in (0, 1)]
        h = like.new_empty(diags.cells, batch, 2 * d)
        big_hs = like.new_empty(diags.cells, batch, 2 * d)  # H = [r^x; r^y] of every cell
        stores = [mems[side].new(like) for side in (0, 1) for _ in range(2)]  # h^x p^x h^y p^y
        # decided once: the backward pass must take the path the forward pass took
        fused = gridkernels.fits_attention(stores, like[:1, :, :d], memory)
        saved: list[list[torch.Tensor]] = []
        with torch.autocast(like.device.type, enabled=False):
            cols_rev = None if cols is None else cols.flip(0)
            projected = None if feats is None else [  # a layer above the first: every cell's
                torch.addmm(b_in, feats[..., side * d : (side + 1) * d].reshape(-1, d),
                            w_in.t()).view(diags.cells, batch, 5 * d)
                for side, (w_in, b_in, *_) in enumerate(sides)]
            for t in range(diags.steps):
                cells, lo, n = diags.block(t), diags.lo[t], diags.count[t]
                if projected is not None:
                    inputs = [p[cells] for p in projected]
                else:
                    assert rows is not None and cols_rev is not None
                    first_col = diags.m - 1 - t + lo
                    inputs = [rows[lo : lo + n], cols_rev[first_col : first_col + n]]
                big_h = big_hs[cells]
                step: list[torch.Tensor] = []
                for side, (_, _, _, w_read, _, _) in enumerate(sides):
                    q = inputs[side][..., 4 * d :].clone(memory_format=torch.contiguous_format)
                    dst, src, k = _neighbour(diags, t, side)
                    if t and k:  # r_prev: r of the neighbour the side reads
                        rows_q = q[dst : dst + k].view(-1, d)
                        r_prev = big_hs[diags.block(t - 1)][src : src + k]
                        # not in place: addmm(out=its input) ran at a tenth of the rate in bf16
                        rows_q.copy_(torch.addmm(
                            rows_q, r_prev[..., side * d : (side + 1) * d].reshape(-1, d),
                            w_read.t()))
                    attn = _attend(mems[side], stores[2 * side : 2 * side + 2], t, q,
                                   weights[6 * side + 5], big_h[..., side * d : (side + 1) * d],
                                   fused)
                    step += [q, attn]
                for side, (_, _, u, _, w_mem, _) in enumerate(sides):
                    gates = torch.addmm(inputs[side][..., : 4 * d].reshape(-1, 4 * d),
                                        big_h.view(-1, 2 * d), u.t()).view(n, batch, 4 * d)
                    c, tanh_c = (like.new_empty(n, batch, d, dtype=mems[0].bias.dtype)
                                 for _ in "ct")
                    dst, src, k = _neighbour(diags, t, side)
                    prev = [(dst, saved[t - 1][5 + 3 * side][src : src + k])] if t and k else []
                    h_side = h[cells][..., side * d : (side + 1) * d]
                    lstm_forward(gates, prev, c, tanh_c, h_side,
                                 mems[side].slot(stores[2 * side], t))
                    key = torch.mm(h_side.reshape(-1, d), w_mem.t())  # doubled: see _attend
                    mems[side].slot(stores[2 * side + 1], t).copy_(key.view(n, batch, d))
                    step += [gates, c, tanh_c]
                saved.append(step)
        ctx.diags, ctx.memory, ctx.first, ctx.fused = diags, memory, feats is None, fused
        ctx.save_for_backward(h, *(feats,) if feats is not None else (), *stores, big_hs,
                              *weights, *itertools.chain(*saved))
        return h

    @staticmethod
    def backward(ctx: Any, dh_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        diags: Diagonals = ctx.diags
        memory, steps = ctx.memory, diags.steps
        h, *rest = ctx.saved_tensors
        feats = None if ctx.first else rest.pop(0)
        stores, big_hs, weights, flat = rest[:4], rest[4], rest[5:17], rest[17:]
        saved = [flat[t * 10 : (t + 1) * 10] for t in range(steps)]
        dtype = h.dtype
        sides = _cast_sides(weights, dtype)
        d, batch = sides[0][2].size(1) // 2, h.size(1)
        mems = [_Memories(diags, memory, side, h, batch, d) for side in (0, 1)]
        state = mems[0].bias.dtype
        dh_out = dh_out.to(dtype).contiguous()
        grads = [torch.zeros_like(w) for w in weights]  # per side: w_in b_in u w_read w_mem v
        slots = _SlotGradients(mems, stores, ctx.fused, state)
        # the memory cells' and r_prev's, per diagonal (and side): one zero fill each
        d_c = list(zip(*(h.new_zeros(diags.cells, batch, d, dtype=state).split(diags.count)
                         for _ in (0, 1)), strict=True))
        d_r = h.new_zeros(diags.cells, batch, 2 * d, dtype=state).split(diags.count)
        w_mems = [weights[6 * side + 4].to(dtype) for side in (0, 1)]  # undoubled, as the keys'
        d_rows = d_cols = d_feats = None
        if feats is None:
            d_rows = h.new_zeros(diags.n, batch, 5 * d, dtype=state)
            d_cols = h.new_zeros(diags.m, batch, 5 * d, dtype=state)  # reversed, as cols_rev
        else:
            d_feats = torch.empty_like(feats)
        # the weights' gradients are one product each over all cells, after the sweep
        d_ins = [h.new_empty(diags.cells, batch, 5 * d) for _ in (0, 1)]  # [d gates | d z]
        d_keys = [h.new_empty(diags.cells, batch, d) for _ in (0, 1)]
        r_prevs = [h.new_zeros(diags.cells, batch, d) for _ in (0, 1)]  # 0: no r_prev read
        for t in reversed(range(steps)):
            cells, lo, n = diags.block(t), diags.lo[t], diags.count[t]
            step = saved[t]
            d_in = [d_ins[side][cells] for side in (0, 1)]
            for side in (0, 1):
                d_value, d_key = slots.of_slots(side, t)
                d_keys[side][cells].view(-1, d).copy_(d_key)
                dh = [d_value, dh_out[cells][..., side * d : (side + 1) * d],
                      torch.mm(d_key, w_mems[side]).view(n, batch, d)]
                gates, _, tanh_c = step[4 + 3 * side : 7 + 3 * side]
                dst, src, k = _neighbour(diags, t, side)
                prev, d_prev = [], []
                if t and k:
                    prev = [(dst, saved[t - 1][5 + 3 * side][src : src + k])]
                    d_prev = [d_c[t - 1][side][src : src + k]]
                lstm_backward(gates, prev, tanh_c, dh, d_c[t][side], d_in[side][..., : 4 * d],
                              d_prev)
            d_h = torch.mm(d_in[0][..., : 4 * d].reshape(-1, 4 * d), sides[0][2])
            d_h = torch.addmm(d_h, d_in[1][..., : 4 * d].reshape(-1, 4 * d), sides[1][2])
            d_h = d_h.view(n, batch, 2 * d)
            for side, (_, _, _, w_read, _, _) in enumerate(sides):
                part = slice(side * d, (side + 1) * d)
                q, attn = step[2 * side : 2 * side + 2]
                dq = d_in[side][..., 4 * d :]
                slots.read(side, t, q, weights[6 * side + 5], attn,
                           [d_h[..., part], d_r[t][..., part]], dq, grads[6 * side + 5])
                dst, src, k = _neighbour(diags, t, side)
                if t and k:
                    r_prev = big_hs[diags.block(t - 1)][src : src + k][..., part]
                    r_prevs[side][cells][dst : dst + k].copy_(r_prev)
                    d_r[t - 1][src : src + k][..., part].add_(
                        torch.mm(dq[dst : dst + k].reshape(-1, d), w_read).view(k, batch, d))
                if d_rows is not None and d_cols is not None:
                    first = lo if side == 0 else diags.m - 1 - t + lo
                    (d_rows if side == 0 else d_cols)[first : first + n].add_(d_in[side])
        for side, (w_in, _, _, _, _, _) in enumerate(sides):
            part = slice(side * d, (side + 1) * d)
            d_in_all = d_ins[side].view(-1, 5 * d)
            accumulate_mm(grads[6 * side + 4], d_keys[side].view(-1, d).t(),
                          h.view(-1, 2 * d)[:, part])
            accumulate_mm(grads[6 * side + 2], d_in_all[:, : 4 * d].t(), big_hs.view(-1, 2 * d))
            accumulate_mm(grads[6 * side + 3], d_in_all[:, 4 * d :].t(),
                          r_prevs[side].view(-1, d))
            if d_feats is not None:
                assert feats is not None
                d_feats.view(-1, 2 * d)[:, part].copy_(torch.mm(d_in_all, w_in))
                accumulate_mm(grads[6 * side], d_in_all.t(), feats.view(-1, 2 * d)[:, part])
                # a product, not sum(0, dtype=float32) (a tenth of the rate in bf16) or mv (a half)
                ones = d_in_all.new_ones(1, len(d_in_all))
                grads[6 * side + 1].add_(torch.mm(ones, d_in_all).view(-1))
        if feats is None:
            grads[0] = grads[1] = grads[6] = grads[7] = None  # type: ignore[call-overload]
        return (None if d_rows is None else d_rows.to(dtype),
                None if d_cols is None else d_cols.flip(0).to(dtype), d_feats, None, None,
                *grads)


def _cast_sides(weights: Sequence[torch.Tensor], dtype: torch.dtype
                ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The two sides' six weights in ``dtype``, ``w_mem`` doubled (see :func:`_attend`)."""
    cast = [w.to(dtype) for w in weights]
    for side in (0, 1):
        cast[6 * side + 4] = cast[6 * side + 4] * 2
    return cast[:6], cast[6:]


def _attend(mem: _Memories, stores: Sequence[torch.Tensor], t: int, q: torch.Tensor,
            v: torch.Tensor, r: torch.Tensor, fused: bool) -> torch.Tensor:
    """One side's read over diagonal ``t``'s windows (eqs. 12-16): writes ``r`` ``[L, B, d]``,
    returns the weights ``[L, K, B]``. ``v·tanh(k + q)`` is ``2 v·σ(2k + 2q)`` less the
    constant ``Σv`` (which the softmax ignores); the keys are stored doubled."""
    values, keys = mem.window(stores[0], t), mem.window(stores[1], t)
    n, memory, batch, d = keys.shape
    if fused:
        attn = q.new_empty(n, memory, batch, dtype=mem.bias.dtype)
        gridkernels.attention_forward(keys, values, q, v.view(-1), mem.mask(t), attn, r)
        return attn
    # float32 as in the kernel: bf16 rounding swamps the slots' small score differences
    e = torch.add(keys, q.unsqueeze(1).to(mem.bias.dtype), alpha=2)
    scores = torch.mm(e.sigmoid_().view(-1, d), v.to(e.dtype).t()).mul_(2).view(
        n, memory, batch)
    attn = torch.softmax(scores.add_(mem.mask(t)), dim=1)
    r.copy_(torch.sum(attn.unsqueeze(-1) * values, dim=1))
    return attn


class _SlotGradients:
    """The memory slots' gradients (float32) in :class:`_DFSweep`'s backward pass: readers
    add into them (:meth:`read`); :meth:`of_slots` hands a diagonal's out once its ``K``
    later readers are through."""

    def __init__(self, mems: Sequence[_Memories], stores: Sequence[torch.Tensor],
                 fused: bool, state: torch.dtype) -> None:
        self.mems, self.stores, self.fused = mems, stores, fused
        self.d_stores = [torch.zeros_like(s, dtype=state) for s in stores]

    def read(self, side: int, t: int, q: torch.Tensor, v: torch.Tensor, attn: torch.Tensor,
             dr: Sequence[torch.Tensor], dq: torch.Tensor, g_v: torch.Tensor) -> None:
        """:func:`_attend`'s backward pass: writes ``dq``, adds into ``g_v`` and the slots'."""
        mem = self.mems[side]
        values, keys, d_values, d_keys = (mem.window(s, t) for s in (
            *self.stores[2 * side : 2 * side + 2], *self.d_stores[2 * side : 2 * side + 2]))
        if self.fused:
            gridkernels.attention_backward(keys, values, q, v.view(-1), attn, dr, dq,
                                           g_v.view(-1), d_keys, d_values)
            return
        d = q.size(-1)
        # recomputed, not kept; in float32 as in _attend
        e = torch.add(keys, q.unsqueeze(1).to(attn.dtype), alpha=2).sigmoid_()
        grad_r = (dr[0] + dr[1]).unsqueeze(1)
        d_attn = (values * grad_r).sum(-1)
        d_values.addcmul_(attn.unsqueeze(-1), grad_r)
        d_scores = d_attn.sub_((attn * d_attn).sum(1, keepdim=True)).mul_(attn)
        # scores = 2 v·e − Σv (the forward pass); d_scores sums to 0 over the slots
        accumulate_mm(g_v, d_scores.reshape(1, -1) * 2, e.view(-1, d))
        # d(k + q) = 4 v e (1 − e) d_scores, elementwise (faster than as a matrix product)
        d_e = torch.addcmul(e, e, e, value=-1).mul_(v.view(-1) * 4).mul_(d_scores.unsqueeze(-1))
        d_keys.add_(d_e)
        dq.copy_(d_e.sum(1))  # summed in float32 (sum(out=bf16) rounds the terms first)

    def of_slots(self, side: int, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Diagonal ``t``'s ``h`` (``[L, B, d]``, float32) and key (``[L·B, d]``) gradients."""
        mem, store = self.mems[side], self.stores[2 * side + 1]
        d_key = mem.slot(self.d_stores[2 * side + 1], t).to(store.dtype).reshape(
            -1, store.size(-1))  # a copy
        return mem.slot(self.d_stores[2 * side], t), d_key


class DFCell(nn.Module):
    """DF-LSTM cell: the two sides' weights and the layer's sweep (:class:`_DFSweep`)."""

    outputs = (0,)

    def __init__(self, in_dim: int, hidden: int, memory: int, first: bool) -> None:
        super().__init__()
        if memory < 1:
            raise ValueError(f"memory (K) must be at least 1, got {memory}")
        self.hidden, self.memory, self.first = hidden, memory, first
        self.x = _Side(in_dim, hidden)
        self.y = _Side(in_dim, hidden)

    def _input_bias(self, side: _Side) -> torch.Tensor:
        """``[b; 0]``: the LSTM bias next to the attention query's (absent) one."""
        return torch.cat([side.u.bias, side.u.bias.new_zeros(self.hidden)])

    def project(self, x: torch.Tensor | None, y: torch.Tensor | None,
                g: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """Each side's ``[gates 4d | z d]`` from words, or the layer below's grid as ``feats``."""
        if self.first:
            assert x is not None and y is not None
            return {"rows": F.linear(x, self.x.w_in.weight, self._input_bias(self.x)),
                    "cols": F.linear(y, self.y.w_in.weight, self._input_bias(self.y))}
        assert g is not None
        return {"feats": g}

    def sweep(self, diags: Diagonals, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        weights = [w for side in (self.x, self.y)
                   for w in (side.w_in.weight, self._input_bias(side), side.u.weight,
                             side.w_read.weight, side.w_mem.weight, side.v.weight)]
        rows, cols, feats = compute_dtype(inputs.get("rows"), inputs.get("cols"),
                                          inputs.get("feats"))
        return [_DFSweep.apply(rows, cols, feats, diags, self.memory, *weights)]


@register_model("df_lstm")
class DFLSTM(GridPairModel):
    """Stacked DF-LSTMs; the matching vector ``h^x_{n,m} ⊕ h^y_{n,m}`` feeds a linear output."""

    directions = 1

    def __init__(self, ctx: ModelContext, hidden: int = 100, memory: int = 9, layers: int = 1,
                 pooling: Literal["last", "max"] = "last", dropout: float = 0.0,
                 checkpoint: bool = False, use_exact_match: bool = False) -> None:
        """``memory``: K, the slots per axis."""
        super().__init__(ctx, checkpoint)
        if pooling not in ("last", "max"):
            raise ValueError(f"pooling must be 'last' or 'max', got {pooling!r}")
        if layers < 1:
            raise ValueError("layers must be at least 1")
        self.hidden, self.pooling = hidden, pooling
        self.embed = WordEmbedding(ctx, use_exact_match)
        self.blocks = nn.ModuleList(
            DFCell(self.embed.dim if k == 0 else hidden, hidden, memory, first=k == 0)
            for k in range(layers)
        )
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(2 * hidden, ctx.num_outputs)

    def orthogonal_recurrent_(self) -> None:
        """Orthogonal recurrent matrices (§5, ``[optim] lstm_orthogonal``): orthonormal rows
        for each gate block of ``u``; call it after any global initialisation."""
        with torch.no_grad():
            for cell in self.blocks:
                for side in (cell.x, cell.y):
                    for block in side.u.weight.chunk(4, dim=0):
                        nn.init.orthogonal_(block)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        g = self.encode_grid(left, left_mask, right, right_mask)
        batch = g.size(0)
        if self.pooling == "last":
            i = (left_mask.sum(1) - 1).clamp(min=0)
            j = (right_mask.sum(1) - 1).clamp(min=0)
            vec = g[torch.arange(batch, device=g.device), i, j]
        else:
            cells = grid_mask(left_mask, right_mask).reshape(batch, -1)
            vec = masked_max(g.reshape(batch, -1, g.size(-1)), cells)
        return self.out(self.dropout(vec))
