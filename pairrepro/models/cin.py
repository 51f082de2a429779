"""CIN: Convolutional Interaction Network for NLI (Gong et al., EMNLP 2018); equations in
``docs/spec/cin.md``, readings and departures (``filter_scale``, filters ``dim x tau d_in``)
in its 3.9. Every parameter is shared by the two texts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pairrepro.errors import ConfigError
from pairrepro.models.base import (
    ODD_WIDTH,
    ModelContext,
    PairModel,
    check_hparams,
    one_of,
    register_model,
)
from pairrepro.models.layers import (
    MLP,
    CharEncoder,
    WordEmbedding,
    exact_match,
    masked_kmax_pooling,
    masked_max,
    run_rnn,
)


def dynamic_conv1d(x: torch.Tensor, mask: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Convolve every example with its own filter: ``x [B, T, c_in]``, ``weight [B, c_out,
    tau * c_in]`` (columns: the window ``[x_{i - tau//2}; ..; x_{i + tau//2}]``, Eq. 8) ->
    ``[B, T, c_out]``, zero padding on both sides of the real positions, zero on padding."""
    tau = weight.size(-1) // x.size(-1)
    m = mask.unsqueeze(-1).to(x.dtype)
    padded = F.pad(x * m, (0, 0, tau // 2, tau // 2))
    windows = padded.unfold(1, tau, 1).transpose(2, 3).flatten(2)  # [B, T, tau * c_in]
    return torch.bmm(windows, weight.transpose(1, 2)) * m


def normalise_filters(weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Scale each output row of generated filters ``[B, c_out, tau c_in]`` to sum 1 (an
    all-zero row stays zero); why: docs/spec/cin.md 3.9."""
    return weight / weight.sum(dim=-1, keepdim=True).clamp_min(eps)


FILTER_SCALES = ("normalised", "fixed", "none")


def scale_filters(weight: torch.Tensor, scale: str) -> torch.Tensor:
    """Generated filters ``[B, c_out, tau c_in]`` rescaled: ``"normalised"``
    (:func:`normalise_filters`), ``"fixed"`` (times ``1 / (tau c_in)``), ``"none"``."""
    if scale == "normalised":
        return normalise_filters(weight)
    return weight / weight.size(-1) if scale == "fixed" else weight


class FilterGenerator(nn.Module):
    """The filter generation network (Eqs. 16-19): a sentence -> a ``[c_out, tau c_in]`` filter;
    its bias ``B`` starts at zero (the paper) and is a bias for the L2 penalty."""

    documented_init = ("b",)
    bias_parameters = ("b",)

    def __init__(self, c_in: int, c_out: int, tau: int, kmax: int) -> None:
        super().__init__()
        if c_out % kmax:
            raise ConfigError(
                f"cin: the layer width {c_out} must be divisible by kmax = {kmax}",
                hint="set [model] dim to a multiple of kmax, or change kmax",
            )
        self.kmax, self.tau, self.c_in = kmax, tau, c_in
        self.w_u = nn.Linear(c_in, c_in, bias=False)
        self.p = nn.Parameter(torch.empty(c_out // kmax, c_in))
        self.q = nn.Parameter(torch.empty(c_in, tau * c_in))
        self.b = nn.Parameter(torch.zeros(c_out // kmax, tau * c_in))
        nn.init.xavier_uniform_(self.p)
        nn.init.xavier_uniform_(self.q)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        u = torch.relu(self.w_u(x)).transpose(1, 2)  # [B, c_in, T]
        # per feature, the k largest real values over time (0 where a sentence is shorter)
        z = masked_kmax_pooling(u, mask.unsqueeze(1), self.kmax).transpose(1, 2)  # [B, k, c_in]
        # P diag(z^j) Q == (P * z^j) Q: scale P's columns per slice, then one batched matmul
        scaled = self.p.unsqueeze(0).unsqueeze(0) * z.unsqueeze(2)  # [B, k, c_out/k, c_in]
        slices = torch.relu(torch.matmul(scaled, self.q) + self.b)  # [B, k, c_out/k, tau c_in]
        return slices.flatten(1, 2)  # rows of slice j are output channels j*c_out/k ...


class CINLayer(nn.Module):
    """One convolutional interaction layer: FGN, intra/inter dynamic convolution, fusion."""

    def __init__(self, c_in: int, c_out: int, tau: int, kmax: int, use_intra: bool,
                 dropout: float, filter_scale: str = "normalised") -> None:
        super().__init__()
        check_hparams("cin", filter_scale=(filter_scale, one_of(FILTER_SCALES)))
        self.use_intra, self.filter_scale = use_intra, filter_scale
        self.fgn = FilterGenerator(c_in, c_out, tau, kmax)
        self.fuse = nn.Linear((5 if use_intra else 1) * c_out, c_out)
        self.residual = nn.Linear(c_in, c_out, bias=False)
        self.dropout = nn.Dropout(dropout)

    def _fuse(self, x: torch.Tensor, mask: torch.Tensor, own: torch.Tensor,
              other: torch.Tensor) -> torch.Tensor:
        v = torch.relu(dynamic_conv1d(x, mask, other))
        if self.use_intra:
            u = torch.relu(dynamic_conv1d(x, mask, own))
            features = torch.cat([u, v, u - v, u * v, (u - v).abs()], dim=-1)
        else:
            features = v
        out = torch.relu(self.fuse(self.dropout(features)) + self.residual(x))
        return out * mask.unsqueeze(-1).to(out.dtype)

    def forward(self, x: torch.Tensor, x_mask: torch.Tensor, y: torch.Tensor,
                y_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        wx = scale_filters(self.fgn(x, x_mask), self.filter_scale)
        wy = scale_filters(self.fgn(y, y_mask), self.filter_scale)
        return self._fuse(x, x_mask, wx, wy), self._fuse(y, y_mask, wy, wx)


@register_model("cin")
class CIN(PairModel):
    """The CIN model of the module docstring.

    Args:
        dim: every CIN layer's output width, divisible by ``kmax`` (0: the encoder width).
        layers: N_x; ``window``: tau (odd); ``kmax``: the FGN's k.
        char_dim: the char CNN's (Kim 2014; 0 = off).
        use_interaction / use_intra: False = Table 5's ablations.
        filter_scale: :func:`scale_filters`'; ``normalise_filters``: its older boolean
            spelling (True = ``"normalised"``, False = ``"none"``).
        aggr_lstm: a Bi-LSTM before max pooling (ESIM-style).
        dropout: after each fully connected, recurrent and convolutional layer.
    """

    def __init__(self, ctx: ModelContext, hidden: int = 150, dim: int = 300, layers: int = 2,
                 window: int = 3, kmax: int = 4, char_dim: int = 0, char_filters: int = 100,
                 char_width: int = 5, max_word_len: int = 16, use_exact_match: bool = True,
                 use_interaction: bool = True, use_intra: bool = True,
                 filter_scale: str = "normalised", normalise_filters: bool | None = None,
                 aggr_lstm: bool = False, mlp_hidden: int = 300, dropout: float = 0.1) -> None:
        super().__init__(ctx)
        check_hparams("cin", window=(window, ODD_WIDTH))
        if normalise_filters is not None:
            implied = "normalised" if normalise_filters else "none"
            if filter_scale not in ("normalised", implied):
                raise ConfigError(
                    f"cin: normalise_filters = {str(normalise_filters).lower()} contradicts "
                    f"filter_scale = {filter_scale!r}",
                    hint="give filter_scale only (\"normalised\", \"fixed\" or \"none\")")
            filter_scale = implied
        self.use_exact_match = use_exact_match
        self.embed = WordEmbedding(ctx)
        self.chars = (CharEncoder(ctx.vocab, char_dim, char_filters, max_word_len, "cnn",
                                  char_width, ctx.padding_idx) if char_dim > 0 else None)
        word_dim = (ctx.embed_dim + (char_filters if self.chars is not None else 0)
                    + (1 if use_exact_match else 0))
        self.encoder = nn.LSTM(word_dim, hidden, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        width = 2 * hidden + word_dim
        dim = dim or width
        self.layers = nn.ModuleList()
        for _ in range(layers if use_interaction else 0):
            self.layers.append(CINLayer(width, dim, window, kmax, use_intra, dropout,
                                        filter_scale))
            width = dim
        self.aggregate = (nn.LSTM(width, hidden, batch_first=True, bidirectional=True)
                          if aggr_lstm else None)
        if self.aggregate is not None:
            width = 2 * hidden
        self.classifier = MLP(5 * width, [mlp_hidden], ctx.num_outputs, nn.Tanh, dropout)

    def _encode(self, ids: torch.Tensor, mask: torch.Tensor, other: torch.Tensor,
                other_mask: torch.Tensor) -> torch.Tensor:
        parts = [self.embed(ids)]
        if self.chars is not None:
            parts.append(self.chars(ids))
        if self.use_exact_match:
            parts.append(exact_match(ids, mask, other, other_mask))
        e = self.dropout(torch.cat(parts, dim=-1))
        h, _ = run_rnn(self.encoder, e, mask)
        return torch.cat([self.dropout(h), e], dim=-1) * mask.unsqueeze(-1).to(e.dtype)

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor, right: torch.Tensor,
                right_mask: torch.Tensor) -> torch.Tensor:
        x = self._encode(left, left_mask, right, right_mask)
        y = self._encode(right, right_mask, left, left_mask)
        for layer in self.layers:
            x, y = layer(x, left_mask, y, right_mask)
        if self.aggregate is not None:
            x, _ = run_rnn(self.aggregate, x, left_mask)
            y, _ = run_rnn(self.aggregate, y, right_mask)
        p, h = masked_max(x, left_mask), masked_max(y, right_mask)
        return self.classifier(torch.cat([p, h, p - h, p * h, (p - h).abs()], dim=-1))
