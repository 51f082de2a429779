"""Validation for every TOML file: :class:`Schema`, and :func:`validate` (errors name the key)."""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from pairrepro.errors import ConfigError

S = TypeVar("S", bound=BaseModel)


class Schema(BaseModel):
    """Base of every TOML schema: unknown keys are errors, strict (but int to float), frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True,
                              validate_default=True)


def _where(loc: Sequence[int | str], sections: bool) -> str:
    """``("optim", "lr")`` -> ``[optim] lr``; ``("files", 0, "sha")`` -> ``[files[0]] sha``."""
    parts = [p for p in loc if p not in ("function-after", "function-before")]
    keys = [i for i, p in enumerate(parts) if isinstance(p, str)]
    if sections and len(parts) > 1 and keys and keys[-1] > 0:
        last = keys[-1]  # the key itself; everything before it names its table

        def dotted(items: Sequence[int | str]) -> str:
            return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in items)[1:]

        return f"[{dotted(parts[:last])}] {dotted(parts[last:])}"
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
    if kind == "extra_forbidden":  # the key as typed, quoted: a misspelling shows
        return f"{where}: {_ALLOWED[kind]} {error['loc'][-1]!r}"
    allowed = _ALLOWED.get(kind) or str(error.get("msg", "")).removeprefix("Value error, ")
    value = error.get("input")
    shown = f"{value!r}: " if not isinstance(value, dict | list) else ""
    return f"{where}: {shown}{allowed}" if where else f"{shown}{allowed}"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The schema model inside an annotation (``X``, ``list[X]``, ``X | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_model_in, typing.get_args(annotation)) if m is not None), None)


def allowed_keys(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The keys the table at ``loc`` allows ([] when it is no schema model)."""
    current: type[BaseModel] | None = model
    keyed = False  # the previous field was a dict[str, Model]: this part is one of its keys
    for part in loc:
        if isinstance(part, int) or keyed:
            keyed = False
            continue  # an item of a list or a dict: the container's own model, found below
        field = current.model_fields.get(part) if current is not None else None
        current = _model_in(field.annotation) if field is not None else None
        keyed = field is not None and typing.get_origin(field.annotation) is dict
    return list(current.model_fields) if current is not None else []


def validate(model: type[S], raw: Any, source: str, sections: bool = True,
             hint: str | None = None, context: dict[str, Any] | None = None,
             set_elsewhere: Mapping[tuple[str, ...], str] | None = None) -> S:
    """Validate ``raw`` into ``model``; a :class:`ConfigError` names ``source`` (or the
    ``--set`` in ``set_elsewhere``) and the first problem, the others in the hint."""
    try:
        return model.model_validate(raw, context=context)
    except ValidationError as exc:
        details = exc.errors(include_url=False)
        loc = tuple(details[0]["loc"])
        source = next((where for key, where in (set_elsewhere or {}).items()
                       if loc[:len(key)] == key), source)
        errors = [describe(e, sections) for e in details]
        more = f"also: {'; '.join(errors[1:4])}" if len(errors) > 1 else None
        # an unknown key is most often a misspelling: say which keys that table takes
        known = (allowed_keys(model, details[0]["loc"][:-1])
                 if details[0]["type"] == "extra_forbidden" else [])
        allowed = f"allowed keys: {', '.join(known)}" if known else None
        raise ConfigError(f"{source}: {errors[0]}",
                          hint="; ".join(h for h in (hint, allowed, more) if h) or None) from None
