"""Protocol readings: a reproduced number re-scored from the same committed predictions under
another published evaluation protocol (``pairrepro/report/readings/``; docs/results.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from pairrepro.errors import ConfigError
from pairrepro.fileio import read_toml
from pairrepro.planning.paper_tables import Column
from pairrepro.report.analyses import evidence
from pairrepro.report.tables import numbers
from pairrepro.runs import RunInfo
from pairrepro.schema import Schema, validate
from pairrepro.stats import Interval, f1_interval, macro_f1_interval, mean_interval

if TYPE_CHECKING:
    from pairrepro.report.tables.cells import EvalTable

READINGS_DIR = Path(__file__).resolve().parents[1] / "readings"

#: the protocols a reading can name (each implemented by :func:`_read`)
Protocol = Literal["clean", "raw_no_positive_dropped", "raw_no_positive_zero",
                   "f1_positive", "f1_macro", "accuracy"]


class Reading(Schema):
    name: str
    protocol: Protocol
    source: str


class DroppedQuestions(Schema):
    """Questions of a raw split that its clean variant drops (each has candidates)."""

    no_positive: int = Field(ge=0)
    all_positive: int = Field(ge=0)


class TableRef(Schema):
    paper: str
    table: int


class ReadingsFile(Schema):
    dataset: str
    metrics: list[str]  # metric names (``map``, ``f1``) the readings re-score
    readings: list[Reading]
    raw: dict[str, DroppedQuestions] = Field(default_factory=dict)  # split -> counts
    tables: list[TableRef] = Field(default_factory=list)


def load_readings(dataset: str) -> ReadingsFile | None:
    path = READINGS_DIR / f"{dataset}.toml"
    if not path.is_file():
        return None
    found = validate(ReadingsFile, read_toml(path), str(path))
    if found.dataset != dataset:
        raise ConfigError(f"{path}: dataset {found.dataset!r} where the file name says "
                          f"{dataset!r}", hint="name the file after its dataset")
    return found


def readings_for(column: Column, dataset: str) -> ReadingsFile | None:
    """The readings that apply to a metric column of ``dataset`` (None: none do)."""
    found = load_readings(column.dataset or dataset)
    return found if found and column.metric_name in found.metrics else None


@dataclass(frozen=True)
class ReadingValue:
    reading: Reading
    value: float
    low: float
    high: float
    units: int
    distance: float | None = None  # minus the paper's value
    nearest: bool = False
    moving: tuple[bool, bool] = (False, False)  # an endpoint's last digit may still move


def _read(runs: list[RunInfo], column: Column, published: float | None, reading: Reading,
          spec: ReadingsFile) -> Interval:
    """The reading's mean over seeds with its bootstrap interval."""
    split, metric = column.split, column.metric_name
    units = evidence.run_units(runs, f"{split}.accuracy" if reading.protocol == "accuracy"
                               else f"{split}.{metric}")
    seed = evidence.stream("reading", reading.protocol, units.recipe, units.metric, units.seeds)
    options = {"seed": seed, "step": numbers.printed_step(column),
               "targets": () if published is None else (numbers.from_unit(published, column),)}
    if reading.protocol in ("f1_positive", "f1_macro"):
        draw = f1_interval if reading.protocol == "f1_positive" else macro_f1_interval
        return draw(np.asarray(units.labels), units.values, **options)
    if reading.protocol in ("accuracy", "clean"):
        return mean_interval(units.values, **options)
    dropped = spec.raw.get(split)
    if dropped is None:
        raise ConfigError(f"readings of {spec.dataset}: no [raw.{split}] counts for "
                          f"{reading.name!r}", hint=f"add them to {READINGS_DIR}")
    zeros = dropped.no_positive if reading.protocol == "raw_no_positive_zero" else 0
    seeds = units.values.shape[0]  # each seed's units, then the dropped questions' 1s and 0s
    return mean_interval(np.hstack([units.values, np.ones((seeds, dropped.all_positive)),
                                    np.zeros((seeds, zeros))]), **options)


