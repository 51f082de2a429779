"""The ``pairrepro`` command: assembles the command groups of each area."""

from __future__ import annotations

import typer

from pairrepro import __version__
from pairrepro.cli import data_cmds, embeddings_cmds, prepare_cmds, report_cmds, train_cmds
from pairrepro.cli.common import STATE

app = typer.Typer(
    name="pairrepro",
    help=(
        "Reproduce the result tables of five text-matching papers end to end.\n\n"
        "Examples:\n\n"
        "  pairrepro fetch snli --mirror ../shared/datasets\n\n"
        "  pairrepro preprocess trecqa --variant clean\n\n"
        "  pairrepro train recipes/mv_lstm_tensor.toml --seeds 1,2,3\n\n"
        "  pairrepro report csran --table 6 --format md"
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"pairrepro {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only errors and results."),
    json_output: bool = typer.Option(False, "--json", help="Machine-readable JSON on stdout."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
) -> None:
    """Global options, valid before any command (``pairrepro --quiet train ...``)."""
    STATE.quiet = quiet
    STATE.json = json_output


data_cmds.register(app)
prepare_cmds.register(app)
embeddings_cmds.register(app)
train_cmds.register(app)
report_cmds.register(app)


def main() -> None:
    """Console-script entry point."""
    app()
