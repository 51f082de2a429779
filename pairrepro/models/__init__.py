"""Models: tensors in, scores out. Each model module registers itself by name.

See :mod:`pairrepro.models.base` for the contract every model follows and how recipes find
them (the registry).
"""

from pairrepro.models.base import (
    ModelContext,
    PairModel,
    available_models,
    build_model,
    register_model,
)

__all__ = ["ModelContext", "PairModel", "available_models", "build_model", "register_model"]
