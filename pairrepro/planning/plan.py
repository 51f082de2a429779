"""What a table needs before it renders (``--plan``): per recipe, data readiness per split, the
seeds to train and the hours, ``seeds × epochs × train pairs / pairs_per_s`` (docs/preflight.md)."""

from __future__ import annotations

import contextlib
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.data.manifests import load_manifest
from pairrepro.data.prepared import capped_pairs, data_status, split_pairs
from pairrepro.errors import ConfigError, PairreproError
from pairrepro.fileio import read_toml
from pairrepro.planning import BENCH_DIR
from pairrepro.planning.gpus import device_need_mb, gpu_peak, load_gpu_rates, runs_per_device
from pairrepro.planning.paper_tables import Paper, PaperTable
from pairrepro.planning.preflight_record import load_preflight
from pairrepro.planning.recipe_index import RecipeIndex, table_recipes
from pairrepro.runs import DamagedRunError, RunInfo, all_runs, config_differences, find_runs
from pairrepro.tasks import POINTWISE_RANKING, task_for

BENCH_FIGURES = BENCH_DIR / "figures.toml"
HARDWARE = ("cpu", "gpu")
MEASURED, LOWER_BOUND = "measured", "lower bound"  # where a plan's GPU figure comes from


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
    missing_splits: list[str] = field(default_factory=list)  # of a prepared dataset
    trains: bool = True  # False: a scorer without training (BM25): no training hours
    flops_per_pair: float | None = None  # of one training step, from preflight
    gpu: str = ""  # the GPU of ``gpu_lower_bound_hours`` and ``gpu_rate``
    gpu_peak_flops: float | None = None
    gpu_rate: float | None = None  # pairs/s measured on ``gpu`` (bench/records/gpu_rates.json)
    gpu_rate_source: str = ""  # what measured it
    # where train_pairs comes from when it is the manifest's planning estimate (else "")
    train_pairs_estimate: str = ""

    def _hours_at(self, per_s: float | None, per_pair: float = 1.0) -> float | None:
        """Hours for the seeds still to train at ``per_s`` units (pairs, or FLOPs with
        ``per_pair``) a second; 0 for a model without training, None when unknown."""
        if not self.trains:
            return 0.0
        if not (per_s and self.train_pairs and per_pair):
            return None
        return len(self.seeds_todo) * self.epochs * self.train_pairs * per_pair / per_s / 3600

    @property
    def hours(self) -> float | None:
        """Estimated hours on ``hardware`` (``None``: unknown)."""
        return self._hours_at(self.pairs_per_s)

    @property
    def gpu_lower_bound_hours(self) -> float | None:
        """FLOPs per pair × pairs × epochs × seeds / the GPU's peak: a lower bound."""
        return self._hours_at(self.gpu_peak_flops, self.flops_per_pair or 0.0)

    @property
    def gpu_figure(self) -> tuple[float | None, str]:
        """The GPU hours and where they come from: :data:`MEASURED`, else :data:`LOWER_BOUND`."""
        return ((self._hours_at(self.gpu_rate), MEASURED) if self.gpu_rate
                else (self.gpu_lower_bound_hours, LOWER_BOUND))

    @property
    def gpu_hours(self) -> float | None:
        return self.hours if self.hardware == "gpu" else None

    @property
    def cpu_hours(self) -> float | None:
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


def _missing_splits(recipe: Any) -> list[str]:
    """Splits the recipe uses that its prepared ``stats.json`` does not list (no list: none)."""
    d = recipe.data
    stats_path = paths.prepared_dir(d.dataset, d.variant or None) / "stats.json"
    with contextlib.suppress(OSError, json.JSONDecodeError, AttributeError):
        stats = json.loads(stats_path.read_text(encoding="utf-8"))
        have = {Path(name).stem for name in stats.get("files", {}) if name.endswith(".parquet")}
        if have:
            return [s for s in dict.fromkeys([d.train_split, d.dev_split, *d.test_splits])
                    if s not in have]
    return []


