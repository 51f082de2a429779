"""Shared CLI plumbing: the output state and consoles for the commands, error -> exit code."""

from __future__ import annotations

import errno
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from pairrepro import console as output
from pairrepro import paths
from pairrepro.cli.interrupts import command_ended, command_started
from pairrepro.config import MAX_SEED
from pairrepro.console import STATE as STATE  # the one output state, named for the commands
from pairrepro.console import show_progress as show_progress
from pairrepro.errors import INTERRUPTED_EXIT, ConfigError, PairreproError, StorageError

console = output.get_console()
err_console = output.get_err_console()


def info(message: str) -> None:
    """Print a human message unless --quiet or --json."""
    if not (STATE.quiet or STATE.json):
        console.print(message)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


#: Errors of a folder or file that cannot be written: exit 8, wherever they surface.
CANNOT_WRITE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT,
                          errno.ENOTDIR})


def storage_error(exc: OSError) -> StorageError:
    """``exc`` as a :class:`StorageError` (exit 8) naming the path (and, under the default data
    home, how to choose another)."""
    where = exc.filename or "a file"
    hint = ("a file stands where a folder is needed: name another path"
            if exc.errno == errno.ENOTDIR else "make the folder writable, or free disk space")
    if exc.filename and not os.environ.get("PAIRREPRO_HOME"):
        home = paths.home()
        if Path(exc.filename).is_relative_to(home) or home.is_relative_to(exc.filename):
            hint = (f"the data home {home} cannot be written here: set PAIRREPRO_HOME to a "
                    "writable folder (e.g. export PAIRREPRO_HOME=$PWD/.pairrepro)")
    return StorageError(f"{where}: cannot write ({exc.strerror or exc})", hint=hint)


def add_command(app: typer.Typer, name: str, fn: Callable[..., Any], **options: Any) -> None:
    """Attach ``fn`` as command ``name`` of ``app``: :class:`PairreproError` -> a red message
    and its exit code; Ctrl-C -> exit 130."""

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        command_started()
        try:
            return fn(*args, **kwargs)
        except (PairreproError, OSError) as exc:
            if isinstance(exc, OSError) and exc.errno not in CANNOT_WRITE:
                raise
            error = storage_error(exc) if isinstance(exc, OSError) else exc
            command_ended()  # the outcome is this error: a Ctrl-C does not cut its message
            report_error(error)
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt:
            command_ended()
            err_console.print("[yellow]interrupted[/]")
            raise typer.Exit(INTERRUPTED_EXIT) from None
        finally:
            command_ended()

    app.command(name, **options)(command)


def report_error(exc: PairreproError) -> None:
    """Print ``exc`` (JSON under --json); under torchrun rank 0 only, each rank's recorded."""
    if "TORCHELASTIC_ERROR_FILE" in os.environ:  # a rank under torchrun
        from pairrepro.device import record_error

        record_error(str(exc), exc.exit_code)  # the launcher's report names it
    if os.environ.get("RANK", "0") != "0":
        return  # ranks mostly fail alike; the launcher prints one that failed alone
    if STATE.json:
        emit_json({"error": exc.message, "hint": exc.hint, "exit_code": exc.exit_code})
    else:
        # escaped: messages name sections like "[optim]", which rich reads as markup
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", markup=True,
                          highlight=False)


def parse_seeds(text: str | None) -> list[int] | None:
    """``--seeds "1,2,3"`` -> ``[1, 2, 3]``; not given -> None (the recipe's seeds)."""
    if not text:
        return None
    example = "e.g. --seeds 1,2,3"
    parts = text.replace(" ", "").split(",")
    if not any(parts):
        raise ConfigError(f"--seeds {text!r}: no seed given",
                          hint=f"{example}; leave --seeds out for the recipe's own seeds")
    seeds: list[int] = []
    for part in parts:
        if not part:
            raise ConfigError(f"--seeds {text!r}: an empty item (two commas in a row, or one "
                              "at an end)",
                              hint=f"name each seed once, separated by single commas: {example}")
        if not (part.isascii() and part.isdecimal()):  # int() would take "-1", "+1", "1_0"
            raise ConfigError(f"--seeds {text!r}: {part!r} is not a seed: seeds are "
                              f"integers from 0 to {MAX_SEED}", hint=example)
        seed = int(part)
        if seed > MAX_SEED:
            raise ConfigError(f"--seeds {text!r}: {seed} is larger than {MAX_SEED}, the "
                              "largest seed numpy takes", hint=example)
        if seed in seeds:
            raise ConfigError(f"--seeds {text!r}: seed {seed} is given twice",
                              hint="name each seed once (each has one run folder)")
        seeds.append(seed)
    return seeds
