"""One training run of a launch (:class:`RunSpec`), how it ended (:class:`RunOutcome`),
and training it in this process (:func:`run_inline`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    """One :class:`RunSpec` per seed of a loaded recipe."""
    return [RunSpec(recipe.name, str(recipe.source), seed, recipe.train.epochs,
                    recipe.select_metric) for seed in seeds]

