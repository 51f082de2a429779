"""Gap ladders (``pairrepro/report/ladders/<name>.toml``): a published cell and the steps
towards it, each recipe one change from the step before, tested against it (docs/results.md)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.fileio import read_toml
from pairrepro.planning.model_facts import needs_training
from pairrepro.planning.paper_tables import Column, load_paper
from pairrepro.planning.plan import split_variants
from pairrepro.planning.recipe_index import (
    RecipeIndex,
    comparison_rows,
    load_recipe_index,
    normalise_label,
)
from pairrepro.report.analyses import evidence
from pairrepro.report.analyses.comparison import (
    Comparison,
    Side,
    adjust,
    compare,
    holm_text,
    per_unit,
    test_words,
    versus_text,
)
from pairrepro.report.analyses.readings import ReadingValue, read_cell, readings_for
from pairrepro.report.tables import numbers
from pairrepro.report.tables.cells import DAMAGED
from pairrepro.runs import RunInfo, find_runs
from pairrepro.schema import Schema, validate

LADDERS_DIR = paths.packaged("report/ladders")


class LadderStep(Schema):
    """A recipe and the one change it makes to the rung before (or to step ``against``)."""

    recipe: str
    change: str
    against: str = ""


class LadderReadings(Schema):
    steps: list[int]


class Dose(Schema):
    """A quantity that doubles between two steps, and the amount the paper used."""

    what: str  # "embedding dimensions"
    steps: list[int] = Field(min_length=2, max_length=2)
    amounts: list[float] = Field(min_length=2, max_length=2)
    target: float
    target_what: str  # "the paper's 300-d GloVe 840B"


class LeftOver(Schema):
    what: str
    why: str


class Account(Schema):
    """The step that stands for the reproduction, and the vectors' dose-response ladder."""

    step: int
    dose_ladder: str = ""


class CrossCheck(Schema):
    """Seed folders of another implementation under ``folder``, tested against ``against``,
    equivalent if within ``margin`` (the first metric's unit) for ``margin_why``."""

    name: str
    folder: str
    against: str
    margin: float = Field(gt=0)
    margin_why: str


class Ladder(Schema):
    title: str
    paper: str
    table: int
    row: str
    metrics: list[str]  # "<split>.<metric>", each a column of the table
    steps: list[LadderStep]
    left: list[LeftOver] = Field(default_factory=list)
    readings: LadderReadings | None = None
    dose: Dose | None = None
    account: Account | None = None
    crosschecks: list[CrossCheck] = Field(default_factory=list)


def available_ladders() -> list[str]:
    return sorted(p.stem for p in LADDERS_DIR.glob("*.toml"))


def load_ladder(name: str) -> Ladder:
    path = LADDERS_DIR / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"no gap ladder {name!r}",
                          hint=f"ladders: {', '.join(available_ladders())}")
    return validate(Ladder, read_toml(path), str(path))


def _columns(ladder: Ladder, index: RecipeIndex) -> list[tuple[Column, float | None]]:
    """Each metric's column and published value (None on a comparison row)."""
    paper = load_paper(ladder.paper)
    table = paper.table(ladder.table)
    rows = [*table.rows, *comparison_rows(paper, table, index)]
    row = next((r for r in rows if normalise_label(r.label) == normalise_label(ladder.row)),
               None)
    if row is None:
        raise ConfigError(f"ladder {ladder.title!r}: {table.name} has no row {ladder.row!r}")
    found = []
    for metric in ladder.metrics:
        column = next((c for c in table.columns if c.metric == metric and c.kind == "metric"),
                      None)
        if column is None:
            raise ConfigError(f"ladder {ladder.title!r}: {table.name} has no column {metric!r}")
        found.append((column, numbers.parse_published(row.values.get(column.key, ""))))
    return found


def recipe_runs(index: RecipeIndex, results_dir: Path, recipe: str) -> list[RunInfo]:
    """The finished reference runs of ``recipe`` itself; an unreadable seed folder raises
    DamagedRunError (leaving it out would change the mean under the same heading)."""
    if recipe not in index.recipes:
        raise ConfigError(f"gap ladder: no recipe {recipe!r}",
                          hint=f"recipes/{recipe}.toml must exist")
    found = find_runs(results_dir, recipe)
    evidence.refuse_damaged(recipe, [run.problem or run.path for run in found
                                     if run.status == DAMAGED])
    runs, _ = split_variants(found, index.recipes[recipe].to_dict())
    return runs


@dataclass
class StepValue:
    metric: str
    mean: float  # in the column's unit
    text: str  # "0.753 [0.689, 0.812]"
    low: float | None = None
    high: float | None = None
    comparison: Comparison | None = None


def versus(value: StepValue, column: Column) -> str:
    return "" if value.comparison is None else versus_text(value.comparison, column)


