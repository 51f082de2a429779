"""Plain cell-by-cell reference of the C-LSTM and DF-LSTM recurrences (the engine's truth).

Written straight from the papers' equations (spec/clstm.md §3, spec/dflstm.md §3),
independently of ``pairrepro.models.grid``: one Python loop over the cells of the
grid in the direction's own order, neighbours looked up by index arithmetic
(no flipping of inputs), each gate matrix ``A`` applied to the concatenated
vector ``[inputs; recurrent states]`` as printed. Only the weights are taken
from the model. Inputs are a batch of *equal-length*, unpadded pairs (the tests
call it one pair at a time for ragged batches).
"""

from __future__ import annotations

import torch

from pairrepro.models.clstm import CoupledLSTM, LCCell, TCCell
from pairrepro.models.dflstm import DFLSTM, DFCell
from pairrepro.models.grid import DIRECTION_FLIPS

Grid = dict[tuple[int, int], torch.Tensor]


def _order(size: int, reverse: bool) -> list[int]:
    return list(range(size - 1, -1, -1)) if reverse else list(range(size))


def _get(states: Grid, key: tuple[int, int], like: torch.Tensor) -> torch.Tensor:
    """A neighbour's state; zeros outside the grid."""
    return states.get(key, torch.zeros_like(like))


