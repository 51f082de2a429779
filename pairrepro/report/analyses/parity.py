"""Precision parity: do bf16 runs give the numbers of the fp32 runs they extend (the pairs of
``pairrepro/report/parity.toml``; the pass rule: docs/results.md)?"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pairrepro import paths
from pairrepro.errors import ConfigError, NoEvidenceError
from pairrepro.fileio import read_toml
from pairrepro.planning.recipe_index import RecipeIndex, load_recipe_index
from pairrepro.report.analyses import comparison, evidence
from pairrepro.report.analyses.comparison import Comparison, adjust, compare, holm_text
from pairrepro.report.analyses.ladders import recipe_runs
from pairrepro.report.tables import numbers
from pairrepro.runs import RunInfo, config_differences
from pairrepro.schema import Schema, validate
from pairrepro.stats import ALPHA

PARITY_FILE = paths.packaged("report/parity.toml")
DECIMALS = 3  # the table prints metric values as fractions with this many decimals
PRECISIONS = ("fp32", "bf16")  # a pair's two recipes, as ParityPair names them


class ParityPair(Schema):
    """One model in both precisions: two recipes that differ only in ``train.precision``."""

    model: str
    fp32: str
    bf16: str


class ParityTable(Schema):
    title: str
    metrics: list[str]  # "<split>.<metric>"
    pairs: list[ParityPair]


@dataclass
class ParityValue:
    """One metric of one pair: both precisions' seeds and what their comparison says."""

    metric: str
    seeds: list[int] = field(default_factory=list)  # seeds both precisions have
    fp32: list[float] = field(default_factory=list)  # per seed, in seed order
    bf16: list[float] = field(default_factory=list)
    fp32_text: str = ""  # "0.753 [0.689, 0.812]"
    bf16_text: str = ""
    # bf16 against fp32, per-unit means over seeds (fractions), Holm over the table
    comparison: Comparison = field(default_factory=Comparison)
    spread: float | None = None  # largest minus smallest fp32 seed
    equivalent: str = ""  # within ±spread: "shown", "not shown" or "undecided"
    verdict: str = ""
    missing: str = ""  # why there is no comparison (runs to make, no evidence)


@dataclass
class ParityResult:
    model: str
    fp32: str
    bf16: str
    values: list[ParityValue]


def load_parity() -> ParityTable:
    """The parity pairs; each bf16 recipe must be its fp32 recipe but for the precision."""
    return validate(ParityTable, read_toml(PARITY_FILE), str(PARITY_FILE))


def _check_pair(pair: ParityPair, index: RecipeIndex, source: str) -> None:
    for precision in PRECISIONS:
        recipe = index.recipes.get(getattr(pair, precision))
        if recipe is None:
            raise ConfigError(f"{source}: [[pairs]] {precision} = {getattr(pair, precision)!r}:"
                              " no such recipe", hint="name a file of recipes/ without .toml")
        if precision == "bf16" and recipe.train.precision != "bf16":
            raise ConfigError(f"{source}: [[pairs]] bf16 = {pair.bf16!r} trains in "
                              f"{recipe.train.precision}", hint="set train.precision = \"bf16\" "
                              "in that recipe")
    others = config_differences(index.recipes[pair.bf16].to_dict(),
                                index.recipes[pair.fp32].to_dict())
    if others:
        raise ConfigError(f"{source}: {pair.bf16} differs from {pair.fp32} in "
                          f"{', '.join(others)}, not only in train.precision",
                          hint="a parity pair may differ in nothing but the precision")


def _precision_runs(index: RecipeIndex, results: Path, recipe: str, precision: str
                    ) -> list[RunInfo]:
    return [run for run in recipe_runs(index, results, recipe)
            if str(run.manifest.get("precision") or "fp32") == precision]


def _verdict(value: ParityValue) -> str:
    found = value.comparison
    if found.p_value is None or found.difference is None or value.spread is None:
        return "n/a"
    if found.undecided or value.equivalent == "undecided":
        return "undecided"
    return ("differs" if found.p_value < ALPHA else
            "same" if value.equivalent == "shown" else "not shown the same")


