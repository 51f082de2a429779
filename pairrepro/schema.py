"""One validation library for every TOML file we read (recipes, dataset manifests, paper
tables): pydantic v2 models, and one translation of its errors into a :class:`ConfigError`
that names the file, the ``[section] key``, the value and what is allowed::

    recipes/x.toml: [optim] lr: 'fast' is not allowed: expected a number

Models derive from :class:`Schema` (unknown keys are errors, no silent coercion of
strings into numbers) and are validated with :func:`validate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from pairrepro.errors import ConfigError

S = TypeVar("S", bound=BaseModel)


class Schema(BaseModel):
    """Base of every TOML schema: unknown keys are errors, values are not coerced across
    types (``"3"`` is not an integer), ints widen to floats, models are immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True,
                              validate_default=True)


def _where(loc: Sequence[int | str], sections: bool) -> str:
    """``("optim", "lr")`` -> ``[optim] lr``; list indices as ``[i]``."""
    parts = [p for p in loc if p not in ("function-after", "function-before")]
    if not parts:
        return ""
    text = ""
    for i, part in enumerate(parts):
        if isinstance(part, int) or (i == 0 and sections and len(parts) > 1):
            text += f"[{part}]"
        else:
            text += f" {part}" if text else str(part)
    return text.strip()


# pydantic's messages, reworded as what is allowed
_ALLOWED = {
    "int_type": "expected an integer", "int_parsing": "expected an integer",
    "float_type": "expected a number", "float_parsing": "expected a number",
    "string_type": "expected a string", "bool_type": "expected true or false",
    "list_type": "expected a list", "dict_type": "expected a table",
    "model_type": "expected a table", "extra_forbidden": "unknown key",
    "missing": "missing key",
}


def describe(error: dict[str, Any], sections: bool = True) -> str:
    """One pydantic error as ``[section] key: value: what is allowed``."""
    where = _where(error.get("loc", ()), sections)
    kind = error.get("type", "")
    if kind in ("missing", "extra_forbidden"):
        return f"{where}: {_ALLOWED[kind]}"
    allowed = _ALLOWED.get(kind)
    if allowed is None:
        allowed = str(error.get("msg", "")).removeprefix("Value error, ")
    value = error.get("input")
    shown = f"{value!r}: " if not isinstance(value, dict | list) else ""
    return f"{where}: {shown}{allowed}" if where else f"{shown}{allowed}"


def validate(model: type[S], raw: Any, source: str, sections: bool = True,
             hint: str | None = None, context: dict[str, Any] | None = None) -> S:
    """Validate ``raw`` (a TOML-shaped dict) into ``model``; a :class:`ConfigError` names
    ``source`` and the first problem (the others follow in the hint)."""
    try:
        return model.model_validate(raw, context=context)
    except ValidationError as exc:
        errors = [describe(e, sections) for e in exc.errors(include_url=False)]
        more = f"also: {'; '.join(errors[1:4])}" if len(errors) > 1 else None
        raise ConfigError(f"{source}: {errors[0]}",
                          hint="; ".join(h for h in (hint, more) if h) or None) from None
