"""MV-LSTM (Wan, Lan, Guo, Xu, Pang, Cheng, AAAI 2016); readings in ``docs/spec/mvlstm.md``::

    words -> shared Bi-LSTM -> positional representations p_X,i, p_Y,j  (2 * hidden wide)
    -> interaction between every position pair:
         cosine    s_ij = p_X,i . p_Y,j / (|p_X,i| |p_Y,j|)                     [n, m]
         bilinear  s_ij = p_X,i^T M p_Y,j + b                                   [n, m]
         tensor    s_ij = ReLU(p_X,i^T M^[1:c] p_Y,j + W [p_X,i; p_Y,j] + b)    [n, m, c]
    -> k-max pooling over the whole matrix / each tensor slice (padded cells masked out)
    -> MLP  r = ReLU(W_r q + b_r),  s = W_s r + b_s   -> num_outputs

Where the paper is silent (spec C1, C3): one Bi-LSTM shared by both texts, ReLU in the MLP,
``tensor_slices = 10``, ``mlp_hidden = 50``. Pairs with fewer than ``k`` real cells get zeros
for the missing values; with ``num_outputs > 1`` the MLP emits class logits (NLI, paraphrase).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pairrepro.models.base import (
    POSITIVE,
    ModelContext,
    PairModel,
    check_hparams,
    one_of,
    register_model,
)
from pairrepro.models.layers import (
    MLP,
    BilinearTensor,
    WordEmbedding,
    masked_kmax_pooling,
    run_rnn,
)

INTERACTIONS = ("cosine", "bilinear", "tensor")


@register_model("mv_lstm")
class MVLSTM(PairModel):
    """MV-LSTM: multiple positional sentence representations matched pairwise.

    Args:
        interaction: "cosine", "bilinear" or "tensor" (MV-LSTM-Cosine/-Bilinear/-Tensor).
        hidden: LSTM units per direction (paper: 50, so positions are 100-d).
        k: values kept by k-max pooling, per matrix or per tensor slice (paper: 5).
        tensor_slices: ``c``, slices of the tensor interaction (not given in the paper).
        mlp_hidden: width of the MLP's hidden layer (not given in the paper).
        dropout: dropout on the embeddings and the pooled features (paper: none stated).
        use_exact_match: the exact-match channel (``WordEmbedding``); not in the paper.
    """

    def __init__(self, ctx: ModelContext, interaction: str = "tensor", hidden: int = 50,
                 k: int = 5, tensor_slices: int = 10, mlp_hidden: int = 50,
                 dropout: float = 0.0, use_exact_match: bool = False) -> None:
        super().__init__(ctx)
        check_hparams("mv_lstm", interaction=(interaction, one_of(INTERACTIONS)),
                      hidden=(hidden, POSITIVE), k=(k, POSITIVE),
                      tensor_slices=(tensor_slices, POSITIVE), mlp_hidden=(mlp_hidden, POSITIVE))
        self.interaction = interaction
        self.k = k
        self.embed = WordEmbedding(ctx, use_exact_match)
        self.dropout = nn.Dropout(dropout)
        self.bilstm = nn.LSTM(self.embed.dim, hidden, batch_first=True, bidirectional=True)
        self.tensor: BilinearTensor | None = None
        channels = 1
        if interaction == "bilinear":
            self.tensor = BilinearTensor(2 * hidden, 2 * hidden, slices=1, linear=False)
        elif interaction == "tensor":
            self.tensor = BilinearTensor(2 * hidden, 2 * hidden, slices=tensor_slices)
            channels = tensor_slices
        self.mlp = MLP(channels * k, [mlp_hidden], ctx.num_outputs, nn.ReLU)

    def positions(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Positional sentence representations ``[B, T, 2 * hidden]`` (zero on padding) of
        one text's word representations ``[B, T, embed.dim]``."""
        out, _ = run_rnn(self.bilstm, self.dropout(words), mask)
        return out

    def interact(self, px: torch.Tensor, py: torch.Tensor) -> torch.Tensor:
        """Interaction of every position pair: ``[B, n, m, channels]`` (channels = c or 1)."""
        if self.interaction == "cosine":  # norms clamped as F.cosine_similarity does
            px, py = F.normalize(px, dim=-1, eps=1e-8), F.normalize(py, dim=-1, eps=1e-8)
            return torch.bmm(px, py.transpose(1, 2)).unsqueeze(-1)
        assert self.tensor is not None
        scores = self.tensor.pairwise(px, py)
        return torch.relu(scores) if self.interaction == "tensor" else scores

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        x, y = self.embed.pair(left, left_mask, right, right_mask)
        px = self.positions(x, left_mask)
        py = self.positions(y, right_mask)
        grid = self.interact(px, py)  # [B, n, m, C]
        batch, n, m, channels = grid.shape
        cells = grid.permute(0, 3, 1, 2).reshape(batch, channels, n * m)
        cell_mask = (left_mask.unsqueeze(2) & right_mask.unsqueeze(1)).reshape(batch, 1, n * m)
        q = masked_kmax_pooling(cells, cell_mask, self.k).reshape(batch, channels * self.k)
        return self.mlp(self.dropout(q))
