"""A release of the reference runs (``results/release.json``), written only when nothing is
pending; re-made runs keep ``replaces.json`` (docs/results.md)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pairrepro import fileio, paths
from pairrepro.errors import ConfigError
from pairrepro.report.analyses.evidence import RESTORE_RESULTS_HINT, tampered_runs
from pairrepro.runs import RunInfo, all_runs, read_predictions

RELEASE_FILE = "release.json"
NAME_PATTERN = re.compile(r"[1-9][0-9]{0,5}")  # release names: plain positive integers
REPLACES_FILE = "replaces.json"
# the code a training path runs: a change there may change a re-made run's numbers
TRAINING_CODE = ("pairrepro/models", "pairrepro/train", "pairrepro/data", "pairrepro/tasks.py",
                 "pairrepro/metrics.py", "pairrepro/config.py")


@dataclass(frozen=True)
class Remake:
    recipe: str
    seeds: tuple[int, ...]
    why: str
    hours: float  # the replaced runs' recorded wall time (made under unrecorded load)

    @property
    def command(self) -> str:
        seeds = ",".join(map(str, self.seeds))
        return f"pairrepro train {self.recipe} --seeds {seeds} --threads 1 --force"


def _hours(runs: list[RunInfo]) -> float:
    return sum(float(r.manifest.get("wall_time_s") or 0) for r in runs) / 3600


def cpu_line(manifest: dict[str, Any]) -> str:
    """The CPU a run's manifest records, in words: what a release needs to be one of, and what
    the environment section counts."""
    found = manifest.get("cpu")
    if not isinstance(found, dict):
        return "not recorded (made before manifests recorded the CPU)"
    return (f"{found.get('model')}, torch capability {found.get('capability')}, ISA "
            f"{' '.join(found.get('isa') or []) or 'none of note'}")


def _torch(manifest: dict[str, Any]) -> str:
    return str(manifest.get("torch") or "not recorded")


def _most_common(values: list[str]) -> str:
    return Counter(values).most_common(1)[0][0] if values else ""


def pending(results_dir: Path | None = None, runs: list[RunInfo] | None = None
            ) -> list[Remake]:
    """What must be re-made before a release: recipes whose seeds span commits, runs without
    ``manifest.cpu``, or made on another CPU or torch build than most (of ``runs``, read from
    ``results_dir`` when not given)."""
    runs = all_runs(results_dir or paths.results_dir()) if runs is None else runs
    usual_cpu = _most_common([cpu_line(r.manifest) for r in runs if "cpu" in r.manifest])
    usual_torch = _most_common([_torch(r.manifest) for r in runs])
    todo = []
    by_recipe: dict[str, list[RunInfo]] = {}
    for run in runs:
        by_recipe.setdefault(run.recipe, []).append(run)
    for recipe, seeds in by_recipe.items():
        commits = {r.commit for r in seeds}
        if len(commits) > 1:
            todo.append(Remake(recipe, tuple(r.seed for r in seeds), f"seeds from {len(commits)} "
                               "commits: " + ", ".join(sorted(c[:7] for c in commits)),
                               _hours(seeds)))
            continue
        for why, odd in (("no CPU fingerprint", [r for r in seeds if "cpu" not in r.manifest]),
                         ("made on another CPU", [r for r in seeds if "cpu" in r.manifest
                                                  and cpu_line(r.manifest) != usual_cpu]),
                         (f"made with another torch build than {usual_torch}",
                          [r for r in seeds if _torch(r.manifest) != usual_torch])):
            if odd:
                todo.append(Remake(recipe, tuple(r.seed for r in odd), why, _hours(odd)))
    return todo


def _changed_training_code(old: str, new: str) -> list[str]:
    """The training-path files that differ between two commits ([] when git cannot say)."""
    try:
        out = subprocess.run(["git", "diff", "--name-only", old, new, "--", *TRAINING_CODE],
                             cwd=paths.PROJECT_DIR, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return []
    return out.stdout.split()


def _prediction_change(a: pd.DataFrame | None, b: pd.DataFrame | None) -> str:
    """How one split's saved predictions moved between two runs, in words ("" when equal)."""
    if a is None or b is None:
        return ""
    column = "score" if "score" in a.columns else "prediction"
    if column not in a.columns or column not in b.columns:
        return "other columns saved"
    if len(a) != len(b) or not a.get("pair_id", a.index).equals(b.get("pair_id", b.index)):
        return "other pairs saved"
    old, new = a[column].to_numpy(), b[column].to_numpy()
    if column == "prediction":
        moved = int((old != new).sum())
        return f"{moved} of {len(old)} labels differ" if moved else ""
    largest = float(np.abs(old.astype(np.float64) - new).max()) if len(old) else 0.0
    return f"scores move by up to {largest:.2g}" if largest else ""


