"""CSRAN: Co-Stack Residual Affinity Networks (Tay, Tuan, Hui, EMNLP 2018); equations in
``docs/spec/csran.md``, readings (mostly the authors' code) and departures in its 3.9. Every
parameter is shared by the two texts. Ablations (Table 8): ``use_mar=False`` removes the CAFE
blocks; ``use_csra=False`` aligns on the top layer only.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from pairrepro.models.base import (
    POSITIVE,
    ModelContext,
    PairModel,
    check_hparams,
    one_of,
    register_model,
)
from pairrepro.models.grid import flip_index
from pairrepro.models.layers import (
    MLP,
    CharEncoder,
    FactorizationMachine,
    Highway,
    WordEmbedding,
    masked_softmax,
    masked_sum,
    run_rnn,
    soft_align,
)

AFFINITIES = ("max", "max_sum")


def run_lstm_padded(lstm: nn.LSTM, x: torch.Tensor,
                    mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`run_rnn` of a one-layer LSTM on padded input, which reaches oneDNN's fused LSTM on
    CPU (packed input never does): the backward direction runs alone over every example
    reversed, so padding (at the end) never reaches a real position."""
    assert lstm.num_layers == 1
    batch, steps = mask.shape
    # a row gather (an element-wise gather's backward is a slow scatter)
    rows = (flip_index(mask) + torch.arange(batch, device=x.device)[:, None] * steps).view(-1)
    ends, zeros = (mask.sum(1) - 1).clamp(min=0), x.new_zeros(1, batch, lstm.hidden_size)
    per = len(lstm._flat_weights) // (1 + lstm.bidirectional)
    outs, lasts = [], []
    for d in range(1 + lstm.bidirectional):
        out = torch._VF.lstm(x.flatten(0, 1).index_select(0, rows).view_as(x) if d else x,  # type: ignore[attr-defined]
                             (zeros, zeros), lstm._flat_weights[d * per : (d + 1) * per],
                             lstm.bias, 1, 0.0, lstm.training, False, True)[0]
        lasts.append(out[torch.arange(batch, device=x.device), ends])
        outs.append(out.flatten(0, 1).index_select(0, rows).view_as(out) if d else out)
    out = torch.cat(outs, dim=-1)
    return out * mask.unsqueeze(-1).to(out.dtype), torch.cat(lasts, dim=-1)


