"""Numbers as the papers print them: parsing published strings, formatting reproduced values
with the paper's decimals and fraction style, parameter counts (``77.5K``)."""

from __future__ import annotations

import re

from pairrepro.report.paper_tables import Column


def parse_published(text: str) -> float | None:
    """A printed number as a float (``"85.1"``, ``".8912"``, ``"5E−5"``); ``None`` for ``-``."""
    cleaned = text.strip().replace("−", "-").replace("E", "e")
    if cleaned in ("", "-"):
        return None
    multiplier = 1.0
    if cleaned[-1] in "KkM":
        multiplier = 1e6 if cleaned[-1] == "M" else 1e3
        cleaned = cleaned[:-1]
    try:
        return float(cleaned) * multiplier
    except ValueError:
        return None


def format_number(value: float, column: Column, signed: bool = False) -> str:
    """``value`` (already in the column's unit) with the paper's decimals and fraction style."""
    text = f"{value:+.{column.decimals}f}" if signed else f"{value:.{column.decimals}f}"
    if column.unit == "fraction" and not column.leading_zero:
        text = re.sub(r"^([+-]?)0\.", r"\1.", text)
    return text.replace("-", "−") if signed else text


def format_count(value: float) -> str:
    """A parameter count in the paper's style: ``77.5K``, ``190K``."""
    if value >= 1e6:
        return f"{value / 1e6:.1f}M".replace(".0M", "M")
    return f"{value / 1e3:.1f}K".replace(".0K", "K")


def to_unit(value: float, column: Column) -> float:
    """A fraction (as runs record metrics) in ``column``'s unit."""
    return value * 100 if column.unit == "%" else value


def from_unit(value: float, column: Column) -> float:
    """A value in ``column``'s unit as a fraction (the scale runs record metrics in)."""
    return value / 100 if column.unit == "%" else value
