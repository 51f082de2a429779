"""CLI of the report area: ``pairrepro report`` and ``pairrepro reproduce``.

``report`` compares published tables with finished runs and never trains; ``reproduce``
fetches, preprocesses and trains what a table needs (skipping finished seeds), then renders it
— the make targets (``make table2``, ``make csran-table6``, ``make tables``) call it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from pairrepro import paths
from pairrepro.cli.common import STATE, console, emit_json, err_console, handle_errors, info
from pairrepro.errors import ConfigError, NothingToRunError, PairreproError
from pairrepro.io import write_text
from pairrepro.report.tables import (
    PAPERS,
    EvalTable,
    Paper,
    PaperTable,
    eval_to_json,
    evaluate_table,
    find_runs,
    load_paper,
    load_recipe_index,
    table_recipes,
)

FORMAT_HELP = "term (rich, default), md, latex or html."
SUFFIX_FORMAT = {".md": "md", ".tex": "latex", ".html": "html", ".htm": "html", ".txt": "term"}


def _select(target: str, table: int | None) -> list[tuple[Paper, PaperTable]]:
    names = PAPERS if target == "all" else (target,)
    chosen: list[tuple[Paper, PaperTable]] = []
    for name in names:
        paper = load_paper(name)
        if table is None:
            chosen += [(paper, t) for t in paper.tables]
        elif target == "all":
            chosen += [(paper, t) for t in paper.tables if t.number == table]
        else:
            chosen.append((paper, paper.table(table)))
    if not chosen:
        raise ConfigError(f"no paper has a table {table} with numbers")
    return chosen


def _runs_dir(runs: Path | None) -> Path:
    if runs is not None:
        # train_recipe and every reader go through paths.runs_dir(): point them all here.
        os.environ["PAIRREPRO_RUNS"] = str(runs)
    return paths.runs_dir()


def _output(evs: list[EvalTable], fmt: str, out: Path | None) -> None:
    from pairrepro.report.render import FORMATS, render_many, term_renderables

    if out is not None and fmt == "term":
        fmt = SUFFIX_FORMAT.get(out.suffix.lower(), "md")
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if STATE.json:
        emit_json([eval_to_json(ev) for ev in evs])
        return
    if out is not None:
        write_text(out, render_many(evs, fmt))
        info(f"wrote {out} ({len(evs)} table(s), {fmt})")
        return
    if fmt == "term":
        for ev in evs:
            for item in term_renderables(ev):
                console.print(item)
            console.print()
        return
    typer.echo(render_many(evs, fmt), nl=False)


def _plan(selected: list[tuple[Paper, PaperTable]], runs_dir: Path,
          seeds: list[int] | None, comparisons: bool = False) -> list[Any]:
    from pairrepro.report.plan import plan_tables, plan_to_json, render_plan

    items = plan_tables(selected, load_recipe_index(), runs_dir, seeds,
                        comparisons=comparisons)
    if STATE.json:
        emit_json(plan_to_json(items))
    else:
        typer.echo(render_plan(items), nl=False)
    return items


def _parse_seeds(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(s) for s in text.replace(" ", "").split(",") if s]
    except ValueError:
        raise ConfigError(f"--seeds {text!r}: expected integers separated by commas, e.g. 1,2,3"
                          ) from None


def report(
    target: str = typer.Argument(..., help="A paper (clstm, dflstm, mvlstm, csran, cin), 'all', "
                                 "'figures', 'curves' or 'runs' (every finished run's key "
                                 "manifest fields; --dataset filters)."),
    run: Path | None = typer.Argument(None, help="With 'curves': a run directory "
                                      "runs/<recipe>/seed-<n>."),
    table: int | None = typer.Option(None, "--table", "-t", help="Only this table number."),
    fmt: str = typer.Option("term", "--format", "-f", help=FORMAT_HELP),
    runs: Path | None = typer.Option(None, "--runs", help="Runs folder (default ./runs or "
                                     "$PAIRREPRO_RUNS)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write to this file (format from "
                                    "the suffix .md/.tex/.html unless --format is given)."),
    plan: bool = typer.Option(False, "--plan", help="Print what would run instead: recipes, "
                              "datasets, estimated CPU or GPU hours."),
    figures: Path | None = typer.Option(None, "--figures", help="Also draw the paper's figures "
                                        "(PNG and SVG) into this folder."),
    dataset: str = typer.Option("", "--dataset", help="With 'runs': only runs on this dataset."),
) -> None:
    """Published numbers next to reproduced ones, in the paper's layout.

    Examples:

      pairrepro report clstm --table 2

      pairrepro report csran --table 6 --format md --out csran-t6.md

      pairrepro report all --format html --out tables.html

      pairrepro report all --table 2 --plan

      pairrepro report figures --figures figs/

      pairrepro report curves runs/cin_snli/seed-1

      pairrepro report runs --dataset trecqa --format md
    """
    runs_dir = _runs_dir(runs)
    if target == "runs":
        _runs_table(runs_dir, dataset, fmt, out)
        return
    if target == "curves":
        from pairrepro.report.figures import curves_figure

        if run is None:
            raise ConfigError("report curves needs a run directory",
                              hint="pairrepro report curves runs/<recipe>/seed-<n>")
        written = curves_figure(run, out)
        _say_written(written)
        return
    if target == "figures":
        _figures(figures or Path("figures"), runs_dir)
        return
    if target != "all" and target not in PAPERS:
        raise ConfigError(f"unknown paper {target!r}",
                          hint=f"choose one of {', '.join(PAPERS)}, all, figures, curves")
    selected = _select(target, table)
    if plan:
        _plan(selected, runs_dir, None)
        return
    index = load_recipe_index()
    evs = [evaluate_table(p, t, runs_dir, index) for p, t in selected]
    _output(evs, fmt, out)
    if figures is not None:
        _figures(figures, runs_dir, papers={p.paper for p, _ in selected})


def _runs_table(runs_dir: Path, dataset: str, fmt: str, out: Path | None) -> None:
    from rich.table import Table

    from pairrepro.report.runs_table import HEADERS, collect, format_line, to_json, to_markdown

    lines = collect(runs_dir, dataset)
    if STATE.json:
        emit_json(to_json(lines))
        return
    if out is not None or fmt == "md":
        text = to_markdown(lines)
        if out is not None:
            write_text(out, text)
            info(f"wrote {out} ({len(lines)} run(s))")
        else:
            typer.echo(text, nl=False)
        return
    if fmt != "term":
        raise ConfigError(f"--format {fmt!r}: report runs prints term or md")
    table = Table(*HEADERS, title=f"finished runs in {runs_dir}")
    for line in lines:
        table.add_row(*format_line(line))
    console.print(table)


def _say_written(written: list[Path]) -> None:
    if STATE.json:
        emit_json({"written": [str(p) for p in written]})
    else:
        info("wrote " + ", ".join(str(p) for p in written))


def _figures(out_dir: Path, runs_dir: Path, papers: set[str] | None = None) -> None:
    from pairrepro.report.figures import depth_figure, table_plot

    index = load_recipe_index()
    written: list[Path] = []
    for name in PAPERS:
        if papers is not None and name not in papers:
            continue
        paper = load_paper(name)
        for spec in paper.figures:
            written += depth_figure(spec, runs_dir, out_dir)
        for t in paper.tables:
            if any(r.x is not None for r in t.rows):
                written += table_plot(evaluate_table(paper, t, runs_dir, index), out_dir)
    _say_written(written)


def reproduce(
    target: str = typer.Argument(..., help="A paper (clstm, dflstm, mvlstm, csran, cin) or "
                                 "'all'."),
    table: int | None = typer.Option(None, "--table", "-t", help="Only this table number."),
    seeds: str | None = typer.Option(None, "--seeds", help="Seeds, e.g. 1,2,3 (default: each "
                                     "recipe's own)."),
    device: str | None = typer.Option(None, "--device", help="auto, cpu, cuda, cuda:N."),
    runs: Path | None = typer.Option(None, "--runs", help="Runs folder."),
    fmt: str = typer.Option("term", "--format", "-f", help=FORMAT_HELP),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the tables to this file."),
    dry_run: bool = typer.Option(False, "--dry-run", "-n", help="Only print the plan."),
    mirror: Path | None = typer.Option(None, "--mirror", help="Local dataset mirror folder."),
    compare: bool = typer.Option(False, "--compare", help="Also train the comparison rows "
                                 "(models run here that the paper's table does not have)."),
) -> None:
    """Fetch, preprocess and train what a table needs, then render it.

    Finished seeds are skipped; interrupted ones resume. Rows whose data cannot be fetched
    stay marked in the table. Exit code 7 only if nothing at all could run.

    Examples:

      pairrepro reproduce csran --table 6 --seeds 1,2,3 --device cuda

      pairrepro reproduce csran --table 6 --compare --seeds 1

      pairrepro reproduce all --table 2 --dry-run
    """
    runs_dir = _runs_dir(runs)
    selected = _select(target, table)
    seed_list = _parse_seeds(seeds)
    if dry_run:
        _plan(selected, runs_dir, seed_list, compare)
        return
    outcome = run_tables(selected, runs_dir, seed_list, device, mirror, compare)
    index = load_recipe_index()
    _output([evaluate_table(p, t, runs_dir, index) for p, t in selected], fmt, out)
    if not outcome["ran"]:
        problems = "; ".join(f"{k}: {v}" for k, v in outcome["failed"].items())
        raise NothingToRunError(
            f"nothing could run for {target}"
            + (f" table {table}" if table is not None else "")
            + (f" ({problems})" if problems else " (no recipe declares a row of it)"),
            hint="see the table above for the command each row needs",
        )


def run_tables(selected: list[tuple[Paper, PaperTable]], runs_dir: Path,
               seeds: list[int] | None, device: str | None,
               mirror: Path | None = None, comparisons: bool = False) -> dict[str, Any]:
    """Fetch, prepare and train every recipe of ``selected`` (and of their comparison rows
    with ``comparisons``); failures are collected, not raised. Returns
    ``{"ran": [recipes trained or already finished], "failed": {name: why}}``.
    """
    from pairrepro.data.fetch import fetch_dataset
    from pairrepro.data.prepare import prepare_dataset
    from pairrepro.report.tables import data_status
    from pairrepro.train.runner import train_recipe

    index = load_recipe_index()
    names = sorted({n for p, t in selected
                    for n in table_recipes(p, t, index, comparisons)})
    ran: list[str] = []
    failed: dict[str, str] = {}
    prepared: dict[tuple[str, str], str] = {}  # (dataset, variant) -> "" ok or the error
    for name in names:
        recipe = index.recipes[name]
        key = (recipe.data.dataset, recipe.data.variant)
        if key not in prepared:
            prepared[key] = ""
            ready, _ = data_status(*key)
            if not ready:
                try:
                    fetch_dataset(key[0], mirror=mirror, from_path=None, force=False,
                                  progress=not STATE.quiet)
                    prepare_dataset(key[0], variant=key[1] or None, strict=False,
                                    progress=not STATE.quiet)
                except PairreproError as exc:
                    prepared[key] = exc.message
        if prepared[key]:
            failed[name] = f"data: {prepared[key]}"
            continue
        wanted = seeds or recipe.seeds
        done = {r.seed for r in find_runs(runs_dir, name) if r.status == "finished"}
        todo = [s for s in wanted if s not in done]
        if todo:
            info(f"training {name} seeds {todo}")
            try:
                train_recipe(recipe.source, [], todo, True, device, STATE.quiet)
            except PairreproError as exc:
                failed[name] = exc.message
                err_console.print(f"[red]{name} failed:[/] {failed[name]}")
                continue
        ran.append(name)
    return {"ran": ran, "failed": failed}


def register(app: typer.Typer) -> None:
    """Add this area's commands to the main app."""
    app.command("report")(handle_errors(report))
    app.command("reproduce")(handle_errors(reproduce))
