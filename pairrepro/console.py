"""Where everything pairrepro prints goes (importing nothing of pairrepro): :data:`STATE`, set
by :func:`configure`, and the package's only rich consoles (stdout results, stderr the rest)."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import Progress, ProgressColumn

#: The layout width off a terminal: rich's 80 columns would cut numbers in table cells.
UNCUT_WIDTH = 10_000


@dataclass
class OutputState:
    """``quiet``: errors and results only; ``json``: machine-readable stdout."""

    quiet: bool = False
    json: bool = False


STATE = OutputState()
_console = Console(stderr=False, highlight=False)
_err_console = Console(stderr=True, highlight=False)
_handler: logging.Handler | None = None


def is_terminal(console: Console) -> bool:
    """Whether ``console``'s file is a terminal (rich says so of any file under FORCE_COLOR)."""
    return bool(getattr(console.file, "isatty", lambda: False)())


def _fit(console: Console) -> Console:
    # per call: the streams may change between calls (tests, a piped ``pairrepro ... | cat``)
    console.width = None if is_terminal(console) else UNCUT_WIDTH  # type: ignore[assignment]
    return console


def get_console() -> Console:
    """The stdout console (results, tables), fitted to its stream."""
    return _fit(_console)


def get_err_console() -> Console:
    """The stderr console (progress, warnings, errors, log records), fitted to its stream."""
    return _fit(_err_console)


def configure(*, quiet: bool = False, json: bool = False) -> None:
    """Set the output state and route the ``pairrepro`` logger to stderr through rich."""
    global _handler
    STATE.quiet, STATE.json = quiet, json
    logger = logging.getLogger("pairrepro")  # every module's getLogger(__name__) descends from it
    if _handler is not None:
        logger.removeHandler(_handler)
    _handler = RichHandler(console=get_err_console(), show_time=False, show_path=False,
                           markup=False, rich_tracebacks=False)
    logger.addHandler(_handler)
    logger.setLevel(logging.WARNING if (quiet or json) else logging.INFO)
    # the handler above is the output: the root logger's (if any) would print it twice
    logger.propagate = False


def show_progress() -> bool:
    """Whether progress displays are wanted (neither ``quiet`` nor ``json``)."""
    return not (STATE.quiet or STATE.json)


def live_progress(*columns: str | ProgressColumn, enabled: bool) -> Progress:
    """A transient rich progress display on stderr; a no-op one when not ``enabled``."""
    return Progress(*columns, console=get_err_console(), transient=True, disable=not enabled)


def step_progress(*columns: str | ProgressColumn, enabled: bool,
                  unit: str = "batches") -> Progress | PlainProgress:
    """:func:`live_progress` on a terminal, else (no live bar there) :class:`PlainProgress`."""
    console = get_err_console()
    if enabled and not is_terminal(console):
        return PlainProgress(console, unit=unit)
    return live_progress(*columns, enabled=enabled)


class PlainProgress(contextlib.AbstractContextManager["PlainProgress"]):
    """Progress off a terminal: a plain line per tenth of a task and at its end."""

    def __init__(self, console: Console, min_interval_s: float = 30.0,
                 unit: str = "batches") -> None:
        self.console = console
        self.min_interval_s = min_interval_s
        self.unit = unit
        self.tasks: dict[int, dict[str, Any]] = {}

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: int, completed: int = 0,
                 **fields: Any) -> int:
        now = time.monotonic()
        self.tasks[len(self.tasks)] = {"description": description, "total": total,
                                       "start": completed, "completed": completed,
                                       "started": now, "printed": now, "tenth": 0, **fields}
        return len(self.tasks) - 1

    def update(self, task_id: int, completed: int | None = None, advance: int = 0,
               **fields: Any) -> None:
        task = self.tasks[task_id]
        task.update(fields)
        task["completed"] = (task["completed"] + advance) if completed is None else completed
        tenth = 10 * task["completed"] // max(task["total"], 1)
        now = time.monotonic()
        if (task["completed"] >= task["total"]
                or (tenth > task["tenth"] and now - task["printed"] >= self.min_interval_s)):
            task["tenth"], task["printed"] = tenth, now
            self._line(task, now)

    def remove_task(self, task_id: int) -> None:
        self.tasks.pop(task_id, None)

    def _line(self, task: dict[str, Any], now: float) -> None:
        done, total = task["completed"], task["total"]
        rate = (done - task["start"]) / max(now - task["started"], 1e-9)  # units per second
        eta = (total - done) / rate if rate > 0 else float("nan")
        when = ("done" if done >= total else
                f"ETA {int(eta // 3600)}:{int(eta % 3600 // 60):02d}:{int(eta % 60):02d}"
                if math.isfinite(eta) else "ETA -")
        # plain text: no markup, colour or cursor codes in a log
        self.console.print(f"{task['description']}: {done}/{total} {self.unit} "
                           f"({100 * done // max(total, 1)}%), loss {task.get('loss', '-')}, "
                           f"{task.get('speed', '-')} pairs/s, {when}",
                           markup=False, highlight=False, soft_wrap=True)
