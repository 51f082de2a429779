"""Ranking baselines of the MV-LSTM paper (Tables 2, 3 and 5; readings and departures in
``docs/spec/mvlstm.md`` section 4). Padding is never seen: maps are zeroed on padding before
every convolution, and pooling is masked.
"""

from __future__ import annotations

import hashlib

import torch
import torch.nn.functional as F
from torch import nn

from pairrepro.models.base import (
    ODD_WIDTH,
    POSITIVE,
    ModelContext,
    PairModel,
    at_least,
    check_hparams,
    register_model,
)
from pairrepro.models.layers import (
    MLP,
    NEG_INF,
    BilinearTensor,
    WordEmbedding,
    masked_conv1d,
    masked_max,
    masked_max_pool1d,
    run_rnn,
)


class CosineHead(nn.Module):
    """Cosine of two sentence vectors; ``[B, 1]`` as is, or linear logits for classes."""

    def __init__(self, num_outputs: int) -> None:
        super().__init__()
        self.logits = nn.Linear(1, num_outputs) if num_outputs > 1 else None

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cos = F.cosine_similarity(u, v, dim=-1, eps=1e-8).unsqueeze(-1)
        return self.logits(cos) if self.logits is not None else cos


class _RecurrentCosine(PairModel):
    """Cosine of LSTM sentence vectors; ``dropout`` on the embeddings."""

    bidirectional = False

    def __init__(self, ctx: ModelContext, hidden: int = 50, dropout: float = 0.0) -> None:
        super().__init__(ctx)
        check_hparams(type(self).__name__, hidden=(hidden, POSITIVE))
        self.embed = WordEmbedding(ctx)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.LSTM(ctx.embed_dim, hidden, batch_first=True,
                           bidirectional=self.bidirectional)
        self.head = CosineHead(ctx.num_outputs)

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return run_rnn(self.rnn, self.dropout(self.embed(ids)), mask)[1]

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.encode(left, left_mask), self.encode(right, right_mask))


@register_model("lstm_rnn")
class LSTMRNN(_RecurrentCosine):
    """LSTM-RNN (Palangi et al. 2015): cosine of the last LSTM states."""


@register_model("bilstm_rnn")
class BiLSTMRNN(_RecurrentCosine):
    """Bi-LSTM-RNN: cosine of ``[forward last state; backward first state]``."""

    bidirectional = True


