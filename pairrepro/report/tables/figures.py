"""Figures with matplotlib (Agg, PNG and SVG): CSRAN's depth curves, published against
reproduced means of a table whose rows carry ``x``, and a run's training curves; and, as SVG
text for the HTML report (:func:`page_figures`), the gap ladders with their intervals, the
reference runs' curves and the readings of a table. A figure with nothing to draw is ``None``."""

from __future__ import annotations

import io
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # never needs a display; must precede pyplot
import matplotlib.pyplot as plt

from pairrepro.errors import DataError
from pairrepro.fileio import atomic_path
from pairrepro.planning.paper_tables import FigureSpec, load_paper
from pairrepro.planning.recipe_index import flatten, settings
from pairrepro.report.analyses.ladders import available_ladders, evaluate_ladder, load_ladder
from pairrepro.report.analyses.readings import table_readings
from pairrepro.report.tables.cells import REFERENCE, EvalTable
from pairrepro.runs import RunFolder, RunInfo, all_runs

FIGURE_FORMATS = ("png", "svg")


def save_figure(fig: Any, stem: Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg`` atomically; return their paths (none: no figure)."""
    out: list[Path] = []
    for ext in FIGURE_FORMATS if fig is not None else ():
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


def svg_text(fig: Any) -> str:
    """``fig`` as an inline ``<svg>`` element (no XML prolog), closed after."""
    fig.savefig(buffer := io.StringIO(), format="svg", bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()[buffer.getvalue().index("<svg"):]


def depth_figure(spec: FigureSpec, runs: list[RunInfo]) -> Any:
    """A paper figure of a score against a recipe setting (CSRAN Figures 2 and 3)."""
    points = series_points(spec, runs)
    if not any(points.values()):
        return None
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for label, pts in points.items():
        if pts:
            xs, ys, errs = zip(*pts, strict=True)
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, label=f"{label} (n={len(xs)})")
    ax.set(xlabel=spec.x_label or spec.x, ylabel=spec.y_label or spec.y)
    ax.set_title(f"{spec.paper} Figure {spec.number}", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def table_plot(ev: EvalTable) -> Any:
    """Rows with an ``x`` (MV-LSTM Table 2: k) as published vs reproduced curves."""
    rows = [r for r in ev.rows if r.row.x is not None]
    if not rows:
        raise DataError(f"{ev.paper.paper} Table {ev.table.number} has no rows with an x value "
                        "to plot", hint="give rows x = <value> in the paper TOML")
    fig, ax = plt.subplots(figsize=(5, 3.5))
    xs = [float(r.row.x or 0) for r in rows]
    for i, column in enumerate(c for c in ev.table.columns if c.kind == "metric"):
        cells = [next(c for c in r.cells if c.column == column.key) for r in rows]
        published = [float(c.published) for c in cells]
        ax.plot(xs, published, "--", marker="s", color=f"C{i}", label=f"{column.header} (paper)")
        ours = [(x, c.estimate.mean, c.estimate.std or 0.0)
                for x, c in zip(xs, cells, strict=True) if c.estimate is not None]
        if ours:
            ox, oy, oe = zip(*ours, strict=True)
            ax.errorbar(ox, oy, yerr=oe, marker="o", color=f"C{i}", capsize=3,
                        label=f"{column.header} (ours)")
    ax.set_xscale("log", base=2)
    ticks = sorted(set(xs))
    ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
    ax.set_xlabel(ev.table.x_label or "x")
    ax.set_title(f"{ev.paper.paper} Table {ev.table.number}: {ev.table.caption}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


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
    return save_figure(fig, (out_dir or run_dir) / f"curves-{run_dir.parent.name}-{run_dir.name}")


def reference_curves(ev: EvalTable) -> Any:
    """The selection metric of ``ev``'s reference runs by epoch: each recipe's mean over seeds."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for recipe, runs in sorted({c.recipe: c.runs for r in ev.rows for c in r.cells
                                if c.source == REFERENCE and c.runs}.items()):
        key = "dev." + str(runs[0].config.get("train", {}).get("select_metric", ""))
        by_epoch: dict[float, list[float]] = {}
        for run in (r for r in runs if r.folder.metrics_path.is_file()):  # BM25 logs none
            for x, y in read_curves(Path(run.path)).get(key, []):
                by_epoch.setdefault(x, []).append(y)
        if by_epoch:
            ax.plot(sorted(by_epoch), [statistics.fmean(by_epoch[x]) for x in sorted(by_epoch)],
                    marker=".", label=f"{recipe} ({key}, {len(runs)} seeds)")
    if not ax.lines:
        return plt.close(fig)  # None: nothing to draw
    ax.set(xlabel="epoch", title=f"{ev.paper.paper} Table {ev.table.number}: reference runs")
    ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1, 0.5))
    ax.grid(alpha=0.3)
    return fig


def intervals_figure(title: str, lines: list[tuple[str, float, float | None, float | None]],
                     at: float | None, x_label: str) -> Any:
    """One horizontal line per label: its value and interval, and the paper's value ``at``."""
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.28 * len(lines)))
    for y, (_, value, low, high) in enumerate(lines):
        span = None if low is None or high is None else [[value - low], [high - value]]
        ax.errorbar([value], [y], xerr=span, fmt="o", color="C0", capsize=3)
    if at is not None:
        ax.axvline(at, color="C3", linestyle="--", label="paper")
        ax.legend(fontsize=7)
    ax.set_yticks(range(len(lines)), [label for label, *_ in lines], fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel=x_label, title=title)
    ax.grid(alpha=0.3, axis="x")
    return fig


def page_figures(evs: list[EvalTable], results_dir: Path) -> list[tuple[str, Any]]:
    """(title, figure or why there is none) of the HTML report: for each table its reference
    runs' curves, readings and plot, the paper's figures, and the gap ladders of its rows."""
    out: list[tuple[str, Any]] = []
    for ev in (ev for ev in evs if ev.table.kind != "hparams"):  # settings: nothing to draw
        name = f"{ev.paper.paper} Table {ev.table.number}"
        out.append((f"{name}: training curves", reference_curves(ev)
                    or "no reference run of this table records its epochs"))
        lines = [(f"{label} {column.header} {v.reading.name}", v.value - published,
                  v.low - published, v.high - published)
                 for label, column, published, values in table_readings(ev) for v in values]
        if lines:
            out.append((f"{name}: readings", intervals_figure(
                f"{name}: protocol readings", lines, 0.0, "distance from the paper's value")))
        if any(r.row.x is not None for r in ev.rows):
            out.append((f"{name}: plot", table_plot(ev)))
    for paper in dict.fromkeys(ev.paper.paper for ev in evs):
        for spec in load_paper(paper).figures:
            out.append((f"{paper} Figure {spec.number}", depth_figure(
                spec, all_runs(results_dir)) or "no reference run matches this figure yet"))
    shown = {(ev.paper.paper, ev.table.number) for ev in evs}
    for ladder in (n for n in available_ladders()
                   if (load_ladder(n).paper, load_ladder(n).table) in shown):
        result = evaluate_ladder(ladder, results_dir)
        for k, (column, published) in enumerate(result.columns):
            lines = [(f"{s.number}. {s.recipe}", s.values[k].mean, s.values[k].low,
                      s.values[k].high) for s in result.steps if s.values]
            out.append((f"gap ladder {ladder}: {column.header}", intervals_figure(
                f"{result.ladder.title}: {column.header}", lines, published, column.header)
                or "no step of this ladder has a reference run"))
    return out
