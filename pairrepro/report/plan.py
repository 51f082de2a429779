"""What a table needs before it can be rendered with numbers: ``--plan`` / ``make ... DRY=1``.

For every recipe of a table: its dataset and whether it is prepared (or the command that fetches
it), the seeds still to train, and an estimate of hours,
``epochs × train pairs / pairs_per_s`` per seed. Throughput comes from ``bench/figures.toml``
(model name → pairs/s and the hardware it was measured on), else from the ``pairs_per_s`` that
earlier runs of the same model logged in ``metrics.jsonl``; train pairs from the prepared
``stats.json``, else the manifest's expected count. An estimate is in CPU hours or GPU hours,
as its throughput figure was measured; the totals keep the two apart.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.data.prepared import capped_pairs, data_status, split_pairs
from pairrepro.errors import ConfigError, PairreproError
from pairrepro.io import read_toml
from pairrepro.report.cells import table_recipes
from pairrepro.report.paper_tables import Paper, PaperTable
from pairrepro.report.recipe_index import RecipeIndex
from pairrepro.tasks import POINTWISE_RANKING, task_for
from pairrepro.train.run_folder import DamagedRunError, RunInfo, all_runs, find_runs

BENCH_FIGURES = paths.PROJECT_DIR / "bench" / "figures.toml"
HARDWARE = ("cpu", "gpu")


@dataclass
class PlanItem:
    """One recipe a table needs."""

    recipe: str
    model: str
    dataset: str
    variant: str
    data_ready: bool
    data_command: str
    seeds_done: list[int]
    seeds_todo: list[int]
    epochs: int
    train_pairs: int | None
    pairs_per_s: float | None
    throughput_source: str
    tables: list[str] = field(default_factory=list)
    hardware: str = "gpu"  # where pairs_per_s was measured: the unit of ``hours``

    @property
    def hours(self) -> float | None:
        """Estimated hours on ``hardware`` for the seeds still to train (``None``: unknown)."""
        if not self.train_pairs or not self.pairs_per_s:
            return None
        return len(self.seeds_todo) * self.epochs * self.train_pairs / self.pairs_per_s / 3600

    @property
    def gpu_hours(self) -> float | None:
        """:attr:`hours` when the throughput is a GPU figure, else ``None``."""
        return self.hours if self.hardware == "gpu" else None

    @property
    def cpu_hours(self) -> float | None:
        """:attr:`hours` when the throughput is a CPU figure, else ``None``."""
        return self.hours if self.hardware == "cpu" else None


def load_bench_figures(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """``bench/figures.toml`` as ``{model: {pairs_per_s, hardware, device, source, ...}}``."""
    p = path or BENCH_FIGURES
    if not p.is_file():
        return {}
    models = read_toml(p).get("models", {})
    for name, entry in models.items():
        value = entry.get("pairs_per_s") if isinstance(entry, dict) else None
        if not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"{p}: [models.{name}] pairs_per_s: expected a positive number")
        if entry.get("hardware") not in HARDWARE:
            raise ConfigError(f"{p}: [models.{name}] hardware: expected \"cpu\" or \"gpu\", "
                              f"got {entry.get('hardware')!r}",
                              hint="say where pairs_per_s was measured: it sets the unit "
                                   "(CPU hours or GPU hours) of the plan's estimate")
    return models


def _run_hardware(run: RunInfo) -> str:
    """``gpu`` when the run's manifest.json names a CUDA device, else ``cpu``."""
    return "gpu" if str(run.manifest.get("device", "")).startswith("cuda") else "cpu"


def _measured_throughput(runs_dir: Path, model: str) -> tuple[float, str] | None:
    """Median ``pairs_per_s`` logged by earlier runs of ``model``, and their hardware (GPU
    runs when there are any: CPU and GPU speeds are never mixed). Damaged runs are skipped:
    a plan is an estimate."""
    speeds: dict[str, list[float]] = {}
    for run in all_runs(runs_dir):
        if run.config.get("model", {}).get("name") != model:
            continue
        try:
            log = run.folder.read_metrics()
        except DamagedRunError:
            continue
        hardware = _run_hardware(run)
        for record in log:
            value = record.get("pairs_per_s")
            if isinstance(value, int | float) and value > 0:
                speeds.setdefault(hardware, []).append(float(value))
    for hardware in ("gpu", "cpu"):
        if speeds.get(hardware):
            return statistics.median(speeds[hardware]), hardware
    return None