def _throughput(name: str, model: str, preflight: dict[str, dict[str, Any]],
                figures: dict[str, dict[str, Any]], runs_dir: Path
                ) -> tuple[float | None, str, str, dict[str, Any]]:
    """(pairs/s, source, hardware, preflight record or {}): its preflight, its model's, figures,
    else the median of earlier runs of the model (GPU runs if any: CPU and GPU never mix)."""
    others = [r for r, d in preflight.items() if d.get("model") == model]
    if name in preflight or others:
        own = preflight[name] if name in preflight else preflight[others[0]]
        source = "preflight" if name in preflight else f"preflight of {others[0]}"
        return float(own["pairs_per_s"]), source, str(own.get("hardware", "cpu")), own
    if figure := figures.get(model):
        return (float(figure["pairs_per_s"]), str(figure.get("source", "bench/figures.toml")),
                str(figure.get("hardware", "gpu")), {})
    speeds: dict[str, list[float]] = {"gpu": [], "cpu": []}
    for run in all_runs(runs_dir):
        if run.config.get("model", {}).get("name") != model:
            continue
        try:
            log = run.folder.read_metrics()
        except DamagedRunError:  # skipped
            continue
        hardware = "gpu" if str(run.manifest.get("device", "")).startswith("cuda") else "cpu"
        speeds[hardware] += [float(record["pairs_per_s"]) for record in log
                             if isinstance(record.get("pairs_per_s"), int | float)
                             and record["pairs_per_s"] > 0]
    for hardware, found in speeds.items():
        if found:
            return statistics.median(found), "earlier runs", hardware, {}
    return None, "unknown", "gpu", {}


def train_pairs(recipe: Any) -> tuple[int | None, str]:
    """Pairs of one epoch (capped as the epoch caps them), and the manifest estimate's source."""
    dataset, variant = recipe.data.dataset, recipe.data.variant or None
    split = recipe.data.train_split
    count = split_pairs(dataset, variant, split)
    estimate = ""
    if count is None:
        with contextlib.suppress(PairreproError, KeyError):  # no such split: no count
            spec = load_manifest(dataset).variant(variant).splits[split]
            count = spec.expected.get("pairs")
            if count is None and spec.planning is not None:
                count, estimate = spec.planning.pairs, spec.planning.source
    if count and recipe.data.max_train_pairs:
        count = min(count, recipe.data.max_train_pairs)
    cap = recipe.task.max_negatives_per_query
    # each epoch keeps a query's positives and at most `cap` of its negatives
    if (count and cap and task_for(recipe.task.type, recipe.task.loss) is POINTWISE_RANKING
            and (capped := capped_pairs(dataset, variant, split, cap)) is not None):
        count = min(count, capped)
    return count, estimate


def split_variants(runs: list[RunInfo], config: dict[str, Any]
                    ) -> tuple[list[RunInfo], dict[str, list[str]]]:
    """(finished runs of the recipe itself, {variant run path: the keys it differs in})."""
    finished = [(run, list(config_differences(run.config, config)))
                for run in runs if run.status == "finished"]
    return ([run for run, keys in finished if not keys],
            {run.path: keys for run, keys in finished if keys})


def describe_variant(path: str, run: RunInfo, config: dict[str, Any]) -> str:
    """Why the run at ``path`` is a variant of the recipe resolved as ``config``."""
    shown = ", ".join(f"{k} = {a!r} (recipe {'unset' if b is None else repr(b)})"
                      for k, (a, b) in config_differences(run.config, config).items())
    return f"{path} is a variant, not the recipe's run: {shown}"


def done_seeds(runs_dir: Path, recipe: Any) -> set[int]:
    """Seeds with a finished run *of the recipe* (a variant does not count)."""
    return {r.seed for r in split_variants(find_runs(runs_dir, recipe.name), recipe.to_dict())[0]}


