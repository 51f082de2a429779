"""The 2-D recurrence engine of the Coupled-LSTMs and the DF-LSTMs (design: docs/grid-engine.md).

Each anti-diagonal ``t = i + j`` of an ``n × m`` grid is one batched step, either **fused**
(:class:`FusedGridCell`: one ``autograd.Function`` with a hand-written backward on the
:class:`Diagonals` layout) or **per diagonal under autograd** (:class:`GridCell`). Padding is
at the end and every dependency points to smaller indices, so padded cells never reach a real
cell.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from pairrepro.models import gridkernels
from pairrepro.models.base import ModelContext, PairModel

State = tuple[torch.Tensor, ...]

# orientation of each C-LSTM direction: (reverse X, reverse Y); docs/spec/clstm.md §3.4
DIRECTION_FLIPS: tuple[tuple[bool, bool], ...] = (
    (False, False),  # d=1: predecessors (i-1, j), (i, j-1)
    (False, True),  # d=2: predecessors (i-1, j), (i, j+1)
    (True, True),  # d=3: predecessors (i+1, j), (i, j+1)
    (True, False),  # d=4: predecessors (i+1, j), (i, j-1)
)


class GridCell(Protocol):
    """A cell of the per-diagonal engine: ``state_sizes``, the width of each state component."""

    state_sizes: tuple[int, ...]

    def step(self, inp: torch.Tensor | None, up: State, left: State) -> State:
        """One diagonal's new state (``[B, L, ...]``) from ``inp``, the sum of ``rows``, ``cols``
        and ``grid`` (None: none); ``feats`` (``[B, L, F]``), if given, come as a keyword."""
        ...


def _sweep(cell: GridCell, diags: Diagonals, rows: torch.Tensor | None,
           cols: torch.Tensor | None, grid: torch.Tensor | None, feats: torch.Tensor | None,
           outputs: Sequence[int]) -> list[torch.Tensor]:
    """The sweep; ``grid``, ``feats`` and the results in :class:`Diagonals` order."""
    m = diags.m
    given = [x for x in (rows, cols, grid, feats) if x is not None]
    batch = given[0].size(0)
    cols_rev = cols.flip(1) if cols is not None else None  # column j of diagonal t: a slice
    # split, not sliced: a slice's backward allocates the whole tensor per diagonal
    grid_diags, feat_diags = (() if x is None else x.split(list(diags.count), dim=1)
                              for x in (grid, feats))
    states: list[State] = []  # diagonal t holds rows lo_t - 1 .. hi_t + 1 (zero halo rows)
    for t in range(diags.steps):
        lo, count = diags.lo[t], diags.count[t]
        inp = None
        if rows is not None:
            inp = rows[:, lo : lo + count]
        if cols_rev is not None:  # j = t - i runs downwards; in the reversed tensor upwards
            piece = cols_rev[:, m - 1 - t + lo : m - 1 - t + lo + count]
            inp = piece if inp is None else inp + piece
        if grid_diags:
            inp = grid_diags[t] if inp is None else inp + grid_diags[t]
        if t == 0:
            zeros = tuple(given[0].new_zeros(batch, count, s) for s in cell.state_sizes)
            up, left = zeros, zeros
        else:
            prev, plo = states[t - 1], max(0, t - m) - 1
            up = tuple(c[:, lo - 1 - plo : lo - 1 - plo + count] for c in prev)
            left = tuple(c[:, lo - plo : lo - plo + count] for c in prev)
        if feat_diags:
            state = cell.step(inp, up, left, feats=feat_diags[t])  # type: ignore[call-arg]
        else:
            state = cell.step(inp, up, left)
        states.append(tuple(F.pad(c, (0, 0, 1, 1)) for c in state))
    return [torch.cat([d[c][:, 1:-1] for d in states], dim=1) for c in outputs]


@dataclass(frozen=True)
class Diagonals:
    """Index tables of the fused sweeps' layout: cells by anti-diagonal, then row; per-cell
    tensors are ``[n·m, B, width]``, so a diagonal is one contiguous ``[L_t, B, width]`` block.

    ``lo``, ``count``, ``start``: each diagonal's first row, cells and offset; ``left[t]``,
    ``up[t]``: ``(first cell, its neighbour, length)`` in diagonals ``t``, ``t-1`` of the run
    of cells that have that neighbour; ``order``: each cell's ``i·m + j``."""

    n: int
    m: int
    lo: tuple[int, ...]
    count: tuple[int, ...]
    start: tuple[int, ...]
    left: tuple[tuple[int, int, int], ...]
    up: tuple[tuple[int, int, int], ...]
    order: torch.Tensor

    @property
    def cells(self) -> int:
        return self.n * self.m

    @property
    def steps(self) -> int:
        return self.n + self.m - 1

    def block(self, t: int) -> slice:
        """The cells of diagonal ``t``."""
        return slice(self.start[t], self.start[t] + self.count[t])


