"""Numbers as the papers print them (published strings parsed, reproduced values in the paper's
decimals and fraction style, counts like ``77.5K``) and the Markdown table every report writes."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from pairrepro.planning.paper_tables import Column
from pairrepro.stats import INTERVAL_CAP, MC_Z, Interval

# marks an endpoint whose last printed digit could still move with the resampling seed
MOVING = "~"
MOVING_NOTE = (f"{MOVING}: an endpoint whose last printed digit could still move with the "
               f"resampling seed (a rounding boundary within {MC_Z:g} Monte-Carlo s.e. of it "
               f"at the cap of {INTERVAL_CAP:,} resamples)")


def parse_published(text: str) -> float | None:
    """A printed number as a float (``"85.1"``, ``".8912"``, ``"5E−5"``); ``None`` for ``-``."""
    cleaned = text.strip().replace("−", "-").replace("E", "e")
    if cleaned in ("", "-"):
        return None
    multiplier = {"K": 1e3, "k": 1e3, "M": 1e6}.get(cleaned[-1], 1.0)
    try:
        return float(cleaned[:-1] if multiplier > 1 else cleaned) * multiplier
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
    scale, suffix = (1e6, "M") if value >= 1e6 else (1e3, "K")
    return f"{value / scale:.1f}{suffix}".replace(f".0{suffix}", suffix)


def to_unit(value: float, column: Column) -> float:
    """A fraction (as runs record metrics) in ``column``'s unit."""
    return value * 100 if column.unit == "%" else value


def from_unit(value: float, column: Column) -> float:
    """A value in ``column``'s unit as a fraction (the scale runs record metrics in)."""
    return value / 100 if column.unit == "%" else value


def printed_step(column: Column) -> float:
    """The unit ``column``'s values print in, in the metric's own scale (fractions)."""
    return from_unit(10.0 ** -column.decimals, column)


def in_column(column: Column) -> Callable[[float], str]:
    """How ``column`` prints a metric-scale value (fractions): its unit, decimals and style."""
    return lambda value: format_number(to_unit(value, column), column)


def format_interval(interval: Interval, number: Callable[[float], str]) -> str:
    """``[low, high]`` printed by ``number``, an endpoint that may still move marked."""
    low, high = (MOVING * moving + number(end) for end, moving in
                 zip((interval.low, interval.high), interval.moving(), strict=True))
    return f"[{low}, {high}]"


def p_text(p: float) -> str:
    """A p-value as the report prints it (``p 0.012``, ``p < 0.001``)."""
    return "p < 0.001" if p < 0.001 else f"p {p:.3f}"


def hparam_equal(published: str, value: Any) -> bool:
    """Whether a recipe's ``value`` is the published hyper-parameter (``(a, b)``: a list)."""
    text = published.replace("−", "-").replace(" ", "")
    if text.startswith("(") and text.endswith(")"):
        parts = [parse_published(p) for p in text[1:-1].split(",")]
        return isinstance(value, list | tuple) and [float(v) for v in value] == parts
    number = parse_published(text)
    if number is None or isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isclose(float(value), number, rel_tol=1e-9, abs_tol=1e-12)


def markdown_table(head: list[str], rows: Iterable[list[str]] = ()) -> list[str]:
    """The lines of a GitHub Markdown table (its cells already escaped)."""
    cells = " | ".join
    return [f"| {cells(head)} |", "|" + "---|" * len(head), *(f"| {cells(row)} |" for row in rows)]
