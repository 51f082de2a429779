"""Figures with matplotlib (Agg, PNG and SVG): CSRAN's depth curves, published against
reproduced means of a table whose rows carry ``x``, and a run's training curves."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # never needs a display; must precede pyplot
import matplotlib.pyplot as plt

from pairrepro.errors import DataError
from pairrepro.fileio import atomic_path
from pairrepro.planning.paper_tables import FigureSpec
from pairrepro.planning.recipe_index import flatten, settings
from pairrepro.report.tables.cells import EvalTable
from pairrepro.runs import RunFolder, RunInfo, all_runs

FIGURE_FORMATS = ("png", "svg")


def _save(fig: Any, stem: Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` atomically; return their paths."""
    out = []
    for ext in FIGURE_FORMATS:
        target = stem.with_suffix(f".{ext}")
        with atomic_path(target) as tmp:
            fig.savefig(tmp, format=ext, dpi=150, bbox_inches="tight")
        out.append(target)
    plt.close(fig)
    return out


Points = list[tuple[float, float, float]]


def series_points(spec: FigureSpec, runs: list[RunInfo]) -> dict[str, Points]:
    """``{series label: [(x, mean y, std y), ...]}`` from finished runs, sorted by x."""
    out: dict[str, list[tuple[float, float, float]]] = {}
    scale = 100.0 if spec.unit == "%" else 1.0
    for series in spec.series:
        by_x: dict[float, list[float]] = {}
        for run in runs:
            flat = settings(run.config) if run.status == "finished" else None
            if flat is None or any(flat.get(key) != value
                                   for key, value in series.get("match", {}).items()):
                continue
            x, y = flat.get(spec.x), run.value(spec.y)
            if isinstance(x, int | float) and y is not None:
                by_x.setdefault(float(x), []).append(y * scale)
        out[series["label"]] = [
            (x, statistics.fmean(ys), statistics.stdev(ys) if len(ys) > 1 else 0.0)
            for x, ys in sorted(by_x.items())
        ]
    return out


def depth_figure(spec: FigureSpec, runs_dir: Path, out_dir: Path) -> list[Path]:
    """A paper figure of a score against a recipe setting (CSRAN Figures 2 and 3)."""
    points = series_points(spec, all_runs(runs_dir))
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for label, pts in points.items():
        if pts:
            xs, ys, errs = zip(*pts, strict=True)
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, label=f"{label} (n={len(xs)})")
    if not any(points.values()):
        ax.text(0.5, 0.5, "no finished runs match this figure yet", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel(spec.x_label or spec.x)
    ax.set_ylabel(spec.y_label or spec.y)
    ax.set_title(f"{spec.paper} Figure {spec.number}", fontsize=10)
    if any(points.values()):
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, out_dir / f"{spec.paper}-figure{spec.number}")


def table_plot(ev: EvalTable, out_dir: Path) -> list[Path]:
    """Rows with an ``x`` (MV-LSTM Table 2: k) as published vs reproduced curves."""
    rows = [r for r in ev.rows if r.row.x is not None]
    if not rows:
        raise DataError(f"{ev.paper.paper} Table {ev.table.number} has no rows with an x value "
                        "to plot", hint="give rows x = <value> in the paper TOML")
    fig, ax = plt.subplots(figsize=(5, 3.5))
    xs = [float(r.row.x or 0) for r in rows]
    for i, column in enumerate(c for c in ev.table.columns if c.kind == "metric"):
        color = f"C{i}"
        cells = [next(c for c in r.cells if c.column == column.key) for r in rows]
        published = [float(c.published) for c in cells]
        ax.plot(xs, published, "--", marker="s", color=color, label=f"{column.header} (paper)")
        ours = [(x, c.estimate.mean, c.estimate.std or 0.0)
                for x, c in zip(xs, cells, strict=True) if c.estimate is not None]
        if ours:
            ox, oy, oe = zip(*ours, strict=True)
            ax.errorbar(ox, oy, yerr=oe, marker="o", color=color, capsize=3,
                        label=f"{column.header} (ours)")
    ax.set_xscale("log", base=2)
    ticks = sorted(set(xs))
    ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
    ax.set_xlabel(ev.table.x_label or "x")
    ax.set_title(f"{ev.paper.paper} Table {ev.table.number}: {ev.table.caption}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, out_dir / f"{ev.paper.paper}-table{ev.table.number}")


def read_curves(run_dir: Path) -> dict[str, list[tuple[float, float]]]:
    """Every numeric series of ``metrics.jsonl`` against the epoch (or line number)."""
    folder = RunFolder(run_dir)
    if not folder.metrics_path.is_file():
        raise DataError(f"{folder.metrics_path} not found",
                        hint="pass a run directory: runs/<recipe>/seed-<n>")
    series: dict[str, list[tuple[float, float]]] = {}
    for n, record in enumerate(folder.read_metrics(), 1):
        flat = flatten(record)
        x = flat.get("epoch", n)
        for key, value in flat.items():
            if key != "epoch" and isinstance(value, int | float) and not isinstance(value, bool):
                series.setdefault(key, []).append((float(x), float(value)))
    return series


# Which logged series go on which panel of the curves figure.
PANELS = (("loss", ("loss",)), ("scores", ("accuracy", "map", "mrr", "f1", "p_at_1", "r10_at")))


def curves_figure(run_dir: Path, out_dir: Path | None = None) -> list[Path]:
    series = read_curves(run_dir)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, (title, needles) in zip(axes, PANELS, strict=True):
        for key, pts in sorted(series.items()):
            if any(n in key for n in needles):
                xs, ys = zip(*pts, strict=True)
                ax.plot(xs, ys, marker=".", label=key)
        ax.set_xlabel("epoch")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(str(run_dir), fontsize=9)
    return _save(fig, (out_dir or run_dir) / f"curves-{run_dir.parent.name}-{run_dir.name}")
