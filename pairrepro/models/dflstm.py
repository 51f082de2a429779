"""Deep Fusion LSTMs (Liu et al., ACL 2016) on the 2-D grid engine.

Equations and readings: ``../shared/spec/dflstm.md`` §3. At cell ``(i, j)``:

* the X-memory ``M^x`` holds ``h^x_{i-K,j} .. h^x_{i-1,j}`` and the Y-memory
  ``M^y`` holds ``h^y_{i,j-K} .. h^y_{i,j-1}`` (eqs. 10-11); slots before the
  grid's first row/column are left out (the memory is truncated, B8), so the
  first row reads nothing (``r = 0``);
* attention reads (eqs. 12-16) ``a_k = softmax_k(v^T tanh(W_a [M_k; r_prev; z]))``
  with ``r^x_{i-1,j}`` / ``r^y_{i,j-1}`` as ``r_prev`` and ``z`` the cell's input
  (``x_i`` / ``y_j``); ``W_a`` is ``d × (2d + e)`` so ``e ≠ d`` works (B4);
* ``H = [r^x; r^y]`` is the recurrent input of both conditional LSTMs
  (eqs. 7-8, 17); LSTM_x carries its memory cell along X, LSTM_y along Y; the
  two LSTMs and their attentions have separate weights (the literal reading).
* With ``memory = 1`` the model is the grid LSTM ``H = h^x_{i-1,j} ⊕ h^y_{i,j-1}``.

Stacking (B1, not described): layer ℓ+1's LSTM_x reads ``h^x`` of layer ℓ at
``(i, j)`` in place of ``x_i``, LSTM_y reads ``h^y`` in place of ``y_j``.
Output (B2): the matching vector ``h_{n,m} = h^x ⊕ h^y`` of the last real cell
(``pooling = "last"``; ``"max"`` max-pools the grid instead), then a linear
layer: ``num_outputs`` logits, or one score for ranking.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from pairrepro.models.base import ModelContext
from pairrepro.models.grid import GridPairModel, Memory, State, grid_mask, run_grid
from pairrepro.models.layers import WordEmbedding, masked_max, masked_softmax
from pairrepro.models.registry import register_model


class _Side(nn.Module):
    """One conditional LSTM with its attention read (the x side or the y side)."""

    def __init__(self, in_dim: int, hidden: int) -> None:
        super().__init__()
        self.w_in = nn.Linear(in_dim, 5 * hidden, bias=False)  # [LSTM input cols | W_a's z cols]
        self.u = nn.Linear(2 * hidden, 4 * hidden)  # LSTM columns for H = [r^x; r^y], and b
        self.w_mem = nn.Linear(hidden, hidden, bias=False)  # W_a's memory-slot columns
        self.w_read = nn.Linear(hidden, hidden, bias=False)  # W_a's r_prev columns
        self.v = nn.Linear(hidden, 1, bias=False)


class DFCell(nn.Module):
    """DF-LSTM cell. State ``([h^x; W h^x], c^x, [h^y; W h^y], c^y, r^x, r^y)``.

    The memory components carry each state's attention projection ``W_a^mem h``
    next to ``h`` so every state is projected once, not once per reader.
    """

    memory_up = 0
    memory_left = 2
    outputs = (0, 2)

    def __init__(self, in_dim: int, hidden: int, memory: int, first: bool) -> None:
        super().__init__()
        if memory < 1:
            raise ValueError(f"memory (K) must be at least 1, got {memory}")
        self.hidden, self.memory, self.first = hidden, memory, first
        d = hidden
        self.state_sizes = (2 * d, d, 2 * d, d, d, d)
        self.x = _Side(in_dim, hidden)
        self.y = _Side(in_dim, hidden)

    def project(self, x: torch.Tensor | None, y: torch.Tensor | None,
                g: torch.Tensor | None) -> dict[str, torch.Tensor]:
        """Per-cell input ``[x-side 5d | y-side 5d]`` from words; the layer below's grid as
        ``feats``, which :meth:`step` projects."""
        if self.first:
            assert x is not None and y is not None
            px, py = self.x.w_in(x), self.y.w_in(y)
            return {"rows": torch.cat([px, torch.zeros_like(px)], dim=-1),
                    "cols": torch.cat([torch.zeros_like(py), py], dim=-1)}
        assert g is not None
        # the grid below stays un-projected: step() projects one diagonal at a time (the
        # whole-grid projection is 10d wide and memory-bound)
        return {"feats": g}

    def _read(self, side: _Side, mem: Memory, r_prev: torch.Tensor,
              z: torch.Tensor) -> torch.Tensor:
        d = self.hidden
        slots, proj = mem.values[..., :d], mem.values[..., d:]  # [B, L, K, d]
        query = (side.w_read(r_prev) + z).unsqueeze(2)
        scores = side.v(torch.tanh(proj + query)).squeeze(-1)  # [B, L, K]
        attn = masked_softmax(scores, mem.mask.unsqueeze(0))
        return (attn.unsqueeze(-1) * slots).sum(dim=2)

    @staticmethod
    def _lstm(gates: torch.Tensor, c_prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cand, o, i, f = gates.chunk(4, dim=-1)
        c = torch.tanh(cand) * torch.sigmoid(i) + c_prev * torch.sigmoid(f)
        return torch.sigmoid(o) * torch.tanh(c), c

    def step(self, inp: torch.Tensor | None, up: State, left: State,
             mem_up: Memory | None, mem_left: Memory | None,
             feats: torch.Tensor | None = None) -> State:
        assert mem_up is not None and mem_left is not None
        d = self.hidden
        if feats is not None:  # layer below: h^x feeds the x side, h^y the y side
            fx, fy = feats.split(d, dim=-1)
            gx, zx = self.x.w_in(fx).split([4 * d, d], dim=-1)
            gy, zy = self.y.w_in(fy).split([4 * d, d], dim=-1)
        else:
            assert inp is not None
            gx, zx, gy, zy = inp.split([4 * d, d, 4 * d, d], dim=-1)
        rx = self._read(self.x, mem_up, up[4], zx)  # eqs. 12, 14
        ry = self._read(self.y, mem_left, left[5], zy)  # eqs. 13, 15
        big_h = torch.cat([rx, ry], dim=-1)  # eq. 17
        hx, cx = self._lstm(gx + self.x.u(big_h), up[1])  # eq. 7
        hy, cy = self._lstm(gy + self.y.u(big_h), left[3])  # eq. 8
        return (torch.cat([hx, self.x.w_mem(hx)], -1), cx,
                torch.cat([hy, self.y.w_mem(hy)], -1), cy, rx, ry)


@register_model("df_lstm")
class DFLSTM(GridPairModel):
    """Stacked DF-LSTMs; the matching vector ``h^x_{n,m} ⊕ h^y_{n,m}`` feeds a linear output."""

    def __init__(
        self,
        ctx: ModelContext,
        hidden: int = 100,
        memory: int = 9,
        layers: int = 1,
        pooling: Literal["last", "max"] = "last",
        dropout: float = 0.0,
        checkpoint: bool = False,
        use_exact_match: bool = False,
    ) -> None:
        """``memory``: K, the slots per axis; ``checkpoint``: see :class:`GridPairModel`;
        ``use_exact_match``: append the exact-match flag to every word vector (not in the
        paper; see ``WordEmbedding``)."""
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
        """Orthogonal initialisation of the LSTMs' recurrent matrices (the paper, §5: Saxe
        et al. 2013): each gate block of ``u`` (``d × 2d``, reading ``H = [r^x; r^y]``) gets
        orthonormal rows. For a trainer honouring ``[optim] lstm_orthogonal`` on modules
        that are not ``nn.LSTM``; call it after any global initialisation."""
        with torch.no_grad():
            for cell in self.blocks:
                for side in (cell.x, cell.y):
                    for block in side.u.weight.chunk(4, dim=0):
                        nn.init.orthogonal_(block)

    def _block(self, cell: DFCell, x: torch.Tensor, y: torch.Tensor,  # type: ignore[override]
               g: torch.Tensor | None, left_mask: torch.Tensor, right_mask: torch.Tensor,
               cells: torch.Tensor) -> torch.Tensor:
        """One DF-LSTM layer over the grid (the masks are not needed: padded cells cannot
        reach real ones); ``[h^x; h^y]`` (``2d``) with padded cells zeroed."""
        d = self.hidden
        hx, hy = run_grid(cell, x.size(1), y.size(1), outputs=cell.outputs,
                          **cell.project(x, y, g))
        return torch.cat([hx[..., :d], hy[..., :d]], dim=-1) * cells

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
