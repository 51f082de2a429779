"""Baselines of the C-LSTM and DF-LSTM tables (docs/spec/clstm.md §4, docs/spec/dflstm.md §4):
``nbow``, ``single_lstm``, ``parallel_lstms`` (Bowman et al. 2015) and ``attention_lstm`` /
``attention_lstm_wbw`` (Rocktäschel et al. 2015): the hypothesis LSTM starts from the
premise's final state and attends over the premise outputs ``Y``, once or word by word::

    M_t = tanh(W^y Y + (W^h h_t + W^r r_{t-1}) ⊗ e),   α_t = softmax(w^T M_t)
    r_t = Y α_t + tanh(W^t r_{t-1}),                   h* = tanh(W^p r + W^x h_N)
"""

from __future__ import annotations

import torch
from torch import nn

from pairrepro.models.base import ModelContext, PairModel, register_model
from pairrepro.models.layers import MLP, WordEmbedding, masked_softmax, masked_sum, run_lstm_from


@register_model("nbow")
class NBOW(PairModel):
    """Neural bag of words: sums of word vectors, concatenated, through a tanh MLP."""

    def __init__(self, ctx: ModelContext, hidden: int = 100, mlp_layers: int = 2,
                 dropout: float = 0.0) -> None:
        super().__init__(ctx)
        self.embed = WordEmbedding(ctx)
        self.mlp = MLP(2 * ctx.embed_dim, [hidden] * mlp_layers, ctx.num_outputs,
                       dropout=dropout)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        u = masked_sum(self.embed(left), left_mask)
        v = masked_sum(self.embed(right), right_mask)
        return self.mlp(torch.cat([u, v], dim=-1))


@register_model("single_lstm")
class SingleLSTM(PairModel):
    """One LSTM over premise then hypothesis; the last state through a tanh layer."""

    def __init__(self, ctx: ModelContext, hidden: int = 100, dropout: float = 0.0) -> None:
        super().__init__(ctx)
        self.embed = WordEmbedding(ctx)
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(ctx.embed_dim, hidden, batch_first=True)
        self.mlp = MLP(hidden, [hidden], ctx.num_outputs, dropout=dropout)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        _, state = run_lstm_from(self.lstm, self.dropout(self.embed(left)), left_mask)
        _, (h, _) = run_lstm_from(self.lstm, self.dropout(self.embed(right)), right_mask, state)
        return self.mlp(h)


@register_model("parallel_lstms")
class ParallelLSTMs(PairModel):
    """Two LSTM sentence encoders (separate weights unless ``shared``), ``[u; v]`` to an MLP."""

    def __init__(self, ctx: ModelContext, hidden: int = 100, mlp_hidden: int = 200,
                 mlp_layers: int = 3, shared: bool = False, dropout: float = 0.0) -> None:
        super().__init__(ctx)
        self.embed = WordEmbedding(ctx)
        self.dropout = nn.Dropout(dropout)
        self.lstm_left = nn.LSTM(ctx.embed_dim, hidden, batch_first=True)
        self.lstm_right = (self.lstm_left if shared
                           else nn.LSTM(ctx.embed_dim, hidden, batch_first=True))
        self.mlp = MLP(2 * hidden, [mlp_hidden] * mlp_layers, ctx.num_outputs, dropout=dropout)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        _, (u, _) = run_lstm_from(self.lstm_left, self.dropout(self.embed(left)), left_mask)
        _, (v, _) = run_lstm_from(self.lstm_right, self.dropout(self.embed(right)), right_mask)
        return self.mlp(torch.cat([u, v], dim=-1))


class _AttentionLSTM(PairModel):
    """Conditional encoding with attention over the premise (Rocktäschel et al. 2015)."""

    word_by_word = False

    def __init__(self, ctx: ModelContext, hidden: int = 100, dropout: float = 0.0) -> None:
        super().__init__(ctx)
        self.embed = WordEmbedding(ctx)
        self.dropout = nn.Dropout(dropout)
        self.premise = nn.LSTM(ctx.embed_dim, hidden, batch_first=True)
        self.hypothesis = nn.LSTM(ctx.embed_dim, hidden, batch_first=True)
        self.w_y = nn.Linear(hidden, hidden, bias=False)
        self.w_h = nn.Linear(hidden, hidden, bias=False)
        self.w = nn.Linear(hidden, 1, bias=False)
        self.w_p = nn.Linear(hidden, hidden, bias=False)
        self.w_x = nn.Linear(hidden, hidden, bias=False)
        if self.word_by_word:
            self.w_r = nn.Linear(hidden, hidden, bias=False)
            self.w_t = nn.Linear(hidden, hidden, bias=False)
        self.out = nn.Linear(hidden, ctx.num_outputs)

    def _attend(self, wy: torch.Tensor, y: torch.Tensor, query: torch.Tensor,
                mask: torch.Tensor) -> torch.Tensor:
        scores = self.w(torch.tanh(wy + query.unsqueeze(1))).squeeze(-1)
        alpha = masked_softmax(scores, mask)
        return torch.bmm(alpha.unsqueeze(1), y).squeeze(1)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        y, state = run_lstm_from(self.premise, self.dropout(self.embed(left)), left_mask)
        hs, (h_n, _) = run_lstm_from(self.hypothesis, self.dropout(self.embed(right)),
                                     right_mask, state)
        wy = self.w_y(y)
        if not self.word_by_word:
            r = self._attend(wy, y, self.w_h(h_n), left_mask)
        else:
            r = y.new_zeros(y.size(0), y.size(2))
            last = (right_mask.sum(1) - 1).clamp(min=0)
            r_last = r
            for t in range(right.size(1)):
                r = (self._attend(wy, y, self.w_h(hs[:, t]) + self.w_r(r), left_mask)
                     + torch.tanh(self.w_t(r)))
                # keep r_N of each hypothesis: steps past its end must not change it
                r_last = torch.where((last == t).unsqueeze(-1), r, r_last)
            r = r_last
        h_star = torch.tanh(self.w_p(r) + self.w_x(h_n))
        return self.out(self.dropout(h_star))


@register_model("attention_lstm")
class AttentionLSTM(_AttentionLSTM):
    """Attention from the last hypothesis state over the premise outputs."""


@register_model("attention_lstm_wbw")
class WordByWordAttentionLSTM(_AttentionLSTM):
    """Word-by-word attention: one attention step per hypothesis word."""

    word_by_word = True
