"""Models: tensors in, scores out (the contract and the registry: :mod:`pairrepro.models.base`)."""

from pairrepro.models.base import (
    ModelContext,
    PairModel,
    available_models,
    build_model,
    register_model,
)

__all__ = ["ModelContext", "PairModel", "available_models", "build_model", "register_model"]
