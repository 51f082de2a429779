"""Optimisers, per-epoch learning-rate decay, the L2 penalty (a loss term over ``[optim]
l2_scope``; why: docs/internals.md, "L2 scope") and gradient clipping."""

from __future__ import annotations

from typing import get_args

import torch
from torch import nn

from pairrepro.config import L2Scope, OptimiserName, OptimSection
from pairrepro.device import on_host, to_device
from pairrepro.models.base import embedding_parameter_ids
from pairrepro.models.layers import WordEmbedding

# keyed by the recipe's choices (config.OptimiserName; tests/test_choices.py: all of them)
OPTIMIZERS: dict[OptimiserName, type[torch.optim.Optimizer]] = {
    "adagrad": torch.optim.Adagrad,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "adadelta": torch.optim.Adadelta,
    "rmsprop": torch.optim.RMSprop,
}


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Parameters that receive gradients (frozen embeddings excluded)."""
    return [p for p in model.parameters() if p.requires_grad]


def build_optimizer(model: nn.Module, cfg: OptimSection) -> torch.optim.Optimizer:
    """The recipe's optimiser over the trainable parameters (AdaGrad is the diagonal one); on
    CUDA fused where torch has it (not on a CPU: it rounds otherwise; docs/history.md)."""
    params = trainable_parameters(model)
    fused = cfg.name in ("adam", "adamw", "sgd") and all(p.is_cuda for p in params)
    return OPTIMIZERS[cfg.name](params, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                **({"fused": True} if fused else {}))


def l2_penalty(params: list[torch.Tensor], coefficient: float) -> torch.Tensor | None:
    """``0.5 * coefficient * sum ||p||^2`` over ``params``."""
    if coefficient <= 0 or not params:
        return None
    return 0.5 * coefficient * torch.stack([p.pow(2).sum() for p in params]).sum()


class L2Penalty:
    """``0.5 * l2 * ||theta||^2`` over ``scope``, called with the batch's word ids; ``None``
    when there is nothing to add."""

    def __init__(self, model: nn.Module, coefficient: float, scope: L2Scope = "all") -> None:
        self.coefficient = coefficient
        trainable = trainable_parameters(model)
        words = {id(m.embedding.weight): m.embedding.weight for m in model.modules()
                 if isinstance(m, WordEmbedding) and m.embedding.weight.requires_grad}
        self.rows: list[torch.Tensor] = []  # tables penalised on the batch's rows only
        self.dense: list[torch.Tensor]
        if scope == "all":
            self.dense = list(trainable)
        elif scope == "weights":
            # 1-D parameters are biases, and so is what a module lists in bias_parameters
            excluded = embedding_parameter_ids(model) | {
                id(module.get_parameter(name)) for module in model.modules()
                for name in getattr(module, "bias_parameters", ())}
            self.dense = [p for p in trainable if p.dim() >= 2 and id(p) not in excluded]
        elif scope == "lazy":
            self.dense = [p for p in trainable if id(p) not in words]
            self.rows = list(words.values())
        else:
            raise ValueError(f"l2 scope {scope!r} is not one of {get_args(L2Scope)}")

    def __call__(self, *ids: torch.Tensor) -> torch.Tensor | None:
        if self.coefficient <= 0:
            return None
        dense = l2_penalty(self.dense, self.coefficient)
        if not (self.rows and ids):
            return dense
        used = torch.unique(torch.cat([on_host(t).reshape(-1) for t in ids]))  # no wait
        rows = l2_penalty([table[to_device(used, table.device)] for table in self.rows],
                          self.coefficient)
        return rows if dense is None else dense + rows


def clip_gradients(params: list[nn.Parameter], max_norm: float) -> None:
    """Rescale gradients so their global L2 norm is at most ``max_norm`` (0 = off)."""
    if max_norm > 0:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