def read_cell(runs: list[RunInfo], column: Column, published: float | None,
              spec: ReadingsFile) -> list[ReadingValue]:
    """Every reading of ``spec`` for one cell, with its distance from ``published``."""
    values = []
    for reading in spec.readings:
        found = _read(runs, column, published, reading, spec)
        value, low, high = (numbers.to_unit(v, column)
                            for v in (found.value, found.low, found.high))
        values.append(ReadingValue(reading, value, low, high, found.units,
                                   None if published is None else value - published,
                                   moving=found.moving()))
    if published is None or not values:
        return values
    nearest = min(range(len(values)), key=lambda k: abs(values[k].distance or 0.0))
    return [ReadingValue(**{**v.__dict__, "nearest": k == nearest})
            for k, v in enumerate(values)]


def _ends(value: ReadingValue, column: Column, shift: float = 0.0,
          signed: bool = False) -> str:
    """``[low, high]`` less ``shift``, an endpoint whose digit may still move marked."""
    low, high = (numbers.MOVING * moving + numbers.format_number(end - shift, column, signed=signed)
                 for end, moving in zip((value.low, value.high), value.moving, strict=True))
    return f"[{low}, {high}]"


READINGS_NOTE = (
    "Each reading re-scores the committed predictions of the same runs under another "
    "published protocol (`pairrepro/report/readings/`), nothing retrained; a value is the "
    "mean over seeds with its 95% bootstrap interval over the protocol's test units and seeds, "
    "and *− paper* is its distance from the published value with that interval shifted. "
    "**Nearest** marks the reading closest to the paper: a hypothesis about how the paper "
    "scored, with this evidence, not a correction of the reproduced number.")


def table_readings(ev: EvalTable) -> list[tuple[str, Column, float, list[ReadingValue]]]:
    """(label, column, published, readings) of ``ev``'s cells that readings apply to."""
    found = []
    for row in ev.rows:
        for column, cell in zip(ev.table.columns, row.cells, strict=False):
            published = numbers.parse_published(cell.published)
            if column.kind != "metric" or not cell.runs or published is None or cell.damaged:
                continue
            spec = readings_for(column, ev.table.dataset)
            if spec is None or not any(t.paper == ev.paper.paper and t.table == ev.table.number
                                       for t in spec.tables):
                continue
            found.append((row.row.label, column, published,
                          read_cell(cell.runs, column, published, spec)))
    return found


def table_readings_markdown(ev: EvalTable) -> str:
    cells = table_readings(ev)
    if not cells:
        return (f"No reproduced cell of {ev.paper.paper} Table {ev.table.number} has a "
                "published value and protocol readings.\n")
    return "\n".join(readings_block(cells, ev.table.dataset)) + "\n"


def readings_block(cells: list[tuple[str, Column, float | None, list[ReadingValue]]],
                   dataset: str) -> list[str]:
    """Markdown lines of cells' readings, how to read them and the protocols' sources."""
    rows: list[list[str]] = []
    sources: dict[str, str] = {}  # reading -> where it is published
    for label, column, published, values in cells:
        paper = "" if published is None else numbers.format_number(published, column)
        for value in values:
            name = f"**{value.reading.name}** (nearest)" if value.nearest else value.reading.name
            # the distance from the paper's value, its interval shifted by that value
            distance = "" if value.distance is None else (
                f"{numbers.format_number(value.distance, column, signed=True)} "
                f"{_ends(value, column, value.value - value.distance, signed=True)}")
            rows.append([label, column.header, paper, name,
                         f"{numbers.format_number(value.value, column)} {_ends(value, column)}",
                         distance])
        spec = readings_for(column, dataset)
        for reading in spec.readings if spec else []:
            sources.setdefault(reading.name, reading.source)
    head = ["row", "metric", "paper", "reading", "value [95% interval]", "− paper [95% interval]"]
    return [*numbers.markdown_table(head, rows), "", READINGS_NOTE, "", "Sources:", "",
            *(f"- {name}: {source}" for name, source in sources.items())]
