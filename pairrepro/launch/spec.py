"""One training run of a launch (:class:`RunSpec`), how it ended (:class:`RunOutcome`),
training it in this process (:func:`run_inline`), and the live table of a launch
(:class:`LiveRow`, :func:`display`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.live import Live
from rich.table import Table

from pairrepro.console import get_err_console
from pairrepro.errors import PairreproError
from pairrepro.runs import DamagedRunError, RunFolder

LAUNCHERS = ("local", "slurm", "submitit-local")


@dataclass(frozen=True)
class RunSpec:
    """One training run: seed ``seed`` of the recipe ``recipe`` (file ``source``)."""

    recipe: str
    source: str
    seed: int
    epochs: int = 0  # the recipe's [train] epochs, for the live table's progress and ETA
    select_metric: str = ""

    @property
    def label(self) -> str:
        return f"{self.recipe} seed {self.seed}"


def continues(spec: RunSpec, runs_dir: Path) -> bool:
    """Whether ``spec`` has a run in ``runs_dir`` to continue with ``--resume``."""
    return RunFolder.of(runs_dir, spec.recipe, spec.seed).exists()


@dataclass
class RunOutcome:
    """How one run ended: ``finished``, ``failed``, ``interrupted``, ``not started`` or
    ``submitted``."""

    spec: RunSpec
    status: str
    exit_code: int = 0
    reason: str = ""
    log: str = ""
    job_id: str = ""


Notify = Callable[[str, str], None]


def silent(_kind: str, _message: str) -> None:
    """A :data:`Notify` that says nothing."""


def run_inline(spec: RunSpec, runs_dir: Path, device: str | None = None,
               quiet: bool = False) -> RunOutcome:
    """Train ``spec`` in this process; errors become a failed outcome, Ctrl-C propagates."""
    from pairrepro.train import runner

    try:
        runner.train_recipe(spec.source, [], [spec.seed], resume=continues(spec, runs_dir),
                            device=device, quiet=quiet, runs_dir=runs_dir)
    except PairreproError as exc:
        return RunOutcome(spec, "failed", exc.exit_code, exc.message)
    return RunOutcome(spec, "finished")


def failed_reason(spec: RunSpec, runs_dir: Path, log: Path) -> str:
    """Why a run failed: its result.json ``error``, else the last ``error:`` line of its log."""
    with contextlib.suppress(DamagedRunError):
        error = RunFolder.of(runs_dir, spec.recipe, spec.seed).read_result().get("error")
        if error:
            return str(error).splitlines()[0]
    with contextlib.suppress(OSError):
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
        errors = [line for line in lines if line.startswith("error:")]
        if errors:
            return errors[-1].removeprefix("error:").strip()
        if lines:
            return lines[-1][:200]
    return "no error recorded"


def summary_lines(outcomes: list[RunOutcome]) -> list[str]:
    """One line per run that did not finish: recipe, seed, status, exit code and reason."""
    return [f"{o.spec.label}: {o.status} (exit {o.exit_code}): {o.reason}"
            + (f" [log {o.log}]" if o.log else "")
            for o in outcomes if o.status not in ("finished", "submitted")]


def specs_of(recipe: Any, seeds: list[int]) -> list[RunSpec]:
    return [RunSpec(recipe.name, str(recipe.source), seed, recipe.train.epochs,
                    recipe.select_metric) for seed in seeds]


@dataclass
class LiveRow:
    """What the live table shows of one run, read from its run folder every ``POLL_S``
    seconds."""

    POLL_S: ClassVar[float] = 1.0
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


def live_table(rows: list[LiveRow], title: str) -> Table:
    """The rich table of every run: recipe, seed, status, epoch, dev metric, ETA."""
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
    with Live(live_table(rows, title), console=get_err_console(), refresh_per_second=2,
              transient=False) as display:
        yield lambda: display.update(live_table(rows, title))


