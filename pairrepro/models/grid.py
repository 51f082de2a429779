"""The 2-D recurrence engine shared by the Coupled-LSTMs and the DF-LSTMs.

Both models fill an ``n × m`` grid where cell ``(i, j)`` depends on its upper
neighbour ``(i-1, j)`` and its left neighbour ``(i, j-1)`` (DF-LSTM also reads
the ``K`` previous states along each axis). A cell-by-cell loop needs ``n·m``
sequential steps; here every anti-diagonal ``t = i + j`` is one batched step,
so a grid costs ``n + m - 1`` steps whatever the batch size.

Design:

* **Input projections once.** The additive per-cell input of a cell's gates is
  ``rows[i] + cols[j] + grid[i, j]`` (any of the three may be absent): callers
  project word vectors (``rows``/``cols``) once, in one large matrix product,
  before the sweep. A lower block's grid is better passed as ``feats``: the cell
  gets each diagonal's un-projected slice and folds its projection into the
  recurrent product (``A [ĥ; h_left; h_up]`` as one matrix product). Projecting
  the whole grid first writes a tensor several times wider than the grid, a
  memory-bound product (under 30% of the GEMM rate measured on CPU).
* **Diagonal storage.** Diagonal ``t`` holds rows ``lo_t..hi_t`` (its valid
  cells) plus one zero row on each side, as ``[B, L_t + 2, size]`` tensors.
  Cell ``(i, j)``'s upper neighbour is row ``i-1`` of diagonal ``t-1``, its left
  neighbour row ``i`` of diagonal ``t-1``: thanks to the zero rows (the
  out-of-grid boundary) both are plain slices, one padding per state instead of
  one per neighbour. The ``k``-th memory slot along either axis lives on diagonal
  ``t-k`` (sliced, zero-padded where it reaches outside). No in-place writes, so
  autograd sees a plain graph.
* **Gathers on narrow tensors.** Grids enter and leave the sweep in
  diagonal-major order; :func:`run_grid_directions` composes each direction's
  per-example reversal with that order into one row gather each way, applied
  to the un-projected ``[.., D]`` grid (not to its ``5D``-wide projection).
* **Padding.** Sequences are padded at the end and every dependency points to
  smaller indices, so padded cells can never influence a real cell: a batch of
  ragged pairs gives exactly each pair's own result (the padded cells hold
  values the caller masks out).
* **Directions.** The four directions of C-LSTMs are the same recurrence on
  inputs reversed per example (by each example's own length, so the grid of a
  shorter pair still starts at its own last token). :func:`run_grid_directions`
  stacks the orientations along the batch dimension, runs one sweep and maps
  the results back to the original orientation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from pairrepro.models.base import ModelContext, PairModel

State = tuple[torch.Tensor, ...]

# orientation of each C-LSTM direction: (reverse X, reverse Y); spec/clstm.md §3.4
DIRECTION_FLIPS: tuple[tuple[bool, bool], ...] = (
    (False, False),  # d=1: predecessors (i-1, j), (i, j-1)
    (False, True),  # d=2: predecessors (i-1, j), (i, j+1)
    (True, True),  # d=3: predecessors (i+1, j), (i, j+1)
    (True, False),  # d=4: predecessors (i+1, j), (i, j-1)
)


@dataclass
class Memory:
    """The ``K`` previous states of one component along one axis, for every cell of a diagonal.

    ``values`` is ``[B, L, K, size]`` (slot ``k-1`` holds the state ``k`` steps back),
    ``mask`` is ``[L, K]`` (False where the slot lies before the grid's first row/column).
    """

    values: torch.Tensor
    mask: torch.Tensor


class GridCell(Protocol):
    """What the engine needs from a cell.

    ``state_sizes`` lists the width of every state component. ``memory`` is the
    number of previous states kept along each axis (0 for none); ``memory_up``
    and ``memory_left`` name the components remembered along X (rows) and Y (columns).
    """

    state_sizes: tuple[int, ...]
    memory: int
    memory_up: int
    memory_left: int

    def step(
        self,
        inp: torch.Tensor | None,
        up: State,
        left: State,
        mem_up: Memory | None,
        mem_left: Memory | None,
    ) -> State:
        """New state of the cells of one diagonal; every tensor is ``[B, L, ...]``.

        ``inp`` is the sum of the additive inputs (``rows``, ``cols``, ``grid``; None when
        there are none). When the sweep is given ``feats``, they come as a further keyword
        argument ``feats`` (``[B, L, F]``), for the cell to project itself.
        """
        ...


def _rows(diag: torch.Tensor | None, lo: int, start: int, count: int) -> torch.Tensor | None:
    """Rows ``start .. start+count-1`` of a diagonal whose first stored row is ``lo``.

    Rows the diagonal does not hold (outside the grid) come back as zeros. Diagonals
    are stored with a zero row on each side, so the neighbours of every cell are a
    plain slice (a view); only the memory slots of DF-LSTM reach further and pad.
    """
    if diag is None:
        return None
    stored = diag.size(1)
    if lo <= start and start + count <= lo + stored:
        return diag[:, start - lo : start - lo + count]
    a = max(start, lo)
    b = min(start + count, lo + stored)
    if b <= a:
        return diag.new_zeros(diag.size(0), count, *diag.shape[2:])
    piece = diag[:, a - lo : b - lo]
    pad = [0, 0] * (diag.dim() - 2) + [a - start, start + count - b]
    return F.pad(piece, pad)


def _diagonal_order(n: int, m: int, device: torch.device) -> tuple[torch.Tensor, list[int]]:
    """Flat cell indices ``i*m + j`` sorted by diagonal (then row), and each diagonal's offset."""
    order: list[int] = []
    offsets: list[int] = []
    for t in range(n + m - 1):
        offsets.append(len(order))
        lo, hi = max(0, t - m + 1), min(t, n - 1)
        order += [i * m + (t - i) for i in range(lo, hi + 1)]
    offsets.append(len(order))
    return torch.tensor(order, dtype=torch.long, device=device), offsets


def _split_diagonals(flat: torch.Tensor | None, offsets: list[int]) -> tuple[torch.Tensor, ...]:
    """A diagonal-major ``[B, n*m, F]`` tensor as one ``[B, L_t, F]`` piece per diagonal.

    Split, not sliced: the backward of a slice allocates the whole tensor per diagonal,
    that of a split is one concatenation.
    """
    if flat is None:
        return ()
    return flat.split([b - a for a, b in itertools.pairwise(offsets)], dim=1)


def _sweep(cell: GridCell, n: int, m: int, rows: torch.Tensor | None,
           cols: torch.Tensor | None, grid: torch.Tensor | None, feats: torch.Tensor | None,
           offsets: list[int], outputs: Sequence[int]) -> list[torch.Tensor]:
    """The anti-diagonal sweep; ``grid`` and ``feats`` come and results go in diagonal-major
    order (``[B, n*m, ·]``, cells as :func:`_diagonal_order` lists them)."""
    given = [x for x in (rows, cols, grid, feats) if x is not None]
    batch = given[0].size(0)
    cols_rev = cols.flip(1) if cols is not None else None  # column j of diagonal t: a slice
    grid_diags, feat_diags = _split_diagonals(grid, offsets), _split_diagonals(feats, offsets)
    K = cell.memory
    diags: list[State] = []  # diagonal t holds rows lo_t - 1 .. hi_t + 1 (zero halo rows)
    for t in range(n + m - 1):
        lo, hi = max(0, t - m + 1), min(t, n - 1)
        count = hi - lo + 1
        inp = None
        if rows is not None:
            inp = rows[:, lo : hi + 1]
        if cols_rev is not None:  # j = t - i runs downwards; in the reversed tensor upwards
            piece = cols_rev[:, m - 1 - t + lo : m - 1 - t + hi + 1]
            inp = piece if inp is None else inp + piece
        if grid_diags:
            inp = grid_diags[t] if inp is None else inp + grid_diags[t]
        if t == 0:
            zeros = tuple(given[0].new_zeros(batch, count, s) for s in cell.state_sizes)
            up, left = zeros, zeros
        else:
            prev, plo = diags[t - 1], max(0, t - m) - 1
            up = tuple(c[:, lo - 1 - plo : lo - 1 - plo + count] for c in prev)
            left = tuple(c[:, lo - plo : lo - plo + count] for c in prev)
        mem_up = mem_left = None
        if K > 0:
            mem_up, mem_left = _memories(cell, diags, t, lo, hi, m, batch, given[0])
        if feat_diags:
            state = cell.step(inp, up, left, mem_up, mem_left, feats=feat_diags[t])
        else:
            state = cell.step(inp, up, left, mem_up, mem_left)  # type: ignore[arg-type]
        diags.append(tuple(F.pad(c, (0, 0, 1, 1)) for c in state))
    return [torch.cat([d[c][:, 1:-1] for d in diags], dim=1) for c in outputs]


def _memories(cell: GridCell, diags: list[State], t: int, lo: int, hi: int, m: int,
              batch: int, like: torch.Tensor) -> tuple[Memory, Memory]:
    """The ``K`` previous states along X and Y of the cells of diagonal ``t``."""
    device, count, K = like.device, hi - lo + 1, cell.memory
    row_idx = torch.arange(lo, hi + 1, device=device)
    col_idx = t - row_idx
    ks = torch.arange(1, K + 1, device=device)
    slots_up, slots_left = [], []
    for k in range(1, K + 1):
        if t - k < 0:
            slots_up.append(like.new_zeros(batch, count, cell.state_sizes[cell.memory_up]))
            slots_left.append(like.new_zeros(batch, count, cell.state_sizes[cell.memory_left]))
            continue
        src, slo = diags[t - k], max(0, t - k - m + 1) - 1
        slots_up.append(_rows(src[cell.memory_up], slo, lo - k, count))  # type: ignore[arg-type]
        slots_left.append(_rows(src[cell.memory_left], slo, lo, count))  # type: ignore[arg-type]
    return (Memory(torch.stack(slots_up, dim=2), row_idx.unsqueeze(1) - ks.unsqueeze(0) >= 0),
            Memory(torch.stack(slots_left, dim=2), col_idx.unsqueeze(1) - ks.unsqueeze(0) >= 0))


def run_grid(
    cell: GridCell,
    n: int,
    m: int,
    rows: torch.Tensor | None = None,
    cols: torch.Tensor | None = None,
    grid: torch.Tensor | None = None,
    outputs: Sequence[int] = (0,),
    feats: torch.Tensor | None = None,
) -> list[torch.Tensor]:
    """Sweep the grid in anti-diagonal order and return the requested state components.

    Args:
        cell: the recurrence (see :class:`GridCell`).
        n, m: grid size (padded lengths of X and Y).
        rows: ``[B, n, G]`` input projection of ``x_i`` (added to every cell of row ``i``).
        cols: ``[B, m, G]`` input projection of ``y_j``.
        grid: ``[B, n, m, G]`` per-cell input projection (higher blocks).
        outputs: indices of the state components to return.
        feats: ``[B, n, m, F]`` per-cell features handed to ``cell.step`` as ``feats=``
            (the cell projects them itself, one diagonal at a time: a whole-grid
            projection is a memory-bound matrix product several times wider than ``F``).

    Returns:
        One ``[B, n, m, size]`` grid per requested component.
    """
    given = [x for x in (rows, cols, grid, feats) if x is not None]
    if not given:
        raise ValueError("run_grid needs at least one of rows, cols, grid, feats")
    batch, device = given[0].size(0), given[0].device
    order, offsets = _diagonal_order(n, m, device)

    def diagonal_major(g: torch.Tensor | None) -> torch.Tensor | None:
        return None if g is None else g.reshape(batch, n * m, -1).index_select(1, order)

    flat = _sweep(cell, n, m, rows, cols, diagonal_major(grid), diagonal_major(feats),
                  offsets, outputs)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=device)
    return [f.index_select(1, inverse).view(batch, n, m, -1) for f in flat]


