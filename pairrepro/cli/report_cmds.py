"""``pairrepro report`` (never trains) and its sub-commands; its table helpers also render
``reproduce`` and ``demo``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from pairrepro import paths
from pairrepro.cli.common import STATE, add_command, console, emit_json, err_console, info
from pairrepro.errors import ConfigError
from pairrepro.fileio import write_text
from pairrepro.planning.paper_tables import PAPERS, Paper, PaperTable, load_paper
from pairrepro.planning.plan import plan_tables, plan_to_json, render_plan
from pairrepro.planning.recipe_index import load_recipe_index
from pairrepro.report.analyses.orderings import compare_to
from pairrepro.report.tables.cells import EvalTable, evaluate_table
from pairrepro.report.tables.render import FORMATS, eval_to_json, render_many, term_renderables

FORMAT_HELP = "term (rich, default), md, latex or html (one page, its figures inline)."
SUFFIX_FORMAT = {".md": "md", ".tex": "latex", ".html": "html", ".htm": "html", ".txt": "term"}
RunsOption = Annotated[Path | None, typer.Option(
    "--runs", help="Runs folder (default ./runs or $PAIRREPRO_RUNS).")]
MarkdownOut = Annotated[Path | None, typer.Option("--out", "-o",
                                                  help="Write Markdown to this file.")]
PaperArgument = Annotated[str, typer.Argument(help=f"A paper ({', '.join(PAPERS)}).")]
TargetArgument = Annotated[str, typer.Argument(help=f"A paper ({', '.join(PAPERS)}) or 'all'.")]
GPU_HELP = ("add hours on this GPU (h100, h200, a100, l4, ...): measured where "
            "bench/records/gpu_rates.json has a rate of the recipe or its model there "
            "(bench/gpu_check.sh), else a FLOP-based lower bound; each says which.")


def select_tables(target: str, table: int | None) -> list[tuple[Paper, PaperTable]]:
    """The tables ``target`` (a paper or ``all``) and ``--table`` name."""
    names = PAPERS if target == "all" else (target,)
    chosen: list[tuple[Paper, PaperTable]] = []
    for name in names:
        paper = load_paper(name)
        if table is not None and target != "all":
            chosen.append((paper, paper.table(table)))  # raises, naming the tables it has
        else:
            chosen += [(paper, t) for t in paper.tables if table in (None, t.number)]
    if not chosen:
        raise ConfigError(f"no paper has a table {table} with numbers")
    return chosen


def evaluate_tables(selected: list[tuple[Paper, PaperTable]], runs_dir: Path
                    ) -> list[EvalTable]:
    """The tables with the published rows, the reference runs and the runs of ``runs_dir``."""
    index = load_recipe_index()
    return [evaluate_table(p, t, runs_dir, index, paths.results_dir()) for p, t in selected]


def output_tables(evs: list[EvalTable], fmt: str, out: Path | None) -> None:
    """Evaluated tables as JSON (``--json``), into ``--out``, or on the terminal."""
    if out is not None and fmt == "term":
        fmt = SUFFIX_FORMAT.get(out.suffix.lower(), "md")
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if STATE.json:
        emit_json([eval_to_json(ev) for ev in evs])
        return
    if out is None and fmt == "term":
        for ev in evs:
            for item in term_renderables(ev):
                console.print(item)
            console.print()
        return
    figures = None
    if fmt == "html":  # one page: the tables and, inline, the figures they have
        from pairrepro.report.tables.figures import page_figures

        figures = page_figures(evs, paths.results_dir())
    # Markdown's run links relative to the file written (or the folder a pipe's file is in)
    text = render_many(evs, fmt, out.parent if out is not None else Path.cwd(), figures)
    _write_or_print(text, out, f"wrote {out} ({len(evs)} table(s), {fmt})")


def print_plan(selected: list[tuple[Paper, PaperTable]], runs_dir: Path,
               seeds: list[int] | None, comparisons: bool = False, gpu: str = "",
               device: str | None = None) -> None:
    """The plan of ``report --plan`` and ``reproduce --dry-run``, as text or ``--json``."""
    items = plan_tables(selected, load_recipe_index(), runs_dir, seeds,
                        comparisons=comparisons, gpu=gpu)
    if STATE.json:
        emit_json(plan_to_json(items))
    else:
        typer.echo(render_plan(items, device), nl=False)


class ReportGroup(TyperGroup):
    """``report`` whose first word is not a sub-command is ``report paper ...``."""

    default_command = "paper"

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


def report_paper(
    target: TargetArgument,
    table: int | None = typer.Option(None, "--table", "-t", help="Only this table number."),
    fmt: str = typer.Option("term", "--format", "-f", help=FORMAT_HELP),
    runs: RunsOption = None,
    out: Path | None = typer.Option(None, "--out", "-o", help="Write to this file (format from "
                                    "the suffix .md/.tex/.html unless --format is given)."),
    plan: bool = typer.Option(False, "--plan", help="Print what would run instead: recipes, "
                              "datasets, estimated CPU or GPU hours."),
    compare: str = typer.Option("", "--compare-to", help="A row label: test every row "
                                "against it (paired randomization test on the same test "
                                "queries or pairs; difference and p-value per column)."),
    figures: Path | None = typer.Option(None, "--figures", help="Also draw the paper's figures "
                                        "(PNG and SVG) into this folder."),
    gpu: str = typer.Option("", "--gpu", help="With --plan: " + GPU_HELP),
) -> None:
    """Published numbers next to reproduced ones, in the paper's layout.

    Examples:

      pairrepro report clstm --table 2

      pairrepro report csran --table 6 --format md --out out/csran-t6.md

      pairrepro report all --format html --out out/tables.html

      pairrepro report all --table 2 --plan

      pairrepro report all --plan --gpu h100
    """
    runs_dir = runs or paths.runs_dir()
    if target != "all" and target not in PAPERS:
        raise ConfigError(f"unknown paper {target!r}",
                          hint=f"choose one of {', '.join(PAPERS)}, all; or a sub-command: "
                               "runs, curves, figures")
    if gpu and not plan:
        raise ConfigError("--gpu estimates hours: it goes with --plan",
                          hint=f"pairrepro report {target} --plan --gpu {gpu}")
    selected = select_tables(target, table)
    if plan:
        print_plan(selected, runs_dir, None, gpu=gpu)
        return
    evs = evaluate_tables(selected, runs_dir)
    if compare:
        evs = [compare_to(ev, compare) for ev in evs]
    output_tables(evs, fmt, out)
    if figures is not None:
        _figures(figures, runs_dir, papers={p.paper for p, _ in selected})


def report_runs(
    dataset: str = typer.Option("", "--dataset", help="Only runs on this dataset."),
    fmt: str = typer.Option("term", "--format", "-f", help="term (default) or md."),
    runs: RunsOption = None,
    out: MarkdownOut = None,
) -> None:
    """Every finished run's key manifest fields, one line per run; a stopped run says where
    its last checkpoint stands and, when it can go on, the command that continues it.

    A damaged run folder shows as a line naming the file; the other runs still print.

    Examples:

      pairrepro report runs --dataset trecqa --format md

      pairrepro report runs --json
    """
    from rich.table import Table

    from pairrepro.report.tables import runs_table as rt

    runs_dir = runs or paths.runs_dir()
    lines = rt.collect(runs_dir, dataset)
    if not lines and not STATE.quiet and runs_dir.is_dir():
        # on stderr: the folders one level down that hold runs (the demo's runs/demo/)
        of = f" of {dataset}" if dataset else ""
        for folder in sorted(d for d in runs_dir.iterdir() if d.is_dir()
                             and rt.collect(d, dataset)):
            err_console.print(f"no runs{of} in {runs_dir}, but {folder} holds some: "
                              f"pairrepro report runs --runs {folder}"
                              + (f" --dataset {dataset}" if dataset else ""),
                              markup=False, highlight=False)
    if STATE.json:
        emit_json(rt.to_json(lines))
        return
    if out is not None or fmt == "md":
        _write_or_print(rt.to_markdown(lines), out, f"wrote {out} ({len(lines)} run(s))")
        return
    if fmt != "term":
        raise ConfigError(f"--format {fmt!r}: report runs prints term or md")
    table = Table(*rt.HEADERS, title=f"runs in {runs_dir}")
    for line in lines:  # escaped: paths and damage reports are not rich markup
        table.add_row(*(escape(cell) for cell in rt.format_line(line)))
    console.print(table)


def report_curves(
    run: Path = typer.Argument(..., help="A run directory runs/<recipe>/seed-<n>."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Folder for the PNG and SVG "
                                    "(default: the run directory when it is under the runs "
                                    "folder, else <runs>/figures)."),
) -> None:
    """Training curves of one run from its metrics.jsonl (PNG and SVG).

    Examples:

      pairrepro report curves runs/bilstm_max_synthetic/seed-1

      pairrepro report curves results/csran_trecqa/seed-1      (drawn into RUNS/figures/)
    """
    from pairrepro.report.tables.figures import curves_figure

    # beside a run of the runs folder; anything else (a reference run under results/, which
    # only ``results add`` changes) into the runs folder's figures/
    runs = paths.runs_dir().resolve()
    default = run if run.resolve().is_relative_to(runs) else runs / "figures"
    _say_written(curves_figure(run, out or default))


def report_figures(
    out: Path | None = typer.Option(None, "--figures", "--out", "-o",
                                    help="Folder for the PNG and SVG files (default: "
                                    "<runs>/figures)."),
    runs: RunsOption = None,
) -> None:
    """Every paper figure (CSRAN depth curves, MV-LSTM k plot) from the finished runs.

    Example:

      pairrepro report figures --figures out/figs/
    """
    _figures(out or paths.runs_dir() / "figures", runs or paths.runs_dir())


def report_gap(
    ladder: str = typer.Argument("csran_trecqa", help="A gap ladder of "
                                 "pairrepro/report/ladders/ (default csran_trecqa)."),
    results: Path | None = typer.Option(None, "--results", help="Reference runs folder "
                                        "(default results/, or $PAIRREPRO_RESULTS); your own "
                                        "runs/ to see your steps."),
    out: MarkdownOut = None,
) -> None:
    """What is left between a reproduced number and the paper's, one change per step.

    Each step is a recipe adding one change to the step before (a side step changes an
    earlier step); it shows the mean over seeds with its 95% bootstrap interval and a paired
    randomization test against the step it changes. Ladders with readings re-score steps under
    the dataset's other published protocols, each reading's distance from the paper's value
    with its interval; an account then names what each measurement says of the gap.

    Examples:

      pairrepro report gap csran_trecqa

      pairrepro report gap csran_trecqa --results runs

      pairrepro report gap csran_trecqa --json
    """
    from pairrepro.report.analyses.gap_account import gap_json, gap_markdown
    from pairrepro.report.analyses.ladders import evaluate_ladder

    result = evaluate_ladder(ladder, results or paths.results_dir())
    _json_or_markdown(lambda: gap_json(result), lambda: gap_markdown(result), out)


def report_parity(
    results: Path | None = typer.Option(None, "--results", help="Reference runs folder "
                                        "(default results/, or $PAIRREPRO_RESULTS)."),
    out: MarkdownOut = None,
) -> None:
    """bf16 against fp32: the pairs of pairrepro/report/parity.toml, seed for seed.

    For each model and metric: both precisions' means with 95% intervals, the seed-by-seed
    differences, a paired randomization test (Holm-adjusted), and whether the difference lies
    within the spread between fp32 seeds.

    Examples:

      pairrepro report parity

      pairrepro report parity --json
    """
    from pairrepro.report.analyses.parity import evaluate_parity, parity_json, parity_markdown

    found = evaluate_parity(results or paths.results_dir())
    _json_or_markdown(lambda: parity_json(found), lambda: parity_markdown(found), out)


def report_orderings(
    target: PaperArgument,
    table: int = typer.Option(..., "--table", "-t", help="The table number."),
    runs: RunsOption = None,
    alpha: float = typer.Option(0.05, "--alpha", min=0.0, max=1.0,
                                help="Significance level of the paired tests."),
    out: MarkdownOut = None,
) -> None:
    """Which of the paper's orderings of its rows hold in the reproduced runs.

    For every two rows with a published value and runs, column by column: the paper's order
    (or tie) against a paired randomization test of our two rows on the same test units.

    Examples:

      pairrepro report orderings csran --table 8

      pairrepro report orderings csran --table 8 --json
    """
    from pairrepro.report.analyses import orderings as od

    ev = _one_table(target, table, runs)
    found = od.table_orderings(ev, alpha)
    _json_or_markdown(lambda: od.orderings_json(ev, found, alpha),
                      lambda: od.orderings_markdown(ev, found, alpha), out)


def _one_table(target: str, table: int, runs: Path | None) -> EvalTable:
    """Table ``table`` of paper ``target`` with the reference runs and the user's own."""
    if target not in PAPERS:
        raise ConfigError(f"unknown paper {target!r}", hint=f"choose one of {', '.join(PAPERS)}")
    (evaluated,) = evaluate_tables(select_tables(target, table), runs or paths.runs_dir())
    return evaluated