class ConvEncoder(nn.Module):
    """ARC-I's sentence model: ``layers`` x (masked conv, ReLU, masked max pooling in windows
    of ``pool``), then a masked max over the remaining positions."""

    def __init__(self, in_dim: int, filters: int, layers: int, width: int, pool: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(in_dim if i == 0 else filters, filters, width, padding=width // 2)
            for i in range(layers)
        )
        self.pool = pool

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``[B, T, D]`` -> ``[B, filters]``."""
        for conv in self.convs:
            x = torch.relu(masked_conv1d(conv, x, mask))
            x, mask = masked_max_pool1d(x, mask, self.pool)
        return masked_max(x, mask)


@register_model("arc_i")
class ARCI(PairModel):
    """ARC-I (Hu et al. 2014): CNN sentence vectors, concatenated, MLP; ``dropout`` on the
    embeddings and the MLP input."""

    def __init__(self, ctx: ModelContext, filters: int = 100, conv_layers: int = 2,
                 width: int = 3, pool: int = 2, mlp_hidden: int = 100,
                 dropout: float = 0.0) -> None:
        super().__init__(ctx)
        check_hparams("arc_i", filters=(filters, POSITIVE), conv_layers=(conv_layers, POSITIVE),
                      pool=(pool, POSITIVE), mlp_hidden=(mlp_hidden, POSITIVE),
                      width=(width, ODD_WIDTH))
        self.embed = WordEmbedding(ctx)
        self.dropout = nn.Dropout(dropout)
        self.encoder = ConvEncoder(ctx.embed_dim, filters, conv_layers, width, pool)
        self.mlp = MLP(2 * filters, [mlp_hidden], ctx.num_outputs, nn.ReLU)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        u = self.encoder(self.dropout(self.embed(left)), left_mask)
        v = self.encoder(self.dropout(self.embed(right)), right_mask)
        return self.mlp(self.dropout(torch.cat([u, v], dim=-1)))


def masked_max_pool2d(x: torch.Tensor, mask: torch.Tensor, size: int
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-overlapping ``size x size`` max pooling of ``x [B, F, n, m]`` over the real cells of
    ``mask [B, n, m]``: ``(pooled, pooled_mask)``, zero where a window holds none."""
    extra_n, extra_m = -x.size(2) % size, -x.size(3) % size
    if extra_n or extra_m:
        x = F.pad(x, (0, extra_m, 0, extra_n))
        mask = F.pad(mask, (0, extra_m, 0, extra_n), value=False)
    batch, feats, n, m = x.shape
    pooled_mask = mask.view(batch, n // size, size, m // size, size).any(dim=4).any(dim=2)
    pooled = (x.masked_fill(~mask.unsqueeze(1), NEG_INF)
              .view(batch, feats, n // size, size, m // size, size).amax(dim=(3, 5)))
    return pooled * pooled_mask.unsqueeze(1).to(x.dtype), pooled_mask


@register_model("arc_ii")
class ARCII(PairModel):
    """ARC-II (Hu et al. 2014): 2-D matching map from window pairs, 2-D CNN, MLP. Layer 1,
    ``ReLU(W [x_i-1:i+1; y_j-1:j+1] + b)``, is computed as ``W_x * X + W_y * Y`` (two 1-D
    convolutions broadcast over the grid); ``dropout`` on the embeddings and the MLP input."""

    def __init__(self, ctx: ModelContext, filters: int = 64, conv2d_layers: int = 1,
                 width: int = 3, pool: int = 2, mlp_hidden: int = 100,
                 dropout: float = 0.0) -> None:
        super().__init__(ctx)
        check_hparams("arc_ii", filters=(filters, POSITIVE), pool=(pool, POSITIVE),
                      mlp_hidden=(mlp_hidden, POSITIVE), width=(width, ODD_WIDTH),
                      conv2d_layers=(conv2d_layers, at_least(0)))
        self.embed = WordEmbedding(ctx)
        self.dropout = nn.Dropout(dropout)
        self.conv_x = nn.Conv1d(ctx.embed_dim, filters, width, padding=width // 2)
        self.conv_y = nn.Conv1d(ctx.embed_dim, filters, width, padding=width // 2, bias=False)
        self.convs = nn.ModuleList(nn.Conv2d(filters, filters, width, padding=width // 2)
                                   for _ in range(conv2d_layers))
        self.pool = pool
        self.mlp = MLP(filters, [mlp_hidden], ctx.num_outputs, nn.ReLU)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        a = masked_conv1d(self.conv_x, self.dropout(self.embed(left)), left_mask)
        b = masked_conv1d(self.conv_y, self.dropout(self.embed(right)), right_mask)
        grid = torch.relu(a.unsqueeze(2) + b.unsqueeze(1)).permute(0, 3, 1, 2)  # [B, F, n, m]
        mask = left_mask.unsqueeze(2) & right_mask.unsqueeze(1)
        grid, mask = masked_max_pool2d(grid, mask, self.pool)
        for conv in self.convs:
            m = mask.unsqueeze(1).to(grid.dtype)
            grid = torch.relu(conv(grid * m)) * m  # padding is zero in and out
            grid, mask = masked_max_pool2d(grid, mask, self.pool)
        pooled = masked_max(grid.flatten(2).transpose(1, 2), mask.flatten(1))  # [B, F]
        return self.mlp(self.dropout(pooled))


@register_model("cntn")
class CNTN(PairModel):
    """CNTN (Qiu and Huang 2015): CNN sentence vectors scored by a neural tensor layer;
    ``dropout`` on the embeddings and the sentence vectors."""

    def __init__(self, ctx: ModelContext, filters: int = 100, conv_layers: int = 2,
                 width: int = 3, pool: int = 2, tensor_slices: int = 10,
                 dropout: float = 0.0) -> None:
        super().__init__(ctx)
        check_hparams("cntn", filters=(filters, POSITIVE), conv_layers=(conv_layers, POSITIVE),
                      pool=(pool, POSITIVE), tensor_slices=(tensor_slices, POSITIVE),
                      width=(width, ODD_WIDTH))
        self.embed = WordEmbedding(ctx)
        self.dropout = nn.Dropout(dropout)
        self.encoder = ConvEncoder(ctx.embed_dim, filters, conv_layers, width, pool)
        self.tensor = BilinearTensor(filters, filters, slices=tensor_slices)
        self.out = nn.Linear(tensor_slices, ctx.num_outputs)  # u^T (plus a harmless bias)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        u = self.dropout(self.encoder(self.dropout(self.embed(left)), left_mask))
        v = self.dropout(self.encoder(self.dropout(self.embed(right)), right_mask))
        return self.out(torch.tanh(self.tensor(u, v)))


@register_model("random_guess")
class RandomGuess(PairModel):
    """Random Guess: each pair's score is a uniform [0, 1) hash of (``seed``, its real token
    ids), independent of batching, padding and order. ``seed`` -1 takes torch's global seed
    when built, so each recipe seed ranks differently."""

    needs_training = False

    def __init__(self, ctx: ModelContext, seed: int = -1) -> None:
        super().__init__(ctx)
        # folded into the int64 buffer's range (an unseeded torch's seed may exceed it); a
        # buffer, so a saved checkpoint reproduces the same scores
        seed = (torch.initial_seed() if seed == -1 else seed) % 2**63
        self.register_buffer("seed", torch.tensor(seed, dtype=torch.int64))

    def _uniform(self, left: list[int], right: list[int]) -> float:
        digest = hashlib.blake2b(
            f"{int(self.seed)}|{left}|{right}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") / 2.0**64

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        lefts, rights = ([row[mask].tolist() for row, mask in zip(ids.cpu(), masks.cpu(),
                                                                   strict=True)]
                         for ids, masks in ((left, left_mask), (right, right_mask)))
        scores = [self._uniform(a, b) for a, b in zip(lefts, rights, strict=True)]
        out = torch.tensor(scores, dtype=torch.float32, device=left.device).unsqueeze(-1)
        if self.ctx.num_outputs == 1:
            return out
        # classes: seeded random logits, one hash per class
        logits = [[self._uniform([*a, -1 - c], b) for c in range(self.ctx.num_outputs)]
                  for a, b in zip(lefts, rights, strict=True)]
        return torch.tensor(logits, dtype=torch.float32, device=left.device)