def flip_index(mask: torch.Tensor) -> torch.Tensor:
    """Per-example reversal index ``[B, T]``: position ``i < len`` maps to ``len-1-i``.

    Padding positions map to themselves, so the reversed sequence stays padded at the end.
    The map is its own inverse.
    """
    lengths = mask.sum(dim=1, keepdim=True)
    pos = torch.arange(mask.size(1), device=mask.device).unsqueeze(0)
    return torch.where(pos < lengths, lengths - 1 - pos, pos)


def flip_seq(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Reorder ``x [B, T, ...]`` along dim 1 with a :func:`flip_index` index."""
    idx = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, idx)


def flip_grid(g: torch.Tensor, row_index: torch.Tensor | None,
              col_index: torch.Tensor | None) -> torch.Tensor:
    """Reverse a ``[B, n, m, D]`` grid per example along rows and/or columns (one gather)."""
    if row_index is None and col_index is None:
        return g
    batch, n, m = g.shape[:3]
    rows = row_index if row_index is not None else torch.arange(n, device=g.device).expand(batch, n)
    cols = col_index if col_index is not None else torch.arange(m, device=g.device).expand(batch, m)
    flat = (rows.unsqueeze(2) * m + cols.unsqueeze(1)).reshape(batch, n * m)
    return flip_seq(g.reshape(batch, n * m, -1), flat).view(g.shape)


Projector = Callable[[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None],
                     dict[str, torch.Tensor]]


def run_grid_directions(
    cell: GridCell,
    project: Projector,
    row_mask: torch.Tensor,
    col_mask: torch.Tensor,
    directions: int,
    x: torch.Tensor | None = None,
    y: torch.Tensor | None = None,
    grid: torch.Tensor | None = None,
    outputs: Sequence[int] = (0,),
) -> list[torch.Tensor]:
    """Run the first ``directions`` (1 to 4) C-LSTM directions in one batched sweep.

    ``x [B, n, e]``, ``y [B, m, e]`` and/or ``grid [B, n, m, D]`` are reversed per example
    as :data:`DIRECTION_FLIPS` says, stacked along the batch, and only then turned into
    gate inputs by ``project(x, y, grid) -> {"rows"|"cols"|"grid"|"feats": tensor}`` (a
    position-wise map, so it commutes with the reversal, and reversing the narrower
    un-projected tensors is cheaper; see :func:`run_grid` for the keys). ``project`` gets
    the grid already in diagonal-major order, ``[directions·B, n·m, D]``, and returns
    ``grid``/``feats`` in that order. Results are mapped back to the original orientation.

    Returns:
        One ``[directions, B, n, m, size]`` tensor per requested component.
    """
    if directions not in (1, 2, 3, 4):
        raise ValueError(f"directions must be between 1 and 4, got {directions}")
    n, m = row_mask.size(1), col_mask.size(1)
    batch, device = row_mask.size(0), row_mask.device
    ridx, cidx = flip_index(row_mask), flip_index(col_mask)
    flips = DIRECTION_FLIPS[:directions]
    x_in = y_in = g_in = None
    if x is not None:
        x_in = torch.cat([flip_seq(x, ridx) if fx else x for fx, _ in flips])
    if y is not None:
        y_in = torch.cat([flip_seq(y, cidx) if fy else y for _, fy in flips])
    order, offsets = _diagonal_order(n, m, device)
    # each direction's reversal and the diagonal-major order composed into ONE row gather
    # each way (flat cell q of direction d's grid is cell source[d, b, q] of the original;
    # a reversal is its own inverse, so the same map brings the results back)
    source = _direction_cells(ridx, cidx, flips)  # [directions, B, n*m]
    example = torch.arange(batch, device=device).view(1, batch, 1) * (n * m)
    if grid is not None:
        take = (source[:, :, order] + example).reshape(-1)
        g_in = grid.reshape(batch * n * m, -1).index_select(0, take).view(
            directions * batch, n * m, -1)
    proj = project(x_in, y_in, g_in)
    flat = _sweep(cell, n, m, proj.get("rows"), proj.get("cols"), proj.get("grid"),
                  proj.get("feats"), offsets, outputs)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=device)
    back = (inverse[source] + example + torch.arange(directions, device=device).view(-1, 1, 1)
            * (batch * n * m)).reshape(-1)
    return [f.reshape(-1, f.size(-1)).index_select(0, back).view(directions, batch, n, m, -1)
            for f in flat]


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
    """A pair model made of stacked blocks that each fill the whole ``n × m`` grid.

    Subclasses set ``embed``, ``dropout`` and ``blocks`` (one cell per block) and
    implement :meth:`_block`; :meth:`encode_grid` runs the stack.
    """

    embed: nn.Module
    dropout: nn.Module
    blocks: nn.ModuleList

    def __init__(self, ctx: ModelContext, checkpoint: bool = False) -> None:
        """``checkpoint``: recompute each block during the backward pass instead of keeping
        its activations (less memory for about a third more compute; same results)."""
        super().__init__(ctx)
        self.checkpoint = checkpoint

    def _block(self, cell: nn.Module, x: torch.Tensor, y: torch.Tensor, g: torch.Tensor | None,
               left_mask: torch.Tensor, right_mask: torch.Tensor,
               cells: torch.Tensor) -> torch.Tensor:
        """One block: ``g`` is the grid of the block below (None for the first), ``cells``
        the ``[B, n, m, 1]`` real-cell mask; returns ``[B, n, m, D]``, padded cells zeroed."""
        raise NotImplementedError

    def encode_grid(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                    right_mask: torch.Tensor) -> torch.Tensor:
        """The top block's grid as ``[B, n, m, D]`` (zeros on padded cells).

        With ``checkpoint`` (and grad enabled) each block is recomputed during the backward
        pass (see :meth:`__init__`).
        """
        x, y = self.embed.pair(left, left_mask, right, right_mask)
        x, y = self.dropout(x), self.dropout(y)
        cells = grid_mask(left_mask, right_mask).unsqueeze(-1).to(x.dtype)
        g: torch.Tensor | None = None
        for cell in self.blocks:
            if self.checkpoint and torch.is_grad_enabled():
                g = torch.utils.checkpoint.checkpoint(
                    self._block, cell, x, y, g, left_mask, right_mask, cells,
                    use_reentrant=False)
            else:
                g = self._block(cell, x, y, g, left_mask, right_mask, cells)
        assert g is not None
        return g


def dynamic_pool(g: torch.Tensor, row_mask: torch.Tensor, col_mask: torch.Tensor,
                 p: int, q: int) -> torch.Tensor:
    """Dynamic max pooling of a ``[B, n, m, D]`` grid to ``[B, p*q*D]`` (Socher et al. 2011).

    Each example's real rows are split into ``p`` and its real columns into ``q``
    roughly equal, non-overlapping groups; with fewer rows than ``p`` a row is
    reused by several groups (Socher et al. duplicate). Padded cells never count.
    """
    rows = _group_mask(row_mask, p)  # [B, p, n]
    cols = _group_mask(col_mask, q)  # [B, q, m]
    neg = torch.finfo(g.dtype).min
    # max over the rows of each row group: [B, p, m, D]
    by_row = g.unsqueeze(1).masked_fill(~rows[..., None, None], neg).amax(dim=2)
    # then over the columns of each column group: [B, p, q, D]
    pooled = by_row.unsqueeze(2).masked_fill(~cols[:, None, :, :, None], neg).amax(dim=3)
    return pooled.reshape(g.size(0), -1)


def _group_mask(mask: torch.Tensor, groups: int) -> torch.Tensor:
    """``[B, groups, T]``: which positions fall in each of ``groups`` splits of the real length."""
    lengths = mask.sum(dim=1).clamp(min=1).unsqueeze(1)  # [B, 1]
    a = torch.arange(groups, device=mask.device).unsqueeze(0)  # [1, groups]
    start = torch.div(a * lengths, groups, rounding_mode="floor")
    end = torch.maximum(torch.div((a + 1) * lengths, groups, rounding_mode="floor"), start + 1)
    pos = torch.arange(mask.size(1), device=mask.device).view(1, 1, -1)
    return (pos >= start.unsqueeze(-1)) & (pos < end.unsqueeze(-1))
