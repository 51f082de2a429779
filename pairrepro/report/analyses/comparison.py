"""The paired comparison of two sets of runs on the same test units, one type for every report
that compares (``--compare-to``, orderings, gap ladders, parity); only renderers make text."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

from pairrepro.errors import NoEvidenceError
from pairrepro.planning.paper_tables import Column
from pairrepro.report.analyses import evidence
from pairrepro.report.tables.numbers import format_number, p_text, to_unit
from pairrepro.runs import RunInfo
from pairrepro.stats import ALPHA, INTERVAL_CAP, MC_Z, P_MARGIN, P_SE, Interval, holm


@dataclass
class Comparison:
    """``a`` minus ``b`` (column unit, else fractions) with the paired test's p, whether
    p < alpha is undecided, the Holm p over its family; or why there is no test."""

    difference: float | None = None
    p_value: float | None = None
    undecided: bool = False
    holm: float | None = None
    problem: str = ""


Side = evidence.Units | str  # per-unit values, or why a side has none


def compare(a: Side, b: Side, column: Column | None = None, alpha: float = ALPHA) -> Comparison:
    """The paired test of :func:`test_words` of ``a`` against ``b`` (a str side: why none)."""
    if isinstance(a, str) or isinstance(b, str):
        return Comparison(problem=a if isinstance(a, str) else str(b))
    try:
        found = evidence.difference_interval(a, b, confidence=1 - alpha, test=alpha)
    except NoEvidenceError as exc:
        return Comparison(problem=str(exc))
    difference = found.value if column is None else to_unit(found.value, column)
    return Comparison(difference, found.p_value, found.undecided(alpha))


def test_words(units: str, alpha: float = ALPHA) -> str:
    """How :func:`compare` tests, for a footer: ``units`` are what it resamples."""
    return (f"the two-sided p-value of a paired two-level bootstrap test over {units} and "
            f"seeds, both random ({evidence.F1_PAIRING}): twice the smaller share of resampled "
            f"differences on either side of 0, from the resamples that draw the difference's "
            f"{1 - alpha:.0%} interval, so p < {alpha:g} only where that interval excludes 0 "
            f"(resamples doubled until p's Monte-Carlo s.e. is at most {P_SE:g} and it is "
            f"settled whether p lies within {P_MARGIN:g} of {alpha:g}, at most "
            f"{INTERVAL_CAP:,}; undecided where it does, or within {MC_Z:g} MC s.e.)")


def per_unit(runs: list[RunInfo], metric: str) -> Side:
    """The runs' per-unit values of ``metric``, or why there are none."""
    try:
        return evidence.run_units(runs, metric)
    except NoEvidenceError as exc:
        return str(exc)


def adjust(family: list[Comparison]) -> None:
    """Holm's step-down adjustment over the tested comparisons of ``family``."""
    tested = [c for c in family if c.p_value is not None]
    for item, adjusted in zip(tested, holm([c.p_value or 1.0 for c in tested]), strict=True):
        item.holm = adjusted


def versus_text(found: Comparison, column: Column, decimals: int = 0,
                undecided: bool = True) -> str:
    """``+0.012 (p 0.412)`` with ``decimals`` more than the paper, or ``n/a (why)``."""
    if found.p_value is None or found.difference is None:
        return f"n/a ({found.problem})"
    style = column.model_copy(update={"decimals": column.decimals + decimals})
    mark = ", undecided at 0.05" if undecided and found.undecided else ""
    return (f"{format_number(found.difference, style, signed=True)} "
            f"({p_text(found.p_value)}{mark})")


def holm_text(found: Comparison | None) -> str:
    """The Holm p as a table prints it ("" without one)."""
    return "" if found is None or found.holm is None else p_text(found.holm).removeprefix("p ")


@dataclass
class Equivalence:
    """``a`` minus ``b`` against a margin: the 95% interval, the two one-sided tests' 90%
    interval and their verdict, and the difference the design detects (80% power at 0.05)."""

    difference: Interval
    tost: Interval
    margin: float  # the metric's scale
    verdict: str  # "shown", "not shown" or "undecided" (an endpoint within MC_Z s.e. of it)
    detectable: float


def equivalence(a: evidence.Units, b: evidence.Units, margin: float, step: float = 0.0
                ) -> Equivalence:
    """Two one-sided tests at :data:`ALPHA`: is the 90% interval of ``a - b`` in ±``margin``?"""
    found = evidence.difference_interval(a, b, step=step)
    tost = evidence.difference_interval(a, b, step=step, targets=(-margin, margin),
                                        confidence=1 - 2 * ALPHA, test=0.0)
    said = ("undecided" if tost.straddles(-margin) or tost.straddles(margin) else
            "shown" if -margin < tost.low and tost.high < margin else "not shown")
    z = NormalDist().inv_cdf(1 - ALPHA / 2)  # (z + 0.84) s.e.: 80% power, s.e. from the width
    detectable = (z + NormalDist().inv_cdf(0.8)) * (found.high - found.low) / (2 * z)
    return Equivalence(found, tost, margin, said, detectable)