@dataclass
class StepResult:
    number: int
    recipe: str
    change: str
    seeds: list[int] = field(default_factory=list)
    chosen_epochs: list[int | None] = field(default_factory=list)
    values: list[StepValue] = field(default_factory=list)
    one_model: bool = False  # one seed of a model that learns: no claim about the method
    against: int | None = None  # the step tested against (None: the first step)


# a step's readings: (step, column, published value, the readings of that cell)
StepReadings = list[tuple[int, Column, float | None, list[ReadingValue]]]


@dataclass
class LadderResult:
    name: str
    ladder: Ladder
    columns: list[tuple[Column, float | None]]  # column, published value
    steps: list[StepResult]
    results_dir: Path = Path("results")
    runs: dict[int, list[RunInfo]] = field(default_factory=dict)  # step -> its runs
    readings: StepReadings | None = None  # ladder_readings' (read once)
    units: dict[int, list[Side]] = field(default_factory=dict)


def _step_values(runs: list[RunInfo], columns: list[tuple[Column, float | None]],
                 before: list[Side] | None) -> tuple[list[Side], list[StepValue]]:
    """Each column's per-unit values of ``runs`` and its value, tested against ``before``."""
    units: list[Side] = []
    values: list[StepValue] = []
    for k, (column, _) in enumerate(columns):
        own = per_unit(runs, column.metric)
        mean = statistics.fmean(numbers.to_unit(r.value(column.metric) or 0.0, column)
                                for r in runs)
        value = StepValue(column.metric, mean, numbers.format_number(mean, column))
        units.append(own)
        values.append(value)
        if isinstance(own, evidence.Units):
            found = evidence.interval(own, step=numbers.printed_step(column))
            value.low, value.high = (numbers.to_unit(v, column) for v in (found.low, found.high))
            value.text += f" {numbers.format_interval(found, numbers.in_column(column))}"
        if before is not None:
            value.comparison = compare(own, before[k], column)
    return units, values


def evaluate_ladder(name: str, results_dir: Path, index: RecipeIndex | None = None
                    ) -> LadderResult:
    """Ladder ``name`` on ``results_dir``: each step against its ``against`` step, else the
    nearest earlier main-line step with runs."""
    ladder = load_ladder(name)
    index = index or load_recipe_index()
    columns = _columns(ladder, index)
    result = LadderResult(name, ladder, columns, [], results_dir)
    last: int | None = None
    for number, step in enumerate(ladder.steps):
        runs = recipe_runs(index, results_dir, step.recipe)
        base = _step_of(ladder, step.against, number) if step.against else last
        found = StepResult(number, step.recipe, step.change, against=base)
        if runs:
            found.seeds = [r.seed for r in runs]
            found.chosen_epochs = [r.chosen_epoch for r in runs]
            model = str(runs[0].config.get("model", {}).get("name", ""))
            found.one_model = len(runs) == 1 and needs_training(model) is not False
            before = result.units.get(base) if base is not None else None
            result.units[number], found.values = _step_values(runs, columns, before)
            result.runs[number] = runs
            if not step.against:
                last = number
        result.steps.append(found)
    adjust([v.comparison for step in result.steps for v in step.values if v.comparison])
    return result


def _step_of(ladder: Ladder, recipe: str, before: int) -> int:
    earlier = [k for k, s in enumerate(ladder.steps[:before]) if s.recipe == recipe]
    if not earlier:
        raise ConfigError(f"ladder {ladder.title!r}: step {before} is against {recipe!r}, "
                          "which no earlier step runs",
                          hint="against names the recipe of an earlier step")
    return earlier[0]


def crosscheck_values(result: LadderResult) -> list[
        tuple[CrossCheck, int, list[StepValue] | None, list[Side]]]:
    """Each cross-check: the step it stands against, its values and per-unit values."""
    found = []
    for check in result.ladder.crosschecks:
        number = _step_of(result.ladder, check.against, len(result.ladder.steps))
        root = paths.PROJECT_DIR / check.folder
        runs = [r for r in find_runs(root.parent, root.name) if r.status == "finished"]
        units, values = (_step_values(runs, result.columns, result.units.get(number))
                         if runs else ([], None))
        found.append((check, number, values, units))
    return found


def ladder_readings(result: LadderResult) -> StepReadings:
    ladder = result.ladder
    if result.readings is not None or ladder.readings is None:
        return result.readings or []
    table = load_paper(ladder.paper).table(ladder.table)
    found: StepReadings = []
    for number in ladder.readings.steps:
        if not 0 <= number < len(ladder.steps):
            raise ConfigError(f"ladder {ladder.title!r}: [readings] steps: no step {number}",
                              hint=f"steps are 0..{len(ladder.steps) - 1}")
        runs = result.runs.get(number)
        for column, published in result.columns:
            spec = readings_for(column, table.dataset)
            if runs and spec is not None:
                found.append((number, column, published,
                              read_cell(runs, column, published, spec)))
    result.readings = found
    return found


