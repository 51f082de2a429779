"""``--compare-to ROW``: every row of a table against one of its rows, cell by cell."""

from __future__ import annotations

from pairrepro.errors import ConfigError
from pairrepro.planning.recipe_index import normalise_label
from pairrepro.report.analyses.comparison import adjust, compare, per_unit
from pairrepro.report.tables.cells import EvalTable


def compare_to(ev: EvalTable, label: str) -> EvalTable:
    """Each metric cell with runs against row ``label``'s cell, Holm over the table; returns
    ``ev`` (an unknown label: ConfigError)."""
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
