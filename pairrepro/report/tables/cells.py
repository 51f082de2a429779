"""Published vs reproduced: the status, value and delta of every cell of a paper table (the
rules: docs/results.md). θ_M comes from manifests or bench/model_facts.json, never models."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.data.prepared import data_status
from pairrepro.errors import NoEvidenceError
from pairrepro.planning.model_facts import needs_training, weight_count
from pairrepro.planning.paper_tables import Column, Paper, PaperTable, Row
from pairrepro.planning.plan import describe_variant, split_variants
from pairrepro.planning.recipe_index import (
    RecipeIndex,
    comparison_rows,
    flatten,
    load_recipe_index,
    row_recipes,
    settings,
)
from pairrepro.report.analyses import evidence
from pairrepro.report.analyses.comparison import Comparison
from pairrepro.report.tables import numbers
from pairrepro.runs import DamagedRunError, RunInfo, find_runs
from pairrepro.stats import Interval

# Cell statuses, in the order a reader cares about them.
REPRODUCED = "reproduced"
OFF = "off"  # a hyper-parameter or parameter count that differs from the paper's
BELOW = "below"  # a metric whose interval lies below the published value
ABOVE = "above"
UNDECIDED = "undecided"  # the published value sits at an endpoint, within its MC error
VARIANT = "variant"  # only runs whose config differs from the recipe
NO_REFERENCE = "no reference run"  # nothing in results/ (nor in runs/, where one is read)
NEW = "no published value"
RUNNING = "running"
STALE = "stale"  # interrupted (Ctrl-C), or "running" but its process is gone
DAMAGED = "damaged"  # a run-folder file cannot be read
FAILED = "failed"
NOT_RUN = "not run"
DATA_MISSING = "data missing"
NO_RECIPE = "no recipe"
NOT_IMPLEMENTED = "not implemented"  # a row no recipe here implements (its ``why`` says why)
NOT_REPRODUCIBLE = "not reproducible"  # the table's data cannot be had (its ``data_note``)
INFO = "info"
# statuses whose cell carries a number and a verdict (no note needed)
VERDICTS = (REPRODUCED, BELOW, ABOVE, UNDECIDED, OFF, NEW)
# each status's mark after a number, its text without one (layout.py) and its colour
MARKS = {REPRODUCED: "✓", OFF: "✗", BELOW: "↓", ABOVE: "↑", UNDECIDED: "? undecided"}
SHORT = {NOT_IMPLEMENTED: "n/a", NOT_REPRODUCIBLE: "n/a", NEW: ""}  # others print as such
STYLE = {REPRODUCED: "green", OFF: "red", BELOW: "red", ABOVE: "red", NEW: "cyan",
         UNDECIDED: "yellow", VARIANT: "yellow", RUNNING: "yellow", STALE: "yellow dim",
         DAMAGED: "bold red", FAILED: "bold red", NOT_RUN: "dim", NO_REFERENCE: "dim",
         DATA_MISSING: "magenta", NO_RECIPE: "dim", NOT_IMPLEMENTED: "dim",
         NOT_REPRODUCIBLE: "dim"}
ONE_MODEL = "one trained model"  # EvalTable.counts: a one-seed row of a trained model
# EvalTable.counts of a hyper-parameter table: its cells are settings, not results
SETTINGS = {REPRODUCED: "set as in the paper", OFF: "set otherwise"}
REFERENCE = "reference"  # Cell.source: the number comes from results/
OWN = "runs"  # ... from the user's runs/


@dataclass
class Estimate:
    """What the runs behind a cell give, in the column's unit."""

    mean: float
    std: float | None = None  # None: a count, not a mean
    seeds: list[int] = field(default_factory=list)
    interval: Interval | None = None  # in the metric's own scale (fractions)
    interval_note: str = ""  # why there is no interval (no predictions saved, ...)
    one_model: bool = False  # one seed of a model that learns: no claim about the method
    last_epoch: float | None = None  # the selection split's value at the last epoch
    reference: float | None = None  # results/' mean beside the user's own number
    reference_damaged: bool = False


@dataclass
class Verdict:
    """A cell's status, its distance from the published value and the rule used."""

    status: str
    delta: float | None = None  # estimate minus published, in the column's unit
    rule: str = ""  # "interval" or "tolerance"


