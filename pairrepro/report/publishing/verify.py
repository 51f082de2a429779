"""``pairrepro results add`` (a finished run into ``results/``) and ``pairrepro verify`` (a run
against its reference run, files only; docs/results.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import ConfigError, NoEvidenceError
from pairrepro.report.analyses import evidence
from pairrepro.report.publishing import release
from pairrepro.report.tables.numbers import format_interval
from pairrepro.runs import (
    DamagedRunError,
    RunFolder,
    RunInfo,
    check_name,
    config_differences,
    copy_compact,
    flatten_config,
    put_back_aside,
    read_predictions,
    read_run,
)

SAME = "same"
CONSISTENT = "consistent"
DIFFERENT_DATA = "different data"
VARIANT = "variant"
DIFFERENT = "different"
NO_REFERENCE = "no reference"
REFERENCE_DAMAGED = "reference damaged"
NOT_FINISHED = "not finished"
PASSING = (SAME, CONSISTENT)
VERIFY_STEP = 1e-4  # verify prints metrics and their intervals at 4 decimals


@dataclass
class Verification:
    run: str
    reference: str
    verdict: str
    checks: dict[str, str] = field(default_factory=dict)  # data / config / metrics -> text

    @property
    def ok(self) -> bool:
        return self.verdict in PASSING

    def line(self) -> str:
        why = "; ".join(f"{name}: {text}" for name, text in self.checks.items())
        return f"{self.verdict}: {self.run} vs {self.reference or '(none)'}" + (
            f" ({why})" if why else "")


# what must match for a bit-equality claim (manifest keys; "cpu" is the CPU fingerprint)
ENVIRONMENT = ("device", "torch", "cpu_threads", "precision", "cpu")
# metrics that count things: equal on the same data, whatever the environment
COUNTS = ("num_queries", "skipped_queries")


def _environment(run: RunInfo, ref: RunInfo) -> tuple[bool, str]:
    """(same environment?, what differs or is unknown, in words)."""
    differ, unknown = [], []
    for key in ENVIRONMENT:
        mine, theirs = run.manifest.get(key), ref.manifest.get(key)
        if mine is None or theirs is None:
            unknown.append(key)
        elif mine != theirs:
            differ.append(f"{key} {_short(mine)} vs reference {_short(theirs)}")
    if run.manifest.get("compiled") or ref.manifest.get("compiled"):  # not bit-repeatable
        differ.append("compiled with torch.compile")
    words = differ + ([f"unknown {', '.join(unknown)}"] if unknown else [])
    return not words, "; ".join(words)


def _short(value: Any) -> str:
    if isinstance(value, dict):  # the CPU fingerprint: its model and capability say enough
        return f"{value.get('model', '?')} ({value.get('capability', '?')})"
    return str(value)


def _check_metric(run: RunInfo, ref: RunInfo, metric: str) -> tuple[str, str]:
    """("inside" | "outside" | "unchecked", the words) for one metric."""
    value = run.value(metric)
    if metric.split(".", 1)[1] in COUNTS:
        same = value == ref.value(metric)
        return ("inside" if same else "outside",
                f"{metric} {value} {'=' if same else '!='} {ref.value(metric)}")
    try:
        ci = evidence.metric_interval([ref], metric, () if value is None else (value,),
                                      step=VERIFY_STEP)
    except NoEvidenceError as exc:
        return "unchecked", f"{metric} ({exc})"
    bounds = format_interval(ci, lambda end: f"{end:.4f}")
    if value is not None and ci.straddles(value):
        return "unchecked", (f"{metric} {value:.4f} at the edge of {bounds} within its "
                             "Monte-Carlo error")
    if value is None or not ci.contains(value):
        return "outside", f"{metric} {value} outside {bounds}"
    return "inside", f"{metric} {value:.4f} in {bounds}"


def _interval_check(run: RunInfo, ref: RunInfo) -> tuple[bool, str]:
    """Every dev/test metric of the reference against its interval (a count: equal)."""
    found: dict[str, list[str]] = {"inside": [], "outside": [], "unchecked": []}
    splits = [s for s in sorted(ref.metrics) if read_predictions(ref.folder, s) is not None]
    for split in splits:
        for name in sorted(ref.metrics[split]):
            kind, text = _check_metric(run, ref, f"{split}.{name}")
            found[kind].append(text)
    skipped = sorted(set(ref.metrics) - set(splits))
    parts = [f"{what}: {'; '.join(found[kind])}" for kind, what in (
        ("outside", "outside the reference's 95% interval"), ("unchecked", "cannot be checked"))
        if found[kind]]
    if not found["inside"] and not parts:
        parts.append("no dev or test metric with saved predictions in the reference")
    ok = not parts
    if found["inside"]:
        parts.append("within the reference's 95% interval (counts equal): "
                     + ", ".join(found["inside"]))
    if skipped:
        parts.append(f"not checked: {', '.join(skipped)} (the reference keeps no "
                     "predictions of it)")
    return ok, "; ".join(parts)


def _whole_run(run_dir: Path) -> RunInfo:
    """The run in ``run_dir``; a DamagedRunError when a file is missing or unreadable."""
    run = read_run(run_dir)
    if run.status == "damaged":  # a reference must be whole: runs.read_run says what it lacks
        raise DamagedRunError(f"{run_dir} cannot be a reference run: {run.problem}",
                              hint="retrain it (pairrepro train RECIPE --seeds N --force), "
                                   "then add it")
    return run


def verify_run(run_dir: Path, results_dir: Path | None = None) -> Verification:
    """Compare the run in ``run_dir`` with ``results/<recipe>/seed-<n>``."""
    results_dir = results_dir or paths.results_dir()
    run = _whole_run(run_dir)
    if run.status != "finished":
        return Verification(str(run_dir), "", NOT_FINISHED,
                            {"run": run.problem or f"status {run.status}"})
    ref_dir = results_dir / run.recipe / f"seed-{run.seed}"
    ref = read_run(ref_dir)
    if ref.status == "damaged":  # e.g. a split's predictions gone: nothing to check against
        return Verification(run.path, ref.path, REFERENCE_DAMAGED, {"reference": ref.problem})
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
    try:
        evidence.check_recorded(ref)
    except DamagedRunError as exc:
        out.verdict, out.checks["reference"] = REFERENCE_DAMAGED, exc.message
        return out
    ok, out.checks["metrics"], bit_equal = _metrics_check(run, ref)
    out.verdict = (DIFFERENT_DATA if files else VARIANT if diffs else DIFFERENT if not ok
                   else SAME if bit_equal else CONSISTENT)
    return out


def _metrics_check(run: RunInfo, ref: RunInfo) -> tuple[bool, str, bool]:
    """(metrics pass?, the words, a bit-equality claim in the same environment?)."""
    mine, theirs = flatten_config(run.metrics), flatten_config(ref.metrics)
    same_env, env = _environment(run, ref)
    if mine == theirs and same_env:
        return True, f"bit-equal ({len(theirs)} values) in the same environment", True
    if same_env:
        changed = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        return False, ("not bit-equal in the same environment: " + ", ".join(
            f"{k} {mine.get(k)} vs {theirs.get(k)}" for k in changed)), False
    ok, text = _interval_check(run, ref)
    equal = f"bit-equal ({len(theirs)} values), but " if mine == theirs else ""
    return ok, f"{text} ({equal}environment: {env})", False


def add_reference(run_dir: Path, results_dir: Path | None = None, force: bool = False,
                  recipes_dir: Path | None = None, preflight_dir: Path | None = None
                  ) -> tuple[RunFolder, list[Path]]:
    """Copy the finished run in ``run_dir`` to ``results/<recipe>/seed-<n>/`` compactly; a
    damaged run is a DamagedRunError, a variant, dirty or unpreflighted one a ConfigError."""
    from pairrepro.config import load_recipe
    from pairrepro.planning.preflight_record import preflight_problem

    results_dir = results_dir or paths.results_dir()
    run = _whole_run(run_dir)
    if run.status != "finished":
        raise ConfigError(f"{run_dir}: only a finished run can be a reference run "
                          f"(status {run.status}{': ' + run.problem if run.problem else ''})",
                          hint="finish it first (pairrepro train RECIPE --resume)")
    check_name(run.recipe, "recipe", str(run_dir))
    git = run.manifest.get("git") if isinstance(run.manifest.get("git"), dict) else {}
    if git.get("dirty") is not False:
        # a reference number must come from code some commit holds
        state = "uncommitted changes" if git.get("dirty") else "no record of its git state"
        untracked = ", ".join(git.get("untracked") or [])
        raise ConfigError(f"{run_dir}/manifest.json: the run was made with {state} "
                          f"(commit {str(git.get('commit') or 'unknown')[:10]}"
                          f"{'; untracked: ' + untracked if untracked else ''}): only a run of "
                          "committed code can be a reference",
                          hint="commit the changes (git status shows them), then retrain: "
                               f"pairrepro train recipes/{run.recipe}.toml --seeds {run.seed} "
                               "--force")
    recipe_path = (recipes_dir or paths.recipes_dir()) / f"{run.recipe}.toml"
    recipe = load_recipe(recipe_path)
    if diffs := config_differences(run.config, recipe.to_dict()):
        raise ConfigError(f"{run_dir} is a variant of {recipe_path}, not its run: "
                          + ", ".join(f"{k} = {a!r} (recipe {b!r})"
                                      for k, (a, b) in diffs.items()),
                          hint="train the recipe as it is, or make the change a recipe")
    if problem := preflight_problem(run.recipe, recipe.to_dict(), preflight_dir):
        raise ConfigError(f"{run_dir}: recipe {run.recipe} has no passing preflight record of "
                          f"its config: {problem}",
                          hint=f"pairrepro preflight {run.recipe} --threads 1 --out-dir "
                               "bench/preflight (every check must pass), then add the run")
    dest = RunFolder.of(results_dir, run.recipe, run.seed)
    put_back_aside(dest)  # a reference an earlier, killed add left aside
    if dest.exists() and not force:
        raise ConfigError(f"{dest.path} already holds a reference run",
                          hint="pass --force to replace it")
    record = _replaces_record(read_run(dest.path) if dest.exists() else None, run)
    return dest, copy_compact(RunFolder(Path(run_dir)), dest,
                              {release.REPLACES_FILE: record} if record else None)


def _replaces_record(old: RunInfo | None, new: RunInfo) -> str | None:
    """``replaces.json`` for ``new`` added over ``old``: what it replaced, bit-equal or not and
    why not. The same run added again keeps the record it has, which names the run it
    replaced first."""
    if old is None or old.status != "finished":
        return None
    replaced = release.replacement(old, new)
    kept = old.folder.path / release.REPLACES_FILE
    if kept.is_file() and replaced["bit_equal"] and old.commit == new.commit:
        return kept.read_text(encoding="utf-8")
    return json.dumps(replaced, indent=2, sort_keys=True) + "\n"