def report_readings(
    target: PaperArgument,
    table: int = typer.Option(..., "--table", "-t", help="The table number."),
    runs: RunsOption = None,
    out: MarkdownOut = None,
) -> None:
    """A table's reproduced cells under the dataset's other published evaluation protocols.

    Each reading re-scores the same committed predictions (pairrepro/report/readings/), with
    its 95% interval and its distance from the paper's value; the nearest is marked, and so is
    each reading the runs cannot tell from it (tied).

    Examples:

      pairrepro report readings csran --table 6

      pairrepro report readings csran --table 5 --json
    """
    from pairrepro.report.analyses.readings import table_readings, table_readings_markdown

    ev = _one_table(target, table, runs)
    _json_or_markdown(lambda: [
        {"row": label, "metric": column.metric, "published": published, **v.as_json()}
        for label, column, published, values in table_readings(ev) for v in values],
        lambda: table_readings_markdown(ev), out)


def _json_or_markdown(as_json: Callable[[], Any], markdown: Callable[[], str],
                      out: Path | None) -> None:
    """``--json``'s data, else the Markdown into ``--out`` or on standard output."""
    if STATE.json:
        emit_json(as_json())
    else:
        _write_or_print(markdown(), out, f"wrote {out}")


def _write_or_print(text: str, out: Path | None, written: str) -> None:
    """``text`` into ``--out`` (saying ``written``), or on standard output."""
    if out is not None:
        write_text(out, text)
        info(written)
    else:
        typer.echo(text, nl=False)