@dataclass
class Cell:
    column: str
    published: str
    verdict: Verdict
    recipe: str = ""
    detail: str = ""  # why, or the command to run next
    estimate: Estimate | None = None
    comparison: Comparison | None = None  # --compare-to
    setting: Any = None  # hyper-parameter cells: the recipe's value (None: not set)
    runs: list[RunInfo] = field(default_factory=list)  # the runs behind the number
    reference_runs: list[RunInfo] = field(default_factory=list)
    source: str = ""  # REFERENCE or OWN (where ``runs`` are)
    bold: bool = False
    best: bool = False
    variant_keys: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.verdict.status

    @property
    def one_model(self) -> bool:
        return self.estimate is not None and self.estimate.one_model


@dataclass
class EvalRow:
    row: Row
    cells: list[Cell]
    recipes: list[str]


@dataclass
class EvalTable:
    paper: Paper
    table: PaperTable
    rows: list[EvalRow]
    runs_dir: str
    results_dir: str = ""
    compare_to: str = ""  # the row label of --compare-to

    def counts(self) -> dict[str, int]:
        """Cells per status (info left out, one-model apart, a hyper-parameter table's as set)."""
        names = SETTINGS if self.table.kind == "hparams" else {}
        return dict(Counter(ONE_MODEL if cell.one_model else names.get(cell.status, cell.status)
                            for row in self.rows for cell in row.cells if cell.status != INFO))


def _verdict(estimate: Estimate, table: PaperTable, column: Column, target: float) -> Verdict:
    delta = estimate.mean - target
    band = 0.5 * 10 ** -column.decimals + 1e-9  # the published value's own rounding
    if estimate.interval is None:
        ok = abs(delta) <= table.tolerance_for(column) + 1e-9
        return Verdict(REPRODUCED if ok else BELOW if delta < 0 else ABOVE, delta, "tolerance")
    low, high = (numbers.to_unit(v, column)
                 for v in (estimate.interval.low, estimate.interval.high))
    if abs(delta) > band and estimate.interval.straddles(numbers.from_unit(target, column)):
        return Verdict(UNDECIDED, delta, "interval")  # inside or not: up to the resampling
    ok = low - 1e-9 <= target <= high + 1e-9 or abs(delta) <= band
    return Verdict(REPRODUCED if ok else BELOW if delta < 0 else ABOVE, delta, "interval")


def _fill_number(cell: Cell, table: PaperTable, column: Column, runs: list[RunInfo]) -> None:
    """Estimate and verdict from ``runs`` (damaged when result.json and predictions differ)."""
    note = ""
    try:
        units = evidence.run_units(runs, column.metric)
    except NoEvidenceError as exc:
        units, note = None, str(exc)
    except DamagedRunError as exc:  # TamperedRunError included: nothing here can be trusted
        cell.verdict, cell.runs = Verdict(DAMAGED), []
        cell.damaged.append(exc.message)
        cell.detail = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        return
    values = [numbers.to_unit(r.value(column.metric) or 0.0, column) for r in runs]
    model = str(runs[0].config.get("model", {}).get("name", ""))
    target = numbers.parse_published(cell.published)
    targets = () if target is None else (numbers.from_unit(target, column),)
    cell.estimate = Estimate(
        statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0,
        [r.seed for r in runs], interval_note=note,
        interval=(evidence.interval(units, targets, numbers.printed_step(column))
                  if units is not None else None),
        # a run without a model name (hand-written test folders) makes no claim either way
        one_model=len(runs) == 1 and bool(model) and needs_training(model) is not False,
        last_epoch=_last_epoch(column, runs))
    cell.verdict = (Verdict(NEW) if target is None
                    else _verdict(cell.estimate, table, column, target))


def _last_epoch(column: Column, runs: list[RunInfo]) -> float | None:
    """On the epoch-selection split only, the mean over seeds of the last epoch's value."""
    split, name = column.metric.split(".", 1)
    found = []
    for run in runs:
        if run.config.get("data", {}).get("dev_split", "dev") != split:
            return None  # not the selection split: its value was looked at once
        try:
            log = run.folder.read_metrics()
        except DamagedRunError:
            return None
        value = log[-1].get(split, {}).get(name) if log else None
        if not isinstance(value, int | float):
            return None
        found.append(numbers.to_unit(float(value), column))
    return statistics.fmean(found) if found else None


