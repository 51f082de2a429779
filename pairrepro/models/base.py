"""The contract between the trainer and every model: token ids and boolean masks of a pair's
two texts in, ``num_outputs`` scores per pair out (classes; 1 for pairwise ranking; 2 for
pointwise ranking); padding (``mask == False``) never changes the output.

The registry: every module of the package is imported on first lookup, so a new model file
only decorates its class with :func:`register_model`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

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
    # the same scores for every pair by design (the majority class): no input can move them
    constant_output: bool = False

    def __init__(self, ctx: ModelContext) -> None:
        super().__init__()
        self.ctx = ctx

    def fit_statistics(self, left_ids: Sequence[Sequence[int]], right_ids: Sequence[Sequence[int]],
                       labels: Sequence[int] | None = None) -> None:
        """Called once with the training pairs' token ids (and labels) before training."""

    def forward(self, left: torch.Tensor, left_mask: torch.Tensor,  # type: ignore[override]
                right: torch.Tensor, right_mask: torch.Tensor) -> torch.Tensor:
        """Score a batch: ``[B, n]`` / ``[B, m]`` ids and masks -> ``[B, num_outputs]``."""
        raise NotImplementedError


_REGISTRY: dict[str, type[PairModel]] = {}
M = TypeVar("M", bound=type[PairModel])


def register_model(name: str) -> Callable[[M], M]:
    """Class decorator: make a :class:`PairModel` available to recipes under ``name``."""

    def decorator(cls: M) -> M:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"model name {name!r} registered twice")
        _REGISTRY[name] = cls
        return cls

    return decorator


@functools.cache
def _import_all() -> None:
    # this module's folder: importing the package from here would be an import cycle
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{__package__}.{info.name}")


def available_models() -> dict[str, type[PairModel]]:
    _import_all()
    return dict(sorted(_REGISTRY.items()))


def model_hparams(name: str) -> dict[str, inspect.Parameter]:
    """The keyword hyper-parameters a model's constructor accepts (beyond ``ctx``)."""
    params = inspect.signature(get_model_class(name).__init__).parameters
    return {k: p for k, p in params.items() if k not in ("self", "ctx")}


def get_model_class(name: str) -> type[PairModel]:
    """Look a model class up by name, with a helpful error listing the known names."""
    models = available_models()
    if name not in models:
        raise ConfigError(f"unknown model {name!r}",
                          hint=f"known models: {', '.join(models) or '(none)'}")
    return models[name]


def check_hparam_keys(name: str, hparams: Mapping[str, Any]) -> None:
    """``hparams`` against ``name``'s constructor: an unknown key, a table where the default
    is a plain value, or NaN or infinity (in no range) is a :class:`ConfigError` naming it."""
    allowed = model_hparams(name)
    for key, value in hparams.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}: {value} is outside every range", hint="give a finite number")
        if key not in allowed:
            raise ConfigError(f"{key}: model {name!r} has no hyper-parameter {key!r}",
                              hint=f"allowed: {', '.join(sorted(allowed)) or '(none)'}")
        default = allowed[key].default
        if (isinstance(value, dict) and default is not inspect.Parameter.empty
                and not isinstance(default, dict)):
            raise ConfigError(f"{key}: a table, where model {name!r} takes a value such as "
                              f"{default!r}", hint=f"write {key} = VALUE under [model], not a "
                                                   f"[model.{key}] table")


def build_model(name: str, ctx: ModelContext, hparams: Mapping[str, Any]) -> PairModel:
    """Instantiate model ``name`` (:func:`check_hparam_keys` first)."""
    check_hparam_keys(name, hparams)
    return get_model_class(name)(ctx, **hparams)


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
    """Check ``name=(value, allowed)`` ranges; a value outside is a :class:`ConfigError`."""
    for name, (value, allowed) in checks.items():
        if not allowed.test(value):
            raise ConfigError(f"{model}: {name} must be {allowed.what}, got {value!r}")


def embedding_parameter_ids(model: nn.Module) -> set[int]:
    return {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}


def count_weight_params(model: nn.Module) -> int:
    """θ as the papers count it: weight matrices only (``dim >= 2``), no biases, no embedding
    tables (their size depends on the vocabulary, not on the model)."""
    tables = embedding_parameter_ids(model)
    return sum(p.numel() for p in model.parameters() if p.dim() >= 2 and id(p) not in tables)


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Parameters in total, without embedding tables, trainable, and ``weights``."""
    tables = embedding_parameter_ids(model)
    params = list(model.parameters())
    return {
        "total": sum(p.numel() for p in params),
        "without_embeddings": sum(p.numel() for p in params if id(p) not in tables),
        "trainable": sum(p.numel() for p in params if p.requires_grad),
        "weights": count_weight_params(model),
    }
