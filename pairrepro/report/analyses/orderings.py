"""A table's rows against each other, by paired tests on the same units: ``--compare-to ROW``
(every row against one) and which of the paper's orderings of its rows hold in our runs (the
verdict rule: :func:`verdict`, docs/results.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any

from pairrepro.errors import ConfigError
from pairrepro.planning.paper_tables import Column
from pairrepro.planning.recipe_index import COMPARISON_BLOCK, normalise_label
from pairrepro.report.analyses import evidence
from pairrepro.report.analyses.comparison import (
    Comparison,
    adjust,
    compare,
    holm_text,
    per_unit,
    test_words,
    versus_text,
)
from pairrepro.report.tables.cells import EvalTable
from pairrepro.report.tables.numbers import format_number, markdown_table, parse_published
from pairrepro.stats import ALPHA


def compare_to(ev: EvalTable, label: str) -> EvalTable:
    """Each metric cell with runs against row ``label``'s (Holm over the table); ConfigError
    for an unknown label."""
    wanted = normalise_label(label)
    base = next((r for r in ev.rows if normalise_label(r.row.label) == wanted
                 or normalise_label(r.row.printed_label) == wanted), None)
    if base is None:
        raise ConfigError(f"--compare-to {label!r}: no such row in {ev.paper.paper} Table "
                          f"{ev.table.number}",
                          hint="choose one of: " + "; ".join(r.row.label for r in ev.rows))
    ev.compare_to = base.row.printed_label
    columns = {c.key: c for c in ev.table.columns}
    family = []
    for erow in ev.rows:
        for cell, ref in zip(erow.cells, base.cells, strict=True):
            column = columns[cell.column]
            if column.kind != "metric" or erow is base or not cell.runs or not ref.runs:
                continue
            cell.comparison = compare(per_unit(cell.runs, column.metric),
                                      per_unit(ref.runs, column.metric), column)
            family.append(cell.comparison)
            if cell.comparison.problem:
                cell.detail = "; ".join(x for x in (
                    cell.detail, f"--compare-to: {cell.comparison.problem}") if x)
    adjust(family)
    return ev


HOLDS = "holds"
SAME_DIRECTION = "same direction, not significant"
REVERSED_NOT_SIGNIFICANT = "reversed, not significant"
REVERSED = "reversed"
TIE_HOLDS = "tie holds"
TIE_BROKEN = "tie broken"
UNDECIDED = "undecided"
NO_TEST = "no test"
VERDICTS = (HOLDS, SAME_DIRECTION, REVERSED_NOT_SIGNIFICANT, REVERSED, TIE_HOLDS, TIE_BROKEN,
            UNDECIDED, NO_TEST)


@dataclass
class Ordering:
    column: str  # the column's header
    metric: str  # "<split>.<metric>"
    higher: str  # row labels, the paper's higher first (a tie: the paper's printed order)
    lower: str
    published_higher: float
    published_lower: float
    verdict: str
    comparison: Comparison  # ours: the higher row against the lower, Holm over the table
    one_model: bool = False  # a row is one trained model: no claim about the method

    @property
    def tie(self) -> bool:
        """The paper prints the same number for both rows."""
        return self.published_higher == self.published_lower


def verdict(paper_difference: float, difference: float, p_value: float,
            alpha: float = ALPHA) -> str:
    """Our ``difference`` (the paper's higher row minus its lower) against the paper's order."""
    significant = p_value < alpha
    if paper_difference == 0:
        return TIE_BROKEN if significant else TIE_HOLDS
    if difference * paper_difference > 0:
        return HOLDS if significant else SAME_DIRECTION
    return REVERSED if significant else REVERSED_NOT_SIGNIFICANT


@dataclass
class _RowUnits:
    """One paper row in one column: label, printed value and per-unit values (or why not)."""

    label: str
    published: float
    units: evidence.Units | str  # or why there are none
    one_model: bool = False


def _paper_rows(ev: EvalTable, column: Column) -> list[_RowUnits]:
    """The paper's rows with a published value and finished runs in ``column``."""
    rows = []
    for erow in ev.rows:
        if erow.row.block == COMPARISON_BLOCK:
            continue
        cell = next(c for c in erow.cells if c.column == column.key)
        published = parse_published(erow.row.values.get(column.key, ""))
        if published is None or not cell.runs:
            continue
        # a test over the readable seeds alone is not the row's
        found = (f"{len(cell.damaged)} seed(s) damaged: " + "; ".join(cell.damaged)
                 if cell.damaged else per_unit(cell.runs, column.metric))
        rows.append(_RowUnits(erow.row.printed_label, published, found, cell.one_model))
    return rows


def _ordering(column: Column, first: _RowUnits, second: _RowUnits, alpha: float) -> Ordering:
    high, low = (first, second) if first.published >= second.published else (second, first)
    found = compare(high.units, low.units, column, alpha)
    said = (NO_TEST if found.p_value is None or found.difference is None else
            UNDECIDED if found.undecided else
            verdict(high.published - low.published, found.difference, found.p_value, alpha))
    return Ordering(column.header, column.metric, high.label, low.label, high.published,
                    low.published, said, found, high.one_model or low.one_model)


def _text(item: Ordering, column: Column) -> str:
    """"+0.02 (p 0.354)" with one decimal more than the paper, or why there is no test."""
    return versus_text(item.comparison, column, decimals=1, undecided=False)


def table_orderings(ev: EvalTable, alpha: float = ALPHA) -> list[Ordering]:
    """Every ordering of two paper rows of ``ev``, column by column, in the paper's row order."""
    found = [_ordering(column, first, second, alpha)
             for column in ev.table.columns if column.kind == "metric"
             for first, second in combinations(_paper_rows(ev, column), 2)]
    adjust([o.comparison for o in found])
    return found


def orderings_markdown(ev: EvalTable, orderings: list[Ordering], alpha: float = ALPHA) -> str:
    title = f"#### {ev.paper.paper}: Table {ev.table.number}: which of the paper's orderings hold"
    if not orderings:
        return (f"{title}\n\nNo two rows of the paper have both a published value and a "
                "reference run in the same column.\n")
    columns = {c.header: c for c in ev.table.columns}
    rows = []
    for item in orderings:
        column, sign = columns[item.column], "=" if item.tie else ">"
        rows.append([item.column, f"{item.higher} {sign} {item.lower}"
                     + (" †" if item.one_model else ""),
                     f"{format_number(item.published_higher, column)} {sign} "
                     f"{format_number(item.published_lower, column)}",
                     _text(item, column), holm_text(item.comparison), item.verdict])
    lines = [title, "", *markdown_table(["column", "the paper", "published",
                                         "ours (higher − lower)", "Holm p", "verdict"], rows)]
    counts = {name: sum(o.verdict == name for o in orderings) for name in VERDICTS}
    units = ", ".join(sorted({evidence.unit_name(o.metric) for o in orderings}))
    lines += ["", "Orderings: " + ", ".join(f"{n} {name}" for name, n in counts.items() if n)
              + f". Ours is the difference of the two rows' means over seeds on the same "
              f"{units}, with {test_words(units, alpha)}; significant means p < {alpha:g}. "
              "Holm p: adjusted by Holm's step-down method over the "
              f"{sum(o.comparison.holm is not None for o in orderings)} tests of this table. "
              "A row needs a published value and a reference run to be compared."]
    if any(o.one_model for o in orderings):
        lines[-1] += (" †: a row is one trained model (one seed); the test says what that "
                      "model does, not the method.")
    return "\n".join(lines) + "\n"


def orderings_json(ev: EvalTable, orderings: list[Ordering], alpha: float = ALPHA
                   ) -> dict[str, Any]:
    columns = {c.header: c for c in ev.table.columns}
    return {"paper": ev.paper.paper, "table": ev.table.number, "alpha": alpha,
            "orderings": [_json(o, columns[o.column]) for o in orderings]}


def _json(item: Ordering, column: Column) -> dict[str, Any]:
    fields, found = asdict(item), item.comparison
    del fields["comparison"]
    return {**fields, "difference": found.difference, "p_value": found.p_value,
            "holm": found.holm, "text": _text(item, column), "tie": item.tie}
