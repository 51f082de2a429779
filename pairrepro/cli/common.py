"""Shared CLI plumbing: global --quiet/--json state, console, error -> exit code."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from pairrepro.errors import ConfigError, PairreproError


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
            if "TORCHELASTIC_ERROR_FILE" in os.environ:  # a rank under torchrun
                from pairrepro.train.distributed import record_error

                record_error(str(exc), exc.exit_code)  # the launcher's report names it
            if os.environ.get("RANK", "0") != "0":
                # ranks mostly fail alike: rank 0 alone prints; the launcher prints the
                # error of a rank that failed on its own (its recorded message)
                raise typer.Exit(exc.exit_code) from None
            if STATE.json:
                emit_json({"error": exc.message, "hint": exc.hint,
                           "exit_code": exc.exit_code})
            else:
                # escaped: messages name sections like "[optim]", which rich reads as markup
                err_console.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True,
                                  highlight=False)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def parse_seeds(text: str | None) -> list[int] | None:
    """``--seeds "1,2,3"`` -> ``[1, 2, 3]``; empty or absent -> None (the recipe's seeds)."""
    if not text or not text.strip():
        return None
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise ConfigError(f"--seeds {text!r}: expected integers separated by commas, "
                          "e.g. --seeds 1,2,3") from None


def add_command(app: typer.Typer, name: str, fn: Callable[..., Any], **options: Any) -> None:
    """Attach ``fn`` as command ``name`` of ``app``, its errors turned into exit codes: the
    one way every ``*_cmds.register(app)`` adds its commands."""
    app.command(name, **options)(handle_errors(fn))