def _compare(metric: str, fp32_runs: list[RunInfo], bf16_runs: list[RunInfo]) -> ParityValue:
    value = ParityValue(metric)
    by_seed = {run.seed: run for run in bf16_runs}
    fp32_runs = [run for run in fp32_runs if run.seed in by_seed]
    bf16_runs = [by_seed[run.seed] for run in fp32_runs]
    if len(fp32_runs) < 2:
        value.missing = "needs the same 2+ seeds in both precisions"
        return value
    value.seeds = [run.seed for run in fp32_runs]
    value.fp32 = [run.value(metric) or 0.0 for run in fp32_runs]
    value.bf16 = [run.value(metric) or 0.0 for run in bf16_runs]
    value.spread = max(value.fp32) - min(value.fp32)
    try:
        units = [evidence.run_units(runs, metric) for runs in (fp32_runs, bf16_runs)]
    except NoEvidenceError as exc:
        value.missing = str(exc)
        return value
    value.comparison = compare(units[1], units[0])
    if value.comparison.problem:
        value.missing = value.comparison.problem
        return value
    value.equivalent = ("not shown" if value.spread <= 0 else
                        comparison.equivalence(units[1], units[0], value.spread).verdict)
    for name, found, per_seed in (("fp32_text", units[0], value.fp32),
                                  ("bf16_text", units[1], value.bf16)):
        interval = evidence.interval(found, step=10.0 ** -DECIMALS)
        setattr(value, name, f"{statistics.fmean(per_seed):.{DECIMALS}f} "
                             + numbers.format_interval(interval, f"{{:.{DECIMALS}f}}".format))
    return value


def evaluate_parity(results: Path, index: RecipeIndex | None = None,
                    table: ParityTable | None = None) -> list[ParityResult]:
    """Every pair of ``parity.toml`` on ``results``, Holm over the table's tests."""
    index = index or load_recipe_index()
    table = table or load_parity()
    found: list[ParityResult] = []
    for pair in table.pairs:
        _check_pair(pair, index, str(PARITY_FILE))
        fp32, bf16 = (_precision_runs(index, results, getattr(pair, p), p) for p in PRECISIONS)
        found.append(ParityResult(pair.model, pair.fp32, pair.bf16,
                                  [_compare(metric, fp32, bf16) for metric in table.metrics]))
    values = [v for result in found for v in result.values]
    adjust([v.comparison for v in values])
    for value in values:
        if value.comparison.holm is not None:
            value.verdict = _verdict(value)
    return found


def parity_markdown(found: list[ParityResult]) -> str:
    head = ["model", "metric", "seeds", "fp32 [95% interval]", "bf16 [95% interval]",
            "bf16 − fp32, seed by seed", "bf16 − fp32", "Holm p", "fp32 seed spread",
            "verdict"]
    rows = []
    for result in found:
        for value in result.values:
            cells = [result.model, value.metric]
            if value.missing:
                cells += [value.missing + f": `pairrepro train recipes/{result.fp32}.toml`, "
                          f"`pairrepro train recipes/{result.bf16}.toml`"] + [""] * 7
            else:
                cells += [", ".join(map(str, value.seeds)), value.fp32_text, value.bf16_text,
                          ", ".join(f"{b - a:+.3f}" for a, b in zip(
                              value.fp32, value.bf16, strict=True)).replace("-", "−"),
                          f"{value.comparison.difference or 0.0:+.3f}".replace("-", "−")
                          + f" ({numbers.p_text(value.comparison.p_value or 1.0)})",
                          holm_text(value.comparison),
                          f"{value.spread:.3f}", value.verdict]
            rows.append(cells)
    lines = numbers.markdown_table(head, rows)
    tests = sum(v.comparison.holm is not None for r in found for v in r.values)
    lines += ["", "Each bf16 recipe is its fp32 recipe with `train.precision = \"bf16\"` "
              "(autocast of the training forward pass; loss, optimiser, dev selection and every "
              "test score in fp32). Each cell is the mean over the seeds both precisions have, "
              "with a 95% bootstrap interval over test queries and seeds; *bf16 − fp32* is the "
              f"difference of the per-query means and {comparison.test_words('test queries')};"
              f" Holm p: adjusted over the table's {tests} tests. Verdict *differs*: p < "
              f"{ALPHA:g}; *same*: equivalent within ± the fp32 seed spread (largest minus "
              "smallest seed, what changing the seed alone moves), by two one-sided tests at "
              f"{ALPHA:g} (the 90% interval of bf16 − fp32 from the same bootstrap inside ± "
              "that spread); *not shown the same*: neither; *undecided*: p, or an endpoint of "
              "that interval, within Monte-Carlo error of its threshold."
              + (f" {numbers.MOVING_NOTE}." if any(numbers.MOVING in v.fp32_text + v.bf16_text
                                                   for r in found for v in r.values) else "")]
    return "\n".join(lines) + "\n"


def parity_json(found: list[ParityResult]) -> list[dict[str, Any]]:
    return [{**asdict(result), "values": [_value_json(v) for v in result.values]}
            for result in found]


def _value_json(value: ParityValue) -> dict[str, Any]:
    fields = asdict(value)
    found = fields.pop("comparison")
    del found["problem"]  # ``missing`` says it
    return {**fields, **found}