def _encode(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """An encoder's outputs: padded in CPU bf16 (compared by interval; 1.2-1.8x as fast at
    TrecQA's sizes), else packed (fp32 stays bit-exact). The aggregation LSTM stays packed:
    oneDNN's backward over its wide input was 1.5x slower."""
    padded = x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
    return (run_lstm_padded if padded else run_rnn)(lstm, x, mask)[0]


class CAFEBlock(nn.Module):
    """One Multi-level Attention Refinement block, ``[B, T, d] -> [B, T, d + 6]``: inter-
    (``F(a_i) . F(b_j)``) and intra-attention (``G(a_i) . G(a_j) / sqrt(d)``) each align a
    vector; per attention, factorization machines compress ``[x; y]``, ``x * y``, ``x - y``."""

    def __init__(self, dim: int, fm_factors: int = 32) -> None:
        super().__init__()
        self.inter_proj = nn.Sequential(nn.Linear(dim, dim, bias=False), nn.ReLU())
        self.intra_proj = nn.Sequential(nn.Linear(dim, dim, bias=False), nn.ReLU())
        self.fms = nn.ModuleList(
            FactorizationMachine(n, fm_factors) for n in (2 * dim, dim, dim, 2 * dim, dim, dim)
        )
        self.scale = 1.0 / math.sqrt(dim)

    def _features(self, x: torch.Tensor, y: torch.Tensor, offset: int) -> list[torch.Tensor]:
        cat, mul, sub = self.fms[offset: offset + 3]
        return [cat(torch.cat([x, y], dim=-1)), mul(x * y), sub(x - y)]

    def _intra(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        g = self.intra_proj(x)
        scores = torch.bmm(g, g.transpose(1, 2)) * self.scale
        return torch.bmm(masked_softmax(scores, mask.unsqueeze(1), dim=2), x)

    def forward(self, a: torch.Tensor, a_mask: torch.Tensor, b: torch.Tensor,
                b_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        fa, fb = self.inter_proj(a), self.inter_proj(b)
        b_aligned, a_aligned = soft_align(torch.bmm(fa, fb.transpose(1, 2)), a, a_mask,
                                          b, b_mask)
        out = []
        for x, aligned, mask in ((a, b_aligned, a_mask), (b, a_aligned, b_mask)):
            feats = self._features(x, aligned, 0) + self._features(x, self._intra(x, mask), 3)
            out.append(torch.cat([x, torch.stack(feats, dim=-1)], dim=-1))
        return out[0], out[1]


def co_stack_affinity(ha: torch.Tensor, hb: torch.Tensor, mode: str = "max") -> torch.Tensor:
    """CSRA affinity of stacked outputs ``ha [B, k, n, d]``, ``hb [B, k, m, d]`` -> ``[B, n, m]``:
    ``max``, ``s_ij = max_{p,q} a_{p,i} . b_{q,j}`` (the authors' code); ``max_sum``,
    ``s_ij = max_p sum_q a_{p,i} . b_{q,j}`` (Eq. 4 as printed)."""
    if mode == "max":
        return torch.einsum("bpid,bqjd->bpqij", ha, hb).flatten(1, 2).amax(dim=1)
    return torch.einsum("bpid,bjd->bpij", ha, hb.sum(dim=1)).amax(dim=1)


@register_model("csran")
class CSRAN(PairModel):
    """CSRAN of the module docstring; defaults: the authors' logged run (docs/spec/csran.md 2.3).

    Args:
        hidden: units per direction of each stacked Bi-LSTM, and the highway projection's width.
        layers: stacked Bi-LSTM layers k; ``char_dim = 0``: no characters.
        highway_layers: projecting words to ``hidden`` (0: none).
        aggr_hidden: 0 = ``hidden``.
        compare_pooled: ``z = [za; zb; za - zb; za * zb]`` instead of ``[za; zb]``.
        output_highway: highway prediction layers rather than plain ReLU layers.
    """

    def __init__(self, ctx: ModelContext, hidden: int = 200, layers: int = 3, char_dim: int = 20,
                 char_hidden: int = 128, max_word_len: int = 16, highway_layers: int = 1,
                 use_mar: bool = True, use_csra: bool = True, affinity: str = "max",
                 fm_factors: int = 32, aggr_layers: int = 2, aggr_hidden: int = 0,
                 compare_pooled: bool = True, out_layers: int = 2, out_hidden: int = 300,
                 output_highway: bool = True, dropout: float = 0.2,
                 use_exact_match: bool = False) -> None:
        super().__init__(ctx)
        check_hparams("csran", layers=(layers, POSITIVE),
                      affinity=(affinity, one_of(AFFINITIES)))
        self.use_mar, self.use_csra, self.affinity = use_mar, use_csra, affinity
        self.compare_pooled = compare_pooled
        self.embed = WordEmbedding(ctx, use_exact_match)
        self.chars = (CharEncoder(ctx.vocab, char_dim, char_hidden, max_word_len, "lstm",
                                  padding_idx=ctx.padding_idx) if char_dim > 0 else None)
        word_dim = self.embed.dim + (char_hidden if self.chars is not None else 0)
        self.dropout = nn.Dropout(dropout)
        self.project = (Highway(word_dim, hidden, highway_layers)
                        if highway_layers > 0 else None)
        dim = hidden if self.project is not None else word_dim
        self.cafe = nn.ModuleList()
        self.encoders = nn.ModuleList()
        for _ in range(layers):
            if use_mar:
                self.cafe.append(CAFEBlock(dim, fm_factors))
            self.encoders.append(nn.LSTM(dim + (6 if use_mar else 0), hidden, batch_first=True,
                                         bidirectional=True))
            dim = 2 * hidden
        aligned_dim = 2 * hidden * (layers if use_csra else 1)
        aggr_hidden = aggr_hidden or hidden
        self.aggregate = nn.LSTM(4 * aligned_dim, aggr_hidden, num_layers=aggr_layers,
                                 batch_first=True, bidirectional=True,
                                 dropout=dropout if aggr_layers > 1 else 0.0)
        pooled = 2 * aggr_hidden * (4 if compare_pooled else 2)
        self.output: nn.Module
        if output_highway and out_layers > 0:
            self.output = nn.Sequential(Highway(pooled, out_hidden, out_layers, dropout),
                                        nn.Linear(out_hidden, ctx.num_outputs))
        else:
            self.output = MLP(pooled, [out_hidden] * out_layers, ctx.num_outputs, nn.ReLU,
                              dropout)

    def _words(self, ids: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if self.chars is not None:
            x = torch.cat([x, self.chars(ids)], dim=-1)
        x = self.dropout(x)
        return self.project(x) if self.project is not None else x

    def encode(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
               right_mask: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The stacked encoder outputs ``H^(1..k)`` of both texts (``[B, T, 2h]`` each)."""
        x, y = self.embed.pair(left, left_mask, right, right_mask)
        a, b = self._words(left, x), self._words(right, y)
        ha, hb = [], []
        for i, rnn in enumerate(self.encoders):
            if self.use_mar:
                a, b = self.cafe[i](a, left_mask, b, right_mask)
            a = _encode(rnn, self.dropout(a), left_mask)
            b = _encode(rnn, self.dropout(b), right_mask)
            ha.append(a)
            hb.append(b)
        return ha, hb

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        ha, hb = self.encode(left, left_mask, right, right_mask)
        if self.use_csra:
            scores = co_stack_affinity(torch.stack(ha, 1), torch.stack(hb, 1), self.affinity)
            a, b = torch.cat(ha, dim=-1), torch.cat(hb, dim=-1)
        else:
            a, b = ha[-1], hb[-1]
            scores = torch.bmm(a, b.transpose(1, 2))
        b_aligned, a_aligned = soft_align(scores, a, left_mask, b, right_mask)
        pooled = []
        for x, aligned, mask in ((a, b_aligned, left_mask), (b, a_aligned, right_mask)):
            match = torch.cat([aligned - x, aligned * x, aligned, x], dim=-1)
            out, _ = run_rnn(self.aggregate, self.dropout(match), mask)
            pooled.append(masked_sum(out, mask))
        za, zb = pooled
        z = torch.cat([za, zb, za - zb, za * zb] if self.compare_pooled else [za, zb], dim=-1)
        return self.output(self.dropout(z))