def _say_written(written: list[Path]) -> None:
    if STATE.json:
        emit_json({"written": [str(p) for p in written]})
    else:
        info("wrote " + ", ".join(str(p) for p in written))


def _figures(out_dir: Path, runs_dir: Path, papers: set[str] | None = None) -> None:
    from pairrepro.report.tables.figures import depth_figure, save_figure, table_plot
    from pairrepro.runs import all_runs

    index, runs = load_recipe_index(), all_runs(runs_dir)
    written: list[Path] = []
    for name in [n for n in PAPERS if papers is None or n in papers]:
        paper = load_paper(name)
        for spec in paper.figures:
            if (fig := depth_figure(spec, runs)) is None:
                info(f"{name} Figure {spec.number} left out: no finished run in {runs_dir} "
                     "matches it")
            written += save_figure(fig, out_dir / f"{name}-figure{spec.number}")
        for t in paper.tables:
            if any(r.x is not None for r in t.rows):
                written += save_figure(table_plot(evaluate_table(paper, t, runs_dir, index)),
                                 out_dir / f"{name}-table{t.number}")
    _say_written(written)


def register(app: typer.Typer) -> None:
    group = typer.Typer(cls=ReportGroup, no_args_is_help=True,
                        help="Published vs reproduced tables: report PAPER|all [--table N] "
                             "(short for report paper ...); and the runs, curves and figures.")
    for command in (report_paper, report_runs, report_curves, report_figures, report_gap,
                    report_orderings, report_parity, report_readings):
        add_command(group, command.__name__.removeprefix("report_"), command)
    app.add_typer(group, name="report")
