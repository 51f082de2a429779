"""Building blocks shared by several models. Masks are boolean, ``True`` on real tokens, and
no padded position ever influences a result."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from pairrepro.data.prepared import PAD_ID, UNK_ID
from pairrepro.device import on_host, to_device
from pairrepro.errors import ConfigError
from pairrepro.models.base import ModelContext

NEG_INF = -1e30  # finite, so fully-masked rows give zeros after softmax instead of NaN


def exact_match(ids: torch.Tensor, mask: torch.Tensor, other: torch.Tensor,
                other_mask: torch.Tensor) -> torch.Tensor:
    """1.0 where a real token's id occurs among the other text's real tokens: ``[B, T, 1]``
    (never the unknown-word id: two different rare words share it)."""
    same = (ids.unsqueeze(2) == other.unsqueeze(1)) & other_mask.unsqueeze(1)
    return (same.any(dim=2) & mask & (ids != UNK_ID)).unsqueeze(-1).float()


class WordEmbedding(nn.Module):
    """The embedding table of a :class:`ModelContext` (pretrained, frozen or not). With
    ``exact_match``, :meth:`pair` adds the :func:`exact_match` channel (the EM feature of CIN,
    DIIN and CSRAN's code); :attr:`dim` is the width :meth:`pair` returns."""

    def __init__(self, ctx: ModelContext, exact_match: bool = False) -> None:
        super().__init__()
        self.exact_match = exact_match
        self.embedding = nn.Embedding(ctx.vocab_size, ctx.embed_dim, padding_idx=ctx.padding_idx)
        if ctx.pretrained is not None:
            if tuple(ctx.pretrained.shape) != (ctx.vocab_size, ctx.embed_dim):
                raise ValueError(f"pretrained matrix has shape {tuple(ctx.pretrained.shape)}, "
                                 f"expected {(ctx.vocab_size, ctx.embed_dim)}")
            with torch.no_grad():
                self.embedding.weight.copy_(ctx.pretrained)
        self.embedding.weight.requires_grad_(ctx.trainable_embeddings)

    @property
    def dim(self) -> int:
        return self.embedding.embedding_dim + int(self.exact_match)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """One text's word vectors (no pair features)."""
        return self.embedding(ids)

    def pair(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
             right_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both texts of a pair, ``[B, n, dim]`` and ``[B, m, dim]``."""
        x, y = self.embedding(left), self.embedding(right)
        if not self.exact_match:
            return x, y
        return (torch.cat([x, exact_match(left, left_mask, right, right_mask)], dim=-1),
                torch.cat([y, exact_match(right, right_mask, left, left_mask)], dim=-1))


def _expand(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``mask`` with trailing singleton dims up to ``like``'s rank."""
    return mask.reshape(*mask.shape, *[1] * (like.dim() - mask.dim()))


def masked_max(x: torch.Tensor, mask: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Max over ``dim`` ignoring padding (0 for an all-padding row); ``x`` ``[B, T, ...]``."""
    out = x.masked_fill(~_expand(mask, x), NEG_INF).max(dim=dim).values
    return torch.where(_expand(mask.any(dim=1), out), out, torch.zeros_like(out))


def masked_sum(x: torch.Tensor, mask: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Sum over ``dim`` of real positions only."""
    return (x * _expand(mask.to(x.dtype), x)).sum(dim=dim)


def masked_mean(x: torch.Tensor, mask: torch.Tensor, dim: int = 1) -> torch.Tensor:
    """Mean over ``dim`` of real positions only (0 for an all-padding row)."""
    total = masked_sum(x, mask, dim)
    return total / _expand(mask.sum(dim=1, keepdim=True).clamp(min=1).to(x.dtype), total)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` where ``mask`` (broadcastable to ``scores``) is True."""
    probs = torch.softmax(scores.masked_fill(~mask, NEG_INF), dim=dim)
    return probs * mask.to(probs.dtype)


def masked_kmax_pooling(x: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` largest real values along the last dim, descending: ``[..., T] -> [..., k]``
    (``mask`` broadcastable to ``x``); always ``k`` values, 0 where fewer cells are real."""
    mask = mask.expand_as(x)
    if x.size(-1) < k:  # pad with masked cells so topk always has k candidates
        x, mask = F.pad(x, (0, k - x.size(-1))), F.pad(mask, (0, k - x.size(-1)))
    values, index = x.masked_fill(~mask, NEG_INF).topk(k, dim=-1, sorted=True)
    return torch.where(mask.gather(-1, index), values, torch.zeros_like(values))


def masked_conv1d(conv: nn.Conv1d, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A length-preserving 1-D convolution ``[B, T, D] -> [B, T, F]`` (odd kernel,
    ``padding = kernel // 2``); padding is zeroed before it (a real position next to padding
    sees the conv's own zero padding) and after it (no bias on padding)."""
    width = conv.kernel_size[0]
    if width % 2 == 0 or conv.padding != (width // 2,):
        raise ValueError(f"masked_conv1d needs an odd kernel with padding kernel//2, got "
                         f"kernel {width}, padding {conv.padding}")
    m = mask.unsqueeze(-1).to(x.dtype)
    return conv((x * m).transpose(1, 2)).transpose(1, 2) * m


def masked_max_pool1d(x: torch.Tensor, mask: torch.Tensor, size: int
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-overlapping max pooling of ``x [B, T, F]`` in windows of ``size``: ``(pooled,
    pooled_mask)``; a window is real when any of its positions is, the max over those."""
    batch, length, feats = x.shape
    extra = -length % size
    x, mask = F.pad(x, (0, 0, 0, extra)), F.pad(mask, (0, extra))
    windows = (length + extra) // size
    pooled_mask = mask.view(batch, windows, size).any(dim=2)
    pooled = (x.masked_fill(~mask.unsqueeze(-1), NEG_INF)
              .view(batch, windows, size, feats).amax(dim=2))
    return pooled * pooled_mask.unsqueeze(-1).to(x.dtype), pooled_mask


class BilinearTensor(nn.Module):
    """Neural tensor layer without its non-linearity (Socher et al. 2013):
    ``t(u, v) = u^T M^[1:c] v + W [u; v] + b -> R^c``; ``linear=False`` drops ``W [u; v]``.
    :meth:`pairwise` scores every position pair, ``[B, n, du]``, ``[B, m, dv] -> [B, n, m, c]``."""

    def __init__(self, u_dim: int, v_dim: int, slices: int = 1, linear: bool = True) -> None:
        super().__init__()
        # keeps u^T M v at the scale of |u| |v| / sqrt(du dv) (torch.nn.Bilinear's 1/sqrt(du)
        # saturates a tanh/ReLU on wide inputs); recipes may re-initialise
        bound = 1.0 / (u_dim * v_dim) ** 0.5
        self.weight = nn.Parameter(torch.empty(slices, u_dim, v_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(slices))
        # W [u; v] = W_u u + W_v v, which broadcasts over position pairs
        self.linear_u = nn.Linear(u_dim, slices, bias=False) if linear else None
        self.linear_v = nn.Linear(v_dim, slices, bias=False) if linear else None

    @property
    def slices(self) -> int:
        return self.weight.size(0)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = torch.einsum("...i,cij,...j->...c", u, self.weight, v) + self.bias
        if self.linear_u is not None and self.linear_v is not None:
            out = out + self.linear_u(u) + self.linear_v(v)
        return out

    def pairwise(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        um = torch.einsum("bni,cij->bcnj", u, self.weight)  # [B, c, n, dv]
        out = torch.matmul(um, v.unsqueeze(1).transpose(2, 3))  # [B, c, n, m]
        out = out.permute(0, 2, 3, 1) + self.bias
        if self.linear_u is not None and self.linear_v is not None:
            out = out + self.linear_u(u).unsqueeze(2) + self.linear_v(v).unsqueeze(1)
        return out


def _call_rnn(rnn: nn.RNNBase, x: torch.Tensor, mask: torch.Tensor,
              state: tuple[torch.Tensor, ...] | None = None) -> tuple[torch.Tensor, Any]:
    """``rnn`` over packed sequences (padding stays out of the states): outputs zero on
    padding, and the final states. The lengths are read on the host (``device.on_host``), and
    the rows are sorted by them where ``x`` is, so nothing waits for the device."""
    lengths, order = torch.sort(on_host(mask).sum(dim=1).clamp(min=1), descending=True)
    if order.device != x.device:
        order = torch.sort(mask.sum(dim=1).clamp(min=1), descending=True, stable=True).indices
    packed = pack_padded_sequence(x.index_select(0, order), lengths, batch_first=True)
    packed = PackedSequence(packed.data, packed.batch_sizes, order)
    if x.is_cuda and torch.is_autocast_enabled("cuda"):  # never in float16: it overflows
        bf16 = torch.get_autocast_dtype("cuda") == torch.bfloat16 and torch.cuda.is_bf16_supported()
        out, hidden = run_in(rnn, torch.bfloat16 if bf16 else torch.float32, packed, state)
    else:
        out, hidden = rnn(packed, state)
    out, _ = pad_packed_sequence(PackedSequence(out.data, out.batch_sizes), batch_first=True,
                                 total_length=x.size(1))
    out = out.index_select(0, packed.unsorted_indices)
    return out * mask.unsqueeze(-1).to(out.dtype), hidden


def run_in(rnn: nn.RNNBase, dtype: torch.dtype, packed: PackedSequence,
           state: tuple[torch.Tensor, ...] | None) -> tuple[PackedSequence, Any]:
    """``rnn`` with its weights, input and state in ``dtype``, CUDA autocast off: its cuDNN
    RNN wrapper runs in float16 whatever dtype autocast names (docs/history.md)."""
    with torch.autocast("cuda", enabled=False):
        weights = {name: p.to(dtype) for name, p in rnn.named_parameters()}
        state = None if state is None else tuple(t.to(dtype) for t in state)
        return torch.func.functional_call(rnn, weights, (packed.to(dtype), state))


def run_rnn(rnn: nn.RNNBase, x: torch.Tensor,
            mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch-first RNN: ``(outputs [B, T, H*dirs], last_hidden [B, H*dirs])``, zero on
    padding, the last hidden state at each sequence's true end (directions concatenated)."""
    out, hidden = _call_rnn(rnn, x, mask)
    h_n = hidden[0] if isinstance(hidden, tuple) else hidden
    dirs = 2 if rnn.bidirectional else 1
    last = h_n.view(rnn.num_layers, dirs, x.size(0), rnn.hidden_size)[-1]
    return out, last.transpose(0, 1).reshape(x.size(0), dirs * rnn.hidden_size)


def run_lstm_from(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor,
                  state: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """A one-layer, unidirectional, batch-first LSTM from ``state`` (``[B, H]`` pair, zeros when
    None; conditional encoding): ``(outputs [B, T, H], (h, c))``, zero on padding, ``h``/``c``
    at each sequence's true end."""
    init = None if state is None else tuple(s.unsqueeze(0).contiguous() for s in state)
    out, (h_n, c_n) = _call_rnn(lstm, x, mask, init)
    return out, (h_n[0], c_n[0])


class MLP(nn.Module):
    """Linear + activation (+ dropout) layers, then a plain Linear output."""

    def __init__(self, in_dim: int, hidden_dims: list[int] | tuple[int, ...], out_dim: int,
                 activation: type[nn.Module] = nn.Tanh, dropout: float = 0.0) -> None:
        super().__init__()
        dims = [in_dim, *hidden_dims]
        layers: list[nn.Module] = []
        for prev, width in itertools.pairwise(dims):
            layers += [nn.Linear(prev, width), activation()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
        self.net = nn.Sequential(*layers, nn.Linear(dims[-1], out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def soft_align(scores: torch.Tensor, a: torch.Tensor, a_mask: torch.Tensor, b: torch.Tensor,
               b_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft alignment both ways from ``scores [B, n, m]``: ``(b_aligned [B, n, db], a_aligned
    [B, m, da])``, each a softmax over the other side's real positions applied to it."""
    row = masked_softmax(scores, b_mask.unsqueeze(1), dim=2)  # over j, for each i
    col = masked_softmax(scores, a_mask.unsqueeze(2), dim=1)  # over i, for each j
    return torch.bmm(row, b), torch.bmm(col.transpose(1, 2), a)


class Highway(nn.Module):
    """Highway layers ``y = g * relu(W_t x) + (1 - g) * carry(x)``, ``g = sigmoid(W_g x)``; the
    first projects ``in_dim -> dim``, its carry then linear (the CSRAN authors' code)."""

    def __init__(self, in_dim: int, dim: int, layers: int = 1, dropout: float = 0.0) -> None:
        super().__init__()
        self.transform = nn.ModuleList()
        self.gate = nn.ModuleList()
        self.carry = nn.ModuleList()
        prev = in_dim
        for _ in range(layers):
            self.transform.append(nn.Linear(prev, dim))
            self.gate.append(nn.Linear(prev, dim))
            self.carry.append(nn.Identity() if prev == dim else nn.Linear(prev, dim))
            prev = dim
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for transform, gate, carry in zip(self.transform, self.gate, self.carry, strict=True):
            g = torch.sigmoid(gate(x))
            x = self.dropout(g * torch.relu(transform(x)) + (1 - g) * carry(x))
        return x


class FactorizationMachine(nn.Module):
    """Rendle's factorization machine ``R^n -> R``: ``M(x) = w0 + <w, x> + sum_{i<j} <v_i, v_j>
    x_i x_j``, in ``O(n k)``; ``w``, ``w0`` start at zero (the CSRAN authors' code)."""

    documented_init = ("linear.weight", "linear.bias")

    def __init__(self, in_dim: int, factors: int = 32, init_std: float = 0.01) -> None:
        super().__init__()
        self.linear = nn.Linear(in_dim, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)
        self.v = nn.Parameter(torch.randn(in_dim, factors) * init_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        square_of_sum = (x @ self.v).pow(2)
        sum_of_square = x.pow(2) @ self.v.pow(2)
        pairwise = 0.5 * (square_of_sum - sum_of_square).sum(-1)
        return self.linear(x).squeeze(-1) + pairwise


class CharEncoder(nn.Module):
    """Character-based word vectors from the vocabulary strings: ``kind="lstm"``, a Bi-LSTM's
    final states; ``"cnn"``, a convolution max-pooled over characters (Kim 2014). The table
    is rebuilt from the vocabulary, kept on the host; the padding word maps to zeros."""

    def __init__(self, vocab: Sequence[str] | None, char_dim: int = 20, out_dim: int = 128,
                 max_word_len: int = 16, kind: str = "lstm", width: int = 5,
                 padding_idx: int = PAD_ID) -> None:
        super().__init__()
        if vocab is None:
            raise ConfigError(
                "character features need the vocabulary strings (ModelContext.vocab is None)",
                hint="pass ctx.vocab, or turn character features off ([model] char_dim = 0)")
        if kind == "lstm" and out_dim % 2:
            raise ConfigError(f"char Bi-LSTM output size must be even, got {out_dim}")
        specials = padding_idx + 2  # <pad>, <unk>: no characters
        chars = sorted({c for word in vocab[specials:] for c in word})
        index = {c: i + 1 for i, c in enumerate(chars)}  # 0 pads
        self.char_table = torch.zeros(len(vocab), max_word_len, dtype=torch.long)
        for row, word in enumerate(vocab[specials:], start=specials):
            ids = [index[c] for c in word[:max_word_len]]
            self.char_table[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        self.embedding = nn.Embedding(len(chars) + 1, char_dim, padding_idx=0)
        self.rnn = (nn.LSTM(char_dim, out_dim // 2, batch_first=True, bidirectional=True)
                    if kind == "lstm" else None)
        self.conv = (nn.Conv1d(char_dim, out_dim, width, padding=width // 2)
                     if kind == "cnn" else None)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids [B, T]`` -> ``[B, T, out_dim]``; the batch's words found on the host."""
        unique, inverse = torch.unique(on_host(ids), return_inverse=True)
        host = self.char_table[unique]  # [U, L]
        chars, char_mask = to_device(host, ids.device), to_device(host != 0, ids.device)
        x = self.embedding(chars)
        if self.rnn is not None:
            _, words = run_rnn(self.rnn, x, char_mask)
        else:
            assert self.conv is not None
            words = masked_max(torch.relu(masked_conv1d(self.conv, x, char_mask)), char_mask)
        words = words * char_mask.any(dim=1, keepdim=True).to(words.dtype)
        return words[to_device(inverse, ids.device)]
