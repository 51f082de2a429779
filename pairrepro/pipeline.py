"""Fetch, prepare and train what paper tables need (``pairrepro reproduce``): data once per
(dataset, variant), then every run still to train; a failure goes to :attr:`Outcome.failed`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro.data.prepared import data_status
from pairrepro.errors import ConfigError, PairreproError
from pairrepro.launch.spec import LAUNCHERS, Notify, RunOutcome, RunSpec, specs_of
from pairrepro.planning.paper_tables import Paper, PaperTable
from pairrepro.planning.plan import done_seeds
from pairrepro.planning.recipe_index import RecipeIndex, load_recipe_index, table_recipes


@dataclass
class Outcome:
    """What :func:`run_tables` did: recipes trained, why others could not, runs' outcomes."""

    ran: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    runs: list[RunOutcome] = field(default_factory=list)

    @property
    def failed_runs(self) -> list[RunOutcome]:
        """The launched runs that did not finish (failed or interrupted)."""
        return [r for r in self.runs if r.status in ("failed", "interrupted")]


@dataclass
class Launch:
    """How to run the trainings: ``jobs`` at a time with ``threads`` each, or on Slurm."""

    launcher: str = "local"
    jobs: int = 1
    threads: int | None = None
    slurm_file: dict[str, Any] = field(default_factory=dict)
    wait: bool = True


def run_tables(selected: list[tuple[Paper, PaperTable]], runs_dir: Path,
               seeds: list[int] | None, device: str | None, mirror: Path | None,
               comparisons: bool, progress: bool, notify: Notify, launch: Launch) -> Outcome:
    """Fetch, prepare and train ``selected`` into ``runs_dir``; ``notify(kind, message)`` hears
    each step. Ctrl-C comes out as ``KeyboardInterrupt`` once the running trainings checkpointed."""
    from pairrepro.data.fetch import fetch_dataset
    from pairrepro.data.preprocess import prepare_dataset

    if launch.launcher not in LAUNCHERS:
        raise ConfigError(f"--launcher {launch.launcher!r}: choose one of "
                          f"{', '.join(LAUNCHERS)}")
    index = load_recipe_index()
    names = sorted({n for p, t in selected for n in table_recipes(p, t, index, comparisons)})
    outcome = Outcome()
    prepared: dict[tuple[str, str], str] = {}  # (dataset, variant) -> "" ok or the error
    specs: list[RunSpec] = []
    for name in names:
        recipe = index.recipes[name]
        key = (recipe.data.dataset, recipe.data.variant)
        if key not in prepared:
            prepared[key] = ""
            if not data_status(*key)[0]:  # (ready, why not)
                try:
                    fetch_dataset(key[0], mirror=mirror, progress=progress)
                    prepare_dataset(key[0], variant=key[1] or None, progress=progress)
                except PairreproError as exc:
                    prepared[key] = exc.message
        if prepared[key]:
            outcome.failed[name] = f"data: {prepared[key]}"
            continue
        done = done_seeds(runs_dir, recipe)
        specs += specs_of(recipe, [s for s in (seeds or recipe.seeds) if s not in done])
    outcome.runs = _launch(specs, runs_dir, device, progress, index, notify, launch)
    for name in (n for n in names if n not in outcome.failed):
        lost = [r for r in outcome.failed_runs if r.spec.recipe == name]
        if lost:
            outcome.failed[name] = "; ".join(f"seed {r.spec.seed}: {r.reason}" for r in lost)
        else:
            outcome.ran.append(name)
    return outcome


def _launch(specs: list[RunSpec], runs_dir: Path, device: str | None, progress: bool,
            index: RecipeIndex, notify: Notify, launch: Launch) -> list[RunOutcome]:
    from pairrepro.launch import local, slurm

    if not specs:
        return []
    if launch.launcher == "local":
        return local.run_local(specs, runs_dir, launch.jobs, device, launch.threads,
                               live=progress, quiet=not progress, notify=notify)
    settings = {name: slurm.slurm_settings(index.recipes[name], device, launch.slurm_file)
                for name in dict.fromkeys(s.recipe for s in specs)}
    cluster = "local" if launch.launcher == "submitit-local" else "slurm"
    submitted = slurm.submit_slurm(specs, runs_dir, settings, device, cluster, notify,
                                   launch.jobs)
    if not launch.wait:
        return [RunOutcome(spec, "submitted", job_id=str(job.job_id),
                           log=str(job.paths.stdout)) for spec, job in submitted]
    return slurm.wait_slurm(submitted, runs_dir, live=progress, notify=notify)
