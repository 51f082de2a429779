"""Protocol readings: a reproduced number re-scored from the same committed predictions under
another published evaluation protocol (``pairrepro/report/readings/``; docs/results.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.fileio import read_toml
from pairrepro.metrics import MetricName, class_one_indicators, f1_from_counts
from pairrepro.planning.paper_tables import Column
from pairrepro.report.analyses import evidence
from pairrepro.report.tables import numbers
from pairrepro.runs import RunInfo
from pairrepro.schema import Schema, validate
from pairrepro.stats import (
    Interval,
    f1_interval,
    joint_interval,
    macro_f1_interval,
    mean_interval,
)

if TYPE_CHECKING:
    from pairrepro.report.tables.cells import EvalTable

READINGS_DIR = paths.packaged("report/readings")

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
    metrics: list[MetricName]  # the metrics the readings re-score
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
class Farther:
    """How much farther from the paper's value a reading lies than the nearest reading,
    |reading - paper| - |nearest - paper|, with its paired interval (the column's unit)."""

    value: float
    low: float
    high: float
    moving: tuple[bool, bool] = (False, False)
    tied: bool = False  # the interval reaches 0 (or may, within its MC error)


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
    farther: Farther | None = None  # None: the nearest, or no paper's value

    def as_json(self) -> dict[str, Any]:
        farther = self.farther
        return {"reading": self.reading.name, "protocol": self.reading.protocol,
                "value": self.value, "low": self.low, "high": self.high,
                "distance": self.distance, "nearest": self.nearest,
                "farther": None if farther is None else ends_json(farther),
                "tied": bool(farther and farther.tied)}


def ends_json(found: Interval | Farther) -> dict[str, float]:
    return {"value": found.value, "low": found.low, "high": found.high}


def tied_with_nearest(values: list[ReadingValue]) -> list[ReadingValue]:
    """The readings the data cannot tell from the nearest one."""
    return [v for v in values if v.farther is not None and v.farther.tied]


_UnitsOf = Callable[[str], evidence.Units]  # metric name -> the cell's runs' units


def _read(units_of: _UnitsOf, column: Column, published: float | None, reading: Reading,
          spec: ReadingsFile) -> Interval:
    """The reading's mean over seeds with its bootstrap interval."""
    split, metric = column.split, column.metric_name
    units = units_of(f"{split}.accuracy" if reading.protocol == "accuracy"
                     else f"{split}.{metric}")
    seed = evidence.stream("reading", reading.protocol, units.recipe, units.metric, units.seeds)
    options = {"seed": seed, "step": numbers.printed_step(column),
               "targets": () if published is None else (numbers.from_unit(published, column),)}
    if reading.protocol in ("f1_positive", "f1_macro"):
        draw = f1_interval if reading.protocol == "f1_positive" else macro_f1_interval
        return draw(np.asarray(units.labels), units.values, **options)
    if reading.protocol in ("accuracy", "clean"):
        return mean_interval(units.values, **options)
    dropped = _raw_counts(spec, split, reading)
    zeros = dropped.no_positive if reading.protocol == "raw_no_positive_zero" else 0
    seeds = units.values.shape[0]  # each seed's units, then the dropped questions' 1s and 0s
    return mean_interval(np.hstack([units.values, np.ones((seeds, dropped.all_positive)),
                                    np.zeros((seeds, zeros))]), **options)


def _raw_counts(spec: ReadingsFile, split: str, reading: Reading) -> DroppedQuestions:
    dropped = spec.raw.get(split)
    if dropped is None:
        raise ConfigError(f"readings of {spec.dataset}: no [raw.{split}] counts for "
                          f"{reading.name!r}", hint=f"add them to {READINGS_DIR}")
    return dropped


_PAIR_PROTOCOLS = ("f1_positive", "f1_macro", "accuracy")
_Joint = tuple[np.ndarray, Callable[[np.ndarray], np.ndarray], int]


def _joint(units_of: _UnitsOf, column: Column, spec: ReadingsFile) -> _Joint:
    """(features ``[units, K]``, per_seed, seeds): every reading of ``spec`` as a function
    of unit sums over one common set of units, so that readings can be resampled together;
    ``per_seed(sums)`` is ``[R, seeds, readings]``. TwitterURL's units are the pairs (class
    1's TP, FP, FN give every reading); TrecQA's are the raw split's questions, the dropped
    ones scored 1 (all positive) or 0 (no positive), each reading averaging its own."""
    split, metric = column.split, column.metric_name
    units = units_of(f"{split}.{metric}")
    values, seeds = units.values, units.values.shape[0]
    protocols = [r.protocol for r in spec.readings]
    if all(p in _PAIR_PROTOCOLS for p in protocols) and units.kind == "f1":
        pairs = values.shape[1]

        def by_pair(sums: np.ndarray) -> np.ndarray:
            tp, fp, fn = (sums[:, k * seeds:(k + 1) * seeds] for k in range(3))
            tn = pairs - tp - fp - fn
            positive = f1_from_counts(tp, fp, fn)
            read = {"f1_positive": positive,
                    "f1_macro": (positive + f1_from_counts(tn, fn, fp)) / 2,
                    "accuracy": (tp + tn) / pairs}
            return np.stack([read[p] for p in protocols], axis=2)

        return np.vstack(class_one_indicators(units.labels, values)).T, by_pair, seeds
    if any(p in _PAIR_PROTOCOLS for p in protocols) or units.kind != "mean":
        raise ConfigError(f"readings of {spec.dataset}: {', '.join(protocols)} cannot be read "
                          f"from the same {split} units of {metric}",
                          hint=f"keep pair protocols and question protocols apart in "
                               f"{READINGS_DIR}")
    raw = next((r for r in spec.readings if r.protocol != "clean"), None)
    dropped = None if raw is None else _raw_counts(spec, split, raw)
    ones, zeros = (dropped.all_positive, dropped.no_positive) if dropped else (0, 0)
    clean = values.shape[1]
    questions = clean + ones + zeros
    kind = np.repeat([0, 1, 2], [clean, ones, zeros])  # clean, all positive, no positive
    features = np.hstack([np.hstack([values, np.zeros((seeds, ones + zeros))]).T,
                          (kind == 0)[:, None], (kind == 1)[:, None]]).astype(np.float64)

    def by_question(sums: np.ndarray) -> np.ndarray:
        scored, drawn_clean, drawn_ones = (sums[:, :seeds], sums[:, seeds:seeds + 1],
                                           sums[:, seeds + 1:])
        positive = drawn_clean + drawn_ones  # questions with a relevant candidate
        read = {"clean": scored / np.maximum(drawn_clean, 1),
                "raw_no_positive_dropped": (scored + drawn_ones) / np.maximum(positive, 1),
                "raw_no_positive_zero": (scored + drawn_ones) / questions}
        return np.stack([read[p] for p in protocols], axis=2)

    return features, by_question, seeds


def _farther(joint: _Joint, units: evidence.Units, column: Column, published: float,
             spec: ReadingsFile, nearest: int, other: int) -> Farther:
    """How much farther ``other`` lies from ``published`` than ``nearest``, paired."""
    features, per_seed, seeds = joint
    paper = numbers.from_unit(published, column)

    def farther(means: np.ndarray) -> np.ndarray:
        return np.abs(means[:, other] - paper) - np.abs(means[:, nearest] - paper)

    names = tuple(r.protocol for r in spec.readings)
    found = joint_interval(
        repr(("farther", names, nearest, other, paper)), features, per_seed, farther, seeds,
        seed=evidence.stream("farther", units.recipe, column.split, column.metric_name,
                             units.seeds, names[nearest], names[other]),
        targets=(0.0,), step=numbers.printed_step(column))
    value, low, high = (numbers.to_unit(v, column) for v in (found.value, found.low, found.high))
    return Farther(value, low, high, found.moving(),
                   tied=found.low <= 0.0 or found.straddles(0.0))


def read_cell(runs: list[RunInfo], column: Column, published: float | None,
              spec: ReadingsFile) -> list[ReadingValue]:
    """Every reading of ``spec`` for one cell, with its distance from ``published`` and how
    much farther than the nearest reading it lies."""
    units_of = cache(partial(evidence.run_units, runs))  # each metric's predictions read once
    values = []
    for reading in spec.readings:
        found = _read(units_of, column, published, reading, spec)
        value, low, high = (numbers.to_unit(v, column)
                            for v in (found.value, found.low, found.high))
        values.append(ReadingValue(reading, value, low, high, found.units,
                                   None if published is None else value - published,
                                   moving=found.moving()))
    if published is None or not values:
        return values
    nearest = min(range(len(values)), key=lambda k: abs(values[k].distance or 0.0))
    joint = _joint(units_of, column, spec)
    units = units_of(f"{column.split}.{column.metric_name}")
    return [replace(v, nearest=True) if k == nearest else
            replace(v, farther=_farther(joint, units, column, published, spec, nearest, k))
            for k, v in enumerate(values)]


def _ends(value: ReadingValue | Farther, column: Column, shift: float = 0.0,
          signed: bool = False) -> str:
    """``[low, high]`` less ``shift``, an endpoint whose digit may still move marked."""
    low, high = (numbers.MOVING * moving + numbers.format_number(end - shift, column, signed=signed)
                 for end, moving in zip((value.low, value.high), value.moving, strict=True))
    return f"[{low}, {high}]"


def farther_text(farther: Farther, column: Column) -> str:
    """``+0.012 [−0.004, +0.030]``: how much farther than the nearest, with its interval."""
    return (f"{numbers.format_number(farther.value, column, signed=True)} "
            f"{_ends(farther, column, signed=True)}")


def _name(value: ReadingValue, tied: bool) -> str:
    """The reading's name, the nearest and those tied with it in bold and marked."""
    if value.nearest:
        return f"**{value.reading.name}** (nearest{', tied' if tied else ''})"
    if value.farther is not None and value.farther.tied:
        return f"**{value.reading.name}** (tied)"
    return value.reading.name


READINGS_NOTE = (
    "Each reading re-scores the committed predictions of the same runs under another "
    "published protocol (`pairrepro/report/readings/`), nothing retrained; a value is the "
    "mean over seeds with its 95% bootstrap interval over the protocol's test units and seeds, "
    "and *− paper* is its distance from the published value with that interval shifted. "
    "**Nearest** marks the reading closest to the paper: a hypothesis about how the paper "
    "scored, with this evidence, not a correction of the reproduced number. *Farther than "
    "nearest* is |reading − paper| − |nearest − paper|, its 95% interval drawn from the same "
    "resamples of units and seeds for both readings; where that interval reaches 0, or its "
    "low endpoint lies within 3 Monte-Carlo s.e. of 0, the two are **tied**: these runs "
    "cannot say which protocol lies nearer.")


def table_readings(ev: EvalTable) -> list[tuple[str, Column, float, list[ReadingValue]]]:
    """(label, column, published, readings) of ``ev``'s cells that readings apply to; a
    damaged run in one of them is a DamagedRunError, as in ``report gap``."""
    found = []
    for row in ev.rows:
        for column, cell in zip(ev.table.columns, row.cells, strict=False):
            published = numbers.parse_published(cell.published)
            spec = readings_for(column, ev.table.dataset) if column.kind == "metric" else None
            if published is None or spec is None or not any(
                    t.paper == ev.paper.paper and t.table == ev.table.number for t in spec.tables):
                continue
            evidence.refuse_damaged(cell.recipe, cell.damaged)
            if cell.runs:
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
        tied = bool(tied_with_nearest(values))
        for value in values:
            # the distance from the paper's value, its interval shifted by that value
            distance = "" if value.distance is None else (
                f"{numbers.format_number(value.distance, column, signed=True)} "
                f"{_ends(value, column, value.value - value.distance, signed=True)}")
            farther = "" if value.farther is None else farther_text(value.farther, column)
            rows.append([label, column.header, paper, _name(value, tied),
                         f"{numbers.format_number(value.value, column)} {_ends(value, column)}",
                         distance, farther])
        spec = readings_for(column, dataset)
        for reading in spec.readings if spec else []:
            sources.setdefault(reading.name, reading.source)
    head = ["row", "metric", "paper", "reading", "value [95% interval]", "− paper [95% interval]",
            "farther than nearest [95% interval]"]
    return [*numbers.markdown_table(head, rows), "", READINGS_NOTE, "", "Sources:", "",
            *(f"- {name}: {source}" for name, source in sources.items())]
