"""Command-line interface (Typer). Thin: each command calls one library function."""

from __future__ import annotations

from pairrepro.cli.interrupts import take_over


def main() -> None:
    """The ``pairrepro`` console script: Ctrl-C handled from the first moment, then the app."""
    take_over()
    from pairrepro.cli.app import app

    app()
