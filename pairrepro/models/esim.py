"""ESIM (Chen et al., ACL 2017), the sequential variant, a baseline of the CIN and CSRAN tables::

    shared Bi-LSTM -> soft alignment e_ij = a_i . b_j both ways -> [a; a~; a - a~; a * a~]
    -> ReLU projection -> composition Bi-LSTM -> average and max pooling -> tanh MLP
"""

from __future__ import annotations

import torch
from torch import nn

from pairrepro.models.base import ModelContext, PairModel, register_model
from pairrepro.models.layers import (
    MLP,
    WordEmbedding,
    masked_max,
    masked_mean,
    run_rnn,
    soft_align,
)


@register_model("esim")
class ESIM(PairModel):
    """ESIM: ``hidden``, the Bi-LSTMs' size per direction and the projection / MLP width;
    ``dropout`` on the embeddings, the projection input and the MLP."""

    def __init__(self, ctx: ModelContext, hidden: int = 300, dropout: float = 0.5,
                 use_exact_match: bool = False) -> None:
        super().__init__(ctx)
        self.embed = WordEmbedding(ctx, use_exact_match)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.LSTM(self.embed.dim, hidden, batch_first=True, bidirectional=True)
        self.projection = nn.Sequential(nn.Linear(8 * hidden, hidden), nn.ReLU())
        self.composition = nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True)
        self.classifier = MLP(8 * hidden, [hidden], ctx.num_outputs, nn.Tanh, dropout)

    def _compose(self, x: torch.Tensor, aligned: torch.Tensor, mask: torch.Tensor
                 ) -> torch.Tensor:
        enhanced = torch.cat([x, aligned, x - aligned, x * aligned], dim=-1)
        projected = self.projection(self.dropout(enhanced))
        out, _ = run_rnn(self.composition, projected, mask)
        return torch.cat([masked_mean(out, mask), masked_max(out, mask)], dim=-1)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        x, y = self.embed.pair(left, left_mask, right, right_mask)
        a, _ = run_rnn(self.encoder, self.dropout(x), left_mask)
        b, _ = run_rnn(self.encoder, self.dropout(y), right_mask)
        b_aligned, a_aligned = soft_align(torch.bmm(a, b.transpose(1, 2)), a, left_mask,
                                          b, right_mask)
        v = torch.cat([self._compose(a, b_aligned, left_mask),
                       self._compose(b, a_aligned, right_mask)], dim=-1)
        return self.classifier(v)
