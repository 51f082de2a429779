"""Model registry: recipes name a model, this module finds and builds it; every module of the
package is imported on first lookup, so a new model file only decorates its class with
:func:`register_model`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pairrepro.errors import ConfigError
from pairrepro.models.base import ModelContext, PairModel

_REGISTRY: dict[str, type[PairModel]] = {}
_IMPORTED = False
M = TypeVar("M", bound=type[PairModel])


def register_model(name: str) -> Callable[[M], M]:
    """Class decorator: make a :class:`PairModel` available to recipes under ``name``."""

    def decorator(cls: M) -> M:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"model name {name!r} registered twice")
        _REGISTRY[name] = cls
        return cls

    return decorator


def _import_all() -> None:
    global _IMPORTED
    if _IMPORTED:
        return
    # this module's own folder, not the package object: importing pairrepro.models from here
    # would be an import cycle (the package imports this module)
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{__package__}.{info.name}")
    _IMPORTED = True


def available_models() -> dict[str, type[PairModel]]:
    _import_all()
    return dict(sorted(_REGISTRY.items()))


def model_hparams(name: str) -> dict[str, inspect.Parameter]:
    """The keyword hyper-parameters a model's constructor accepts (beyond ``ctx``)."""
    cls = get_model_class(name)
    params = inspect.signature(cls.__init__).parameters
    return {k: p for k, p in params.items() if k not in ("self", "ctx")}


def get_model_class(name: str) -> type[PairModel]:
    """Look a model class up by name, with a helpful error listing the known names."""
    models = available_models()
    if name not in models:
        raise ConfigError(
            f"unknown model {name!r}", hint=f"known models: {', '.join(models) or '(none)'}"
        )
    return models[name]


def check_hparam_keys(name: str, hparams: Mapping[str, Any]) -> None:
    """``hparams`` against ``name``'s constructor, the :class:`ConfigError` starting with the
    key: an unknown key (``hiden``), or a table where the default is a plain value
    (``[model.hidden]``), which would otherwise reach the model's own arithmetic."""
    allowed = model_hparams(name)
    for key, value in hparams.items():
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
