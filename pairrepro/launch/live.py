"""The live table of a launch: one row per run (status, epoch, dev metric, ETA), read from
the run folders by polling every :data:`POLL_S` seconds."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pairrepro.launch.spec import RunSpec
from pairrepro.runs import DamagedRunError, RunFolder

POLL_S = 1.0


@dataclass
class LiveRow:
    """What the live table shows of one run, read from its run folder (polling)."""

    spec: RunSpec
    status: str = "queued"
    started: float = 0.0
    first_epoch: int | None = None  # epochs already done when this launch started it
    epoch: int = 0
    dev: float | None = None
    eta_s: float | None = None

    def poll(self, runs_dir: Path) -> None:
        folder = RunFolder.of(runs_dir, self.spec.recipe, self.spec.seed)
        try:
            history = folder.read_metrics()
        except DamagedRunError:
            return
        if history:
            last = history[-1]
            self.epoch = int(last.get("epoch", 0))
            dev = last.get("dev", {})
            value = dev.get(self.spec.select_metric) if isinstance(dev, dict) else None
            self.dev = float(value) if isinstance(value, int | float) else None
        if self.first_epoch is None:
            self.first_epoch = self.epoch
        done_here = self.epoch - self.first_epoch
        if done_here > 0 and self.spec.epochs:
            per_epoch = (time.monotonic() - self.started) / done_here
            self.eta_s = per_epoch * max(0, self.spec.epochs - self.epoch)


def _fmt_eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else (
        f"{seconds // 60}m{seconds % 60:02d}s")


def live_table(rows: list[LiveRow], title: str) -> Any:
    """The rich table of every run: recipe, seed, status, epoch, dev metric, ETA."""
    from rich.table import Table

    table = Table(title=title)
    for name in ("recipe", "seed", "status", "epoch", "dev", "ETA"):
        table.add_column(name, justify="right" if name in ("seed", "epoch", "dev") else "left")
    colour = {"finished": "green", "failed": "red", "interrupted": "yellow"}
    for row in rows:
        spec = row.spec
        epochs = f"{row.epoch}/{spec.epochs}" if spec.epochs else str(row.epoch)
        dev = f"{spec.select_metric} {row.dev:.4f}" if row.dev is not None else ""
        status = row.status.split(" ")[0]
        shown = f"[{colour[status]}]{row.status}[/]" if status in colour else row.status
        table.add_row(spec.recipe, str(spec.seed), shown, epochs, dev,
                      _fmt_eta(row.eta_s) if row.status == "running" else "")
    return table


@contextlib.contextmanager
def display(rows: list[LiveRow], title: str, live: bool) -> Iterator[Callable[[], None]]:
    """A rich Live display of ``rows`` on stderr (no-op unless ``live``); yields a redraw."""
    if not live:
        yield lambda: None
        return
    from rich.live import Live

    from pairrepro.console import get_err_console

    with Live(live_table(rows, title), console=get_err_console(), refresh_per_second=2,
              transient=False) as display:
        yield lambda: display.update(live_table(rows, title))


