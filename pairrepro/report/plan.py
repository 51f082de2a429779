"""What a table needs before it can be rendered with numbers: ``--plan`` / ``make ... DRY=1``.

For every recipe of a table: its dataset and whether it is prepared (or the command that fetches
it), the seeds still to train, and an estimate of GPU hours,
``epochs × train pairs / pairs_per_s`` per seed. Throughput comes from ``bench/figures.toml``
(model name → pairs/s), else from the ``pairs_per_s`` that earlier runs of the same model logged
in ``metrics.jsonl``; train pairs from the prepared ``stats.json``, else the manifest's expected
count.
"""

from __future__ import annotations

import json
import statistics
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import ConfigError, PairreproError
from pairrepro.report.tables import (
    Paper,
    PaperTable,
    RecipeIndex,
    all_runs,
    data_status,
    find_runs,
    table_recipes,
)

BENCH_FIGURES = paths.PROJECT_DIR / "bench" / "figures.toml"


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

    @property
    def gpu_hours(self) -> float | None:
        """Estimated hours for the seeds still to train (``None`` when unknown)."""
        if not self.train_pairs or not self.pairs_per_s:
            return None
        return len(self.seeds_todo) * self.epochs * self.train_pairs / self.pairs_per_s / 3600


def load_bench_figures(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """``bench/figures.toml`` as ``{model: {pairs_per_s, device, source}}``."""
    p = path or BENCH_FIGURES
    if not p.is_file():
        return {}
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from exc
    models = raw.get("models", {})
    for name, entry in models.items():
        value = entry.get("pairs_per_s") if isinstance(entry, dict) else None
        if not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"{p}: [models.{name}] pairs_per_s: expected a positive number")
    return models


def _measured_throughput(runs_dir: Path, model: str) -> float | None:
    """Median ``pairs_per_s`` logged by earlier runs of ``model``."""
    speeds: list[float] = []
    for run in all_runs(runs_dir):
        if run.config.get("model", {}).get("name") != model:
            continue
        log = Path(run.path) / "metrics.jsonl"
        if not log.is_file():
            continue
        for line in log.read_text(encoding="utf-8").splitlines():
            try:
                value = json.loads(line).get("pairs_per_s")
            except (json.JSONDecodeError, AttributeError):
                continue
            if isinstance(value, int | float) and value > 0:
                speeds.append(float(value))
    return statistics.median(speeds) if speeds else None


def _train_pairs(recipe: Any) -> int | None:
    dataset, variant = recipe.data.dataset, recipe.data.variant or None
    split = recipe.data.train_split
    count: int | None = None
    stats_path = paths.prepared_dir(dataset, variant) / "stats.json"
    if stats_path.is_file():
        splits = json.loads(stats_path.read_text(encoding="utf-8")).get("splits", {})
        entry = splits.get(split) if isinstance(splits, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("pairs"), int):
            count = entry["pairs"]
    if count is None:
        try:
            from pairrepro.data.manifests import load_manifest

            spec = load_manifest(dataset).variant(variant)
            count = spec.splits[split].expected.get("pairs") if split in spec.splits else None
        except PairreproError:
            count = None
    if count and recipe.data.max_train_pairs:
        count = min(count, recipe.data.max_train_pairs)
    return count


def plan_tables(tables: list[tuple[Paper, PaperTable]], index: RecipeIndex, runs_dir: Path,
                seeds: list[int] | None = None,
                figures: dict[str, dict[str, Any]] | None = None) -> list[PlanItem]:
    """One :class:`PlanItem` per recipe the given tables need (a recipe shared by two tables
    appears once)."""
    figures = load_bench_figures() if figures is None else figures
    items: dict[str, PlanItem] = {}
    for paper, table in tables:
        for name in table_recipes(paper, table, index):
            if name in items:
                items[name].tables.append(f"{paper.paper} T{table.number}")
                continue
            recipe = index.recipes[name]
            wanted = seeds or recipe.seeds
            done = [r.seed for r in find_runs(runs_dir, name) if r.status == "finished"]
            ready, command = data_status(recipe.data.dataset, recipe.data.variant)
            speed, source = None, "unknown"
            if recipe.model.name in figures:
                speed = float(figures[recipe.model.name]["pairs_per_s"])
                source = str(figures[recipe.model.name].get("source", "bench/figures.toml"))
            elif (measured := _measured_throughput(runs_dir, recipe.model.name)) is not None:
                speed, source = measured, "earlier runs"
            items[name] = PlanItem(
                recipe=name, model=recipe.model.name, dataset=recipe.data.dataset,
                variant=recipe.data.variant, data_ready=ready, data_command=command,
                seeds_done=[s for s in wanted if s in done],
                seeds_todo=[s for s in wanted if s not in done], epochs=recipe.train.epochs,
                train_pairs=_train_pairs(recipe), pairs_per_s=speed, throughput_source=source,
                tables=[f"{paper.paper} T{table.number}"],
            )
    return list(items.values())


def render_plan(items: list[PlanItem]) -> str:
    """A plain-text plan: one line per recipe, then the datasets and the total estimate."""
    if not items:
        return "Nothing to run: no recipe declares a row of these tables.\n"
    lines = ["recipe | tables | dataset | data | seeds to train | epochs x pairs | pairs/s | GPU h"]
    total, unknown = 0.0, 0
    for it in items:
        hours = it.gpu_hours
        if hours is None and it.seeds_todo:
            unknown += 1
        total += hours or 0.0
        lines.append(" | ".join([
            it.recipe, ", ".join(it.tables),
            it.dataset + (f"/{it.variant}" if it.variant else ""),
            "ready" if it.data_ready else "missing",
            ",".join(map(str, it.seeds_todo)) or "done",
            f"{it.epochs} x {it.train_pairs if it.train_pairs else '?'}",
            f"{it.pairs_per_s:.0f} ({it.throughput_source})" if it.pairs_per_s else "unknown",
            "-" if not it.seeds_todo else (f"{hours:.2f}" if hours is not None else "?"),
        ]))
    missing = {it.dataset: it.data_command for it in items if not it.data_ready}
    if missing:
        lines.append("")
        lines.append("datasets to fetch / prepare:")
        lines += [f"  {ds}: {cmd}" for ds, cmd in sorted(missing.items())]
    lines.append("")
    note = f" (+{unknown} recipe(s) with unknown throughput)" if unknown else ""
    lines.append(f"estimated GPU hours: {total:.2f}{note}")
    return "\n".join(lines) + "\n"


def plan_to_json(items: list[PlanItem]) -> list[dict[str, Any]]:
    """``--json`` view of a plan."""
    return [{**it.__dict__, "gpu_hours": it.gpu_hours} for it in items]