def plan_tables(tables: list[tuple[Paper, PaperTable]], index: RecipeIndex, runs_dir: Path,
                seeds: list[int] | None = None,
                figures: dict[str, dict[str, Any]] | None = None,
                comparisons: bool = False, preflight: dict[str, dict[str, Any]] | None = None,
                gpu: str = "") -> list[PlanItem]:
    """One :class:`PlanItem` per recipe the tables need (``comparisons``: their comparison
    rows' too); ``gpu`` (a ``gpus.toml`` name) adds the GPU figures."""
    figures = load_bench_figures() if figures is None else figures
    preflight = load_preflight() if preflight is None else preflight
    # records of recipes this index has (another folder's, or a deleted recipe's, are not
    # this plan's), each with its recipe's model for the same-model fallback
    preflight = {name: {**record, "model": index.recipes[name].model.name}
                 for name, record in preflight.items() if name in index.recipes}
    gpu_name, peak, memory = gpu_peak(gpu) if gpu else ("", None, 0.0)
    gpu_rates = load_gpu_rates(gpu.lower()) if gpu else {}
    items: dict[str, PlanItem] = {}
    for paper, table in tables:
        for name in table_recipes(paper, table, index, comparisons):
            if name in items:
                items[name].tables.append(f"{paper.paper} T{table.number}")
                continue
            recipe = index.recipes[name]
            wanted = seeds or recipe.seeds
            done = done_seeds(runs_dir, recipe)
            ready, command = data_status(recipe.data.dataset, recipe.data.variant)
            missing = _missing_splits(recipe) if ready else []
            if missing:
                ready = False
                command = (f"split(s) {', '.join(missing)} of {recipe.data.dataset} not "
                           f"prepared here: pairrepro fetch {recipe.data.dataset} --from DIR "
                           f"(with them) && pairrepro preprocess {recipe.data.dataset}")
            speed, source, hardware, record = _throughput(name, recipe.model.name, preflight,
                                                          figures, runs_dir)
            pairs, estimate = train_pairs(recipe)
            # the precision a CUDA run of the recipe trains in (auto: bf16)
            cuda_precision = "fp32" if recipe.train.precision == "fp32" else "bf16"
            rate, shared = (gpu_rates.get((name, kind)) or gpu_rates.get((recipe.model.name, kind))
                            for kind in (cuda_precision, f"shared {cuda_precision}"))
            todo = [s for s in wanted if s not in done]
            if shared and min(len(todo), runs_per_device(device_need_mb(record), memory)) >= \
                    shared.runs:  # its seeds can share a device: their total rate counts
                rate = shared
            items[name] = PlanItem(
                recipe=name, model=recipe.model.name, dataset=recipe.data.dataset,
                variant=recipe.data.variant, data_ready=ready, data_command=command,
                seeds_done=[s for s in wanted if s in done],
                seeds_todo=todo, epochs=recipe.train.epochs,
                train_pairs=pairs, pairs_per_s=speed, throughput_source=source,
                tables=[f"{paper.paper} T{table.number}"], hardware=hardware,
                missing_splits=missing, trains=bool(record.get("trains", True)),
                flops_per_pair=record.get("flops_per_pair"), gpu=gpu_name,
                gpu_peak_flops=peak, train_pairs_estimate=estimate,
                gpu_rate=rate.pairs_per_s if rate else None,
                gpu_rate_source=f"{rate.what}; {rate.run}" if rate else "")
    return list(items.values())