@functools.lru_cache(maxsize=64)
def diagonals(n: int, m: int, device: torch.device) -> Diagonals:
    """The (cached) :class:`Diagonals` of an ``n × m`` grid, index tensors on ``device``."""
    lo = [max(0, t - m + 1) for t in range(n + m - 1)]
    hi = [min(t, n - 1) for t in range(n + m - 1)]
    count = [h - a + 1 for a, h in zip(lo, hi, strict=True)]
    start = [0, *itertools.accumulate(count)][:-1]
    left, up = [(0, 0, 0)], [(0, 0, 0)]
    for t in range(1, n + m - 1):
        # left of (i, j) is (i, j-1): row i of diagonal t-1; up is row i-1 of diagonal t-1
        first, last = lo[t], min(hi[t], hi[t - 1])
        left.append((0, first - lo[t - 1], last - first + 1))
        first = max(lo[t], lo[t - 1] + 1)
        up.append((first - lo[t], first - 1 - lo[t - 1], hi[t] - first + 1))
    order = [i * m + t - i for t in range(n + m - 1) for i in range(lo[t], hi[t] + 1)]
    return Diagonals(n, m, tuple(lo), tuple(count), tuple(start), tuple(left), tuple(up),
                     torch.tensor(order, dtype=torch.long, device=device))