def _metric_cell(table: PaperTable, column: Column, row: Row, recipe_name: str,
                 index: RecipeIndex, runs_dir: Path | None, results_dir: Path | None) -> Cell:
    cell = Cell(column.key, row.values.get(column.key, ""), Verdict(NOT_RUN), recipe_name,
                bold=column.key in row.bold, best=column.key in row.best)
    config = index.recipes[recipe_name].to_dict()
    runs = find_runs(runs_dir, recipe_name) if runs_dir is not None else []
    reference = find_runs(results_dir, recipe_name) if results_dir is not None else []
    (own, own_variants), (refs, ref_variants) = (
        split_variants([r for r in found if r.value(column.metric) is not None], config)
        for found in (runs, reference))
    damaged = [r.problem or r.path for r in runs + reference if r.status == DAMAGED]
    cell.damaged = list(damaged)  # _fill_number adds a run its predictions contradict
    running = [r for r in runs if r.status == "running"]
    stopped = [r for r in runs if r.status in ("stale", "interrupted")]
    recipe_file = _recipe_path(recipe_name)
    notes: list[str] = []
    if own or refs:
        cell.source, cell.runs = (OWN, own) if own else (REFERENCE, refs)
        _fill_number(cell, table, column, cell.runs)
        if cell.status == DAMAGED:
            return cell
        if own and refs and cell.estimate is not None:
            try:
                for ref in refs:
                    evidence.check_recorded(ref)
            except DamagedRunError as exc:
                cell.estimate.reference_damaged = True
                notes.append(exc.message)
            else:
                cell.reference_runs = refs
                cell.estimate.reference = statistics.fmean(
                    numbers.to_unit(r.value(column.metric) or 0.0, column) for r in refs)
        notes += [f"{len(found)} {what}" for found, what in (
            (running, "more seed(s) running"), (stopped, "seed(s) stopped (--resume)"),
            (damaged, f"seed(s) damaged: {'; '.join(damaged)}"),
            (own_variants, f"variant run(s) left out: {', '.join(own_variants)}")) if found]
        cell.detail = "; ".join(notes)
        return cell
    if variants := {**ref_variants, **own_variants}:
        first = next(r for r in runs + reference if r.path in variants)
        return replace(cell, verdict=Verdict(VARIANT),
                       variant_keys=sorted({k for keys in variants.values() for k in keys}),
                       detail=describe_variant(first.path, first, config)
                       + f"; the recipe's own run: pairrepro train {recipe_file}")
    if running:
        return replace(cell, verdict=Verdict(RUNNING), detail=", ".join(r.path for r in running))
    if stopped:
        why = {"stale": "process gone", "interrupted": "interrupted"}
        return replace(cell, verdict=Verdict(STALE), detail=", ".join(
            f"{r.path} ({why[r.status]})" for r in stopped)
            + f"; continue: pairrepro train {recipe_file} --resume")
    if damaged:
        return replace(cell, verdict=Verdict(DAMAGED), detail="; ".join(damaged))
    if any(r.status == "failed" for r in runs):
        return replace(cell, verdict=Verdict(FAILED),
                       detail=f"see {runs[0].path}; rerun: pairrepro train {recipe_file}")
    if runs_dir is not None:  # the reference-only view (README) is the same on every machine
        recipe = index.recipes[recipe_name]
        ready, command = data_status(recipe.data.dataset, recipe.data.variant)
        if not ready:
            return replace(cell, verdict=Verdict(DATA_MISSING), detail=command)
    # one status and wording in both views, as the README states it
    shown = f"recipes/{recipe_name}.toml" if runs_dir is None else recipe_file
    return replace(cell, verdict=Verdict(NO_REFERENCE),
                   detail=f"no reference run in results/ yet: pairrepro train {shown}")


def _recipe_path(name: str) -> str:
    path = (paths.recipes_dir() / f"{name}.toml").absolute()
    return str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)