def render_plan(items: list[PlanItem], device: str | None = None) -> str:
    """The plan as text; a note when CUDA (``device``) would train but the hours are CPU's."""
    if not items:
        return "Nothing to run: no recipe declares a row of these tables.\n"
    gpu = next((it.gpu for it in items if it.gpu), "")
    lines = ["recipe | tables | dataset | data | seeds to train | epochs x pairs | pairs/s | "
             "hours | on" + (f" | {gpu} h (from)" if gpu else "")]
    totals: dict[str, float] = {}
    gpu_totals: dict[str, float] = {MEASURED: 0.0, LOWER_BOUND: 0.0}
    unknown = sum(1 for it in items if it.hours is None and it.seeds_todo)
    for it in items:
        if (hours := it.hours) is not None:
            totals[it.hardware] = totals.get(it.hardware, 0.0) + hours
        cells = [
            it.recipe, ", ".join(it.tables),
            it.dataset + (f"/{it.variant}" if it.variant else ""),
            "ready" if it.data_ready else
            ("missing " + ",".join(it.missing_splits) if it.missing_splits else "missing"),
            ",".join(map(str, it.seeds_todo)) or "done",
            f"{it.epochs} x {it.train_pairs if it.train_pairs else '?'}"
            + (" (est.)" if it.train_pairs_estimate else ""),
            # pairs/s: slow (CPU) figures keep a decimal
            ("no training" if not it.trains else "unknown" if not it.pairs_per_s else
             f"{it.pairs_per_s:.{0 if it.pairs_per_s >= 100 else 1}f} ({it.throughput_source})"),
            "-" if not it.seeds_todo else (f"{hours:.2f}" if hours is not None else "?"),
            it.hardware.upper() if it.pairs_per_s or not it.trains else "?"]  # the unit
        if gpu:
            figure, source = it.gpu_figure
            gpu_totals[source] += figure or 0.0
            cells.append("-" if not it.seeds_todo else
                         f"{'≥' if source == LOWER_BOUND else ''}{figure:.3g} ({source})"
                         if figure is not None else f"? ({source})")
        lines.append(" | ".join(cells))
    if estimates := {f"{it.dataset}{'/' + it.variant if it.variant else ''}":
                     f"{it.train_pairs} training pairs: {it.train_pairs_estimate}"
                     for it in items if it.train_pairs_estimate}:
        lines += ["", "(est.) training pairs not prepared here: the manifest's planning "
                  "estimate from the paper's counts (a rebuilt set may differ):",
                  *(f"  {key}: {text}" for key, text in sorted(estimates.items()))]
    if missing := {it.dataset: it.data_command for it in items if not it.data_ready}:
        lines += ["", "datasets to fetch / prepare:",
                  *(f"  {ds}: {cmd}" for ds, cmd in sorted(missing.items()))]
    lines.append("")
    note = (f" (+{unknown} recipe(s) without an estimate: throughput or training pairs "
            "unknown)" if unknown else "")
    # CPU and GPU hours are different units: never summed
    parts = [f"estimated {hw.upper()} hours: {totals[hw]:.2f}" for hw in HARDWARE if hw in totals]
    lines.append("; ".join(parts or ["estimated hours: 0.00"]) + note)
    if gpu:
        lines += _gpu_footer(items, gpu, gpu_totals)
    if device and device.startswith("cuda") and "cpu" in totals:
        lines.append("note: training would run on CUDA but these hours come from CPU "
                     "figures; pass --gpu NAME for a FLOP-based GPU lower bound, or run "
                     "`pairrepro preflight RECIPE --device cuda --out-dir bench/preflight` "
                     "on the GPU for GPU figures")
    return "\n".join(lines) + "\n"


def _gpu_footer(items: list[PlanItem], gpu: str, totals: dict[str, float]) -> list[str]:
    """Where the GPU figures come from, measured and lower bounds totalled apart."""
    todo = [it for it in items if it.seeds_todo and it.trains]
    measured = sorted({it.gpu_rate_source.split("; ", 1)[1] for it in todo if it.gpu_rate})
    return [f"{gpu}: {totals[MEASURED]:.2f} GPU hours at measured rates "
            f"({sum(1 for it in todo if it.gpu_rate)} recipes) + at least "
            f"{totals[LOWER_BOUND]:.3g} (FLOP lower bound, "
            f"{sum(1 for it in todo if not it.gpu_rate)} recipes)",
            "  measured: the recipe's or its model's training rate on this GPU in the "
            "precision the recipe trains in on CUDA (bench/records/gpu_rates.json, from "
            "bench/gpu_check.sh; --json names each): " + ("; ".join(measured) or
                                                          "none recorded for this GPU"),
            "  runs sharing a device: where a recipe's seeds fit on one together (preflight "
            "peak memory, gpus.toml), at the measured total rate of runs sharing one; without "
            "that rate, at one run's: assumed no faster together than one after another",
            "  lower bound: preflight FLOPs per pair at the GPU's peak dense bf16 FLOP/s "
            "(gpus.toml); real runs take longer, LSTMs several times"]


def plan_to_json(items: list[PlanItem]) -> list[dict[str, Any]]:
    return [{**it.__dict__, "hours": it.hours, "cpu_hours": it.cpu_hours,
             "gpu_hours": it.gpu_hours, "gpu_lower_bound_hours": it.gpu_lower_bound_hours,
             "gpu_measured_hours": it._hours_at(it.gpu_rate),
             "gpu_figure": {"hours": it.gpu_figure[0], "from": it.gpu_figure[1]}
             if it.gpu else None}
            for it in items]