def _train_pairs(recipe: Any) -> int | None:
    """Training pairs of one epoch: the prepared ``stats.json`` count, else the manifest's
    expected count; capped by ``max_train_pairs``, and for pointwise ranking with
    ``max_negatives_per_query`` by the pairs each query keeps."""
    dataset, variant = recipe.data.dataset, recipe.data.variant or None
    split = recipe.data.train_split
    count = split_pairs(dataset, variant, split)
    if count is None:
        try:
            from pairrepro.data.manifests import load_manifest

            spec = load_manifest(dataset).variant(variant)
            count = spec.splits[split].expected.get("pairs") if split in spec.splits else None
        except PairreproError:
            count = None
    if count and recipe.data.max_train_pairs:
        count = min(count, recipe.data.max_train_pairs)
    cap = recipe.task.max_negatives_per_query
    if count and cap and task_for(recipe.task.type, recipe.task.loss) is POINTWISE_RANKING:
        # each epoch keeps a query's positives and at most `cap` of its negatives
        capped = capped_pairs(dataset, variant, split, cap)
        if capped is not None:
            count = min(count, capped)
    return count


def plan_tables(tables: list[tuple[Paper, PaperTable]], index: RecipeIndex, runs_dir: Path,
                seeds: list[int] | None = None,
                figures: dict[str, dict[str, Any]] | None = None,
                comparisons: bool = False) -> list[PlanItem]:
    """One :class:`PlanItem` per recipe the given tables need (a recipe shared by two tables
    appears once); ``comparisons`` adds the recipes of their comparison rows."""
    figures = load_bench_figures() if figures is None else figures
    items: dict[str, PlanItem] = {}
    for paper, table in tables:
        for name in table_recipes(paper, table, index, comparisons):
            if name in items:
                items[name].tables.append(f"{paper.paper} T{table.number}")
                continue
            recipe = index.recipes[name]
            wanted = seeds or recipe.seeds
            done = [r.seed for r in find_runs(runs_dir, name) if r.status == "finished"]
            ready, command = data_status(recipe.data.dataset, recipe.data.variant)
            speed, source, hardware = None, "unknown", "gpu"
            if recipe.model.name in figures:
                figure = figures[recipe.model.name]
                speed = float(figure["pairs_per_s"])
                source = str(figure.get("source", "bench/figures.toml"))
                hardware = str(figure.get("hardware", "gpu"))
            elif (measured := _measured_throughput(runs_dir, recipe.model.name)) is not None:
                (speed, hardware), source = measured, "earlier runs"
            items[name] = PlanItem(
                recipe=name, model=recipe.model.name, dataset=recipe.data.dataset,
                variant=recipe.data.variant, data_ready=ready, data_command=command,
                seeds_done=[s for s in wanted if s in done],
                seeds_todo=[s for s in wanted if s not in done], epochs=recipe.train.epochs,
                train_pairs=_train_pairs(recipe), pairs_per_s=speed, throughput_source=source,
                tables=[f"{paper.paper} T{table.number}"], hardware=hardware,
            )
    return list(items.values())


def _speed(item: PlanItem) -> str:
    """``5.6 (source)``: slow (CPU) figures keep a decimal."""
    if not item.pairs_per_s:
        return "unknown"
    digits = 0 if item.pairs_per_s >= 100 else 1
    return f"{item.pairs_per_s:.{digits}f} ({item.throughput_source})"


def render_plan(items: list[PlanItem]) -> str:
    """A plain-text plan: one line per recipe, then the datasets and the total estimate."""
    if not items:
        return "Nothing to run: no recipe declares a row of these tables.\n"
    lines = ["recipe | tables | dataset | data | seeds to train | epochs x pairs | pairs/s | "
             "hours | on"]
    totals: dict[str, float] = {}
    unknown = 0
    for it in items:
        hours = it.hours
        if hours is None and it.seeds_todo:
            unknown += 1
        elif hours is not None:
            totals[it.hardware] = totals.get(it.hardware, 0.0) + hours
        lines.append(" | ".join([
            it.recipe, ", ".join(it.tables),
            it.dataset + (f"/{it.variant}" if it.variant else ""),
            "ready" if it.data_ready else "missing",
            ",".join(map(str, it.seeds_todo)) or "done",
            f"{it.epochs} x {it.train_pairs if it.train_pairs else '?'}",
            _speed(it),
            "-" if not it.seeds_todo else (f"{hours:.2f}" if hours is not None else "?"),
            it.hardware.upper() if it.pairs_per_s else "?",  # the unit of the hours column
        ]))
    missing = {it.dataset: it.data_command for it in items if not it.data_ready}
    if missing:
        lines.append("")
        lines.append("datasets to fetch / prepare:")
        lines += [f"  {ds}: {cmd}" for ds, cmd in sorted(missing.items())]
    lines.append("")
    note = f" (+{unknown} recipe(s) with unknown throughput)" if unknown else ""
    # CPU and GPU hours are different units: never summed
    parts = [f"estimated {hw.upper()} hours: {totals[hw]:.2f}" for hw in HARDWARE if hw in totals]
    lines.append("; ".join(parts or ["estimated hours: 0.00"]) + note)
    return "\n".join(lines) + "\n"


def plan_to_json(items: list[PlanItem]) -> list[dict[str, Any]]:
    """``--json`` view of a plan."""
    return [{**it.__dict__, "hours": it.hours, "cpu_hours": it.cpu_hours,
             "gpu_hours": it.gpu_hours} for it in items]
