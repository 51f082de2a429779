"""The real-text smoke tests (recipes ``<model>_<dataset>_smoke``): each model's test accuracy
against the majority class of the same training split (``majority_<dataset>_smoke``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pairrepro import paths
from pairrepro.errors import NoEvidenceError
from pairrepro.report.analyses.comparison import Comparison, adjust, compare, holm_text, test_words
from pairrepro.report.analyses.evidence import difference_interval, interval, run_units
from pairrepro.report.tables import numbers
from pairrepro.runs import RunInfo, find_runs
from pairrepro.stats import ALPHA, Interval

DATASETS = ("snli", "quora")
METRIC = "test.accuracy"
BASELINE = "majority"
STEP = 0.001  # the printed digits


@dataclass(frozen=True)
class SmokeRow:
    recipe: str
    dataset: str
    seeds: int
    accuracy: Interval
    majority: float
    difference: Interval
    versus: Comparison  # against the majority class, Holm-adjusted over the dataset's rows

    @property
    def beats_majority(self) -> bool:
        holm_p = self.versus.holm
        return (holm_p is not None and holm_p < ALPHA and not self.versus.undecided
                and self.difference.low > 0)


def smoke_rows(results: Path) -> list[SmokeRow]:
    """A row per smoke recipe whose runs and majority-class runs have finished."""
    rows: list[SmokeRow] = []
    for dataset in DATASETS:
        baseline = _finished(results, f"{BASELINE}_{dataset}_smoke")
        if not baseline:
            continue
        base = run_units(baseline, METRIC)
        found = []
        suffix = f"_{dataset}_smoke"  # every smoke recipe of the dataset but the baseline
        for recipe in sorted(p.stem for p in paths.recipes_dir().glob(f"*{suffix}.toml")
                             if p.stem != f"{BASELINE}{suffix}"):
            if runs := _finished(results, recipe):
                units = run_units(runs, METRIC)
                found.append(SmokeRow(recipe, dataset, len(units.seeds),
                                      interval(units, step=STEP), float(base.values.mean()),
                                      difference_interval(units, base, step=STEP),
                                      compare(units, base)))
        adjust([row.versus for row in found])
        rows += found
    return rows


def _finished(results: Path, recipe: str) -> list[RunInfo]:
    return [run for run in find_runs(results, recipe) if run.status == "finished"]


def smoke_markdown(results: Path) -> str:
    try:
        rows = smoke_rows(results)
    except NoEvidenceError as exc:
        return f"No smoke-test table: {exc.message}\n"
    if not rows:
        return "No smoke-test runs yet (recipes/*_snli_smoke.toml, *_quora_smoke.toml).\n"
    lines = numbers.markdown_table(
        ["data (dev -> test)", "recipe", "seeds", "test accuracy [95%]", "majority class",
         "difference [95%]", "p", "Holm p", "beats majority"],
        ([row.dataset, row.recipe, str(row.seeds), f"{row.accuracy.value:.3f} "
          + numbers.format_interval(row.accuracy, "{:.3f}".format), f"{row.majority:.3f}",
          f"{row.difference.value:+.3f} "
          + numbers.format_interval(row.difference, "{:+.3f}".format),
          numbers.p_text(row.versus.p_value or 1.0).removeprefix("p "), holm_text(row.versus),
          "yes" if row.beats_majority else "no"] for row in rows))
    lines.append(f"\nSmoke tests of the real-text path, not paper numbers: each model trained on "
                 f"the dev file and tested on the test file. p: against the majority class, "
                 f"{test_words('test pairs')}; Holm over a dataset's models; 'beats' needs "
                 f"Holm p < {ALPHA}, not undecided at that level, and the difference's "
                 f"interval above 0." + (f" {numbers.MOVING_NOTE}." if any(
                     numbers.MOVING in line for line in lines[2:]) else ""))
    return "\n".join(lines) + "\n"
