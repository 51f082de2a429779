"""The contract between the trainer and every model (ARCHITECTURE.md, "Model contract"): token
ids and boolean masks of a pair's two texts in, ``num_outputs`` scores per pair out (classes;
1 for pairwise ranking; 2 for pointwise ranking, CSRAN); padding (``mask == False``) never
changes the output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch import nn

from pairrepro.data.prepared import PAD_ID
from pairrepro.errors import ConfigError


@dataclass
class ModelContext:
    """What a model needs to know about the data, filled in by the trainer."""

    vocab_size: int  # rows of the embedding table (0 padding, 1 unknown)
    embed_dim: int
    num_outputs: int  # scores per pair (the module docstring)
    pretrained: torch.Tensor | None = None  # [vocab_size, embed_dim] initial vectors
    trainable_embeddings: bool = True
    vocab: Sequence[str] | None = field(default=None, repr=False)  # for character features
    padding_idx: int = PAD_ID


class PairModel(nn.Module):
    """Base class of every sentence-pair model: subclasses implement :meth:`forward`;
    non-neural scorers (BM25) set ``needs_training = False`` and :meth:`fit_statistics`."""

    needs_training: bool = True

    def __init__(self, ctx: ModelContext) -> None:
        super().__init__()
        self.ctx = ctx

    def fit_statistics(
        self, left_ids: Sequence[Sequence[int]], right_ids: Sequence[Sequence[int]],
        labels: Sequence[int] | None = None,
    ) -> None:
        """Called once with the training pairs' token ids (and labels) before training
        (default: no-op)."""

    def forward(  # type: ignore[override]
        self,
        left: torch.Tensor,
        left_mask: torch.Tensor,
        right: torch.Tensor,
        right_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Score a batch: ``[B, n]`` / ``[B, m]`` ids and masks -> ``[B, num_outputs]``."""
        raise NotImplementedError


class Allowed(NamedTuple):
    """What a hyper-parameter may be: ``what`` says it in an error, ``test`` decides."""

    what: str
    test: Callable[[Any], bool]


def at_least(minimum: int) -> Allowed:
    return Allowed(f">= {minimum}", lambda value: value >= minimum)


def one_of(choices: Sequence[str]) -> Allowed:
    return Allowed(f"one of {', '.join(choices)}", lambda value: value in choices)


POSITIVE = at_least(1)
#: a convolution width with a centre: an odd number of positions
ODD_WIDTH = Allowed("an odd number >= 1 (a centred window)",
                    lambda value: value >= 1 and value % 2 == 1)


def check_hparams(model: str, **checks: tuple[Any, Allowed]) -> None:
    """The one check of a model's hyper-parameter ranges: ``name=(value, allowed)``; a value
    outside is a :class:`ConfigError` naming the model, the key, what is allowed and the value."""
    for name, (value, allowed) in checks.items():
        if not allowed.test(value):
            raise ConfigError(f"{model}: {name} must be {allowed.what}, got {value!r}")


def embedding_parameter_ids(model: nn.Module) -> set[int]:
    """Ids of the tables of every ``nn.Embedding`` of ``model``."""
    return {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}


def count_weight_params(model: nn.Module) -> int:
    """θ as the papers count it: weight matrices only (``dim >= 2``), no biases, no embedding
    tables (their size depends on the vocabulary, not on the model)."""
    tables = embedding_parameter_ids(model)
    return sum(p.numel() for p in model.parameters() if p.dim() >= 2 and id(p) not in tables)


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Parameters in total, without embedding tables, trainable, and ``weights``
    (:func:`count_weight_params`)."""
    tables = embedding_parameter_ids(model)
    params = list(model.parameters())
    return {
        "total": sum(p.numel() for p in params),
        "without_embeddings": sum(p.numel() for p in params if id(p) not in tables),
        "trainable": sum(p.numel() for p in params if p.requires_grad),
        "weights": count_weight_params(model),
    }