def tanh_(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``tanh(x)`` into ``out`` (in place when None); on CPU as ``2 σ(2x) − 1``, several times
    faster than torch's CPU ``tanh`` and equal up to rounding (about 2e-7 in float32)."""
    out = x if out is None else out
    if x.device.type != "cpu":
        return torch.tanh(x, out=out)
    return torch.mul(x, 2, out=out).sigmoid_().mul_(2).sub_(1)


Neighbour = tuple[int, torch.Tensor]  # (first row within the diagonal, rows of a neighbour)


def lstm_forward(gates: torch.Tensor, prev: Sequence[Neighbour], c: torch.Tensor,
                 tanh_c: torch.Tensor, h: torch.Tensor, h2: torch.Tensor | None = None) -> None:
    """One diagonal's LSTM update into preallocated tensors: ``c = c~ ⊙ i + Σ_k f_k ⊙ c_k``,
    ``tanh(c)``, ``h = o ⊙ tanh(c)`` (also into ``h2``). ``gates`` ``[L, B, (3+k)·d]``
    (``[c~, o, i, f_1 .. f_k]``) become the activations; ``prev[k] = (r, c_k)``: the cells
    ``f_k`` gates, for rows ``r ..`` (other rows read zero)."""
    outputs = [h] if h2 is None else [h, h2]
    if gridkernels.fits_lstm(gates, prev, [c, tanh_c], outputs):
        gridkernels.lstm_forward(gates, prev, c, tanh_c, h, h2)
        return
    d = c.size(-1)
    cand = tanh_(gates[..., :d])
    gates[..., d:].sigmoid_()
    torch.mul(cand, gates[..., 2 * d : 3 * d], out=c)
    for k, (row, c_k) in enumerate(prev):
        rows = slice(row, row + c_k.size(0))
        c[rows].addcmul_(gates[rows, :, (3 + k) * d : (4 + k) * d], c_k)
    tanh_(c, out=tanh_c)
    torch.mul(gates[..., d : 2 * d], tanh_c, out=h)
    if h2 is not None:
        h2.copy_(h)


def lstm_backward(gates: torch.Tensor, prev: Sequence[Neighbour], tanh_c: torch.Tensor,
                  dh: torch.Tensor | Sequence[torch.Tensor], dc: torch.Tensor,
                  d_gates: torch.Tensor, d_prev: Sequence[torch.Tensor]) -> None:
    """The backward pass of :func:`lstm_forward`: ``dh`` (up to three terms, the states'
    dtype first) and ``dc`` reach ``h`` and ``c`` from later cells; ``dc`` becomes ``c``'s full
    gradient, ``d_gates`` is written, ``d_prev[k]`` accumulates ``c_k``'s."""
    if isinstance(dh, torch.Tensor):
        dh = [dh]
    if (len(dh) <= 3 and len(d_prev) == len(prev)
            and gridkernels.fits_lstm(gates, prev, [tanh_c, dc, dh[0], *d_prev],
                                      [d_gates, *dh[1:]])):
        gridkernels.lstm_backward(gates, prev, tanh_c, dh, dc, d_gates, d_prev)
        return
    dh_sum = functools.reduce(torch.add, dh)
    d = dc.size(-1)
    cand, o, i = gates[..., :d], gates[..., d : 2 * d], gates[..., 2 * d : 3 * d]
    one = tanh_c.new_ones(())
    dc.add_(torch.addcmul(one, tanh_c, tanh_c, value=-1).mul_(o).mul_(dh_sum))
    torch.mul(dh_sum, tanh_c, out=d_gates[..., d : 2 * d])
    torch.mul(dc, cand, out=d_gates[..., 2 * d : 3 * d])
    torch.addcmul(one, cand, cand, value=-1, out=d_gates[..., :d]).mul_(i).mul_(dc)
    for k in range(gates.size(-1) // d - 3):
        f = d_gates[..., (3 + k) * d : (4 + k) * d]
        if k >= len(prev):
            f.zero_()
            continue
        row, c_k = prev[k]
        rows = slice(row, row + c_k.size(0))
        f[:row].zero_()
        f[rows.stop :].zero_()
        torch.mul(dc[rows], c_k, out=f[rows])
        d_prev[k].addcmul_(dc[rows], gates[rows, :, (3 + k) * d : (4 + k) * d])
    sig = gates[..., d:]
    d_gates[..., d:].mul_(torch.addcmul(sig, sig, sig, value=-1))


def accumulate_mm(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """``acc += a @ b``; bf16 operands add their product into a float32 ``acc`` (summed in
    bf16, the small diagonals' share would be lost)."""
    if a.dtype == acc.dtype:
        torch.addmm(acc, a, b, out=acc)
    else:
        acc.add_(torch.mm(a, b))


class FusedGridCell(Protocol):
    """A cell that runs a whole sweep: ``rows`` ``[n, B, ·]``, ``cols`` ``[m, B, ·]``, ``feats``
    ``[n·m, B, ·]`` in, state components ``[n·m, B, size]`` out (:class:`Diagonals` order)."""

    def sweep(self, diags: Diagonals, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        ...


def state_dtype(dtype: torch.dtype) -> torch.dtype:
    """Memory cells' and accumulated gradients' dtype: float32 for bf16 (which drifts)."""
    return torch.promote_types(dtype, torch.float32)


def compute_dtype(*tensors: torch.Tensor | None) -> list[torch.Tensor | None]:
    """``tensors`` in the autocast dtype where autocast is on (a fused sweep's buffers have
    one dtype; it runs with autocast off inside)."""
    device = next(t for t in tensors if t is not None).device.type
    if not torch.is_autocast_enabled(device):
        return list(tensors)
    dtype = torch.get_autocast_dtype(device)
    return [None if t is None else t.to(dtype) for t in tensors]


def flip_index(mask: torch.Tensor) -> torch.Tensor:
    """Per-example reversal index ``[B, T]`` (padding maps to itself); its own inverse."""
    lengths = mask.sum(dim=1, keepdim=True)
    pos = torch.arange(mask.size(1), device=mask.device).unsqueeze(0)
    return torch.where(pos < lengths, lengths - 1 - pos, pos)


def flip_seq(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Reorder ``x [B, T, ...]`` along dim 1 with a :func:`flip_index` index."""
    idx = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, idx)


Projector = Callable[[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None],
                     dict[str, torch.Tensor]]


def run_grid_directions(cell: GridCell | FusedGridCell, project: Projector, row_mask: torch.Tensor,
                        col_mask: torch.Tensor, directions: int, x: torch.Tensor | None = None,
                        y: torch.Tensor | None = None, grid: torch.Tensor | None = None,
                        outputs: Sequence[int] = (0,)) -> list[torch.Tensor]:
    """The first ``directions`` (1 to 4) C-LSTM directions in one batched sweep, summed
    (eq. 13): one ``[B, n, m, size]`` tensor per component.

    ``x [B, n, e]``, ``y [B, m, e]``, ``grid [B, n, m, D]`` are reversed as
    :data:`DIRECTION_FLIPS` says and stacked along the batch before ``project`` (cheaper on
    the narrower inputs); it gets the grid as ``[directions·B, n·m, D]`` for a
    :class:`GridCell`, ``[n·m, directions·B, D]`` (and ``x``, ``y`` as ``[n, directions·B,
    e]``) for a :class:`FusedGridCell`."""
    n, m = row_mask.size(1), col_mask.size(1)
    batch, device = row_mask.size(0), row_mask.device
    ridx, cidx = flip_index(row_mask), flip_index(col_mask)
    flips = DIRECTION_FLIPS[:directions]
    x_in = y_in = None
    if x is not None:
        x_in = torch.cat([flip_seq(x, ridx) if fx else x for fx, _ in flips])
    if y is not None:
        y_in = torch.cat([flip_seq(y, cidx) if fy else y for _, fy in flips])
    # each direction's reversal and the sweep's cell order composed into ONE row gather
    # each way (flat cell q of direction d's grid is cell source[d, b, q] of the original;
    # a reversal is its own inverse, so the same map brings the results back)
    source = _direction_cells(ridx, cidx, flips)  # [directions, B, n*m]
    example = torch.arange(batch, device=device).view(1, batch, 1) * (n * m)
    fused = hasattr(cell, "sweep")
    diags = diagonals(n, m, device)
    inverse = diags.order.argsort()
    lanes = torch.arange(directions, device=device).view(-1, 1, 1)
    if fused:  # sweep row (q, d, b) of q·directions·B + d·B + b
        take = (source[:, :, diags.order] + example).permute(2, 0, 1).reshape(-1)
        readers = inverse[source] * (directions * batch) + lanes * batch + example // (n * m)
        x_in, y_in = (None if v is None else v.transpose(0, 1) for v in (x_in, y_in))
    else:  # sweep row (d, b, q) of d·B·n·m + b·n·m + q
        take = (source[:, :, diags.order] + example).reshape(-1)
        readers = inverse[source] + example + lanes * (batch * n * m)
    readers = readers.reshape(directions, -1)  # [directions, B·n·m]: the rows of each cell
    g_in = None
    if grid is not None:
        g_in = _Regroup.apply(grid.reshape(batch * n * m, -1), take, readers, False)
        g_in = g_in.view(*((n * m, -1) if fused else (-1, n * m)), g_in.size(-1))
    proj = project(x_in, y_in, g_in)
    if fused:
        flat = cell.sweep(diags, {k: v.contiguous() for k, v in proj.items()})  # type: ignore[union-attr]
    else:
        flat = _sweep(cell, diags, proj.get("rows"), proj.get("cols"), proj.get("grid"),  # type: ignore[arg-type]
                      proj.get("feats"), outputs)
    return [_Regroup.apply(f.reshape(-1, f.size(-1)), take, readers, True).view(
        batch, n, m, -1) for f in flat]


class _Regroup(torch.autograd.Function):
    """Sweep row ``r`` is cell ``take[r]``; cell ``c``'s rows are ``readers[:, c]``. Spreading
    and collecting (summing a cell's rows) are each other's adjoint: both passes gather."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, take: torch.Tensor, readers: torch.Tensor,  # type: ignore[override]
                collect: bool) -> torch.Tensor:
        ctx.maps, ctx.collect = (take, readers), collect
        if not collect:
            return x.index_select(0, take)
        out = x.index_select(0, readers[0])
        for rows in readers[1:]:
            out.add_(x.index_select(0, rows))
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        return _Regroup.apply(grad, *ctx.maps, not ctx.collect), None, None, None


def _direction_cells(ridx: torch.Tensor, cidx: torch.Tensor,
                     flips: Sequence[tuple[bool, bool]]) -> torch.Tensor:
    """``[len(flips), B, n*m]``: the flat cell ``i*m + j`` each cell of every orientation reads."""
    batch, n, m = ridx.size(0), ridx.size(1), cidx.size(1)
    plain_r = torch.arange(n, device=ridx.device).expand(batch, n)
    plain_c = torch.arange(m, device=ridx.device).expand(batch, m)
    return torch.stack([((ridx if fx else plain_r).unsqueeze(2) * m
                         + (cidx if fy else plain_c).unsqueeze(1)).reshape(batch, n * m)
                        for fx, fy in flips])


def grid_mask(row_mask: torch.Tensor, col_mask: torch.Tensor) -> torch.Tensor:
    """``[B, n, m]`` mask of real cells."""
    return row_mask.unsqueeze(2) & col_mask.unsqueeze(1)


class GridPairModel(PairModel):
    """Stacked blocks over the ``n × m`` grid: subclasses set ``embed``, ``dropout``,
    ``blocks`` (cells with ``project`` and ``outputs``) and ``directions``."""

    embed: nn.Module
    dropout: nn.Module
    blocks: nn.ModuleList
    directions: int

    def __init__(self, ctx: ModelContext, checkpoint: bool = False) -> None:
        """``checkpoint``: recompute each block in the backward pass (less memory, same results)."""
        super().__init__(ctx)
        self.checkpoint = checkpoint

    def _block(self, cell: Any, x: torch.Tensor, y: torch.Tensor, g: torch.Tensor | None,
               left_mask: torch.Tensor, right_mask: torch.Tensor) -> torch.Tensor:
        """One block over ``g``, the grid below (None for the first): ``[B, n, m, D]``, the
        components in ``cell.outputs`` concatenated."""
        states = run_grid_directions(cell, cell.project, left_mask, right_mask, self.directions,
                                     x=x, y=y, grid=g, outputs=cell.outputs)
        return states[0] if len(states) == 1 else torch.cat(states, dim=-1)

    def encode_grid(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                    right_mask: torch.Tensor) -> torch.Tensor:
        """The top block's grid as ``[B, n, m, D]`` (zeros on padded cells)."""
        x, y = self.embed.pair(left, left_mask, right, right_mask)
        x, y = self.dropout(x), self.dropout(y)
        g: torch.Tensor | None = None
        for cell in self.blocks:
            if self.checkpoint and torch.is_grad_enabled():
                g = torch.utils.checkpoint.checkpoint(
                    self._block, cell, x, y, g, left_mask, right_mask, use_reentrant=False)
            else:
                g = self._block(cell, x, y, g, left_mask, right_mask)
        assert g is not None
        return g * grid_mask(left_mask, right_mask).unsqueeze(-1).to(g.dtype)


def dynamic_pool(g: torch.Tensor, row_mask: torch.Tensor, col_mask: torch.Tensor,
                 p: int, q: int) -> torch.Tensor:
    """Dynamic max pooling (Socher et al. 2011) of ``[B, n, m, D]`` to ``[B, p*q*D]``: real rows
    and columns in ``p`` and ``q`` near-equal groups (a short text's rows serve several)."""
    rows = _group_mask(row_mask, p)  # [B, p, n]
    cols = _group_mask(col_mask, q)  # [B, q, m]
    neg = torch.finfo(g.dtype).min
    # max over the rows of each row group: [B, p, m, D]
    by_row = g.unsqueeze(1).masked_fill(~rows[..., None, None], neg).amax(dim=2)
    # then over the columns of each column group: [B, p, q, D]
    pooled = by_row.unsqueeze(2).masked_fill(~cols[:, None, :, :, None], neg).amax(dim=3)
    return pooled.reshape(g.size(0), -1)


def _group_mask(mask: torch.Tensor, groups: int) -> torch.Tensor:
    """``[B, groups, T]``: the positions of each of ``groups`` splits of the real length."""
    lengths = mask.sum(dim=1).clamp(min=1).unsqueeze(1)  # [B, 1]
    a = torch.arange(groups, device=mask.device).unsqueeze(0)  # [1, groups]
    start = torch.div(a * lengths, groups, rounding_mode="floor")
    end = torch.maximum(torch.div((a + 1) * lengths, groups, rounding_mode="floor"), start + 1)
    pos = torch.arange(mask.size(1), device=mask.device).view(1, 1, -1)
    return (pos >= start.unsqueeze(-1)) & (pos < end.unsqueeze(-1))
