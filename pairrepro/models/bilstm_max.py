"""BiLSTM-max (Conneau et al. 2017): the small reference model of the demo, the engine tests
and the speed bench. A shared Bi-LSTM, max-pooled, gives ``u`` and ``v``; an MLP reads
``[u; v; |u - v|; u * v]``.
"""

from __future__ import annotations

import torch
from torch import nn

from pairrepro.models.base import ModelContext, PairModel, register_model
from pairrepro.models.layers import MLP, WordEmbedding, masked_max, run_rnn


@register_model("bilstm_max")
class BiLSTMMax(PairModel):
    """Shared BiLSTM encoder + max pooling + matching features + MLP."""

    def __init__(self, ctx: ModelContext, hidden: int = 64, layers: int = 1,
                 mlp_hidden: int = 64, dropout: float = 0.0) -> None:
        super().__init__(ctx)
        if hidden < 1 or layers < 1 or mlp_hidden < 0 or not 0 <= dropout < 1:
            raise ValueError("bilstm_max: hidden, layers >= 1, mlp_hidden >= 0, 0 <= dropout < 1")
        self.embed = WordEmbedding(ctx)
        self.encoder = nn.LSTM(ctx.embed_dim, hidden, num_layers=layers, batch_first=True,
                               bidirectional=True, dropout=dropout if layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.mlp = MLP(8 * hidden, [mlp_hidden] if mlp_hidden else [], ctx.num_outputs,
                       dropout=dropout)

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        states, _ = run_rnn(self.encoder, self.dropout(self.embed(ids)), mask)
        return masked_max(states, mask)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        u, v = self.encode(left, left_mask), self.encode(right, right_mask)
        return self.mlp(self.dropout(torch.cat([u, v, (u - v).abs(), u * v], dim=-1)))
