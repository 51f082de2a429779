"""Shared CLI plumbing: global --quiet/--json state, console, error -> exit code."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import typer
from rich.console import Console

from pairrepro.errors import PairreproError


@dataclass
class CliState:
    quiet: bool = False
    json: bool = False


STATE = CliState()
console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)
F = TypeVar("F", bound=Callable[..., Any])


def info(message: str) -> None:
    """Print a human message unless --quiet or --json."""
    if not (STATE.quiet or STATE.json):
        console.print(message)


def emit_json(data: Any) -> None:
    """Print machine-readable output (used when --json is given)."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def show_progress() -> bool:
    """Whether rich progress bars should be drawn."""
    return not (STATE.quiet or STATE.json)


def handle_errors(fn: F) -> F:
    """Turn :class:`PairreproError` into a red one-paragraph message and its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PairreproError as exc:
            if STATE.json:
                emit_json({"error": exc.message, "hint": exc.hint,
                           "exit_code": exc.exit_code})
            else:
                err_console.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def not_yet(feature: str, issue: str) -> None:
    """Report that a command exists but its implementation has not landed (exit 2)."""
    err_console.print(f"[yellow]{feature} is not implemented yet[/] (tracked in {issue}).")
    raise typer.Exit(2)