def _hparam_cell(column: Column, row: Row, recipe_name: str, index: RecipeIndex) -> Cell:
    published = row.values.get(column.key, "")
    cell = Cell(column.key, published, Verdict(NO_RECIPE), recipe_name)
    if not recipe_name:
        ref = column.from_row
        return replace(cell, detail=f"no recipe declares Table {ref.table if ref else None} "
                                    f"row {ref.row if ref else None!r}")
    config = index.recipes[recipe_name].to_dict()
    explicit, resolved = flatten(config), settings(config)
    for entry in row.keys:
        names = entry if isinstance(entry, list) else [entry]
        if not all(name in resolved for name in names):
            continue
        values = [resolved[name] for name in names]
        cell.setting = tuple(values) if isinstance(entry, list) else values[0]
        cell.verdict = Verdict(REPRODUCED if numbers.hparam_equal(published, cell.setting) else OFF)
        defaults = [name for name in names if name not in explicit]
        cell.detail = f"{recipe_name}: {' + '.join(names)} = {cell.setting!r}" + (
            f" ({', '.join(defaults)}: model default)" if defaults else "")
        return cell
    tried = ", ".join("+".join(e) if isinstance(e, list) else e for e in row.keys)
    return replace(cell, verdict=Verdict(OFF), detail=f"{recipe_name} sets none of {tried}")


def _params_cell(column: Column, row: Row, recipe_name: str, folders: list[Path]) -> Cell:
    published = row.values.get(column.key, "")
    cell = Cell(column.key, published, Verdict(INFO), recipe_name)
    if not recipe_name:
        return cell
    found = weight_count(recipe_name, [r for d in folders for r in find_runs(d, recipe_name)])
    if found is None:
        return replace(cell, verdict=Verdict(NOT_RUN), detail=(
            f"no parameter count for {recipe_name}: no run of it records parameters.weights "
            "and bench/model_facts.json has none (python bench/model_facts.py)"))
    count, source = found
    cell.estimate = Estimate(float(count))
    if target := numbers.parse_published(published):
        delta = count - target
        # θ_M is printed to 2-3 significant digits: within 5% counts as the same count.
        cell.verdict = Verdict(REPRODUCED if abs(delta) <= 0.05 * target else OFF, delta)
    cell.detail = f"{count:,} weights without embeddings and biases ({recipe_name}; {source})"
    return cell


def evaluate_table(paper: Paper, table: PaperTable, runs_dir: Path | None,
                   index: RecipeIndex | None = None,
                   results_dir: Path | None = None) -> EvalTable:
    """Every cell of ``table``; ``runs_dir=None`` is the README's reference-only view."""
    index = index or load_recipe_index()
    rows: list[EvalRow] = []
    for row in table.rows + comparison_rows(paper, table, index):
        cells: list[Cell] = []
        if table.kind == "hparams":
            for column in table.columns:
                ref = column.from_row
                found = index.for_row(paper.paper, ref.table, ref.row) if ref else []
                cells.append(_hparam_cell(column, row, sorted(found)[0] if found else "", index))
            rows.append(EvalRow(row, cells, sorted({c.recipe for c in cells if c.recipe})))
            continue
        candidates = row_recipes(paper.paper, table, row, index)
        for column in table.columns:
            published = row.values.get(column.key, "")
            marks = {"bold": column.key in row.bold, "best": column.key in row.best}
            # the first candidate of the column's dataset, where it names one
            recipe = next((name for name in candidates if not column.dataset
                           or index.recipes[name].data.dataset == column.dataset), "")
            why, lacks = ((row.why, NOT_IMPLEMENTED) if row.why else
                          (table.data_note, NOT_REPRODUCIBLE))
            if column.kind == "info":
                cell = Cell(column.key, published, Verdict(INFO), **marks)
            elif column.kind == "params":
                cell = _params_cell(column, row, recipe, [d for d in (runs_dir, results_dir) if d])
            elif not recipe:
                cell = Cell(column.key, published, Verdict(lacks if why else NO_RECIPE),
                            detail=why or "no recipe declares this row", **marks)
            else:
                cell = _metric_cell(table, column, row, recipe, index, runs_dir, results_dir)
            cells.append(cell)
        rows.append(EvalRow(row, cells, candidates))
    return EvalTable(paper, table, rows, str(runs_dir or ""), str(results_dir or ""))
