"""Command-line interface (Typer). Thin: each command calls one library function."""

from __future__ import annotations

from pairrepro.cli.interrupts import take_over


def main() -> None:
    """The ``pairrepro`` console script and ``python -m pairrepro``: Ctrl-C is handled from
    the first moment (:mod:`pairrepro.cli.interrupts`), then the commands are imported."""
    take_over()
    from pairrepro.cli.app import app

    app()