def _metric_change(old: dict[str, float], new: dict[str, float]) -> str:
    """Whether one split's recorded metrics differ, and the one that moved most ("" if equal)."""
    if old == new:
        return ""
    moved = {k: abs(float(new[k]) - float(old[k])) for k in old.keys() & new.keys()
             if isinstance(old[k], int | float) and isinstance(new[k], int | float)}
    name = max(moved, key=moved.__getitem__, default=None)
    return (f"metrics differ ({name} by {moved[name]:.2g})" if name and moved[name]
            else "metrics differ (other names)")


def _differences(old: RunInfo, new: RunInfo) -> dict[str, str]:
    """Each split whose metrics or saved predictions differ between two runs, with how much."""
    found = {}
    for split in sorted(old.metrics.keys() | new.metrics.keys()):
        moved = _prediction_change(read_predictions(old.folder, split),
                                   read_predictions(new.folder, split))
        metrics = _metric_change(old.metrics.get(split, {}), new.metrics.get(split, {}))
        if metrics or moved:
            found[split] = ", ".join(filter(None, (metrics or "metrics equal", moved)))
    return found


def _changed_code_summary(files: list[str]) -> str:
    """A few changed files by name; more, counted by the training-path folder they sit in."""
    if len(files) <= 3:
        return ", ".join(files)
    per_root = Counter(next((root for root in TRAINING_CODE if f.startswith(root)), f)
                       for f in files)
    return f"{len(files)} files (" + ", ".join(f"{root} {n}" for root, n
                                               in per_root.most_common()) + ")"


def replacement(old: RunInfo, new: RunInfo) -> dict[str, Any]:
    """What re-making ``old`` as ``new`` changed: the splits that differ and by how much
    (none: bit-equal), and the known reasons."""
    differs_in = _differences(old, new)
    why = []
    if differs_in:
        if old.commit != new.commit and (changed := _changed_training_code(old.commit, new.commit)):
            why.append(f"training code changed between {old.commit[:7]} and "
                       f"{new.commit[:7]}: {_changed_code_summary(changed)}")
        for key, name in (("cpu", "CPU"), ("torch", "torch build"),
                          ("precision", "precision"), ("cpu_threads", "threads")):
            if key not in old.manifest:
                why.append(f"the replaced run does not record its {name}")
            elif old.manifest[key] != new.manifest.get(key):
                why.append(f"{name} differs")
        why = why or ["not found: same commit code path, CPU, torch, precision and threads"]
    return {"replaced_commit": old.commit, "commit": new.commit, "bit_equal": not differs_in,
            "differs_in": differs_in, "why": why}


def reasons_in_short(record: dict[str, Any]) -> list[str]:
    """A replacement record's reasons without their details (each reads "what: detail")."""
    return [why.split(": ", 1)[0] for why in record["why"]]


def run_digest(run: RunInfo) -> str:
    """sha256 over every file of a run folder, by path (result, manifest, config,
    metrics.jsonl, predictions, evals, replaces.json): what a release pins of each run."""
    root = Path(run.path)
    return hashlib.sha256("".join(f"{f.relative_to(root)} {fileio.sha256_file(f)}\n" for f in
                                  sorted(root.rglob("*")) if f.is_file()).encode()).hexdigest()


def _name(run: RunInfo) -> str:
    """A run's key in the release record: its folder, ``recipe/seed-N``."""
    return f"{Path(run.path).parent.name}/{Path(run.path).name}"