def _lstm(gates: torch.Tensor, c_prev: torch.Tensor, forgets: int = 1,
          c_extra: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """[c~; o; i; f (; f²)] -> (h, c) as in eqs. 1-3 / 9-11."""
    parts = gates.chunk(4 + (forgets - 1), dim=-1)
    c = torch.tanh(parts[0]) * torch.sigmoid(parts[2]) + c_prev * torch.sigmoid(parts[3])
    if c_extra is not None:
        c = c + c_extra * torch.sigmoid(parts[4])
    return torch.sigmoid(parts[1]) * torch.tanh(c), c


def _tc_direction(cell: TCCell, x: torch.Tensor | None, y: torch.Tensor | None,
                  g: torch.Tensor | None, n: int, m: int, rev_x: bool, rev_y: bool) -> Grid:
    if cell.first:
        A = torch.cat([cell.w_x.weight, cell.w_y.weight, cell.u.weight], dim=1)
    else:
        A = torch.cat([cell.w_g.weight, cell.u.weight], dim=1)
    b = cell.u.bias
    batch = (x if x is not None else g).size(0)  # type: ignore[union-attr]
    zero = A.new_zeros(batch, cell.hidden)
    h: Grid = {}
    c: Grid = {}
    di, dj = (1 if rev_x else -1), (1 if rev_y else -1)
    for i in _order(n, rev_x):
        for j in _order(m, rev_y):
            up, left = (i + di, j), (i, j + dj)
            inputs = [x[:, i], y[:, j]] if cell.first else [g[:, i, j]]  # type: ignore[index]
            z = torch.cat([*inputs, _get(h, left, zero), _get(h, up, zero)], dim=-1)
            # eq. 9: f¹ gates c_{i,j-1} (left), f² gates c_{i-1,j} (up)
            h[i, j], c[i, j] = _lstm(z @ A.T + b, _get(c, left, zero), forgets=2,
                                     c_extra=_get(c, up, zero))
    return h


def _lc_direction(cell: LCCell, x: torch.Tensor | None, y: torch.Tensor | None,
                  g: torch.Tensor | None, n: int, m: int, rev_x: bool, rev_y: bool) -> Grid:
    A = torch.cat([cell.w_in.weight, cell.u.weight], dim=1)  # one weight set for LSTM¹, LSTM²
    b = cell.u.bias
    d = cell.hidden
    batch = (x if x is not None else g).size(0)  # type: ignore[union-attr]
    zero = A.new_zeros(batch, d)
    h1: Grid = {}
    c1: Grid = {}
    h2: Grid = {}
    c2: Grid = {}
    di, dj = (1 if rev_x else -1), (1 if rev_y else -1)
    for i in _order(n, rev_x):
        for j in _order(m, rev_y):
            up, left = (i + di, j), (i, j + dj)
            xi = x[:, i] if cell.first else g[:, i, j, :d]  # type: ignore[index]
            yj = y[:, j] if cell.first else g[:, i, j, d:]  # type: ignore[index]
            z1 = torch.cat([xi, _get(h1, up, zero), _get(h2, up, zero)], dim=-1)  # eqs. 5, 7
            z2 = torch.cat([yj, _get(h1, left, zero), _get(h2, left, zero)], dim=-1)  # 6, 8
            h1[i, j], c1[i, j] = _lstm(z1 @ A.T + b, _get(c1, up, zero))
            h2[i, j], c2[i, j] = _lstm(z2 @ A.T + b, _get(c2, left, zero))
    return {k: torch.cat([h1[k], h2[k]], dim=-1) for k in h1}


def _to_tensor(grid: Grid, n: int, m: int) -> torch.Tensor:
    return torch.stack([torch.stack([grid[i, j] for j in range(m)], dim=1) for i in range(n)],
                       dim=1)


def clstm_grid(model: CoupledLSTM, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """Top block's aggregated grid ``[B, n, m, D]`` for unpadded equal-length ids."""
    x, y = model.embed(left), model.embed(right)
    n, m = left.size(1), right.size(1)
    g: torch.Tensor | None = None
    for cell in model.blocks:
        run = _tc_direction if isinstance(cell, TCCell) else _lc_direction
        total: torch.Tensor | None = None
        for rev_x, rev_y in DIRECTION_FLIPS[: model.directions]:
            part = _to_tensor(run(cell, x, y, g, n, m, rev_x, rev_y), n, m)  # type: ignore[arg-type]
            total = part if total is None else total + part  # eq. 13
        g = total
    assert g is not None
    return g


def _pool(g: torch.Tensor, p: int, q: int) -> torch.Tensor:
    """Dynamic max pooling with Python-int group bounds (rows reused when n < p)."""
    n, m = g.size(1), g.size(2)

    def bounds(size: int, groups: int) -> list[tuple[int, int]]:
        out = []
        for a in range(groups):
            start = a * size // groups
            out.append((start, max((a + 1) * size // groups, start + 1)))
        return out

    cells = [g[:, r0:r1, c0:c1].amax(dim=(1, 2)) for r0, r1 in bounds(n, p)
             for c0, c1 in bounds(m, q)]
    return torch.cat(cells, dim=-1)


def clstm_forward(model: CoupledLSTM, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """Model output ``[B, num_outputs]`` for unpadded equal-length ids."""
    g = clstm_grid(model, left, right)
    z = torch.tanh(_pool(g, model.pool_p, model.pool_q) @ model.fc.weight.T + model.fc.bias)
    return z @ model.out.weight.T + model.out.bias


def _df_layer(cell: DFCell, x: torch.Tensor | None, y: torch.Tensor | None,
              g: torch.Tensor | None, n: int, m: int) -> tuple[Grid, Grid]:
    d, K = cell.hidden, cell.memory
    batch = (x if x is not None else g).size(0)  # type: ignore[union-attr]
    zero = cell.x.u.weight.new_zeros(batch, d)

    def side_weights(side: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        w_in = side.w_in.weight  # type: ignore[attr-defined]
        A = torch.cat([w_in[: 4 * d], side.u.weight], dim=1)  # type: ignore[attr-defined]
        Wa = torch.cat([side.w_mem.weight, side.w_read.weight, w_in[4 * d:]],  # type: ignore[attr-defined]
                       dim=1)  # eq. 16: W_a [M_k; r_prev; z]
        return A, Wa, side.v.weight[0]  # type: ignore[attr-defined]

    Ax, Wax, vx = side_weights(cell.x)
    Ay, Way, vy = side_weights(cell.y)

    def read(slots: list[torch.Tensor], r_prev: torch.Tensor, z: torch.Tensor,
             Wa: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if not slots:  # no earlier state along this axis
            return torch.zeros_like(r_prev)
        scores = torch.stack([torch.tanh(torch.cat([s, r_prev, z], -1) @ Wa.T) @ v
                              for s in slots], dim=-1)  # eqs. 14-16
        a = torch.softmax(scores, dim=-1)
        return sum(a[:, k: k + 1] * s for k, s in enumerate(slots))  # type: ignore[return-value]

    hx: Grid = {}
    cx: Grid = {}
    hy: Grid = {}
    cy: Grid = {}
    rx: Grid = {}
    ry: Grid = {}
    for i in range(n):
        for j in range(m):
            xi = x[:, i] if cell.first else g[:, i, j, :d]  # type: ignore[index]
            yj = y[:, j] if cell.first else g[:, i, j, d:]  # type: ignore[index]
            mem_x = [hx[i - k, j] for k in range(K, 0, -1) if i - k >= 0]  # eq. 10
            mem_y = [hy[i, j - k] for k in range(K, 0, -1) if j - k >= 0]  # eq. 11
            rx[i, j] = read(mem_x, _get(rx, (i - 1, j), zero), xi, Wax, vx)
            ry[i, j] = read(mem_y, _get(ry, (i, j - 1), zero), yj, Way, vy)
            H = torch.cat([rx[i, j], ry[i, j]], dim=-1)  # eq. 17
            hx[i, j], cx[i, j] = _lstm(torch.cat([xi, H], -1) @ Ax.T + cell.x.u.bias,
                                       _get(cx, (i - 1, j), zero))  # eq. 7
            hy[i, j], cy[i, j] = _lstm(torch.cat([yj, H], -1) @ Ay.T + cell.y.u.bias,
                                       _get(cy, (i, j - 1), zero))  # eq. 8
    return hx, hy


def dflstm_grid(model: DFLSTM, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """Top layer's ``[h^x; h^y]`` grid ``[B, n, m, 2d]`` for unpadded equal-length ids."""
    x, y = model.embed(left), model.embed(right)
    n, m = left.size(1), right.size(1)
    g: torch.Tensor | None = None
    for cell in model.blocks:
        hx, hy = _df_layer(cell, x, y, g, n, m)
        g = torch.cat([_to_tensor(hx, n, m), _to_tensor(hy, n, m)], dim=-1)
    assert g is not None
    return g


def dflstm_forward(model: DFLSTM, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """Model output ``[B, num_outputs]`` for unpadded equal-length ids."""
    g = dflstm_grid(model, left, right)
    vec = g[:, -1, -1] if model.pooling == "last" else g.amax(dim=(1, 2))
    return vec @ model.out.weight.T + model.out.bias


def reference_grid(model: CoupledLSTM | DFLSTM, left: torch.Tensor,
                   right: torch.Tensor) -> torch.Tensor:
    """Dispatch on the model family."""
    if isinstance(model, DFLSTM):
        return dflstm_grid(model, left, right)
    return clstm_grid(model, left, right)


def reference_forward(model: CoupledLSTM | DFLSTM, left: torch.Tensor,
                      right: torch.Tensor) -> torch.Tensor:
    """Dispatch on the model family."""
    if isinstance(model, DFLSTM):
        return dflstm_forward(model, left, right)
    return clstm_forward(model, left, right)


__all__ = ["DFCell", "LCCell", "TCCell", "reference_forward", "reference_grid"]
