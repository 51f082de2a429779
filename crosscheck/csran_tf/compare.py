"""Print the cross-check's results (pairrepro's Python, no TensorFlow): each seed of
``results/``, their mean, and test MAP / MRR against pairrepro's reference runs
``results/csran_trecqa`` with the report's own intervals, paired tests and equivalence test
(queries x seeds, both random; the margin is the gap ladder's, csran_trecqa.toml).
README.md's Results section is this output; tests/test_crosscheck_csran_tf.py checks that.

    PYTHONPATH=. python crosscheck/csran_tf/compare.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from pairrepro import paths
from pairrepro.report.analyses.comparison import equivalence
from pairrepro.report.analyses.evidence import interval, run_units
from pairrepro.report.analyses.ladders import load_ladder
from pairrepro.report.tables.numbers import format_interval
from pairrepro.runs import RunInfo, find_runs

HERE = Path(__file__).resolve().parent
REFERENCE = "csran_trecqa"
COLUMNS = [("dev", "map"), ("dev", "mrr"), ("test", "map"), ("test", "mrr")]
STEP = 0.001  # the printed digits


def _text(found: object, signed: bool = False) -> str:
    return format_interval(found, (lambda v: f"{v:+.3f}") if signed else (lambda v: f"{v:.3f}"))


def crosscheck_runs() -> list[RunInfo]:
    """The finished seeds of ``results/``."""
    return [run for run in find_runs(HERE, "results") if run.status == "finished"]


def seed_table(runs: list[RunInfo]) -> list[str]:
    lines = ["| seed | chosen epoch | dev MAP | dev MRR | test MAP | test MRR | train pairs/s | "
             "wall time |", "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        values = [f"{run.metrics[s][m]:.3f}" for s, m in COLUMNS]
        lines.append(f"| {run.seed} | {run.chosen_epoch} | {' | '.join(values)} | "
                     f"{run.manifest['pairs_per_s']:.0f} | "
                     f"{run.manifest['wall_time_s'] / 60:.0f} min |")
    means = [f"{np.mean([r.metrics[s][m] for r in runs]):.3f}" for s, m in COLUMNS]
    lines.append(f"| mean | | {' | '.join(means)} | | |")
    return lines


def against_reference(runs: list[RunInfo]) -> list[str]:
    reference = find_runs(paths.PROJECT_DIR / "results", REFERENCE)
    margin = next(c.margin for c in load_ladder(REFERENCE).crosschecks)
    lines = []
    for metric in ("test.map", "test.mrr"):
        ours, theirs = run_units(runs, metric), run_units(reference, metric)
        a, b = interval(ours, step=STEP), interval(theirs, step=STEP)
        found = equivalence(ours, theirs, margin, STEP)
        lines.append(
            f"* {metric}: authors' code {a.value:.3f} {_text(a)}, pairrepro `{REFERENCE}` "
            f"{b.value:.3f} {_text(b)}; difference {found.difference.value:+.3f} "
            f"{_text(found.difference, True)}, two-level bootstrap p = "
            f"{found.difference.p_value:.3f}; equivalence within ±{margin:.3f}: "
            f"{found.verdict} (90% interval {_text(found.tost, True)}); the design detects "
            f"about ±{found.detectable:.3f} ({a.units} queries, seeds "
            f"{', '.join(map(str, ours.seeds))} against {', '.join(map(str, theirs.seeds))})")
    return lines


def table() -> str:
    """The Results section's text."""
    runs = crosscheck_runs()
    return "\n".join([*seed_table(runs), "", *against_reference(runs)]) + "\n"


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    print(table(), end="")