@dataclass(frozen=True)
class Release:
    """``results/release.json``."""

    name: str
    commit: str
    date: str
    cpu: str
    torch: str
    runs: dict[str, str]  # run -> run_digest
    remade: dict[str, dict[str, Any]]  # run -> its replacement record

    @property
    def not_bit_equal(self) -> list[str]:
        return [run for run, rec in self.remade.items() if not rec["bit_equal"]]

    def drift(self, runs: list[RunInfo]) -> dict[str, list[str]]:
        """The runs added, removed or changed since this release was written, by how (empty
        while it still describes ``runs``)."""
        now = {_name(r): run_digest(r) for r in runs}
        found = {"added": sorted(now.keys() - self.runs.keys()),
                 "removed": sorted(self.runs.keys() - now.keys()),
                 "changed": sorted(k for k in now.keys() & self.runs.keys()
                                   if now[k] != self.runs[k])}
        return {how: names for how, names in found.items() if names}


def make_release(name: str, date: str, results_dir: Path | None = None) -> Release:
    """The release of ``results/`` as it is; a ConfigError while anything is pending or a
    run is damaged (a file missing, or ``result.json`` not what its predictions give)."""
    results_dir = results_dir or paths.results_dir()
    runs = all_runs(results_dir)
    if todo := pending(runs=runs):
        raise ConfigError(f"{results_dir}: {len(todo)} recipe(s) must be re-made before a "
                          "release: " + ", ".join(r.recipe for r in todo),
                          hint="pairrepro results release lists them with commands")
    if damaged := tampered_runs(results_dir):
        raise ConfigError(f"{results_dir}: no release of damaged runs: " + "; ".join(damaged),
                          hint=RESTORE_RESULTS_HINT)
    remade = {_name(run): json.loads(path.read_text("utf-8"))
              for run in runs if (path := Path(run.path) / REPLACES_FILE).is_file()}
    commits = {rec["commit"] for rec in remade.values()}
    if len(commits) > 1:
        raise ConfigError(f"{results_dir}: the re-made runs come from {len(commits)} commits ("
                          + ", ".join(sorted(c[:7] for c in commits)) + "), a release from one",
                          hint="re-make the others at one clean commit")
    # no run re-made: the commit most runs come from
    commit = next(iter(commits), Counter(r.commit for r in runs).most_common(1)[0][0])
    # one CPU and torch build: pending() has every run on those most runs record
    return Release(name=name, commit=commit, date=date, cpu=cpu_line(runs[0].manifest),
                   torch=_torch(runs[0].manifest),
                   runs={_name(r): run_digest(r) for r in runs}, remade=remade)


def write_release(release: Release, results_dir: Path | None = None) -> Path:
    path = (results_dir or paths.results_dir()) / RELEASE_FILE
    fileio.write_text(path, json.dumps(asdict(release), indent=2, sort_keys=True) + "\n")
    return path


def check_name(name: str, written: Release | None, runs: list[RunInfo]) -> bool:
    """Whether ``name`` is the written release's, which still describes ``runs``; a ConfigError
    unless a release may be written under it: a plain positive integer above the written's."""
    next_name = f"--name {int(written.name) + 1 if written else 1}"
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"--name {name[:40]!r}: a release is named by a positive integer "
                          "(digits 0-9 only, no sign, space or leading zero)", hint=next_name)
    if written and int(name) <= int(written.name):
        if name == written.name and not written.drift(runs):
            return True
        raise ConfigError(f"--name {name}: release {written.name} is written already; a "
                          "release never takes its name, or a lower one, again", hint=next_name)
    return False


def read_release(results_dir: Path | None = None) -> Release | None:
    path = (results_dir or paths.results_dir()) / RELEASE_FILE
    if not path.is_file():
        return None
    try:
        release = Release(**json.loads(path.read_text(encoding="utf-8")))
        if not isinstance(release.runs, dict) or not NAME_PATTERN.fullmatch(release.name):
            raise TypeError("'runs' must map each run to its digest; 'name' is an integer")
        return release
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}: not a release record ({exc})",
                          hint=f"restore it as committed (git checkout -- {path}), or delete "
                               f"it (rm {path}) and write the release again") from None
