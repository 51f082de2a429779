"""Coupled-LSTMs (Liu et al., EMNLP 2016): LC-LSTMs and TC-LSTMs on the 2-D grid engine.

Equations and the readings of their ambiguities are in ``../shared/spec/clstm.md`` §3:

* **TC-LSTM** (eqs. 9-11): one cell per grid position with two forget gates,
  ``A [x_i; y_j; h_{i,j-1}; h_{i-1,j}]``, output ``h_{i,j}`` (d).
* **LC-LSTM** (eqs. 5-8): LSTM¹ along X reads ``x_i`` and ``[h¹; h²]_{i-1,j}``,
  LSTM² along Y reads ``y_j`` and ``[h¹; h²]_{i,j-1}``; output ``[h¹; h²]`` (2d).
* Four directions share their weights and are summed (eq. 13); blocks stack,
  a TC block above the first reads the fused grid ``ĥ_{i,j}``, an LC block
  feeds the X half of ``ĥ_{i,j}`` to LSTM¹ and the Y half to LSTM².
* LSTM¹ and LSTM² of LC share one weight set. With e=100, d=50 and a 50-unit
  fully connected layer these choices give exactly the θ_M column of Table 2
  (weight matrices only, §3.8): 45K, 77.5K, 135K, 190K.
* Dynamic max pooling to ``p × q``, a tanh fully connected layer, then a
  linear output: ``num_outputs`` logits, or one score for ranking.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pairrepro.models.base import ModelContext
from pairrepro.models.grid import GridPairModel, Memory, State, dynamic_pool, run_grid_directions
from pairrepro.models.layers import WordEmbedding
from pairrepro.models.registry import register_model


class TCCell(nn.Module):
    """Tightly coupled cell (eqs. 9-11); gate order ``[c~, o, i, f¹ (left), f² (up)]``."""

    memory = 0
    memory_up = 0
    memory_left = 0

    def __init__(self, in_dim: int, hidden: int, first: bool) -> None:
        super().__init__()
        self.hidden = hidden
        self.first = first
        self.state_sizes = (hidden, hidden)  # h, c
        if first:  # A's columns for x_i and y_j
            self.w_x = nn.Linear(in_dim, 5 * hidden, bias=False)
            self.w_y = nn.Linear(in_dim, 5 * hidden, bias=False)
        else:  # A's columns for the fused ĥ_{i,j} of the block below
            self.w_g = nn.Linear(in_dim, 5 * hidden, bias=False)
        self.u = nn.Linear(2 * hidden, 5 * hidden)  # columns for [h_{i,j-1}; h_{i-1,j}], and b

    @property
    def out_dim(self) -> int:
        return self.hidden

    def project(self, x: torch.Tensor | None, y: torch.Tensor | None,
                g: torch.Tensor | None) -> dict[str, torch.Tensor]:
        if self.first:
            assert x is not None and y is not None
            # b rides on the rows (added once per row, not once per cell)
            return {"rows": F.linear(x, self.w_x.weight, self.u.bias), "cols": self.w_y(y)}
        assert g is not None
        # the fused grid stays un-projected: step() projects one diagonal at a time inside
        # its recurrent product (a whole-grid projection is memory-bound)
        return {"feats": g}

    def step(self, inp: torch.Tensor | None, up: State, left: State,
             mem_up: Memory | None, mem_left: Memory | None,
             feats: torch.Tensor | None = None) -> State:
        (h_up, c_up), (h_left, c_left) = up, left
        if feats is None:  # first block: A's x_i, y_j columns and b arrive in inp
            assert inp is not None
            z = torch.cat([h_left, h_up], dim=-1)
            # inp as addmm's added matrix: the sum costs no pass of its own
            gates = torch.addmm(inp.reshape(-1, inp.size(-1)), z.view(-1, z.size(-1)),
                                self.u.weight.t()).view(inp.shape)
        else:  # A [ĥ_{i,j}; h_{i,j-1}; h_{i-1,j}] as one product
            gates = F.linear(torch.cat([feats, h_left, h_up], dim=-1),
                             torch.cat([self.w_g.weight, self.u.weight], dim=1), self.u.bias)
        d = self.hidden
        # one tanh and one sigmoid call for the five gates (four of them are sigmoids); a
        # split, as its backward is one concatenation where a slice's zero-fills the whole
        pre_cand, pre_sig = gates.split([d, 4 * d], dim=-1)
        cand = torch.tanh(pre_cand)
        o, i, f1, f2 = torch.sigmoid(pre_sig).chunk(4, dim=-1)
        c = torch.addcmul(torch.addcmul(cand * i, c_left, f1), c_up, f2)  # fewer passes
        h = o * torch.tanh(c)
        return h, c

    def output(self, states: list[torch.Tensor]) -> torch.Tensor:
        return states[0]

    outputs = (0,)


class LCCell(nn.Module):
    """Loosely coupled cell (eqs. 5-8): two LSTMs sharing one weight set.

    State ``(h¹, c¹, h², c²)``; the per-cell input is ``[A_in x_i; A_in y_j]`` (8d).
    """

    memory = 0
    memory_up = 0
    memory_left = 0
    outputs = (0, 2)

    def __init__(self, in_dim: int, hidden: int, first: bool) -> None:
        super().__init__()
        self.hidden = hidden
        self.first = first
        self.state_sizes = (hidden, hidden, hidden, hidden)
        self.w_in = nn.Linear(in_dim, 4 * hidden, bias=False)  # A's input columns
        self.u = nn.Linear(2 * hidden, 4 * hidden)  # A's columns for H = [h¹; h²], and b

    @property
    def out_dim(self) -> int:
        return 2 * self.hidden

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
             mem_up: Memory | None, mem_left: Memory | None,
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

    def output(self, states: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(states, dim=-1)


class CoupledLSTM(GridPairModel):
    """Stacked blocks of (one or four) C-LSTMs + aggregation, dynamic pooling, FC, output."""

    cell_class: type[TCCell] | type[LCCell] = TCCell

    def __init__(
        self,
        ctx: ModelContext,
        hidden: int = 50,
        directions: int = 4,
        layers: int = 1,
        pool_p: int = 1,
        pool_q: int = 1,
        fc_hidden: int = 50,
        dropout: float = 0.0,
        checkpoint: bool = False,
        use_exact_match: bool = False,
    ) -> None:
        """``directions``: 1 or 4 (summed, eq. 13); ``pool_p × pool_q``: dynamic pooling
        size; ``checkpoint``: see :class:`GridPairModel`; ``use_exact_match``: append the
        exact-match flag to every word vector (not in the paper; see ``WordEmbedding``)."""
        super().__init__(ctx, checkpoint)
        if directions not in (1, 4):
            raise ValueError(f"directions must be 1 or 4, got {directions}")
        if layers < 1 or pool_p < 1 or pool_q < 1:
            raise ValueError("layers, pool_p and pool_q must be at least 1")
        self.directions = directions
        self.pool_p, self.pool_q = pool_p, pool_q
        self.embed = WordEmbedding(ctx, use_exact_match)
        cells = []
        in_dim = self.embed.dim
        for layer in range(layers):
            cell = self.cell_class(in_dim, hidden, first=layer == 0)
            cells.append(cell)
            in_dim = hidden  # TC: the fused ĥ; LC: each LSTM's half of ĥ
        self.blocks = nn.ModuleList(cells)
        out_dim = cells[-1].out_dim
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(pool_p * pool_q * out_dim, fc_hidden)
        self.out = nn.Linear(fc_hidden, ctx.num_outputs)

    def _block(self, cell: TCCell | LCCell, x: torch.Tensor, y: torch.Tensor,  # type: ignore[override]
               g: torch.Tensor | None, left_mask: torch.Tensor, right_mask: torch.Tensor,
               cells: torch.Tensor) -> torch.Tensor:
        """One block: the directions in one sweep, summed (eq. 13), padded cells zeroed;
        the aggregated grid ``ĥ``."""
        states = run_grid_directions(cell, cell.project, left_mask, right_mask, self.directions,
                                     x=x, y=y, grid=g, outputs=cell.outputs)
        return cell.output(states).sum(dim=0) * cells

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        g = self.encode_grid(left, left_mask, right, right_mask)
        pooled = dynamic_pool(g, left_mask, right_mask, self.pool_p, self.pool_q)
        return self.out(self.dropout(torch.tanh(self.fc(pooled))))


@register_model("tc_lstm")
class TCLSTM(CoupledLSTM):
    """Tightly coupled LSTMs (``directions`` = 1 for the single-direction rows)."""

    cell_class = TCCell


@register_model("lc_lstm")
class LCLSTM(CoupledLSTM):
    """Loosely coupled LSTMs (``directions`` = 1 for the single-direction rows)."""

    cell_class = LCCell
