"""Reference runs: adding a finished run to ``results/`` and checking a user's run against
the reference run of the same recipe and seed (``pairrepro results add``,
``pairrepro verify``). Files are compared; no model is loaded.

``verify`` checks, in order:

1. **data**: the sha256 of every prepared file the two runs recorded (``prepared_sha256``);
2. **config**: the resolved configs, key by key
   (:func:`pairrepro.train.run_folder.config_differences`: device and threads do not count);
3. **metrics**: every metric of every split bit-equal; when they are not, and the two runs were
   made on the same device, torch build and thread count, that is a difference (a
   deterministic run repeats exactly there); elsewhere each test metric with per-unit values
   must lie inside the reference run's 95% bootstrap interval
   (:mod:`pairrepro.report.evidence`).

Verdicts: ``same`` (same data and config, metrics bit-equal), ``consistent`` (same data and
config, another device/build/thread count, every test metric inside the reference interval),
``different data``, ``variant`` (config keys differ), ``different`` (metrics), ``no reference``.
The first two exit 0; ``no reference`` for every run exits 7; any other exits 9
(:class:`~pairrepro.errors.VerificationError`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import ConfigError
from pairrepro.report import evidence
from pairrepro.train.run_folder import (
    RunFolder,
    RunInfo,
    check_name,
    config_differences,
    copy_compact,
    read_run,
)

SAME = "same"
CONSISTENT = "consistent"
DIFFERENT_DATA = "different data"
VARIANT = "variant"
DIFFERENT = "different"
NO_REFERENCE = "no reference"
NOT_FINISHED = "not finished"
PASSING = (SAME, CONSISTENT)


@dataclass
class Verification:
    """The checks of one run against its reference and the verdict."""

    run: str
    reference: str
    verdict: str
    checks: dict[str, str] = field(default_factory=dict)  # data / config / metrics -> text

    @property
    def ok(self) -> bool:
        return self.verdict in PASSING

    def line(self) -> str:
        """The one verdict line."""
        why = "; ".join(f"{name}: {text}" for name, text in self.checks.items())
        return f"{self.verdict}: {self.run} vs {self.reference or '(none)'}" + (
            f" ({why})" if why else "")


def _environment(run: RunInfo) -> tuple[Any, Any, Any]:
    m = run.manifest
    return m.get("device"), m.get("torch"), m.get("cpu_threads")


def _flat_metrics(run: RunInfo) -> dict[str, float]:
    return {f"{split}.{name}": value for split, values in run.metrics.items()
            for name, value in values.items()}


def _interval_check(run: RunInfo, ref: RunInfo) -> tuple[bool, str]:
    """Every test metric with per-unit values inside the reference's interval?"""
    outside, inside, skipped = [], [], []
    for name in sorted(ref.metrics.get("test", {})):
        metric = f"test.{name}"
        value = run.value(metric)
        try:
            ci = evidence.interval(evidence.run_units([ref], metric))
        except ValueError:
            skipped.append(name)
            continue
        if value is None or not ci.contains(value):
            outside.append(f"{name} {value} outside [{ci.low:.4f}, {ci.high:.4f}]")
        else:
            inside.append(f"{name} {value:.4f} in [{ci.low:.4f}, {ci.high:.4f}]")
    if not inside and not outside:
        return False, "no test metric has per-unit values in the reference to compare with"
    if outside:
        return False, "; ".join(outside)
    return True, "within the reference's 95% interval: " + ", ".join(inside)


def verify_run(run_dir: Path, results_dir: Path | None = None) -> Verification:
    """Compare the run in ``run_dir`` with ``results/<recipe>/seed-<n>``."""
    results_dir = results_dir or paths.results_dir()
    run = read_run(run_dir)
    if run.status != "finished":
        return Verification(str(run_dir), "", NOT_FINISHED,
                            {"run": run.problem or f"status {run.status}"})
    ref_dir = results_dir / run.recipe / f"seed-{run.seed}"
    ref = read_run(ref_dir)
    if ref.status != "finished":
        return Verification(run.path, str(ref_dir), NO_REFERENCE,
                            {"reference": ref.problem or "none committed for this recipe "
                                                         "and seed"})
    out = Verification(run.path, ref.path, SAME)
    sha_run = run.manifest.get("prepared_sha256") or {}
    sha_ref = ref.manifest.get("prepared_sha256") or {}
    files = sorted(f for f in set(sha_run) | set(sha_ref) if sha_run.get(f) != sha_ref.get(f))
    out.checks["data"] = ("different prepared files: " + ", ".join(files)) if files else (
        f"same prepared data ({len(sha_ref)} files, sha256)")
    diffs = config_differences(run.config, ref.config)
    out.checks["config"] = ("differs in " + ", ".join(
        f"{k} ({a!r} vs reference {b!r})" for k, (a, b) in diffs.items())
        if diffs else "same resolved config")
    mine, theirs = _flat_metrics(run), _flat_metrics(ref)
    same_env = _environment(run) == _environment(ref)
    env = "device {}, torch {}, {} thread(s)".format(*_environment(ref))
    if mine == theirs:
        out.checks["metrics"] = f"bit-equal ({len(theirs)} values)"
        metrics_ok, bit_equal = True, True
    elif same_env:
        changed = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        out.checks["metrics"] = (f"not bit-equal on the same {env}: "
                                 + ", ".join(f"{k} {mine.get(k)} vs {theirs.get(k)}"
                                             for k in changed))
        metrics_ok, bit_equal = False, False
    else:
        metrics_ok, text = _interval_check(run, ref)
        out.checks["metrics"] = f"{text} (reference made on {env})"
        bit_equal = False
    if files:
        out.verdict = DIFFERENT_DATA
    elif diffs:
        out.verdict = VARIANT
    elif not metrics_ok:
        out.verdict = DIFFERENT
    else:
        out.verdict = SAME if bit_equal else CONSISTENT
    return out


def add_reference(run_dir: Path, results_dir: Path | None = None, force: bool = False,
                  recipes_dir: Path | None = None) -> tuple[RunFolder, list[Path]]:
    """Copy the finished run in ``run_dir`` to ``results/<recipe>/seed-<n>/`` compactly
    (:func:`pairrepro.train.run_folder.copy_compact`: no checkpoints, dev/test predictions
    as ids, label and score). Only a run of the recipe itself can be a reference: a variant
    (config keys differing from ``recipes/<recipe>.toml``) is a ConfigError naming them."""
    from pairrepro.config import load_recipe

    results_dir = results_dir or paths.results_dir()
    run = read_run(run_dir)
    if run.status != "finished":
        raise ConfigError(f"{run_dir}: only a finished run can be a reference run "
                          f"(status {run.status}{': ' + run.problem if run.problem else ''})",
                          hint="finish it first (pairrepro train RECIPE --resume)")
    check_name(run.recipe, "recipe", str(run_dir))
    recipe_path = (recipes_dir or paths.recipes_dir()) / f"{run.recipe}.toml"
    diffs = config_differences(run.config, tomllib.loads(load_recipe(recipe_path).to_toml()))
    if diffs:
        raise ConfigError(f"{run_dir} is a variant of {recipe_path}, not its run: "
                          + ", ".join(f"{k} = {a!r} (recipe {b!r})"
                                      for k, (a, b) in diffs.items()),
                          hint="train the recipe as it is, or make the change a recipe")
    dest = RunFolder.of(results_dir, run.recipe, run.seed)
    if dest.exists() and not force:
        raise ConfigError(f"{dest.path} already holds a reference run",
                          hint="pass --force to replace it")
    return dest, copy_compact(RunFolder(Path(run_dir)), dest)