def ladder_markdown(result: LadderResult, extra: list[str] | None = None) -> str:
    """A ladder as Markdown: the steps, the gap left, ``extra`` lines and what is not tried."""
    ladder, columns = result.ladder, result.columns
    head = ["step", "change", "recipe", "seeds (chosen epochs)"]
    for column, _ in columns:
        head += [f"{column.header} [95% interval]", "vs step before", "Holm p"]
    rows = []
    for step in result.steps:
        cells = [str(step.number), step.change, f"`{step.recipe}`"]
        if not step.values:
            cells.append(f"no reference run yet: `pairrepro train recipes/{step.recipe}.toml`")
            cells += ["", "", ""] * len(columns)
        else:
            cells.append(", ".join(f"{seed} ({epoch})"
                                   for seed, epoch in zip(step.seeds, step.chosen_epochs,
                                                          strict=True))
                         + (" †" if step.one_model else ""))
            side = (f"vs step {step.against}: "
                    if ladder.steps[step.number].against and step.against is not None else "")
            for (column, _), value in zip(columns, step.values, strict=True):
                text = versus(value, column)
                cells += [value.text, side + text if text else "", holm_text(value.comparison)]
        rows.append(cells)
    lines = numbers.markdown_table(head, rows)
    units = " and ".join(sorted({evidence.unit_name(c.metric) for c, _ in columns}))
    last = next((s for s in reversed(result.steps)
                 if s.values and not ladder.steps[s.number].against), None)
    gaps = [f"{column.header} {numbers.format_number(published, column)}, "
            f"{numbers.format_number(value.mean - published, column, signed=True)} from step "
            f"{last.number}, the last main step run"
            for (column, published), value in zip(columns, last.values, strict=True)
            if published is not None] if last else []
    where = f"{ladder.paper} Table {ladder.table}, {ladder.row}"
    if any(value is not None for _, value in columns):
        paper = (f"The paper ({where}): "
                 + ("; ".join(gaps) if gaps else "no step has a reference run yet") + ".")
    else:
        paper = f"The paper prints no number for this row ({where}: a comparison row run here)."
    tested = [(step.number, column, value.comparison) for step in result.steps if step.values
              for (column, _), value in zip(columns, step.values, strict=True)
              if value.comparison is not None and value.comparison.holm is not None]
    tests = len(tested)
    lines += ["", f"{paper} Each step is the mean over its seeds with a 95% bootstrap interval "
              f"over {units} and seeds; *vs step before* is the difference of the two steps' "
              f"values and {test_words(units)}; Holm p: adjusted by Holm's step-down method "
              f"over the ladder's {tests} test{'' if tests == 1 else 's'}."
              + (" †: one trained model (one seed); its interval covers the test units only, "
                 "not training randomness, so it and its tests speak of that model, not the "
                 "method." if any(s.one_model for s in result.steps) else "")
              + (f" {numbers.MOVING_NOTE}." if any(numbers.MOVING in v.text for s in result.steps
                                                   for v in s.values) else "")]
    if tested:
        lines += ["", _holding_steps(tested)]
    lines += extra or []
    if ladder.left:
        lines += ["", "Not tried here:", ""]
        lines += [f"- {item.what}: {item.why}" for item in ladder.left]
    return "\n".join(lines) + "\n"


def _holding_steps(tested: list[tuple[int, Column, Comparison]]) -> str:
    held = [f"step {number} ({column.header} "
            f"{numbers.format_number(found.difference or 0.0, column, signed=True)}, Holm "
            f"{numbers.p_text(found.holm or 1.0)})"
            for number, column, found in tested if (found.holm or 1.0) < 0.05]
    return ("Steps whose change holds after Holm's adjustment (Holm p < 0.05): "
            + ("; ".join(held) if held else
               f"none of the {len(tested)} test{'' if len(tested) == 1 else 's'}") + ".")


def ladder_json(result: LadderResult) -> dict[str, Any]:
    return {"ladder": result.name, "title": result.ladder.title,
            "paper": {"paper": result.ladder.paper, "table": result.ladder.table,
                      "row": result.ladder.row,
                      "published": {column.metric: published
                                    for column, published in result.columns}},
            "steps": [{**asdict(step), "values": [
                _value_json(value, result.columns[k][0]) for k, value in enumerate(step.values)]}
                for step in result.steps],
            "left": [item.model_dump() for item in result.ladder.left]}


def _value_json(value: StepValue, column: Column) -> dict[str, Any]:
    found = value.comparison or Comparison()
    return {"metric": value.metric, "mean": value.mean, "text": value.text, "low": value.low,
            "high": value.high, "difference": found.difference, "p_value": found.p_value,
            "versus": versus(value, column), "holm": found.holm}
