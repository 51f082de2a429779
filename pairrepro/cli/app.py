"""The ``pairrepro`` command: assembles the command groups of each area."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from pairrepro import __version__, console
from pairrepro.cli import data_cmds, pipeline_cmds, report_cmds, train_cmds, verify_cmds

# global flags (no values) accepted anywhere before a ``--``
GLOBAL_FLAGS = ("--quiet", "-q", "--json")


class RootGroup(TyperGroup):
    """The top-level group: global flags may follow the sub-command."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        """Parse ``args`` with every global flag moved before the command path; an option's
        value (``--dataset --json``) and whatever follows ``--`` stay."""
        front: list[str] = []
        rest: list[str] = []
        command: Any = self
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                rest += args[i:]
                break
            i += 1
            if arg in GLOBAL_FLAGS:
                front.append(arg)
                continue
            rest.append(arg)
            if arg.startswith("-") and arg != "-":
                # typer vendors its own click: options and groups are recognised by what they have
                name = arg.split("=", 1)[0]
                option = next((p for p in command.params if p.param_type_name == "option"
                               and name in (*p.opts, *p.secondary_opts)), None)
                if option is not None and not option.is_flag and not option.count \
                        and "=" not in arg:
                    rest += args[i:i + option.nargs]  # its value(s), whatever they look like
                    i += option.nargs
                continue
            if hasattr(command, "get_command"):  # a sub-command name, or a default one's argument
                sub = command.get_command(ctx, arg)
                default = getattr(command, "default_command", None)
                if sub is None and default:
                    sub = command.get_command(ctx, default)
                command = sub or command
        return super().parse_args(ctx, front + rest)


app = typer.Typer(
    name="pairrepro",
    cls=RootGroup,
    help=(
        "Reproduce the result tables of five text-matching papers end to end.\n\n"
        "Examples:\n\n"
        "  pairrepro fetch snli --mirror /data/mirror\n\n"
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
    console.configure(quiet=quiet, json=json_output)


for area in (data_cmds, train_cmds, report_cmds, pipeline_cmds, verify_cmds):
    area.register(app)
