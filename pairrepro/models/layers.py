"""Building blocks shared by several models (all mask-aware).

Masks are boolean, ``True`` on real tokens. Helpers here never let a padded
position influence a result.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from pairrepro.models.base import ModelContext

NEG_INF = -1e30  # finite, so fully-masked rows give zeros after softmax instead of NaN


class WordEmbedding(nn.Module):
    """Embedding table built from a :class:`ModelContext` (pretrained, frozen or not)."""

    def __init__(self, ctx: ModelContext) -> None:
        super().__init__()
        self.embedding = nn.Embedding(ctx.vocab_size, ctx.embed_dim, padding_idx=ctx.padding_idx)
        if ctx.pretrained is not None:
            if tuple(ctx.pretrained.shape) != (ctx.vocab_size, ctx.embed_dim):
                raise ValueError(
                    f"pretrained matrix has shape {tuple(ctx.pretrained.shape)}, "
                    f"expected {(ctx.vocab_size, ctx.embed_dim)}"
                )
            with torch.no_grad():
                self.embedding.weight.copy_(ctx.pretrained)
        self.embedding.weight.requires_grad_(ctx.trainable_embeddings)

    @property
    def dim(self) -> int:
        return self.embedding.embedding_dim

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids)


def masked_max(x: torch.Tensor, mask: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Max over ``dim`` ignoring padding; ``x`` is ``[B, T, ...]``, ``mask`` ``[B, T]``."""
    m = mask
    while m.dim() < x.dim():
        m = m.unsqueeze(-1)
    out = x.masked_fill(~m, NEG_INF).max(dim=dim).values
    # rows with no real token: 0 instead of -1e30
    any_real = mask.any(dim=1)
    while any_real.dim() < out.dim():
        any_real = any_real.unsqueeze(-1)
    return torch.where(any_real, out, torch.zeros_like(out))


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Sum over ``dim`` of real positions only."""
    m = mask.to(x.dtype)
    while m.dim() < x.dim():
        m = m.unsqueeze(-1)
    return (x * m).sum(dim=dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Mean over ``dim`` of real positions only (0 for an all-padding row)."""
    count = mask.sum(dim=1, keepdim=True).clamp(min=1).to(x.dtype)
    while count.dim() < x.dim() - 1:
        count = count.unsqueeze(-1)
    return masked_sum(x, mask, dim) / count


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` where ``mask`` (broadcastable to ``scores``) is True."""
    scores = scores.masked_fill(~mask, NEG_INF)
    probs = torch.softmax(scores, dim=dim)
    return probs * mask.to(probs.dtype)


def kmax_pooling(x: torch.Tensor, k: int, dim: int = -1) -> torch.Tensor:
    """The ``k`` largest values along ``dim``, in descending order (MV-LSTM's k-max pooling)."""
    k = min(k, x.size(dim))
    return x.topk(k, dim=dim, sorted=True).values


def run_rnn(
    rnn: nn.RNNBase, x: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a batch-first RNN over padded input with packed sequences.

    Returns ``(outputs [B, T, H*dirs], last_hidden [B, H*dirs])``; outputs at
    padded positions are zero and the last hidden state is the state at each
    sequence's true end (both directions concatenated for bidirectional RNNs).
    Packing uses cuDNN's fused kernels on GPU and keeps padding out of the states.
    """
    lengths = mask.sum(dim=1).clamp(min=1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    out, hidden = rnn(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
    h_n = hidden[0] if isinstance(hidden, tuple) else hidden
    dirs = 2 if rnn.bidirectional else 1
    last = h_n.view(rnn.num_layers, dirs, x.size(0), rnn.hidden_size)[-1]
    last = last.transpose(0, 1).reshape(x.size(0), dirs * rnn.hidden_size)
    return out * mask.unsqueeze(-1).to(out.dtype), last


class MLP(nn.Module):
    """Stack of Linear + activation (+ dropout) layers ending in a plain Linear output."""

    def __init__(
        self,
        in_dim: int,
        hidden_dims: list[int] | tuple[int, ...],
        out_dim: int,
        activation: type[nn.Module] = nn.Tanh,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        prev = in_dim
        for width in hidden_dims:
            layers += [nn.Linear(prev, width), activation()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            prev = width
        layers.append(nn.Linear(prev, out_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
